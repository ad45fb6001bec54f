// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic's data path (reliable_rnic.h): no allocation, no lock. In
// native mode, the only mode there is yet, a post goes to the lower QP as
// it is; the framed modes (steps 11-17) add the QP's mode here, one branch
// per call.
#include <span>

#include "backend/reliable_rnic/reliable_rnic.h"

namespace vrdma {

int ReliableRnic::PostSend(RnicQp qp, std::span<const SendWr> wrs,
                           Status* first_error) {
  return lower_.PostSend(qp, wrs, first_error);
}

int ReliableRnic::PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
                           Status* first_error) {
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
  return n + lower;
}

bool ReliableRnic::PushSynthesized(RnicCq cq, const Completion& c) {
  reliable::VirtualCq* v = cqs_.Find(cq.id);
  return v != nullptr && v->synthesized->Push(c);
}

bool ReliableRnic::PollAsyncEvent(AsyncEvent* ev) {
  return lower_.PollAsyncEvent(ev);
}

// Later steps: the ACK CQ, the transport CQ, timers, then the QPs with
// work (§4.1); busy while anything is in flight (§2.1).
bool ReliableRnic::Progress() { return lower_.Progress(); }

}  // namespace vrdma
