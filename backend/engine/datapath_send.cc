// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The data path's send side and its turn (PollOnce). Runs only on the
// data-path thread.
//
// Send queue protocol. A doorbell puts the QP on pending_sq_ (an intrusive
// list: no allocation, duplicates are no-ops). Each turn, for every pending
// QP in RTS: the guest's producer index is loaded once (acquire); each new
// WQE is copied to engine memory (header, then only the SGEs or inline
// bytes it declares), decoded (wqe_decoder.h), checked against the VM's
// objects (lkeys in the VM and the QP's PD, ranges inside the MR, UD AH of
// the VM and PD), turned into a host SendWr whose wr_id is an engine cookie
// (QP handle + ring slot, objects.h) and handed to the scheduler stage.
// Once the stage has taken it (posted, or copied into its FIFO) the slot is
// free for the guest and the consumer index is stored (release) once per
// batch: librxe reads consumer_index as "space available".
//
// The engine remembers each consumed WQE (guest wr_id, opcode, size) under
// a per-QP sequence number until it is known complete; the cookie carries
// seq & slot_mask. Backpressure comes from the RNIC (PostSend refuses when
// its send queue is full; the WR then waits at the head of the scheduler
// FIFO) and from the FIFO (full: stop consuming), so at most RNIC depth +
// FIFO capacity WRs are outstanding and their records are never reused
// early. A completion retires its WR and every older one (a signaled
// completion implies all earlier WRs of the SQ completed).
//
// A WQE that fails checks completes with an error CQE, after every older
// WR's completion, and the QP goes to ERR; everything after it is flushed
// (kWrFlushErr), as a real RNIC does. QPs in RESET/INIT/RTR/SQD keep their
// WQEs in the ring until RTS.
#include <cstring>

#include "backend/engine/engine_impl.h"

namespace vrdma::engine {
namespace {

policy::WrKind KindOf(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return policy::WrKind::kWrite;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return policy::WrKind::kSend;
    case WrOpcode::kRdmaRead:
      return policy::WrKind::kRead;
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd:
      return policy::WrKind::kAtomic;
  }
  return policy::WrKind::kSend;
}

}  // namespace

void EngineImpl::Doorbell(VmId id, uint8_t kind, uint32_t handle) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return;
  switch (kind) {
    case VIRTIO_RDMA_DB_SQ:
      if (QpObj* qp = FindQp(*vm, handle)) {
        pending_sq_.PushBack(qp);
        return;
      }
      break;
    case VIRTIO_RDMA_DB_RQ:
      if (QpObj* qp = FindQp(*vm, handle);
          qp != nullptr && qp->srq == nullptr) {
        ReplenishRecv(qp->rq);
        return;
      }
      break;
    case VIRTIO_RDMA_DB_SRQ:
      if (SrqObj* srq = vm->srqs.Lookup(handle)) {
        ReplenishRecv(srq->rq);
        return;
      }
      break;
    case VIRTIO_RDMA_DB_CQ_ARM:
    case VIRTIO_RDMA_DB_CQ_ARM_SOLICITED:
      if (CqObj* cq = vm->cqs.Lookup(handle)) {
        if (kind == VIRTIO_RDMA_DB_CQ_ARM) {
          cq->armed = CqObj::kArmNext;
        } else if (cq->armed != CqObj::kArmNext) {
          cq->armed = CqObj::kArmSolicited;
        }
        return;
      }
      break;
    default:
      break;
  }
  ++vm->doorbells_ignored;
}

bool EngineImpl::PollOnce() {
  now_valid_ = false;
  bool did = false;
  // Receives first: a WQE the guest posted before this turn is on the RNIC
  // before this turn's sends are delivered (UD drops a message that finds
  // no receive).
  did |= SweepRecv();
  for (QpObj* qp = pending_sq_.front(); qp != nullptr;) {
    QpObj* next = decltype(pending_sq_)::next(qp);
    did |= ProcessSq(*qp);
    qp = next;
  }
  if (stage_.has_queued()) did |= stage_.Drain(Now());
  did |= rnic_.Progress();
  for (CqObj* cq = active_cq_.front(); cq != nullptr;) {
    CqObj* next = decltype(active_cq_)::next(cq);
    did |= PollRnicCq(*cq, /*drain=*/false);
    cq = next;
  }
  // Receive queues that had completions or errors: refill or flush. Bounded
  // in case completions keep re-adding them.
  for (int i = 0; i < 1024 && !ready_rq_.empty(); ++i) {
    did |= ReplenishRecv(*ready_rq_.PopFront());
  }
  now_valid_ = false;  // work between turns (doorbells, RunSync) reads afresh
  // WRs the policy holds back (kQueue, kWait) are work only this loop can
  // release, and completions the RNIC owes may wait on its timers (RNR,
  // retransmission) that only run in Progress: report busy so the event
  // loop keeps polling instead of sleeping until an unrelated fd fires.
  return did || stage_.has_queued() || signaled_owed_ > 0;
}

WcStatus EngineImpl::CheckSendSemantics(const QpObj& qp, DecodedSend& d) const {
  const VmContext& vm = *qp.vm;
  SendWr& wr = d.wr;
  if (qp.type == QpType::kUd) {
    const AhObj* ah = vm.ahs.Lookup(d.ah_handle);
    if (ah == nullptr || ah->pd != qp.pd) return WcStatus::kLocQpOpErr;
    wr.ah = ah->rnic;
  }
  if (wr.send_flags & kSendInline) return WcStatus::kSuccess;
  // READ and atomics write into the local buffers.
  const bool writes_local = wr.opcode == WrOpcode::kRdmaRead ||
                            wr.opcode == WrOpcode::kAtomicCmpSwp ||
                            wr.opcode == WrOpcode::kAtomicFetchAdd;
  int kept = 0;
  for (int i = 0; i < wr.num_sge; ++i) {
    const Sge s = wr.sge[i];
    if (s.length == 0) continue;  // names no memory; not passed on unchecked
    std::optional<uint32_t> h = vm.lkey_to_mr.Find(s.lkey);
    const MrObj* mr = h ? vm.mrs.Lookup(*h) : nullptr;
    if (mr == nullptr || mr->pd != qp.pd) return WcStatus::kLocProtErr;
    if (writes_local && !(mr->access & kAccessLocalWrite))
      return WcStatus::kLocProtErr;
    uint64_t end = 0;
    if (__builtin_add_overflow(s.addr, uint64_t{s.length}, &end) ||
        s.addr < mr->iova || end > mr->iova + mr->length) {
      return WcStatus::kLocProtErr;
    }
    wr.sge[kept++] = s;
  }
  wr.num_sge = static_cast<uint8_t>(kept);
  return WcStatus::kSuccess;
}

bool EngineImpl::ProcessSq(QpObj& qp) {
  switch (qp.state) {
    case QpState::kRts:
      break;
    case QpState::kErr:
    case QpState::kSqe:
      return FlushSq(qp);
    default:
      // Not ready to send (or draining): WQEs wait in the ring; the
      // transition to RTS puts the QP back on the list.
      pending_sq_.Remove(&qp);
      return false;
  }
  uint32_t prod = 0;
  if (!qp.sq.LoadProducer(&prod)) {
    RingError(qp);
    return true;
  }
  VmContext& vm = *qp.vm;
  uint32_t head = qp.sq_head;
  uint32_t budget = options_.sq_budget;
  bool did = false;
  alignas(64) uint8_t header[kSendWqeHeaderBytes];
  alignas(64) uint8_t payload[kMaxSendPayloadBytes];
  DecodedSend& d = send_scratch_;
  const policy::Nanos now = head != prod ? Now() : 0;
  while (head != prod && budget > 0) {
    --budget;
    const uint8_t* elem = qp.sq.element(head);
    std::memcpy(header, elem, kSendWqeHeaderBytes);
    WcStatus st = DecodeSendHeader(header, qp.sq_limits, &d);
    if (st == WcStatus::kSuccess) {
      // One read of the guest's payload, into the WR itself for SGEs.
      uint8_t* dst = (d.wr.send_flags & kSendInline)
                         ? payload
                         : reinterpret_cast<uint8_t*>(d.wr.sge.data());
      std::memcpy(dst, elem + kSendWqeHeaderBytes, d.payload_bytes);
      st = DecodeSendPayload(dst, qp.sq_limits, &d);
    }
    if (st == WcStatus::kSuccess) st = CheckSendSemantics(qp, d);
    if (st != WcStatus::kSuccess) {
      ++vm.stats.wqes_rejected;
      qp.sq_head = head;
      FailSend(qp, d.wr.wr_id, d.wr.opcode, st, /*fifo_is_older=*/true);
      qp.sq_head = qp.sq.Next(head);
      qp.sq.StoreConsumer(qp.sq_head);
      return true;  // QP in ERR and still pending: the rest is flushed next
    }
    const uint32_t seq = qp.sq_seq;
    const uint32_t rec = seq & qp.slot_mask;
    SendSlot& slot = qp.slots[rec];
    slot.guest_wr_id = d.wr.wr_id;
    slot.opcode = d.wr.opcode;
    slot.kind = KindOf(d.wr.opcode);
    slot.signaled = qp.sq_sig_all || (d.wr.send_flags & kSendSignaled);
    const uint64_t bytes = d.wr.total_length();  // <= max_msg_sz (checked)
    slot.bytes = static_cast<uint32_t>(bytes);
    slot.admit_ns = now;
    d.wr.wr_id = MakeCookie(qp.handle, CookieKind::kSend, rec);
    const policy::WrInfo info{vm.id, qp.handle, slot.kind, slot.bytes,
                              slot.signaled};
    if (d.wr.opcode == WrOpcode::kSend ||
        d.wr.opcode == WrOpcode::kSendWithImm ||
        d.wr.opcode == WrOpcode::kRdmaWriteWithImm) {
      PrepareDestination(qp, d.wr);
    }
    const Status ps = stage_.Submit(qp, d.wr, info, rec, now);
    if (ps == Status::kNoResource)
      break;  // the QP's FIFO is full: retry next turn
    if (ps != Status::kOk) {
      // The RNIC refused the post (its QP left RTS on its own).
      qp.sq_head = head;
      FailSend(qp, slot.guest_wr_id, slot.opcode,
               qp.state == QpState::kErr ? WcStatus::kWrFlushErr
                                         : WcStatus::kLocQpOpErr,
               /*fifo_is_older=*/true);
      qp.sq_head = qp.sq.Next(head);
      qp.sq.StoreConsumer(qp.sq_head);
      return true;
    }
    ++qp.sq_seq;
    if (slot.signaled) {
      ++qp.signaled_owed;
      ++signaled_owed_;
    }
    ++vm.stats.wqes_posted;
    Expect(*qp.send_cq, 1);
    head = qp.sq.Next(head);
    did = true;
  }
  if (head != qp.sq_head) {
    qp.sq_head = head;
    qp.sq.StoreConsumer(head);  // release: the slots may be reused
  }
  if (head == prod) pending_sq_.Remove(&qp);  // a new doorbell brings it back
  return did;
}

bool EngineImpl::FlushSq(QpObj& qp) {
  DrainSendSide(qp);
  uint32_t prod = 0;
  if (!qp.sq.LoadProducer(&prod)) {
    pending_sq_.Remove(&qp);  // already in ERR; nothing sane to flush
    return false;
  }
  bool did = false;
  uint32_t head = qp.sq_head;
  // At most one pass over the ring per turn.
  for (uint32_t n = 0; head != prod && n < qp.sq.capacity(); ++n) {
    const uint8_t* elem = qp.sq.element(head);
    uint64_t wr_id;
    uint32_t op;
    std::memcpy(&wr_id, elem + send_wqe::kWrId, sizeof(wr_id));
    std::memcpy(&op, elem + send_wqe::kOpcode, sizeof(op));
    const WcOpcode wc_op =
        op <= static_cast<uint32_t>(WrOpcode::kAtomicFetchAdd)
            ? SendCompletionOpcode(static_cast<WrOpcode>(op))
            : WcOpcode::kSend;
    WriteErrorCqe(*qp.send_cq, wr_id, qp.qpn, wc_op, WcStatus::kWrFlushErr);
    head = qp.sq.Next(head);
    did = true;
  }
  if (head != qp.sq_head) {
    qp.sq_head = head;
    qp.sq.StoreConsumer(head);
  }
  if (head == prod) pending_sq_.Remove(&qp);
  return did;
}

void EngineImpl::DrainSendSide(QpObj& qp) {
  PollRnicCq(*qp.send_cq, /*drain=*/true);
  stage_.FlushFlow(qp, [&](uint32_t slot) {
    const SendSlot& s = qp.slots[slot];
    WriteErrorCqe(*qp.send_cq, s.guest_wr_id, qp.qpn,
                  SendCompletionOpcode(s.opcode), WcStatus::kWrFlushErr);
  });
  // Whatever the RNIC held has been flushed: close the window.
  CloseSendWindow(qp);
}

void EngineImpl::CloseSendWindow(QpObj& qp) {
  Retire(*qp.send_cq, qp.Unretired());
  qp.sq_done = qp.sq_seq;
  signaled_owed_ -= qp.signaled_owed;
  qp.signaled_owed = 0;
}

void EngineImpl::FailSend(QpObj& qp, uint64_t guest_wr_id, WrOpcode op,
                          WcStatus status, bool fifo_is_older) {
  EnterError(qp);
  if (fifo_is_older) {
    DrainSendSide(qp);
    WriteErrorCqe(*qp.send_cq, guest_wr_id, qp.qpn, SendCompletionOpcode(op),
                  status);
  } else {
    PollRnicCq(*qp.send_cq, /*drain=*/true);
    WriteErrorCqe(*qp.send_cq, guest_wr_id, qp.qpn, SendCompletionOpcode(op),
                  status);
    DrainSendSide(qp);
  }
}

void EngineImpl::EnterError(QpObj& qp) {
  if (qp.state != QpState::kErr) {
    QpAttr attr;
    attr.state = QpState::kErr;
    (void)rnic_.ModifyQp(qp.rnic, attr, kQpState);  // flushes what it holds
    qp.state = QpState::kErr;
  }
  pending_sq_.PushBack(&qp);
  if (qp.srq == nullptr) ready_rq_.PushBack(&qp.rq);
}

void EngineImpl::RingError(QpObj& qp) {
  const bool first = qp.state != QpState::kErr;
  EnterError(qp);
  if (first) Event(*qp.vm, VIRTIO_RDMA_EV_QP_FATAL, qp.qpn);
}

void EngineImpl::PrepareDestination(const QpObj& qp, const SendWr& wr) {
  const uint32_t qpn =
      qp.type == QpType::kUd ? wr.remote_qpn : qp.attrs.dest_qpn;
  std::optional<uint32_t> owner = qpn_owner_.Find(qpn);
  if (!owner) return;  // not a QP of this engine (a remote peer)
  VmContext* vm = FindVm(*owner);
  QpObj* dest = vm ? FindQp(*vm, qpn) : nullptr;
  if (dest == nullptr || dest == &qp) return;
  RecvQueue& rq = dest->srq ? dest->srq->rq : dest->rq;
  if (dest->srq == nullptr && dest->state == QpState::kErr) return;
  (void)ReplenishRecv(rq);
}

QpObj* EngineImpl::ResolveFlow(policy::TenantId tenant, policy::FlowId flow) {
  VmContext* vm = FindVm(tenant);
  return vm ? vm->qps.Lookup(flow) : nullptr;
}

void EngineImpl::OnQueuedPostFailed(QpObj& qp, uint32_t slot, Status) {
  const SendSlot& s = qp.slots[slot];
  FailSend(
      qp, s.guest_wr_id, s.opcode,
      qp.state == QpState::kErr ? WcStatus::kWrFlushErr : WcStatus::kLocQpOpErr,
      /*fifo_is_older=*/false);
}

}  // namespace vrdma::engine
