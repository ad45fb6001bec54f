// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic's live mode switch (docs/reliability.md §6 "As built"; step
// 17): SetMode's per-QP start, SWITCH / DRAINED / READY, the drain of the
// old path, taking the guest's receives back, the new path, and the part
// of Progress() that runs the switches. The record is mode_switch.h.
//
// Threads: as uc mode, everything here runs where the lower's control
// calls share the data-path thread (AttachPeerLink); the lower RC QP's
// ERR, RESET, INIT, RTR, RTS and the data QP's connect run inline.
// Allocation happens in SetMode only (the record, its hold queue, the new
// Connection); the old Connection is freed by a later control call.
#include <algorithm>
#include <variant>

#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/reliable_rnic.h"

namespace vrdma {

using reliable::Connection;
using reliable::ConnState;
using reliable::ModeSwitch;
using reliable::QpMode;
using reliable::RcPath;
using reliable::RetryBudgetNs;
using reliable::VirtualQp;
using State = reliable::ModeSwitch::State;

namespace {

constexpr uint32_t kPsnMask = 0xffffff;

QpMode ModeOfReliability(ReliabilityMode m) {
  switch (m) {
    case ReliabilityMode::kRc:
      return QpMode::kRc;
    case ReliabilityMode::kUc:
      return QpMode::kUc;
    default:
      return QpMode::kNative;
  }
}

}  // namespace

QpMode ReliableRnic::CurrentMode(const VirtualQp& v) const {
  if (v.rc != nullptr) return QpMode::kRc;
  if (v.conn != nullptr && v.conn->state() != ConnState::kNative) {
    return QpMode::kUc;
  }
  return QpMode::kNative;
}

reliable::QpModeCounts ReliableRnic::QpModes(const Gid& first_gid) const {
  reliable::QpModeCounts n;
  const reliable::ReliabilityCounters* vm = VmCounters(first_gid);
  if (vm == nullptr) return n;
  qps_.ForEach([&](const VirtualQp& v) {
    if (v.type != QpType::kRc ||
        (v.attr.state != QpState::kRtr && v.attr.state != QpState::kRts)) {
      return;
    }
    bool mine = false;
    for (const ModeEntry& e : modes_) {
      if (e.gid == v.attr.av.sgid && e.counters == vm) mine = true;
    }
    if (!mine) return;
    if (v.sw != nullptr && v.sw->state != State::kIdle &&
        v.sw->state != State::kFailed) {
      ++n.switching;
      return;
    }
    switch (CurrentMode(v)) {
      case QpMode::kRc:
        ++n.rc;
        break;
      case QpMode::kUc:
        ++n.uc;
        break;
      default:
        ++n.native;
        break;
    }
  });
  return n;
}

// ---- Starting: SetMode (a control call) -----------------------------------

void ReliableRnic::StartSwitch(VirtualQp& v, ReliabilityMode mode) {
  if (link_ == nullptr || v.type != QpType::kRc || v.has_srq ||
      v.rq == nullptr) {
    return;
  }
  // In RTR the QP is framed for the mode its VM had then: asked at RTS.
  if (v.attr.state == QpState::kRtr) {
    v.mode_deferred = true;
    return;
  }
  if (v.attr.state != QpState::kRts) return;
  const std::optional<uint64_t> peer = link_->PeerOf(v.attr.av.dgid);
  if (!peer) return;  // no peer's layer: native whatever the mode
  // A QP in ERR is not switched; one still connecting, or switching (one
  // switch at a time), is once it is neither (Reconcile).
  if (v.rc != nullptr && v.rc->state() == RcPath::State::kFailed) return;
  if ((v.conn != nullptr && v.conn->state() == ConnState::kConnecting) ||
      (v.sw != nullptr && v.sw->holding())) {
    v.mode_deferred = true;
    return;
  }
  v.mode_deferred = false;
  const QpMode cur = CurrentMode(v);
  const QpMode to = ModeOfReliability(mode);
  if (v.sw == nullptr) {
    if (to == cur) return;
    v.sw = std::make_unique<ModeSwitch>(v.caps.max_send_wr,
                                        v.caps.max_inline_data);
  }
  ModeSwitch& s = *v.sw;
  FreeRetired();
  DropNextPaths(s);  // an earlier ask's
  const bool was_asked = s.state == State::kAsked;
  if (to == cur || (to == QpMode::kUc &&
                    v.caps.max_send_sge >= static_cast<uint32_t>(kMaxSge))) {
    // Nothing to do (a QP whose SGEs leave no room for the header cannot
    // be framed). An earlier ask is taken back: the peer's switch never
    // matches it.
    if (was_asked) {
      s.to = cur;
      s.my_token = 0;
      while (s.my_token == 0) s.my_token = static_cast<uint32_t>(token_rng_());
      SendSwitch(v);
      s.state = State::kIdle;
      for (uint32_t& id : switching_qps_) {
        if (id == v.lower.id) id = 0;
      }
      --switching_;
    }
    return;
  }
  auto free = std::find(switching_qps_.begin(), switching_qps_.end(), 0u);
  if (!was_asked && free == switching_qps_.end()) return;
  if (to == QpMode::kUc) {
    s.next_conn = NewConnection(v, *peer);
    if (s.next_conn == nullptr) return;  // no room: stays as it is
  }
  if (to == QpMode::kRc) {
    s.next_rc = NewRcPath(v, *peer);
    if (s.next_rc == nullptr) return;  // no room: stays as it is
  }
  if (!was_asked) {
    *free = v.lower.id;
    ++switching_;
  }
  s.from = cur;
  s.to = to;
  s.my_token = 0;
  if (s.next_conn != nullptr) {
    s.my_token = s.next_conn->my_token();  // the new data QP's token
  }
  if (s.next_rc != nullptr) s.my_token = s.next_rc->my_token();
  while (s.my_token == 0) s.my_token = static_cast<uint32_t>(token_rng_());
  s.drained_mine = s.flushes_done = s.peer_drained = s.peer_ready = false;
  s.ask_resent = false;
  s.send_marker_posted = s.recv_marker_posted = false;
  s.flushes = s.flushes_expected = 0;
  s.send_marker = token_rng_() | 1;
  s.recv_marker = token_rng_() | 1;
  s.state = State::kAsked;
  SendSwitch(v);
  ++CountersOf(v.attr.av.sgid).switches_asked;
  if (v.peer_ask.asked && v.peer_ask.to == to) BeginSwitch(v);
}

void ReliableRnic::Reconcile(VirtualQp& v, bool control_call) {
  if (!v.mode_deferred) return;
  v.mode_deferred = false;
  if (control_call) {
    StartSwitch(v, ModeOf(v.attr.av.sgid));
  } else {
    DueAsk(v);
  }
}

void ReliableRnic::DueAsk(VirtualQp& v) {
  if (v.ask_due) return;
  v.ask_due = true;
  ++asks_due_;
}

void ReliableRnic::RunDueAsks() {
  if (asks_due_ == 0) return;
  asks_due_ = 0;  // a destroyed QP's ask goes with it
  qps_.ForEach([&](VirtualQp& v) {
    if (!v.ask_due) return;
    v.ask_due = false;
    StartSwitch(v, ModeOf(v.attr.av.sgid));
  });
}

void ReliableRnic::SendSwitch(VirtualQp& v) {
  const ModeSwitch& s = *v.sw;
  peer::Switch m;
  m.vqpn = v.attr.dest_qpn;
  m.conn_token = s.my_token;
  // The new path's QP: uc's data QP, rc's backup (else the virtual QP).
  m.data_qpn = v.lower.qpn;
  m.data_psn = (s.my_token >> 8) & kPsnMask;
  if (s.next_conn != nullptr) {
    m.data_qpn = s.next_conn->data_qpn();
    m.data_psn = s.next_conn->data_psn();
  }
  if (s.next_rc != nullptr) {
    m.data_qpn = s.next_rc->backup_qpn();
    m.data_psn = s.next_rc->backup_psn();
  }
  // The lower RC QP (the virtual QP) and the PSN it restarts at when the
  // switch resets it.
  m.backup_qpn = v.lower.qpn;
  m.backup_psn = (s.my_token * 2654435761u) & kPsnMask;
  m.to_mode = static_cast<peer::Mode>(s.to);
  (void)SendPeer(link_->PeerOf(v.attr.av.dgid).value_or(0),
                 peer::MsgType::kSwitch, m);
}

void ReliableRnic::BeginSwitch(VirtualQp& v) {
  ModeSwitch& s = *v.sw;
  s.peer_token = v.peer_ask.token;
  s.peer_data_qpn = v.peer_ask.data_qpn;
  s.peer_data_psn = v.peer_ask.data_psn;
  s.peer_rc_psn = v.peer_ask.rc_psn;
  v.peer_ask.asked = false;
  s.state = State::kDraining;
  s.progress_ns = clock_();
  s.work_left = ~uint64_t{0};
  ++CountersOf(v.attr.av.sgid).switches_begun;
  (void)StepSwitch(v, clock_());
}

// ---- Peer messages (data path; untrusted) ---------------------------------

void ReliableRnic::OnSwitch(uint64_t origin, const void* body) {
  const auto& m = *static_cast<const peer::Switch*>(body);
  VirtualQp* v = FindQpByQpn(m.vqpn);
  // From the QP's peer daemon, naming its end of the pair (the lower RC
  // QP), for a connected RC QP that does not run a switch, with a token
  // not seen before.
  if (v == nullptr || v->type != QpType::kRc || v->has_srq ||
      v->rq == nullptr || v->attr.state != QpState::kRts ||
      link_->PeerOf(v->attr.av.dgid) != origin ||
      m.backup_qpn != v->attr.dest_qpn ||
      (v->sw != nullptr && v->sw->holding()) ||
      m.conn_token == v->peer_ask.token) {
    ++counters_.switch_bad;
    return;
  }
  v->peer_ask.asked = true;
  v->peer_ask.to = static_cast<QpMode>(m.to_mode);
  v->peer_ask.token = m.conn_token;
  v->peer_ask.data_qpn = m.data_qpn;
  v->peer_ask.data_psn = m.data_psn;
  v->peer_ask.rc_psn = m.backup_psn;
  if (v->sw != nullptr && v->sw->state == State::kAsked &&
      v->sw->to == v->peer_ask.to) {
    BeginSwitch(*v);
  } else if ((v->sw == nullptr || v->sw->state != State::kAsked) &&
             ModeOfReliability(ModeOf(v->attr.av.sgid)) == v->peer_ask.to) {
    // The peer asks what this VM's mode already is, set while the QP could
    // not take it (it connected to a then native peer): this end asks too.
    DueAsk(*v);
  }
}

void ReliableRnic::OnDrained(uint64_t origin, const void* body) {
  const auto& d = *static_cast<const peer::Drained*>(body);
  VirtualQp* v = FindQpByQpn(d.vqpn);
  ModeSwitch* s = v != nullptr ? v->sw.get() : nullptr;
  bool ok = s != nullptr && link_->PeerOf(v->attr.av.dgid) == origin &&
            (s->state == State::kDraining || s->state == State::kDrained) &&
            !s->peer_drained;
  // From uc, the peer drained only once everything it sent was delivered
  // here: its next MID is this receiver's.
  if (ok && s->from == QpMode::kUc && v->conn != nullptr &&
      d.next_mid != v->conn->receiver().deliv_mid()) {
    ok = false;
  }
  if (!ok) {
    ++counters_.drained_bad;
    return;
  }
  s->peer_drained = true;
  s->peer_next_mid = d.next_mid;
  s->peer_rcv_sent = d.rcv_sent;
  (void)StepSwitch(*v, clock_());
}

void ReliableRnic::OnReady(uint64_t origin, const void* body) {
  const auto& r = *static_cast<const peer::Ready*>(body);
  VirtualQp* v = FindQpByQpn(r.vqpn);
  ModeSwitch* s = v != nullptr ? v->sw.get() : nullptr;
  if (s == nullptr || link_->PeerOf(v->attr.av.dgid) != origin ||
      !s->running() || !s->peer_drained || s->peer_ready) {
    ++counters_.ready_bad;
    return;
  }
  s->peer_ready = true;
  (void)StepSwitch(*v, clock_());
}

// ---- The steps -------------------------------------------------------------

void ReliableRnic::PollForSwitch(VirtualQp& v) {
  const RnicCq cqs[2] = {v.send_cq, v.recv_cq};
  for (const RnicCq& cq : cqs) {
    reliable::VirtualCq* vc = cqs_.Find(cq.id);
    if (vc == nullptr) continue;
    reliable::CompletionRing& ring = *vc->synthesized;
    Completion batch[16];
    // Only as many as the ring surely takes: the guest's stay in order
    // (the ring is reported before the lower CQ), none is dropped.
    while (ring.capacity() - ring.size() >= std::size(batch)) {
      const int n = lower_.PollCq(cq, batch);
      if (n <= 0) break;
      bool taken = false;
      const int kept = KeepGuestCompletions(std::span(batch, n), &taken);
      for (int i = 0; i < kept; ++i) (void)ring.Push(batch[i]);
      if (n < static_cast<int>(std::size(batch))) break;
    }
    if (v.recv_cq.id == v.send_cq.id) break;
  }
}

bool ReliableRnic::StepSwitch(VirtualQp& v, uint64_t now) {
  ModeSwitch& s = *v.sw;
  if ((s.state == State::kDraining && s.send_marker_posted) ||
      s.state == State::kTakeBack) {
    PollForSwitch(v);
  }
  // The old path's work left while it drains: less is progress. From
  // native the marker WRITE's own retries bound the drain (it fails
  // RETRY_EXC_ERR when the peer is gone), so waiting for it is too.
  if (s.state == State::kDrained && s.from == QpMode::kUc &&
      v.conn != nullptr) {
    // Waiting for the peer's drain: what it still sends here, delivered.
    const uint64_t delivered = v.conn->receiver().deliv_mid();
    if (delivered != s.work_left) s.progress_ns = now;
    s.work_left = delivered;
  }
  if (s.state == State::kDraining) {
    uint64_t left = 0;
    if (s.from == QpMode::kUc && v.conn != nullptr) {
      left = uint64_t{v.conn->sender().outstanding()} +
             v.conn->sender().responses_in_use();
    } else if (s.from == QpMode::kRc && v.rc != nullptr) {
      left = v.rc->in_flight();
    }
    if (left < s.work_left || s.send_marker_posted) s.progress_ns = now;
    s.work_left = left;
  }
  if (s.running() && !s.held.empty()) {
    // §1: a held WR fails as natively once the switch made no progress for
    // the QP's retry budget: the peer stopped answering. (Natively a WR
    // waits behind earlier ones as long as they progress.)
    const uint64_t budget = RetryBudgetNs(v.attr);
    const uint64_t since = std::max(s.held.front_since_ns(), s.progress_ns);
    if (budget != 0 && now - since > budget) {
      FailSwitch(v, WcStatus::kRetryExcErr);
    }
  }
  switch (s.state) {
    case State::kIdle:
    case State::kAsked:
      return false;  // the old path runs; nothing to wait for here
    case State::kDraining:
      if (s.from == QpMode::kNative) {
        if (!s.send_marker_posted && !s.drained_mine) {
          // A signaled zero-length WRITE after the last WR: its completion
          // says the peer executed everything before it.
          SendWr w;
          w.wr_id = s.send_marker;
          w.opcode = WrOpcode::kRdmaWrite;
          w.send_flags = kSendSignaled;
          Status st = Status::kOk;
          s.send_marker_posted =
              lower_.PostSend(v.lower, std::span(&w, 1), &st) == 1;
        }
      } else if (s.from == QpMode::kRc && v.rc != nullptr) {
        if (v.rc->state() == RcPath::State::kFailed) {
          FailSwitch(v, WcStatus::kWrFlushErr);  // its error went already
          return true;
        }
        if (v.rc->drained()) s.drained_mine = true;
      } else if (v.conn != nullptr) {
        reliable::Sender& snd = v.conn->sender();
        if (snd.failed()) {
          // The old path failed a WR to the guest already (its budget):
          // what is held flushes after it.
          FailSwitch(v, WcStatus::kWrFlushErr);
          return true;
        }
        if (snd.outstanding() == 0 && snd.responses_in_use() == 0) {
          s.drained_mine = true;
        }
      }
      if (!s.drained_mine) return true;
      s.state = State::kDrained;
      s.progress_ns = now;
      s.work_left = 0;
      (void)SendPeer(link_->PeerOf(v.attr.av.dgid).value_or(0),
                     peer::MsgType::kDrained,
                     peer::Drained{v.attr.dest_qpn,
                                   v.conn != nullptr && s.from == QpMode::kUc
                                       ? v.conn->sender().next_mid()
                                       : 0,
                                   0});
      [[fallthrough]];
    case State::kDrained:
      // Waiting for the peer alone needs no turn (its message wakes the
      // data path), only the budget of what is held.
      if (!s.peer_drained) return !s.held.empty();
      if (s.from == QpMode::kNative) {
        TakeBackNative(v);
        if (s.state != State::kTakeBack) return true;
      } else if (s.from == QpMode::kRc) {
        TakeBackRc(v);
        if (s.state != State::kTakeBack) return true;
      } else {
        // From uc: the receives are the layer's already; the ones the old
        // receiver completed are reported first.
        if (v.rq->unreported()) {
          reliable::VirtualCq* rcq = cqs_.Find(v.recv_cq.id);
          v.rq->Report(rcq != nullptr ? rcq->synthesized.get() : nullptr);
          if (v.rq->unreported()) return true;
        }
        // The lower RC QP carried uc's atomics: rc counts its PSNs from a
        // reset (both ends reset it alike).
        if (s.to == QpMode::kRc && ReconnectLowerRc(v) != Status::kOk) {
          FailSwitch(v, WcStatus::kRetryExcErr);
          return true;
        }
        BuildNewPath(v);
        return true;
      }
      [[fallthrough]];
    case State::kTakeBack:
      if (s.from == QpMode::kRc) {
        // Every flush of the path's QPs came before its marker; the
        // receives not completed are the RecvQueue's already.
        if (s.markers_left > 0) return true;
        if (v.rq->unreported()) {
          reliable::VirtualCq* rcq = cqs_.Find(v.recv_cq.id);
          v.rq->Report(rcq != nullptr ? rcq->synthesized.get() : nullptr);
          if (v.rq->unreported()) return true;
        }
      } else {
        if (!s.flushes_done &&
            !(!s.recv_marker_posted && s.flushes >= s.flushes_expected)) {
          return true;
        }
        v.rq->TakeBack(s.flushes);
      }
      if (ReconnectLowerRc(v) != Status::kOk) {
        FailSwitch(v, WcStatus::kRetryExcErr);
        return true;
      }
      BuildNewPath(v);
      return true;
    case State::kReady:
      if (!s.peer_ready) return !s.held.empty();
      FinishSwitch(v);
      return s.state != State::kIdle;
    case State::kFailed: {
      // Held WRs complete in error, after every WR of the old path (or,
      // refused by the new one, of the new path: then the QP goes to ERR).
      if (v.conn != nullptr && v.conn->sender().outstanding() > 0) return true;
      if (v.rc != nullptr && !v.rc->drained()) return true;
      if (s.err_pending) {
        s.err_pending = false;
        ErrQp(v);
        FlushFramed(v);
      }
      reliable::VirtualCq* scq = cqs_.Find(v.send_cq.id);
      while (!s.held.empty()) {
        const SendWr& w = s.held.front();
        Completion c;
        c.wr_id = w.wr_id;
        c.status = s.fail_status;
        c.opcode = SendCompletionOpcode(w.opcode);
        c.qpn = v.lower.qpn;
        if (scq == nullptr || !scq->synthesized->Push(c)) return true;
        s.held.pop();
        s.fail_status = WcStatus::kWrFlushErr;
      }
      return false;
    }
  }
  return false;
}

void ReliableRnic::TakeBackNative(VirtualQp& v) {
  ModeSwitch& s = *v.sw;
  // Both ends drained: every message either end sent on the old path was
  // executed, so its completions are in the CQs before the flushes.
  QpAttr a;
  a.state = QpState::kErr;
  if (lower_.ModifyQp(v.lower, a, kQpState) != Status::kOk) {
    FailSwitch(v, WcStatus::kRetryExcErr);
    return;
  }
  v.rq->BeginTakeBack();
  RecvWr r;
  r.wr_id = s.recv_marker;
  Status st = Status::kOk;
  s.recv_marker_posted = lower_.PostRecv(v.lower, std::span(&r, 1), &st) == 1;
  if (!s.recv_marker_posted) {
    // The RQ was full: exactly its depth of flushes comes.
    s.flushes_expected =
        std::min<uint64_t>(v.caps.max_recv_wr, v.rq->shadows());
  }
  s.state = State::kTakeBack;
  s.progress_ns = clock_();
}

void ReliableRnic::TakeBackRc(VirtualQp& v) {
  ModeSwitch& s = *v.sw;
  // The path's QPs to ERR, a marker receive on each: its flush comes after
  // every completion of that QP, which the path still sees (the receives
  // completed before are reported by it; the flushes are eaten here).
  s.markers_left = 0;
  QpAttr a;
  a.state = QpState::kErr;
  const RnicQp qps[2] = {v.lower, v.rc->backup_qp()};
  for (const RnicQp& q : qps) {
    if (q.id == 0) continue;
    (void)lower_.ModifyQp(q, a, kQpState);
    RecvWr r;
    r.wr_id = s.recv_marker;
    Status st = Status::kOk;
    if (lower_.PostRecv(q, std::span(&r, 1), &st) == 1) ++s.markers_left;
  }
  s.state = State::kTakeBack;
  s.progress_ns = clock_();
}

Status ReliableRnic::ReconnectLowerRc(VirtualQp& v) {
  const ModeSwitch& s = *v.sw;
  QpAttr a = v.attr;
  a.state = QpState::kReset;
  VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(v.lower, a, kQpState));
  a.state = QpState::kInit;
  VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(
      v.lower, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags));
  a.state = QpState::kRtr;
  a.rq_psn = s.peer_rc_psn & kPsnMask;
  VRDMA_RETURN_IF_ERROR(
      lower_.ModifyQp(v.lower, a,
                      kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                          kQpMaxDestRdAtomic | kQpMinRnrTimer));
  a.state = QpState::kRts;
  a.sq_psn = (s.my_token * 2654435761u) & kPsnMask;
  // rc mode's lower RC QP retries twice; the guest's count is its budget.
  if (s.to == QpMode::kRc) {
    a.retry_cnt = std::min(a.retry_cnt, reliable::kRcLowerRetryCnt);
  }
  VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(v.lower, a,
                                        kQpState | kQpSqPsn | kQpTimeout |
                                            kQpRetryCnt | kQpRnrRetry |
                                            kQpMaxQpRdAtomic));
  v.attr.rq_psn = a.rq_psn;
  v.attr.sq_psn = a.sq_psn;
  return Status::kOk;
}

void ReliableRnic::BuildNewPath(VirtualQp& v) {
  ModeSwitch& s = *v.sw;
  // The old connection (uc's, or one that fell back to native at
  // CONNECT_NATIVE) or rc path.
  Retire(s, v.conn);
  Retire(s, v.rc);
  if (s.to == QpMode::kUc) {
    Connection* k = s.next_conn;
    s.next_conn = nullptr;
    k->set_retry_budget_ns(RetryBudgetNs(v.attr));
    k->set_rnr_retry(v.attr.rnr_retry);
    k->set_max_rd_atomic(v.attr.max_rd_atomic);
    k->connect_sent = true;  // no CONNECT: SWITCH carried it
    v.conn = k;
    // SWITCH carries neither the peer's rnr_retry nor its budget: this
    // end's stand for them.
    if (k->OnPeerConnect(s.peer_data_qpn, s.peer_data_psn, s.peer_token,
                         v.attr.rnr_retry, k->retry_budget_ns()) != Status::kOk) {
      FailSwitch(v, WcStatus::kRetryExcErr);
      return;
    }
    ++k->counters().connects_uc;
    k->receiver().OnRecvPosted(clock_());
  } else if (s.to == QpMode::kRc) {
    RcPath* p = s.next_rc;
    s.next_rc = nullptr;
    p->connect_sent = true;  // no CONNECT: SWITCH carried it
    p->OnRts(v.attr);        // the PSNs of the reset lower RC QP
    v.rc = p;
    if (p->OnPeerConnect(s.peer_data_qpn, s.peer_data_psn, s.peer_token) !=
        Status::kOk) {
      FailSwitch(v, WcStatus::kRetryExcErr);
      return;
    }
    ++p->counters().rc_connects;
    p->OnRecvPosted();  // the receives, in order, on the lower RC QP
  } else {
    (void)v.rq->ReplayTo(lower_, v.lower);
  }
  s.state = State::kReady;
  s.progress_ns = clock_();
  (void)SendPeer(link_->PeerOf(v.attr.av.dgid).value_or(0),
                 peer::MsgType::kReady, peer::Ready{v.attr.dest_qpn});
  if (s.peer_ready) FinishSwitch(v);
}

void ReliableRnic::FinishSwitch(VirtualQp& v) {
  ModeSwitch& s = *v.sw;
  // The held WRs first, in order, on the new path.
  while (!s.held.empty()) {
    Status st = Status::kOk;
    const std::span<const SendWr> one(&s.held.front(), 1);
    const int n = v.rc != nullptr     ? v.rc->Post(one, &st, clock_())
                  : v.conn != nullptr ? v.conn->sender().Post(one, &st)
                                      : lower_.PostSend(v.lower, one, &st);
    if (n != 1) {
      if (st == Status::kNoResource) return;  // again at the next Progress
      // Refused for good: an opcode the new path does not carry (memory
      // windows on uc or rc), posted while the old one did. As an RNIC
      // treats a WQE it cannot execute: the WRs before it complete, it
      // completes LOC_QP_OP_ERR, the QP goes to ERR, the rest flush (the
      // kFailed step).
      ++CountersOf(v.attr.av.sgid).switches_failed;
      s.state = State::kFailed;
      s.fail_status = WcStatus::kLocQpOpErr;
      s.err_pending = true;
      return;
    }
    s.held.pop();
    ++CountersOf(v.attr.av.sgid).switch_wrs_held;
  }
  ++CountersOf(v.attr.av.sgid).switches_done;
  EndSwitch(v);
  Reconcile(v);  // a SetMode while it ran
}

void ReliableRnic::EndSwitch(VirtualQp& v) {
  ModeSwitch& s = *v.sw;
  if (s.state != State::kIdle) {
    for (uint32_t& id : switching_qps_) {
      if (id == v.lower.id) {
        id = 0;
        --switching_;
      }
    }
  }
  s.state = State::kIdle;
}

void ReliableRnic::FailSwitch(VirtualQp& v, WcStatus first) {
  ModeSwitch& s = *v.sw;
  if (s.state == State::kFailed) return;
  ++CountersOf(v.attr.av.sgid).switches_failed;
  const State was = s.state;
  s.state = State::kFailed;
  if (v.conn != nullptr && v.conn->state() == ConnState::kUc &&
      !v.conn->sender().failed() && v.conn->sender().outstanding() > 0) {
    v.conn->sender().Fail(first);
    first = WcStatus::kWrFlushErr;
  }
  if (v.rc != nullptr && v.rc->state() != RcPath::State::kFailed) {
    // The path's WRs flush (reported by it, before the held ones).
    v.rc->OnGuestError();
  }
  s.fail_status = first;
  ErrQp(v);  // as natively after such an error
  reliable::VirtualCq* rcq = cqs_.Find(v.recv_cq.id);
  if (was == State::kTakeBack) v.rq->TakeBack(s.flushes);
  if (v.rq->holding()) {
    v.rq->FlushAll(v.lower.qpn,
                   rcq != nullptr ? rcq->synthesized.get() : nullptr);
  }
  RetireNextPaths(s);
}

void ReliableRnic::ErrQp(VirtualQp& v) {
  QpAttr a;
  a.state = QpState::kErr;
  (void)lower_.ModifyQp(v.lower, a, kQpState);
  v.attr.state = QpState::kErr;
}

bool ReliableRnic::SwitchTakes(VirtualQp& v, const Completion& c) {
  ModeSwitch& s = *v.sw;
  if (s.send_marker_posted && c.wr_id == s.send_marker &&
      c.opcode == WcOpcode::kRdmaWrite) {
    s.send_marker_posted = false;
    if (c.status == WcStatus::kSuccess) {
      s.drained_mine = true;
    } else if (s.running()) {
      // The old path failed (the peer is gone): the guest's own WRs before
      // the marker carried the error already, or the first held one does.
      FailSwitch(v, c.status);
    }
    return true;
  }
  if (s.state == State::kTakeBack && s.from == QpMode::kRc) {
    // The path's QPs: their flushes and markers are the switch's, the
    // rest still the path's.
    if (c.status != WcStatus::kWrFlushErr) return false;
    if (c.wr_id == s.recv_marker && c.opcode >= WcOpcode::kRecv &&
        s.markers_left > 0) {
      --s.markers_left;
    }
    return true;
  }
  if (s.state == State::kTakeBack && c.opcode >= WcOpcode::kRecv &&
      c.status == WcStatus::kWrFlushErr) {
    if (s.recv_marker_posted && c.wr_id == s.recv_marker) {
      s.flushes_done = true;
    } else {
      ++s.flushes;
    }
    return true;
  }
  return false;
}

void ReliableRnic::DropSwitch(VirtualQp& v) {
  if (v.sw == nullptr) return;
  EndSwitch(v);
  DropNextPaths(*v.sw);
  if (v.sw->retired != nullptr) --retired_;
  if (v.sw->retired_rc != nullptr) --retired_;
  v.sw.reset();
}

void ReliableRnic::DropNextPaths(ModeSwitch& s) {
  if (s.next_conn != nullptr) {
    conns_[s.next_conn->init().slot & 0xffff].reset();
    --framed_;
    s.next_conn = nullptr;
  }
  if (s.next_rc != nullptr) {
    TakeRcPath(s.next_rc).reset();
    s.next_rc = nullptr;
  }
}

void ReliableRnic::RetireNextPaths(ModeSwitch& s) {
  Retire(s, s.next_conn);
  Retire(s, s.next_rc);
}

void ReliableRnic::Retire(ModeSwitch& s, Connection*& k) {
  if (k == nullptr) return;
  // What its data QP still gets is dropped by its generation.
  const uint32_t slot = k->init().slot & 0xffff;
  k->Quiesce();
  s.retired = std::move(conns_[slot]);
  ++retired_;
  --framed_;
  k = nullptr;
}

void ReliableRnic::Retire(ModeSwitch& s, RcPath*& p) {
  if (p == nullptr) return;
  s.retired_rc = TakeRcPath(p);  // its backup (in ERR) goes with it
  ++retired_;
  p = nullptr;
}

bool ReliableRnic::ProgressSwitches(uint64_t now) {
  bool busy = false;
  uint32_t seen = 0;
  for (uint32_t& id : switching_qps_) {
    if (seen == switching_) break;
    if (id == 0) continue;
    ++seen;
    VirtualQp* v = qps_.Find(id);
    if (v == nullptr || v->sw == nullptr) {
      id = 0;
      --switching_;
      continue;
    }
    busy |= StepSwitch(*v, now);
  }
  return busy;
}

void ReliableRnic::FreeRetired() {
  if (retired_ == 0) return;
  qps_.ForEach([&](VirtualQp& v) {
    if (v.sw == nullptr || v.sw->running()) return;
    if (v.sw->retired != nullptr) {
      v.sw->retired.reset();
      --retired_;
    }
    if (v.sw->retired_rc != nullptr) {
      v.sw->retired_rc.reset();
      --retired_;
    }
  });
}

}  // namespace vrdma
