// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic's rc mode (docs/reliability.md §5; step 16): framing an RC
// QP whose VM is in rc mode at its RTR (an RcPath with its backup QP),
// CONNECT with mode rc (the backups' QPNs and PSNs), RECOVER and
// RECOVERED, and the part of Progress() that runs the paths. The paths
// themselves are rc_backup.cc.
#include <algorithm>
#include <variant>

#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/reliable_rnic.h"

namespace vrdma {

using reliable::RcPath;
using reliable::VirtualQp;

RcPath* ReliableRnic::FindRcPath(uint32_t qpn) {
  if (rc_framed_ == 0) return nullptr;
  if (VirtualQp* v = FindQpByQpn(qpn); v != nullptr) return v->rc;
  const uint32_t* id = rc_index_.Find(qpn);
  VirtualQp* v = id != nullptr ? qps_.Find(*id) : nullptr;
  return v != nullptr ? v->rc : nullptr;
}

Result<QpAttr> ReliableRnic::QueryQp(RnicQp qp) const {
  Result<QpAttr> a = lower_.QueryQp(qp);
  const VirtualQp* v = qps_.Find(qp.id);
  // A switch resets the lower RC QP under the guest (§6).
  if (a.ok() && v != nullptr && v->sw != nullptr &&
      v->sw->state != reliable::ModeSwitch::State::kIdle &&
      v->sw->state != reliable::ModeSwitch::State::kAsked &&
      v->sw->state != reliable::ModeSwitch::State::kFailed) {
    a->state = v->attr.state;
  }
  if (a.ok() && v != nullptr && v->rc != nullptr &&
      v->rc->state() != RcPath::State::kFailed) {
    a->state = v->attr.state;
    a->retry_cnt = v->attr.retry_cnt;
  }
  return a;
}

void ReliableRnic::MaybeFrameRc(VirtualQp& v) {
  if (v.type != QpType::kRc || v.has_srq || v.rq == nullptr ||
      ModeOf(v.attr.av.sgid) != ReliabilityMode::kRc) {
    return;
  }
  const std::optional<uint64_t> peer = link_->PeerOf(v.attr.av.dgid);
  if (!peer) return;
  v.rc = NewRcPath(v, *peer);
  if (v.rc == nullptr) return;  // no room: native
  // The receives kept so far go to the lower RC QP, through the path (it
  // keeps their copies for a takeover).
  v.rc->OnRecvPosted();
}

RcPath* ReliableRnic::NewRcPath(VirtualQp& v, uint64_t peer) {
  uint32_t slot = 0;
  while (slot < rc_paths_.size() && rc_paths_[slot] != nullptr) ++slot;
  if (slot == rc_paths_.size()) return nullptr;  // the table is full
  reliable::RcPathInit init;
  init.qp_init.type = QpType::kRc;
  init.qp_init.pd = v.pd;
  init.qp_init.send_cq = v.send_cq;
  init.qp_init.recv_cq = v.recv_cq;
  init.qp_init.caps = v.caps;
  init.qp_init.sq_sig_all = v.sq_sig_all;
  init.vqp = v.lower;
  init.attr = v.attr;
  reliable::VirtualCq* scq = cqs_.Find(v.send_cq.id);
  reliable::VirtualCq* rcq = cqs_.Find(v.recv_cq.id);
  init.send_ring = scq != nullptr ? scq->synthesized.get() : nullptr;
  init.recv_ring = rcq != nullptr ? rcq->synthesized.get() : nullptr;
  init.rq = v.rq.get();
  init.peer_daemon = peer;
  do {
    init.my_token = static_cast<uint32_t>(token_rng_());
  } while (init.my_token == 0);
  init.reset_delay_ns = options_.rc_reset_delay_ns;
  init.active = &rc_active_;
  init.slot = slot;
  auto p = std::make_unique<RcPath>(lower_, init, &CountersOf(v.attr.av.sgid));
  if (p->Open() != Status::kOk) return nullptr;
  if (rc_index_.Insert(p->backup_qpn(), v.lower.id) == nullptr) return nullptr;
  RcPath* out = p.get();
  rc_paths_[slot] = std::move(p);
  ++rc_framed_;
  out->Wake();
  return out;
}

std::unique_ptr<RcPath> ReliableRnic::TakeRcPath(RcPath* p) {
  std::unique_ptr<RcPath> out;
  if (p == nullptr) return out;
  rc_index_.Erase(p->backup_qpn());
  for (auto& q : rc_paths_) {
    if (q.get() == p) out = std::move(q);
  }
  --rc_framed_;
  return out;
}

void ReliableRnic::UnframeRc(VirtualQp& v) {
  if (v.rc == nullptr) return;
  rc_index_.Erase(v.rc->backup_qpn());
  for (auto& p : rc_paths_) {
    if (p.get() == v.rc) p.reset();  // destroys the backup QP
  }
  v.rc = nullptr;
  --rc_framed_;
}

void ReliableRnic::StartRcConnect(RcPath& p) {
  p.connect_sent = true;
  SendRcConnect(p, false);
  p.next_connect_ns = clock_() + options_.connect_interval_ns;
  p.connects_left = options_.connect_repeats;
  p.Wake();  // its repeat timer
}

void ReliableRnic::SendRcConnect(RcPath& p, bool ok) {
  peer::Connect c;
  c.src_vqpn = p.vqpn();
  c.dst_vqpn = p.peer_vqpn();
  // rc mode has no data QP: the virtual QP itself carries the WRs.
  c.data_qpn = p.vqpn();
  c.data_psn = 0;
  c.backup_qpn = p.backup_qpn();
  c.backup_psn = p.backup_psn();
  c.conn_token = p.my_token();
  c.mode = peer::Mode::kRc;
  c.rnr_retry = static_cast<uint8_t>(p.rnr_retry() & 7);
  c.retry_budget_ns =
      p.retry_budget_ns() != 0 ? p.retry_budget_ns() : ~uint64_t{0};
  if (SendPeer(p.peer_daemon(), ok ? peer::MsgType::kConnectOk : peer::MsgType::kConnect,
               c)) {
    ++p.counters().connects_sent;
  }
}

void ReliableRnic::OnRcConnect(uint64_t origin, VirtualQp& v, const void* body,
                               bool request) {
  const auto& c = *static_cast<const peer::Connect*>(body);
  RcPath& p = *v.rc;
  if (origin != p.peer_daemon() ||
      p.OnPeerConnect(c.backup_qpn, c.backup_psn, c.conn_token) !=
          Status::kOk) {
    ++counters_.peer_unmatched;
    return;
  }
  if (request) SendRcConnect(p, true);
}

void ReliableRnic::SendRecoverMessage(RcPath& p, bool recovered) {
  const bool sent =
      recovered ? SendPeer(p.peer_daemon(), peer::MsgType::kRecovered,
                           peer::Recovered{p.peer_vqpn(), p.recovered_epsn()})
                : SendPeer(p.peer_daemon(), peer::MsgType::kRecover,
                           peer::Recover{p.peer_vqpn(), p.recover_qpn()});
  if (!sent) return;
  if (recovered) {
    p.SentRecovered();
  } else {
    p.SentRecover();
  }
}

// A RECOVER names the receiver's virtual QP and the sender's end of the
// pair that failed; it must come from the QP's peer daemon and name the
// pair in use (§3.6: a forged or stale one is counted and dropped).
void ReliableRnic::OnRecover(uint64_t origin, const void* body) {
  const auto& r = *static_cast<const peer::Recover*>(body);
  VirtualQp* v = FindQpByQpn(r.vqpn);
  RcPath* p = v != nullptr ? v->rc : nullptr;
  if (p == nullptr || p->peer_daemon() != origin ||
      !p->OnRecover(r.failed_qpn, clock_())) {
    ++counters_.rc_recover_bad;
    return;
  }
  if (p->want_recover()) SendRecoverMessage(*p, false);
  if (p->want_recovered()) SendRecoverMessage(*p, true);
}

void ReliableRnic::OnRecovered(uint64_t origin, const void* body) {
  const auto& r = *static_cast<const peer::Recovered*>(body);
  VirtualQp* v = FindQpByQpn(r.vqpn);
  RcPath* p = v != nullptr ? v->rc : nullptr;
  if (p == nullptr || p->peer_daemon() != origin ||
      !p->OnRecovered(r.epsn, clock_())) {
    ++counters_.rc_recovered_bad;
  }
}

bool ReliableRnic::ProgressRc(uint64_t now) {
  // The paths with work (ActiveSet, as ProgressUc's connections); every
  // idle_sweep_ns, every path.
  const bool sweep = now >= next_rc_sweep_ns_;
  if (sweep) next_rc_sweep_ns_ = now + options_.idle_sweep_ns;
  // An rc path does not sleep on its timers: due at every turn while it
  // has anything pending (so never pumped early).
  auto pump = [&](uint32_t s) {
    return PumpRcPath(*rc_paths_[s], now) ? uint64_t{0}
                                          : reliable::ActiveSet::kIdle;
  };
  auto never_asleep = [](uint32_t, uint64_t*) { return false; };
  return rc_active_.Turn(
      now, sweep, rc_framed_, [&](uint32_t s) { return rc_paths_[s] != nullptr; },
      pump, never_asleep, &counters_.missed_wakes,
      &counters_.missed_deadlines);
}

bool ReliableRnic::PumpRcPath(RcPath& p, uint64_t now) {
  bool busy = false;
  if (p.state() == RcPath::State::kConnecting && p.connect_sent &&
      p.connects_left > 0) {
    busy = true;  // the repeat timer
    if (now >= p.next_connect_ns) {
      SendRcConnect(p, false);
      --p.connects_left;
      p.next_connect_ns = now + options_.connect_interval_ns;
    }
  }
  busy |= p.Pump(now);
  if (p.want_recover()) SendRecoverMessage(p, false);
  if (p.want_recovered()) SendRecoverMessage(p, true);
  return busy || p.want_recover() || p.want_recovered();
}

}  // namespace vrdma
