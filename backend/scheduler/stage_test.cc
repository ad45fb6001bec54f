// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The scheduler stage on a FakeRnic: what reaches the RNIC (whole WRs,
// pieces, WAITs, post lists, signals) under each control, and what the
// owner and the policy are told.
#include "backend/scheduler/stage.h"

#include <optional>
#include <vector>

#include "backend/rnic/testing/fake_rnic.h"
#include "backend/scheduler/split.h"
#include "gtest/gtest.h"

namespace vrdma::sched {
namespace {

using vrdma::testing::FakeRnic;

class RecordingOwner : public StageOwner {
 public:
  struct Done {
    uint32_t tag;
    WcStatus status;
    uint32_t len;
  };
  void OnWrDone(void*, uint32_t tag, WcStatus s, uint32_t len) override {
    done.push_back({tag, s, len});
  }
  void OnMarkerReached(void*, uint32_t tag, WcStatus s) override {
    markers.push_back({tag, s, 0});
  }
  void OnPostRefused(void*, uint32_t tag, Status) override {
    refused.push_back(tag);
  }
  bool PrepareReceive(void*, const ReceivePiece& p) override {
    if (receiver_full) return false;
    receives.push_back(p);
    return true;
  }
  bool receiver_full = false;
  bool SendPeerMessage(DestId dest, const policy::PeerMessage& m) override {
    peer.push_back({dest, m});
    return true;
  }
  std::vector<Done> done, markers;
  std::vector<uint32_t> refused;
  std::vector<ReceivePiece> receives;
  std::vector<std::pair<DestId, policy::PeerMessage>> peer;
};

// A policy that only records; tests drive the mechanisms directly.
class ScriptPolicy : public policy::SchedulerPolicy {
 public:
  std::string_view name() const override { return "script"; }
  void OnTenantAdded(TenantId, const policy::TenantQos&) override {}
  void OnTenantQosChanged(TenantId, const policy::TenantQos&) override {}
  void OnTenantRemoved(TenantId) override {}
  void OnFlowAdded(Nanos, const policy::FlowInfo& f) override {
    flows.push_back(f);
  }
  void OnFlowEnded(Nanos, FlowId, policy::FlowEnd how) override {
    ends.push_back(how);
  }
  void OnArrival(Nanos, const policy::WrInfo& wr) override {
    arrivals.push_back(wr);
  }
  void OnCompleted(Nanos, const policy::WrInfo& wr, Nanos lat,
                   bool ok) override {
    completions.push_back(wr);
    latencies.push_back(lat);
    oks.push_back(ok);
  }
  void OnCreditNeeded(Nanos, FlowId f) override { credit_asks.push_back(f); }
  void OnRetired(Nanos, FlowId, uint64_t bytes, uint32_t pieces) override {
    retired_bytes += bytes;
    retired_pieces += pieces;
  }
  void OnTimer(Nanos now) override { timers.push_back(now); }
  void OnProbeCompleted(Nanos, DestId d, Nanos rtt) override {
    probes.push_back({d, rtt});
  }
  policy::Mechanisms& M() { return mech(); }

  std::vector<policy::FlowInfo> flows;
  std::vector<policy::FlowEnd> ends;
  std::vector<policy::WrInfo> arrivals, completions;
  std::vector<Nanos> latencies, timers;
  std::vector<bool> oks;
  std::vector<FlowId> credit_asks;
  std::vector<std::pair<DestId, Nanos>> probes;
  uint64_t retired_bytes = 0;
  uint32_t retired_pieces = 0;
};

class StageTest : public ::testing::Test {
 protected:
  explicit StageTest(StageOptions options = {})
      : stage_{rnic_, policy_, owner_, options} {}
  void SetUp() override { MakeFlow(QpType::kRc); }

  void MakeFlow(QpType type, uint32_t depth = 64, uint32_t capacity = 32) {
    cq_ = *rnic_.CreateCq(1024);
    QpInit init;
    init.type = type;
    init.send_cq = cq_;
    init.recv_cq = cq_;
    qp_ = *rnic_.CreateQp(init);
    QpAttr a;
    a.state = QpState::kRts;
    (void)rnic_.ModifyQp(qp_, a, kQpState);
    FlowSpec s;
    s.tenant = 7;
    s.qp = qp_;
    s.type = type;
    s.send_cq = cq_;
    s.rnic_depth = depth;
    s.queue_capacity = capacity;
    s.max_inline = 64;
    s.cookie_base = uint64_t{0xab} << 32;
    flow_ = stage_.AddFlow(Stage::PrepareFlow(s), now_);
    ASSERT_NE(flow_, kNoFlow);
  }

  static SendWr Wr(WrOpcode op, uint32_t bytes, bool signaled) {
    SendWr w;
    w.opcode = op;
    w.num_sge = 1;
    w.sge[0] = {0x100000, bytes, 5};
    w.remote_addr = 0x7000000;
    w.rkey = 9;
    w.send_flags = signaled ? uint32_t{kSendSignaled} : 0u;
    return w;
  }
  bool Submit(const SendWr& w, uint32_t tag) {
    policy::WrInfo info;
    info.kind = policy::WrKind::kWrite;
    if (w.opcode == WrOpcode::kRdmaRead) info.kind = policy::WrKind::kRead;
    if (w.opcode == WrOpcode::kSend || w.opcode == WrOpcode::kSendWithImm) {
      info.kind = policy::WrKind::kSend;
    }
    info.bytes = static_cast<uint32_t>(w.total_length());
    info.signaled = (w.send_flags & kSendSignaled) != 0;
    return stage_.Submit(flow_, w, tag, info, now_);
  }
  vrdma::testing::Fifo<SendWr>& Posted() {
    return rnic_.qps.at(qp_.id).sends;
  }
  // The RNIC completes its oldest posted WRs up to and including the n-th
  // signaled one (unsignaled ones silently, as hardware does).
  void CompleteSignaled(int n = 1, WcStatus status = WcStatus::kSuccess) {
    auto& q = Posted();
    while (n > 0 && !q.empty()) {
      SendWr wr = q.front();
      if (!(wr.send_flags & kSendSignaled)) {
        q.pop_front();
        continue;
      }
      rnic_.CompleteSend(qp_.qpn, status);
      --n;
    }
    Poll();
  }
  void Poll() {
    Completion c[64];
    int n;
    while ((n = rnic_.PollCq(cq_, c)) > 0) {
      for (int i = 0; i < n; ++i) stage_.OnCompletion(flow_, c[i], now_);
    }
  }
  void Run() { stage_.Run(now_); }

  FakeRnic rnic_;
  ScriptPolicy policy_;
  RecordingOwner owner_;
  Stage stage_;
  RnicCq cq_;
  RnicQp qp_;
  FlowId flow_ = kNoFlow;
  Nanos now_ = 1000;
};

TEST_F(StageTest, NativeWrsGoWholeInOnePostListAndUnsignaledOnesAreReported) {
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, false), 1));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, false), 2));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, true), 3));
  Run();
  EXPECT_EQ(rnic_.post_calls, 1u) << "one doorbell for the batch";
  ASSERT_EQ(Posted().size(), 3u);
  EXPECT_FALSE(Posted()[0].send_flags & kSendSignaled) << "unsignaled stays so";
  EXPECT_TRUE(Posted()[2].send_flags & kSendSignaled);
  EXPECT_EQ(Posted()[0].wr_id >> 32, 0xabu);
  EXPECT_EQ(policy_.arrivals.size(), 3u);
  CompleteSignaled();
  ASSERT_EQ(owner_.done.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(owner_.done[i].tag, i + 1);
    EXPECT_EQ(owner_.done[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(policy_.completions.size(), 3u) << "the policy sees unsignaled WRs too";
  const policy::FlowAccount& a = stage_.flow_account(flow_);
  EXPECT_EQ(a.wrs_arrived, 3u);
  EXPECT_EQ(a.wrs_completed, 3u);
  EXPECT_EQ(a.outstanding_pieces, 0u);
  EXPECT_EQ(stage_.tenant_account(7).bytes_completed, 192u);
  // Every completed WR is in the latency histogram, per flow and per tenant.
  uint64_t in_hist = 0, tenant_hist = 0;
  for (uint64_t n : a.latency_hist) in_hist += n;
  for (uint64_t n : stage_.tenant_account(7).latency_hist) tenant_hist += n;
  EXPECT_EQ(in_hist, 3u);
  EXPECT_EQ(tenant_hist, 3u);
  EXPECT_FALSE(stage_.busy());
}

// Adaptive signaling (TPL): the guest signals every WR; the RNIC is asked
// for a CQE only every signal period and at the end of each post list, and
// every guest WR is still reported, in order.
class AdaptiveSignalTest : public StageTest {
 protected:
  AdaptiveSignalTest() : StageTest({.adaptive_signaling = true}) {}
  // One signaled WR posted and completed `took` ns later.
  void OneRoundTrip(uint32_t tag, Nanos took) {
    ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, true), tag));
    Run();
    now_ += took;
    CompleteSignaled();
  }
  static int Signaled(const vrdma::testing::Fifo<SendWr>& q) {
    int n = 0;
    for (size_t i = 0; i < q.size(); ++i) n += (q[i].send_flags & kSendSignaled) != 0;
    return n;
  }
};

TEST_F(AdaptiveSignalTest, TheRnicSignalsEveryPeriodAndTheLastOfABatch) {
  // One at a time, each WR is the last of its post list: all signaled, and
  // completions as fast as at period 1 let the period grow by one each.
  for (uint32_t t = 1; t <= 4; ++t) OneRoundTrip(t, 1000);
  EXPECT_EQ(stage_.rnic_signals(), 4u);
  const uint32_t period = stage_.signal_period(flow_);
  EXPECT_EQ(period, 5u);
  // A batch of 16 the guest all signaled: one CQE per period, and the last.
  for (uint32_t t = 5; t < 21; ++t) {
    ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, true), t));
  }
  Run();
  ASSERT_EQ(Posted().size(), 16u);
  EXPECT_EQ(Signaled(Posted()), 4) << "WRs 5, 10, 15 of the batch and its last";
  EXPECT_TRUE(Posted()[15].send_flags & kSendSignaled);
  now_ += 1000;
  CompleteSignaled(16);
  ASSERT_EQ(owner_.done.size(), 20u);
  for (uint32_t i = 0; i < 20; ++i) {
    EXPECT_EQ(owner_.done[i].tag, i + 1);
    EXPECT_EQ(owner_.done[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(stage_.rnic_signals(), 8u) << "20 guest CQEs from 8 RNIC CQEs";
}

// The RNIC took only the demoted head of a post list: the signal its end
// owed is paid by the next post list, even one of unsignaled WRs only.
TEST_F(AdaptiveSignalTest, ASignalOwedWhenTheRnicRefusedTheRestIsPaidLater) {
  for (uint32_t t = 1; t <= 4; ++t) OneRoundTrip(t, 1000);
  ASSERT_EQ(stage_.signal_period(flow_), 5u);
  ASSERT_TRUE(Posted().empty());
  rnic_.sq_capacity = 2;
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, true), 5));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, true), 6));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, false), 7));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, false), 8));
  Run();
  ASSERT_EQ(Posted().size(), 2u);
  EXPECT_EQ(Signaled(Posted()), 0) << "5 and 6 went unsignaled; 8 was to pay";
  rnic_.sq_capacity = 1u << 20;
  Run();
  ASSERT_EQ(Posted().size(), 4u);
  EXPECT_TRUE(Posted()[3].send_flags & kSendSignaled) << "the owed signal";
  now_ += 1000;
  CompleteSignaled(1);
  ASSERT_EQ(owner_.done.size(), 8u);
  EXPECT_EQ(owner_.done[4].tag, 5u);
  EXPECT_EQ(owner_.done[5].tag, 6u);
}

TEST_F(AdaptiveSignalTest, ThePeriodHalvesWhenCompletionsSlowDown) {
  for (uint32_t t = 1; t <= 7; ++t) OneRoundTrip(t, 1000);
  ASSERT_EQ(stage_.signal_period(flow_), 8u);
  OneRoundTrip(8, 2000);  // under 2.5x the latency at period 1: kept
  EXPECT_EQ(stage_.signal_period(flow_), 8u);
  OneRoundTrip(9, 3000);  // over 2.5x: halved
  EXPECT_EQ(stage_.signal_period(flow_), 4u);
  OneRoundTrip(10, 3000);
  EXPECT_EQ(stage_.signal_period(flow_), 2u);
}

TEST_F(StageTest, WithoutAdaptiveSignalingEveryGuestSignalReachesTheRnic) {
  for (uint32_t t = 1; t <= 16; ++t) {
    ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 64, true), t));
  }
  Run();
  ASSERT_EQ(Posted().size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_TRUE(Posted()[i].send_flags & kSendSignaled);
  EXPECT_EQ(stage_.rnic_signals(), 16u);
  EXPECT_EQ(stage_.signal_period(flow_), 1u);
}

TEST(LatencyBucketTest, PowersOfTwoMicroseconds) {
  EXPECT_EQ(policy::LatencyBucket(0), 0);
  EXPECT_EQ(policy::LatencyBucket(999), 0);      // below 1 us
  EXPECT_EQ(policy::LatencyBucket(1000), 1);     // [1, 2) us
  EXPECT_EQ(policy::LatencyBucket(1999), 1);
  EXPECT_EQ(policy::LatencyBucket(2000), 2);     // [2, 4) us
  EXPECT_EQ(policy::LatencyBucket(100'000), 7);  // 100 us: [64, 128) us
  EXPECT_EQ(policy::LatencyBucket((uint64_t{1} << 22) * 1000 - 1), policy::kLatencyBuckets - 2);
  EXPECT_EQ(policy::LatencyBucket((uint64_t{1} << 22) * 1000), policy::kLatencyBuckets - 1);
  EXPECT_EQ(policy::LatencyBucket(uint64_t{1} << 62), policy::kLatencyBuckets - 1);  // beyond
}

TEST_F(StageTest, SplitWriteBecomesPiecesAtOffsetsWithOneCompletion) {
  policy::FlowControl c;
  c.chunk_bytes = 64 << 10;
  policy_.M().Configure(flow_, c);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1 << 20, true);
  w.send_flags |= kSendFence;
  ASSERT_TRUE(Submit(w, 9));
  Run();
  ASSERT_EQ(Posted().size(), 16u);
  EXPECT_EQ(rnic_.post_calls, 1u);
  for (size_t i = 0; i < 16; ++i) {
    const SendWr& p = Posted()[i];
    const uint64_t off = i * (64 << 10);
    EXPECT_EQ(p.remote_addr, w.remote_addr + off);
    EXPECT_EQ(p.sge[0].addr, w.sge[0].addr + off);
    EXPECT_EQ(p.total_length(), 64u << 10);
    EXPECT_EQ(bool(p.send_flags & kSendSignaled), i == 15) << i;
    EXPECT_EQ(bool(p.send_flags & kSendFence), i == 0) << i;
  }
  CompleteSignaled();
  ASSERT_EQ(owner_.done.size(), 1u);
  EXPECT_EQ(owner_.done[0].tag, 9u);
  EXPECT_EQ(owner_.done[0].len, 1u << 20);
  ASSERT_EQ(policy_.completions.size(), 1u);
  EXPECT_EQ(policy_.completions[0].bytes, 1u << 20);
  EXPECT_EQ(stage_.flow_account(flow_).pieces_posted, 16u);
  EXPECT_EQ(stage_.flow_account(flow_).wrs_split, 1u);
  EXPECT_EQ(stage_.tenant_account(7).wrs_split, 1u);
}

// Justitia's 5000-byte pieces over a QP the reliability layer carries in
// 4 KiB units (Rnic::PieceGranule): whole units, so no piece ends in a
// partial unit that takes a whole one of the layer's window.
TEST_F(StageTest, PiecesAreWholeGranulesOfTheRnic) {
  rnic_.piece_granule = 4096;
  policy::FlowControl c;
  c.chunk_bytes = 5000;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 10000, true), 1));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 4500, true), 2));
  Run();
  // 10000 = 4096 + 4096 + 1808; 4500 fits the policy's 5000: whole.
  ASSERT_EQ(Posted().size(), 4u);
  EXPECT_EQ(Posted()[0].total_length(), 4096u);
  EXPECT_EQ(Posted()[1].total_length(), 4096u);
  EXPECT_EQ(Posted()[2].total_length(), 1808u);
  EXPECT_EQ(Posted()[3].total_length(), 4500u);
  // Below a granule the policy's size stands.
  EXPECT_EQ(PieceBytes(1000, 4096), 1000u);
  EXPECT_EQ(PieceBytes(5000, 1), 5000u);
  EXPECT_EQ(PieceBytes(8192, 4096), 8192u);
}

TEST_F(StageTest, WriteWithImmIsSplitOnlyWhenTheReceiverReassembles) {
  policy::FlowControl c;
  c.chunk_bytes = 4096;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWriteWithImm, 10000, true), 1));
  Run();
  ASSERT_EQ(Posted().size(), 1u) << "held whole";
  EXPECT_EQ(owner_.receives.size(), 1u);
  EXPECT_EQ(owner_.receives[0].total, 10000u);
  CompleteSignaled();
  stage_.SetReceiverReassembles(flow_, true);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWriteWithImm, 10000, true), 2));
  Run();
  ASSERT_EQ(Posted().size(), 3u);
  // Only the last piece consumes a receive, described with the total.
  ASSERT_EQ(owner_.receives.size(), 2u);
  EXPECT_EQ(owner_.receives[1].total, 10000u);
  EXPECT_FALSE(owner_.receives[1].lands_in_buffer);
  CompleteSignaled();
  ASSERT_EQ(owner_.done.size(), 2u);
  EXPECT_EQ(owner_.done[1].len, 10000u);
}

TEST_F(StageTest, SplitSendDescribesEveryPieceToTheReceiverOnce) {
  stage_.SetReceiverReassembles(flow_, true);
  policy::FlowControl c;
  c.chunk_bytes = 4096;
  c.window_bytes = 8192;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kSendWithImm, 10000, true), 1));
  Run();
  ASSERT_EQ(Posted().size(), 2u) << "the window holds two pieces";
  ASSERT_EQ(owner_.receives.size(), 2u);
  EXPECT_TRUE(owner_.receives[0].first);
  EXPECT_EQ(owner_.receives[1].offset, 4096u);
  EXPECT_FALSE(owner_.receives[1].last);
  EXPECT_TRUE(Posted()[1].send_flags & kSendSignaled) << "forced: the window "
                                                          "must reopen";
  EXPECT_EQ(Posted()[1].opcode, WrOpcode::kSend);
  CompleteSignaled(2);
  Run();
  ASSERT_EQ(Posted().size(), 1u);
  EXPECT_EQ(Posted()[0].opcode, WrOpcode::kSendWithImm);
  EXPECT_EQ(Posted()[0].total_length(), 10000u - 8192u);
  ASSERT_EQ(owner_.receives.size(), 3u);
  EXPECT_TRUE(owner_.receives[2].last);
  EXPECT_TRUE(owner_.done.empty());
  CompleteSignaled();
  ASSERT_EQ(owner_.done.size(), 1u);
  EXPECT_EQ(owner_.done[0].len, 10000u);
}

TEST_F(StageTest, WindowBoundsWhatIsOutstandingAndForcesASignal) {
  policy::FlowControl c;
  c.window_wrs = 4;
  policy_.M().Configure(flow_, c);
  for (uint32_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 16, false), i));
  }
  Run();
  ASSERT_EQ(Posted().size(), 4u);
  EXPECT_TRUE(stage_.busy()) << "it awaits the completions it forced";
  EXPECT_EQ(stage_.flow_account(flow_).queued_wrs, 6u);
  // Every second piece is signaled (half the window), so the window
  // reopens in steps; never more than four on the RNIC.
  for (int round = 0; round < 20 && owner_.done.size() < 10; ++round) {
    CompleteSignaled();
    Run();
    EXPECT_LE(stage_.flow_account(flow_).outstanding_pieces, 4u);
    EXPECT_LE(Posted().size(), 4u);
  }
  EXPECT_EQ(owner_.done.size(), 10u);
  EXPECT_EQ(stage_.flow_account(flow_).outstanding_pieces, 0u);
  EXPECT_FALSE(stage_.busy());
  for (const auto& d : owner_.done) EXPECT_EQ(d.status, WcStatus::kSuccess);
}

TEST_F(StageTest, HeldFlowPostsNothingUntilResumedAndCountsHeldTime) {
  policy::FlowControl c;
  c.held = true;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 1));
  Run();
  EXPECT_TRUE(Posted().empty());
  now_ += 5000;
  c.held = false;
  policy_.M().Configure(flow_, c);
  Run();
  EXPECT_EQ(Posted().size(), 1u);
  EXPECT_EQ(stage_.flow_account(flow_).held_ns, 5000u);
  EXPECT_EQ(stage_.tenant_account(7).held_ns, 5000u);
}

TEST_F(StageTest, GatedFlowAsksForCreditOnceAndPaysDebts) {
  policy::FlowControl c;
  c.gated = true;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 3000, true), 1));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 3000, true), 2));
  Run();
  Run();
  EXPECT_TRUE(Posted().empty());
  EXPECT_EQ(policy_.credit_asks.size(), 1u);
  policy_.M().Grant(flow_, 1000, 10);  // less than a WR: it posts in debt
  Run();
  EXPECT_EQ(Posted().size(), 1u);
  EXPECT_EQ(policy_.M().credit_bytes(flow_), 0u);
  EXPECT_EQ(policy_.credit_asks.size(), 2u);
  policy_.M().Grant(flow_, 2000, 10);  // pays the debt, nothing left
  Run();
  EXPECT_EQ(Posted().size(), 1u);
  policy_.M().Grant(flow_, 1, 1);
  Run();
  EXPECT_EQ(Posted().size(), 2u);
}

// What a flow posted before it was gated owes no credit: a grant of one
// piece after the switch posts one piece (it used to pay the ungated
// posts back first, so a policy budgeting its grants leaked them).
TEST_F(StageTest, WorkPostedBeforeGatingLeavesNoCreditDebt) {
  for (uint32_t t = 1; t <= 3; ++t) ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), t));
  Run();
  ASSERT_EQ(Posted().size(), 3u);
  CompleteSignaled(3);
  policy::FlowControl c;
  c.gated = true;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 4));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 5));
  Run();
  EXPECT_TRUE(Posted().empty());
  policy_.M().Grant(flow_, 1u << 20, 1);
  Run();
  EXPECT_EQ(Posted().size(), 1u);
}

// A flow that asked for credit, was let go (no longer gated) and is gated
// again asks again when it runs out: the policy forgot the old request when
// it stopped gating the flow.
TEST_F(StageTest, AFlowGatedAgainAsksForCreditAgain) {
  policy::FlowControl gated;
  gated.gated = true;
  policy_.M().Configure(flow_, gated);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 1));
  Run();
  ASSERT_EQ(policy_.credit_asks.size(), 1u);
  policy_.M().Configure(flow_, policy::FlowControl{});
  Run();
  ASSERT_EQ(Posted().size(), 1u);  // ungated: it posts without credit
  CompleteSignaled(1);
  policy_.M().Configure(flow_, gated);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 2));
  Run();
  EXPECT_TRUE(Posted().empty());
  EXPECT_EQ(policy_.credit_asks.size(), 2u) << "the second gating's request";
}

TEST_F(StageTest, PiecesLeavingTheRnicAreReportedToThePolicy) {
  policy::FlowControl c;
  c.chunk_bytes = 1000;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 2500, true), 1));
  Run();
  ASSERT_EQ(Posted().size(), 3u);
  EXPECT_EQ(policy_.retired_pieces, 0u);
  CompleteSignaled(1);  // the last piece's completion retires all three
  EXPECT_EQ(policy_.retired_pieces, 3u);
  EXPECT_EQ(policy_.retired_bytes, 2500u);
}

TEST_F(StageTest, ReleaseTimesAndThePolicyTimerRunOnTheWheel) {
  policy_.M().ReleaseAt(flow_, now_ + 10000);
  policy_.M().WakeAt(now_ + 3000);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 1));
  Run();
  EXPECT_TRUE(Posted().empty());
  EXPECT_EQ(stage_.next_deadline(), now_ + 3000);
  now_ += 3000;
  Run();
  ASSERT_EQ(policy_.timers.size(), 1u);
  EXPECT_EQ(stage_.next_deadline(), now_ + 7000);
  EXPECT_TRUE(Posted().empty());
  now_ += 7000;
  Run();
  EXPECT_EQ(Posted().size(), 1u);
  EXPECT_EQ(stage_.next_deadline(), kNoExpiry);
}

TEST_F(StageTest, PacedBytesAreWhatWaitedForAReleaseTime) {
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 1));
  Run();
  ASSERT_EQ(Posted().size(), 1u);
  policy_.M().ReleaseAt(flow_, now_ + 1000);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 200, true), 2));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 300, true), 3));
  Run();
  EXPECT_EQ(Posted().size(), 1u) << "the pace holds both";
  now_ += 1000;
  Run();
  EXPECT_EQ(Posted().size(), 3u);
  // A release time already passed holds nothing: not paced.
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 400, true), 4));
  Run();
  EXPECT_EQ(Posted().size(), 4u);
  EXPECT_EQ(stage_.flow_account(flow_).bytes_paced, 500u);
  EXPECT_EQ(stage_.tenant_account(7).bytes_paced, 500u);
  EXPECT_EQ(stage_.flow_account(flow_).held_ns, 1000u);
  EXPECT_EQ(stage_.flow_account(flow_).wrs_split, 0u);
}

TEST_F(StageTest, BadWrBehindHeldWorkFailsAfterTheValidOnesComplete) {
  policy::FlowControl c;
  c.held = true;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, false), 1));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, true), 2));
  ASSERT_TRUE(stage_.SubmitMarker(flow_, 3, WcStatus::kLocProtErr, now_));
  Run();
  EXPECT_TRUE(owner_.markers.empty()) << "held work first";
  c.held = false;
  policy_.M().Configure(flow_, c);
  Run();
  ASSERT_EQ(Posted().size(), 2u);
  EXPECT_TRUE(owner_.markers.empty());
  CompleteSignaled();
  EXPECT_EQ(owner_.done.size(), 2u);
  Run();
  ASSERT_EQ(owner_.markers.size(), 1u);
  EXPECT_EQ(owner_.markers[0].tag, 3u);
  EXPECT_EQ(owner_.markers[0].status, WcStatus::kLocProtErr);
}

TEST_F(StageTest, MarkerBehindUnsignaledWorkPostsASentinel) {
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, false), 1));
  Run();
  ASSERT_TRUE(stage_.SubmitMarker(flow_, 2, WcStatus::kLocLenErr, now_));
  Run();
  ASSERT_EQ(Posted().size(), 2u);
  const SendWr& s = Posted()[1];
  EXPECT_EQ(s.opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(s.total_length(), 0u);
  EXPECT_EQ(s.rkey, 0u);
  EXPECT_TRUE(s.send_flags & kSendSignaled);
  EXPECT_TRUE(owner_.markers.empty());
  CompleteSignaled();
  Run();
  ASSERT_EQ(owner_.done.size(), 1u);
  EXPECT_EQ(owner_.done[0].status, WcStatus::kSuccess) << "the valid WR is not flushed";
  ASSERT_EQ(owner_.markers.size(), 1u);
}

TEST_F(StageTest, ErrorInAMiddlePieceIsReportedOnceAndLaterWrsFlush) {
  policy::FlowControl c;
  c.chunk_bytes = 1000;
  policy_.M().Configure(flow_, c);
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 4000, true), 1));
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 100, false), 2));
  Run();
  ASSERT_EQ(Posted().size(), 5u);
  rnic_.CompleteSend(qp_.qpn);  // piece 0 (completed visibly: a fake)
  rnic_.CompleteSend(qp_.qpn, WcStatus::kRemAccessErr);  // piece 1; flushes the rest
  Poll();
  ASSERT_EQ(owner_.done.size(), 2u);
  EXPECT_EQ(owner_.done[0].tag, 1u);
  EXPECT_EQ(owner_.done[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(owner_.done[1].tag, 2u);
  EXPECT_EQ(owner_.done[1].status, WcStatus::kWrFlushErr);
  stage_.EndFlowWork(flow_, policy::FlowEnd::kError, now_);
  EXPECT_EQ(owner_.done.size(), 2u) << "nothing twice";
  EXPECT_EQ(policy_.ends.back(), policy::FlowEnd::kError);
}

TEST_F(StageTest, EndFlowWorkFlushesQueuedWorkInOrder) {
  policy::FlowControl c;
  c.held = true;
  policy_.M().Configure(flow_, c);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(Submit(Wr(WrOpcode::kSend, 10, i == 2), i));
  ASSERT_TRUE(stage_.SubmitMarker(flow_, 3, WcStatus::kLocQpOpErr, now_));
  stage_.EndFlowWork(flow_, policy::FlowEnd::kError, now_);
  ASSERT_EQ(owner_.done.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(owner_.done[i].tag, i);
    EXPECT_EQ(owner_.done[i].status, WcStatus::kWrFlushErr);
  }
  EXPECT_EQ(policy_.completions.size(), 3u) << "the marker was never the policy's";
  EXPECT_EQ(stage_.queued_wrs(flow_), 0u);
  EXPECT_EQ(stage_.flow_account(flow_).sq_len(), 0u);
  // A reset drops silently.
  for (uint32_t i = 0; i < 2; ++i) ASSERT_TRUE(Submit(Wr(WrOpcode::kSend, 10, true), i));
  stage_.EndFlowWork(flow_, policy::FlowEnd::kReset, now_);
  EXPECT_EQ(owner_.done.size(), 4u);
  EXPECT_EQ(stage_.flow_account(flow_).sq_len(), 0u);
}

TEST_F(StageTest, FullFifoIsBackpressureAndARefusingRnicIsRetried) {
  rnic_.sq_capacity = 2;
  for (uint32_t i = 0; i < 32; ++i) ASSERT_TRUE(Submit(Wr(WrOpcode::kSend, 8, true), i));
  EXPECT_FALSE(Submit(Wr(WrOpcode::kSend, 8, true), 99)) << "FIFO full";
  Run();
  EXPECT_EQ(Posted().size(), 2u);
  // Every planned SEND was described once, in order; the refused ones are
  // not described again when they are retried.
  EXPECT_EQ(owner_.receives.size(), 32u);
  EXPECT_TRUE(stage_.busy()) << "stays ready: the RNIC may take it next turn";
  Run();
  EXPECT_EQ(owner_.receives.size(), 32u);
  CompleteSignaled(2);
  Run();
  EXPECT_EQ(Posted().size(), 2u);
  EXPECT_EQ(owner_.receives.size(), 32u);
  EXPECT_EQ(owner_.done.size(), 2u);
  EXPECT_TRUE(Submit(Wr(WrOpcode::kSend, 8, true), 99));
}

// A stage on an RNIC with cross-channel operations: one RTS QP of `depth`
// under control c; PostOne submits one WR and runs a pass.
struct CrossChannelStage {
  CrossChannelStage(uint32_t depth, const policy::FlowControl& c) {
    xc.lim.cross_channel = true;  // before the stage reads the RNIC's limits
    st.emplace(xc, pol, own);
    cq = *xc.CreateCq(64);
    QpInit init;
    init.send_cq = init.recv_cq = cq;
    init.caps.max_send_wr = depth;
    qp = *xc.CreateQp(init);
    QpAttr a;
    a.state = QpState::kRts;
    (void)xc.ModifyQp(qp, a, kQpState);
    FlowSpec s;
    s.qp = qp;
    s.send_cq = cq;
    s.rnic_depth = depth;
    flow = st->AddFlow(Stage::PrepareFlow(s), 0);
    pol.M().Configure(flow, c);
  }
  const auto& PostOne(const SendWr& wr) {
    policy::WrInfo info;
    info.bytes = static_cast<uint32_t>(wr.total_length());
    info.signaled = true;
    EXPECT_TRUE(st->Submit(flow, wr, 1, info, 0));
    st->Run(0);
    return xc.qps.at(qp.id).sends;
  }
  FakeRnic xc;
  ScriptPolicy pol;
  RecordingOwner own;
  std::optional<Stage> st;
  RnicCq cq;
  RnicQp qp;
  FlowId flow = 0;
};

TEST_F(StageTest, ZeroCountWaitsSitBetweenPiecesOnlyWhereTheRnicHasThem) {
  policy::FlowControl c;
  c.chunk_bytes = 1024;
  c.interrupt_waits = 2;
  policy_.M().Configure(flow_, c);
  EXPECT_EQ(policy_.M().control(flow_).interrupt_waits, 0) << "no WAIT here";
  ASSERT_TRUE(Submit(Wr(WrOpcode::kRdmaWrite, 3000, true), 1));
  Run();
  EXPECT_EQ(Posted().size(), 3u);

  CrossChannelStage xc(64, c);
  const auto& posted = xc.PostOne(Wr(WrOpcode::kRdmaWrite, 3000, true));
  ASSERT_EQ(posted.size(), 3u + 2u * 2u);
  EXPECT_EQ(posted[1].opcode, WrOpcode::kWait);
  EXPECT_EQ(posted[1].wait_cq.id, xc.cq.id);
  EXPECT_EQ(posted[2].opcode, WrOpcode::kWait);
  EXPECT_EQ(posted[3].opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(posted[6].opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(xc.xc.post_calls, 1u) << "pieces and WAITs in one post list";
}

// PeRF asks for sub_msg_size / zero_wait_unit WAITs per piece (16 for
// 64 KiB / 4 KiB); a QP only 4 deep cannot hold a piece with 16 WAITs, so
// the stage gives it as many as fit and the flow moves (it used to plan
// nothing, forever: two perf-xc bandwidth tenants of depth <= 4 got 0 Gbps).
TEST_F(StageTest, ZeroCountWaitsAreBoundedByTheQueueDepth) {
  policy::FlowControl c;
  c.chunk_bytes = 1024;
  c.interrupt_waits = 16;
  CrossChannelStage xc(4, c);
  const auto& posted = xc.PostOne(Wr(WrOpcode::kRdmaWrite, 3000, true));
  ASSERT_FALSE(posted.empty()) << "the flow never posted";
  EXPECT_EQ(posted[0].opcode, WrOpcode::kRdmaWrite);
  ASSERT_GE(posted.size(), 3u);
  EXPECT_EQ(posted[1].opcode, WrOpcode::kWait);  // depth 4: two WAITs
  EXPECT_EQ(posted[2].opcode, WrOpcode::kWait);
  if (posted.size() > 3) {
    EXPECT_EQ(posted[3].opcode, WrOpcode::kRdmaWrite);
  }
}

TEST_F(StageTest, FlowIdsAreUniqueAcrossTenantsAndReused) {
  FlowSpec s;
  s.tenant = 8;
  s.qp = qp_;
  s.rnic_depth = 4;
  const FlowId other = stage_.AddFlow(Stage::PrepareFlow(s), now_);
  EXPECT_NE(other, flow_);
  ASSERT_EQ(policy_.flows.size(), 2u);
  EXPECT_EQ(policy_.flows[1].tenant, 8u);
  EXPECT_EQ(stage_.tenant_account(8).flows, 1u);
  auto storage = stage_.RemoveFlow(other, now_);
  EXPECT_NE(storage, nullptr);
  EXPECT_EQ(policy_.ends.back(), policy::FlowEnd::kDestroyed);
  EXPECT_EQ(stage_.AddFlow(Stage::PrepareFlow(s), now_), other);
}

TEST_F(StageTest, ProbesGoOnTheStagesOwnQpAndReportTheirRoundTrip) {
  RnicCq own = *rnic_.CreateCq(16);
  QpInit init;
  init.send_cq = init.recv_cq = own;
  RnicQp pq = *rnic_.CreateQp(init);
  QpAttr a;
  a.state = QpState::kRts;
  (void)rnic_.ModifyQp(pq, a, kQpState);
  stage_.SetOwnCq(own);
  EXPECT_FALSE(policy_.M().SendProbe(3)) << "no path yet";
  stage_.AddProbePath(3, ProbePath{pq, 0x1000, 77});
  ASSERT_TRUE(policy_.M().SendProbe(3));
  EXPECT_FALSE(policy_.M().SendProbe(3)) << "one outstanding per destination";
  const SendWr& p = rnic_.qps.at(pq.id).sends.front();
  EXPECT_EQ(p.total_length(), 10u);
  EXPECT_EQ(p.rkey, 77u);
  EXPECT_TRUE(stage_.busy());
  now_ += 2500;
  rnic_.CompleteSend(pq.qpn);
  Run();
  ASSERT_EQ(policy_.probes.size(), 1u);
  EXPECT_EQ(policy_.probes[0].first, 3u);
  EXPECT_EQ(policy_.probes[0].second, 2500u);
  EXPECT_TRUE(policy_.M().SendProbe(3));
}

TEST(StageRnicPause, PausedFlowsWaitOnTheControlQueueAndResumeInOrder) {
  FakeRnic xc;
  xc.lim.cross_channel = true;
  ScriptPolicy pol;
  RecordingOwner own;
  Stage st(xc, pol, own);
  RnicCq cq = *xc.CreateCq(64);
  RnicCq pcc = *xc.CreateCq(64);
  auto make_qp = [&](RnicCq c) {
    QpInit init;
    init.send_cq = init.recv_cq = c;
    RnicQp qp = *xc.CreateQp(init);
    QpAttr a;
    a.state = QpState::kRts;
    (void)xc.ModifyQp(qp, a, kQpState);
    return qp;
  };
  RnicQp pcq = make_qp(pcc), enabler = make_qp(cq);
  EXPECT_FALSE(pol.M().rnic_pause());
  ASSERT_EQ(st.SetPreemptionControl({pcc, pcq, 4, enabler}), Status::kOk);
  EXPECT_TRUE(pol.M().rnic_pause());
  EXPECT_EQ(xc.qps.at(pcq.id).sends.size(), 4u) << "stocked";
  FlowId f[2];
  RnicQp q[2];
  for (int i = 0; i < 2; ++i) {
    q[i] = make_qp(cq);
    FlowSpec s;
    s.qp = q[i];
    s.send_cq = cq;
    s.rnic_depth = 16;
    f[i] = st.AddFlow(Stage::PrepareFlow(s), 0);
    policy::FlowControl c;
    c.held = true;
    c.pause_on_rnic = true;
    pol.M().Configure(f[i], c);
  }
  policy::WrInfo info;
  info.bytes = 8;
  info.signaled = true;
  SendWr w;
  w.num_sge = 1;
  w.sge[0].length = 8;
  w.send_flags = kSendSignaled;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(st.Submit(f[i], w, 1, info, 0));
  st.Run(0);
  for (int i = 0; i < 2; ++i) {
    auto& sends = xc.qps.at(q[i].id).sends;
    ASSERT_EQ(sends.size(), 2u) << "WAIT, then the work behind it";
    EXPECT_EQ(sends[0].opcode, WrOpcode::kWait);
    EXPECT_EQ(sends[0].wait_cq.id, pcc.id);
    EXPECT_EQ(sends[0].wait_index, uint64_t(i) + 1) << "tickets in pause order";
    EXPECT_EQ(sends[1].opcode, WrOpcode::kSend);
  }
  EXPECT_TRUE(xc.qps.at(enabler.id).sends.empty());
  // RESUME the first: one pcq WRITE enabled.
  pol.M().Configure(f[0], policy::FlowControl{});
  ASSERT_EQ(xc.qps.at(enabler.id).sends.size(), 1u);
  EXPECT_EQ(xc.qps.at(enabler.id).sends[0].opcode, WrOpcode::kEnable);
  EXPECT_EQ(xc.qps.at(enabler.id).sends[0].enable_qp.id, pcq.id);
  // RESUME the second: its ticket is the next one.
  pol.M().Configure(f[1], policy::FlowControl{});
  EXPECT_EQ(xc.qps.at(enabler.id).sends.size(), 2u);
}

}  // namespace
}  // namespace vrdma::sched
