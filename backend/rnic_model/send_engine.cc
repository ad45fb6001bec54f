// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The send engine of one NIC: WQE fetch, the round-robin ready queue, the
// dispatcher (aggregate message-rate ceiling), processing units that hold a
// QP for one whole WQE, segmentation into MTU packets, the TX FIFO that
// interleaves PUs packet by packet, the link, go-back-N rewinds and the
// retransmission timer.
#include <algorithm>

#include "backend/rnic_model/simulator.h"

namespace vrdma::model {

void Simulator::OnFetch(QpId qpid, uint64_t upto) {
  Qp& q = qps_[qpid];
  q.fetched = std::max(q.fetched, std::min(upto, q.visible));
  WqesFetched(qpid, upto);  // the fetched WQEs sit in the WQE cache
  MakeReady(2 * qpid);
}

bool Simulator::FlowHasWork(uint32_t flow) {
  Qp& q = qps_[flow / 2];
  if (flow & 1) return !q.resp.empty();
  if (q.ops.error) return false;
  if (q.blocked_wait || q.blocked_reads || q.rnr_wait) return false;
  return q.proc < q.fetched || q.rewind_pending;
}

void Simulator::MakeReady(uint32_t flow) {
  Qp& q = qps_[flow / 2];
  FlowState& fs = q.flow[flow & 1];
  if (fs.queued || fs.on_pu || !FlowHasWork(flow)) return;
  Host& h = hosts_[q.host];
  h.ready.push_back(flow);
  fs.queued = true;
  TryDispatch(q.host);
}

void Simulator::OnDispatch(HostId hid) {
  hosts_[hid].dispatch_pending = false;
  TryDispatch(hid);
}

void Simulator::TryDispatch(HostId hid) {
  Host& h = hosts_[hid];
  // At most one kDispatch is pending per host. StartWqe can release its PU
  // at once (a zero-count WAIT, nothing left to send) and re-enter here,
  // which may schedule the kDispatch: the loop must then stop too, or every
  // dispatch instant adds one more pending kDispatch.
  while (!h.dispatch_pending && !h.ready.empty() && !h.free_pus.empty()) {
    if (now_ < h.dispatch_free) {
      h.dispatch_pending = true;
      Schedule(h.dispatch_free, kDispatch, hid, 0, hid);
      return;
    }
    uint32_t flow = h.ready.pop_front();
    Qp& q = qps_[flow / 2];
    q.flow[flow & 1].queued = false;
    if (!FlowHasWork(flow)) continue;
    uint32_t pu = h.free_pus.back();
    h.free_pus.pop_back();
    h.pus[pu].busy = true;
    h.pus[pu].flow = flow;
    h.pus[pu].visit_wqes = 0;
    q.flow[flow & 1].on_pu = true;
    h.dispatch_free = now_ + h.p.dispatch_gap_ps;
    StartWqe(hid, pu);
  }
}

void Simulator::StartWqe(HostId hid, uint32_t pu) {
  Host& h = hosts_[hid];
  const uint32_t flow = h.pus[pu].flow;
  const QpId qpid = flow / 2;
  Qp& q = qps_[qpid];
  if (flow & 1) {  // READ response: one job per PU visit, like a WQE
    Schedule(now_ + WqeStartStall(hid, flow) + h.p.wqe_cost_ps, kPuPacket, hid, pu, hid);
    return;
  }
  if (q.ops.error) {
    ReleasePu(hid, pu);
    return;
  }
  if (q.rewind_pending) ApplyRewind(qpid);
  while (q.proc < q.fetched && WqeAt(q, q.proc).done) {
    ++q.proc;
    q.proc_pkt = 0;
  }
  if (q.proc >= q.fetched) {
    ReleasePu(hid, pu);
    return;
  }
  Wqe& w = WqeAt(q, q.proc);
  switch (w.wr.op) {
    case Op::kWait:
      if (w.wr.wait_count == 0) {
        // Zero-count WAIT: completes at once and makes the NIC move on to
        // another QP (PeRF §3.5.2), whatever wqes_per_visit allows.
        w.done = true;
        ++q.proc;
        Retire(qpid);
        ReleasePu(hid, pu);
      } else if (cqs_[w.wr.wait_cq].produced >= w.wait_target) {
        w.done = true;
        ++q.proc;
        Retire(qpid);
        WqeDoneOnPu(hid, pu);
      } else {
        q.blocked_wait = true;
        q.wait_wqe = q.proc;
        cqs_[w.wr.wait_cq].waiters.push_back(qpid);
        ReleasePu(hid, pu);
      }
      return;
    case Op::kEnable: {
      if (w.wr.enable_qp < qps_.size()) {
        Qp& t = qps_[w.wr.enable_qp];
        const uint64_t from = t.visible;
        t.visible = w.wr.enable_count == 0
                        ? t.tail
                        : std::min(t.tail, t.visible + w.wr.enable_count);
        Schedule(PostFetchDone(w.wr.enable_qp, from, t.visible), kFetch, w.wr.enable_qp,
                 t.visible, t.host);
      }
      w.done = true;
      ++q.proc;
      Retire(qpid);
      WqeDoneOnPu(hid, pu);
      return;
    }
    case Op::kRead:
    case Op::kCas:
    case Op::kFaa:
      if (w.npkts == 0 && q.reads_outstanding >= h.p.max_rd_atomic) {
        q.blocked_reads = true;
        ReleasePu(hid, pu);
        return;
      }
      break;
    default:
      break;
  }
  const Picos cost = q.proc_pkt == 0 ? WqeStartStall(hid, flow) + h.p.wqe_cost_ps
                                     : h.p.seg_cost_ps;
  Schedule(now_ + cost, kPuPacket, hid, pu, hid);
}

void Simulator::OnPuPacket(HostId hid, uint32_t pu) {
  Host& h = hosts_[hid];
  const uint32_t flow = h.pus[pu].flow;
  const QpId qpid = flow / 2;
  Qp& q = qps_[qpid];
  const uint32_t mtu = h.p.mtu_bytes;
  if (!(flow & 1) && q.ops.error) {
    ReleasePu(hid, pu);
    return;
  }
  uint32_t id = AllocPacket();
  Packet& pk = pkts_[id];
  pk.src = hid;
  pk.src_qp = qpid;
  if (q.peer != kNoQp) {
    pk.dst_qp = q.peer;
    pk.dst = qps_[q.peer].host;
  }
  if (flow & 1) {
    RespJob& job = q.resp.front();
    pk.type = kReadResp;
    pk.op = Op::kRead;
    pk.wqe = job.wqe;
    pk.idx = q.resp_pkt;
    pk.first = q.resp_pkt == 0;
    pk.last = q.resp_pkt + 1 == job.npkts;
    pk.payload = std::min(mtu, job.bytes - std::min(job.bytes, q.resp_pkt * mtu));
    pk.msg_bytes = job.bytes;
    if (++q.resp_pkt == job.npkts) {
      q.resp.pop_front();
      q.resp_pkt = 0;
    }
  } else {
    if (q.rewind_pending) ApplyRewind(qpid);
    while (q.proc < q.fetched && WqeAt(q, q.proc).done) {
      ++q.proc;
      q.proc_pkt = 0;
    }
    Wqe* w = q.proc < q.fetched ? &WqeAt(q, q.proc) : nullptr;
    if (w == nullptr || w->wr.op == Op::kWait || w->wr.op == Op::kEnable) {
      // The rewind landed on something that is not data: start over.
      FreePacket(id);
      ReleasePu(hid, pu);
      return;
    }
    const bool read_like = IsReadLike(w->wr.op);
    if (w->npkts == 0) {  // first transmission: the WQE gets its PSN range
      w->first_psn = q.max_psn;
      w->npkts = read_like ? 1 : Npkts(w->wr.bytes, mtu);
      if (read_like) ++q.reads_outstanding;
    }
    if (q.cfg.transport == Transport::kUd) {  // the WR's address handle
      pk.dst_qp = w->wr.ah_qp;
      pk.dst = w->wr.ah_host;
    }
    const uint32_t psn = w->first_psn + q.proc_pkt;
    pk.type = w->wr.op == Op::kRead ? kReadReq : read_like ? kAtomicReq : kData;
    pk.raddr = w->wr.raddr;
    pk.imm = w->wr.imm;
    pk.carry = w->wr.carry;
    pk.op = w->wr.op;
    pk.psn = psn;
    pk.wqe = q.proc;
    pk.first = q.proc_pkt == 0;
    pk.last = q.proc_pkt + 1 == w->npkts;
    pk.msg_bytes = w->wr.bytes;
    pk.payload = w->wr.op == Op::kRead
                     ? 0
                     : std::min(mtu, w->wr.bytes - std::min(w->wr.bytes, q.proc_pkt * mtu));
    pk.retransmit = psn < q.max_psn;
    if (pk.retransmit) ++h.stats.retransmitted_packets;
    q.max_psn = std::max(q.max_psn, psn + 1);
    q.next_psn = psn + 1;
    if (pk.last) {
      w->sent_once = true;
      ++q.proc;
      q.proc_pkt = 0;
      pk.ack_req = q.proc >= q.fetched || WqeAt(q, q.proc).wr.op == Op::kWait;
    } else {
      ++q.proc_pkt;
    }
  }
  TxPayloadDma(hid, pu, pk);
  h.pus[pu].pkt = id;
  h.pus[pu].holding = true;
  PushToFifo(hid, pu);
}

void Simulator::PushToFifo(HostId hid, uint32_t pu) {
  Host& h = hosts_[hid];
  if (h.fifo.size() < h.p.tx_fifo_packets && h.fifo_waiters.empty()) {
    h.fifo.push_back(h.pus[pu].pkt);
    h.pus[pu].holding = false;
    StartLink(hid);
    AfterPush(hid, pu);
  } else {
    h.fifo_waiters.push_back(pu);
  }
}

void Simulator::AfterPush(HostId hid, uint32_t pu) {
  Host& h = hosts_[hid];
  const uint32_t flow = h.pus[pu].flow;
  Qp& q = qps_[flow / 2];
  bool more;
  if (flow & 1) {
    more = q.resp_pkt != 0;   // mid-response
  } else {
    more = q.rewind_pending || q.proc_pkt != 0;  // mid-message
  }
  // A PU stalled on an address translation goes on when it is done.
  const Picos at = PuFreeAt(hid, pu);
  if (more) {
    Schedule(at + h.p.seg_cost_ps, kPuPacket, hid, pu, hid);
  } else if (at > now_) {
    Schedule(at, kPuResume, hid, pu, hid);
  } else {
    PuNextWqe(hid, pu);
  }
}

void Simulator::PuNextWqe(HostId hid, uint32_t pu) {
  if (hosts_[hid].pus[pu].flow & 1) {
    ReleasePu(hid, pu);  // one READ response per visit
  } else {
    WqeDoneOnPu(hid, pu);
  }
}

void Simulator::WqeDoneOnPu(HostId hid, uint32_t pu) {
  Host& h = hosts_[hid];
  Pu& p = h.pus[pu];
  if (++p.visit_wqes >= h.p.wqes_per_visit || !FlowHasWork(p.flow)) {
    ReleasePu(hid, pu);
    return;
  }
  // Stay on this QP; the next WQE still needs a dispatcher slot (the
  // aggregate message-rate ceiling holds for every WQE).
  const Picos at = std::max(now_, h.dispatch_free);
  h.dispatch_free = at + h.p.dispatch_gap_ps;
  Schedule(at, kPuContinue, hid, pu, hid);
}

void Simulator::ReleasePu(HostId hid, uint32_t pu) {
  Host& h = hosts_[hid];
  const uint32_t flow = h.pus[pu].flow;
  h.pus[pu].busy = false;
  h.free_pus.push_back(pu);
  qps_[flow / 2].flow[flow & 1].on_pu = false;
  MakeReady(flow);  // back to the tail of the round robin
  TryDispatch(hid);
}

void Simulator::StartLink(HostId hid) {
  Host& h = hosts_[hid];
  if (h.link_busy) return;
  uint32_t id;
  if (!h.ctrl.empty()) {
    id = h.ctrl.pop_front();  // ACK/NAK are never paused (tiny; own credits)
  } else if (!h.fifo.empty()) {
    if (pkts_[h.fifo.front()].dma_ready > now_ && !TakeReadyPacket(hid)) return;
    Port& port = hosts_[pkts_[h.fifo.front()].dst].port;
    if (fabric_.lossless && port.paused) {
      // PFC: the head packet waits, and so does everything behind it.
      if (!h.link_paused) {
        h.link_paused = true;
        port.waiters.push_back(hid);
        ++fstats_.pause_events;
      }
      return;
    }
    id = h.fifo.pop_front();
  } else {
    return;
  }
  h.link_busy = true;
  h.link_pkt = id;
  Schedule(now_ + h.wire_ps(pkts_[id].payload), kLinkDone, hid, 0, hid);
  // A FIFO slot is free: the longest-waiting PU gets it.
  while (h.fifo.size() < h.p.tx_fifo_packets && !h.fifo_waiters.empty()) {
    uint32_t pu = h.fifo_waiters.pop_front();
    h.fifo.push_back(h.pus[pu].pkt);
    h.pus[pu].holding = false;
    AfterPush(hid, pu);
  }
}

void Simulator::OnLinkDone(HostId hid) {
  Host& h = hosts_[hid];
  h.link_busy = false;
  const uint32_t id = h.link_pkt;
  Packet& pk = pkts_[id];
  ++h.stats.tx_packets;
  h.stats.tx_bytes += pk.payload;
  h.stats.tx_wire_bytes += pk.payload + h.p.per_packet_overhead_bytes;
  if ((pk.type == kData || pk.type == kReadReq || pk.type == kAtomicReq) &&
      !qps_[pk.src_qp].ops.error) {
    Qp& q = qps_[pk.src_qp];
    if (q.cfg.transport != Transport::kRc) {
      // UC, UD: no ACKs; the WQE completes once its last packet is on the wire.
      if (pk.last) {
        WqeAt(q, pk.wqe).done = true;
        Retire(pk.src_qp);
      }
    } else {
      ArmRto(pk.src_qp);
    }
  }
  Schedule(now_ + fabric_.link_propagation_ps + fabric_.switch_latency_ps, kSwitchArrive, id, 0,
           hid);
  StartLink(hid);
}

uint32_t Simulator::NewCtrl(QpId from_qp, PktType type) {
  const Qp& q = qps_[from_qp];
  const uint32_t id = AllocPacket();
  Packet& pk = pkts_[id];
  pk.type = type;
  pk.src = q.host;
  pk.src_qp = from_qp;
  pk.dst_qp = q.peer;
  pk.dst = qps_[q.peer].host;
  return id;
}

void Simulator::LaunchCtrl(uint32_t id) {
  const HostId h = pkts_[id].src;
  hosts_[h].ctrl.push_back(id);
  StartLink(h);
}

void Simulator::SendCtrl(QpId from_qp, PktType type, uint32_t psn) {
  const uint32_t id = NewCtrl(from_qp, type);
  Packet& pk = pkts_[id];
  pk.psn = psn;
  pk.rnr_timer = qps_[from_qp].cfg.rnr_timer;
  if (type == kAck) ++hosts_[pk.src].stats.acks_sent;
  LaunchCtrl(id);
}

void Simulator::Rewind(QpId qpid, uint32_t psn) {
  Qp& q = qps_[qpid];
  if (q.rewind_pending) {
    q.rewind_psn = std::min(q.rewind_psn, psn);
  } else {
    q.rewind_pending = true;
    q.rewind_psn = psn;
  }
  if (!q.flow[0].on_pu) {
    ApplyRewind(qpid);
    MakeReady(2 * qpid);
  }
}

void Simulator::ApplyRewind(QpId qpid) {
  Qp& q = qps_[qpid];
  q.rewind_pending = false;
  const uint32_t psn = q.rewind_psn;
  uint64_t end = std::min(q.fetched, q.proc + 1);
  for (uint64_t i = q.head; i < end; ++i) {
    Wqe& w = WqeAt(q, i);
    if (w.npkts == 0 || w.done) continue;
    if (psn >= w.first_psn && psn < w.first_psn + w.npkts) {
      if (!(i == q.proc && psn - w.first_psn > q.proc_pkt)) {
        q.proc = i;
        q.proc_pkt = psn - w.first_psn;
        if (w.wr.op == Op::kRead) q.resp_next_idx = 0;
      }
      return;
    }
  }
}

void Simulator::ArmRto(QpId qpid) {
  Qp& q = qps_[qpid];
  const Picos rto = RtoPs(q);
  if (q.rto_armed || rto == 0) return;
  q.rto_armed = true;
  q.last_progress = now_;
  Schedule(now_ + rto, kRto, qpid, 0, q.host);
}

void Simulator::OnRto(QpId qpid) {
  Qp& q = qps_[qpid];
  q.rto_armed = false;
  if (q.ops.error) return;
  if (q.head >= q.proc && q.proc_pkt == 0) return;  // nothing outstanding
  const Picos rto = RtoPs(q);
  if (q.rnr_wait || now_ < q.last_progress + rto) {
    // An RNR wait owns the retry; its resend restarts the timer.
    q.rto_armed = true;
    Schedule(q.rnr_wait ? now_ + rto : q.last_progress + rto, kRto, qpid, 0, q.host);
    return;
  }
  Wqe& w = WqeAt(q, q.head);
  if (w.npkts > 0 && !w.done) {
    ++hosts_[q.host].stats.timeouts;
    if (!TakeRetry(qpid, /*rnr=*/false)) return;  // retry_cnt exhausted
    Rewind(qpid, w.first_psn);
  }
  q.last_progress = now_;
  q.rto_armed = true;
  Schedule(now_ + rto, kRto, qpid, 0, q.host);
}

}  // namespace vrdma::model
