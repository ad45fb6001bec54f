// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic's uc mode (docs/reliability.md §2.2, §3.5, §4; step 11):
// the peer link, modes by GID, framing a QP at its RTR, CONNECT /
// CONNECT_OK / CONNECT_NATIVE, and the part of Progress() that runs the
// ACK CQ, the transport CQ and every connection.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <variant>

#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/reliable_rnic.h"

namespace vrdma {

using reliable::AckArrival;
using reliable::ConnState;
using reliable::Connection;
using reliable::ConnectionInit;
using reliable::RcPath;
using reliable::RetryBudgetNs;
using reliable::VirtualQp;
using reliable::WireCounter;

namespace {

uint64_t SteadyNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

Status ReliableRnic::AttachPeerLink(reliable::PeerLink* link,
                                    const Gid& daemon_gid) {
  if (link == nullptr) return Status::kInvalid;
  if (link_ != nullptr) return Status::kBusy;
  if (lower_.control_beside_data_path()) return Status::kUnsupported;
  if (!clock_) clock_ = options_.clock ? options_.clock : SteadyNs;
  peers_.assign(options_.max_peers, Peer{});
  token_rng_.seed(options_.token_seed != 0 ? options_.token_seed
                                           : clock_() ^ options_.daemon_id);
  VRDMA_RETURN_IF_ERROR(lower_.AddGid(daemon_gid));
  Result<RnicPd> pd = lower_.AllocPd();
  if (!pd.ok()) {
    (void)lower_.RemoveGid(daemon_gid);
    return pd.status();
  }
  layer_pd_ = *pd;
  transport_depth_ = 1024;
  Result<RnicCq> cq = lower_.CreateCq(transport_depth_);
  if (!cq.ok()) {
    (void)lower_.DeallocPd(layer_pd_);
    (void)lower_.RemoveGid(daemon_gid);
    return cq.status();
  }
  transport_cq_ = *cq;
  acks_ = std::make_unique<reliable::AckChannel>();
  if (Status st = acks_->Open(lower_, layer_pd_, daemon_gid, options_.ack);
      st != Status::kOk) {
    acks_.reset();
    (void)lower_.DestroyCq(transport_cq_);
    (void)lower_.DeallocPd(layer_pd_);
    (void)lower_.RemoveGid(daemon_gid);
    return st;
  }
  conns_.resize(std::min<uint32_t>(options_.max_framed_qps, 0xffff));
  active_.Resize(static_cast<uint32_t>(conns_.size()));
  rc_paths_.resize(conns_.size());
  rc_active_.Resize(static_cast<uint32_t>(rc_paths_.size()));
  switching_qps_.assign(conns_.size(), 0);
  daemon_gid_ = daemon_gid;
  link_ = link;
  SendHello();
  next_hello_ns_ = clock_() + options_.hello_interval_ns;
  return Status::kOk;
}

void ReliableRnic::DetachUc() {
  if (link_ == nullptr) return;
  for (auto& c : conns_) c.reset();  // each closes its lower objects
  for (auto& p : rc_paths_) p.reset();  // each destroys its backup QP
  acks_.reset();
  for (Peer& p : peers_) {
    if (p.used) (void)lower_.DestroyAh(p.ah);
    p = Peer{};
  }
  (void)lower_.DestroyCq(transport_cq_);
  (void)lower_.DeallocPd(layer_pd_);
  (void)lower_.RemoveGid(daemon_gid_);
  link_ = nullptr;
}

void ReliableRnic::SetMode(std::span<const Gid> gids, ReliabilityMode mode) {
  if (gids.empty()) return;
  // The VM's record: by its first GID, made once and kept (its framed QPs
  // count into it until destroyed; the totals keep it after a detach).
  reliable::ReliabilityCounters* vm = nullptr;
  for (VmRecord& r : vms_) {
    if (r.first_gid == gids.front()) vm = r.counters.get();
  }
  if (vm == nullptr) {
    vms_.push_back(
        {gids.front(), std::make_unique<reliable::ReliabilityCounters>()});
    vm = vms_.back().counters.get();
  }
  for (const Gid& g : gids) {
    bool found = false;
    for (ModeEntry& e : modes_) {
      if (e.gid == g) {
        e.mode = mode;
        e.counters = vm;
        found = true;
      }
    }
    if (!found) modes_.push_back({g, mode, vm});
  }
  // §6: each connected QP of the VM switches (reliable_rnic_switch.cc).
  if (link_ == nullptr) return;
  qps_.ForEach([&](VirtualQp& v) {
    if (std::find(gids.begin(), gids.end(), v.attr.av.sgid) != gids.end()) {
      StartSwitch(v, mode);
    }
  });
}

void ReliableRnic::FlushFramed(VirtualQp& v) {
  if (v.conn != nullptr && v.conn->state() != ConnState::kNative) {
    v.conn->sender().Fail(WcStatus::kWrFlushErr);
  }
  if (v.rc != nullptr) v.rc->OnGuestError();
  if (v.rq != nullptr && v.rq->holding()) {
    reliable::VirtualCq* rcq = cqs_.Find(v.recv_cq.id);
    v.rq->FlushAll(v.lower.qpn,
                   rcq != nullptr ? rcq->synthesized.get() : nullptr);
  }
}

ReliabilityMode ReliableRnic::ModeOf(const Gid& gid) const {
  for (const ModeEntry& e : modes_) {
    if (e.gid == gid) return e.mode;
  }
  return ReliabilityMode::kNative;
}

reliable::ReliabilityCounters& ReliableRnic::CountersOf(const Gid& sgid) {
  for (const ModeEntry& e : modes_) {
    if (e.gid == sgid) return *e.counters;
  }
  return counters_;
}

const reliable::ReliabilityCounters* ReliableRnic::VmCounters(
    const Gid& first_gid) const {
  for (const VmRecord& r : vms_) {
    if (r.first_gid == first_gid) return r.counters.get();
  }
  return nullptr;
}

void ReliableRnic::ForgetVm(std::span<const Gid> gids) {
  if (gids.empty()) return;
  auto it = std::find_if(vms_.begin(), vms_.end(), [&](const VmRecord& r) {
    return r.first_gid == gids.front();
  });
  if (it == vms_.end()) return;
  reliable::ReliabilityCounters* vm = it->counters.get();
  for (const auto& k : conns_) {
    if (k != nullptr && &k->counters() == vm) return;
  }
  for (const auto& p : rc_paths_) {
    if (p != nullptr && &p->counters() == vm) return;
  }
  std::erase_if(modes_, [&](const ModeEntry& e) { return e.counters == vm; });
  detached_ += *vm;
  vms_.erase(it);
}

reliable::ReliabilityCounters ReliableRnic::counters() const {
  reliable::ReliabilityCounters sum = counters_;
  sum += detached_;
  for (const VmRecord& r : vms_) sum += *r.counters;
  return sum;
}

VirtualQp* ReliableRnic::FindQpByQpn(uint32_t qpn) {
  const uint32_t* id = qpn_index_.Find(qpn);
  return id != nullptr ? qps_.Find(*id) : nullptr;
}

Connection* ReliableRnic::FindConnection(uint32_t qpn) {
  VirtualQp* v = FindQpByQpn(qpn);
  return v != nullptr ? v->conn : nullptr;
}

ReliableRnic::Peer* ReliableRnic::FindPeer(uint64_t id) {
  for (Peer& p : peers_) {
    if (p.used && p.id == id) return &p;
  }
  return nullptr;
}

uint64_t ReliableRnic::QpHostBytes(const QpCaps& caps) const {
  const uint64_t lower = lower_.QpHostBytes(caps);
  if (link_ == nullptr || caps.type != QpType::kRc) return lower;
  // §8: the worst case whatever the mode: uc's tables and data QP, and
  // rc's copies and backup QP (both alive while a switch goes from one to
  // the other), and the switch's record with its hold queue (§6).
  return lower + reliable::FramedQpHostBytes(caps, options_.connection, lower_) +
         reliable::RcPath::HostBytes(caps, lower_) + sizeof(reliable::ModeSwitch) +
         reliable::HoldQueue::HostBytes(caps.max_send_wr, caps.max_inline_data);
}

// ---- ModifyQp: framing at RTR -----------------------------------------------

bool ReliableRnic::AimsAtLayerQp(const QpAttr& attr) const {
  for (const Peer& p : peers_) {
    if (p.used && p.ack_qpn == attr.dest_qpn && p.ack_gid == attr.av.dgid) {
      return true;
    }
  }
  for (const auto& k : conns_) {
    if (k != nullptr && k->state() == ConnState::kUc &&
        k->peer_data_qpn() == attr.dest_qpn &&
        k->init().attr.av.dgid == attr.av.dgid) {
      return true;
    }
  }
  for (const auto& p : rc_paths_) {
    if (p != nullptr && p->peer_backup_qpn() == attr.dest_qpn &&
        p->peer_backup_qpn() != 0 && p->dgid() == attr.av.dgid) {
      return true;
    }
  }
  return false;
}

bool ReliableRnic::IsLayerEvent(const AsyncEvent& ev) const {
  if (ev.type == AsyncEvent::Type::kCqError) {
    return ev.id == transport_cq_.id || ev.id == acks_->cq_id();
  }
  if (ev.type != AsyncEvent::Type::kQpError) return false;
  if (ev.id == acks_->qpn()) return true;
  for (const auto& k : conns_) {
    if (k != nullptr && k->data_qpn() == ev.id) return true;
  }
  // rc mode: the backups, and the virtual QP's own while a recovery the
  // layer started runs (a guest's error is the guest's).
  // A QP whose switch moved it to ERR to take its receives back.
  if (const VirtualQp* v = const_cast<ReliableRnic*>(this)->FindQpByQpn(ev.id);
      v != nullptr && v->sw != nullptr &&
      v->sw->state == reliable::ModeSwitch::State::kTakeBack) {
    return true;
  }
  if (const RcPath* p = const_cast<ReliableRnic*>(this)->FindRcPath(ev.id)) {
    return ev.id != p->vqpn() || p->state() == RcPath::State::kRecovering;
  }
  return false;
}

Status ReliableRnic::ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) {
  // §3.6: a guest QP may not be aimed at a peer's layer QP (its data QPs,
  // its ACK QP) that this layer knows of.
  if (link_ != nullptr && (mask & kQpState) && attr.state == QpState::kRtr &&
      (mask & kQpDestQpn) && AimsAtLayerQp(attr)) {
    return Status::kInvalid;
  }
  VirtualQp* v = qps_.Find(qp.id);
  if (v != nullptr && v->rc != nullptr && (mask & kQpState) &&
      attr.state == QpState::kRts && v->attr.state == QpState::kRts) {
    // rc mode: RTS -> RTS goes to each of the path's QPs in RTS (after a
    // takeover the virtual QP's own may be in ERR until its reset).
    VRDMA_RETURN_IF_ERROR(v->rc->ModifyRts(attr, mask));
  } else if (v != nullptr && v->rc != nullptr && (mask & kQpRetryCnt) &&
      attr.retry_cnt > reliable::kRcLowerRetryCnt) {
    // §5: the lower RC QP retries twice; the guest's count is its budget.
    QpAttr lower_attr = attr;
    lower_attr.retry_cnt = reliable::kRcLowerRetryCnt;
    VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(qp, lower_attr, mask));
  } else {
    VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(qp, attr, mask));
  }
  if (v == nullptr) return Status::kOk;
  QpAttr& a = v->attr;
  if (mask & kQpState) a.state = attr.state;
  if (mask & kQpAccessFlags) a.access_flags = attr.access_flags;
  if (mask & kQpAv) a.av = attr.av;
  if (mask & kQpPathMtu) a.path_mtu_bytes = attr.path_mtu_bytes;
  if (mask & kQpDestQpn) a.dest_qpn = attr.dest_qpn;
  if (mask & kQpTimeout) a.timeout = attr.timeout;
  if (mask & kQpRetryCnt) a.retry_cnt = attr.retry_cnt;
  if (mask & kQpRnrRetry) a.rnr_retry = attr.rnr_retry;
  if (mask & kQpMinRnrTimer) a.min_rnr_timer = attr.min_rnr_timer;
  if (mask & kQpMaxQpRdAtomic) a.max_rd_atomic = attr.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & kQpSqPsn) a.sq_psn = attr.sq_psn;
  if (mask & kQpRqPsn) a.rq_psn = attr.rq_psn;
  if (link_ == nullptr || (mask & kQpState) == 0) return Status::kOk;
  switch (attr.state) {
    case QpState::kRtr:
      if (v->conn == nullptr && v->rc == nullptr) MaybeFrame(*v);
      if (v->conn == nullptr && v->rc == nullptr) MaybeFrameRc(*v);
      // Not framed: the receives kept so far go to the lower RC QP, and
      // the QP passes through.
      if (v->conn == nullptr && v->rc == nullptr && v->rq != nullptr &&
          v->rq->holding()) {
        (void)v->rq->ReplayTo(lower_, v->lower);
      }
      break;
    case QpState::kRts:
      if (v->rc != nullptr) {
        v->rc->OnRts(a);
        if (!v->rc->connect_sent) StartRcConnect(*v->rc);
      }
      if (v->conn != nullptr) {
        v->conn->set_retry_budget_ns(RetryBudgetNs(a));
        v->conn->set_rnr_retry(a.rnr_retry);
        v->conn->set_max_rd_atomic(a.max_rd_atomic);
        // The first CONNECT goes at RTS, when the QP's rnr_retry (which
        // the peer's receiver needs, §2.3) is known.
        if (v->conn->state() == ConnState::kConnecting &&
            !v->conn->connect_sent) {
          StartConnect(*v->conn);
        }
      }
      // A SetMode in RTR (a uc connection's once it connected).
      if (v->conn == nullptr) Reconcile(*v, /*control_call=*/true);
      break;
    case QpState::kErr:
      // The guest's ERR during a switch: what it holds flushes.
      if (v->sw != nullptr && v->sw->running()) {
        FailSwitch(*v, WcStatus::kWrFlushErr);
      }
      FlushFramed(*v);
      break;
    case QpState::kReset:
      if (v->sw != nullptr && v->sw->running()) {
        FailSwitch(*v, WcStatus::kWrFlushErr);
      }
      DropSwitch(*v);
      v->peer_ask = {};
      Unframe(*v);
      UnframeRc(*v);
      if (v->rq != nullptr) v->rq->Reset();
      break;
    default:
      break;
  }
  return Status::kOk;
}

void ReliableRnic::MaybeFrame(VirtualQp& v) {
  if (v.type != QpType::kRc || v.has_srq || v.rq == nullptr ||
      ModeOf(v.attr.av.sgid) != ReliabilityMode::kUc ||
      v.caps.max_send_sge >= static_cast<uint32_t>(kMaxSge)) {
    return;
  }
  const std::optional<uint64_t> peer = link_->PeerOf(v.attr.av.dgid);
  if (!peer) return;
  v.conn = NewConnection(v, *peer);
  if (v.conn == nullptr) return;  // no room: native
  // CONNECT goes at RTS (StartConnect); a peer's CONNECT connects the QP
  // meanwhile.
  if (v.attr.state == QpState::kRts) StartConnect(*v.conn);
}

Connection* ReliableRnic::NewConnection(VirtualQp& v, uint64_t peer) {
  uint32_t slot = 0;
  while (slot < conns_.size() && conns_[slot] != nullptr) ++slot;
  if (slot == conns_.size()) return nullptr;  // the table is full
  reliable::VirtualCq* scq = cqs_.Find(v.send_cq.id);
  // The transport CQ holds every framed QP's worst case: its data QP's
  // sends and receives.
  const uint32_t per_qp = options_.connection.sender.chunks_in_flight +
                          options_.connection.bounce;
  const uint64_t need = uint64_t{framed_ + 1} * per_qp;
  if (need > transport_depth_) {
    const uint32_t depth = static_cast<uint32_t>(
        std::min<uint64_t>(std::max<uint64_t>(need, 2ull * transport_depth_),
                           lower_.limits().max_cqe));
    if (depth < need || lower_.ResizeCq(transport_cq_, depth) != Status::kOk) {
      return nullptr;
    }
    transport_depth_ = depth;
  }
  ConnectionInit init;
  init.slot = slot | uint32_t{++generation_} << 16;
  init.vqp = v.lower;
  init.pd = v.pd;
  init.transport_cq = transport_cq_;
  init.send_ring = scq != nullptr ? scq->synthesized.get() : nullptr;
  reliable::VirtualCq* rcq = cqs_.Find(v.recv_cq.id);
  init.recv_ring = rcq != nullptr ? rcq->synthesized.get() : nullptr;
  init.rq = v.rq.get();
  init.sq_depth = v.caps.max_send_wr;
  init.max_send_sge = v.caps.max_send_sge;
  init.max_inline = v.caps.max_inline_data;
  init.sq_sig_all = v.sq_sig_all;
  init.attr = v.attr;
  init.peer_daemon = peer;
  do {
    init.my_token = static_cast<uint32_t>(token_rng_());
  } while (init.my_token == 0 || (init.my_token & 0xffffff) == 0);
  init.retry_budget_ns = RetryBudgetNs(v.attr);
  auto k = std::make_unique<Connection>(lower_, init, options_.connection,
                                        &CountersOf(v.attr.av.sgid), &mrs_,
                                        acks_.get(), &active_);
  if (k->Open() != Status::kOk) return nullptr;
  SetAckAddress(*k);
  Connection* out = k.get();
  conns_[slot] = std::move(k);
  ++framed_;
  out->Wake();
  return out;
}

uint64_t ReliableRnic::PumpConnection(Connection& k, uint64_t now,
                                      Connection::SweepTally* sweep) {
  uint64_t due = UINT64_MAX;
  if (k.state() == ConnState::kConnecting && k.connects_left > 0) {
    if (now >= k.next_connect_ns) {
      SendConnect(k, false);
      --k.connects_left;
      k.next_connect_ns = now + options_.connect_interval_ns;
    }
    if (k.connects_left > 0) due = k.next_connect_ns;  // the repeat timer
  }
  return std::min(due, k.Pump(now, sweep));
}

bool ReliableRnic::PumpEarly(Connection& k, uint64_t now, uint64_t* due) {
  const reliable::ReliabilityCounters before = k.counters();
  Connection::SweepTally unused;  // asleep as a whole: the set checks it
  *due = PumpConnection(k, now, &unused);
  return std::memcmp(&before, &k.counters(), sizeof before) != 0;
}

void ReliableRnic::StartConnect(Connection& k) {
  k.connect_sent = true;
  SendConnect(k, false);
  k.next_connect_ns = clock_() + options_.connect_interval_ns;
  k.connects_left = options_.connect_repeats;
  k.Wake();  // its repeat timer
}

void ReliableRnic::Unframe(VirtualQp& v) {
  if (v.conn == nullptr) return;
  const uint32_t slot = v.conn->init().slot & 0xffff;
  v.conn = nullptr;
  conns_[slot].reset();
  --framed_;
}

// ---- Peer messages ------------------------------------------------------------

size_t ReliableRnic::EncodePeer(peer::MsgType type, peer::Body body,
                                std::span<uint8_t, peer::kMaxMessageBytes> buf) {
  peer::PeerMessage m;
  m.type = type;
  m.origin = options_.daemon_id;
  m.seq = ++peer_seq_;
  m.body = std::move(body);
  return peer::Encode(m, buf);
}

bool ReliableRnic::SendPeer(uint64_t to, peer::MsgType type, peer::Body body) {
  uint8_t buf[peer::kMaxMessageBytes];
  const size_t n = EncodePeer(type, std::move(body), buf);
  return n > 0 && link_->Send(to, std::span(buf, n));
}

void ReliableRnic::SendHello() {
  uint8_t buf[peer::kMaxMessageBytes];
  const size_t n = EncodePeer(
      peer::MsgType::kHello,
      peer::Hello{peer::kUnitSize, acks_->qpn(), acks_->qkey(), daemon_gid_}, buf);
  if (n > 0) link_->Broadcast(std::span(buf, n));
}

void ReliableRnic::SendConnect(Connection& k, bool ok) {
  peer::Connect c;
  c.src_vqpn = k.vqpn();
  c.dst_vqpn = k.peer_vqpn();
  c.data_qpn = k.data_qpn();
  c.data_psn = k.data_psn();
  // No backup QP before step 16: the backup fields repeat the data QP's.
  c.backup_qpn = k.data_qpn();
  c.backup_psn = k.data_psn();
  c.conn_token = k.my_token();
  c.mode = peer::Mode::kUc;
  c.rnr_retry = static_cast<uint8_t>(k.init().attr.rnr_retry & 7);
  c.retry_budget_ns = k.retry_budget_ns() != 0 ? k.retry_budget_ns() : ~uint64_t{0};
  if (SendPeer(k.init().peer_daemon,
               ok ? peer::MsgType::kConnectOk : peer::MsgType::kConnect, c)) {
    ++k.counters().connects_sent;
  }
}

void ReliableRnic::OnPeerMessage(std::span<const uint8_t> bytes) {
  if (link_ == nullptr) return;
  peer::PeerMessage m;
  const peer::PeerCheck check = peer::Decode(bytes, &m);
  counters_.peer.Count(check);
  if (check != peer::PeerCheck::kOk) return;
  switch (m.type) {
    case peer::MsgType::kHello:
      return OnHello(m.origin, &std::get<peer::Hello>(m.body));
    case peer::MsgType::kConnect:
    case peer::MsgType::kConnectOk:
      return OnConnect(m.origin, &std::get<peer::Connect>(m.body),
                       m.type == peer::MsgType::kConnect);
    case peer::MsgType::kConnectNative:
      return OnConnectNative(m.origin, &std::get<peer::ConnectNative>(m.body));
    case peer::MsgType::kRecover:
      return OnRecover(m.origin, &std::get<peer::Recover>(m.body));
    case peer::MsgType::kRecovered:
      return OnRecovered(m.origin, &std::get<peer::Recovered>(m.body));
    case peer::MsgType::kSwitch:
      return OnSwitch(m.origin, &std::get<peer::Switch>(m.body));
    case peer::MsgType::kDrained:
      return OnDrained(m.origin, &std::get<peer::Drained>(m.body));
    case peer::MsgType::kReady:
      return OnReady(m.origin, &std::get<peer::Ready>(m.body));
    default:
      ++counters_.peer_unmatched;  // the messages of later steps
      return;
  }
}

void ReliableRnic::OnHello(uint64_t origin, const void* body) {
  const auto& h = *static_cast<const peer::Hello*>(body);
  Peer* p = FindPeer(origin);
  const bool known = p != nullptr;
  if (p != nullptr && p->ack_qpn == h.ack_qpn && p->ack_qkey == h.ack_qkey &&
      p->ack_gid == h.ack_gid) {
    return;  // the periodic HELLO: nothing new
  }
  if (p == nullptr) {
    // A daemon that restarted says HELLO with a new id from the same ACK
    // GID (a GID is one daemon's): its old entry is free, so restarts
    // never fill the table.
    for (Peer& q : peers_) {
      if (q.used && q.ack_gid == h.ack_gid) {
        (void)lower_.DestroyAh(q.ah);
        q.used = false;
        ++counters_.peer_restarts;
      }
    }
    for (Peer& q : peers_) {
      if (!q.used) {
        p = &q;
        break;
      }
    }
    if (p == nullptr) {
      ++counters_.peer_unmatched;  // more peers than the table holds
      return;
    }
  } else {
    (void)lower_.DestroyAh(p->ah);
    p->used = false;
  }
  AddressVector av;
  av.dgid = h.ack_gid;
  av.sgid = daemon_gid_;
  Result<RnicAh> ah = lower_.CreateAh(layer_pd_, av);
  if (!ah.ok()) return;
  *p = Peer{true, origin, h.ack_qpn, h.ack_qkey, h.ack_gid, *ah};
  for (auto& k : conns_) {
    if (k != nullptr && k->init().peer_daemon == origin) SetAckAddress(*k);
  }
  if (!known) SendHello();  // a new peer learns of us at once
}

void ReliableRnic::SetAckAddress(Connection& k) {
  Peer* p = FindPeer(k.init().peer_daemon);
  if (p == nullptr) return;
  k.ack_to = reliable::AckAddress{p->ah, p->ack_qpn, p->ack_qkey};
  k.has_ack_to = true;
}

void ReliableRnic::OnConnect(uint64_t origin, const void* body, bool request) {
  const auto& c = *static_cast<const peer::Connect*>(body);
  VirtualQp* v = FindQpByQpn(c.dst_vqpn);
  const bool paired = v != nullptr && v->attr.dest_qpn == c.src_vqpn &&
                      (v->attr.state == QpState::kRtr ||
                       v->attr.state == QpState::kRts) &&
                      link_->PeerOf(v->attr.av.dgid) == origin;
  if (!paired) {
    ++counters_.peer_unmatched;  // not (yet) in RTR towards it: it repeats
    return;
  }
  if (v->rc != nullptr && c.mode == peer::Mode::kRc) {
    return OnRcConnect(origin, *v, body, request);
  }
  Connection* k = v->conn;
  if (k == nullptr || c.mode != peer::Mode::kUc) {
    // Not framed here (this VM is native, or the QP cannot be): both run
    // native (§2.2).
    if (!request) return;
    (void)SendPeer(origin, peer::MsgType::kConnectNative,
                   peer::ConnectNative{v->lower.qpn, c.src_vqpn, c.conn_token});
    // An ask of this end's that came before the peer's QP was there to take
    // it (dropped there as unmatched) goes again, after the answer.
    if (v->sw != nullptr &&
        v->sw->state == reliable::ModeSwitch::State::kAsked &&
        !v->sw->ask_resent) {
      v->sw->ask_resent = true;
      SendSwitch(*v);
    }
    return;
  }
  if (k->state() == ConnState::kConnecting) {
    if (k->OnPeerConnect(c.data_qpn, c.data_psn, c.conn_token, c.rnr_retry,
                         c.retry_budget_ns) ==
        Status::kOk) {
      ++k->counters().connects_uc;
      if (request) SendConnect(*k, true);
      Reconcile(*v);  // a SetMode while it connected
      return;
    }
  } else if (k->state() == ConnState::kUc && k->peer_token() != c.conn_token) {
    ++counters_.peer_unmatched;  // another incarnation: the live switch's
    return;
  }
  if (request && k->state() == ConnState::kUc) SendConnect(*k, true);
}

void ReliableRnic::OnConnectNative(uint64_t origin, const void* body) {
  const auto& c = *static_cast<const peer::ConnectNative*>(body);
  VirtualQp* v = FindQpByQpn(c.dst_vqpn);
  if (v != nullptr && v->rc != nullptr &&
      v->rc->state() == reliable::RcPath::State::kConnecting &&
      v->rc->peer_vqpn() == c.src_vqpn && v->rc->peer_daemon() == origin &&
      v->rc->my_token() == c.conn_token) {
    // The peer's VM is not in rc mode: the QP runs without a backup (its
    // WRs keep going through the path, its failures to the guest).
    v->rc->OnConnectNative();
    ++v->rc->counters().connects_native;
    return;
  }
  Connection* k = v != nullptr ? v->conn : nullptr;
  if (k == nullptr || k->state() != ConnState::kConnecting ||
      k->peer_vqpn() != c.src_vqpn || k->init().peer_daemon != origin ||
      k->my_token() != c.conn_token) {
    ++counters_.peer_unmatched;
    return;
  }
  // uc was not agreed: what the guest posted meanwhile goes to the lower
  // RC QP in order, and everything after it passes through.
  k->set_state(ConnState::kNative);
  (void)k->sender().ReplayNative(lower_, v->lower);
  if (v->rq != nullptr && v->rq->holding())
    (void)v->rq->ReplayTo(lower_, v->lower);
  ++k->counters().connects_native;
  Reconcile(*v);  // a SetMode while it connected
}

// ---- Progress -------------------------------------------------------------------

void ReliableRnic::OnAckArrival(const AckArrival& a, uint64_t now_ns) {
  if (a.status != WcStatus::kSuccess) {
    counters_.Count(WireCounter::kRxLowerError);
    return;
  }
  reliable::Ack ack;
  if (reliable::WireCheck c = reliable::ParseAck(a.bytes, &ack)) {
    counters_.Count(*c);
    return;
  }
  VirtualQp* v = FindQpByQpn(ack.dst_vqpn);
  Connection* k = v != nullptr ? v->conn : nullptr;
  const Peer* p = k != nullptr ? FindPeer(k->init().peer_daemon) : nullptr;
  if (k == nullptr || k->state() != ConnState::kUc || p == nullptr ||
      p->ack_qpn != a.src_qpn || p->ack_gid != a.sgid) {
    counters_.Count(WireCounter::kAckUnknownQp);
    return;
  }
  k->sender().OnAck(ack, now_ns);
}

bool ReliableRnic::ProgressUc() {
  const uint64_t now = clock_();
  bool busy = false;
  // The ACK CQ first (B §3.4.3), then the transport CQ.
  for (int round = 0; round < 8; ++round) {  // bounded: a flood cannot starve
    if (acks_->Poll([&](const AckArrival& a) { OnAckArrival(a, now); }) == 0) break;
    busy = true;
  }
  std::span<Completion> batch = transport_batch_;
  for (int round = 0; round < 8; ++round) {
    const int n = lower_.PollCq(transport_cq_, batch);
    for (int i = 0; i < n; ++i) {
      const uint32_t slot = reliable::DataWrSlot(batch[i].wr_id);
      Connection* k = (slot & 0xffff) < conns_.size()
                          ? conns_[slot & 0xffff].get()
                          : nullptr;
      // A destroyed connection's completion (another generation): dropped.
      if (k != nullptr && k->init().slot == slot) {
        k->OnTransportCompletion(batch[i], now);
      }
    }
    if (n < static_cast<int>(batch.size())) break;
    busy = true;
  }
  // The connections with work (ActiveSet); every idle_sweep_ns, every
  // framed one, and both halves of each (Connection::Pump: a half whose
  // wake was missed inside a busy connection).
  const bool sweep = now >= next_sweep_ns_;
  if (sweep) next_sweep_ns_ = now + options_.idle_sweep_ns;
  Connection::SweepTally halves;
  busy |= active_.Turn(
      now, sweep, framed_, [&](uint32_t s) { return conns_[s] != nullptr; },
      [&](uint32_t s) {
        return PumpConnection(*conns_[s], now, sweep ? &halves : nullptr);
      },
      [&](uint32_t s, uint64_t* due) { return PumpEarly(*conns_[s], now, due); },
      &counters_.missed_wakes, &counters_.missed_deadlines);
  counters_.missed_wakes += halves.missed_wakes;
  counters_.missed_deadlines += halves.missed_deadlines;
  if (rc_framed_ > 0) busy |= ProgressRc(now);
  if (switching_ > 0) busy |= ProgressSwitches(now);
  if (now >= next_hello_ns_) {
    SendHello();
    next_hello_ns_ = now + options_.hello_interval_ns;
  }
  return busy;
}

}  // namespace vrdma
