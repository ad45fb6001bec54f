// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's rule for the memory-window WQEs (docs/virtio-rdma.md §4.7):
// whose window and whose MR a BIND_MW or LOCAL_INV names. LOCAL_INV also
// takes a fast-registration MR's key (§4.8), found the same way: by the
// key without the byte the guest's REG_MR or BIND_MW changes. The RNIC does not
// know VMs apart, so this is checked before the WR is posted: a window or
// an MR of another VM is never found. Everything that depends on a
// window's state (valid, free, bound to which QP, its current key byte)
// and IB's bind rules (access bits, MW_BIND on the MR, the range, LOCAL_WRITE
// for writable windows, PDs) are the RNIC's, checked where the bind runs in
// SQ order (rnic.h, MwBind): one place for each rule.
#ifndef VRDMA_BACKEND_ENGINE_MW_ACCESS_H_
#define VRDMA_BACKEND_ENGINE_MW_ACCESS_H_

#include <cstdint>
#include <optional>

#include "backend/engine/objects.h"

namespace vrdma::engine {

// A window's rkey, or a fast-registration MR's key, without the key byte a
// bind or registration changes: the part that names it (rnic.h).
inline uint32_t MwIndex(uint32_t rkey) { return rkey >> 8; }
inline uint32_t FrIndex(uint32_t key) { return key >> 8; }

inline const MwObj* FindMw(const VmContext& vm, uint32_t rkey) {
  std::optional<uint32_t> h = vm.mw_index_to_mw.Find(MwIndex(rkey));
  return h ? vm.mws.Lookup(*h) : nullptr;
}

// The VM's fast-registration MR whose current key may be key (the RNIC
// checks the key byte when the WR runs).
inline MrObj* FindFrMr(const VmContext& vm, uint32_t key) {
  std::optional<uint32_t> h = vm.fr_index_to_mr.Find(FrIndex(key));
  return h ? vm.mrs.Lookup(*h) : nullptr;
}

// BIND_MW: mw_rkey names a window of the VM and, unless the bind unbinds
// (length 0), mr_lkey an MR of the VM; fills in the RNIC's ids of both.
// kMwBindErr otherwise, as the RNIC fails a bad bind.
inline WcStatus CheckMwBind(const VmContext& vm, MwBind* b) {
  const MwObj* mw = FindMw(vm, b->mw_rkey);
  if (mw == nullptr) return WcStatus::kMwBindErr;
  b->mw_id = mw->rnic.id;
  b->mr_id = 0;
  if (b->length == 0) return WcStatus::kSuccess;
  std::optional<uint32_t> h = vm.lkey_to_mr.Find(b->mr_lkey);
  const MrObj* mr = h ? vm.mrs.Lookup(*h) : nullptr;
  if (mr == nullptr) return WcStatus::kMwBindErr;
  b->mr_id = mr->rnic.id;
  return WcStatus::kSuccess;
}

// LOCAL_INV: invalidate_rkey names a window of the VM or, on a QP that may
// register (SendQueueLimits::fast_reg), one of its fast-registration MRs;
// kLocQpOpErr otherwise, as the RNIC fails it.
inline WcStatus CheckLocalInvalidate(const VmContext& vm, bool fast_reg, uint32_t rkey) {
  if (FindMw(vm, rkey) != nullptr) return WcStatus::kSuccess;
  if (fast_reg && FindFrMr(vm, rkey) != nullptr) return WcStatus::kSuccess;
  return WcStatus::kLocQpOpErr;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_MW_ACCESS_H_
