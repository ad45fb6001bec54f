// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Gsi (gsi.h): the engine's software QP1.
#include "backend/engine/gsi.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "backend/engine/address.h"
#include "backend/engine/qp_attr_check.h"
#include "backend/engine/ring_check.h"
#include "backend/rnic/roce_grh.h"

namespace vrdma::engine {
namespace {

constexpr uint32_t kQpn = VIRTIO_RDMA_GSI_QPN;

// Guest RAM for [addr, addr + len) of an SGE with the local DMA lkey.
uint8_t* DmaBytes(const VmContext& vm, const Sge& s) {
  if (s.lkey != VIRTIO_RDMA_LOCAL_DMA_LKEY || vm.datapath_memory == nullptr) {
    return nullptr;
  }
  Result<uint8_t*> p = vm.datapath_memory->Translate(s.addr, s.length);
  return p.ok() ? *p : nullptr;
}

// The send's bytes (at most Gsi::kMaxMad, checked by the caller) into out.
WcStatus Gather(const VmContext& vm, const SendWr& wr, uint8_t* out,
                uint32_t* len) {
  if (wr.send_flags & kSendInline) {
    std::memcpy(out, wr.inline_data, wr.inline_len);
    *len = wr.inline_len;
    return WcStatus::kSuccess;
  }
  uint32_t n = 0;
  for (int i = 0; i < wr.num_sge; ++i) {
    const uint8_t* src = DmaBytes(vm, wr.sge[i]);
    if (src == nullptr) return WcStatus::kLocProtErr;
    std::memcpy(out + n, src, wr.sge[i].length);
    n += wr.sge[i].length;
  }
  *len = n;
  return WcStatus::kSuccess;
}

// Scatters the network header and the datagram into a receive's SGEs.
WcStatus Scatter(const VmContext& vm, const RecvWr& wr, const uint8_t* grh,
                 const uint8_t* data, uint32_t len) {
  uint64_t room = 0;
  std::array<uint8_t*, kMaxSge> dst{};
  for (int i = 0; i < wr.num_sge; ++i) {
    dst[i] = DmaBytes(vm, wr.sge[i]);
    if (dst[i] == nullptr) return WcStatus::kLocProtErr;
    room += wr.sge[i].length;
  }
  if (room < kGrhBytes + len) return WcStatus::kLocLenErr;
  uint32_t done = 0;  // bytes of (grh, data) written
  const uint32_t total = kGrhBytes + len;
  for (int i = 0; i < wr.num_sge && done < total; ++i) {
    for (uint32_t off = 0; off < wr.sge[i].length && done < total;) {
      const uint8_t* src = done < kGrhBytes ? grh + done : data + (done - kGrhBytes);
      const uint32_t avail = done < kGrhBytes ? kGrhBytes - done : total - done;
      const uint32_t n = std::min(avail, wr.sge[i].length - off);
      std::memcpy(dst[i] + off, src, n);
      off += n;
      done += n;
    }
  }
  return WcStatus::kSuccess;
}

}  // namespace

// ------------------------------------------------------------ control

Result<CreateQpResult> Gsi::Create(VmId id, const CreateQpRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  const QpCaps& c = req.caps;
  if (req.srq != 0 || c.max_send_wr > kMaxDepth || c.max_recv_wr > kMaxDepth) {
    return Status::kInvalid;
  }
  VRDMA_RETURN_IF_ERROR(CheckCreateQp(req, resources_.VmLimits(*vm)));
  if (!CanStart(*vm, RingPinned(req.sq) + RingPinned(req.rq), sizeof(GsiQp))) {
    return Status::kNoResource;
  }
  Charge charge;
  auto qp = std::make_unique<GsiQp>();
  VRDMA_RETURN_IF_ERROR(resources_.MapPages(*vm, req.sq.pages, &qp->sq_view, &charge));
  VRDMA_RETURN_IF_ERROR(resources_.MapPages(*vm, req.rq.pages, &qp->rq_view, &charge));
  charge.host_bytes = sizeof(GsiQp);
  if (!Fits(vm->config.quotas, vm->stats, charge)) return Status::kNoResource;
  qp->caps = c;
  qp->sq_sig_all = req.sq_sig_all;
  qp->charge = charge;
  qp->sq = GuestRing(qp->sq_view.data(), req.sq.log2_num_elem, req.sq.log2_elem_size);
  qp->rq = GuestRing(qp->rq_view.data(), req.rq.log2_num_elem, req.rq.log2_elem_size);
  // Decoded as UD sends: SEND and SEND_WITH_IMM only, with an AH.
  qp->sq_limits.type = QpType::kUd;
  qp->sq_limits.max_sge = c.max_send_sge;
  qp->sq_limits.max_inline = c.max_inline_data;
  qp->sq_limits.elem_size = qp->sq.elem_size();
  qp->sq_limits.max_msg_sz = kMaxMad;
  qp->sq_limits.atomics = false;
  qp->rq_limits.max_sge = c.max_recv_sge;
  qp->rq_limits.elem_size = qp->rq.elem_size();

  Result<CreateQpResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    CqObj* scq = vm->cqs.Lookup(req.send_cq);
    CqObj* rcq = vm->cqs.Lookup(req.recv_cq);
    if (pd == nullptr || scq == nullptr || rcq == nullptr) {
      out = Status::kBadHandle;
      return;
    }
    // kNoResource: one per VM, and one of its max_qp QPs.
    if (vm->gsi != nullptr || vm->stats.qps >= vm->config.quotas.max_qp) return;
    if (!Fits(vm->config.quotas, vm->stats, charge)) return;
    qp->vm = vm;
    qp->pd = req.pd;
    qp->send_cq = scq;
    qp->recv_cq = rcq;
    qp->sq.StoreConsumer(0);  // the host owns the consumer indices
    qp->rq.StoreConsumer(0);
    qp->tokens = kBurst;
    ++pd->refs;
    ++scq->refs;
    ++rcq->refs;
    ++vm->stats.qps;
    Take(vm->stats, charge);
    vm->gsi = std::move(qp);
    out = CreateQpResult{kQpn, c};
  });
  return out;  // a refused object's views are unmapped here
}

Status Gsi::Modify(VmId id, const ModifyQpRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  Status s = Status::kOk;
  executor_.RunSync([&] {
    GsiQp* qp = vm->gsi.get();
    if (qp == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    QpCheckContext ctx;
    ctx.type = QpType::kGsi;
    ctx.current = qp->state;
    ctx.num_gids = static_cast<uint32_t>(vm->config.gids.size());
    QpState next = qp->state;
    s = CheckModifyQp(req, ctx, &next);
    if (s != Status::kOk) return;
    RecordQpAttrs(req, &qp->attrs);
    qp->state = next;
    if (next == QpState::kReset) {
      // Outstanding work is discarded without completions, as on an RNIC.
      uint32_t p = 0;
      qp->sq_head = qp->sq.LoadProducer(&p) ? p : 0;
      qp->rq_head = qp->rq.LoadProducer(&p) ? p : 0;
      qp->sq.StoreConsumer(qp->sq_head);
      qp->rq.StoreConsumer(qp->rq_head);
      pending_.Remove(qp);
    } else if (next == QpState::kRts || next == QpState::kErr) {
      pending_.PushBack(qp);  // sends posted before RTS, or the flush
    }
  });
  return s;
}

Result<QueryQpResult> Gsi::Query(VmId id) const {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  Result<QueryQpResult> out = Status::kBadHandle;
  executor_.RunSync([&] {
    const GsiQp* qp = vm->gsi.get();
    if (qp != nullptr) out = QueryQpAnswer(qp->attrs, kQpn, qp->state, qp->caps);
  });
  return out;
}

Status Gsi::Destroy(VmId id) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  std::unique_ptr<GsiQp> dead;
  executor_.RunSync([&] { dead = Unpublish(*vm); });
  return dead != nullptr ? Status::kOk : Status::kBadHandle;  // views unmapped here
}

std::unique_ptr<GsiQp> Gsi::Unpublish(VmContext& vm) {
  std::unique_ptr<GsiQp> qp = std::move(vm.gsi);
  if (qp == nullptr) return nullptr;
  pending_.Remove(qp.get());
  --qp->send_cq->refs;
  --qp->recv_cq->refs;
  if (PdObj* pd = vm.pds.Lookup(qp->pd)) --pd->refs;
  GiveBack(vm.stats, qp->charge);
  --vm.stats.qps;
  return qp;
}

// ------------------------------------------------------------ data path

void Gsi::Schedule(VmContext& vm) {
  if (vm.gsi != nullptr) pending_.PushBack(vm.gsi.get());
}

uint32_t Gsi::Budget(GsiQp& qp, policy::Nanos now) {
  if (now > qp.refilled_at) {
    qp.tokens = std::min(kBurst, qp.tokens + static_cast<double>(now - qp.refilled_at) *
                                                 kRatePerSec * 1e-9);
    qp.refilled_at = now;
  }
  return std::min(kTurnBudget, static_cast<uint32_t>(qp.tokens));
}

bool Gsi::Run() {
  next_deadline_ = policy::kNever;
  if (pending_.empty()) return false;
  bool did = false;
  const policy::Nanos now = turn_.Now();
  for (GsiQp* qp = pending_.front(); qp != nullptr;) {
    GsiQp* next = decltype(pending_)::next(qp);
    const uint32_t allowed = Budget(*qp, now);
    uint32_t budget = allowed;
    bool more = false;
    if (qp->state == QpState::kRts) {
      while (budget > 0 && qp->state == QpState::kRts && SendOne(*qp)) --budget;
      more = budget == 0;  // look again next turn
    }
    // In ERR from the start or after a failed send: its flush.
    if (qp->state == QpState::kErr) more = FlushSome(*qp, &budget);
    qp->tokens -= allowed - budget;
    did |= budget < allowed;
    if (!more) {
      pending_.Remove(qp);
    } else if (qp->tokens < 1) {  // its rate: when the next token is in
      const auto wait = static_cast<policy::Nanos>((1 - qp->tokens) / kRatePerSec * 1e9) + 1;
      next_deadline_ = std::min(next_deadline_, now + wait);
    }
    qp = next;
  }
  return did;
}

bool Gsi::SendOne(GsiQp& qp) {
  VmContext& vm = *qp.vm;
  uint32_t prod = 0;
  if (!qp.sq.LoadProducer(&prod)) {
    completions_.Event(vm, VIRTIO_RDMA_EV_QP_FATAL, kQpn);  // a broken ring
    EnterError(qp);
    return false;
  }
  if (prod == qp.sq_head) return false;
  // A private copy: every field is read once, from here.
  alignas(8) uint8_t wqe[kSendWqeHeaderBytes + kMaxSendPayloadBytes];
  const uint32_t n = std::min<uint32_t>(qp.sq.elem_size(), sizeof(wqe));
  std::memcpy(wqe, qp.sq.element(qp.sq_head), n);
  qp.sq_head = qp.sq.Next(qp.sq_head);
  qp.sq.StoreConsumer(qp.sq_head);

  DecodedSend d;
  WcStatus st = DecodeSendWqe({wqe, n}, qp.sq_limits, &d);
  const AhObj* ah = nullptr;
  if (st == WcStatus::kSuccess) {
    if (d.wr.remote_qpn != kQpn) {
      st = WcStatus::kLocQpOpErr;
    } else if (d.wr.total_length() > kMaxMad) {
      st = WcStatus::kLocLenErr;
    } else if ((ah = vm.ahs.Lookup(d.ah_handle)) == nullptr) {
      st = WcStatus::kLocQpOpErr;
    }
  }
  uint8_t mad[kMaxMad];
  uint32_t len = 0;
  if (st == WcStatus::kSuccess) st = Gather(vm, d.wr, mad, &len);
  if (st != WcStatus::kSuccess) {
    ++vm.stats.wqes_rejected;
    Fail(qp, *qp.send_cq, d.wr.wr_id, WcOpcode::kSend, st);
    return true;  // consumed, with its error CQE
  }
  ++vm.stats.gsi_sent;
  Deliver(MakeAv(vm, ah->guest), mad, len,
          d.wr.opcode == WrOpcode::kSendWithImm, d.wr.imm_data,
          (d.wr.send_flags & kSendSolicited) != 0, vm);
  if (qp.sq_sig_all || (d.wr.send_flags & kSendSignaled)) {
    ib_uverbs_wc wc{};
    wc.wr_id = d.wr.wr_id;
    wc.opcode = static_cast<uint32_t>(WcOpcode::kSend);
    wc.byte_len = len;
    wc.qp_num = kQpn;
    wc.port_num = 1;
    (void)completions_.WriteCqe(*qp.send_cq, wc, /*solicited=*/false);
  }
  return true;
}

void Gsi::Deliver(const AddressVector& av, const uint8_t* data, uint32_t len,
                  bool has_imm, uint32_t imm, bool solicited,
                  VmContext& from) {
  // The VM that owns the destination GID (a slow path: a scan of the VMs).
  VmContext* to = nullptr;
  vms_.vms.ForEach([&](uint32_t, VmContext& v) {
    if (to == nullptr && v.gsi != nullptr &&
        std::find(v.config.gids.begin(), v.config.gids.end(), av.dgid) !=
            v.config.gids.end()) {
      to = &v;
    }
  });
  GsiQp* dst = to != nullptr ? to->gsi.get() : nullptr;
  if (dst == nullptr ||
      (dst->state != QpState::kRtr && dst->state != QpState::kRts)) {
    ++from.stats.gsi_dropped;
    return;
  }
  uint32_t prod = 0;
  if (!dst->rq.LoadProducer(&prod)) {
    completions_.Event(*to, VIRTIO_RDMA_EV_QP_FATAL, kQpn);
    EnterError(*dst);
    ++from.stats.gsi_dropped;
    return;
  }
  if (prod == dst->rq_head) {  // no receive posted: UD drops it
    ++from.stats.gsi_dropped;
    return;
  }
  alignas(8) uint8_t wqe[kRecvWqeHeaderBytes + kMaxRecvPayloadBytes];
  const uint32_t n = std::min<uint32_t>(dst->rq.elem_size(), sizeof(wqe));
  std::memcpy(wqe, dst->rq.element(dst->rq_head), n);
  RecvWr rwr;
  WcStatus st = DecodeRecvWqe({wqe, n}, dst->rq_limits, &rwr);
  uint8_t grh[kGrhBytes];
  BuildRoceGrh(av, len, grh);
  if (st == WcStatus::kSuccess) st = Scatter(*to, rwr, grh, data, len);
  dst->rq_head = dst->rq.Next(dst->rq_head);
  if (st != WcStatus::kSuccess) {
    dst->rq.StoreConsumer(dst->rq_head);
    ++to->stats.wqes_rejected;
    ++from.stats.gsi_dropped;
    Fail(*dst, *dst->recv_cq, rwr.wr_id, WcOpcode::kRecv, st);
    return;
  }
  ib_uverbs_wc wc{};
  wc.wr_id = rwr.wr_id;
  wc.opcode = static_cast<uint32_t>(WcOpcode::kRecv);
  wc.byte_len = kGrhBytes + len;
  wc.ex.imm_data = imm;
  wc.qp_num = kQpn;
  wc.src_qp = kQpn;
  wc.wc_flags = kWcGrh | (has_imm ? uint32_t{kWcWithImm} : 0u);
  wc.port_num = 1;
  (void)completions_.WriteCqe(*dst->recv_cq, wc, solicited);
  dst->rq.StoreConsumer(dst->rq_head);  // the buffer is the guest's again
  ++from.stats.gsi_delivered;
}

bool Gsi::FlushSome(GsiQp& qp, uint32_t* budget) {
  bool left = false;
  uint32_t prod = 0;
  if (qp.sq.LoadProducer(&prod)) {
    for (; *budget > 0 && qp.sq_head != prod; --*budget) {
      std::array<uint8_t, kSendFlushBytes> h;
      std::memcpy(h.data(), qp.sq.element(qp.sq_head), h.size());
      const FlushedWqe f = DecodeSendFlush(h, qp.sq_limits);
      completions_.WriteErrorCqe(*qp.send_cq, f.wr_id, kQpn, f.opcode,
                                 WcStatus::kWrFlushErr);
      qp.sq_head = qp.sq.Next(qp.sq_head);
      qp.sq.StoreConsumer(qp.sq_head);
    }
    left |= qp.sq_head != prod;
  }
  if (qp.rq.LoadProducer(&prod)) {
    for (; *budget > 0 && qp.rq_head != prod; --*budget) {
      std::array<uint8_t, kRecvFlushBytes> h;
      std::memcpy(h.data(), qp.rq.element(qp.rq_head), h.size());
      const FlushedWqe f = DecodeRecvFlush(h);
      completions_.WriteErrorCqe(*qp.recv_cq, f.wr_id, kQpn, WcOpcode::kRecv,
                                 WcStatus::kWrFlushErr);
      qp.rq_head = qp.rq.Next(qp.rq_head);
      qp.rq.StoreConsumer(qp.rq_head);
    }
    left |= qp.rq_head != prod;
  }
  return left;
}

void Gsi::Fail(GsiQp& qp, CqObj& cq, uint64_t wr_id, WcOpcode op,
               WcStatus st) {
  completions_.WriteErrorCqe(cq, wr_id, kQpn, op, st);
  EnterError(qp);
}

void Gsi::EnterError(GsiQp& qp) {
  qp.state = QpState::kErr;
  pending_.PushBack(&qp);  // its flush
}

}  // namespace vrdma::engine
