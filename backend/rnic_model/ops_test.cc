// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Simulator-level tests of the protocol operations and the receive side:
// dispatch and retry bugs, RNR/retry counts and the error state, receive
// WQE fetch and RNR NAK costs, UD, atomics, ACK coalescing.
#include <cstdio>
#include <map>
#include <vector>

#include "backend/rnic_model/simulator.h"
#include "gtest/gtest.h"

namespace vrdma::model {
namespace {

class Sink : public CompletionSink {
 public:
  void OnCqe(const Cqe& c) override { cqes.push_back(c); }
  std::vector<Cqe> cqes;
};

Wr MakeWr(uint64_t id, Op op, uint32_t bytes, bool sig = true) {
  Wr w;
  w.wr_id = id;
  w.op = op;
  w.bytes = bytes;
  w.signaled = sig;
  return w;
}

// Two hosts, one connected QP pair per call of AddPair.
struct World {
  Simulator sim;
  HostId a, b;
  CqId cqa, cqb;
  explicit World(const NicParams& p = ConnectX6RoCE100(), FabricParams f = FabricParams{})
      : sim(f, 1) {
    a = sim.AddHost(p);
    b = sim.AddHost(p);
    cqa = sim.CreateCq(a);
    cqb = sim.CreateCq(b);
  }
  // Returns the requester QP (on a); *resp gets the responder (on b).
  QpId AddPair(QpConfig c, QpId* resp = nullptr) {
    c.send_cq = cqa;
    c.recv_cq = cqa;
    QpId x = sim.CreateQp(a, c);
    c.send_cq = cqb;
    c.recv_cq = cqb;
    QpId y = sim.CreateQp(b, c);
    EXPECT_TRUE(sim.Connect(x, y));
    if (resp != nullptr) *resp = y;
    return x;
  }
};

// Bug: a PU released synchronously inside TryDispatch (a zero-count WAIT,
// a QP with nothing left) re-entered TryDispatch, which scheduled a
// kDispatch, and the outer loop scheduled another: every dispatch instant
// added one more pending kDispatch, so events grew quadratically with the
// number of WQEs. Fixed: at most one kDispatch is pending per host.
uint64_t EventsForZeroWaits(int n, Picos* last_cqe) {
  World w;
  QpConfig c;
  c.sq_depth = 8192;
  c.sig_all = true;
  QpId x = w.AddPair(c);
  Sink sink;
  w.sim.set_completion_sink(&sink);
  std::vector<Wr> wrs;
  for (int i = 0; i < n; ++i) {
    Wr z = MakeWr(i, Op::kWait, 0);
    z.wait_cq = w.cqa;
    z.wait_count = 0;
    wrs.push_back(z);
  }
  EXPECT_EQ(w.sim.PostSend(x, wrs), n);
  w.sim.RunUntil(NsToPs(1e6));
  EXPECT_EQ(sink.cqes.size(), static_cast<size_t>(n));
  *last_cqe = sink.cqes.empty() ? 0 : sink.cqes.back().time;
  return w.sim.events_processed();
}

TEST(SimulatorOps, DispatchEventsDoNotPileUp) {
  Picos t1 = 0, t2 = 0;
  const uint64_t e1 = EventsForZeroWaits(1000, &t1);
  const uint64_t e2 = EventsForZeroWaits(2000, &t2);
  // A handful of events per WQE (fetch, dispatch, CQE), linear in n.
  EXPECT_LT(e1, 5u * 1000u) << "events for 1000 zero-WAITs";
  EXPECT_LT(e2, 5u * 2000u) << "events for 2000 zero-WAITs";
  EXPECT_LT(static_cast<double>(e2) / e1, 2.2);
  // Every WQE still needs its dispatcher slot.
  const NicParams p = ConnectX6RoCE100();
  EXPECT_GE(t2, 2000 * p.dispatch_gap_ps);
}


// Bug: an RNR NAK did not restart the retransmission timer, so after `rto`
// the RTO fired for the PSN the RNR loop was already retrying and started a
// second retry loop, another after each further rto: RNR NAKs multiplied.
// IB: an RNR NAK means "resend after the RNR timer"; the transport timer
// must not fire meanwhile for that PSN.
TEST(SimulatorOps, RnrNakRestartsTheRetransmissionTimer) {
  NicParams p = ConnectX6RoCE100();
  p.rnr_nak_cost_ps = 0;  // the loop period is then RNR timer + round trip
  World w(p);
  QpConfig c;  // rnr_retry 7 = retry forever
  QpId resp = 0;
  QpId x = w.AddPair(c, &resp);
  // 64 KiB: 16 packets, so the retry is on the wire for a good part of
  // each loop and an RTO firing then starts a second loop.
  Wr s = MakeWr(1, Op::kSend, 64 * 1024);
  ASSERT_EQ(w.sim.PostSend(x, {&s, 1}), 1);
  const double ms = 20;
  w.sim.RunUntil(NsToPs(ms * 1e6));
  const HostStats& req = w.sim.host_stats(w.a);
  const HostStats& rsp = w.sim.host_stats(w.b);
  EXPECT_EQ(req.timeouts, 0u);
  // One retry loop: one RNR NAK per (RNR timer + round trip), 10 us + ~2 us.
  EXPECT_LE(rsp.rnr_naks_sent, static_cast<uint64_t>(ms * 1000 / 10));
  EXPECT_GE(rsp.rnr_naks_sent, static_cast<uint64_t>(ms * 1000 / 14));
  // Each RNR round resends the first packet only up to the NAK: the 16
  // packets of the message go out once per round, not once per loop.
  EXPECT_LE(req.retransmitted_packets, 16 * rsp.rnr_naks_sent);
  // The send still completes once a receive is posted.
  Sink sink;
  w.sim.set_completion_sink(&sink);
  w.sim.PostRecv(resp, 7);
  w.sim.RunUntil(w.sim.now() + NsToPs(100e3));
  EXPECT_EQ(sink.cqes.size(), 2u);
}

// Keeps `depth` WRs of one kind outstanding on each registered QP.
class Driver : public CompletionSink {
 public:
  explicit Driver(Simulator& sim) : sim_(sim) {}
  void Add(QpId qp, Wr wr, int depth) {
    if (qp >= wr_.size()) wr_.resize(qp + 1);
    wr_[qp] = wr;
    std::vector<Wr> v(depth, wr);
    EXPECT_EQ(sim_.PostSend(qp, v), depth);
  }
  void OnCqe(const Cqe& c) override {
    cqes.push_back(c);
    if (c.recv || c.qp >= wr_.size() || c.status != CqeStatus::kSuccess) return;
    ++done[c.qp];
    sim_.PostSend(c.qp, {&wr_[c.qp], 1});
  }
  std::vector<Cqe> cqes;
  std::map<QpId, uint64_t> done;

 private:
  Simulator& sim_;
  std::vector<Wr> wr_;
};

TEST(SimulatorOps, RnrRetryExhaustedFailsTheQpAndFlushesTheRest) {
  World w;
  QpConfig c;
  c.rnr_retry = 2;
  c.rnr_timer = 14;  // 1.28 ms, the responder's
  QpId resp = 0;
  QpId x = w.AddPair(c, &resp);
  Sink sink;
  w.sim.set_completion_sink(&sink);
  Wr wrs[3] = {MakeWr(1, Op::kSend, 64), MakeWr(2, Op::kWrite, 64, false),
               MakeWr(3, Op::kWrite, 64)};
  ASSERT_EQ(w.sim.PostSend(x, wrs), 3);
  w.sim.PostRecv(x, 77);  // the requester's own RQ flushes too
  w.sim.RunUntil(NsToPs(2.5e6));
  EXPECT_TRUE(sink.cqes.empty()) << "2 retries of 1.28 ms: not failed yet";
  EXPECT_FALSE(w.sim.qp_in_error(x));
  w.sim.RunUntil(NsToPs(4e6));
  EXPECT_TRUE(w.sim.qp_in_error(x));
  EXPECT_EQ(w.sim.host_stats(w.b).rnr_naks_sent, 3u);  // first try + 2 retries
  ASSERT_EQ(sink.cqes.size(), 4u);
  EXPECT_EQ(sink.cqes[0].wr_id, 1u);
  EXPECT_EQ(sink.cqes[0].status, CqeStatus::kRnrRetryExceeded);
  EXPECT_EQ(sink.cqes[1].wr_id, 2u);  // unsignaled, but flushed WRs complete
  EXPECT_EQ(sink.cqes[1].status, CqeStatus::kFlushed);
  EXPECT_EQ(sink.cqes[2].status, CqeStatus::kFlushed);
  EXPECT_TRUE(sink.cqes[3].recv);
  EXPECT_EQ(sink.cqes[3].status, CqeStatus::kFlushed);
  // Posting to a QP in error: accepted and flushed.
  Wr late = MakeWr(9, Op::kWrite, 64);
  EXPECT_EQ(w.sim.PostSend(x, {&late, 1}), 1);
  w.sim.RunUntil(NsToPs(5e6));
  ASSERT_EQ(sink.cqes.size(), 5u);
  EXPECT_EQ(sink.cqes[4].status, CqeStatus::kFlushed);
  EXPECT_EQ(w.sim.sq_outstanding(x), 0u);
}

TEST(SimulatorOps, RnrTimerIsTheRespondersEncodedDelay) {
  EXPECT_EQ(Simulator::RnrTimerPs(1), NsToPs(10e3));
  EXPECT_EQ(Simulator::RnrTimerPs(12), NsToPs(640e3));
  EXPECT_EQ(Simulator::RnrTimerPs(0), NsToPs(655.36e6));
  EXPECT_EQ(Simulator::RnrTimerPs(31), NsToPs(491.52e6));
  NicParams p = ConnectX6RoCE100();
  p.rnr_nak_cost_ps = 0;
  World w(p);
  QpConfig c;
  c.rnr_timer = 12;  // 0.64 ms
  QpId x = w.AddPair(c);
  Wr s = MakeWr(1, Op::kSend, 64);
  w.sim.PostSend(x, {&s, 1});
  w.sim.RunUntil(NsToPs(3e6));
  // NAKs at ~0, 0.64, 1.28, 1.92, 2.56 ms.
  EXPECT_EQ(w.sim.host_stats(w.b).rnr_naks_sent, 5u);
}

TEST(SimulatorOps, RetryCountExhaustedOnASilentPeer) {
  FabricParams f;
  f.random_loss = 1.0;  // every request lost: only the RTO fires
  World w(ConnectX6RoCE100(), f);
  QpConfig c;
  c.retry_cnt = 3;
  QpId x = w.AddPair(c);
  Sink sink;
  w.sim.set_completion_sink(&sink);
  Wr wrs[2] = {MakeWr(1, Op::kWrite, 4096), MakeWr(2, Op::kRead, 4096)};
  w.sim.PostSend(x, wrs);
  const Picos rto = ConnectX6RoCE100().rto_ps;
  w.sim.RunUntil(3 * rto + NsToPs(100e3));
  EXPECT_TRUE(sink.cqes.empty());
  w.sim.RunUntil(5 * rto);
  ASSERT_EQ(sink.cqes.size(), 2u);
  EXPECT_EQ(sink.cqes[0].status, CqeStatus::kRetryExceeded);
  EXPECT_EQ(sink.cqes[1].status, CqeStatus::kFlushed);
  EXPECT_EQ(w.sim.host_stats(w.a).timeouts, 4u);  // 3 retries, then the 4th fails
}

// The retransmission timer is the QP's IB local ACK timeout (4.096 us *
// 2^timeout; perftest's default 14 is 67.1 ms), 0 = none; unset, the card's
// rto. Every request is lost here, so only the timer retransmits.
TEST(SimulatorOps, RetransmissionTimerIsTheQpsLocalAckTimeout) {
  auto failed_at = [](uint8_t timeout, Picos until) {
    FabricParams f;
    f.random_loss = 1.0;
    World w(ConnectX6RoCE100(), f);
    QpConfig c;
    c.retry_cnt = 1;
    QpId x = w.AddPair(c);
    if (timeout != kCardTimeout) w.sim.SetTimeout(x, timeout);
    Sink sink;
    w.sim.set_completion_sink(&sink);
    Wr s = MakeWr(1, Op::kWrite, 4096);
    w.sim.PostSend(x, {&s, 1});
    w.sim.RunUntil(until);
    return sink.cqes.empty() ? Picos{0} : sink.cqes[0].time;
  };
  const Picos card = ConnectX6RoCE100().rto_ps;
  const Picos t10 = NsToPs(4096) << 10;  // 4.19 ms
  // retry_cnt 1: the first timeout resends, the second fails the WR.
  EXPECT_NEAR(PsToNs(failed_at(kCardTimeout, 10 * card)), PsToNs(2 * card), 10e3);
  EXPECT_NEAR(PsToNs(failed_at(10, 3 * t10)), PsToNs(2 * t10), 10e3);
  EXPECT_EQ(failed_at(0, 3 * t10), 0u) << "timeout 0: no transport timer";
}

TEST(SimulatorOps, UcAndUdDropSendsWithoutAReceiveSilently) {
  for (Transport t : {Transport::kUc, Transport::kUd}) {
    World w;
    QpConfig c;
    c.transport = t;
    c.send_cq = w.cqa;
    c.recv_cq = w.cqa;
    QpId x = w.sim.CreateQp(w.a, c);
    c.send_cq = w.cqb;
    c.recv_cq = w.cqb;
    QpId y = w.sim.CreateQp(w.b, c);
    if (t == Transport::kUc) {
      ASSERT_TRUE(w.sim.Connect(x, y));
    } else {
      EXPECT_FALSE(w.sim.Connect(x, y)) << "UD is connectionless";
    }
    Sink sink;
    w.sim.set_completion_sink(&sink);
    w.sim.PostRecv(y, 50);
    std::vector<Wr> wrs;
    for (int i = 0; i < 3; ++i) {
      Wr s = MakeWr(i, Op::kSend, 256);
      s.ah_host = w.b;
      s.ah_qp = y;
      wrs.push_back(s);
    }
    ASSERT_EQ(w.sim.PostSend(x, wrs), 3);
    w.sim.RunUntil(NsToPs(100e3));
    int sends = 0, recvs = 0;
    for (auto& q : sink.cqes) {
      (q.recv ? recvs : sends)++;
      EXPECT_EQ(q.status, CqeStatus::kSuccess);
      if (q.recv && t == Transport::kUd) {
        EXPECT_EQ(q.src_qp, x);
      }
    }
    EXPECT_EQ(sends, 3);  // completed when on the wire
    EXPECT_EQ(recvs, 1);
    EXPECT_EQ(w.sim.host_stats(w.b).recv_drops_no_wqe, 2u);
    EXPECT_EQ(w.sim.host_stats(w.b).rnr_naks_sent, 0u);
    EXPECT_EQ(w.sim.host_stats(w.b).tx_packets, 0u);  // no ACK, no NAK
  }
}

TEST(SimulatorOps, UdSendsToItsAddressHandleWithinOneMtu) {
  Simulator sim(FabricParams{}, 1);
  NicParams p = ConnectX6RoCE100();
  HostId h0 = sim.AddHost(p), h1 = sim.AddHost(p), h2 = sim.AddHost(p);
  QpConfig c;
  c.transport = Transport::kUd;
  c.send_cq = c.recv_cq = sim.CreateCq(h0);
  QpId x = sim.CreateQp(h0, c);
  c.send_cq = c.recv_cq = sim.CreateCq(h1);
  QpId y1 = sim.CreateQp(h1, c);
  c.send_cq = c.recv_cq = sim.CreateCq(h2);
  QpId y2 = sim.CreateQp(h2, c);
  QpConfig rc;
  rc.send_cq = rc.recv_cq = c.send_cq;
  QpId not_ud = sim.CreateQp(h2, rc);
  Sink sink;
  sim.set_completion_sink(&sink);
  sim.PostRecv(y1, 1);
  sim.PostRecv(y2, 2);
  Wr a = MakeWr(10, Op::kSend, 4096);
  a.ah_host = h1;
  a.ah_qp = y1;
  Wr b = MakeWr(11, Op::kSend, 100);
  b.ah_host = h2;
  b.ah_qp = y2;
  Wr two[2] = {a, b};
  EXPECT_EQ(sim.PostSend(x, two), 2);
  Wr big = a;
  big.bytes = 4097;
  EXPECT_EQ(sim.PostSend(x, {&big, 1}), 0) << "UD: one MTU at most";
  Wr wrong = b;
  wrong.ah_host = h1;
  EXPECT_EQ(sim.PostSend(x, {&wrong, 1}), 0) << "the AH's QP is not on that host";
  wrong = b;
  wrong.ah_qp = not_ud;
  EXPECT_EQ(sim.PostSend(x, {&wrong, 1}), 0) << "the AH's QP is not UD";
  Wr rd = b;
  rd.op = Op::kRead;
  EXPECT_EQ(sim.PostSend(x, {&rd, 1}), 0) << "UD has only SEND";
  sim.RunUntil(NsToPs(100e3));
  ASSERT_EQ(sink.cqes.size(), 4u);
  for (auto& q : sink.cqes) {
    if (!q.recv) continue;
    EXPECT_EQ(q.wr_id, q.qp == y1 ? 1u : 2u);
    EXPECT_EQ(q.bytes, q.qp == y1 ? 4096u : 100u);
    EXPECT_EQ(q.src_qp, x);
  }
  EXPECT_EQ(sim.qp_delivered_bytes(x), 4196u);
}

// A SEND's receive WQE is fetched from host memory before the data can be
// scattered: the card times it recv_wqe_fetch later than a WRITE.
TEST(SimulatorOps, SendWaitsForItsReceiveWqeFetch) {
  auto latency = [](Op op) {
    World w;
    QpId resp = 0;
    QpId x = w.AddPair(QpConfig{}, &resp);
    w.sim.PostRecv(resp, 1);
    Sink sink;
    w.sim.set_completion_sink(&sink);
    Wr s = MakeWr(5, op, 16);
    w.sim.PostSend(x, {&s, 1});
    w.sim.RunUntil(NsToPs(50e3));
    for (auto& c : sink.cqes) {
      if (c.wr_id == 5) return c.time - c.post_time;
    }
    return Picos{0};
  };
  const Picos write = latency(Op::kWrite), send = latency(Op::kSend);
  const Picos imm = latency(Op::kWriteImm);
  ASSERT_GT(write, 0u);
  EXPECT_EQ(send - write, ConnectX6RoCE100().recv_wqe_fetch_ps);
  EXPECT_EQ(imm - write, ConnectX6RoCE100().recv_wqe_fetch_ps);
  // Pipelined: a stream of SENDs keeps the WRITE message rate.
  auto rate = [](Op op) {
    World w;
    QpId resp = 0;
    QpConfig c;
    c.sq_depth = 8192;
    QpId x = w.AddPair(c, &resp);
    for (int i = 0; i < 4000; ++i) w.sim.PostRecv(resp, i);
    std::vector<Wr> wrs(2000, MakeWr(0, op, 16, false));
    w.sim.PostSend(x, wrs);
    w.sim.RunUntil(NsToPs(100e3));
    return w.sim.qp_delivered_bytes(x);
  };
  // (the SEND stream lags by the fetch: < 1 % of 100 us)
  EXPECT_NEAR(static_cast<double>(rate(Op::kSend)), static_cast<double>(rate(Op::kWrite)),
              0.01 * rate(Op::kWrite));
}

// The RX pipeline stalled by an RNR storm: on lossless ports the backlog
// beyond the NIC's RX buffer waits in the switch (and pauses the senders);
// on lossy ports the switch does not wait for the NIC, and what finds the
// NIC's RX buffer full is dropped there. (Bug: a lossy port also waited
// for the NIC, so its packets piled up in the switch's shared buffer as if
// PFC held them, and nothing was dropped.)
TEST(SimulatorOps, StalledRxPipelinePausesALosslessPortAndDropsOnALossyOne) {
  auto run = [](bool lossless, uint64_t* drops, uint64_t* max_port) {
    FabricParams f;
    f.lossless = lossless;
    World w(ConnectX6RoCE100(), f);
    Driver d(w.sim);
    w.sim.set_completion_sink(&d);
    QpConfig c;
    c.sq_depth = 256;
    d.Add(w.AddPair(c), MakeWr(1, Op::kWrite, 65536), 16);
    d.Add(w.AddPair(c), MakeWr(2, Op::kSend, 16), 128);  // no receive: RNR
    w.sim.RunUntil(NsToPs(300e3));
    *drops = w.sim.host_stats(w.b).rx_buffer_drops;
    *max_port = w.sim.fabric_stats().max_port_bytes;
    return w.sim.fabric_stats().pause_events;
  };
  uint64_t drops = 0, max_port = 0;
  EXPECT_GT(run(true, &drops, &max_port), 0u);
  EXPECT_EQ(drops, 0u);
  EXPECT_GT(max_port, 256u << 10) << "the backlog waits in the switch";
  EXPECT_EQ(run(false, &drops, &max_port), 0u);
  EXPECT_GT(drops, 0u);
  EXPECT_LT(max_port, 64u << 10) << "the switch port keeps draining at line rate";
}

TEST(SimulatorOps, AtomicsSerialisePerAddressOnSharedUnits) {
  const NicParams p = ConnectX6RoCE100();
  // Returns atomics completed in 200 us by 4 QPs, each keeping
  // max_rd_atomic FAAs outstanding, on one address or on one address per QP.
  auto run = [&](bool same_address, uint64_t* one_qp) {
    World w(p);
    Driver d(w.sim);
    w.sim.set_completion_sink(&d);
    std::vector<QpId> qps;
    for (int i = 0; i < 4; ++i) {
      QpId x = w.AddPair(QpConfig{});
      Wr f = MakeWr(i, Op::kFaa, 0);
      f.raddr = same_address ? 0x1000 : 0x1000 + 64 * i;
      d.Add(x, f, 2 * p.max_rd_atomic);
      qps.push_back(x);
    }
    w.sim.RunUntil(NsToPs(200e3));
    uint64_t n = 0;
    for (QpId q : qps) n += d.done[q];
    *one_qp = d.done[qps[0]];
    // 8 bytes per response (CQEs lag the responses by cqe_write).
    EXPECT_GE(w.sim.qp_delivered_bytes(qps[0]), 8 * d.done[qps[0]]);
    EXPECT_LE(w.sim.qp_delivered_bytes(qps[0]), 8 * (d.done[qps[0]] + p.max_rd_atomic));
    return n;
  };
  uint64_t first = 0;
  const uint64_t same = run(true, &first);
  const double same_mops = same / 200.0;
  // One unit, atomic_cost each: 2.5 Mops on one address.
  EXPECT_NEAR(same_mops, 1e3 / PsToNs(p.atomic_cost_ps), 0.1);
  EXPECT_GT(first * 5, same) << "units serve the QPs about evenly";
  uint64_t unused = 0;
  const uint64_t spread = run(false, &unused);
  std::printf("atomics (model): one address %.2f Mops, four addresses %.2f Mops\n",
              same_mops, spread / 200.0);
  EXPECT_GT(spread, same * 3 / 2);  // different addresses overlap on other units
}

TEST(SimulatorOps, AtomicsCountAgainstMaxRdAtomic) {
  NicParams p = ConnectX6RoCE100();
  p.max_rd_atomic = 2;
  World w(p);
  QpId x = w.AddPair(QpConfig{});
  Sink sink;
  w.sim.set_completion_sink(&sink);
  std::vector<Wr> wrs;
  for (int i = 0; i < 8; ++i) {
    Wr c = MakeWr(i, i % 2 ? Op::kCas : Op::kRead, i % 2 ? 0 : 64);
    c.raddr = 0x40 * i;
    wrs.push_back(c);
  }
  w.sim.PostSend(x, wrs);
  w.sim.RunUntil(NsToPs(100e3));
  ASSERT_EQ(sink.cqes.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(sink.cqes[i].wr_id, i);  // in order
    EXPECT_EQ(sink.cqes[i].bytes, i % 2 ? 8u : 64u);
  }
  // Two at a time: four round trips at least.
  EXPECT_GT(sink.cqes[7].time - sink.cqes[0].post_time, 4 * NsToPs(1500));
}

// 16 QPs of 16 B WRITEs at the dispatcher ceiling (~105 Mmps): the reverse
// link used to carry one ACK per message (82 B each, ~69 % of 100 Gbps).
double ReverseLinkShare(Picos coalesce_delay, double* mmps) {
  NicParams p = ConnectX6RoCE100();
  p.ack_coalesce_delay_ps = coalesce_delay;
  World w(p);
  std::vector<QpId> qps;
  QpConfig c;
  c.sq_depth = 8192;
  for (int i = 0; i < 16; ++i) qps.push_back(w.AddPair(c));
  std::vector<Wr> wrs(4000, MakeWr(0, Op::kWrite, 16, false));
  for (QpId q : qps) w.sim.PostSend(q, wrs);
  const Picos t0 = NsToPs(20e3), t1 = NsToPs(120e3);
  w.sim.RunUntil(t0);
  const uint64_t fwd0 = w.sim.host_stats(w.a).tx_packets;
  const uint64_t rev0 = w.sim.host_stats(w.b).tx_wire_bytes;
  w.sim.RunUntil(t1);
  *mmps = (w.sim.host_stats(w.a).tx_packets - fwd0) / PsToNs(t1 - t0) * 1e3;
  const double rev_ps = (w.sim.host_stats(w.b).tx_wire_bytes - rev0) *
                        static_cast<double>(p.byte_time_ps());
  return rev_ps / static_cast<double>(t1 - t0);
}

TEST(SimulatorOps, AckCoalescingKeepsTheReverseLinkSmallAtHighMessageRate) {
  double mmps_off = 0, mmps_on = 0;
  const double off = ReverseLinkShare(0, &mmps_off);
  const double on = ReverseLinkShare(ConnectX6RoCE100().ack_coalesce_delay_ps, &mmps_on);
  std::printf("reverse link at %.0f Mmps (model): %.1f %% one ACK per message, "
              "%.1f %% coalesced\n", mmps_on, 100 * off, 100 * on);
  EXPECT_NEAR(mmps_off, 105, 5);
  EXPECT_NEAR(mmps_on, 105, 5);   // coalescing costs no message rate
  EXPECT_GT(off, 0.6);            // 105 M x 82 B
  EXPECT_LT(on, 0.12);            // ~1 ACK per QP per ack_coalesce_delay
}

// A lone message and a drained posting window are ACKed at once (AckReq):
// coalescing adds no latency to a latency-bound sender.
TEST(SimulatorOps, AckCoalescingAddsNoLatencyToALoneMessage) {
  auto lat = [](Picos delay) {
    NicParams p = ConnectX6RoCE100();
    p.ack_coalesce_delay_ps = delay;
    World w(p);
    QpId x = w.AddPair(QpConfig{});
    Sink sink;
    w.sim.set_completion_sink(&sink);
    Wr four[4] = {MakeWr(1, Op::kWrite, 16), MakeWr(2, Op::kWrite, 16),
                  MakeWr(3, Op::kWrite, 16), MakeWr(4, Op::kWrite, 16)};
    w.sim.PostSend(x, four);
    w.sim.RunUntil(NsToPs(50e3));
    return sink.cqes.size() == 4 ? sink.cqes[3].time - sink.cqes[3].post_time : Picos{0};
  };
  EXPECT_GT(lat(0), 0u);
  // Not later; a few ns earlier is the one ACK (not four) the requester's
  // RX and PCIe handle.
  EXPECT_LE(lat(NsToPs(1000)), lat(0));
}

}  // namespace
}  // namespace vrdma::model
