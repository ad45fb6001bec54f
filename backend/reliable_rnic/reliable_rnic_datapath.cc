// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic's data path (reliable_rnic.h): no allocation, no lock. In
// native mode a post goes to the lower QP as it is; once a peer link is
// attached (uc mode, step 11) a send post looks its QP up and a framed
// QP's WRs go to its connection's Sender; with a framed QP, PollCq hands
// its lower RC QP's completions (atomics, step 13) to that Sender.
#include <algorithm>
#include <span>

#include "backend/reliable_rnic/reliable_rnic.h"

namespace vrdma {

int ReliableRnic::PostSend(RnicQp qp, std::span<const SendWr> wrs,
                           Status* first_error) {
  if (link_ != nullptr) {
    reliable::VirtualQp* v = qps_.Find(qp.id);
    // A switch agreed by both ends (§6): held until the new path runs.
    if (v != nullptr && v->sw != nullptr && v->sw->holding()) {
      return v->sw->held.Hold(wrs, first_error, clock_());
    }
    // rc mode (§5): the path keeps a copy and posts to the QP in use.
    if (v != nullptr && v->rc != nullptr) {
      return v->rc->Post(wrs, first_error, clock_());
    }
    if (v != nullptr && v->conn != nullptr &&
        v->conn->state() != reliable::ConnState::kNative) {
      return v->conn->sender().Post(wrs, first_error);
    }
  }
  return lower_.PostSend(qp, wrs, first_error);
}

uint32_t ReliableRnic::PieceGranule(RnicQp qp) const {
  if (link_ != nullptr) {
    const reliable::VirtualQp* v = qps_.Find(qp.id);
    if (v != nullptr && CurrentMode(*v) == reliable::QpMode::kUc) {
      return static_cast<uint32_t>(reliable::kUnitSize);
    }
  }
  return lower_.PieceGranule(qp);
}

int ReliableRnic::PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
                           Status* first_error) {
  if (link_ != nullptr) {
    reliable::VirtualQp* v = qps_.Find(qp.id);
    if (v != nullptr && v->rq != nullptr && v->rq->holding()) {
      // The layer keeps them (step 12): until the QP's mode is known, and
      // in uc mode, where its receiver fills them by copy.
      reliable::VirtualCq* cq = cqs_.Find(v->recv_cq.id);
      const int n =
          v->rq->Post(wrs, first_error, qp.qpn,
                      cq != nullptr ? cq->synthesized.get() : nullptr);
      if (n > 0 && v->conn != nullptr &&
          v->conn->state() == reliable::ConnState::kUc) {
        v->conn->receiver().OnRecvPosted(clock_());
      }
      // rc mode: posted to the QP in use, the copy kept (not while a
      // switch takes the path's receives back: the new path posts them).
      if (n > 0 && v->rc != nullptr &&
          (v->sw == nullptr ||
           v->sw->state != reliable::ModeSwitch::State::kTakeBack)) {
        v->rc->OnRecvPosted();
      }
      return n;
    }
    if (v != nullptr && v->rq != nullptr) {
      // Native with a peer: recorded as well (§6 takes them back).
      const int n = lower_.PostRecv(qp, wrs, first_error);
      if (n > 0) v->rq->Shadow(wrs.first(static_cast<size_t>(n)));
      return n;
    }
  }
  return lower_.PostRecv(qp, wrs, first_error);
}

int ReliableRnic::PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs,
                              Status* first_error) {
  return lower_.PostSrqRecv(srq, wrs, first_error);
}

int ReliableRnic::PollCq(RnicCq cq, std::span<Completion> out) {
  int n = 0;
  // A CQ the layer does not know is the lower's to answer for.
  if (reliable::VirtualCq* v = cqs_.Find(cq.id);
      v != nullptr && !v->synthesized->empty()) {
    n = v->synthesized->Pop(out);
    if (static_cast<size_t>(n) == out.size()) return n;
  }
  const int lower = lower_.PollCq(cq, out.subspan(n));
  if (lower < 0) return n > 0 ? n : lower;
  if (framed_ == 0 && rc_framed_ == 0 && switching_ == 0) return n + lower;
  bool taken = false;
  int kept = n + KeepGuestCompletions(out.subspan(n, lower), &taken);
  if (taken && static_cast<size_t>(kept) < out.size()) {
    if (reliable::VirtualCq* v = cqs_.Find(cq.id); v != nullptr) {
      kept += v->synthesized->Pop(out.subspan(kept));
    }
  }
  return kept;
}

int ReliableRnic::KeepGuestCompletions(std::span<Completion> c, bool* taken) {
  // uc mode posts only atomics on a framed QP's lower RC QP (step 13):
  // their completions are its Sender's, which reports them in post order
  // through the ring. rc mode (§5): every completion of a path's lower QPs
  // is the path's, reported in post order through the rings.
  int kept = 0;
  const uint64_t now = rc_framed_ > 0 ? clock_() : 0;
  for (Completion& x : c) {
    // A switching QP's markers and the flushes its switch caused (§6).
    if (switching_ > 0) {
      reliable::VirtualQp* v = FindQpByQpn(x.qpn);
      if (v == nullptr && rc_framed_ > 0) {  // an rc path's backup
        const reliable::RcPath* p = FindRcPath(x.qpn);
        if (p != nullptr) v = FindQpByQpn(p->vqpn());
      }
      if (v != nullptr && v->sw != nullptr && SwitchTakes(*v, x)) {
        *taken = true;
        continue;
      }
    }
    if (reliable::RcPath* p = FindRcPath(x.qpn); p != nullptr) {
      p->OnCompletion(x, now);
      *taken = true;
      continue;
    }
    reliable::Connection* k = FindConnection(x.qpn);
    if (k != nullptr && k->state() == reliable::ConnState::kUc) {
      k->sender().OnAtomicCompletion(x);
      *taken = true;
      continue;
    }
    c[kept++] = x;
  }
  return kept;
}

bool ReliableRnic::PushSynthesized(RnicCq cq, const Completion& c) {
  reliable::VirtualCq* v = cqs_.Find(cq.id);
  return v != nullptr && v->synthesized->Push(c);
}

// The lower's events, less those of the layer's own QPs and CQs (uc mode).
bool ReliableRnic::PollAsyncEvent(AsyncEvent* ev) {
  while (lower_.PollAsyncEvent(ev)) {
    if (link_ == nullptr || !IsLayerEvent(*ev)) return true;
    ++counters_.layer_async_events;
  }
  return false;
}

// The lower's work, then uc mode's (reliable_rnic_uc.cc): the ACK CQ, the
// transport CQ, timers and every connection (§4.1); busy while anything
// is in flight (§2.1).
bool ReliableRnic::Progress() {
  const bool lower = lower_.Progress();
  if (link_ == nullptr) return lower;
  const bool uc = ProgressUc();
  return lower || uc;
}

uint64_t ReliableRnic::NextTimedWorkNs() const {
  uint64_t at = lower_.NextTimedWorkNs();
  if (link_ == nullptr) return at;
  at = std::min({at, active_.next_due(), next_hello_ns_});
  if (framed_ > 0) at = std::min(at, next_sweep_ns_);
  if (rc_framed_ > 0) at = std::min(at, next_rc_sweep_ns_);
  return at;
}

}  // namespace vrdma
