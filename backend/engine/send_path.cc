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
// The engine remembers each consumed WQE (guest wr_id, opcode, signaled)
// under a per-QP sequence number; seq & slot_mask is the WR's tag in the
// scheduler stage (backend/scheduler), which posts it (whole or in pieces)
// and reports it done, in order, once its last piece completed
// (OnWrDone, engine_sched.cc). Backpressure: a full stage FIFO stops the
// consumption of the ring.
//
// A WQE that fails checks becomes a marker in the stage: it fails (error
// CQE, QP to ERR) only after every WR before it is done, as on a native
// QP, and nothing after it is consumed; the rest of the ring is then
// flushed (kWrFlushErr). QPs in RESET/INIT/RTR/SQD keep their WQEs in the
// ring until RTS.
#include <cstring>

#include "backend/engine/engine_impl.h"

namespace vrdma::engine {

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
  ++turn_;  // a fresh flush budget for every VM
  bool did = false;
  // Receive rings whose flush ran out of budget last turn.
  while (RecvQueue* rq = flush_rq_.PopFront()) ready_rq_.PushBack(rq);
  // Peer messages the stage sent to this host last turn.
  for (uint32_t i = 0; i < loopback_count_; ++i) {
    stage_.OnPeerMessage(0, loopback_[i], Now());
    did = true;
  }
  loopback_count_ = 0;
  // Receives first: a WQE the guest posted before this turn is on the RNIC
  // before this turn's sends are delivered (UD drops a message that finds
  // no receive).
  did |= SweepRecv();
  for (QpObj* qp = pending_sq_.front(); qp != nullptr;) {
    QpObj* next = decltype(pending_sq_)::next(qp);
    did |= ProcessSq(*qp);
    qp = next;
  }
  if (stage_.needs_run()) did |= stage_.Run(Now());
  did |= rnic_.Progress();
  for (CqObj* cq = active_cq_.front(); cq != nullptr;) {
    CqObj* next = decltype(active_cq_)::next(cq);
    did |= PollRnicCq(*cq, /*drain=*/false);
    cq = next;
  }
  // Slow path: a host CQ the RNIC put in error fails its QPs; their
  // flush (next turn) ends what the stage was owed.
  did |= PollRnicEvents();
  // Receive queues that had completions or errors: refill or flush. Bounded
  // in case completions keep re-adding them.
  for (int i = 0; i < 1024 && !ready_rq_.empty(); ++i) {
    did |= ReplenishRecv(*ready_rq_.PopFront());
  }
  FlushEvents();  // one guest notification per VM for this turn's events
  now_valid_ = false;  // work between turns (doorbells, RunSync) reads afresh
  // Work the stage can do now is work only this loop can release, and the
  // completions the RNIC owes for signaled pieces may wait on its timers
  // (RNR, retransmission) that only run in Progress: report busy so the
  // event loop keeps polling. Unsignaled WRs and posted receives alone do
  // not keep it busy, nor does work the stage holds until a later time
  // (NextDeadline says when) or until the policy releases it.
  return did || stage_.busy() || loopback_count_ > 0 || !flush_rq_.empty();
}

WcStatus EngineImpl::CheckSendSemantics(const QpObj& qp, SendWr& wr,
                                        uint32_t ah_handle) const {
  const VmContext& vm = *qp.vm;
  if (qp.type == QpType::kUd) {
    const AhObj* ah = vm.ahs.Lookup(ah_handle);
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

SendSlot& EngineImpl::TakeSlot(QpObj& qp, uint64_t guest_wr_id, WrOpcode op,
                               bool signaled) {
  SendSlot& slot = qp.slots[qp.sq_seq & qp.slot_mask];
  slot.guest_wr_id = guest_wr_id;
  slot.opcode = op;
  slot.signaled = signaled;
  ++qp.sq_seq;
  Expect(*qp.send_cq, 1);
  return slot;
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
  if (qp.sq_failing) {
    // A bad WQE waits in the stage behind the WRs before it; nothing after
    // it is taken (its failure moves the QP to ERR and flushes the ring).
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
  const policy::Nanos now = head != prod ? Now() : 0;
  while (head != prod && budget > 0) {
    --budget;
    // The WQE is decoded straight into the stage's FIFO slot.
    sched::Stage::Slot slot = stage_.Reserve(qp.flow);
    if (slot.wr == nullptr) {
      stage_.Kick(qp.flow, now);  // post what the FIFO holds, then retry
      slot = stage_.Reserve(qp.flow);
      if (slot.wr == nullptr) break;  // full: take the rest next turn
    }
    SendWr& wr = *slot.wr;
    const uint8_t* elem = qp.sq.element(head);
    std::memcpy(header, elem, kSendWqeHeaderBytes);
    uint32_t ah_handle = 0, payload_bytes = 0;
    WcStatus st = DecodeSendHeaderInto(header, qp.sq_limits, &wr, &ah_handle,
                                       &payload_bytes);
    if (st == WcStatus::kSuccess) {
      // One read of the guest's payload: SGEs into the WR, inline bytes
      // into the slot's own buffer.
      uint8_t* dst = (wr.send_flags & kSendInline)
                         ? slot.inline_buf
                         : reinterpret_cast<uint8_t*>(wr.sge.data());
      if (payload_bytes > 0) {
        std::memcpy(dst, elem + kSendWqeHeaderBytes, payload_bytes);
      }
      st = DecodeSendPayloadInto(dst, qp.sq_limits, &wr);
    }
    if (st == WcStatus::kSuccess) st = CheckSendSemantics(qp, wr, ah_handle);
    const bool signaled = qp.sq_sig_all || (wr.send_flags & kSendSignaled);
    const uint32_t tag = qp.sq_seq & qp.slot_mask;
    if (st != WcStatus::kSuccess) {
      // It fails after every WR before it, as on a native QP: the stage
      // reports it (OnMarkerReached) once they are done.
      if (!stage_.SubmitMarker(qp.flow, tag, st, now)) break;  // next turn
      (void)TakeSlot(qp, wr.wr_id, wr.opcode, signaled);
      ++vm.stats.wqes_rejected;
      qp.sq_failing = true;
      head = qp.sq.Next(head);
      did = true;
      break;
    }
    const policy::WrInfo info{vm.id, qp.flow, sched::WrKindOf(wr.opcode),
                              static_cast<uint32_t>(wr.total_length()),
                              signaled};
    (void)TakeSlot(qp, wr.wr_id, wr.opcode, signaled);
    // The stage owns the wr_id from here (it sets it when posting).
    stage_.Commit(qp.flow, tag, info, now);
    ++vm.stats.wqes_posted;
    head = qp.sq.Next(head);
    did = true;
  }
  if (head != qp.sq_head) {
    qp.sq_head = head;
    qp.sq.StoreConsumer(head);  // release: the slots may be reused
  }
  if (head == prod || qp.sq_failing) pending_sq_.Remove(&qp);
  if (did) stage_.Kick(qp.flow, now);  // this QP's batch: one post list
  return did;
}

bool EngineImpl::FlushSq(QpObj& qp) {
  if (FlushLeft(*qp.vm) == 0) {
    // The VM's flush budget for this turn is spent: all of it (what the
    // RNIC and stage hold first, then the ring) waits for the next turn.
    ++qp.vm->stats.flush_deferred;
    return true;
  }
  DrainSendSide(qp);
  uint32_t prod = 0;
  if (!qp.sq.LoadProducer(&prod)) {
    pending_sq_.Remove(&qp);  // already in ERR; nothing sane to flush
    return false;
  }
  bool did = false;
  uint32_t head = qp.sq_head;
  // At most one pass over the ring per turn, and at most what is left of
  // the VM's flush budget: a VM that errors QPs with full rings pays for
  // its flushes in its own turns, not in other VMs' latency.
  uint32_t& left = FlushLeft(*qp.vm);
  for (uint32_t n = 0; head != prod && n < qp.sq.capacity() && left > 0;
       ++n, --left) {
    // Only what the CQE needs, copied once and decoded like any WQE.
    alignas(8) uint8_t copy[kSendFlushBytes];
    std::memcpy(copy, qp.sq.element(head), sizeof(copy));
    const FlushedWqe f = DecodeSendFlush(copy, qp.sq_limits);
    WriteErrorCqe(*qp.send_cq, f.wr_id, qp.qpn, f.opcode,
                  WcStatus::kWrFlushErr);
    head = qp.sq.Next(head);
    did = true;
  }
  if (head != qp.sq_head) {
    qp.sq_head = head;
    qp.sq.StoreConsumer(head);
  }
  if (head == prod) {
    pending_sq_.Remove(&qp);
    return did;
  }
  // Out of budget: the QP stays pending and goes on next turn.
  ++qp.vm->stats.flush_deferred;
  return true;
}

void EngineImpl::DrainSendSide(QpObj& qp) {
  // What the RNIC completed or flushed first, then whatever the stage
  // still holds for the QP (reported as flushed, oldest first).
  PollRnicCq(*qp.send_cq, /*drain=*/true);
  stage_.EndFlowWork(qp.flow, policy::FlowEnd::kError, Now());
  qp.sq_failing = false;
}

void EngineImpl::CloseSendWindow(QpObj& qp) {
  Retire(*qp.send_cq, qp.Unretired());
  qp.sq_done = qp.sq_seq;
  qp.sq_failing = false;
}

void EngineImpl::RetireOldest(QpObj& qp) {
  if (qp.Unretired() == 0) return;
  ++qp.sq_done;
  Retire(*qp.send_cq, 1);
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

void EngineImpl::PrepareDestination(const QpObj& qp, uint32_t remote_qpn) {
  const uint32_t qpn = qp.type == QpType::kUd ? remote_qpn : qp.attrs.dest_qpn;
  std::optional<uint32_t> owner = qpn_owner_.Find(qpn);
  if (!owner) return;  // not a QP of this engine (a remote peer)
  VmContext* vm = FindVm(*owner);
  QpObj* dest = vm ? FindQp(*vm, qpn) : nullptr;
  if (dest == nullptr || dest == &qp) return;
  RecvQueue& rq = dest->srq ? dest->srq->rq : dest->rq;
  if (dest->srq == nullptr && dest->state == QpState::kErr) return;
  (void)ReplenishRecv(rq);
}

}  // namespace vrdma::engine
