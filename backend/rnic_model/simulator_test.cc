// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Unit tests of the RNIC timing model: serialization arithmetic,
// segmentation, message-rate ceilings, determinism, go-back-N, UC loss,
// RNR, READ, cross-channel WAIT/ENABLE.
#include "backend/rnic_model/simulator.h"

#include <vector>

#include "gtest/gtest.h"

namespace vrdma::model {
namespace {

class Collect : public CompletionSink {
 public:
  void OnCqe(const Cqe& c) override { cqes.push_back(c); }
  std::vector<Cqe> cqes;
};

struct Pair {
  Simulator sim;
  HostId a, b;
  CqId cqa, cqb;
  QpId qa, qb;
  Pair(const NicParams& p, const FabricParams& f, Transport t = Transport::kRc,
       uint64_t seed = 1, bool managed = false)
      : sim(f, seed) {
    a = sim.AddHost(p);
    b = sim.AddHost(p);
    cqa = sim.CreateCq(a);
    cqb = sim.CreateCq(b);
    QpConfig c;
    c.transport = t;
    c.send_cq = cqa;
    c.recv_cq = cqa;
    c.sq_depth = 4096;
    c.managed = managed;
    qa = sim.CreateQp(a, c);
    c.send_cq = cqb;
    c.recv_cq = cqb;
    c.managed = false;
    qb = sim.CreateQp(b, c);
    EXPECT_TRUE(sim.Connect(qa, qb));
  }
};

Wr Write(uint64_t id, uint32_t bytes, bool sig = true) {
  Wr w;
  w.wr_id = id;
  w.op = Op::kWrite;
  w.bytes = bytes;
  w.signaled = sig;
  return w;
}

TEST(NicParams, SerializationMath) {
  NicParams p = ConnectX6RoCE100();
  EXPECT_EQ(p.byte_time_ps(), 80u);
  // 4096 B payload + 82 B overhead at 100 Gbps = 4178 * 80 ps.
  EXPECT_EQ(p.wire_time_ps(4096), 4178u * 80u);
  NicParams q = ConnectX5RoCE40();
  EXPECT_EQ(q.wire_time_ps(1024), (1024u + 82u) * 200u);
}

// The idle round trip is a lone WRITE's completion time: it grows with the
// bytes serialized and by four hops' propagation (two each way) when each
// hop gets longer, and a lossy fabric's is measured without its loss.
TEST(Simulator, IdleWriteRoundTrip) {
  const NicParams p = ConnectX6RoCE100();
  FabricParams f;
  const Picos small = IdleWriteRoundTripPs(p, f, 64);
  const Picos unit = IdleWriteRoundTripPs(p, f, 4096);
  EXPECT_GT(small, NsToPs(1000));
  EXPECT_GE(unit - small, p.wire_time_ps(4096) - p.wire_time_ps(64));
  f.link_propagation_ps += NsToPs(1000);
  EXPECT_EQ(IdleWriteRoundTripPs(p, f, 64), small + 4 * NsToPs(1000));
  FabricParams lossy;
  lossy.lossless = false;
  lossy.random_loss = 0.5;
  EXPECT_EQ(IdleWriteRoundTripPs(p, lossy, 64), small);
}

TEST(Simulator, SegmentsIntoMtuPacketsAndSerializesAtLineRate) {
  NicParams p = ConnectX6RoCE100();
  Pair t(p, FabricParams{});
  Collect sink;
  t.sim.set_completion_sink(&sink);
  const uint32_t bytes = 10 * 4096 + 100;  // 11 packets
  Wr w = Write(7, bytes);
  ASSERT_EQ(t.sim.PostSend(t.qa, {&w, 1}), 1);
  t.sim.RunUntil(NsToPs(1e6));
  ASSERT_EQ(sink.cqes.size(), 1u);
  EXPECT_EQ(sink.cqes[0].wr_id, 7u);
  EXPECT_EQ(t.sim.host_stats(t.a).tx_packets, 11u);
  EXPECT_EQ(t.sim.host_stats(t.a).tx_bytes, bytes);
  EXPECT_EQ(t.sim.host_stats(t.b).tx_packets, 1u);  // 11 < 16 packets: one ACK
  // Completion time is at least the serialization of all packets.
  const Picos ser = 10 * p.wire_time_ps(4096) + p.wire_time_ps(100);
  EXPECT_GT(sink.cqes[0].time - sink.cqes[0].post_time, ser);
  EXPECT_LT(sink.cqes[0].time - sink.cqes[0].post_time, ser + NsToPs(5000));
}

// A long hop delays a lossless stream by its propagation once, not per
// packet: the switch port does not count the packets still on the wire to
// the NIC as the NIC's backlog (PFC pauses for the NIC's own backlog).
TEST(Simulator, LongHopsPipelineALosslessStream) {
  NicParams p = ConnectX6RoCE100();
  FabricParams f;
  f.link_propagation_ps = NsToPs(100'000);
  Pair t(p, f);
  Collect sink;
  t.sim.set_completion_sink(&sink);
  Wr w = Write(1, 100 * 4096);  // 100 packets
  ASSERT_EQ(t.sim.PostSend(t.qa, {&w, 1}), 1);
  t.sim.RunUntil(NsToPs(100e6));
  ASSERT_EQ(sink.cqes.size(), 1u);
  // Four hops there and back, the serialization, and the NIC's own work:
  // well under a millisecond (one packet per hop would take 10 ms).
  const Picos took = sink.cqes[0].time - sink.cqes[0].post_time;
  EXPECT_GT(took, 4 * f.link_propagation_ps + 100 * p.wire_time_ps(4096));
  EXPECT_LT(took, 4 * f.link_propagation_ps + 100 * p.wire_time_ps(4096) +
                      NsToPs(50'000));
}

TEST(Simulator, SelectiveSignalingAndSigAll) {
  NicParams p = ConnectX6RoCE100();
  Pair t(p, FabricParams{});
  Collect sink;
  t.sim.set_completion_sink(&sink);
  std::vector<Wr> wrs;
  for (int i = 0; i < 10; ++i) wrs.push_back(Write(i, 256, i % 5 == 4));
  t.sim.PostSend(t.qa, wrs);
  t.sim.RunUntil(NsToPs(100e3));
  ASSERT_EQ(sink.cqes.size(), 2u);
  EXPECT_EQ(sink.cqes[0].wr_id, 4u);
  EXPECT_EQ(sink.cqes[1].wr_id, 9u);
  EXPECT_EQ(t.sim.sq_outstanding(t.qa), 0u);  // unsignaled WQEs retired too
  // sig_all: every WQE completes visibly.
  Simulator sim(FabricParams{}, 1);
  HostId a = sim.AddHost(p), b = sim.AddHost(p);
  QpConfig c;
  c.send_cq = sim.CreateCq(a);
  c.sig_all = true;
  QpId x = sim.CreateQp(a, c);
  c.send_cq = sim.CreateCq(b);
  QpId y = sim.CreateQp(b, c);
  sim.Connect(x, y);
  Collect all;
  sim.set_completion_sink(&all);
  sim.PostSend(x, wrs);
  sim.RunUntil(NsToPs(100e3));
  EXPECT_EQ(all.cqes.size(), 10u);
}

TEST(Simulator, MtuChangesPacketCount) {
  NicParams p = ConnectX6RoCE100();
  p.mtu_bytes = 1024;
  Pair t(p, FabricParams{});
  Wr w = Write(1, 8192);
  t.sim.PostSend(t.qa, {&w, 1});
  t.sim.RunUntil(NsToPs(1e6));
  EXPECT_EQ(t.sim.host_stats(t.a).tx_packets, 8u);
}

// Measures the message rate of n QPs each posting small WRITEs.
double SmallMessageRateMmps(int nqps) {
  NicParams p = ConnectX6RoCE100();
  Simulator sim(FabricParams{}, 1);
  HostId a = sim.AddHost(p), b = sim.AddHost(p);
  CqId ca = sim.CreateCq(a), cb = sim.CreateCq(b);
  std::vector<QpId> qps;
  for (int i = 0; i < nqps; ++i) {
    QpConfig c;
    c.send_cq = ca;
    c.recv_cq = ca;
    c.sq_depth = 8192;
    QpId x = sim.CreateQp(a, c);
    c.send_cq = cb;
    c.recv_cq = cb;
    QpId y = sim.CreateQp(b, c);
    sim.Connect(x, y);
    qps.push_back(x);
  }
  std::vector<Wr> wrs(4000, Write(0, 16, false));
  for (QpId q : qps) sim.PostSend(q, wrs);
  sim.RunUntil(NsToPs(100e3));  // 100 us
  uint64_t pkts = sim.host_stats(a).tx_packets;
  return static_cast<double>(pkts) / 100.0;  // packets per us = Mmps
}

TEST(Simulator, MessageRateCeilings) {
  double one = SmallMessageRateMmps(1);
  double nine = SmallMessageRateMmps(9);
  double sixteen = SmallMessageRateMmps(16);
  // ~13 Mmps from one QP, ~105 Mmps aggregate (PeRF §2.3.2), minus start-up.
  EXPECT_NEAR(one, 13.0, 1.0);
  EXPECT_NEAR(nine, 105.0, 8.0);
  EXPECT_NEAR(sixteen, 105.0, 8.0);
}

TEST(Simulator, LargeWritesReachLineRateGoodput) {
  NicParams p = ConnectX6RoCE100();
  Pair t(p, FabricParams{});
  std::vector<Wr> wrs(20, Write(0, 1 << 20, false));
  t.sim.PostSend(t.qa, wrs);
  t.sim.RunUntil(NsToPs(1e6));  // 1 ms
  double gbps = t.sim.host_stats(t.a).tx_bytes * 8.0 / 1e6;  // bytes per ms -> Gbps
  EXPECT_GT(gbps, 95.0);
  EXPECT_LT(gbps, 100.0);
}

std::vector<Picos> RunWithLoss(uint64_t seed, double loss, Transport tr,
                               HostStats* stats, uint64_t* completed) {
  NicParams p = ConnectX6RoCE100();
  FabricParams f;
  f.random_loss = loss;
  Pair t(p, f, tr, seed);
  Collect sink;
  t.sim.set_completion_sink(&sink);
  std::vector<Wr> wrs;
  for (int i = 0; i < 200; ++i) wrs.push_back(Write(i, 64 * 1024));
  t.sim.PostSend(t.qa, wrs);
  t.sim.RunUntil(NsToPs(20e6));
  std::vector<Picos> times;
  for (auto& c : sink.cqes) times.push_back(c.time);
  *stats = t.sim.host_stats(t.a);
  *completed = sink.cqes.size();
  return times;
}

TEST(Simulator, DeterministicWithSeed) {
  HostStats s1, s2, s3;
  uint64_t n1, n2, n3;
  auto a = RunWithLoss(42, 0.001, Transport::kRc, &s1, &n1);
  auto b = RunWithLoss(42, 0.001, Transport::kRc, &s2, &n2);
  auto c = RunWithLoss(43, 0.001, Transport::kRc, &s3, &n3);
  EXPECT_EQ(a, b);
  EXPECT_EQ(s1.retransmitted_packets, s2.retransmitted_packets);
  EXPECT_NE(a, c);
}

TEST(Simulator, RcGoBackNRecoversEveryMessageInOrder) {
  HostStats s;
  uint64_t n;
  auto times = RunWithLoss(7, 0.002, Transport::kRc, &s, &n);
  EXPECT_EQ(n, 200u);
  EXPECT_GT(s.retransmitted_packets, 0u);
  // Go-back-N resends from the lost packet on: at least the rest of the
  // window, so more than one packet per NAK on average.
  EXPECT_GT(s.retransmitted_packets, s.naks_sent);
  for (size_t i = 1; i < times.size(); ++i) EXPECT_LE(times[i - 1], times[i]);
  HostStats clean;
  uint64_t n0;
  RunWithLoss(7, 0.0, Transport::kRc, &clean, &n0);
  EXPECT_EQ(clean.retransmitted_packets, 0u);
  EXPECT_EQ(clean.tx_packets, 200u * 16u);
}

TEST(Simulator, UcDropsWholeMessagesAndGoesOn) {
  NicParams p = ConnectX6RoCE100();
  FabricParams f;
  f.random_loss = 0.01;
  Pair t(p, f, Transport::kUc, 3);
  Collect sink;
  t.sim.set_completion_sink(&sink);
  for (int i = 0; i < 300; ++i) t.sim.PostRecv(t.qb, 1000 + i);
  std::vector<Wr> wrs;
  for (int i = 0; i < 300; ++i) {
    Wr w = Write(i, 16 * 1024);
    w.op = Op::kSend;
    wrs.push_back(w);
  }
  t.sim.PostSend(t.qa, wrs);
  t.sim.RunUntil(NsToPs(10e6));
  size_t send_done = 0, recv_done = 0;
  for (auto& c : sink.cqes) (c.recv ? recv_done : send_done)++;
  EXPECT_EQ(send_done, 300u);               // the sender never waits
  EXPECT_LT(recv_done, 300u);               // some messages were lost whole
  EXPECT_GT(recv_done, 200u);               // and later ones still arrived
  EXPECT_EQ(t.sim.host_stats(t.a).retransmitted_packets, 0u);
  EXPECT_EQ(t.sim.host_stats(t.a).tx_packets, 300u * 4u);
}

TEST(Simulator, RefusesWhatTheTransportCannotDo) {
  Pair t(ConnectX6RoCE100(), FabricParams{}, Transport::kUc);
  Wr r = Write(1, 64);
  r.op = Op::kRead;
  EXPECT_EQ(t.sim.PostSend(t.qa, {&r, 1}), 0);
  Simulator sim(FabricParams{}, 1);
  HostId h = sim.AddHost(ConnectX6RoCE100());
  QpConfig c;
  c.send_cq = sim.CreateCq(h);
  c.sq_depth = 2;
  QpId lone = sim.CreateQp(h, c);
  Wr w = Write(2, 64);
  EXPECT_EQ(sim.PostSend(lone, {&w, 1}), 0);  // not connected
  Wr z;
  z.op = Op::kWait;
  z.wait_cq = c.send_cq;
  Wr three[3] = {z, z, z};
  EXPECT_EQ(sim.PostSend(lone, three), 2);    // SQ depth
}

TEST(Simulator, RnrWhenNoReceiveThenRetry) {
  NicParams p = ConnectX6RoCE100();
  Pair t(p, FabricParams{});
  Collect sink;
  t.sim.set_completion_sink(&sink);
  Wr w = Write(5, 64);
  w.op = Op::kSend;
  t.sim.PostSend(t.qa, {&w, 1});
  t.sim.RunUntil(NsToPs(5000));
  EXPECT_TRUE(sink.cqes.empty());
  EXPECT_EQ(t.sim.host_stats(t.b).rnr_naks_sent, 1u);
  t.sim.PostRecv(t.qb, 99);
  t.sim.RunUntil(NsToPs(100e3));
  ASSERT_EQ(sink.cqes.size(), 2u);
  bool saw_recv = false;
  for (auto& c : sink.cqes) if (c.recv) { saw_recv = true; EXPECT_EQ(c.wr_id, 99u); }
  EXPECT_TRUE(saw_recv);
}

TEST(Simulator, ReadResponsesCompeteWithResponderWrites) {
  NicParams p = ConnectX6RoCE100();
  // Alone: a 1 MiB READ from a to b.
  auto read_time = [&](bool responder_busy) {
    Simulator sim(FabricParams{}, 1);
    HostId a = sim.AddHost(p), b = sim.AddHost(p);
    CqId ca = sim.CreateCq(a), cb = sim.CreateCq(b);
    QpConfig c;
    c.send_cq = ca; c.recv_cq = ca;
    QpId ra = sim.CreateQp(a, c);
    c.send_cq = cb; c.recv_cq = cb;
    QpId rb = sim.CreateQp(b, c);
    QpId wb = sim.CreateQp(b, c);
    c.send_cq = ca; c.recv_cq = ca;
    QpId wa = sim.CreateQp(a, c);
    sim.Connect(ra, rb);
    sim.Connect(wb, wa);
    Collect sink;
    sim.set_completion_sink(&sink);
    if (responder_busy) {
      std::vector<Wr> wrs(8, Write(0, 1 << 20, false));
      sim.PostSend(wb, wrs);  // b's outbound WRITEs
    }
    Wr r = Write(1, 1 << 20);
    r.op = Op::kRead;
    sim.PostSend(ra, {&r, 1});
    sim.RunUntil(NsToPs(2e6));
    for (auto& x : sink.cqes) if (x.qp == ra) return x.time - x.post_time;
    return Picos{0};
  };
  Picos alone = read_time(false);
  Picos shared = read_time(true);
  ASSERT_GT(alone, 0u);
  ASSERT_GT(shared, 0u);
  EXPECT_GT(alone, NsToPs(84e3));              // 1 MiB at ~98 Gbps
  EXPECT_GT(shared, alone * 17 / 10);          // shares b's link ~1:1
}

TEST(Simulator, WaitEnableAndZeroWait) {
  NicParams p = ConnectX6RoCE100();
  Simulator sim(FabricParams{}, 1);
  HostId a = sim.AddHost(p), b = sim.AddHost(p);
  CqId ca = sim.CreateCq(a), cb = sim.CreateCq(b), ctl = sim.CreateCq(a);
  QpConfig c;
  c.send_cq = ca; c.recv_cq = ca;
  QpId x = sim.CreateQp(a, c);
  QpConfig m = c;
  m.managed = true;
  m.send_cq = ctl;
  QpId managed = sim.CreateQp(a, m);
  c.send_cq = cb; c.recv_cq = cb;
  QpId y = sim.CreateQp(b, c), y2 = sim.CreateQp(b, c);
  sim.Connect(x, y);
  sim.Connect(managed, y2);
  Collect sink;
  sim.set_completion_sink(&sink);
  // Managed QP: posted but invisible until ENABLEd.
  Wr mw = Write(50, 16);
  sim.PostSend(managed, {&mw, 1});
  // x: WAIT for one CQE on ctl, then a WRITE.
  Wr wait;
  wait.op = Op::kWait;
  wait.wait_cq = ctl;
  wait.wait_count = 1;
  wait.wr_id = 10;
  Wr after = Write(11, 16);
  Wr pair[2] = {wait, after};
  sim.PostSend(x, pair);
  sim.RunUntil(NsToPs(20e3));
  EXPECT_TRUE(sink.cqes.size() == 0) << "nothing may run before ENABLE";
  // ENABLE the managed QP from x's peer-less control path: post on x itself
  // is blocked, so use a second ordinary QP.
  QpConfig c2;
  c2.send_cq = ca; c2.recv_cq = ca;
  QpId ctrl = sim.CreateQp(a, c2);
  Wr en;
  en.op = Op::kEnable;
  en.enable_qp = managed;
  en.wr_id = 20;
  sim.PostSend(ctrl, {&en, 1});
  sim.RunUntil(NsToPs(60e3));
  // managed WRITE completes on ctl -> WAIT satisfied -> x's WRITE runs.
  std::vector<uint64_t> ids;
  for (auto& q : sink.cqes) ids.push_back(q.wr_id);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[0], 20u);
  EXPECT_EQ(ids[1], 50u);
  EXPECT_EQ(ids[2], 10u);
  EXPECT_EQ(ids[3], 11u);
  // Zero-count WAIT completes at once.
  sink.cqes.clear();
  Wr z;
  z.op = Op::kWait;
  z.wait_cq = ctl;
  z.wait_count = 0;
  z.wr_id = 30;
  Wr z2[2] = {z, Write(31, 16)};
  sim.PostSend(x, z2);
  sim.RunUntil(NsToPs(100e3));
  ASSERT_EQ(sink.cqes.size(), 2u);
  EXPECT_EQ(sink.cqes[0].wr_id, 30u);
}

TEST(Simulator, ZeroWaitInterleavesAnotherQpBetweenChunks) {
  // PeRF §3.5.2: a large message split into chunks with 0-WAITs between
  // them lets a second QP's WQE be dispatched in between, even with ONE PU.
  NicParams p = ConnectX6RoCE100();
  p.num_pus = 1;
  auto small_done = [&](bool with_zero_waits) {
    Simulator sim(FabricParams{}, 1);
    HostId a = sim.AddHost(p), b = sim.AddHost(p);
    CqId ca = sim.CreateCq(a), cb = sim.CreateCq(b);
    QpConfig c;
    c.send_cq = ca; c.recv_cq = ca;
    QpId big = sim.CreateQp(a, c), small = sim.CreateQp(a, c);
    c.send_cq = cb; c.recv_cq = cb;
    sim.Connect(big, sim.CreateQp(b, c));
    sim.Connect(small, sim.CreateQp(b, c));
    Collect sink;
    sim.set_completion_sink(&sink);
    std::vector<Wr> wrs;
    if (with_zero_waits) {
      for (int i = 0; i < 16; ++i) {
        wrs.push_back(Write(0, 64 * 1024, false));
        Wr z; z.op = Op::kWait; z.wait_cq = ca; z.wait_count = 0; z.signaled = false;
        wrs.push_back(z);
      }
    } else {
      wrs.push_back(Write(0, 1 << 20, false));
    }
    sim.PostSend(big, wrs);
    sim.RunUntil(NsToPs(2000));
    Wr s = Write(9, 16);
    sim.PostSend(small, {&s, 1});
    sim.RunUntil(NsToPs(1e6));
    for (auto& x : sink.cqes) if (x.wr_id == 9) return x.time - x.post_time;
    return Picos{0};
  };
  Picos without = small_done(false);
  Picos with = small_done(true);
  EXPECT_GT(without, NsToPs(50e3));  // waits for the whole 1 MiB
  EXPECT_LT(with, NsToPs(15e3));     // waits for one 64 KiB chunk at most
}

// n senders, one receiver, 1 MiB WRITEs: returns completions.
uint64_t Incast(int n, FabricParams f, FabricStats* fs) {
  NicParams p = ConnectX6RoCE100();
  Simulator sim(f, 1);
  std::vector<HostId> hs;
  for (int i = 0; i <= n; ++i) hs.push_back(sim.AddHost(p));
  CqId rx_cq = sim.CreateCq(hs[n]);
  Collect sink;
  sim.set_completion_sink(&sink);
  for (int i = 0; i < n; ++i) {
    CqId c = sim.CreateCq(hs[i]);
    QpConfig qc;
    qc.send_cq = c; qc.recv_cq = c;
    QpId x = sim.CreateQp(hs[i], qc);
    qc.send_cq = rx_cq; qc.recv_cq = rx_cq;
    QpId y = sim.CreateQp(hs[n], qc);
    sim.Connect(x, y);
    std::vector<Wr> wrs(4, Write(i, 1 << 20));
    sim.PostSend(x, wrs);
  }
  sim.RunUntil(NsToPs(50e6));
  *fs = sim.fabric_stats();
  return sink.cqes.size();
}

TEST(Simulator, IncastLosslessPausesLossyDropsAndRecovers) {
  FabricParams lossless;
  FabricStats a;
  EXPECT_EQ(Incast(8, lossless, &a), 32u);
  EXPECT_EQ(a.drops_overflow, 0u);
  EXPECT_GT(a.pause_events, 0u);
  // Overshoot: what each sender already had on the wire and in flight.
  EXPECT_LE(a.max_port_bytes, lossless.pfc_xoff_bytes + 8 * 3 * 4178u);
  EXPECT_GT(a.ecn_marks, 0u);
  FabricParams lossy;
  lossy.lossless = false;
  lossy.switch_buffer_bytes = 1u << 20;
  FabricStats b;
  EXPECT_EQ(Incast(8, lossy, &b), 32u);  // go-back-N gets everything through
  EXPECT_GT(b.drops_overflow, 0u);
  EXPECT_EQ(b.pause_events, 0u);
}

// With several WQEs per PU visit, splitting a message alone no longer lets
// another QP in; a zero-count WAIT between the pieces does (PeRF §3.5.2).
TEST(Simulator, ZeroWaitForcesASwitchWhenPusServeSeveralWqesPerVisit) {
  NicParams p = ConnectX6RoCE100();
  p.num_pus = 1;
  auto small_done = [&](uint32_t per_visit, bool zero_waits) {
    NicParams q = p;
    q.wqes_per_visit = per_visit;
    Simulator sim(FabricParams{}, 1);
    HostId a = sim.AddHost(q), b = sim.AddHost(q);
    CqId ca = sim.CreateCq(a), cb = sim.CreateCq(b);
    QpConfig c;
    c.send_cq = ca; c.recv_cq = ca;
    QpId big = sim.CreateQp(a, c), small = sim.CreateQp(a, c);
    c.send_cq = cb; c.recv_cq = cb;
    sim.Connect(big, sim.CreateQp(b, c));
    sim.Connect(small, sim.CreateQp(b, c));
    Collect sink;
    sim.set_completion_sink(&sink);
    std::vector<Wr> wrs;
    for (int i = 0; i < 16; ++i) {
      wrs.push_back(Write(0, 64 * 1024, false));
      if (zero_waits) {
        Wr z; z.op = Op::kWait; z.wait_cq = ca; z.wait_count = 0; z.signaled = false;
        wrs.push_back(z);
      }
    }
    sim.PostSend(big, wrs);
    sim.RunUntil(NsToPs(2000));
    Wr s = Write(9, 16);
    sim.PostSend(small, {&s, 1});
    sim.RunUntil(NsToPs(1e6));
    for (auto& x : sink.cqes) if (x.wr_id == 9) return x.time - x.post_time;
    return Picos{0};
  };
  EXPECT_LT(small_done(1, false), NsToPs(15e3));    // default: WQE boundaries suffice
  EXPECT_GT(small_done(64, false), NsToPs(50e3));   // the QP keeps its PU
  EXPECT_LT(small_done(64, true), NsToPs(15e3));    // 0-WAIT forces the switch
}

}  // namespace
}  // namespace vrdma::model
