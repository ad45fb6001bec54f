// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Memory regions: registration, and the lkey/rkey checks every byte the
// fabric moves goes through (key tag, PD, access right, range inside the
// MR in iova terms, overflow-checked). Copies happen only on resolved lists.
//
// Fast-registration MRs (docs/virtio-rdma.md §4.8, rxe_mr.c's
// rxe_reg_fast_mr and rxe_invalidate_mr): allocated invalid on the control
// path with room for their page list; a kRegMr (in SQ order) copies the
// page list and makes one valid, an invalidation (LOCAL_INV, a received
// SEND_WITH_INV) invalid again. Access through one goes through the same
// ResolveLocal / ResolveRemote as any key: valid, key byte, PD, rights,
// range, and every 4 KiB page it reaches resolved through the MR table
// (FrPageHost) when the access runs; the copies then go page by page.
#include <algorithm>
#include <cstring>

#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

constexpr uint32_t kKnownAccess = kAccessLocalWrite | kAccessRemoteWrite |
                                  kAccessRemoteRead | kAccessRemoteAtomic |
                                  kAccessMwBind;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPageMask = kPage - 1;
// The rights a fast registration may grant (no windows on it).
constexpr uint32_t kFrAccess = kAccessLocalWrite | kAccessRemoteWrite |
                               kAccessRemoteRead | kAccessRemoteAtomic;

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

Result<RnicMr> SoftRnic::AllocFrMr(RnicPd pd, uint32_t max_pages) {
  if (limits_.max_fr_mr == 0) return Status::kUnsupported;
  soft::Pd* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  if (max_pages == 0 || max_pages > limits_.max_fr_pages) {
    return Status::kInvalid;
  }
  uint32_t handle = 0;
  soft::FrMr* fr = frs_.Create(&handle);
  if (fr == nullptr) return Status::kNoResource;
  fr->pd = p;
  fr->key = handle;
  fr->pages.resize(max_pages);  // the control path's allocation
  ++p->refs;
  return RnicMr{handle, handle, handle};
}

Status SoftRnic::DeregMr(RnicMr mr) {
  if (IsFrKey(mr.id)) {
    // Valid or not (rxe invalidates it first); its backing MRs are not
    // its to hold.
    soft::FrMr* fr = frs_.Get(mr.id);
    if (fr == nullptr) return Status::kBadHandle;
    --fr->pd->refs;
    frs_.Destroy(mr.id);
    return Status::kOk;
  }
  soft::Mr* m = mrs_.Get(mr.id);
  if (m == nullptr) return Status::kBadHandle;
  // IBA 10.6.7.2.6 (rxe: EINVAL): not while windows are bound to it.
  if (m->num_mw != 0) return Status::kInvalid;
  // Outstanding WRs that name this MR fail their key check when they run;
  // so do accesses to fast-registration MRs over its pages.
  --m->pd->refs;
  mrs_.Destroy(mr.id);
  return Status::kOk;
}

WcStatus SoftRnic::RegFrMr(const soft::Qp* q, const FrReg& r) {
  // rxe_reg_fast_mr: the MR by its current lkey, of the QP's PD, invalid.
  soft::FrMr* fr = IsFrKey(r.mr_lkey) ? frs_.GetAnyTag(r.mr_lkey) : nullptr;
  if (fr == nullptr || fr->key != r.mr_lkey || fr->pd != q->pd || fr->valid) {
    return WcStatus::kLocQpOpErr;
  }
  // Local write and remote rights only; remote write or atomic with local
  // write (as RegMr).
  if ((r.access & ~kFrAccess) != 0 ||
      ((r.access & (kAccessRemoteWrite | kAccessRemoteAtomic)) != 0 &&
       (r.access & kAccessLocalWrite) == 0)) {
    return WcStatus::kLocQpOpErr;
  }
  // The page list covers exactly the range, within the MR's room.
  const uint64_t room = fr->pages.size();
  if (r.length > room * kPage ||
      ((r.iova & kPageMask) + r.length + kPageMask) / kPage != r.num_pages ||
      r.num_pages > room) {
    return WcStatus::kLocLenErr;
  }
  if (r.num_pages > 0 && r.pages == nullptr) return WcStatus::kLocQpOpErr;
  // Our own copy: the engine may rewrite its array for the next kRegMr
  // while this registration still serves accesses.
  std::copy_n(r.pages, r.num_pages, fr->pages.begin());
  fr->num_pages = r.num_pages;
  fr->iova = r.iova;
  fr->length = r.length;
  fr->access = r.access;
  fr->key = (fr->key & ~0xffu) | r.key;  // ib_update_fast_reg_key
  fr->valid = true;
  return WcStatus::kSuccess;
}

bool SoftRnic::InvalidateFr(uint32_t rkey, const soft::Pd* pd) {
  // rxe_invalidate_mr: the current key of an MR, valid or not (an MR a
  // peer's SEND_WITH_INV already invalidated may be invalidated again, as
  // ULPs that always post LOCAL_INV do). The PD check is not rxe's: here
  // it keeps one VM's SEND_WITH_INV off another's MRs on a shared RNIC.
  soft::FrMr* fr = frs_.GetAnyTag(rkey);
  if (fr == nullptr || fr->key != rkey || fr->pd != pd) {
    return false;
  }
  fr->valid = false;
  return true;
}

bool SoftRnic::Invalidate(uint32_t rkey, const soft::Pd* pd, bool local) {
  if (IsFrKey(rkey)) return InvalidateFr(rkey, pd);
  return InvalidateMw(rkey, local ? nullptr : pd);
}

WcStatus SoftRnic::ExecuteLocalOp(const soft::Qp* q, const SendWr& wr) {
  switch (wr.opcode) {
    case WrOpcode::kBindMw:
      return BindMw(q, wr.bind);
    case WrOpcode::kRegMr:
      return RegFrMr(q, wr.reg);
    default:  // kLocalInv
      return Invalidate(wr.invalidate_rkey, q->pd, true)
                 ? WcStatus::kSuccess
                 : WcStatus::kLocQpOpErr;
  }
}

uint8_t* SoftRnic::FrPageHost(const soft::FrMr& fr, uint64_t i) const {
  if (i >= fr.num_pages) return nullptr;
  const FrPage& page = fr.pages[i];
  const soft::Mr* mr = mrs_.Get(page.lkey);
  if (mr == nullptr || mr->lkey != page.lkey || mr->pd != fr.pd) {
    return nullptr;
  }
  return InRange(*mr, page.addr, kPage);
}

bool SoftRnic::ResolveFr(const soft::Pd* pd, uint32_t key, uint64_t addr,
                         uint64_t len, uint32_t need_access, Seg* out) const {
  const soft::FrMr* fr = frs_.GetAnyTag(key);
  if (fr == nullptr || fr->key != key || !fr->valid || fr->pd != pd ||
      (fr->access & need_access) != need_access || addr < fr->iova) {
    return false;
  }
  const uint64_t off = addr - fr->iova;
  if (off > fr->length || len > fr->length - off) return false;
  if (len == 0) {
    *out = Seg{};
    return true;
  }
  // Every page the range reaches must resolve before any byte moves.
  const uint64_t base = fr->iova & ~kPageMask;
  const uint64_t first = (addr - base) / kPage;
  const uint64_t last = (addr + len - 1 - base) / kPage;
  uint8_t* host = nullptr;
  for (uint64_t i = first; i <= last; ++i) {
    uint8_t* p = FrPageHost(*fr, i);
    if (p == nullptr) return false;
    if (i == first) host = p;
  }
  if (first == last) {
    *out = Seg{host + ((addr - base) & kPageMask), len};
  } else {
    *out = Seg{nullptr, len, fr, addr};
  }
  return true;
}

WcStatus SoftRnic::ResolveLocal(const soft::Pd* pd, const Sge* sges, int n,
                                uint32_t need_access, SegList* out) const {
  out->n = 0;
  out->total = 0;
  for (int i = 0; i < n; ++i) {
    const Sge& s = sges[i];
    if (s.length == 0) continue;  // moves nothing, names nothing
    Seg& seg = out->segs[out->n];
    const soft::Mr* mr = mrs_.Get(s.lkey);
    if (mr != nullptr && mr->lkey == s.lkey && mr->pd == pd &&
        (mr->access & need_access) == need_access) {
      uint8_t* p = InRange(*mr, s.addr, s.length);
      if (p == nullptr) return WcStatus::kLocProtErr;
      seg = Seg{p, s.length};
    } else if (!IsFrKey(s.lkey) ||
               !ResolveFr(pd, s.lkey, s.addr, s.length, need_access, &seg)) {
      return WcStatus::kLocProtErr;
    }
    ++out->n;
    out->total += s.length;
  }
  return WcStatus::kSuccess;
}

bool SoftRnic::ResolveRemote(const soft::Qp* resp, uint32_t rkey,
                             uint64_t addr, uint64_t len,
                             uint32_t need_access, Seg* out) const {
  if (rkey == 0) return false;
  if (IsFrKey(rkey)) {
    return ResolveFr(resp->pd, rkey, addr, len, need_access, out);
  }
  uint8_t* p = nullptr;
  if (IsMwKey(rkey)) {
    p = ResolveWindow(resp, rkey, addr, len, need_access);
  } else {
    const soft::Mr* mr = mrs_.Get(rkey);
    if (mr == nullptr || mr->rkey != rkey || mr->pd != resp->pd ||
        (mr->access & need_access) != need_access) {
      return false;
    }
    p = InRange(*mr, addr, len);
  }
  if (p == nullptr) return false;
  *out = Seg{p, len};
  return true;
}

template <typename F>
void SoftRnic::ForPieces(const Seg& s, uint64_t off, uint64_t len,
                         F&& f) const {
  if (s.fr == nullptr) {
    f(s.ptr + off, len);
    return;
  }
  const uint64_t base = s.fr->iova & ~kPageMask;
  uint64_t rel = s.addr + off - base;
  while (len > 0) {
    const uint64_t in = rel & kPageMask;
    const uint64_t n = std::min(len, kPage - in);
    uint8_t* page = FrPageHost(*s.fr, rel / kPage);
    f(page != nullptr ? page + in : nullptr, n);
    rel += n;
    len -= n;
  }
}

void SoftRnic::Write(std::span<const Seg> dst, uint64_t offset,
                     const uint8_t* src, uint64_t len) const {
  for (const Seg& s : dst) {
    if (len == 0) break;
    if (offset >= s.len) {
      offset -= s.len;
      continue;
    }
    const uint64_t n = std::min(s.len - offset, len);
    ForPieces(s, offset, n, [&src](uint8_t* p, uint64_t k) {
      // memmove: a loopback QP may copy within one buffer.
      if (p != nullptr) std::memmove(p, src, k);
      src += k;
    });
    len -= n;
    offset = 0;
  }
}

void SoftRnic::Read(std::span<const Seg> src, uint64_t offset, uint8_t* dst,
                    uint64_t len) const {
  for (const Seg& s : src) {
    if (len == 0) break;
    if (offset >= s.len) {
      offset -= s.len;
      continue;
    }
    const uint64_t n = std::min(s.len - offset, len);
    ForPieces(s, offset, n, [&dst](uint8_t* p, uint64_t k) {
      if (p != nullptr) std::memmove(dst, p, k);
      dst += k;
    });
    len -= n;
    offset = 0;
  }
}

void SoftRnic::Copy(std::span<const Seg> dst, uint64_t dst_offset,
                    std::span<const Seg> src, uint64_t len) const {
  for (const Seg& s : src) {
    if (len == 0) break;
    const uint64_t n = std::min(s.len, len);
    ForPieces(s, 0, n, [&](uint8_t* p, uint64_t k) {
      if (p != nullptr) Write(dst, dst_offset, p, k);
      dst_offset += k;
    });
    len -= n;
  }
}

}  // namespace vrdma
