// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Memory windows, types 1 and 2B, with the semantics of Linux rxe
// (rxe_mw.c): allocation, the BIND_MW checks the requester makes in SQ
// order, invalidation (LOCAL_INV, and the responder's after a
// SEND_WITH_INV), and the responder's remote access through a window.
// docs/virtio-rdma.md §4.7 is the contract. A window's rkey keeps its
// index (above kMwIndexBase) and takes each bind's key byte; the data-path
// calls here change fields of preallocated windows only.
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

constexpr uint32_t kMwAccess =
    kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic;

}  // namespace

Result<RnicMw> SoftRnic::AllocMw(RnicPd pd, uint8_t type) {
  if (limits_.max_mw == 0) return Status::kUnsupported;
  soft::Pd* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  if (type != 1 && type != 2) return Status::kInvalid;
  uint32_t handle = 0;
  soft::Mw* mw = mws_.Create(&handle);
  if (mw == nullptr) return Status::kNoResource;
  mw->pd = p;
  mw->type = type;
  // rxe: a type 1 window starts valid (and unbound), a type 2 one free.
  mw->state = type == 1 ? soft::Mw::State::kValid : soft::Mw::State::kFree;
  mw->rkey = handle;
  ++p->refs;
  return RnicMw{handle, handle};
}

Status SoftRnic::DeallocMw(RnicMw mw) {
  soft::Mw* w = mws_.Get(mw.id);
  if (w == nullptr) return Status::kBadHandle;
  Unbind(w);  // as rxe_mw_cleanup: the MR may be deregistered after
  --w->pd->refs;
  mws_.Destroy(mw.id);
  return Status::kOk;
}

void SoftRnic::Unbind(soft::Mw* mw) {
  if (mw->mr != nullptr) --mw->mr->num_mw;
  mw->mr = nullptr;
  mw->addr = 0;
  mw->length = 0;
  mw->access = 0;
  mw->bound_qpn = 0;
}

WcStatus SoftRnic::BindMw(const soft::Qp* q, const MwBind& b) {
  constexpr WcStatus kErr = WcStatus::kMwBindErr;
  // The window, by its current rkey (the key byte of the last bind).
  soft::Mw* mw = mws_.GetAnyTag(b.mw_rkey);
  if (mw == nullptr || mw->rkey != b.mw_rkey) return kErr;
  // Remote rights only: no zero-based windows (§4.7; rxe refuses them for
  // type 1 and has no other use for them here).
  if ((b.access & ~kMwAccess) != 0) return kErr;
  if (mw->type == 1) {
    if (mw->state != soft::Mw::State::kValid) return kErr;
  } else {
    // o10-37.2.30, C10-72: a type 2 window binds once, on a QP of its PD.
    if (mw->state != soft::Mw::State::kFree || mw->pd != q->pd) return kErr;
    // o10-37.2.40: a type 2 window is invalidated, not bound to nothing.
    if (b.length == 0) return kErr;
  }
  soft::Mr* mr = nullptr;
  if (b.length > 0) {
    mr = mrs_.Get(b.mr_lkey);
    if (mr == nullptr || mr->lkey != b.mr_lkey) return kErr;
    if ((mr->access & kAccessMwBind) == 0) return kErr;  // C10-73
    // C10-74: a writable window needs a locally writable MR.
    if ((b.access & (kAccessRemoteWrite | kAccessRemoteAtomic)) != 0 &&
        (mr->access & kAccessLocalWrite) == 0) {
      return kErr;
    }
    if (InRange(*mr, b.addr, b.length) == nullptr) return kErr;  // C10-75
  }

  Unbind(mw);
  mw->rkey = (mw->rkey & ~0xffu) | (b.rkey & 0xffu);
  mw->state = soft::Mw::State::kValid;
  mw->access = b.access;
  if (mr != nullptr) {
    mw->mr = mr;
    mw->addr = b.addr;
    mw->length = b.length;
    ++mr->num_mw;
  }
  if (mw->type == 2) mw->bound_qpn = q->qpn;
  return WcStatus::kSuccess;
}

bool SoftRnic::InvalidateMw(uint32_t rkey, const soft::Pd* pd) {
  if (!IsMwKey(rkey)) return false;  // an MR's (Invalidate: a fast-reg MR's)
  soft::Mw* mw = mws_.GetAnyTag(rkey);
  // o10-37.2.26: type 1 windows are never invalidated. Only a bound
  // (valid) type 2 window is (rxe would take a free one too, and fault).
  if (mw == nullptr || mw->rkey != rkey || mw->type != 2 ||
      mw->state != soft::Mw::State::kValid) {
    return false;
  }
  if (pd != nullptr && mw->pd != pd) return false;
  Unbind(mw);
  mw->state = soft::Mw::State::kFree;
  return true;
}

uint8_t* SoftRnic::ResolveWindow(const soft::Qp* resp, uint32_t rkey,
                                 uint64_t addr, uint64_t len,
                                 uint32_t need_access) const {
  const soft::Mw* mw = mws_.GetAnyTag(rkey);
  if (mw == nullptr || mw->rkey != rkey || mw->pd != resp->pd ||
      mw->state != soft::Mw::State::kValid || mw->length == 0 ||
      mw->mr == nullptr || (mw->access & need_access) != need_access ||
      (mw->type == 2 && mw->bound_qpn != resp->qpn)) {
    return nullptr;
  }
  // Inside the window (§4.7), which lies inside its MR.
  if (addr < mw->addr) return nullptr;
  uint64_t off = addr - mw->addr;
  if (off > mw->length || len > mw->length - off) return nullptr;
  return InRange(*mw->mr, addr, len);
}

}  // namespace vrdma
