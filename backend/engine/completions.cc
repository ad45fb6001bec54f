// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RNIC completions -> guest CQEs (struct ib_uverbs_wc in the guest's CQ
// ring), CQ notifications, async events. Data-path thread only.
//
// Which CQs are polled: active_cq_ holds the CQs that may have completions:
// expected > 0 (WRs on the RNIC that complete into it: sends consumed and
// not retired, receives posted and not completed) or srq_listeners > 0.
// An idle CQ is never polled. A send CQ stays active while unsignaled WRs
// are unretired (only a later signaled completion or a flush retires them).
//
// CQ ring protocol: the host owns the producer index (kept in CqObj::prod,
// never read back from the guest), writes the 48-byte CQE into the slot,
// then stores the producer with release. The guest's consumer index is
// acquire-loaded and checked; a full ring (or an impossible consumer index)
// is a CQ overflow: VIRTIO_RDMA_EV_CQ_ERR once, and this and later CQEs
// are dropped (an overflowed CQ is in error, as in IB).
//
// Host CQ errors: host CQs are sized so they cannot overflow (cq_sizing.h),
// but if the RNIC reports one in error anyway (Rnic::PollAsyncEvent,
// kCqError) the completions it owed are lost: the guest CQ gets CQ_ERR,
// every QP completing into it goes to ERR with QP_FATAL (counted in
// VmStats::rnic_cq_errors), and the QPs' flush reports what was in flight
// as kWrFlushErr (the stage stops waiting for it, so the loop goes idle).
// The CQ takes no QP again (kBadState).
//
// Notifications: an armed CQ raises VIRTIO_RDMA_EV_CQ_COMP once on the
// next CQE (or, when armed for solicited only, on the next receive or error
// CQE: rnic.h's Completion carries no solicited bit, so every receive
// completion counts as possibly solicited: a spurious wake-up is harmless,
// a missed one is not) and disarms.
#include <algorithm>
#include <cstring>

#include "backend/engine/engine_impl.h"

namespace vrdma::engine {

void EngineImpl::Event(VmContext& vm, uint32_t type, uint32_t handle) {
  if (vm.sink == nullptr) return;
  vm.sink->OnEvent(type, handle);
  events_pending_.PushBack(&vm);
}

bool EngineImpl::PollRnicEvents() {
  bool did = false;
  AsyncEvent ev;
  // A few per turn: each is O(the CQs of all VMs), and rare.
  for (int i = 0; i < 4 && rnic_.PollAsyncEvent(&ev); ++i) {
    if (ev.type != AsyncEvent::Type::kCqError) continue;
    CqObj* hit = nullptr;
    vms_.ForEach([&](uint32_t, VmContext& vm) {
      vm.cqs.ForEach([&](uint32_t, CqObj& cq) {
        if (hit == nullptr && cq.rnic.id == ev.id) hit = &cq;
      });
    });
    if (hit != nullptr) FailHostCq(*hit);  // else: the probe CQ, or gone
    did = true;
  }
  return did;
}

void EngineImpl::FailHostCq(CqObj& cq) {
  if (cq.rnic_failed) return;
  cq.rnic_failed = true;
  VmContext& vm = *cq.vm;
  ++vm.stats.rnic_cq_errors;
  Event(vm, VIRTIO_RDMA_EV_CQ_ERR, cq.handle);
  vm.qps.ForEach([&](uint32_t, QpObj& qp) {
    if (qp.send_cq != &cq && qp.recv_cq != &cq) return;
    const bool first = qp.state != QpState::kErr;
    EnterError(qp);  // its flush ends what the stage and the CQ were owed
    if (first) Event(vm, VIRTIO_RDMA_EV_QP_FATAL, qp.qpn);
  });
}

void EngineImpl::FlushEvents() {
  while (VmContext* vm = events_pending_.PopFront()) vm->sink->FlushEvents();
}

void EngineImpl::Expect(CqObj& cq, uint64_t n) {
  cq.expected += n;
  active_cq_.PushBack(&cq);
}

void EngineImpl::Retire(CqObj& cq, uint64_t n) {
  cq.expected -= std::min(n, cq.expected);
}

bool EngineImpl::WriteCqe(CqObj& cq, const ib_uverbs_wc& wc, bool solicited) {
  if (cq.overflowed) {
    ++cq.dropped;
    return false;
  }
  uint32_t consumer = 0;
  if (!cq.ring.LoadConsumer(&consumer) || cq.ring.Next(cq.prod) == consumer) {
    cq.overflowed = true;
    ++cq.dropped;
    Event(*cq.vm, VIRTIO_RDMA_EV_CQ_ERR, cq.handle);
    return false;
  }
  std::memcpy(cq.ring.element(cq.prod), &wc, sizeof(wc));
  cq.prod = cq.ring.Next(cq.prod);
  cq.ring.StoreProducer(cq.prod);  // release: the CQE is visible first
  ++cq.vm->stats.cqes_written;
  if (cq.armed == CqObj::kArmNext ||
      (cq.armed == CqObj::kArmSolicited && solicited)) {
    cq.armed = 0;
    Event(*cq.vm, VIRTIO_RDMA_EV_CQ_COMP, cq.handle);
  }
  return true;
}

void EngineImpl::WriteErrorCqe(CqObj& cq, uint64_t wr_id, uint32_t qpn,
                               WcOpcode op, WcStatus status) {
  ib_uverbs_wc wc{};
  wc.wr_id = wr_id;
  wc.status = static_cast<uint32_t>(status);
  wc.opcode = static_cast<uint32_t>(op);
  wc.qp_num = qpn;
  wc.port_num = 1;
  (void)WriteCqe(cq, wc, /*solicited=*/true);
}

bool EngineImpl::PollRnicCq(CqObj& cq, bool drain) {
  bool any = false;
  for (;;) {
    const int n = rnic_.PollCq(cq.rnic, poll_batch_);
    for (int i = 0; i < n; ++i) HandleCompletion(cq, poll_batch_[i]);
    any |= n > 0;
    if (!drain || n < kPollBatch) break;
  }
  if (cq.expected == 0 && cq.srq_listeners == 0) active_cq_.Remove(&cq);
  return any;
}

void EngineImpl::NoteRnicError(QpObj& qp) {
  // The RNIC moved the QP to ERR itself; flush our side on the next turn
  // (not here: this runs inside a CQ batch).
  qp.state = QpState::kErr;
  pending_sq_.PushBack(&qp);
  if (qp.srq == nullptr) ready_rq_.PushBack(&qp.rq);
}

void EngineImpl::HandleCompletion(CqObj& cq, const Completion& c) {
  VmContext& vm = *cq.vm;
  const uint32_t handle = CookieHandle(c.wr_id);
  if (CookieKindOf(c.wr_id) == CookieKind::kSend) {
    // The stage matches it to its piece and reports the guest WRs it
    // finishes (OnWrDone, engine_sched.cc).
    QpObj* qp = vm.qps.Lookup(handle);
    if (qp == nullptr) {
      ++cq.dropped;  // QP destroyed since
      return;
    }
    stage_.OnCompletion(qp->flow, c, Now());
    return;
  }
  const uint32_t slot = CookieSlot(c.wr_id);
  ib_uverbs_wc wc{};
  wc.status = static_cast<uint32_t>(c.status);
  wc.opcode = static_cast<uint32_t>(c.opcode);
  wc.byte_len = c.byte_len;
  wc.ex.imm_data = c.imm_data;
  wc.qp_num = c.qpn;
  wc.src_qp = c.src_qpn;
  wc.wc_flags = c.wc_flags;
  wc.port_num = 1;
  const bool failed =
      c.status != WcStatus::kSuccess && c.status != WcStatus::kWrFlushErr;

  switch (CookieKindOf(c.wr_id)) {
    case CookieKind::kSend:
      break;  // handled above
    case CookieKind::kRecv: {
      QpObj* qp = vm.qps.Lookup(handle);
      if (qp == nullptr || qp->srq != nullptr || slot > qp->rq.ring.mask()) {
        ++cq.dropped;
        return;
      }
      RecvQueue& rq = qp->rq;
      wc.wr_id = rq.wr_ids[slot];
      wc.qp_num = qp->qpn;
      Retire(cq, 1);
      if (failed && qp->state != QpState::kErr) NoteRnicError(*qp);
      ready_rq_.PushBack(&rq);  // refill after this batch
      // A WQE filled in slices completes with its last one.
      if (CompleteRecvSlice(rq, slot, c, &wc)) {
        (void)WriteCqe(cq, wc, /*solicited=*/true);
      }
      return;
    }
    case CookieKind::kSrqRecv: {
      SrqObj* srq = vm.srqs.Lookup(handle);
      if (srq == nullptr || slot > srq->rq.ring.mask()) {
        ++cq.dropped;
        return;
      }
      wc.wr_id = srq->rq.wr_ids[slot];
      (void)CompleteRecvSlice(srq->rq, slot, c, &wc);  // always whole
      if (failed) {
        if (QpObj* qp = FindQp(vm, c.qpn);
            qp != nullptr && qp->state != QpState::kErr) {
          NoteRnicError(*qp);
        }
      }
      (void)WriteCqe(cq, wc, /*solicited=*/true);
      CheckSrqLimit(*srq);
      ready_rq_.PushBack(&srq->rq);
      return;
    }
  }
  ++cq.dropped;
}

}  // namespace vrdma::engine
