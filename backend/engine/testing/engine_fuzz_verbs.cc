// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine fuzzer's control verbs (engine_fuzz_driver.h): well-formed and
// hostile requests; what the engine accepts enters the model, and an Ok
// that should not be (a page outside the VM's memory, an object of another
// VM) is a violation.
#include <algorithm>
#include <cstdio>

#include "backend/engine/testing/engine_fuzz_state.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine::fuzz {

// ---------------------------------------------------------------- PD, MR

void Driver::CreatePd(int v) {
  VmModel& vm = vm_[v];
  Result<uint32_t> r = engine_->CreatePd(vm.id);
  if (!OwnCreate(vm, r.status(), "CreatePd")) return;
  vm.pds.push_back({*r, false});
}

// Destroy verbs: Ok only for an own live object, which is then gone; an own
// live object is never "not found".
#define VRDMA_FUZZ_DESTROY(list, key, call, what)                      \
  do {                                                                 \
    VmModel& vm = vm_[v];                                              \
    const uint32_t h = PickHandle(                                     \
        v, &VmModel::list, [](const auto& x) { return x.key; }, in);   \
    auto it = std::find_if(vm.list.begin(), vm.list.end(),             \
                           [&](const auto& x) { return x.key == h; }); \
    const Status s = call;                                             \
    if (s == Status::kOk) {                                            \
      if (it == vm.list.end())                                         \
        Fail(what " of %#x: not an object of VM %d, yet Ok", h, v);    \
      it->dead = true;                                                 \
      ++stats_.verbs_ok;                                               \
    } else if (it != vm.list.end() && s == Status::kBadHandle) {       \
      Fail(what " of VM %d's live %#x: kBadHandle", v, h);             \
    }                                                                  \
  } while (0)

void Driver::DestroyPd(int v, ByteReader& in) {
  VRDMA_FUZZ_DESTROY(pds, handle, engine_->DestroyPd(vm.id, h), "DestroyPd");
}

void Driver::RegMr(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t mode = in.U8();
  const uint8_t npages = 1 + in.U8() % 8;
  RegMrRequest req;
  const uint8_t pd_sel = in.U8();
  req.pd = vm.pds.empty() ? in.U32() : vm.pds[pd_sel % vm.pds.size()].handle;
  const uint8_t acc = in.U8();
  req.access = (acc & 0x80) ? acc & 0x1f : (acc & 0xe) | 1;
  req.iova = (uint64_t{in.U8()} << 32) | (uint64_t{in.U8()} << 12);
  if (mode & 0x80) req.iova = in.U64();
  req.first_page_offset = (mode & 0x40) ? in.U16() : in.U8() * 8;
  const uint64_t span = uint64_t{npages} * kPage;
  req.length = span > req.first_page_offset ? span - req.first_page_offset : 1;
  if (mode & 0x20) req.length = (mode & 0x10) ? in.U64() : in.U16();
  req.pages = Pages(vm, (mode & 0x08) ? npages + 300 : npages, mode, in);
  Result<RegMrResult> r = engine_->RegMr(vm.id, req);
  if (!OwnCreate(vm, r.status(), "RegMr")) return;
  MrRec m;
  m.handle = r->handle;
  m.lkey = r->lkey;
  m.rkey = r->rkey;
  m.access = req.access;
  m.pd = req.pd;
  m.fpo = req.first_page_offset;
  m.iova = req.iova;
  m.length = req.length;
  m.fpages = Resolve(vm, req.pages, "RegMr");
  if (!(req.access & 0xe) && r->rkey != 0)
    Fail("RegMr handed out rkey %#x for local access %#x", r->rkey, req.access);
  if (m.fpo >= kPage || req.length == 0 ||
      m.fpo + req.length > m.fpages.size() * kPage) {
    Fail("RegMr accepted offset %u length %llu over %zu pages", m.fpo,
         static_cast<unsigned long long>(req.length), m.fpages.size());
  }
  vm.mrs.push_back(std::move(m));
  NoteAliasing(vm);
}

void Driver::DeregMr(int v, ByteReader& in) {
  VRDMA_FUZZ_DESTROY(mrs, handle, engine_->DeregMr(vm.id, h), "DeregMr");
}

// ---------------------------------------------------------------- rings

std::optional<RingRec> Driver::MakeRing(VmModel& vm, RingKind kind,
                                        uint32_t log2_n, uint32_t log2_e,
                                        uint8_t mode, ByteReader& in,
                                        RingSpec* spec) {
  RingRec r;
  r.kind = kind;
  r.log2_n = log2_n;
  r.log2_e = log2_e;
  spec->log2_num_elem = log2_n;
  spec->log2_elem_size = log2_e;
  size_t n = log2_n <= 16 && log2_e <= 12 ? (r.bytes() + kPage - 1) / kPage : 1;
  if ((mode & 0x30) == 0x30) n = n + (mode & 0x40 ? 1 : -1);
  if (n > 64) n = 64;
  spec->pages = Pages(vm, n, mode, in);
  // librxe zeroes the header (indices) first; a hostile guest may not.
  if (!(mode & 0x08) && !spec->pages.empty()) {
    if (std::optional<uint32_t> fp =
            FuzzGuest::FilePage(spec->pages[0], vm.layout)) {
      static constexpr uint8_t kZero[384] = {};
      vm.guest->WriteExact(uint64_t{*fp} * kPage, kZero, sizeof kZero);
    }
  }
  return r;
}

void Driver::CreateCq(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t mode = in.U8();
  const uint8_t geo = in.U8();
  uint32_t log2_n = 1 + geo % 6, log2_e = 6;
  if (mode & 0x80) {
    log2_n = in.U8() % 20;
    log2_e = in.U8() % 14;
  }
  CreateCqRequest req;
  req.cqe = (geo & 0x80) ? in.U16() : (1u << log2_n) - 1 - (geo >> 6 & 1);
  std::optional<RingRec> ring =
      MakeRing(vm, RingKind::kCq, log2_n, log2_e, mode, in, &req.ring);
  Result<CreateCqResult> r = engine_->CreateCq(vm.id, req);
  if (!OwnCreate(vm, r.status(), "CreateCq")) return;
  if (log2_n > 16 || log2_e < 6)
    Fail("CreateCq accepted geometry %u/%u", log2_n, log2_e);
  CqRec c;
  c.handle = r->handle;
  c.ring = *ring;
  c.ring.fpages = Resolve(vm, req.ring.pages, "CreateCq");
  c.writes = RingWrites(*vm.guest, c.ring);
  if (c.ring.fpages.size() * kPage < c.ring.bytes())
    Fail("CreateCq accepted a ring larger than its pages");
  vm.cqs.push_back(std::move(c));
  NoteAliasing(vm);
}

void Driver::DestroyCq(int v, ByteReader& in) {
  VRDMA_FUZZ_DESTROY(cqs, handle, engine_->DestroyCq(vm.id, h), "DestroyCq");
}

void Driver::CreateQp(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t mode = in.U8();
  const uint8_t t = in.U8();
  CreateQpRequest req;
  req.type =
      (t & 0x80) ? static_cast<QpType>(t & 7) : static_cast<QpType>(2 + t % 3);
  req.pd = vm.pds.empty() ? 0 : vm.pds[in.U8() % vm.pds.size()].handle;
  req.send_cq = PickHandle(
      v, &VmModel::cqs, [](const CqRec& c) { return c.handle; }, in);
  req.recv_cq = PickHandle(
      v, &VmModel::cqs, [](const CqRec& c) { return c.handle; }, in);
  const bool use_srq = (t & 0x40) && !vm.srqs.empty();
  if (use_srq) req.srq = vm.srqs[in.U8() % vm.srqs.size()].handle;
  req.sq_sig_all = t & 0x20;
  const uint8_t geo = in.U8();
  const uint32_t sq_n = 3 + geo % 3, rq_n = 3 + (geo >> 2) % 3;
  req.caps.max_send_wr = (1u << sq_n) - 1;
  req.caps.max_recv_wr = use_srq ? 0 : (1u << rq_n) - 1;
  req.caps.max_send_sge = 1 + (geo >> 4) % 4;
  req.caps.max_recv_sge = use_srq ? 0 : 1 + (geo >> 6) % 4;
  req.caps.max_inline_data = (t & 0x10) ? 128 : 0;
  if (mode & 0x80) {
    req.caps.max_send_wr = in.U16();
    req.caps.max_send_sge = in.U8();
    req.caps.max_inline_data = in.U16();
  }
  std::optional<RingRec> sq =
      MakeRing(vm, RingKind::kSq, sq_n, 9, mode, in, &req.sq);
  std::optional<RingRec> rq;
  if (!use_srq) rq = MakeRing(vm, RingKind::kRq, rq_n, 7, mode, in, &req.rq);
  Result<CreateQpResult> r = engine_->CreateQp(vm.id, req);
  if (!OwnCreate(vm, r.status(), "CreateQp")) return;
  for (int o = 0; o < kVms; ++o) {
    for (const QpRec& q : vm_[o].qps) {
      if (q.qpn == r->qpn && !q.dead)
        Fail("CreateQp returned live qpn %#x", r->qpn);
    }
  }
  QpRec q;
  q.qpn = r->qpn;
  q.type = req.type;
  q.pd = req.pd;
  q.send_cq = req.send_cq;
  q.recv_cq = req.recv_cq;
  q.srq = req.srq;
  q.caps = r->caps;
  q.sq = *sq;
  q.sq.fpages = Resolve(vm, req.sq.pages, "CreateQp(sq)");
  if (rq) {
    q.rq = *rq;
    q.rq->fpages = Resolve(vm, req.rq.pages, "CreateQp(rq)");
  }
  vm.qps.push_back(std::move(q));
  vm.qpn_history.push_back(r->qpn);
  NoteAliasing(vm);
}

Status Driver::ModifyQp(int v, uint32_t qpn, QpState target, uint8_t flags,
                        int peer_vm, uint32_t peer_qpn, ByteReader& in) {
  VmModel& vm = vm_[v];
  auto it = std::find_if(vm.qps.begin(), vm.qps.end(),
                         [&](const QpRec& q) { return q.qpn == qpn; });
  const QpType type = it != vm.qps.end() ? it->type : QpType::kRc;
  ModifyQpRequest m;
  m.qpn = qpn;
  m.state = target;
  m.mask = VIRTIO_RDMA_QP_STATE;
  m.access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                   kAccessRemoteAtomic;
  m.qkey = kQkey;
  if (target == QpState::kInit) {
    m.mask |= VIRTIO_RDMA_QP_PKEY_INDEX | VIRTIO_RDMA_QP_PORT |
              (type == QpType::kUd ? VIRTIO_RDMA_QP_QKEY
                                   : VIRTIO_RDMA_QP_ACCESS_FLAGS);
  } else if (target == QpState::kRtr && type != QpType::kUd) {
    m.mask |= VIRTIO_RDMA_QP_AV | VIRTIO_RDMA_QP_PATH_MTU |
              VIRTIO_RDMA_QP_DEST_QPN | VIRTIO_RDMA_QP_RQ_PSN;
    m.ah.dgid =
        vm_[peer_vm].gids.empty() ? VmGid(peer_vm, 0) : vm_[peer_vm].gids[0];
    m.ah.sgid_index = (flags & 0x10) ? 1 : 0;
    m.dest_qpn = peer_qpn;
    m.path_mtu_bytes = 256u << (flags >> 5 & 3);
    if (type == QpType::kRc) {
      m.mask |=
          VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER;
      m.max_dest_rd_atomic = 4;
      m.min_rnr_timer = 1;
    }
  } else if (target == QpState::kRts) {
    m.mask |= VIRTIO_RDMA_QP_SQ_PSN;
    if (type == QpType::kRc) {
      m.mask |= VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
                VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
      m.timeout = 1 + (flags & 3);
      m.retry_cnt = 2;
      m.rnr_retry = (flags & 4) ? 7 : 2;  // 7: retry forever
      m.max_rd_atomic = 4;
    }
  }
  if (flags & 0x80) {  // hostile: fuzzer mask and values
    m.mask ^= in.U32();
    m.cur_state = static_cast<QpState>(in.U8() % 8);
    m.ah.sgid_index = in.U8();
    m.ah.port_num = in.U8() % 3;
    m.ah.is_global = in.U8() & 1;
    m.path_mtu_bytes = in.U16();
    m.max_rd_atomic = in.U8();
    m.max_dest_rd_atomic = in.U8();
    m.dest_qpn = in.U32();
    m.access_flags = in.U8();
    m.timeout = in.U8();
  }
  const Status s = engine_->ModifyQp(vm.id, m);
  if (trace_)
    std::fprintf(stderr, "  ModifyQp(vm %d qpn %#x -> %d): %s\n", v, qpn,
                 static_cast<int>(target), StatusName(s));
  if (s == Status::kOk) {
    if (it == vm.qps.end())
      Fail("ModifyQp of qpn %#x not of VM %d: Ok", qpn, v);
    if (m.mask & VIRTIO_RDMA_QP_STATE) it->state = target;
    ++stats_.verbs_ok;
  }
  return s;
}

void Driver::ModifyQpOp(int v, ByteReader& in) {
  const uint32_t qpn = PickHandle(
      v, &VmModel::qps, [](const QpRec& q) { return q.qpn; }, in);
  const uint8_t t = in.U8();
  const uint8_t flags = in.U8();
  const int peer = in.U8() % kVms;
  const std::vector<QpRec>& pq = vm_[peer].qps;
  const uint32_t peer_qpn = pq.empty() ? in.U32() : pq[t % pq.size()].qpn;
  (void)ModifyQp(v, qpn, static_cast<QpState>(t % 7), flags, peer, peer_qpn,
                 in);
}

void Driver::QueryQp(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint32_t qpn = PickHandle(
      v, &VmModel::qps, [](const QpRec& q) { return q.qpn; }, in);
  const bool own = std::any_of(vm.qps.begin(), vm.qps.end(),
                               [&](const QpRec& q) { return q.qpn == qpn; });
  Result<QueryQpResult> r = engine_->QueryQp(vm.id, qpn);
  if (r.ok() && !own)
    Fail("QueryQp: VM %d sees qpn %#x it does not own", v, qpn);
  if (!r.ok() && own) Fail("QueryQp of VM %d's own qpn %#x failed", v, qpn);
}

void Driver::DestroyQp(int v, ByteReader& in) {
  VRDMA_FUZZ_DESTROY(qps, qpn, engine_->DestroyQp(vm.id, h), "DestroyQp");
}

// ---------------------------------------------------------------- SRQ, AH

void Driver::CreateSrq(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t mode = in.U8();
  const uint8_t geo = in.U8();
  CreateSrqRequest req;
  req.pd = vm.pds.empty() ? 0 : vm.pds[in.U8() % vm.pds.size()].handle;
  const uint32_t log2_n = 3 + geo % 3;
  req.max_wr = (1u << log2_n) - 1;
  req.max_sge = 1 + (geo >> 2) % 4;
  req.srq_limit = (geo >> 4) % 4;
  if (mode & 0x80) {
    req.max_wr = in.U16();
    req.max_sge = in.U8();
    req.srq_limit = in.U16();
  }
  std::optional<RingRec> ring =
      MakeRing(vm, RingKind::kSrq, log2_n, 7, mode, in, &req.ring);
  Result<CreateSrqResult> r = engine_->CreateSrq(vm.id, req);
  if (!OwnCreate(vm, r.status(), "CreateSrq")) return;
  SrqRec s;
  s.handle = r->handle;
  s.pd = req.pd;
  s.max_sge = req.max_sge;
  s.ring = *ring;
  s.ring.fpages = Resolve(vm, req.ring.pages, "CreateSrq");
  vm.srqs.push_back(std::move(s));
  NoteAliasing(vm);
}

void Driver::ModifySrq(int v, ByteReader& in) {
  const uint32_t h = PickHandle(
      v, &VmModel::srqs, [](const SrqRec& s) { return s.handle; }, in);
  const uint8_t mask = in.U8() % 4;
  (void)engine_->ModifySrq(vm_[v].id, h, mask, in.U16(), in.U16());
}

void Driver::DestroySrq(int v, ByteReader& in) {
  VRDMA_FUZZ_DESTROY(srqs, handle, engine_->DestroySrq(vm.id, h), "DestroySrq");
}

void Driver::CreateAh(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t b = in.U8();
  const uint32_t pd =
      vm.pds.empty() ? in.U32() : vm.pds[b % vm.pds.size()].handle;
  GuestAh ah;
  ah.dgid = VmGid(in.U8() % kVms, 0);
  ah.sgid_index = (b & 0x80) ? in.U8() : 0;
  ah.port_num = (b & 0x40) ? in.U8() : 1;
  ah.is_global = !(b & 0x20);
  ah.hop_limit = in.U8();
  Result<uint32_t> r = engine_->CreateAh(vm.id, pd, ah);
  if (!OwnCreate(vm, r.status(), "CreateAh")) return;
  vm.ahs.push_back({*r, pd, false});
}

void Driver::DestroyAh(int v, ByteReader& in) {
  VRDMA_FUZZ_DESTROY(ahs, handle, engine_->DestroyAh(vm.id, h), "DestroyAh");
}

// ---------------------------------------------------------------- macro

void Driver::Connect(ByteReader& in) {
  const uint8_t b = in.U8();
  const int va = (b & 3) % kVms, vb = (b >> 2 & 3) % kVms;
  const uint8_t type_sel = in.U8();
  const QpType type = static_cast<QpType>(2 + (type_sel & 3) % 3);
  // Bit 7: the second side's QP receives from a new SRQ.
  const bool srq_b = type_sel & 0x80;
  if (!vm_[va].attached || !vm_[vb].attached) return;
  uint32_t qpn[2] = {0, 0};
  const int side[2] = {va, vb};
  for (int i = 0; i < 2; ++i) {
    VmModel& vm = vm_[side[i]];
    CreatePd(side[i]);
    if (vm.pds.empty()) return;
    // A fresh 4-page MR with every access right, iova = its VM's slot.
    RegMrRequest mr;
    mr.pd = vm.pds.back().handle;
    mr.access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                kAccessRemoteAtomic;
    mr.iova = uint64_t(0x10 + side[i]) << 32 | uint64_t{vm.mrs.size()} << 20;
    mr.length = 4 * kPage;
    mr.pages = Pages(vm, 4, 0, in);
    Result<RegMrResult> r = engine_->RegMr(vm.id, mr);
    if (OwnCreate(vm, r.status(), "RegMr")) {
      MrRec m;
      m.handle = r->handle;
      m.lkey = r->lkey;
      m.rkey = r->rkey;
      m.access = mr.access;
      m.pd = mr.pd;
      m.iova = mr.iova;
      m.length = mr.length;
      m.fpages = Resolve(vm, mr.pages, "RegMr");
      vm.mrs.push_back(std::move(m));
    }
    CreateCqRequest cq;
    RingRec ring = *MakeRing(vm, RingKind::kCq, 6, 6, 0, in, &cq.ring);
    cq.cqe = 63;
    Result<CreateCqResult> c = engine_->CreateCq(vm.id, cq);
    if (!OwnCreate(vm, c.status(), "CreateCq")) return;
    ring.fpages = Resolve(vm, cq.ring.pages, "CreateCq");
    vm.cqs.push_back({c->handle, ring, false, 0, RingWrites(*vm.guest, ring),
                      false});
    CreateQpRequest q;
    q.pd = mr.pd;
    q.type = type;
    q.send_cq = q.recv_cq = c->handle;
    q.caps = {15, 15, 4, 4, 128};
    const bool with_srq = srq_b && i == 1;
    if (with_srq) {
      CreateSrqRequest sr;
      sr.pd = mr.pd;
      sr.max_wr = 15;
      sr.max_sge = 4;
      sr.srq_limit = 2;
      RingRec ring = *MakeRing(vm, RingKind::kSrq, 4, 7, 0, in, &sr.ring);
      Result<CreateSrqResult> r = engine_->CreateSrq(vm.id, sr);
      if (!OwnCreate(vm, r.status(), "CreateSrq")) return;
      ring.fpages = Resolve(vm, sr.ring.pages, "CreateSrq");
      vm.srqs.push_back({r->handle, sr.pd, sr.max_sge, ring, false});
      q.srq = r->handle;
      q.caps.max_recv_wr = q.caps.max_recv_sge = 0;
    }
    RingRec sq = *MakeRing(vm, RingKind::kSq, 4, 9, 0, in, &q.sq);
    std::optional<RingRec> rq;
    if (!with_srq) rq = *MakeRing(vm, RingKind::kRq, 4, 7, 0, in, &q.rq);
    Result<CreateQpResult> qr = engine_->CreateQp(vm.id, q);
    if (!OwnCreate(vm, qr.status(), "CreateQp")) return;
    QpRec rec;
    rec.qpn = qpn[i] = qr->qpn;
    rec.type = type;
    rec.pd = q.pd;
    rec.send_cq = rec.recv_cq = c->handle;
    rec.caps = qr->caps;
    rec.sq = sq;
    rec.sq.fpages = Resolve(vm, q.sq.pages, "CreateQp");
    rec.srq = q.srq;
    if (rq) {
      rec.rq = *rq;
      rec.rq->fpages = Resolve(vm, q.rq.pages, "CreateQp");
    }
    vm.qps.push_back(std::move(rec));
    vm.qpn_history.push_back(qr->qpn);
    NoteAliasing(vm);
  }
  for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
    for (int i = 0; i < 2; ++i) {
      (void)ModifyQp(side[i], qpn[i], s, type_sel & 0x7c, side[1 - i],
                     qpn[1 - i], in);
    }
  }
}

}  // namespace vrdma::engine::fuzz
