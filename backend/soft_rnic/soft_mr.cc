// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Memory regions: registration, and the lkey/rkey checks every byte the
// fabric moves goes through (key tag, PD, access right, range inside the
// MR in iova terms, overflow-checked). Copies happen only on resolved lists.
#include <cstring>

#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

constexpr uint32_t kKnownAccess = kAccessLocalWrite | kAccessRemoteWrite |
                                  kAccessRemoteRead | kAccessRemoteAtomic |
                                  kAccessMwBind;

}  // namespace

uint8_t* SoftRnic::InRange(const soft::Mr& mr, uint64_t addr, uint64_t len) {
  if (addr < mr.iova) return nullptr;
  uint64_t off = addr - mr.iova;
  if (off > mr.length || len > mr.length - off) return nullptr;
  return mr.host + off;
}

Result<RnicMr> SoftRnic::RegMr(RnicPd pd, uint8_t* addr, uint64_t length,
                               uint64_t iova, uint32_t access) {
  soft::Pd* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  if (addr == nullptr || length == 0 || length > limits_.max_mr_size ||
      (access & ~kKnownAccess) != 0 || iova + length < iova) {
    return Status::kInvalid;
  }
  // IB: remote write or atomic access requires local write.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) &&
      !(access & kAccessLocalWrite)) {
    return Status::kInvalid;
  }
  uint32_t key = 0;
  soft::Mr* mr = mrs_.Create(&key);
  if (mr == nullptr) return Status::kNoResource;
  mr->pd = p;
  mr->host = addr;
  mr->iova = iova;
  mr->length = length;
  mr->access = access;
  mr->lkey = key;
  constexpr uint32_t kRemote =
      kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  mr->rkey = (access & kRemote) ? key : 0;
  ++p->refs;
  return RnicMr{key, mr->lkey, mr->rkey};
}

Status SoftRnic::DeregMr(RnicMr mr) {
  soft::Mr* m = mrs_.Get(mr.id);
  if (m == nullptr) return Status::kBadHandle;
  // IBA 10.6.7.2.6 (rxe: EINVAL): not while windows are bound to it.
  if (m->num_mw != 0) return Status::kInvalid;
  // Outstanding WRs that name this MR fail their key check when they run.
  --m->pd->refs;
  mrs_.Destroy(mr.id);
  return Status::kOk;
}

WcStatus SoftRnic::ResolveLocal(const soft::Pd* pd, const Sge* sges, int n,
                                uint32_t need_access, SegList* out) const {
  out->n = 0;
  out->total = 0;
  for (int i = 0; i < n; ++i) {
    const Sge& s = sges[i];
    if (s.length == 0) continue;  // moves nothing, names nothing
    const soft::Mr* mr = mrs_.Get(s.lkey);
    if (mr == nullptr || mr->lkey != s.lkey || mr->pd != pd ||
        (mr->access & need_access) != need_access) {
      return WcStatus::kLocProtErr;
    }
    uint8_t* p = InRange(*mr, s.addr, s.length);
    if (p == nullptr) return WcStatus::kLocProtErr;
    out->segs[out->n++] = Seg{p, s.length};
    out->total += s.length;
  }
  return WcStatus::kSuccess;
}

uint8_t* SoftRnic::ResolveRemote(const soft::Qp* resp, uint32_t rkey,
                                 uint64_t addr, uint64_t len,
                                 uint32_t need_access) const {
  if (rkey == 0) return nullptr;
  if (IsMwKey(rkey)) return ResolveWindow(resp, rkey, addr, len, need_access);
  const soft::Mr* mr = mrs_.Get(rkey);
  if (mr == nullptr || mr->rkey != rkey || mr->pd != resp->pd ||
      (mr->access & need_access) != need_access) {
    return nullptr;
  }
  return InRange(*mr, addr, len);
}

void SoftRnic::CopyInto(const SegList& dst, uint64_t dst_offset,
                        const uint8_t* src, uint64_t len) {
  for (int i = 0; i < dst.n && len > 0; ++i) {
    const Seg& s = dst.segs[i];
    if (dst_offset >= s.len) {
      dst_offset -= s.len;
      continue;
    }
    uint64_t n = s.len - dst_offset;
    if (n > len) n = len;
    // memmove: a loopback QP may copy within one buffer.
    std::memmove(s.ptr + dst_offset, src, n);
    src += n;
    len -= n;
    dst_offset = 0;
  }
}

void SoftRnic::CopyOutAt(const SegList& src, uint64_t offset, uint8_t* dst,
                         uint64_t len) {
  for (int i = 0; i < src.n && len > 0; ++i) {
    const Seg& s = src.segs[i];
    if (offset >= s.len) {
      offset -= s.len;
      continue;
    }
    uint64_t n = s.len - offset;
    if (n > len) n = len;
    std::memmove(dst, s.ptr + offset, n);
    dst += n;
    len -= n;
    offset = 0;
  }
}

void SoftRnic::CopyOut(const SegList& src, uint8_t* dst, uint64_t len) {
  for (int i = 0; i < src.n && len > 0; ++i) {
    uint64_t n = src.segs[i].len;
    if (n > len) n = len;
    std::memmove(dst, src.segs[i].ptr, n);
    dst += n;
    len -= n;
  }
}

}  // namespace vrdma
