// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The fabric (switch egress ports with a shared buffer, ECN marks, drops)
// and the receive side of a NIC: RX processing, the RC and UC responders,
// READ responses arriving at the requester, ACK/NAK handling.
#include <algorithm>

#include "backend/rnic_model/simulator.h"

namespace vrdma::model {

namespace {
bool IsDataType(uint8_t t) { return t <= 2; }  // kData, kReadReq, kReadResp
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
    events_.Push(now_ + dst.p.wire_time_ps(pk.payload), kPortDone, pk.dst, 0);
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
  const Picos start = std::max(arrive, h.rx_free);
  h.rx_free = start + h.p.rx_cost_ps / h.p.num_rx_pus;
  events_.Push(h.rx_free, kRxDone, id, 0);
  if (!port.q.empty()) {
    events_.Push(now_ + h.p.wire_time_ps(pkts_[port.q.front()].payload), kPortDone, hid, 0);
  } else {
    port.busy = false;
  }
}

void Simulator::OnRxDone(uint32_t id) {
  Packet& pk = pkts_[id];
  ++hosts_[pk.dst].stats.rx_packets;
  Qp& q = qps_[pk.dst_qp];
  switch (pk.type) {
    case kData:
    case kReadReq:
      if (q.cfg.transport == Transport::kRc) {
        RxRc(pk);
      } else {
        RxUc(pk);
      }
      break;
    case kReadResp:
      RxRequesterResponse(pk);
      break;
    case kAck:
      MarkAcked(pk.dst_qp, pk.psn);
      break;
    case kNak:
      Rewind(pk.dst_qp, pk.psn);
      break;
    case kRnrNak:
      // IB: resend after the RNR timer; the transport timer restarts and
      // must not fire for this PSN meanwhile (OnRto skips an RNR wait).
      // One retry loop per QP: a second RNR NAK while waiting is ignored.
      if (q.rnr_wait) break;
      q.rnr_wait = true;
      q.last_progress = now_;
      events_.Push(now_ + hosts_[q.host].p.rnr_delay_ps, kRnrRetry, pk.dst_qp, pk.psn);
      break;
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
      MakeReady(2 * qpid + 1);
      return;
    }
    if (pk.first && NeedsRecv(pk.op) && q.rq_posted == 0) {
      ++h.stats.rnr_naks_sent;
      q.nak_sent = true;  // later packets of this message are dropped quietly
      SendCtrl(qpid, kRnrNak, pk.psn);
      return;
    }
    ++q.expected_psn;
    q.nak_sent = false;
    qps_[pk.src_qp].delivered += pk.payload;
    if (pk.last) {
      if (NeedsRecv(pk.op)) DeliverRecv(q, qpid, pk);
      SendCtrl(qpid, kAck, pk.psn);
    } else if (h.p.ack_every_packets > 0 && (pk.psn + 1) % h.p.ack_every_packets == 0) {
      SendCtrl(qpid, kAck, pk.psn);  // coalesced ACK inside a long message
    }
    return;
  }
  if (pk.psn > q.expected_psn) {
    if (!q.nak_sent) {
      q.nak_sent = true;
      ++h.stats.naks_sent;
      SendCtrl(qpid, kNak, q.expected_psn);
    }
    return;
  }
  // Duplicate: READs are re-executed, the end of a message is re-ACKed.
  if (pk.type == kReadReq) {
    q.resp.push_back(RespJob{pk.wqe, pk.msg_bytes, Npkts(pk.msg_bytes, h.p.mtu_bytes)});
    MakeReady(2 * qpid + 1);
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
  if (pk.last && !q.uc_broken && NeedsRecv(pk.op) && q.rq_posted > 0) {
    DeliverRecv(q, qpid, pk);
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
  EmitCqe(c);
}

void Simulator::RxRequesterResponse(Packet& pk) {
  const QpId qpid = pk.dst_qp;
  Qp& q = qps_[qpid];
  // The awaited READ: the oldest sent, incomplete one.
  uint64_t i = q.head;
  for (; i < q.proc; ++i) {
    Wqe& w = WqeAt(q, i);
    if (w.wr.op == Op::kRead && !w.done) break;
  }
  if (i >= q.proc || pk.wqe != i) return;
  Wqe& w = WqeAt(q, i);
  if (pk.idx == q.resp_next_idx) {
    ++q.resp_next_idx;
    q.delivered += pk.payload;
    q.last_progress = now_;
    if (pk.last) {
      w.done = true;
      --q.reads_outstanding;
      q.resp_next_idx = 0;
      q.resp_rerequested = false;
      // A READ response acknowledges every request before it.
      for (uint64_t j = q.head; j < i; ++j) {
        Wqe& e = WqeAt(q, j);
        if (e.wr.op != Op::kRead && e.npkts > 0) e.done = true;
      }
      if (q.blocked_reads) {
        q.blocked_reads = false;
        MakeReady(2 * qpid);
      }
      Retire(qpid);
    }
  } else if (pk.idx > q.resp_next_idx && !q.resp_rerequested) {
    q.resp_rerequested = true;
    ++hosts_[q.host].stats.naks_sent;
    Rewind(qpid, w.first_psn);  // re-request the whole READ (simplified)
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
    if (w.wr.op != Op::kRead) w.done = true;
  }
  Retire(qpid);
}

}  // namespace vrdma::model
