// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Receive queues and SRQs on the data path.
//
// librxe posts receive WQEs with no doorbell: it writes the WQE and stores
// the producer index, nothing else. The engine therefore pulls receive
// WQEs lazily and posts them to the RNIC ("replenish"):
//   1. when the QP enters RTR (WQEs posted while in RESET/INIT), and when
//      an SRQ is created;
//   2. after every receive completion of the queue (the completion handler
//      puts the queue on ready_rq_, replenished later in the same turn):
//      the producer index is read once and every new WQE is posted, up to
//      the RNIC queue depth (high watermark = ring capacity, clamped to the
//      RNIC's max_qp_wr / max_srq_wr);
//   3. on the optional RQ / SRQ doorbell;
//   4. before a WR that consumes a receive (SEND, SEND_WITH_IMM,
//      WRITE_WITH_IMM) is posted to a QP of this engine (qpn_owner_), the
//      destination's RQ/SRQ is replenished (PrepareDestination): a receive
//      posted before the send was posted is on the RNIC when the message
//      arrives, as on a real RNIC that reads the RQ at arrival (UD would
//      otherwise drop it);
//   5. a round-robin sweep, at most sweep_budget queues at the start of each
//      PollOnce, over queues whose RNIC-side posted count is below a low
//      watermark (half the depth): this catches WQEs posted while nothing
//      was in flight (and receives for peers on other hosts).
// So a busy queue costs O(1) per received message (one producer load per
// completion, amortised over the WQEs found), an idle queue costs at most
// one index load per sweep visit, and a queue at or above its low
// watermark costs nothing.
//
// The guest's RQ consumer index advances only when a WQE is finished
// (completed by the RNIC, flushed, or rejected), in ring order (done[]
// marks completed slots; the index moves over the finished prefix), so the
// guest can never overwrite a buffer the RNIC may still write into.
//
// When the only sender is a local QP, the queue is fed "announced"
// instead: only what the sender's stage described (datapath_recv_slices.cc).
//
// A receive WQE that fails checks (bad lkey, MR of another PD, no
// LOCAL_WRITE, range outside the MR, too many SGEs) completes with an error
// CQE after the older receives and moves the QP to ERR. On an SRQ there is
// no QP to fail: the WQE is skipped (its slot released, counted in
// wqes_rejected). A QP in ERR flushes its ring WQEs with kWrFlushErr.
//
// Receive CQs: a CQ is polled while the RNIC holds receives that complete
// into it (expected > 0) or while a QP with an SRQ receives into it
// (srq_listeners > 0), because a receive completion can arrive at any time.
#include <algorithm>
#include <cstring>

#include "backend/engine/engine_impl.h"

namespace vrdma::engine {

WcStatus EngineImpl::CheckRecvSemantics(uint32_t pd, const VmContext& vm,
                                        RecvWr& wr) const {
  int kept = 0;
  for (int i = 0; i < wr.num_sge; ++i) {
    const Sge s = wr.sge[i];
    if (s.length == 0) continue;
    std::optional<uint32_t> h = vm.lkey_to_mr.Find(s.lkey);
    const MrObj* mr = h ? vm.mrs.Lookup(*h) : nullptr;
    if (mr == nullptr || mr->pd != pd || !(mr->access & kAccessLocalWrite)) {
      return WcStatus::kLocProtErr;
    }
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

void EngineImpl::MarkRecvDone(RecvQueue& rq, uint32_t slot) {
  rq.done[slot & rq.ring.mask()] = 1;
  uint32_t c = rq.consumer;
  while (c != rq.head && rq.done[c]) {
    rq.done[c] = 0;
    c = rq.ring.Next(c);
  }
  if (c != rq.consumer) {
    rq.consumer = c;
    rq.ring.StoreConsumer(c);  // release: the guest may reuse these slots
  }
}

bool EngineImpl::ReplenishRecv(RecvQueue& rq) {
  QpObj* qp = rq.qp;
  if (qp != nullptr) {
    if (qp->state == QpState::kErr) return FlushRecvRing(rq);
    if (qp->state == QpState::kReset) {
      UnlinkRecv(rq);
      return false;
    }
    // Announced: only what the local sender described is posted.
    if (rq.announced) return PostAnnounced(rq);
  }
  uint32_t prod = 0;
  if (!rq.ring.LoadProducer(&prod)) {
    if (qp != nullptr) {
      RingError(*qp);
    } else {
      UnlinkRecv(rq);  // a broken SRQ ring: stop reading it
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
    if (qp) Expect(*qp->recv_cq, k);
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
      if (st == WcStatus::kSuccess) st = CheckRecvSemantics(pd, vm, wr);
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

void EngineImpl::FailRecv(RecvQueue& rq, uint32_t slot, uint64_t guest_wr_id,
                          WcStatus status) {
  if (QpObj* qp = rq.qp) {
    ++qp->vm->stats.wqes_rejected;
    EnterError(*qp);
    PollRnicCq(*qp->recv_cq, /*drain=*/true);  // older receives (flushed) first
    WriteErrorCqe(*qp->recv_cq, guest_wr_id, qp->qpn, WcOpcode::kRecv, status);
  } else {
    ++rq.srq->vm->stats.wqes_rejected;
  }
  rq.head = rq.ring.Next(slot);
  MarkRecvDone(rq, slot);
}

bool EngineImpl::FlushRecvRing(RecvQueue& rq) {
  QpObj& qp = *rq.qp;
  PollRnicCq(*qp.recv_cq, /*drain=*/true);  // the RNIC's flushed receives first
  CloseOpenWqe(rq);
  bool did = false;
  if (qp.recv_cq->rnic_failed && FlushLostReceives(rq, &did)) {
    flush_rq_.PushBack(&rq);  // budget spent: go on next turn
    return true;
  }
  uint32_t prod = 0;
  if (!rq.ring.LoadProducer(&prod)) {
    UnlinkRecv(rq);
    return did;
  }
  // Within the VM's flush budget, like the send ring (FlushSq).
  uint32_t& left = FlushLeft(*qp.vm);
  for (uint32_t n = 0; rq.head != prod && n < rq.ring.capacity() && left > 0;
       ++n, --left) {
    // Only what the CQE needs, copied once and decoded like any WQE.
    alignas(8) uint8_t copy[kRecvFlushBytes];
    std::memcpy(copy, rq.ring.element(rq.head), sizeof(copy));
    const FlushedWqe f = DecodeRecvFlush(copy);
    WriteErrorCqe(*qp.recv_cq, f.wr_id, qp.qpn, f.opcode,
                  WcStatus::kWrFlushErr);
    const uint32_t slot = rq.head;
    rq.head = rq.ring.Next(slot);
    MarkRecvDone(rq, slot);
    did = true;
  }
  UpdateSweep(rq);  // stays swept: WQEs posted in ERR are flushed too
  if (rq.head != prod) {
    ++qp.vm->stats.flush_deferred;
    flush_rq_.PushBack(&rq);  // budget spent: go on next turn
    return true;
  }
  return did;
}

bool EngineImpl::FlushLostReceives(RecvQueue& rq, bool* did) {
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
    Retire(cq, lost);
    slot = RecvSlot{};
    WriteErrorCqe(cq, rq.wr_ids[s], rq.qp->qpn, WcOpcode::kRecv,
                  WcStatus::kWrFlushErr);
    MarkRecvDone(rq, s);
    *did = true;
  }
  // Nothing more will come from it for this queue.
  if (cq.expected == 0 && cq.srq_listeners == 0) active_cq_.Remove(&cq);
  return false;
}

void EngineImpl::UpdateSweep(RecvQueue& rq) {
  const bool runnable = rq.srq != nullptr || rq.qp->state != QpState::kReset;
  if (runnable && rq.posted < rq.low_watermark) {
    sweep_rq_.PushBack(&rq);
  } else {
    sweep_rq_.Remove(&rq);
  }
}

bool EngineImpl::SweepRecv() {
  bool did = false;
  RecvQueue* first = nullptr;
  for (uint32_t i = 0; i < options_.sweep_budget && !sweep_rq_.empty(); ++i) {
    RecvQueue* rq = sweep_rq_.front();
    if (rq == first) break;  // went round once
    if (first == nullptr) first = rq;
    sweep_rq_.Remove(rq);
    did |= ReplenishRecv(*rq);  // re-adds it at the back while still low
  }
  return did;
}

void EngineImpl::UnlinkRecv(RecvQueue& rq) {
  sweep_rq_.Remove(&rq);
  ready_rq_.Remove(&rq);
  flush_rq_.Remove(&rq);
}

void EngineImpl::CheckSrqLimit(SrqObj& srq) {
  if (srq.limit == 0) return;
  uint32_t prod = 0;
  if (!srq.rq.ring.LoadProducer(&prod)) return;
  // WQEs the SRQ still holds: in the ring, posted or not, not completed.
  if (srq.rq.ring.Distance(srq.rq.consumer, prod) < srq.limit) {
    srq.limit = 0;  // one event per arming, as in IB
    Event(*srq.vm, VIRTIO_RDMA_EV_SRQ_LIMIT_REACHED, srq.handle);
  }
}

}  // namespace vrdma::engine
