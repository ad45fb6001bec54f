// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Where the engine runs the RNIC control calls that may be slow: every
// create, modify, resize and destroy (a physical RNIC pins a region's or a
// queue's pages, runs a firmware command, resolves an AH's neighbour).
// Where the RNIC allows it (Rnic::control_beside_data_path) they run on the
// calling control thread, beside the data path, so that one VM's control
// calls delay no VM's data; otherwise on the data-path thread through
// RunSync (a software RNIC's tables belong to that thread, and its calls
// are cheap). The object is published to the data path in a closure after
// its create, and unpublished in one before its destroy (SlowReleases).
// Control thread only, never inside a RunSync closure.
#ifndef VRDMA_BACKEND_ENGINE_RNIC_CALLS_H_
#define VRDMA_BACKEND_ENGINE_RNIC_CALLS_H_

#include <cstddef>
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

// RNIC objects a closure unpublished (the data path no longer reaches
// them), destroyed after it by Release, where the slow calls run, users
// before what they use: QPs, then SRQs and AHs, then memory windows (a
// bound window holds its MR), then MRs (an MR may still be the target of a
// QP's work), then CQs, then PDs. Their guest page views must outlive
// Release.
struct SlowReleases {
  std::vector<RnicQp> qps;
  std::vector<RnicSrq> srqs;
  std::vector<RnicAh> ahs;
  std::vector<RnicMw> mws;
  std::vector<RnicMr> mrs;
  std::vector<RnicCq> cqs;
  std::vector<RnicPd> pds;

  // Room for n of each, so that the closure filling them allocates nothing.
  void Reserve(size_t n_qps, size_t n_srqs, size_t n_ahs, size_t n_mws, size_t n_mrs,
               size_t n_cqs, size_t n_pds) {
    qps.reserve(n_qps);
    srqs.reserve(n_srqs);
    ahs.reserve(n_ahs);
    mws.reserve(n_mws);
    mrs.reserve(n_mrs);
    cqs.reserve(n_cqs);
    pds.reserve(n_pds);
  }
  bool empty() const {
    return qps.empty() && srqs.empty() && ahs.empty() && mws.empty() && mrs.empty() &&
           cqs.empty() && pds.empty();
  }
  void Release(Rnic& rnic, Executor& executor) {
    if (empty()) return;
    RunRnicControl(rnic, executor, [&] {
      for (const RnicQp& qp : qps) (void)rnic.DestroyQp(qp);
      for (const RnicSrq& srq : srqs) (void)rnic.DestroySrq(srq);
      for (const RnicAh& ah : ahs) (void)rnic.DestroyAh(ah);
      for (const RnicMw& mw : mws) (void)rnic.DeallocMw(mw);
      for (const RnicMr& mr : mrs) (void)rnic.DeregMr(mr);
      for (const RnicCq& cq : cqs) (void)rnic.DestroyCq(cq);
      for (const RnicPd& pd : pds) (void)rnic.DeallocPd(pd);
    });
    qps.clear();
    srqs.clear();
    ahs.clear();
    mws.clear();
    mrs.clear();
    cqs.clear();
    pds.clear();
  }
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RNIC_CALLS_H_
