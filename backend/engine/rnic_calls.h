// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Where the engine runs the RNIC control calls that may be slow: RegMr,
// DeregMr, CreateQp, DestroyQp (a physical RNIC pins a region's pages,
// runs a firmware command). Where the RNIC allows it
// (Rnic::control_beside_data_path) they run on the calling control thread,
// beside the data path, so that one VM's registration of a large MR delays
// no VM's data; otherwise on the data-path thread through RunSync (a
// software RNIC's tables belong to that thread, and its calls are cheap).
// The object is published to the data path in a closure after its create,
// and unpublished in one before its destroy (SlowReleases). Control thread
// only, never inside a RunSync closure.
#ifndef VRDMA_BACKEND_ENGINE_RNIC_CALLS_H_
#define VRDMA_BACKEND_ENGINE_RNIC_CALLS_H_

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/base/executor.h"
#include "backend/rnic/rnic.h"

namespace vrdma::engine {

// Returns f(), run where the RNIC's slow control calls run.
template <typename F>
auto RunRnicControl(Rnic& rnic, Executor& executor, F&& f) {
  using R = decltype(f());
  if (rnic.control_beside_data_path()) return f();
  if constexpr (std::is_void_v<R>) {
    executor.RunSync([&] { f(); });
  } else {
    std::optional<R> out;
    executor.RunSync([&] { out.emplace(f()); });
    return std::move(*out);
  }
}

// RNIC QPs and MRs a closure unpublished (the data path no longer reaches
// them), destroyed after it by Release, where the slow calls run: QPs
// first, then MRs (an MR may still be the target of a QP's work). Their
// guest page views must outlive Release.
struct SlowReleases {
  std::vector<RnicQp> qps;
  std::vector<RnicMr> mrs;

  void Release(Rnic& rnic, Executor& executor) {
    if (qps.empty() && mrs.empty()) return;
    RunRnicControl(rnic, executor, [&] {
      for (const RnicQp& qp : qps) (void)rnic.DestroyQp(qp);
      for (const RnicMr& mr : mrs) (void)rnic.DeregMr(mr);
    });
    qps.clear();
    mrs.clear();
  }
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RNIC_CALLS_H_
