// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Protocol operations of the model: the RNR timer and the retry counts, the
// QP error state and flushing, responder ACK coalescing, atomics on the
// card's atomic units, UD receive, and the RX pipeline stalls (RNR NAK
// cost, atomic hand-off) with the back-pressure they put on the switch port.
#include <algorithm>

#include "backend/rnic_model/simulator.h"

namespace vrdma::model {

Picos Simulator::RnrTimerPs(uint8_t encoded) {
  // IBA "RNR NAK timer field encoding", in units of 10 us.
  static constexpr uint32_t kTens[32] = {
      65536, 1,    2,    3,    4,    6,    8,     12,    16,    24,   32,
      48,    64,   96,   128,  192,  256,  384,   512,   768,   1024, 1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return static_cast<Picos>(kTens[encoded & 31]) * NsToPs(10000);
}

void Simulator::SetRetry(QpId qpid, uint8_t retry_cnt, uint8_t rnr_retry, uint8_t rnr_timer) {
  Qp& q = qps_[qpid];
  q.cfg.retry_cnt = std::min<uint8_t>(retry_cnt, 7);
  q.cfg.rnr_retry = std::min<uint8_t>(rnr_retry, 7);
  q.cfg.rnr_timer = rnr_timer & 31;
  ResetRetries(q);
}

void Simulator::SetTimeout(QpId qpid, uint8_t timeout) {
  qps_[qpid].cfg.timeout = std::min<uint8_t>(timeout, kCardTimeout);
}

Picos Simulator::RtoPs(const Qp& q) const {
  const uint8_t t = q.cfg.timeout;
  if (t >= kCardTimeout) return hosts_[q.host].p.rto_ps;
  if (t == 0) return 0;  // IB: no transport timer
  return NsToPs(4096) << t;
}

void Simulator::ResetRetries(Qp& q) {
  q.ops.rnr_left = q.cfg.rnr_retry;
  q.ops.retry_left = q.cfg.retry_cnt;
}

bool Simulator::TakeRetry(QpId qpid, bool rnr) {
  Qp& q = qps_[qpid];
  if (q.ops.error) return false;
  if (rnr) {
    if (q.cfg.rnr_retry >= 7) return true;  // 7 = retry for ever
    if (q.ops.rnr_left == 0) {
      FailQp(qpid, CqeStatus::kRnrRetryExceeded);
      return false;
    }
    --q.ops.rnr_left;
    return true;
  }
  if (q.ops.retry_left == 0) {
    FailQp(qpid, CqeStatus::kRetryExceeded);
    return false;
  }
  --q.ops.retry_left;
  return true;
}

void Simulator::FlushWr(QpId qpid, const Wr& wr, Picos post_time, CqeStatus status) {
  const Qp& q = qps_[qpid];
  Cqe c;
  c.wr_id = wr.wr_id;
  c.qp = qpid;
  c.cq = q.cfg.send_cq;
  c.op = wr.op;
  c.status = status;
  c.post_time = post_time;
  EmitCqe(c);  // completions in error are generated whatever the signaling
}

void Simulator::FailQp(QpId qpid, CqeStatus status) {
  Qp& q = qps_[qpid];
  if (q.ops.error) return;
  q.ops.error = true;
  if (q.blocked_wait) {
    std::vector<QpId>& w = cqs_[WqeAt(q, q.wait_wqe).wr.wait_cq].waiters;
    w.erase(std::remove(w.begin(), w.end(), qpid), w.end());
  }
  for (uint64_t i = q.head; i < q.tail; ++i) {
    const Wqe& w = WqeAt(q, i);
    FlushWr(qpid, w.wr, w.post_time, i == q.head ? status : CqeStatus::kFlushed);
  }
  q.head = q.proc = q.fetched = q.visible = q.tail;
  q.proc_pkt = 0;
  q.rewind_pending = false;
  q.blocked_wait = q.blocked_reads = q.rnr_wait = false;
  q.reads_outstanding = 0;
  while (!q.rq.empty()) {
    Cqe c;
    c.wr_id = q.rq.pop_front();
    c.qp = qpid;
    c.cq = q.cfg.recv_cq;
    c.op = Op::kSend;
    c.recv = true;
    c.status = CqeStatus::kFlushed;
    c.post_time = now_;
    EmitCqe(c);
  }
  q.rq_posted = 0;
}

void Simulator::OnRnrRetry(QpId qpid, uint32_t psn) {
  Qp& q = qps_[qpid];
  if (q.ops.error) return;
  q.rnr_wait = false;
  q.last_progress = now_;  // the resend restarts the transport timer
  Rewind(qpid, psn);
}

// ---- ACK coalescing ---------------------------------------------------------

void Simulator::AckAccepted(QpId qpid, const Packet& pk) {
  Qp& q = qps_[qpid];
  QpOps& o = q.ops;
  const NicParams& p = hosts_[q.host].p;
  o.ack_psn = pk.psn;
  ++o.unacked;
  // ACK now: every ack_every_packets packets; at the end of the requester's
  // burst (AckReq: a lone message, a drained posting window); at the end of
  // a message when this QP sent no ACK for ack_coalesce_delay (0 = every
  // message).
  const bool quiet = !o.acked_once || now_ - o.last_ack >= p.ack_coalesce_delay_ps;
  const bool ack = (p.ack_every_packets > 0 && o.unacked >= p.ack_every_packets) ||
                   pk.ack_req || (pk.last && quiet);
  if (ack) {
    SendAck(qpid);
    return;
  }
  // Otherwise a message end waits for the coalescing timer
  // (ack_coalesce_delay after the last ACK); inside a message only the
  // packet count sends ACKs.
  if (pk.last && !o.ack_timer_armed) {
    o.ack_timer_armed = true;
    Schedule(std::max(now_, o.last_ack + p.ack_coalesce_delay_ps), kAckTimer, qpid, 0, q.host);
  }
}

void Simulator::SendAck(QpId qpid) {
  QpOps& o = qps_[qpid].ops;
  SendCtrl(qpid, kAck, o.ack_psn);
  o.unacked = 0;
  o.acked_once = true;
  o.last_ack = now_;
}

void Simulator::OnAckTimer(QpId qpid) {
  QpOps& o = qps_[qpid].ops;
  o.ack_timer_armed = false;
  if (o.unacked > 0) SendAck(qpid);
}

// ---- atomics ------------------------------------------------------------

void Simulator::ExecuteAtomic(QpId qpid, const Packet& pk) {
  Qp& q = qps_[qpid];
  Host& h = hosts_[q.host];
  // The unit is chosen by the address (so one address is serialised on one
  // unit); every QP of the card shares the units.
  uint64_t x = pk.raddr;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  const size_t u = static_cast<size_t>(x % h.atomic_free.size());
  const Picos start = std::max(now_, h.atomic_free[u]);
  h.atomic_free[u] = start + h.p.atomic_cost_ps;
  // The RX pipeline hands the atomic to its unit and waits until the unit
  // takes it (assumed one-deep hand-off): a busy unit stalls the pipeline.
  if (start > now_) StallRx(q.host, start);
  Schedule(start + h.p.atomic_cost_ps, kAtomicDone, qpid, pk.wqe, pk.dst);
}

void Simulator::OnAtomicDone(QpId qpid, uint64_t wqe) {
  ++hosts_[qps_[qpid].host].stats.atomics_executed;
  SendAtomicResp(qpid, wqe);
}

void Simulator::SendAtomicResp(QpId qpid, uint64_t wqe) {
  // An atomic response (8 bytes, AtomicAckETH) leaves like an ACK, ahead of
  // the TX FIFO, and is never coalesced.
  if (qps_[qpid].peer == kNoQp) return;
  const uint32_t id = NewCtrl(qpid, kAtomicResp);
  Packet& pk = pkts_[id];
  pk.first = pk.last = true;
  pk.payload = 8;
  pk.wqe = wqe;
  LaunchCtrl(id);
}

// ---- RX pipeline stalls --------------------------------------------------

void Simulator::StallRx(HostId hid, Picos until) {
  Host& h = hosts_[hid];
  if (until <= h.rx_free) return;
  h.stats.rx_stall_ps += until - std::max(h.rx_free, now_);
  h.rx_free = until;
}

Picos Simulator::PortStart(HostId hid) const {
  const Host& h = hosts_[hid];
  if (!fabric_.lossless) return now_;  // no PFC: the NIC drops instead
  // The NIC's backlog as the packet would find it: at its arrival, one
  // hop later (the lossy drop in OnPortDone measures it there too). The
  // packets still on the wire are no backlog: measured from now, a long
  // hop would hold the port for its whole propagation per packet.
  const Picos wait = fabric_.link_propagation_ps + h.p.rx_backlog_limit_ps;
  return h.rx_free > now_ + wait ? h.rx_free - wait : now_;
}

// ---- receive WQEs and UD ---------------------------------------------------

bool Simulator::ConsumesRecv(const Packet& pk, Transport t) {
  if (pk.type != kData) return false;
  const bool send = pk.op == Op::kSend || pk.op == Op::kSendImm;
  if (t == Transport::kUd) return send;
  return (send && pk.first) || (pk.op == Op::kWriteImm && pk.last);
}

void Simulator::RxUd(Packet& pk) {
  Qp& q = qps_[pk.dst_qp];
  if (q.cfg.transport != Transport::kUd || q.ops.error) return;
  if (q.rq_posted == 0) {
    ++hosts_[q.host].stats.recv_drops_no_wqe;  // UD: dropped silently
    return;
  }
  qps_[pk.src_qp].delivered += pk.payload;
  DeliverRecv(q, pk.dst_qp, pk);
}

}  // namespace vrdma::model
