// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The fabric (switch egress ports with a shared buffer, ECN marks, drops)
// and the receive side of a NIC: RX processing, the RC and UC responders,
// READ responses arriving at the requester, ACK/NAK handling.
#include <algorithm>

#include "backend/rnic_model/simulator.h"

namespace vrdma::model {

namespace {
// Requests and responses (random loss applies to them, not to ACK/NAKs).
bool IsDataType(uint8_t t) { return t <= 2 || t >= 6; }
}  // namespace

void Simulator::OnSwitchArrive(uint32_t id) {
  Packet& pk = pkts_[id];
  Host& dst = hosts_[pk.dst];
  const uint64_t wire = pk.payload + dst.p.per_packet_overhead_bytes;
  if (IsDataType(pk.type) && fabric_.random_loss > 0.0 && uni_(rng_) < fabric_.random_loss) {
    ++fstats_.drops_random;
    FreePacket(id);
    return;
  }
  if (switch_bytes_ + wire > fabric_.switch_buffer_bytes) {
    ++fstats_.drops_overflow;
    FreePacket(id);
    return;
  }
  Port& port = dst.port;
  if (port.bytes > fabric_.ecn_threshold_bytes) {
    pk.ecn = true;
    ++fstats_.ecn_marks;
  }
  port.q.push_back(id);
  port.bytes += wire;
  if (port.bytes > fabric_.pfc_xoff_bytes) port.paused = true;
  switch_bytes_ += wire;
  fstats_.max_port_bytes = std::max(fstats_.max_port_bytes, port.bytes);
  if (!port.busy) {
    port.busy = true;
    Schedule(PortStart(pk.dst) + dst.wire_ps(pk.payload), kPortDone, pk.dst, 0, pk.dst);
  }
}

void Simulator::OnPortDone(HostId hid) {
  Host& h = hosts_[hid];
  Port& port = h.port;
  uint32_t id = port.q.pop_front();
  const uint64_t wire = pkts_[id].payload + h.p.per_packet_overhead_bytes;
  port.bytes -= wire;
  switch_bytes_ -= wire;
  if (port.paused && port.bytes < fabric_.pfc_xon_bytes) {
    port.paused = false;
    std::vector<HostId> w;
    w.swap(port.waiters);
    for (HostId s : w) {
      hosts_[s].link_paused = false;
      StartLink(s);
    }
  }
  // RX PUs modelled as one server of cost rx_cost / num_rx_pus; packets
  // reach the NIC in port order, so this single event keeps FIFO order.
  const Picos arrive = now_ + fabric_.link_propagation_ps;
  if (!fabric_.lossless && h.rx_free > arrive + h.p.rx_backlog_limit_ps) {
    // Lossy: the port does not wait for the NIC (no PFC), so a packet that
    // finds the NIC's RX buffer full (the pipeline more than
    // rx_backlog_limit behind, stalled by RNR NAKs or atomics) is dropped.
    ++h.stats.rx_buffer_drops;
    FreePacket(id);
  } else {
    const Picos start = std::max(arrive, h.rx_free);
    // RxDone: cache misses, payload DMA write (simulator_memory.cc).
    Schedule(RxDone(hid, id, start), kRxDone, id, 0, hid);
  }
  if (!port.q.empty()) {
    Schedule(PortStart(hid) + h.wire_ps(pkts_[port.q.front()].payload), kPortDone, hid,
             0, hid);
  } else {
    port.busy = false;
  }
}

void Simulator::OnRxDone(uint32_t id) {
  Packet& pk = pkts_[id];
  ++hosts_[pk.dst].stats.rx_packets;
  Qp& q = qps_[pk.dst_qp];
  if (pk.type == kData || pk.type == kReadReq || pk.type == kAtomicReq) {
    // Responder: request packets of a QP are handled in order; one that
    // consumes a receive waits for its receive WQE to be fetched from host
    // memory (pipelined: later messages' fetches overlap).
    Picos delay = 0;
    if (ConsumesRecv(pk, q.cfg.transport) && q.rq_posted > q.ops.rx_fetching) {
      delay = hosts_[pk.dst].p.recv_wqe_fetch_ps;
      pk.recv_fetch = true;
      ++q.ops.rx_fetching;
    }
    const Picos at = std::max(now_ + delay, q.ops.rx_release);
    q.ops.rx_release = at;
    if (at > now_) {
      Schedule(at, kRxDeliver, id, 0, pk.dst);
    } else {
      HandleRequest(id);
    }
    return;
  }
  if (q.ops.error) {  // a failed requester ignores late responses
    FreePacket(id);
    return;
  }
  switch (pk.type) {
    case kReadResp:
    case kAtomicResp:
      RxRequesterResponse(pk);
      break;
    case kAck:
      MarkAcked(pk.dst_qp, pk.psn);
      break;
    case kNak:
      // A NAK acknowledges every PSN before the one it names.
      if (pk.psn > 0) MarkAcked(pk.dst_qp, pk.psn - 1);
      if (TakeRetry(pk.dst_qp, /*rnr=*/false)) Rewind(pk.dst_qp, pk.psn);
      break;
    case kRnrNak:
      // IB: resend after the responder's RNR timer; the transport timer
      // restarts and must not fire for this PSN meanwhile (OnRto skips an
      // RNR wait). One retry loop per QP: a second RNR NAK while waiting
      // is ignored.
      if (q.rnr_wait) break;
      if (pk.psn > 0) MarkAcked(pk.dst_qp, pk.psn - 1);
      if (q.ops.error || !TakeRetry(pk.dst_qp, /*rnr=*/true)) break;
      q.rnr_wait = true;
      q.last_progress = now_;
      Schedule(now_ + RnrTimerPs(pk.rnr_timer), kRnrRetry, pk.dst_qp, pk.psn, pk.dst);
      break;
    default:
      break;
  }
  FreePacket(id);
}

void Simulator::HandleRequest(uint32_t id) {
  Packet& pk = pkts_[id];
  Qp& q = qps_[pk.dst_qp];
  if (pk.recv_fetch) --q.ops.rx_fetching;
  switch (q.cfg.transport) {
    case Transport::kRc: RxRc(pk); break;
    case Transport::kUc: RxUc(pk); break;
    case Transport::kUd: RxUd(pk); break;
  }
  FreePacket(id);
}

static bool NeedsRecv(Op op) {
  return op == Op::kSend || op == Op::kSendImm || op == Op::kWriteImm;
}

void Simulator::RxRc(Packet& pk) {
  const QpId qpid = pk.dst_qp;
  Qp& q = qps_[qpid];
  Host& h = hosts_[q.host];
  if (pk.psn == q.expected_psn) {
    if (pk.type == kReadReq) {
      q.resp.push_back(RespJob{pk.wqe, pk.msg_bytes, Npkts(pk.msg_bytes, h.p.mtu_bytes)});
      ++q.expected_psn;
      q.nak_sent = false;
      q.ops.rnr_blocked = false;
      MakeReady(2 * qpid + 1);
      return;
    }
    if (pk.type == kAtomicReq) {
      ++q.expected_psn;
      q.nak_sent = false;
      q.ops.rnr_blocked = false;
      ExecuteAtomic(qpid, pk);
      return;
    }
    if (pk.first && NeedsRecv(pk.op) && q.rq_posted == 0) {
      ++h.stats.rnr_naks_sent;
      q.nak_sent = true;  // later packets of this message are dropped quietly
      q.ops.rnr_blocked = true;
      StallRx(q.host, std::max(now_, h.rx_free) + h.p.rnr_nak_cost_ps);
      SendCtrl(qpid, kRnrNak, pk.psn);
      return;
    }
    ++q.expected_psn;
    q.nak_sent = false;
    q.ops.rnr_blocked = false;
    qps_[pk.src_qp].delivered += pk.payload;
    if (pk.last && NeedsRecv(pk.op)) DeliverRecv(q, qpid, pk);
    AckAccepted(qpid, pk);
    return;
  }
  if (pk.psn > q.expected_psn) {
    // Discarded while the QP waits for its RNR retry: each such request
    // goes through the same error path as the NAKed one (assumed).
    if (q.ops.rnr_blocked) StallRx(q.host, std::max(now_, h.rx_free) + h.p.rnr_nak_cost_ps);
    if (!q.nak_sent) {
      q.nak_sent = true;
      ++h.stats.naks_sent;
      SendCtrl(qpid, kNak, q.expected_psn);
    }
    return;
  }
  // Duplicate: READs are re-executed, an atomic's saved result is resent,
  // the end of a message is re-ACKed.
  if (pk.type == kReadReq) {
    q.resp.push_back(RespJob{pk.wqe, pk.msg_bytes, Npkts(pk.msg_bytes, h.p.mtu_bytes)});
    MakeReady(2 * qpid + 1);
  } else if (pk.type == kAtomicReq) {
    SendAtomicResp(qpid, pk.wqe);
  } else if (pk.last) {
    SendCtrl(qpid, kAck, q.expected_psn - 1);
  }
}

void Simulator::RxUc(Packet& pk) {
  const QpId qpid = pk.dst_qp;
  Qp& q = qps_[qpid];
  if (pk.first) {
    q.uc_broken = false;
    q.expected_psn = pk.psn;
  }
  if (pk.psn != q.expected_psn) q.uc_broken = true;  // a packet went missing
  q.expected_psn = pk.psn + 1;
  if (!q.uc_broken) qps_[pk.src_qp].delivered += pk.payload;
  if (pk.last && !q.uc_broken && NeedsRecv(pk.op)) {
    if (q.rq_posted > 0) {
      DeliverRecv(q, qpid, pk);
    } else {
      ++hosts_[q.host].stats.recv_drops_no_wqe;  // UC: dropped silently, no NAK
    }
  }
  if (pk.last) q.uc_broken = false;
}

void Simulator::DeliverRecv(Qp& q, QpId qpid, const Packet& pk) {
  Cqe c;
  c.wr_id = q.rq.pop_front();
  --q.rq_posted;
  c.qp = qpid;
  c.cq = q.cfg.recv_cq;
  c.op = pk.op;
  c.recv = true;
  c.bytes = pk.msg_bytes;
  c.post_time = now_;
  c.src_qp = pk.src_qp;
  c.imm = pk.imm;
  c.carry = pk.carry;
  EmitCqe(c);
}

void Simulator::CompleteReadLike(QpId qpid, uint64_t wqe) {
  Qp& q = qps_[qpid];
  WqeAt(q, wqe).done = true;
  --q.reads_outstanding;
  // A READ or atomic response acknowledges every request before it.
  for (uint64_t j = q.head; j < wqe; ++j) {
    Wqe& e = WqeAt(q, j);
    if (!IsReadLike(e.wr.op) && e.npkts > 0) e.done = true;
  }
  if (q.blocked_reads) {
    q.blocked_reads = false;
    MakeReady(2 * qpid);
  }
  Retire(qpid);
}

void Simulator::RxRequesterResponse(Packet& pk) {
  const QpId qpid = pk.dst_qp;
  Qp& q = qps_[qpid];
  if (pk.type == kAtomicResp) {
    // Atomic units finish out of order across addresses: match the
    // response to its WQE. It acknowledges the requests before it.
    if (pk.wqe < q.head || pk.wqe >= q.proc) return;
    const Wqe& w = WqeAt(q, pk.wqe);
    if (!IsAtomic(w.wr.op) || w.done) return;
    q.delivered += pk.payload;
    q.last_progress = now_;
    ResetRetries(q);
    CompleteReadLike(qpid, pk.wqe);
    return;
  }
  // The awaited READ: the oldest sent, incomplete one.
  uint64_t i = q.head;
  for (; i < q.proc; ++i) {
    Wqe& w = WqeAt(q, i);
    if (w.wr.op == Op::kRead && !w.done) break;
  }
  if (i >= q.proc || pk.wqe != i) return;
  if (pk.idx == q.resp_next_idx) {
    ++q.resp_next_idx;
    q.delivered += pk.payload;
    q.last_progress = now_;
    ResetRetries(q);
    if (pk.last) {
      q.resp_next_idx = 0;
      q.resp_rerequested = false;
      CompleteReadLike(qpid, i);
    }
  } else if (pk.idx > q.resp_next_idx && !q.resp_rerequested) {
    q.resp_rerequested = true;
    ++hosts_[q.host].stats.naks_sent;
    Rewind(qpid, WqeAt(q, i).first_psn);  // re-request the whole READ (simplified)
  }
}

void Simulator::MarkAcked(QpId qpid, uint32_t psn) {
  Qp& q = qps_[qpid];
  q.last_progress = now_;
  for (uint64_t i = q.head; i < q.tail; ++i) {
    Wqe& w = WqeAt(q, i);
    if (w.done) continue;
    if (w.npkts == 0) break;  // not sent yet
    if (w.first_psn + w.npkts - 1 > psn) break;
    if (!IsReadLike(w.wr.op)) {
      w.done = true;
      ResetRetries(q);  // forward progress
    }
  }
  Retire(qpid);
}

}  // namespace vrdma::model
