// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Simulator-level tests of the protocol operations and the receive side:
// dispatch and retry bugs, RNR/retry counts and the error state, receive
// WQE fetch and RNR NAK costs, UD, atomics, ACK coalescing.
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

}  // namespace
}  // namespace vrdma::model
