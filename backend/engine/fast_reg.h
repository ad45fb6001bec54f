// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's rule for a REG_MR WQE (docs/virtio-rdma.md §4.8): whose MR it
// registers, and the pages it maps. The RNIC does not know VMs apart and
// cannot read guest memory, so the engine copies the page addresses from
// the MR's guest page list into the MR's own array, once per WQE, checking
// that each is a 4 KiB page of the posting VM's RAM, and names each as an
// iova in the QP's PD's RAM MR holding it (FrPage). Everything that depends
// on the MR's state (valid or not, its key byte, the access bits and the
// range rules) is the RNIC's, checked where the registration runs in SQ
// order (rnic.h, FrReg).
//
// The array is the MR's: a later REG_MR of the same MR, decoded before the
// RNIC ran an earlier one, rewrites it (IB requires an invalidation
// between two registrations; a guest that breaks that rule maps its MR
// onto other pages of its own RAM, never anything else).
#ifndef VRDMA_BACKEND_ENGINE_FAST_REG_H_
#define VRDMA_BACKEND_ENGINE_FAST_REG_H_

#include <cstdint>
#include <optional>

#include "backend/base/byte_order.h"
#include "backend/engine/local_access.h"
#include "backend/engine/mw_access.h"
#include "backend/engine/objects.h"

namespace vrdma::engine {

inline constexpr uint64_t kFrPageSize = 4096;

// Pages a registration of [iova, iova + length) covers; false on overflow.
inline bool FrPageCount(uint64_t iova, uint64_t length, uint64_t* pages) {
  uint64_t end = 0;
  if (__builtin_add_overflow(iova % kFrPageSize, length, &end) ||
      __builtin_add_overflow(end, kFrPageSize - 1, &end)) {
    return false;
  }
  *pages = end / kFrPageSize;
  return true;
}

// REG_MR on qp (a kernel QP, SendQueueLimits::fast_reg): fills reg's pages,
// num_pages and mr_id. kLocQpOpErr when mr_lkey names no fast-registration
// MR of the VM in the QP's PD; kLocLenErr beyond the MR's max_pages;
// kLocProtErr when the page list or a page is not the VM's RAM or a page
// is not 4 KiB aligned. Data path: reads guest memory once, allocates
// nothing.
inline WcStatus CheckFastReg(VmContext& vm, const QpObj& qp, FrReg* reg) {
  std::optional<uint32_t> h = vm.fr_index_to_mr.Find(FrIndex(reg->mr_lkey));
  MrObj* mr = h ? vm.mrs.Lookup(*h) : nullptr;
  if (mr == nullptr || mr->pd != qp.pd) return WcStatus::kLocQpOpErr;
  uint64_t n = 0;
  if (!FrPageCount(reg->iova, reg->length, &n) || n > mr->fr_max_pages) {
    return WcStatus::kLocLenErr;
  }
  const RamMrs* ram = KernelRam(vm, &qp);
  if (ram == nullptr || vm.datapath_memory == nullptr) return WcStatus::kLocProtErr;
  if (n > 0) {
    Result<uint8_t*> list = vm.datapath_memory->Translate(mr->fr_page_list, n * sizeof(uint64_t));
    if (!list.ok()) return WcStatus::kLocProtErr;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t gpa = LoadLe64(*list + i * sizeof(uint64_t));  // read once
      if (gpa % kFrPageSize != 0) return WcStatus::kLocProtErr;
      const std::optional<uint32_t> lkey = FindRamLkey(*ram, gpa, kFrPageSize);
      if (!lkey) return WcStatus::kLocProtErr;
      mr->fr_pages[i] = FrPage{*lkey, gpa};
    }
  }
  reg->pages = mr->fr_pages.get();
  reg->num_pages = static_cast<uint32_t>(n);
  reg->mr_id = mr->rnic.id;
  return WcStatus::kSuccess;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_FAST_REG_H_
