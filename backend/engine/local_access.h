// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The local-access rule of a WR's scatter/gather list, for sends and
// receives alike (IB spec 10.6.3: a local key names an MR of the QP's PD,
// the range lies inside it, and writing into it needs LOCAL_WRITE).
#ifndef VRDMA_BACKEND_ENGINE_LOCAL_ACCESS_H_
#define VRDMA_BACKEND_ENGINE_LOCAL_ACCESS_H_

#include <cstdint>
#include <optional>

#include "backend/engine/mw_access.h"
#include "backend/engine/objects.h"
#include "backend/engine/ram_mrs.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

// Checks sges[0..*num_sge) against vm's MRs; zero-length entries name no
// memory and are dropped (never passed on unchecked), *num_sge shrinks to
// what is kept. kLocProtErr on any bad entry.
//
// ram: the PD's RAM MRs when the WR is a kernel QP's
// (docs/virtio-rdma.md §4.8), else null. Then an SGE with the local DMA
// lkey names guest-physical memory: it must lie inside one region, and its
// lkey becomes that region's RAM MR's (local write, so any direction). On
// any other QP the local DMA lkey is looked up like any lkey.
//
// A fast-registration MR's lkey (docs/virtio-rdma.md §4.8) is checked here
// only for whose it is and its PD: its range, access and validity change
// with REG_MR and LOCAL_INV WQEs in SQ order, so the RNIC checks them when
// the WR runs, against what the engine let it map (fast_reg.h).
inline WcStatus CheckLocalSges(const VmContext& vm, uint32_t pd, const RamMrs* ram,
                               bool writes_local, Sge* sges, uint8_t* num_sge) {
  int kept = 0;
  for (int i = 0; i < *num_sge; ++i) {
    Sge s = sges[i];
    if (s.length == 0) continue;
    if (ram != nullptr && s.lkey == VIRTIO_RDMA_LOCAL_DMA_LKEY) {
      std::optional<uint32_t> lkey = FindRamLkey(*ram, s.addr, s.length);
      if (!lkey) return WcStatus::kLocProtErr;
      s.lkey = *lkey;
      sges[kept++] = s;
      continue;
    }
    std::optional<uint32_t> h = vm.lkey_to_mr.Find(s.lkey);
    if (!h && vm.fr_index_to_mr.size() != 0) {
      const MrObj* fr = FindFrMr(vm, s.lkey);
      if (fr == nullptr || fr->pd != pd) return WcStatus::kLocProtErr;
      sges[kept++] = s;
      continue;
    }
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

// The RAM MRs a QP's SGEs may use: its PD's, for a kernel QP only (an SRQ's
// receives: none, kernel SRQs are not offered yet).
inline const RamMrs* KernelRam(const VmContext& vm, const QpObj* qp) {
  if (qp == nullptr || !qp->kernel) return nullptr;
  const PdObj* pd = vm.pds.Lookup(qp->pd);
  return pd != nullptr ? &pd->ram : nullptr;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_LOCAL_ACCESS_H_
