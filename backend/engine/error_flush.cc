// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ErrorFlush (error_flush.h): QPs entering ERR, the flush of their rings
// and of what the RNIC and the stage hold, within per-VM flush budgets.
// Data-path thread.
#include "backend/engine/error_flush.h"

#include <algorithm>
#include <cstring>

#include "backend/engine/recv_queue.h"
#include "backend/engine/wqe_decoder.h"

namespace vrdma::engine {

void ErrorFlush::EnterError(QpObj& qp) {
  if (qp.state != QpState::kErr) {
    QpAttr attr;
    attr.state = QpState::kErr;
    (void)rnic_.ModifyQp(qp.rnic, attr, kQpState);  // flushes what it holds
    qp.state = QpState::kErr;
  }
  scheduler_.ScheduleSendFlush(qp);
  if (qp.srq == nullptr) scheduler_.ScheduleRecvFlush(qp.rq);
}

void ErrorFlush::NoteRnicError(QpObj& qp) {
  qp.state = QpState::kErr;
  scheduler_.ScheduleSendFlush(qp);
  if (qp.srq == nullptr) scheduler_.ScheduleRecvFlush(qp.rq);
}

void ErrorFlush::RingError(QpObj& qp) {
  const bool first = qp.state != QpState::kErr;
  EnterError(qp);
  if (first) completions_.Event(*qp.vm, VIRTIO_RDMA_EV_QP_FATAL, qp.qpn);
}

void ErrorFlush::FailHostCq(CqObj& cq) {
  if (cq.rnic_failed) return;
  cq.rnic_failed = true;
  VmContext& vm = *cq.vm;
  ++vm.stats.rnic_cq_errors;
  completions_.Event(vm, VIRTIO_RDMA_EV_CQ_ERR, cq.handle);
  vm.qps.ForEach([&](uint32_t, QpObj& qp) {
    if (qp.send_cq != &cq && qp.recv_cq != &cq) return;
    const bool first = qp.state != QpState::kErr;
    EnterError(qp);  // its flush ends what the stage and the CQ were owed
    if (first) completions_.Event(vm, VIRTIO_RDMA_EV_QP_FATAL, qp.qpn);
  });
}

void ErrorFlush::DrainSendSide(QpObj& qp) {
  // What the RNIC completed or flushed first, then whatever the stage
  // still holds for the QP (reported as flushed, oldest first).
  completions_.Poll(*qp.send_cq, /*drain=*/true);
  stage_.EndFlowWork(qp.flow, policy::FlowEnd::kError, turn_.Now());
  qp.sq_failing = false;
}

ErrorFlush::SendFlush ErrorFlush::FlushSq(QpObj& qp) {
  if (FlushLeft(*qp.vm) == 0) {
    // The VM's flush budget for this turn is spent: all of it (what the
    // RNIC and stage hold first, then the ring) waits for the next turn.
    ++qp.vm->stats.flush_deferred;
    return {.did = true, .done = false};
  }
  DrainSendSide(qp);
  uint32_t prod = 0;
  if (!qp.sq.LoadProducer(&prod)) {
    return {.did = false, .done = true};  // already in ERR; nothing sane to flush
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
    completions_.WriteErrorCqe(*qp.send_cq, f.wr_id, qp.qpn, f.opcode,
                               WcStatus::kWrFlushErr);
    head = qp.sq.Next(head);
    did = true;
  }
  if (head != qp.sq_head) {
    qp.sq_head = head;
    qp.sq.StoreConsumer(head);
  }
  if (head == prod) return {.did = did, .done = true};
  // Out of budget: the QP stays pending and goes on next turn.
  ++qp.vm->stats.flush_deferred;
  return {.did = true, .done = false};
}

ErrorFlush::RecvFlush ErrorFlush::FlushRecvRing(RecvQueue& rq) {
  QpObj& qp = *rq.qp;
  // The RNIC's flushed receives first.
  completions_.Poll(*qp.recv_cq, /*drain=*/true);
  CloseOpenWqe(rq);
  bool did = false;
  if (qp.recv_cq->rnic_failed && FlushLostReceives(rq, &did)) {
    flush_rq_.PushBack(&rq);  // budget spent: go on next turn
    return {.did = true, .next = RecvNext::kKeep};
  }
  uint32_t prod = 0;
  if (!rq.ring.LoadProducer(&prod)) {
    return {.did = did, .next = RecvNext::kUnlink};
  }
  // Within the VM's flush budget, like the send ring (FlushSq).
  uint32_t& left = FlushLeft(*qp.vm);
  for (uint32_t n = 0; rq.head != prod && n < rq.ring.capacity() && left > 0;
       ++n, --left) {
    // Only what the CQE needs, copied once and decoded like any WQE.
    alignas(8) uint8_t copy[kRecvFlushBytes];
    std::memcpy(copy, rq.ring.element(rq.head), sizeof(copy));
    const FlushedWqe f = DecodeRecvFlush(copy);
    completions_.WriteErrorCqe(*qp.recv_cq, f.wr_id, qp.qpn, f.opcode,
                               WcStatus::kWrFlushErr);
    const uint32_t slot = rq.head;
    rq.head = rq.ring.Next(slot);
    MarkRecvDone(rq, slot);
    did = true;
  }
  // The queue stays swept: WQEs posted in ERR are flushed too.
  if (rq.head != prod) {
    ++qp.vm->stats.flush_deferred;
    flush_rq_.PushBack(&rq);  // budget spent: go on next turn
    return {.did = true, .next = RecvNext::kUpdateSweep};
  }
  return {.did = did, .next = RecvNext::kUpdateSweep};
}

bool ErrorFlush::FlushLostReceives(RecvQueue& rq, bool* did) {
  // The host CQ lost the completions of what was posted: each such WQE,
  // oldest first, is flushed here instead (consumer .. head, not done).
  CqObj& cq = *rq.qp->recv_cq;
  uint32_t& left = FlushLeft(*rq.qp->vm);
  for (uint32_t s = rq.consumer; s != rq.head && rq.posted > 0;
       s = rq.ring.Next(s)) {
    if (rq.done[s]) continue;
    if (left == 0) {
      ++rq.qp->vm->stats.flush_deferred;
      return true;
    }
    --left;
    RecvSlot& slot = rq.slots[s];
    const uint32_t lost = std::min<uint32_t>(
        slot.posted > slot.done ? slot.posted - slot.done : 1, rq.posted);
    rq.posted -= lost;
    completions_.Retire(cq, lost);
    slot = RecvSlot{};
    completions_.WriteErrorCqe(cq, rq.wr_ids[s], rq.qp->qpn, WcOpcode::kRecv,
                               WcStatus::kWrFlushErr);
    MarkRecvDone(rq, s);
    *did = true;
  }
  // Nothing more will come from it for this queue.
  completions_.Settle(cq);
  return false;
}

void ErrorFlush::CloseOpenWqe(RecvQueue& rq) {
  rq.plan_head = rq.plan_count = 0;
  if (rq.sender_waits) {
    rq.sender_waits = false;
    stage_.Wake(rq.sender);
  }
  if (!rq.open) return;
  rq.open = false;
  RecvSlot& s = rq.slots[rq.open_slot];
  s.closed = true;
  if (s.done == s.posted) {
    // Nothing of it is on the RNIC any more: it completes now, flushed.
    QpObj& qp = *rq.qp;
    completions_.WriteErrorCqe(*qp.recv_cq, rq.wr_ids[rq.open_slot], qp.qpn,
                               WcOpcode::kRecv,
                               s.status ? static_cast<WcStatus>(s.status)
                                        : WcStatus::kWrFlushErr);
    s = RecvSlot{};
    MarkRecvDone(rq, rq.open_slot);
  }
}

}  // namespace vrdma::engine
