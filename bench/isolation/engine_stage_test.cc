// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's own scheduler stage on the model (through vrdma::Rnic)
// reproduces the same anomalies as the bench's direct path, within a small
// tolerance (its host turnaround is the polling quantum).
#include "bench/isolation/engine_stage_run.h"

#include "bench/isolation/bench_run.h"
#include "bench/isolation/scenarios.h"
#include "gtest/gtest.h"

namespace vrdma::bench {
namespace {

constexpr double kQuantumNs = 100;

TEST(EngineStage, LatencyAnomalyMatchesDirectPath) {
  ScenarioSpec both = LatencyVsBandwidth(1, model::Op::kWrite, "cx6-100", 0.25);
  ScenarioSpec alone = both;
  alone.tenants.resize(1);
  auto e_alone = RunScenarioEngineStage(alone, PassThrough(), kQuantumNs, nullptr);
  auto e_both = RunScenarioEngineStage(both, PassThrough(), kQuantumNs, nullptr);
  auto d_alone = RunScenario(alone, PassThrough(), nullptr);
  auto d_both = RunScenario(both, PassThrough(), nullptr);
  ASSERT_EQ(e_both.size(), 2u);
  ASSERT_GT(e_both[0].messages, 100u);
  EXPECT_GE(e_both[0].p99_us / e_alone[0].p99_us, 3.0);
  EXPECT_NEAR(e_both[0].p99_us, d_both[0].p99_us, 0.15 * d_both[0].p99_us);
  EXPECT_NEAR(e_alone[0].p99_us, d_alone[0].p99_us, 0.15 * d_alone[0].p99_us);
  EXPECT_NEAR(e_both[1].gbps, d_both[1].gbps, 0.03 * d_both[1].gbps);
}

TEST(EngineStage, MessageRateAnomalyMatchesDirectPath) {
  ScenarioSpec both = MessageVsBandwidth(1, model::Op::kWrite, "cx6-100", 0.1);
  ScenarioSpec alone = both;
  alone.tenants.resize(1);
  auto e_alone = RunScenarioEngineStage(alone, PassThrough(), kQuantumNs, nullptr);
  auto e_both = RunScenarioEngineStage(both, PassThrough(), kQuantumNs, nullptr);
  auto d_both = RunScenario(both, PassThrough(), nullptr);
  EXPECT_NEAR(e_alone[0].mmps, 13.0, 1.0);
  EXPECT_GE(e_alone[0].mmps / e_both[0].mmps, 2.5);
  EXPECT_NEAR(e_both[0].mmps, d_both[0].mmps, 0.15 * d_both[0].mmps);
}

TEST(EngineStage, RefusesSeveralSourceHosts) {
  EXPECT_TRUE(RunScenarioEngineStage(LatencyVsInboundRead(0.01), PassThrough(), kQuantumNs,
                                     nullptr)
                  .empty());
}

}  // namespace
}  // namespace vrdma::bench
