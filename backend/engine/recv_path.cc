// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RecvPath (recv_path.h): receive queues and SRQs on the data path, fed
// ahead (replenish, sweep). Announced receives: recv_path_announced.cc.
//
// Receive CQs: a CQ is polled while the RNIC holds receives that complete
// into it (expected > 0) or while a QP with an SRQ receives into it
// (srq_listeners > 0), because a receive completion can arrive at any time.
#include <algorithm>
#include <cstring>

#include "backend/engine/local_access.h"
#include "backend/engine/recv_path.h"
#include "backend/engine/recv_queue.h"

namespace vrdma::engine {

WcStatus RecvPath::CheckRecvSemantics(uint32_t pd, const QpObj* qp, const VmContext& vm,
                                      RecvWr& wr) const {
  return CheckLocalSges(vm, pd, KernelRam(vm, qp), /*writes_local=*/true, wr.sge.data(),
                        &wr.num_sge);
}

bool RecvPath::Replenish(RecvQueue& rq) {
  QpObj* qp = rq.qp;
  if (qp != nullptr) {
    if (qp->state == QpState::kErr) {
      const ErrorFlush::RecvFlush f = errors_.FlushRecvRing(rq);
      if (f.next == ErrorFlush::RecvNext::kUnlink) {
        Unlink(rq);
      } else if (f.next == ErrorFlush::RecvNext::kUpdateSweep) {
        UpdateSweep(rq);
      }
      return f.did;
    }
    // Nothing reaches the RNIC before RTR: no message can arrive before
    // it, and RTR is where the receive mode is chosen (ChooseReceiveMode).
    // A receive posted whole in INIT and then matched to an announced
    // message of another size would fail it (RDMA CM applications and
    // kernel ULPs post their receives in INIT).
    if (qp->state == QpState::kReset || qp->state == QpState::kInit) {
      Unlink(rq);
      return false;
    }
    // Announced: only what the local sender described is posted.
    if (rq.announced) return PostAnnounced(rq);
  }
  uint32_t prod = 0;
  if (!rq.ring.LoadProducer(&prod)) {
    if (qp != nullptr) {
      errors_.RingError(*qp);
    } else {
      Unlink(rq);  // a broken SRQ ring: stop reading it
    }
    return true;
  }
  const VmContext& vm = qp ? *qp->vm : *rq.srq->vm;
  const uint32_t pd = qp ? qp->pd : rq.srq->pd;
  const uint32_t handle = qp ? qp->handle : rq.srq->handle;
  const CookieKind kind = qp ? CookieKind::kRecv : CookieKind::kSrqRecv;
  alignas(64) uint8_t header[kRecvWqeHeaderBytes];
  alignas(64) uint8_t payload[kMaxRecvPayloadBytes];
  bool did = false;
  int n = 0;
  // Posts the batch; false when the RNIC took fewer (they stay in the ring).
  auto post = [&]() -> bool {
    if (n == 0) return true;
    Status err = Status::kOk;
    std::span<const RecvWr> wrs(recv_batch_.data(), n);
    const int k = qp ? rnic_.PostRecv(qp->rnic, wrs, &err)
                     : rnic_.PostSrqRecv(rq.srq->rnic, wrs, &err);
    const bool all = k == n;
    n = 0;
    if (k <= 0) return all;
    rq.head = (rq.head + k) & rq.ring.mask();
    rq.posted += k;
    if (qp) completions_.Expect(*qp->recv_cq, k);
    did = true;
    return all;
  };
  uint32_t next = rq.head;
  while (next != prod && rq.posted + n < rq.depth) {
    const uint8_t* elem = rq.ring.element(next);
    std::memcpy(header, elem, kRecvWqeHeaderBytes);
    RecvWr& wr = recv_batch_[n];
    uint32_t payload_bytes = 0;
    WcStatus st = DecodeRecvHeader(header, rq.limits, &wr, &payload_bytes);
    if (st == WcStatus::kSuccess) {
      std::memcpy(payload, elem + kRecvWqeHeaderBytes, payload_bytes);
      st = DecodeRecvPayload(payload, &wr);
      if (st == WcStatus::kSuccess) st = CheckRecvSemantics(pd, qp, vm, wr);
    }
    if (st != WcStatus::kSuccess) {
      const uint64_t wr_id = wr.wr_id;
      if (!post()) break;
      FailRecv(rq, next, wr_id, st);
      if (qp != nullptr) return true;  // QP in ERR; the ring is flushed next
      next = rq.head;
      did = true;
      continue;
    }
    rq.wr_ids[next] = wr.wr_id;
    rq.slots[next] = RecvSlot{};
    rq.slots[next].posted = 1;
    rq.slots[next].closed = true;
    wr.wr_id = MakeCookie(handle, kind, next);
    ++n;
    next = rq.ring.Next(next);
    if (n == kRecvBatch && !post()) break;
  }
  (void)post();
  UpdateSweep(rq);
  return did;
}

void RecvPath::FailRecv(RecvQueue& rq, uint32_t slot, uint64_t guest_wr_id,
                        WcStatus status) {
  if (QpObj* qp = rq.qp) {
    ++qp->vm->stats.wqes_rejected;
    errors_.EnterError(*qp);
    // Older receives (flushed) first.
    completions_.Poll(*qp->recv_cq, /*drain=*/true);
    completions_.WriteErrorCqe(*qp->recv_cq, guest_wr_id, qp->qpn,
                               WcOpcode::kRecv, status);
  } else {
    ++rq.srq->vm->stats.wqes_rejected;
  }
  rq.head = rq.ring.Next(slot);
  MarkRecvDone(rq, slot);
}

void RecvPath::UpdateSweep(RecvQueue& rq) {
  const bool runnable = rq.srq != nullptr || (rq.qp->state != QpState::kReset &&
                                               rq.qp->state != QpState::kInit);
  if (runnable && rq.posted < rq.low_watermark) {
    sweep_rq_.PushBack(&rq);
  } else {
    sweep_rq_.Remove(&rq);
  }
}

bool RecvPath::SweepSome() {
  bool did = false;
  RecvQueue* first = nullptr;
  for (uint32_t i = 0; i < sweep_budget_ && !sweep_rq_.empty(); ++i) {
    RecvQueue* rq = sweep_rq_.front();
    if (rq == first) break;  // went round once
    if (first == nullptr) first = rq;
    sweep_rq_.Remove(rq);
    did |= Replenish(*rq);  // re-adds it at the back while still low
  }
  return did;
}

void RecvPath::Unlink(RecvQueue& rq) {
  sweep_rq_.Remove(&rq);
  ready_rq_.Remove(&rq);
  errors_.Forget(rq);
}

void RecvPath::Reset(QpObj& qp) {
  if (qp.srq != nullptr) return;
  RecvQueue& rq = qp.rq;
  Unlink(rq);
  completions_.Retire(*qp.recv_cq, rq.posted);
  rq.posted = 0;
  rq.head = rq.consumer;  // those WQEs get posted again later
  std::fill(rq.done.begin(), rq.done.end(), 0);
  std::fill(rq.slots.begin(), rq.slots.end(), RecvSlot{});
  rq.plan_head = rq.plan_count = 0;
  rq.open = false;
  rq.announced = false;  // chosen again at RTR
}

void RecvPath::PrepareDestination(const QpObj& qp, uint32_t remote_qpn) {
  const uint32_t qpn = qp.type == QpType::kUd ? remote_qpn : qp.attrs.dest_qpn;
  // Null: not a QP of this engine (a remote peer).
  QpObj* dest = vms_.FindAnyQp(qpn);
  if (dest == nullptr || dest == &qp) return;
  RecvQueue& rq = dest->srq ? dest->srq->rq : dest->rq;
  if (dest->srq == nullptr && dest->state == QpState::kErr) return;
  (void)Replenish(rq);
}

bool RecvPath::PrepareReceive(QpObj& qp, const sched::ReceivePiece& piece) {
  if (QpObj* dest = LocalPeer(qp);
      dest != nullptr && dest->srq == nullptr && dest->rq.announced &&
      dest->state != QpState::kErr) {
    // Receive credits (docs/scheduler.md): under a policy that holds sends,
    // a message waits here for its receive rather than meeting RNR on the
    // RNIC; only for a sender that retries RNR forever (rnr_retry 7), whose
    // wait is then the same as natively.
    const bool hold = piece.credited && qp.attrs.rnr_retry >= 7;
    if (AnnounceReceive(dest->rq, piece, hold)) return true;
    if (hold && piece.first) ++qp.vm->stats.sends_held_for_receive;
    return false;
  }
  // Receives posted ahead: make sure what the guest posted is on the RNIC.
  if (piece.first) PrepareDestination(qp, piece.remote_qpn);
  return true;
}

}  // namespace vrdma::engine
