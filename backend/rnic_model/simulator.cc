// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Simulator set-up, the public API and the event loop. The send engine is in
// send_engine.cc, the fabric and receive side in receive_side.cc.
#include "backend/rnic_model/simulator.h"

#include <algorithm>

namespace vrdma::model {

Simulator::Simulator(const FabricParams& fabric, uint64_t seed)
    : fabric_(fabric), rng_(seed) {}

HostId Simulator::AddHost(const NicParams& nic) {
  Host h;
  h.p = nic;
  h.p.mtu_bytes = std::clamp<uint32_t>(nic.mtu_bytes, 256, 4096);
  if (h.p.num_pus == 0) h.p.num_pus = 1;
  if (h.p.num_rx_pus == 0) h.p.num_rx_pus = 1;
  if (h.p.tx_fifo_packets == 0) h.p.tx_fifo_packets = 1;
  if (h.p.num_atomic_units == 0) h.p.num_atomic_units = 1;
  h.atomic_free.assign(h.p.num_atomic_units, 0);
  h.wire.resize(h.p.mtu_bytes + 1);
  for (uint32_t b = 0; b <= h.p.mtu_bytes; ++b) h.wire[b] = h.p.wire_time_ps(b);
  h.pus.resize(h.p.num_pus);
  // Popped from the back: PU 0 first, deterministic.
  for (uint32_t i = h.p.num_pus; i > 0; --i) h.free_pus.push_back(i - 1);
  mem_.emplace_back();
  mem_.back().Init(h.p);
  hosts_.push_back(std::move(h));
  return static_cast<HostId>(hosts_.size() - 1);
}

CqId Simulator::CreateCq(HostId host) {
  Cq c;
  c.host = host;
  cqs_.push_back(std::move(c));
  return static_cast<CqId>(cqs_.size() - 1);
}

QpId Simulator::CreateQp(HostId host, const QpConfig& config) {
  Qp q;
  q.host = host;
  q.cfg = config;
  uint64_t cap = 1;
  while (cap < std::max<uint32_t>(config.sq_depth, 1)) cap <<= 1;
  q.sq.resize(cap);
  q.mask = cap - 1;
  ResetRetries(q);
  qps_.push_back(std::move(q));
  qp_mem_.emplace_back();
  return static_cast<QpId>(qps_.size() - 1);
}

bool Simulator::Connect(QpId a, QpId b) {
  if (a >= qps_.size() || b >= qps_.size() || a == b) return false;
  if (qps_[a].cfg.transport != qps_[b].cfg.transport) return false;
  if (qps_[a].cfg.transport == Transport::kUd) return false;  // connectionless
  qps_[a].peer = b;
  qps_[b].peer = a;
  return true;
}

int Simulator::PostSend(QpId qpid, std::span<const Wr> wrs) {
  Qp& q = qps_[qpid];
  int n = 0;
  const Transport tr = q.cfg.transport;
  for (const Wr& wr : wrs) {
    if (q.ops.error) {  // IB: WRs posted to a QP in error complete flushed
      FlushWr(qpid, wr, now_, CqeStatus::kFlushed);
      ++n;
      continue;
    }
    if (q.tail - q.head >= q.cfg.sq_depth) break;
    const bool local = wr.op == Op::kWait || wr.op == Op::kEnable;
    if (tr == Transport::kUd) {
      // Connectionless: SENDs of at most one MTU to an address handle.
      if (wr.op != Op::kSend && wr.op != Op::kSendImm && !local) break;
      if (!local) {
        if (wr.bytes > hosts_[q.host].p.mtu_bytes || wr.ah_qp >= qps_.size()) break;
        const Qp& d = qps_[wr.ah_qp];
        if (d.host != wr.ah_host || d.cfg.transport != Transport::kUd) break;
      }
    } else {
      if (!local && q.peer == kNoQp) break;
      // UC has no READ and no atomics.
      if (tr == Transport::kUc && IsReadLike(wr.op)) break;
    }
    Wqe& w = WqeAt(q, q.tail);
    w = Wqe{};
    w.wr = wr;
    if (IsAtomic(wr.op)) w.wr.bytes = 8;
    w.post_time = now_;
    if (wr.op == Op::kWait) w.wait_target = cqs_[wr.wait_cq].produced + wr.wait_count;
    ++q.tail;
    ++n;
  }
  if (n > 0 && !q.cfg.managed) {
    q.visible = q.tail;
    // One doorbell for the whole post list; the NIC fetches the WQEs once.
    Schedule(PostFetchDone(qpid, q.tail - n, q.tail), kFetch, qpid, q.tail, q.host);
  }
  return n;
}

void Simulator::PostRecv(QpId qpid, uint64_t wr_id) {
  Qp& q = qps_[qpid];
  q.rq.push_back(wr_id);
  ++q.rq_posted;
}

int Simulator::PollCq(CqId cq, std::span<Cqe> out) {
  Cq& c = cqs_[cq];
  int n = 0;
  while (n < static_cast<int>(out.size()) && !c.ring.empty()) out[n++] = c.ring.pop_front();
  return n;
}

uint64_t Simulator::qp_state_bytes() const {
  uint64_t bytes = 0;
  for (const Qp& q : qps_) {
    bytes += sizeof(Qp) + sizeof(QpMemory) + q.sq.capacity() * sizeof(Wqe) +
             q.rq.capacity() * sizeof(uint64_t) + q.resp.capacity() * sizeof(RespJob);
  }
  return bytes;
}

uint32_t Simulator::sq_outstanding(QpId qp) const {
  return static_cast<uint32_t>(qps_[qp].tail - qps_[qp].head);
}

void Simulator::ScheduleTimer(Picos at, TimerSink* sink, uint64_t cookie) {
  uint32_t slot;
  if (!free_timers_.empty()) {
    slot = free_timers_.back();
    free_timers_.pop_back();
    timers_[slot] = UserTimer{sink, cookie};
  } else {
    slot = static_cast<uint32_t>(timers_.size());
    timers_.push_back(UserTimer{sink, cookie});
  }
  Schedule(std::max(at, now_), kUserTimer, slot, 0, 0);
}

bool Simulator::RunUntil(Picos t) {
  stop_ = false;
  Event e;
  while (events_.PopUpTo(t, &e)) {
    now_ = e.time;
    ++events_processed_;
    Dispatch(e);
    if (stop_) {
      stop_ = false;
      return false;
    }
  }
  now_ = std::max(now_, t);
  return true;
}

bool Simulator::Step() {
  if (events_.empty()) return false;
  Event e = events_.Pop();
  now_ = e.time;
  ++events_processed_;
  Dispatch(e);
  return true;
}

void Simulator::Dispatch(const Event& e) {
  switch (e.kind) {
    case kFetch: OnFetch(e.a, e.b); break;
    case kDispatch: OnDispatch(e.a); break;
    case kPuPacket: OnPuPacket(e.a, static_cast<uint32_t>(e.b)); break;
    case kLinkDone: OnLinkDone(e.a); break;
    case kSwitchArrive: OnSwitchArrive(e.a); break;
    case kPortDone: OnPortDone(e.a); break;
    case kRxDone: OnRxDone(e.a); break;
    case kCqeVisible: OnCqeVisible(e.a); break;
    case kRto: OnRto(e.a); break;
    case kPuContinue: StartWqe(e.a, static_cast<uint32_t>(e.b)); break;
    case kRnrRetry: OnRnrRetry(e.a, static_cast<uint32_t>(e.b)); break;
    case kRxDeliver: HandleRequest(e.a); break;
    case kAtomicDone: OnAtomicDone(e.a, e.b); break;
    case kAckTimer: OnAckTimer(e.a); break;
    case kLinkWake:
      if (now_ >= mem_[e.a].link_wake_at) mem_[e.a].link_wake_at = 0;
      StartLink(e.a);
      break;
    case kPuResume: PuNextWqe(e.a, static_cast<uint32_t>(e.b)); break;
    case kUserTimer: {
      UserTimer t = timers_[e.a];
      free_timers_.push_back(e.a);
      t.sink->OnTimer(t.cookie);
      break;
    }
    default: break;
  }
}

uint32_t Simulator::AllocPacket() {
  if (!free_pkts_.empty()) {
    uint32_t id = free_pkts_.back();
    free_pkts_.pop_back();
    pkts_[id] = Packet{};
    return id;
  }
  pkts_.push_back(Packet{});
  return static_cast<uint32_t>(pkts_.size() - 1);
}

// ---- completions -----------------------------------------------------------

void Simulator::Retire(QpId qpid) {
  Qp& q = qps_[qpid];
  while (q.head < q.tail && WqeAt(q, q.head).done) {
    Wqe& w = WqeAt(q, q.head);
    if (w.wr.signaled || q.cfg.sig_all) {
      Cqe c;
      c.wr_id = w.wr.wr_id;
      c.qp = qpid;
      c.cq = q.cfg.send_cq;
      c.op = w.wr.op;
      c.bytes = w.wr.bytes;
      c.post_time = w.post_time;
      EmitCqe(c);
    }
    ++q.head;
  }
  // A READ completing implicitly acknowledges everything before it, which
  // can retire past a rewound processing position: never process a retired
  // slot again.
  if (q.proc < q.head) {
    q.proc = q.head;
    q.proc_pkt = 0;
  }
}

void Simulator::EmitCqe(const Cqe& cqe) {
  uint32_t slot;
  if (!free_cqe_slots_.empty()) {
    slot = free_cqe_slots_.back();
    free_cqe_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(pending_cqes_.size());
    pending_cqes_.push_back(Cqe{});
  }
  Cqe& c = pending_cqes_[slot];
  c = cqe;
  c.time = CqeVisibleAt(cqs_[cqe.cq].host);
  Schedule(c.time, kCqeVisible, slot, 0, cqs_[cqe.cq].host);
}

void Simulator::OnCqeVisible(uint64_t slot) {
  Cqe c = pending_cqes_[slot];
  free_cqe_slots_.push_back(static_cast<uint32_t>(slot));
  Cq& cq = cqs_[c.cq];
  ++cq.produced;
  if (sink_ != nullptr) {
    sink_->OnCqe(c);
  } else {
    cq.ring.push_back(c);
    if (listener_ != nullptr) listener_->OnCqeVisible(c.cq);
  }
  CqeArrived(c.cq);
}

void Simulator::CqeArrived(CqId cqid) {
  Cq& cq = cqs_[cqid];
  if (cq.waiters.empty()) return;
  // Unblock every QP whose WAIT is now satisfied, in registration order.
  std::vector<QpId> still;
  std::vector<QpId> woken;
  for (QpId qpid : cq.waiters) {
    Qp& q = qps_[qpid];
    Wqe& w = WqeAt(q, q.wait_wqe);
    if (cq.produced >= w.wait_target) {
      woken.push_back(qpid);
    } else {
      still.push_back(qpid);
    }
  }
  cq.waiters.swap(still);
  for (QpId qpid : woken) {
    Qp& q = qps_[qpid];
    WqeAt(q, q.wait_wqe).done = true;
    if (q.proc == q.wait_wqe) ++q.proc;
    q.blocked_wait = false;
    Retire(qpid);
    MakeReady(2 * qpid);
  }
}

Picos IdleWriteRoundTripPs(const NicParams& nic, const FabricParams& fabric,
                           uint32_t bytes) {
  struct Last : CompletionSink {
    void OnCqe(const Cqe& c) override { rtt = c.time - c.post_time; }
    Picos rtt = 0;
  } last;
  FabricParams idle = fabric;
  idle.random_loss = 0;
  Simulator sim(idle, 1);
  sim.set_completion_sink(&last);
  QpConfig c;
  c.transport = Transport::kRc;
  const HostId a = sim.AddHost(nic);
  const HostId b = sim.AddHost(nic);
  c.send_cq = c.recv_cq = sim.CreateCq(a);
  const QpId qa = sim.CreateQp(a, c);
  c.send_cq = c.recv_cq = sim.CreateCq(b);
  const QpId qb = sim.CreateQp(b, c);
  if (!sim.Connect(qa, qb)) return 0;
  Wr w;
  w.wr_id = 1;
  w.op = Op::kWrite;
  w.bytes = bytes;
  w.signaled = true;
  if (sim.PostSend(qa, {&w, 1}) != 1) return 0;
  sim.RunUntil(NsToPs(1e6));
  return last.rtt;
}

}  // namespace vrdma::model
