// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Completions (completions.h): RNIC completions -> guest CQEs, CQ
// notifications, events, the RNIC's asynchronous errors. Data-path thread.
//
// Host CQ errors: host CQs are sized so they cannot overflow (cq_sizing.h),
// but if the RNIC reports one in error anyway (Rnic::PollAsyncEvent,
// kCqError) the completions it owed are lost: PollRnicEvents finds the CQ
// and hands it to ErrorFlush::FailHostCq (through CompletionListener).
#include "backend/engine/completions.h"

#include <algorithm>
#include <cstring>

#include "backend/engine/recv_queue.h"

namespace vrdma::engine {

void Completions::Event(VmContext& vm, uint32_t type, uint32_t handle) {
  if (vm.sink == nullptr) return;
  vm.sink->OnEvent(type, handle);
  events_pending_.PushBack(&vm);
}

void Completions::FlushEvents() {
  // The CQEs first: a notification must find them.
  while (CqObj* cq = unpublished_.PopFront()) cq->ring.StoreProducer(cq->prod);
  while (VmContext* vm = events_pending_.PopFront()) vm->sink->FlushEvents();
}

bool Completions::PollRnicEvents() {
  bool did = false;
  AsyncEvent ev;
  // A few per turn: each is O(the CQs of all VMs), and rare.
  for (int i = 0; i < 4 && rnic_.PollAsyncEvent(&ev); ++i) {
    did = true;
    if (ev.type == AsyncEvent::Type::kQpError) {
      // A physical RNIC put a QP in error outside any completion: the guest
      // hears the event, and the QP's work is flushed like after an error
      // completion. A QPN of no VM (the probe pair, or gone): ignored.
      VmContext* vm = nullptr;
      QpObj* qp = vms_.FindAnyQp(ev.id, &vm);
      if (qp == nullptr || vm == nullptr) continue;
      const uint32_t type = ev.detail == VIRTIO_RDMA_EV_QP_REQ_ERR ||
                                    ev.detail == VIRTIO_RDMA_EV_QP_ACCESS_ERR
                                ? ev.detail
                                : uint32_t{VIRTIO_RDMA_EV_QP_FATAL};
      Event(*vm, type, qp->qpn);
      if (qp->state != QpState::kErr) listener_.OnRnicQpError(*qp);
      continue;
    }
    if (ev.type != AsyncEvent::Type::kCqError) {
      // Port events reach every VM: they all share the host port.
      const uint32_t type = ev.type == AsyncEvent::Type::kPortActive
                                ? VIRTIO_RDMA_EV_PORT_ACTIVE
                            : ev.type == AsyncEvent::Type::kPortError
                                ? VIRTIO_RDMA_EV_PORT_ERR
                                : VIRTIO_RDMA_EV_GID_CHANGE;
      vms_.vms.ForEach([&](uint32_t, VmContext& vm) { Event(vm, type, 1); });
      continue;
    }
    CqObj* hit = nullptr;
    vms_.vms.ForEach([&](uint32_t, VmContext& vm) {
      vm.cqs.ForEach([&](uint32_t, CqObj& cq) {
        if (hit == nullptr && cq.rnic.id == ev.id) hit = &cq;
      });
    });
    if (hit != nullptr) listener_.OnHostCqError(*hit);  // else: the probe CQ, or gone
  }
  return did;
}

bool Completions::WriteCqe(CqObj& cq, const ib_uverbs_wc& wc, bool solicited) {
  if (cq.overflowed) {
    ++cq.dropped;
    return false;
  }
  // The guest's consumer index is read once per turn, and again whenever
  // the CQ looks full by the last value read: a read per CQE missed the
  // cache line the guest's polling keeps writing, once per CQE.
  if (cq.consumer_turn != turn_.count() ||
      cq.ring.Next(cq.prod) == cq.consumer_seen) {
    if (!cq.ring.LoadConsumer(&cq.consumer_seen) ||
        cq.ring.Next(cq.prod) == cq.consumer_seen) {
      cq.overflowed = true;
      ++cq.dropped;
      Event(*cq.vm, VIRTIO_RDMA_EV_CQ_ERR, cq.handle);
      return false;
    }
    cq.consumer_turn = turn_.count();
  }
  std::memcpy(cq.ring.element(cq.prod), &wc, sizeof(wc));
  cq.prod = cq.ring.Next(cq.prod);
  // The producer index is stored (release: the CQEs are visible first)
  // once per turn, in FlushEvents: the guest polls that index, and a store
  // per CQE moved its cache line between the cores once per CQE.
  unpublished_.PushBack(&cq);
  ++cq.vm->stats.cqes_written;
  ++cq.vm->stats.cqes_by_status[std::min(wc.status, kWcStatusCount)];
  if (cq.armed == CqObj::kArmNext ||
      (cq.armed == CqObj::kArmSolicited && solicited)) {
    cq.armed = 0;
    Event(*cq.vm, VIRTIO_RDMA_EV_CQ_COMP, cq.handle);
  }
  return true;
}

void Completions::WriteErrorCqe(CqObj& cq, uint64_t wr_id, uint32_t qpn,
                                WcOpcode op, WcStatus status) {
  ib_uverbs_wc wc{};
  wc.wr_id = wr_id;
  wc.status = static_cast<uint32_t>(status);
  wc.opcode = static_cast<uint32_t>(op);
  wc.qp_num = qpn;
  wc.port_num = 1;
  (void)WriteCqe(cq, wc, /*solicited=*/true);
}

void Completions::CheckSrqLimit(SrqObj& srq) {
  if (srq.limit == 0) return;
  uint32_t prod = 0;
  if (!srq.rq.ring.LoadProducer(&prod)) return;
  // WQEs the SRQ still holds: in the ring, posted or not, not completed.
  if (srq.rq.ring.Distance(srq.rq.consumer, prod) < srq.limit) {
    srq.limit = 0;  // one event per arming, as in IB
    Event(*srq.vm, VIRTIO_RDMA_EV_SRQ_LIMIT_REACHED, srq.handle);
  }
}

bool Completions::Poll(CqObj& cq, bool drain) {
  bool any = false;
  for (;;) {
    const int n = rnic_.PollCq(cq.rnic, poll_batch_);
    for (int i = 0; i < n; ++i) HandleCompletion(cq, poll_batch_[i]);
    any |= n > 0;
    if (!drain || n < kPollBatch) break;
  }
  Settle(cq);
  return any;
}

void Completions::HandleCompletion(CqObj& cq, const Completion& c) {
  VmContext& vm = *cq.vm;
  const uint32_t handle = CookieHandle(c.wr_id);
  if (CookieKindOf(c.wr_id) == CookieKind::kSend) {
    // The stage matches it to its piece and reports the guest WRs it
    // finishes (sched::StageOwner::OnWrDone -> SendPath).
    QpObj* qp = vm.qps.Lookup(handle);
    if (qp == nullptr) {
      ++cq.dropped;  // QP destroyed since
      return;
    }
    stage_.OnCompletion(qp->flow, c, turn_.Now());
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
      if (failed && qp->state != QpState::kErr) listener_.OnRnicQpError(*qp);
      listener_.OnRecvCompleted(rq);  // refill after this batch
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
        if (QpObj* qp = VmTable::FindQp(vm, c.qpn);
            qp != nullptr && qp->state != QpState::kErr) {
          listener_.OnRnicQpError(*qp);
        }
      }
      (void)WriteCqe(cq, wc, /*solicited=*/true);
      CheckSrqLimit(*srq);
      listener_.OnRecvCompleted(srq->rq);
      return;
    }
  }
  ++cq.dropped;
}

}  // namespace vrdma::engine
