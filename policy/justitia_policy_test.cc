// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Justitia (NSDI'22 §4-§5) against FakeMechanisms: classes and bypass
// (§4.2), R_min (§4.3.1), Pseudocode 1's AIMD (§4.3.3), the reference
// flow's sliding-window tail (§4.3.2), tokens and weighted round robin
// (§4.3.4), the shapers (§4.4) and receiver-side updates (§4.5).
#include "policy/justitia_policy.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "policy/tail_estimator.h"
#include "policy/testing/fake_mechanisms.h"

namespace vrdma::policy {
namespace {

using testing::FakeMechanisms;

constexpr double kLine = 100e9;
constexpr DestId kDest = 1;

CardProfile Card() {
  CardProfile c;
  c.line_rate_bps = kLine;
  c.max_msgs_per_s = 105e6;
  c.base_rtt_ns = 2000;
  return c;
}

TenantQos Qos(TenantClass c, uint32_t weight = 1) {
  TenantQos q;
  q.app_class = c;
  q.weight = weight;
  return q;
}

struct Harness {
  explicit Harness(const std::vector<std::string>& options = {}, uint32_t host = 0)
      : policy(Card(), host) {
    policy.Bind(fm);
    std::string err;
    EXPECT_TRUE(policy.Init(options, &err)) << err;
  }
  // A tenant with one flow towards dest.
  void Add(TenantId t, FlowId f, TenantClass c, uint32_t weight = 1, DestId dest = kDest,
           Nanos now = 0) {
    policy.OnTenantAdded(t, Qos(c, weight));
    AddFlow(t, f, dest, now);
  }
  void AddFlow(TenantId t, FlowId f, DestId dest = kDest, Nanos now = 0) {
    FlowInfo info;
    info.flow = f;
    info.tenant = t;
    info.dest = dest;
    info.rnic_depth = 64;
    policy.OnFlowAdded(now, info);
  }
  FakeMechanisms fm;
  JustitiaPolicy policy;
};

// A stage that always has more work: every granted flow asks again at once.
void Reask(Harness& h, Nanos now, size_t* seen) {
  while (*seen < h.fm.grants.size()) {
    const FlowId f = h.fm.grants[(*seen)++].first;
    h.policy.OnCreditNeeded(now, f);
  }
}

TEST(JustitiaPolicy, ClassesShapeAndLatencyBypasses) {
  Harness h;
  h.Add(1, 10, TenantClass::kBandwidth);
  h.Add(2, 11, TenantClass::kThroughput);
  // No latency tenant yet: bandwidth flows split at the large token.
  EXPECT_TRUE(h.fm.control(10).gated);
  EXPECT_EQ(h.fm.control(10).chunk_bytes, 1000000u);
  EXPECT_TRUE(h.fm.control(11).gated);
  EXPECT_EQ(h.fm.control(11).chunk_bytes, 0u) << "throughput: not split";
  h.Add(3, 12, TenantClass::kLatency);
  EXPECT_EQ(h.fm.controls.count(12), 0u) << "latency flows keep the default";
  EXPECT_EQ(h.fm.control(10).chunk_bytes, 5000u) << "the dictionary's 5 KB";
  // A latency flow never takes tokens.
  h.policy.OnCreditNeeded(0, 12);
  EXPECT_TRUE(h.fm.grants.empty());
  // Live re-classification: the bandwidth tenant becomes latency-sensitive.
  h.policy.OnTenantQosChanged(1, Qos(TenantClass::kLatency));
  EXPECT_EQ(h.fm.control(10), FlowControl{});
  h.policy.OnTenantQosChanged(3, Qos(TenantClass::kBandwidth));
  EXPECT_TRUE(h.fm.control(12).gated);
  EXPECT_EQ(h.fm.control(12).chunk_bytes, 5000u);
}

TEST(JustitiaPolicy, RMinCountsLatencyAsOneByDefault) {
  Harness h;
  h.Add(1, 1, TenantClass::kBandwidth, 1);
  h.Add(2, 2, TenantClass::kBandwidth, 2);
  h.Add(3, 3, TenantClass::kThroughput, 1);
  EXPECT_DOUBLE_EQ(h.policy.r_min_bps(), kLine) << "no latency tenant: MaxRate";
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), kLine);
  for (TenantId t = 4; t < 7; ++t) h.Add(t, t, TenantClass::kLatency);
  EXPECT_DOUBLE_EQ(h.policy.r_min_bps(), kLine * 4 / 5) << "(1+2+1)/(4+L=1)";

  Harness each({"l_as_one=false"});
  each.Add(1, 1, TenantClass::kBandwidth, 1);
  each.Add(2, 2, TenantClass::kBandwidth, 2);
  each.Add(3, 3, TenantClass::kThroughput, 1);
  for (TenantId t = 4; t < 7; ++t) each.Add(t, t, TenantClass::kLatency);
  EXPECT_DOUBLE_EQ(each.policy.r_min_bps(), kLine * 4 / 7) << "(1+2+1)/(4+3)";
}

// Drives RefPeriods: each tick, the probe comes back with rtt.
void Ticks(Harness& h, Nanos* now, int n, Nanos rtt) {
  for (int i = 0; i < n; ++i) {
    *now += 20000;
    h.policy.OnTimer(*now);
    h.policy.OnProbeCompleted(*now, kDest, rtt);
  }
}

TEST(JustitiaPolicy, AimdHalvesDownToRMinAndAddsTheStep) {
  Harness h({"l_as_one=false", "target_us=5", "ref_count=4"});
  h.Add(1, 1, TenantClass::kBandwidth);
  for (TenantId t = 2; t < 5; ++t) h.Add(t, t, TenantClass::kLatency);
  ASSERT_DOUBLE_EQ(h.policy.r_min_bps(), kLine / 4);
  Nanos now = 0;
  h.policy.OnTimer(now);  // the first probe; no sample yet: no change
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), kLine);
  h.policy.OnProbeCompleted(now, kDest, 9000);
  Ticks(h, &now, 1, 9000);
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), kLine / 2);
  Ticks(h, &now, 1, 9000);
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), kLine / 4);
  Ticks(h, &now, 3, 9000);
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), kLine / 4) << "floored at R_min";
  // Good samples push the bad ones out of the 4-sample window, then each
  // RefPeriod adds 8 Mbps (the artifact's 1 MB/s).
  Ticks(h, &now, 4, 3000);
  const double base = h.policy.safe_util_bps();
  EXPECT_DOUBLE_EQ(base, kLine / 4);
  Ticks(h, &now, 10, 3000);
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), base + 10 * 8e6);
  EXPECT_NEAR(h.policy.tau_ns(), 5000 * 8e9 / (base + 10 * 8e6), 1e-6);
  // The latency tenants leave: SafeUtil back to MaxRate, 1 MB tokens.
  for (FlowId f = 2; f < 5; ++f) h.policy.OnFlowEnded(now, f, FlowEnd::kDestroyed);
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), kLine);
  EXPECT_EQ(h.policy.token_bytes(), 1000000u);
}

TEST(JustitiaPolicy, AimdFloorIsRMinWithLAsOne) {
  Harness h({"target_us=5"});
  for (TenantId t = 1; t < 4; ++t) h.Add(t, t, TenantClass::kBandwidth);
  h.Add(9, 9, TenantClass::kLatency);
  ASSERT_DOUBLE_EQ(h.policy.r_min_bps(), kLine * 3 / 4);
  Nanos now = 0;
  h.policy.OnTimer(now);
  h.policy.OnProbeCompleted(now, kDest, 9000);
  Ticks(h, &now, 3, 9000);
  EXPECT_DOUBLE_EQ(h.policy.safe_util_bps(), kLine * 3 / 4) << "max(SafeUtil/2, R_min)";
}

TEST(JustitiaPolicy, TargetIsOperatorsThenKnobThenOracle) {
  Harness h;
  h.Add(1, 1, TenantClass::kBandwidth);
  h.Add(2, 2, TenantClass::kLatency);
  EXPECT_EQ(h.policy.target_99_ns(kDest), 3000u) << "card base RTT x 1.5 before samples";
  h.policy.OnProbeCompleted(0, kDest, 2400);
  h.policy.OnProbeCompleted(0, kDest, 9000);
  EXPECT_EQ(h.policy.target_99_ns(kDest), 3600u) << "lowest RTT seen x 1.5";
  TenantQos q = Qos(TenantClass::kLatency);
  q.latency_target_ns = 7000;
  h.policy.OnTenantQosChanged(2, q);
  h.Add(3, 3, TenantClass::kLatency);
  q.latency_target_ns = 6000;
  h.policy.OnTenantQosChanged(3, q);
  EXPECT_EQ(h.policy.target_99_ns(kDest), 6000u) << "the smallest operator target";
  Harness k({"target_us=4"});
  k.Add(1, 1, TenantClass::kLatency);
  EXPECT_EQ(k.policy.target_99_ns(kDest), 4000u);
}

TEST(TailEstimator, SlidingWindowForgetsOldSamples) {
  TailEstimator e;
  e.Reset(100);
  for (int i = 0; i < 100; ++i) e.Add(1000);
  EXPECT_NEAR(e.Quantile(0.99), 1000, 1000 * 0.04);
  e.Add(50000);
  e.Add(50000);
  EXPECT_NEAR(e.Quantile(0.99), 50000, 50000 * 0.04) << "2 of 100 above p99's rank";
  for (int i = 0; i < 99; ++i) e.Add(1000);
  EXPECT_NEAR(e.Quantile(0.99), 1000, 1000 * 0.04) << "one outlier is left, the window is 100";
  e.Add(1000);
  EXPECT_NEAR(e.Quantile(1.0), 1000, 1000 * 0.04) << "both outliers left";
  EXPECT_EQ(e.count(), 100u);
}

TEST(TailEstimator, MatchesSortedPercentileWithinBinResolution) {
  TailEstimator e;
  e.Reset(10000);
  std::mt19937 rng(7);
  std::lognormal_distribution<double> d(8.0, 0.6);
  std::vector<uint32_t> all;
  for (int i = 0; i < 25000; ++i) {
    const uint32_t v = static_cast<uint32_t>(d(rng));
    all.push_back(v);
    e.Add(v);
  }
  std::vector<uint32_t> window(all.end() - 10000, all.end());
  std::sort(window.begin(), window.end());
  const double exact = window[9899];  // rank ceil(0.99 * 10000) = 9900
  EXPECT_NEAR(e.Quantile(0.99), exact, exact * 0.035);
  EXPECT_EQ(TailEstimator::Representative(TailEstimator::Bin(17)), 17u) << "exact below 32";
}

TEST(JustitiaPolicy, EstimatedTailUsesTheLastRefCountProbes) {
  Harness h({"ref_count=200"});
  h.Add(1, 1, TenantClass::kLatency);
  for (int i = 0; i < 10; ++i) h.policy.OnProbeCompleted(0, kDest, 40000);
  for (int i = 0; i < 190; ++i) h.policy.OnProbeCompleted(0, kDest, 2000);
  EXPECT_NEAR(h.policy.estimated_99_ns(kDest), 40000, 40000 * 0.04);
  for (int i = 0; i < 10; ++i) h.policy.OnProbeCompleted(0, kDest, 2000);
  EXPECT_NEAR(h.policy.estimated_99_ns(kDest), 2000, 2000 * 0.04);
}

TEST(JustitiaPolicy, TokensEveryTauInWeightedRoundRobin) {
  Harness h;
  h.Add(1, 1, TenantClass::kBandwidth, 1);
  h.Add(2, 2, TenantClass::kBandwidth, 2);
  EXPECT_DOUBLE_EQ(h.policy.tau_ns(), 80000) << "1 MB at 100 Gbps";
  EXPECT_EQ(h.fm.wake_at, kNever) << "nobody waits: no timer";
  size_t seen = 0;
  Nanos now = 0;
  h.policy.OnCreditNeeded(now, 1);
  h.policy.OnCreditNeeded(now, 2);
  Reask(h, now, &seen);
  for (int i = 0; i < 300; ++i) {
    ASSERT_NE(h.fm.wake_at, kNever);
    EXPECT_EQ(h.fm.wake_at - now, 80000u) << i;
    now = h.fm.wake_at;
    h.policy.OnTimer(now);
    Reask(h, now, &seen);
  }
  const double a = h.policy.tokens_received(1);
  const double b = h.policy.tokens_received(2);
  EXPECT_EQ(a + b, 301);
  EXPECT_NEAR(b / a, 2.0, 0.03);
  EXPECT_EQ(h.fm.credit[1].bytes, 1000000u * static_cast<uint64_t>(a));
  EXPECT_EQ(h.policy.tokens_generated(), 301u);
}

TEST(JustitiaPolicy, IdleBucketFillsToBurstAndNeedsNoTimer) {
  Harness h;
  h.Add(1, 1, TenantClass::kBandwidth);
  h.policy.OnCreditNeeded(0, 1);  // the bucket's first token
  EXPECT_EQ(h.fm.grants.size(), 1u);
  EXPECT_EQ(h.fm.wake_at, kNever);
  // A long idle time accrues at most burst_tokens (5).
  h.policy.OnCreditNeeded(10'000'000, 1);
  size_t seen = 1;
  Reask(h, 10'000'000, &seen);
  EXPECT_EQ(h.fm.grants.size(), 6u);
  EXPECT_EQ(h.fm.wake_at, 10'000'000u + 80000u);
  // Once the flow stops asking, a timer fires once and arms nothing.
  h.policy.OnFlowEnded(10'000'000, 1, FlowEnd::kReset);
  h.fm.wake_at = kNever;
  h.policy.OnTimer(10'080'000);
  EXPECT_EQ(h.fm.wake_at, kNever);
  EXPECT_EQ(h.fm.grants.size(), 6u);
}

TEST(JustitiaPolicy, MultiResourceTokenGrantsOpsToThroughput) {
  Harness h;
  h.Add(1, 1, TenantClass::kThroughput);
  // 105 Mmps x (1 MB at 100 Gbps = 80 us) = 8400 operations.
  EXPECT_EQ(h.policy.token_ops(), 8400u);
  h.policy.OnCreditNeeded(0, 1);
  EXPECT_EQ(h.fm.credit[1].pieces, 8400u);
  EXPECT_EQ(h.fm.credit[1].bytes, 1000000u);
  h.Add(2, 2, TenantClass::kLatency);
  EXPECT_EQ(h.policy.token_ops(), 42u) << "5 KB at 100 Gbps = 0.4 us";
  Harness fixed({"token_ops=1100"});
  fixed.Add(1, 1, TenantClass::kThroughput);
  fixed.policy.OnCreditNeeded(0, 1);
  EXPECT_EQ(fixed.fm.credit[1].pieces, 1100u);
}

TEST(JustitiaPolicy, ProbesOnlyWhileALatencyTenantSendsThere) {
  Harness h;
  h.Add(1, 1, TenantClass::kBandwidth, 1, /*dest=*/1);
  h.Add(2, 2, TenantClass::kLatency, 1, /*dest=*/2);
  EXPECT_EQ(h.fm.wake_at, 0u) << "the reference flow starts at once";
  Nanos now = h.fm.wake_at;
  for (int i = 0; i < 5; ++i) {
    h.policy.OnTimer(now);
    EXPECT_EQ(h.fm.wake_at, (i + 1) * 20000u) << "every RefPeriod";
    now = h.fm.wake_at;
  }
  EXPECT_EQ(h.fm.probes, std::vector<DestId>(5, 2u));
  EXPECT_TRUE(h.policy.reference_flow(2));
  EXPECT_FALSE(h.policy.reference_flow(1));
  h.policy.OnFlowEnded(now, 2, FlowEnd::kDestroyed);
  EXPECT_FALSE(h.policy.reference_flow(2));
  h.fm.wake_at = kNever;
  h.policy.OnTimer(now);
  EXPECT_EQ(h.fm.probes.size(), 5u);
  EXPECT_EQ(h.fm.wake_at, kNever) << "no reference flow, nobody waiting: no timer";
}

// Delivers every peer message a harness sent since *seen to its host.
void Deliver(Harness& from, uint32_t from_host, std::map<DestId, Harness*> hosts,
             size_t* seen, size_t upto = SIZE_MAX) {
  while (*seen < std::min(upto, from.fm.peer.size())) {
    const auto& [dest, m] = from.fm.peer[(*seen)++];
    if (hosts.count(dest)) hosts[dest]->policy.OnPeerMessage(0, from_host, m);
  }
}

TEST(JustitiaPolicy, ReceiverUpdatesChangeRMinAndStartReferenceFlows) {
  // Hosts 0 and 2 send to host 1.
  Harness s0({}, 0), rx({}, 1), s2({}, 2);
  size_t seen0 = 0, seen_rx = 0, seen2 = 0;
  std::map<DestId, Harness*> net = {{0, &s0}, {1, &rx}, {2, &s2}};
  s0.Add(1, 1, TenantClass::kBandwidth, 1, /*dest=*/1);
  ASSERT_EQ(s0.fm.peer.size(), 1u);
  const PeerMessage& hello = s0.fm.peer[0].second;
  EXPECT_EQ(hello.type, PeerMessage::kSenderHello);
  EXPECT_EQ(hello.origin, 0u);
  EXPECT_EQ(hello.weights[0], 1u);
  Deliver(s0, 0, net, &seen0);
  Deliver(rx, 1, net, &seen_rx);  // the update back to host 0
  EXPECT_DOUBLE_EQ(s0.policy.r_min_bps(), kLine);
  // Host 2: one bandwidth and one latency tenant towards host 1.
  s2.Add(5, 5, TenantClass::kBandwidth, 1, 1);
  s2.Add(6, 6, TenantClass::kLatency, 1, 1);
  Deliver(s2, 2, net, &seen2);
  Deliver(rx, 1, net, &seen_rx);
  ASSERT_GE(rx.fm.peer.size(), 3u);
  const PeerMessage& update = rx.fm.peer.back().second;
  EXPECT_EQ(update.type, PeerMessage::kReceiverUpdate);
  EXPECT_EQ(update.weights[0], 2u);
  EXPECT_EQ(update.weights[2], 1u);
  EXPECT_EQ(update.senders, 2u);
  // Host 0 now shares host 1 with another bandwidth tenant and a latency
  // tenant: R_min = 1 / (1 + 1 + L=1), and it probes host 1 itself.
  EXPECT_NEAR(s0.policy.r_min_bps(), kLine / 3, 1);
  EXPECT_EQ(s0.policy.latency_weight(), 1u);
  EXPECT_TRUE(s0.policy.reference_flow(1));
  EXPECT_EQ(s0.policy.token_bytes(), 5000u);
  EXPECT_DOUBLE_EQ(s2.policy.r_min_bps(), kLine / 3);
  // Host 2's latency tenant leaves: host 0 learns it and stops probing.
  s2.policy.OnFlowEnded(0, 6, FlowEnd::kDestroyed);
  Deliver(s2, 2, net, &seen2);
  Deliver(rx, 1, net, &seen_rx);
  EXPECT_FALSE(s0.policy.reference_flow(1));
  EXPECT_DOUBLE_EQ(s0.policy.r_min_bps(), kLine / 2) << "still two hungry senders";
  EXPECT_DOUBLE_EQ(s0.policy.safe_util_bps(), kLine) << "L = 0: MaxRate";
}

TEST(JustitiaPolicy, StaleSequenceNumbersAreIgnored) {
  Harness s0({}, 0), rx({}, 1);
  s0.Add(1, 1, TenantClass::kBandwidth, 1, 1);
  PeerMessage update;
  update.type = PeerMessage::kReceiverUpdate;
  update.origin = 1;
  update.weights[0] = 1;
  update.weights[1] = 3;  // three throughput weights elsewhere
  update.senders = 2;
  update.seq = 10;
  s0.policy.OnPeerMessage(0, 1, update);
  EXPECT_DOUBLE_EQ(s0.policy.r_min_bps(), kLine / 4);  // no latency: no cap
  PeerMessage old = update;
  old.seq = 9;
  old.weights[1] = 0;
  old.weights[2] = 4;
  s0.policy.OnPeerMessage(0, 1, old);
  EXPECT_EQ(s0.policy.latency_weight(), 0u) << "stale update ignored";
  // A receiver ignores a stale hello (no broadcast).
  PeerMessage hello;
  hello.type = PeerMessage::kSenderHello;
  hello.origin = 0;
  hello.weights[0] = 1;
  hello.seq = 5;
  rx.policy.OnPeerMessage(0, 0, hello);
  const size_t sent = rx.fm.peer.size();
  EXPECT_EQ(sent, 1u);
  hello.seq = 4;
  rx.policy.OnPeerMessage(0, 0, hello);
  EXPECT_EQ(rx.fm.peer.size(), sent);
}

TEST(JustitiaPolicy, EndedFlowLeavesTheRoundRobin) {
  Harness h;
  h.Add(1, 1, TenantClass::kBandwidth);
  h.AddFlow(1, 2);
  h.Add(3, 3, TenantClass::kBandwidth);
  h.policy.OnCreditNeeded(0, 1);  // the bucket's token
  h.policy.OnCreditNeeded(0, 2);
  h.policy.OnCreditNeeded(0, 3);
  h.policy.OnCreditNeeded(0, 1);
  h.policy.OnFlowEnded(0, 2, FlowEnd::kDestroyed);
  h.policy.OnFlowEnded(0, 3, FlowEnd::kError);
  Nanos now = 0;
  for (int i = 0; i < 3 && h.fm.wake_at != kNever; ++i) {
    now = h.fm.wake_at;
    h.fm.wake_at = kNever;
    h.policy.OnTimer(now);
  }
  ASSERT_EQ(h.fm.grants.size(), 2u);
  EXPECT_EQ(h.fm.grants[1].first, 1u) << "only flow 1 still waits";
  EXPECT_EQ(h.fm.wake_at, kNever);
}

struct MapSink : ReportSink {
  void Number(std::string_view k, double v) override { numbers[std::string(k)] = v; }
  void Text(std::string_view k, std::string_view v) override {
    texts[std::string(k)] = std::string(v);
  }
  void EffectiveQos(const TenantQos& q, uint32_t a) override {
    effective = q;
    applied = a;
  }
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> texts;
  TenantQos effective;
  uint32_t applied = 0;
};

TEST(JustitiaPolicy, ReportsPolicyAndTenantFigures) {
  Harness h;
  h.Add(1, 1, TenantClass::kThroughput, 3);
  h.Add(2, 2, TenantClass::kLatency);
  h.policy.OnCreditNeeded(0, 1);
  MapSink s;
  h.policy.Report(s);
  EXPECT_DOUBLE_EQ(s.numbers["safe_util_gbps"], 100);
  EXPECT_DOUBLE_EQ(s.numbers["r_min_gbps"], 75);
  EXPECT_DOUBLE_EQ(s.numbers["token_bytes"], 5000);
  EXPECT_DOUBLE_EQ(s.numbers["tokens_generated"], 1);
  EXPECT_TRUE(s.numbers.count("estimated_99_us"));
  EXPECT_DOUBLE_EQ(s.numbers["target_99_us"], 3);
  EXPECT_NE(s.texts["knobs"].find("ref_period_us=20"), std::string::npos);
  MapSink t;
  h.policy.ReportTenant(1, t);
  EXPECT_EQ(t.texts["class"], "throughput");
  EXPECT_DOUBLE_EQ(t.numbers["weight"], 3);
  EXPECT_DOUBLE_EQ(t.numbers["tokens_received"], 1);
  EXPECT_EQ(t.applied, uint32_t{kQosClass | kQosWeight}) << "no caps, no target";
  EXPECT_EQ(t.effective.weight, 3u);
  EXPECT_EQ(t.effective.app_class, TenantClass::kThroughput);
}

TEST(JustitiaPolicy, EffectiveTargetOfALatencyTenantIsTheSmallestAsked) {
  Harness h;
  h.Add(1, 1, TenantClass::kLatency);
  h.Add(2, 2, TenantClass::kLatency);
  TenantQos q = Qos(TenantClass::kLatency);
  q.latency_target_ns = 9000;
  q.max_rate_bps = 1'000'000'000;
  h.policy.OnTenantQosChanged(1, q);
  q.latency_target_ns = 5000;
  h.policy.OnTenantQosChanged(2, q);
  MapSink s;
  h.policy.ReportTenant(1, s);
  EXPECT_EQ(s.applied, uint32_t{kQosClass | kQosWeight | kQosLatencyTarget});
  EXPECT_EQ(s.effective.latency_target_ns, 5000u) << "asked 9000";
}

TEST(JustitiaPolicy, KnobsAreCheckedAtCreation) {
  std::string err;
  EXPECT_EQ(MakeJustitiaPolicy(Card(), {"nope=1"}, 0, &err), nullptr);
  EXPECT_NE(err.find("nope"), std::string::npos);
  EXPECT_EQ(MakeJustitiaPolicy(Card(), {"ref_period_us=0"}, 0, &err), nullptr);
  EXPECT_EQ(MakeJustitiaPolicy(Card(), {"l_as_one=maybe"}, 0, &err), nullptr);
  auto p = MakeJustitiaPolicy(
      Card(), {"ref_period_us=50", "ref_count=1000", "target_us=3.5", "token_bytes_latency=8192",
               "token_bytes=1048576", "step_mbps=80", "l_as_one=false", "burst_tokens=2"},
      0, &err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(p->name(), "justitia");
}

}  // namespace
}  // namespace vrdma::policy
