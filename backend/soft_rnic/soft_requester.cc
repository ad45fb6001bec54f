// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The requester (rxe's req.c and comp.c folded together, since a message
// here is delivered whole): Progress() walks the QPs that have work, runs
// each send queue in order, checks local SGEs, routes the message, hands it
// to the responder and turns the reply into completions, RNR waits or
// retransmit timeouts.
#include <algorithm>

#include "backend/soft_rnic/qp_state.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

// WQEs one QP may execute per Progress() call, so one busy QP cannot
// starve the others.
constexpr int kQpBudget = 32;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a + b < a ? ~uint64_t{0} : a + b;
}

bool NeedsLocalWrite(WrOpcode op) {
  return op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpSwp ||
         op == WrOpcode::kAtomicFetchAdd;
}

}  // namespace

bool SoftRnic::Progress() {
  // Called on every data-path turn: an idle RNIC (nothing to run, no timer
  // armed) returns before reading the clock, a vDSO call that was ~9% of
  // the daemon's profile under load.
  // With a fabric, packets may arrive at any time: it is polled always.
  if (fabric_ == nullptr && active_.head == nullptr &&
      next_deadline_ns_ == kNever) {
    return false;
  }
  uint64_t now = Now();
  bool did = PollFabric(now);
  if (now >= next_deadline_ns_) {
    // Some timer expired: move every expired QP to the active list and
    // find the next deadline. Deadlines are rare events (RNR, lost peer).
    uint64_t next = kNever;
    for (soft::Qp* q = timers_.head; q != nullptr;) {
      soft::Qp* after = q->next;
      if (q->req.wait_until_ns <= now) {
        Deactivate(q);
        Activate(q);
      } else if (q->req.wait_until_ns < next) {
        next = q->req.wait_until_ns;
      }
      q = after;
    }
    next_deadline_ns_ = next;
  }
  // Each QP active at entry gets one turn; QPs that still have work after
  // their turn go back to the tail for the next call.
  uint32_t turns = active_.count;
  bool wire_wait = false;
  for (uint32_t i = 0; i < turns && active_.head != nullptr; ++i) {
    soft::Qp* q = active_.head;
    if (WaitsForWire(q, now)) {
      // The wire is busy: this QP keeps its place at the head and goes
      // first when the wire frees, so the QPs share it in turn.
      wire_wait = true;
      break;
    }
    Deactivate(q);
    if (RunQp(q, now)) did = true;
  }
  // Waiting for the wire is a finite timer too: the RNIC is not idle; so
  // are packets in flight at its fabric port.
  return did || next_deadline_ns_ != kNever || wire_wait ||
         (fabric_ != nullptr && fabric_->NextEventNs().has_value());
}

bool SoftRnic::WaitsForWire(const soft::Qp* q, uint64_t now) const {
  return wire_.Busy(now) && q->state == QpState::kRts && !q->sq.empty();
}

void SoftRnic::ChargeWire(const soft::Qp* q, const SendWr& wr, uint64_t len,
                          Reply reply, uint64_t ready_ns) {
  if (!wire_.limited()) return;
  const uint32_t mtu = std::max<uint32_t>(
      q->type == QpType::kUd ? limits_.active_mtu_bytes : q->attr.path_mtu_bytes, 256);
  const bool read = wr.opcode == WrOpcode::kRdmaRead;
  const bool carries = !read && wr.opcode != WrOpcode::kAtomicCmpSwp &&
                       wr.opcode != WrOpcode::kAtomicFetchAdd;
  // The request's packets (a READ request or an atomic is one header).
  uint64_t bytes = soft::Wire::WireBytes(carries ? len : 0, mtu);
  // The RC responder's answer: a READ's data, else one ACK, NAK or atomic
  // result. A message that reached nobody is not answered.
  if (q->type == QpType::kRc && reply != Reply::kNoResponse) {
    bytes += soft::Wire::WireBytes(read && reply == Reply::kAck ? len : 0, mtu);
  }
  wire_.Send(ready_ns, bytes);
}


std::optional<uint64_t> SoftRnic::NextTimerNs() const {
  uint64_t next = kNever;
  for (const soft::Qp* q = timers_.head; q != nullptr; q = q->next) {
    if (q->req.wait_until_ns < next) next = q->req.wait_until_ns;
  }
  // With a line rate, QPs that have work wait for the wire to be free.
  if (active_.head != nullptr && wire_.limited()) {
    next = std::min(next, wire_.free_at());
  }
  if (fabric_ != nullptr) {
    if (std::optional<uint64_t> f = fabric_->NextEventNs()) {
      next = std::min(next, *f);
    }
  }
  if (next == kNever) return std::nullopt;
  return next;
}

bool SoftRnic::RunQp(soft::Qp* q, uint64_t now) {
  switch (q->state) {
    case QpState::kErr: {
      // Work posted after the QP entered ERR completes with flush errors.
      bool any = !q->sq.empty() || !q->rq.empty();
      FlushSq(q);
      FlushRq(q);
      return any;
    }
    case QpState::kSqe: {
      bool any = !q->sq.empty();
      FlushSq(q);
      return any;
    }
    case QpState::kRts:
      break;
    default:
      // SQD (and anything else): hold the queue until the QP is in RTS.
      return false;
  }
  // RC to another host: packets, several WQEs in flight (net/).
  if (IsNetRc(q)) return RunNetRc(q, now);
  bool did = false;
  for (int budget = kQpBudget;
       budget > 0 && q->state == QpState::kRts && !q->sq.empty(); --budget) {
    // A busy wire ends the turn (Progress let it start on a free one).
    if (wire_.Busy(now)) break;
    if (!ExecuteHead(q, now, &did)) break;
  }
  if (q->state == QpState::kRts && !q->sq.empty()) {
    if (q->req.wait != soft::RequesterState::Wait::kNone &&
        now < q->req.wait_until_ns) {
      Park(q);
    } else {
      Activate(q);
    }
  }
  return did;
}

void SoftRnic::RetireHead(soft::Qp* q, WcStatus status, uint64_t now) {
  const SendWr& wr = q->sq.front().wr;
  bool signaled = q->sq_sig_all || (wr.send_flags & kSendSignaled) != 0;
  if (status != WcStatus::kSuccess || signaled) {
    Completion c;
    c.wr_id = wr.wr_id;
    c.status = status;
    c.opcode = SendCompletionOpcode(wr.opcode);
    if (status == WcStatus::kSuccess) {
      c.byte_len = static_cast<uint32_t>(wr.total_length());
    }
    c.qpn = q->qpn;
    c.timestamp_ns = now;
    PushCompletion(q->send_cq, c);
  }
  q->sq.Pop();
  q->req = {};
}

void SoftRnic::FailHead(soft::Qp* q, WcStatus status, uint64_t now) {
  RetireHead(q, status, now);
  // IBA 10.3: a send error takes an RC QP to ERR, a UC/UD QP to SQE (its
  // receive side keeps working). Either way the rest of the SQ flushes.
  if (q->type == QpType::kRc) {
    EnterError(q);
  } else {
    EnterSqError(q);
  }
}

soft::Qp* SoftRnic::Route(const soft::Qp* q, const soft::SqSlot& slot) const {
  const bool ud = q->type == QpType::kUd;
  const Gid& sgid = ud ? slot.ud_av.sgid : q->attr.av.sgid;
  const Gid& dgid = ud ? slot.ud_av.dgid : q->attr.av.dgid;
  if (!GidRegistered(sgid) || !GidRegistered(dgid)) return nullptr;
  uint32_t dqpn = ud ? slot.wr.remote_qpn : q->attr.dest_qpn;
  soft::Qp* d = qps_.Get(dqpn & 0xffffff);
  if (d == nullptr || d->type != q->type) return nullptr;
  if (!ud) {
    // A connected QP only accepts its own peer on its own path.
    if (d->attr.dest_qpn != q->qpn || d->attr.av.dgid != sgid ||
        d->attr.av.sgid != dgid) {
      return nullptr;
    }
  }
  return d;
}

bool SoftRnic::ExecuteHead(soft::Qp* q, uint64_t now, bool* did_work) {
  using Wait = soft::RequesterState::Wait;
  soft::SqSlot& slot = q->sq.front();
  soft::RequesterState& rs = q->req;
  if (!rs.started) {
    rs.started = true;
    rs.rnr_left = q->attr.rnr_retry;
    rs.retry_left = q->attr.retry_cnt;
    rs.wait = Wait::kNone;
  } else if (rs.wait != Wait::kNone) {
    if (now < rs.wait_until_ns) return false;
    if (rs.wait == Wait::kAckTimeout) {
      if (rs.retry_left == 0) {
        *did_work = true;
        FailHead(q, WcStatus::kRetryExcErr, now);
        return false;
      }
      --rs.retry_left;
    }
    rs.wait = Wait::kNone;
  }
  *did_work = true;

  const SendWr& wr = slot.wr;
  if (IsLocalOp(wr.opcode)) {
    // Local operations (rxe's do_local_ops): no message, in SQ order. A
    // failure takes the QP to ERR whatever its type, as on rxe.
    const WcStatus st = ExecuteLocalOp(q, wr);
    RetireHead(q, st, now);
    if (st != WcStatus::kSuccess) {
      EnterError(q);
      return false;
    }
    return true;
  }
  const uint64_t len = wr.total_length();
  if (len > limits_.max_msg_sz ||
      (q->type == QpType::kUd && len > limits_.active_mtu_bytes)) {
    FailHead(q, WcStatus::kLocLenErr, now);
    return false;
  }
  SegList local;
  if (wr.send_flags & kSendInline) {
    if (len > 0) {
      local.segs[0] =
          Seg{const_cast<uint8_t*>(wr.inline_data), static_cast<uint32_t>(len)};
      local.n = 1;
      local.total = len;
    }
  } else {
    uint32_t need =
        NeedsLocalWrite(wr.opcode) ? uint32_t{kAccessLocalWrite} : 0u;
    WcStatus st = ResolveLocal(q->pd, wr.sge.data(), wr.num_sge, need, &local);
    if (st != WcStatus::kSuccess) {
      FailHead(q, st, now);
      return false;
    }
  }

  if (OnFabric(q, slot)) {
    // Unreliable, to another host: sent as packets, complete when the
    // last is sent. With a line rate the packets queue on the wire from
    // when the message was ready (net/net_wire.h).
    NetSend(q, slot, local,
            wire_.limited() ? std::max(slot.posted_ns, rs.wait_until_ns) : now);
    RetireHead(q, WcStatus::kSuccess, now);
    return true;
  }
  soft::Qp* d = Route(q, slot);
  ExecResult r;
  if (d == nullptr) {
    r.reply = Reply::kNoResponse;
  } else {
    r = Respond(q, slot, d, local, now);
  }
  // The message was ready when posted, or when its retry timer expired.
  ChargeWire(q, wr, len, r.reply, std::max(slot.posted_ns, rs.wait_until_ns));
  if (q->type != QpType::kRc) {
    // Unreliable: the requester never learns what happened to the message.
    RetireHead(q, WcStatus::kSuccess, now);
    if (r.responder_error) EnterError(d);
    return true;
  }

  switch (r.reply) {
    case Reply::kAck:
      RetireHead(q, WcStatus::kSuccess, now);
      // Acknowledged, yet the responder failed after executing (a
      // SEND_WITH_INV whose rkey it could not invalidate: rxe's class J).
      if (r.responder_error && d->state != QpState::kErr) {
        EnterError(d);
      }
      return true;
    case Reply::kRnr:
      if (q->attr.rnr_retry != soft::kInfiniteRnrRetry) {
        if (rs.rnr_left == 0) {
          FailHead(q, WcStatus::kRnrRetryExcErr, now);
          return false;
        }
        --rs.rnr_left;
      }
      // The RNR NAK carries the responder's minimum RNR timer.
      rs.wait = Wait::kRnr;
      rs.wait_until_ns =
          SaturatingAdd(now, soft::RnrTimerNs(d->attr.min_rnr_timer));
      return false;
    case Reply::kNoResponse:
      rs.wait = Wait::kAckTimeout;
      rs.wait_until_ns =
          SaturatingAdd(now, soft::AckTimeoutNs(q->attr.timeout));
      return false;
    case Reply::kNakInvReq:
    case Reply::kNakAccess:
    case Reply::kNakRemOp: {
      WcStatus st = r.reply == Reply::kNakInvReq   ? WcStatus::kRemInvReqErr
                    : r.reply == Reply::kNakAccess ? WcStatus::kRemAccessErr
                                                   : WcStatus::kRemOpErr;
      // Requester first: if d == q the responder's ERR flush must not
      // complete this WQE a second time.
      FailHead(q, st, now);
      if (r.responder_error && d->state != QpState::kErr) EnterError(d);
      return false;
    }
  }
  return false;
}

}  // namespace vrdma
