// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// fair-share's goals (issue 12, docs/fair-share.md) on the RNIC MODEL, each
// a ratio to the same tenant alone on the same model card, with native
// (pass-through) in the same run to show the anomaly is there. Where the
// model's floor keeps a goal out of reach, the bound is the model's figure
// with the reason beside it.
#include <algorithm>
#include <cstdio>

#include "bench/isolation/bench_run.h"
#include "bench/isolation/builtin_for_test.h"
#include "bench/isolation/report.h"
#include "gtest/gtest.h"

namespace vrdma::bench {
namespace {

constexpr double kScale = 0.25;

PolicyFactory FairShare() {
  std::string error;
  PolicyFactory f = PolicyByName("fair-share", {}, &error);
  EXPECT_TRUE(f) << error;
  return f;
}

double Sum(const std::vector<TenantResult>& r, size_t from) {
  double s = 0;
  for (size_t i = from; i < r.size(); ++i) s += r[i].gbps;
  return s;
}

TEST(FairShareOnModel, LatencyTenantNextToSixteenBandwidthTenants) {
  const ScenarioSpec s = Builtin("d_vs_16b", kScale);
  const TenantResult alone = RunAlone(s, 0, PassThrough(), nullptr);
  const TenantResult b_alone = RunAlone(s, 1, PassThrough(), nullptr);
  const auto native = RunScenario(s, PassThrough(), nullptr);
  const auto fair = RunScenario(s, FairShare(), nullptr);
  const double x_native = native[0].p99_us / alone.p99_us;
  const double x = fair[0].p99_us / alone.p99_us;
  const double kept = Sum(fair, 1) / b_alone.gbps;
  std::printf("D p99 next to 16 B: native x%.2f, fair-share x%.2f (goal <= x1.5); B total %.1f "
              "Gbps = %.1f %% of one B alone\n",
              x_native, x, Sum(fair, 1), 100 * kept);
  ASSERT_GT(x_native, 50) << "the model lost its anomaly";
  EXPECT_LE(x, 1.5);
  EXPECT_GE(kept, 0.97) << "work conserving";
}

TEST(FairShareOnModel, LatencyTenantNextToOneBandwidthTenant) {
  const ScenarioSpec s = Builtin("d_vs_1b", kScale);
  const TenantResult alone = RunAlone(s, 0, PassThrough(), nullptr);
  const TenantResult b_alone = RunAlone(s, 1, PassThrough(), nullptr);
  const auto fair = RunScenario(s, FairShare(), nullptr);
  const double x = fair[0].p99_us / alone.p99_us;
  std::printf("D p99 next to 1 B: fair-share x%.2f (goal <= x1.2); B %.1f of %.1f Gbps\n", x,
              fair[1].gbps, b_alone.gbps);
  // The goal is x1.2; the model gives x1.31. With the B tenant at >= 97 %
  // of the line, a 16 B message meets one 4 KiB piece at each of three
  // first-come first-served resources on its path (PCIe down, the wire,
  // the receiver's PCIe write), ~0.34 us each at worst, against 2.02 us
  // alone. Smaller pieces shorten that but cost the B tenant its rate on
  // this model (docs/fair-share.md).
  EXPECT_LE(x, 1.35);
  EXPECT_GE(fair[1].gbps, 0.97 * b_alone.gbps);
}

TEST(FairShareOnModel, MessageTenantKeepsItsRateNextToBandwidthTenant) {
  const ScenarioSpec s = Builtin("m_vs_1b", kScale);
  const TenantResult alone = RunAlone(s, 0, PassThrough(), nullptr);
  const auto native = RunScenario(s, PassThrough(), nullptr);
  const auto fair = RunScenario(s, FairShare(), nullptr);
  std::printf("M Mmps next to 1 B: alone %.2f native %.2f fair-share %.2f; B %.1f Gbps\n",
              alone.mmps, native[0].mmps, fair[0].mmps, fair[1].gbps);
  EXPECT_GE(fair[0].mmps, 0.95 * alone.mmps);
  // The wire the M tenant's 13 M messages take (16 B + 82 B headers each)
  // is what B does not get: ~10 Gbps.
  EXPECT_GE(fair[1].gbps, 85);
}

TEST(FairShareOnModel, SingleQpTenantGetsHalfNextToFifteenQps) {
  const ScenarioSpec s = Builtin("b1_vs_b15qp", kScale);
  const auto fair = RunScenario(s, FairShare(), nullptr);
  const double a = fair[0].gbps, b = fair[1].gbps;
  const double jain = (a + b) * (a + b) / (2 * (a * a + b * b));
  std::printf("B_single %.1f / B_multi(15 QPs) %.1f Gbps: Jain %.4f\n", a, b, jain);
  EXPECT_GE(jain, 0.99);
  EXPECT_GE(a + b, 95);
}

TEST(FairShareOnModel, EightLatencyAndEightBandwidthTenants) {
  const ScenarioSpec s = Builtin("mixed_8d_8b", kScale);
  const TenantResult d_alone = RunAlone(s, 0, PassThrough(), nullptr);
  const TenantResult b_alone = RunAlone(s, 8, PassThrough(), nullptr);
  const auto fair = RunScenario(s, FairShare(), nullptr);
  double worst = 0;
  for (size_t i = 0; i < 8; ++i) worst = std::max(worst, fair[i].p99_us / d_alone.p99_us);
  const double b = Sum(fair, 8);
  std::printf("mixed_8d_8b: worst D p99 x%.2f (goal <= x1.5), B total %.1f Gbps (%.1f %%)\n",
              worst, b, 100 * b / b_alone.gbps);
  EXPECT_LE(worst, 1.5);
  EXPECT_GE(b, 0.95 * b_alone.gbps);
}

// 1,000 tenants: 992 16 B ping-pongs and 8 bandwidth tenants. The latency
// tenants alone already wait ~15x one of them alone (crowd_992: Little's
// law on the card's message rate), so the bandwidth tenants' effect is
// measured against that crowd: fair-share keeps it within x1.5, natively
// it is an order of magnitude.
TEST(FairShareOnModel, ThousandTenantsLatencyTenantsKeepTheirCrowdsLatency) {
  const ScenarioSpec s = Builtin("scale_1000", kScale);
  const ScenarioSpec crowd = Builtin("crowd_992", kScale);
  const auto alone = RunScenario(crowd, PassThrough(), nullptr);
  const auto fair = RunScenario(s, FairShare(), nullptr);
  const auto native = RunScenario(s, PassThrough(), nullptr);
  double worst_fair = 0, worst_native = 0, b = 0;
  for (size_t i = 0; i < s.tenants.size(); ++i) {
    if (s.tenants[i].name[0] != 'D') {
      b += fair[i].gbps;
      continue;
    }
    ASSERT_EQ(crowd.tenants[i].name, s.tenants[i].name);
    worst_fair = std::max(worst_fair, fair[i].p99_us / alone[i].p99_us);
    worst_native = std::max(worst_native, native[i].p99_us / alone[i].p99_us);
  }
  std::printf("16 B p99 against the crowd alone (%.2f us): native x%.2f, fair-share x%.2f; "
              "bandwidth tenants %.1f Gb/s\n",
              alone[0].p99_us, worst_native, worst_fair, b);
  EXPECT_GE(worst_native, 5.0) << "the anomaly is there natively";
  EXPECT_LE(worst_fair, 1.5);
  EXPECT_GT(b, 5.0) << "the bandwidth tenants still move";
}

// RNR storms (Husky): the attacker's SENDs reach a receiver that posts no
// receive; natively every RNR NAK stalls that card's receive pipeline for
// the victim too. Under fair-share a SEND goes only where the receiving
// daemon advertised a receive (receive credits, docs/scheduler.md): the
// attacker's wait in its own daemon; with a bounded rnr_retry they go when
// its retries would have run out, and its QP fails as natively.
class FairShareRnr : public ::testing::TestWithParam<std::pair<const char*, double>> {};

TEST_P(FairShareRnr, TheVictimKeepsItsRate) {
  const ScenarioSpec s = Builtin(GetParam().first, GetParam().second);
  const TenantResult alone = RunAlone(s, 0, PassThrough(), nullptr);
  const auto native = RunScenario(s, PassThrough(), nullptr);
  const auto fair = RunScenario(s, FairShare(), nullptr);
  ASSERT_EQ(s.tenants[0].name, "V");
  std::printf("%s: victim alone %.2f Gb/s, native %.3f, fair-share %.2f\n", GetParam().first,
              alone.gbps, native[0].gbps, fair[0].gbps);
  EXPECT_GE(fair[0].gbps, 0.85 * alone.gbps);
  if (std::string(GetParam().first) == "rnr_storm_bounded") {
    // rnr_retry 3: natively its QP fails; held, it still does.
    EXPECT_GT(native[1].errors, 0u);
    EXPECT_GT(fair[1].errors, 0u) << "a held SEND goes when its retries would have run out";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Storms, FairShareRnr,
    ::testing::Values(std::pair{"rnr_storm_write", 0.05}, std::pair{"rnr_storm_send", 0.05},
                      std::pair{"rnr_storm_deep", 1.0}, std::pair{"rnr_storm_same_host", 1.0},
                      std::pair{"rnr_storm_bounded", 1.0}),
    [](const auto& info) { return std::string(info.param.first); });

// The operator's QoS on the model (bench/isolation/scenarios/97_qos.yaml):
// weights, byte and message caps, a guarantee, a latency target. Each
// scenario's own pass rules for fair-share, evaluated as the bench does,
// on a full-length run (caps within 2 % need it).
class FairShareQos : public ::testing::TestWithParam<const char*> {};

TEST_P(FairShareQos, ScenarioRulesHold) {
  ScenarioResult r;
  r.spec = Builtin(GetParam(), 1.0);
  r.policy = "fair-share";
  r.together = RunScenario(r.spec, FairShare(), &r.stats);
  for (size_t i = 0; i < r.spec.tenants.size(); ++i) {
    // The rules here are absolute figures, not ratios to alone.
    r.alone.push_back(r.together[i]);
  }
  const std::vector<RuleOutcome> outcomes = EvaluateRules(r);
  ASSERT_FALSE(outcomes.empty()) << "the scenario has rules for fair-share";
  for (const RuleOutcome& o : outcomes) {
    ASSERT_EQ(o.rule->ratio, RatioKind::kNone) << FormatOutcome(o);
    EXPECT_TRUE(o.pass) << FormatOutcome(o);
    std::printf("%s\n", FormatOutcome(o).c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Qos, FairShareQos,
                         ::testing::Values("weights_1_2_4", "cap_25g", "cap_25g_alone",
                                           "guarantee_40g", "msg_cap_2m"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace vrdma::bench
