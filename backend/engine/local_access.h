// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The local-access rule of a WR's scatter/gather list, for sends and
// receives alike (IB spec 10.6.3: a local key names an MR of the QP's PD,
// the range lies inside it, and writing into it needs LOCAL_WRITE).
#ifndef VRDMA_BACKEND_ENGINE_LOCAL_ACCESS_H_
#define VRDMA_BACKEND_ENGINE_LOCAL_ACCESS_H_

#include <cstdint>
#include <optional>

#include "backend/engine/objects.h"

namespace vrdma::engine {

// Checks sges[0..*num_sge) against vm's MRs; zero-length entries name no
// memory and are dropped (never passed on unchecked), *num_sge shrinks to
// what is kept. kLocProtErr on any bad entry.
inline WcStatus CheckLocalSges(const VmContext& vm, uint32_t pd, bool writes_local, Sge* sges,
                               uint8_t* num_sge) {
  int kept = 0;
  for (int i = 0; i < *num_sge; ++i) {
    const Sge s = sges[i];
    if (s.length == 0) continue;
    std::optional<uint32_t> h = vm.lkey_to_mr.Find(s.lkey);
    const MrObj* mr = h ? vm.mrs.Lookup(*h) : nullptr;
    if (mr == nullptr || mr->pd != pd) return WcStatus::kLocProtErr;
    if (writes_local && !(mr->access & kAccessLocalWrite)) return WcStatus::kLocProtErr;
    uint64_t end = 0;
    if (__builtin_add_overflow(s.addr, uint64_t{s.length}, &end) || s.addr < mr->iova ||
        end > mr->iova + mr->length) {
      return WcStatus::kLocProtErr;
    }
    sges[kept++] = s;
  }
  *num_sge = static_cast<uint8_t>(kept);
  return WcStatus::kSuccess;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_LOCAL_ACCESS_H_
