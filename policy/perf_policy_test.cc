// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// PeRF's decisions (classifier, selective isolation, LMSE, MQSE) against
// fake mechanisms: which controls each flow gets and when they change.
#include "policy/perf_policy.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "policy/testing/fake_mechanisms.h"

namespace vrdma::policy {
namespace {

constexpr Nanos kMs = 1'000'000;

class PerfPolicyTest : public ::testing::TestWithParam<PerfPreemption> {
 protected:
  void SetUp() override { Make({}); }

  void Make(const std::vector<std::string>& options) {
    std::string error;
    policy_ = MakePerfPolicy(card_, options, GetParam(), &error);
    ASSERT_NE(policy_, nullptr) << error;
    mech_ = testing::FakeMechanisms{};
    mech_.has_cross_channel = mech_.has_rnic_pause = xc();
    policy_->Bind(mech_);
  }
  bool xc() const { return GetParam() == PerfPreemption::kCrossChannel; }

  void AddFlow(TenantId t, FlowId f) {
    if (tenants_added_.insert(t).second) policy_->OnTenantAdded(t, TenantQos{});
    FlowInfo info;
    info.flow = f;
    info.tenant = t;
    info.rnic_depth = 128;
    policy_->OnFlowAdded(now_, info);
  }
  void Arrive(TenantId t, FlowId f, uint32_t bytes) {
    WrInfo wr;
    wr.tenant = t;
    wr.flow = f;
    wr.bytes = bytes;
    wr.signaled = true;
    policy_->OnArrival(now_, wr);
  }
  void Complete(TenantId t, FlowId f, uint32_t bytes) {
    WrInfo wr;
    wr.tenant = t;
    wr.flow = f;
    wr.bytes = bytes;
    policy_->OnCompleted(now_, wr, 1000, true);
  }
  // Fires the policy's sampling timer (it re-arms itself).
  void Sample() {
    ASSERT_NE(mech_.wake_at, kNever);
    now_ = std::max(now_, mech_.wake_at);
    policy_->OnTimer(now_);
  }
  const FlowControl& control(FlowId f) { return mech_.control(f); }
  // Tenant 1 (flow 0) next to a B_App_multi with flows 1 and 2, all
  // sending 1 MiB WRs: which of flows 1, 2 MQSE keeps active and paused.
  std::pair<FlowId, FlowId> SingleNextToTwoQpBandwidthApp() {
    AddFlow(1, 0);
    AddFlow(2, 1);
    AddFlow(2, 2);
    Arrive(1, 0, 1 << 20);
    Arrive(2, 1, 1 << 20);
    Arrive(2, 2, 1 << 20);
    const FlowId active = control(1).held ? 2 : 1;
    return {active, active == 1 ? 2 : 1};
  }
  bool isolated_b(FlowId f) {
    const FlowControl& c = control(f);
    return c.chunk_bytes == 16384 &&
           (xc() ? c.interrupt_waits == 16 : c.window_bytes > 0);
  }

  CardProfile card_;  // 100 Gb/s, 105 Mmps, 13 Mmps per QP, 2 us
  testing::FakeMechanisms mech_;
  std::unique_ptr<SchedulerPolicy> policy_;
  std::set<TenantId> tenants_added_;
  Nanos now_ = 1000;
};

TEST_P(PerfPolicyTest, ATenantAloneIsNeverIsolated) {
  AddFlow(1, 0);
  Arrive(1, 0, 1 << 20);
  EXPECT_EQ(control(0), FlowControl{}) << "work conserving: nobody to protect";
}

TEST_P(PerfPolicyTest, AlwaysIsolateSplitsATenantAlone) {
  Make({"always_isolate=true"});
  AddFlow(1, 0);
  Arrive(1, 0, 1 << 20);
  EXPECT_TRUE(isolated_b(0));
}

TEST_P(PerfPolicyTest, BandwidthAppIsSplitWithInterruptsOnceAnotherTenantSends) {
  AddFlow(1, 0);  // B
  AddFlow(2, 1);  // D
  Arrive(1, 0, 1 << 20);
  EXPECT_EQ(control(0), FlowControl{});
  Arrive(2, 1, 16);
  EXPECT_TRUE(isolated_b(0)) << "LMSE: SUB_MSG_SIZE pieces, 0_WAIT_NUM = 16";
  if (!xc()) {
    // Twice the card's bandwidth-delay product: 12.5 GB/s x 2 us x 2 = 50 KB.
    EXPECT_EQ(control(0).window_bytes, 4u * 16384);
  }
  EXPECT_EQ(control(1), FlowControl{}) << "a D_App bypasses";
  EXPECT_FALSE(control(0).held) << "a single-QP B_App is not paused";
}

TEST_P(PerfPolicyTest, AverageSizeDecidesBandwidthApp) {
  AddFlow(1, 0);
  AddFlow(2, 1);
  Arrive(2, 1, 16);
  Arrive(1, 0, 512);
  EXPECT_EQ(control(0), FlowControl{}) << "512 B average: not a B_App";
  for (int i = 0; i < 8; ++i) Arrive(1, 0, 8192);
  EXPECT_TRUE(isolated_b(0)) << "the average crossed 1 KiB";
  for (int i = 0; i < 64; ++i) Arrive(1, 0, 16);
  EXPECT_EQ(control(0), FlowControl{}) << "back under 1 KiB";
}

TEST_P(PerfPolicyTest, MultiQpBandwidthAppGetsQNumAllowActiveQps) {
  AddFlow(1, 0);  // B_single
  for (FlowId f = 1; f <= 4; ++f) AddFlow(2, f);  // B_multi, 4 QPs
  Arrive(1, 0, 1 << 20);
  for (FlowId f = 1; f <= 4; ++f) Arrive(2, f, 1 << 20);
  int active = 0;
  for (FlowId f = 1; f <= 4; ++f) {
    const FlowControl& c = control(f);
    EXPECT_TRUE(isolated_b(f));
    if (!c.held) ++active;
    if (c.held) {
      EXPECT_EQ(c.pause_on_rnic, xc()) << "PAUSE on the RNIC where it can";
    }
  }
  EXPECT_EQ(active, 1) << "QNum_allow = 1";
  EXPECT_FALSE(control(0).held);
}

TEST_P(PerfPolicyTest, MqseActivatesQpsRoundRobinAfterEachLargeMessage) {
  AddFlow(1, 0);
  for (FlowId f = 1; f <= 3; ++f) AddFlow(2, f);
  Arrive(1, 0, 1 << 20);
  for (FlowId f = 1; f <= 3; ++f) Arrive(2, f, 1 << 20);
  std::vector<FlowId> order;
  for (int round = 0; round < 6; ++round) {
    FlowId active = 0;
    for (FlowId f = 1; f <= 3; ++f) {
      if (!control(f).held) active = f;
    }
    ASSERT_NE(active, 0u);
    order.push_back(active);
    Complete(2, active, 1 << 20);
  }
  EXPECT_EQ(order, (std::vector<FlowId>{1, 2, 3, 1, 2, 3}));
}

TEST_P(PerfPolicyTest, SmallMessageQpsRotateAfterTheirQuantum) {
  Make({"rotate_wrs=4", "qnum_capa=2"});
  AddFlow(1, 0);  // another tenant, 1 QP
  AddFlow(2, 1);
  AddFlow(2, 2);
  Arrive(1, 0, 16);
  Arrive(2, 1, 16);
  Arrive(2, 2, 16);
  mech_.flow_accounts[1].wrs_arrived = 100;  // SQ_Len 100 > Th_M_App
  mech_.flow_accounts[2].wrs_arrived = 100;
  Sample();
  FlowId active = control(1).held ? 2 : 1;
  ASSERT_TRUE(control(active == 1 ? 2 : 1).held) << "M_App_multi: capa 2 - 1 other QP";
  for (int i = 0; i < 3; ++i) Complete(2, active, 16);
  EXPECT_FALSE(control(active).held) << "quantum not used up";
  Complete(2, active, 16);
  EXPECT_TRUE(control(active).held) << "after rotate_wrs completions it yields";
}

TEST_P(PerfPolicyTest, ClassifierMarksMessageAppFromSampledSqLenAndForgetsAfterHistory) {
  Make({"qnum_capa=4", "history_ms=100"});
  AddFlow(1, 0);  // D_single, the other tenant
  for (FlowId f = 1; f <= 6; ++f) AddFlow(2, f);
  Arrive(1, 0, 16);
  for (FlowId f = 1; f <= 6; ++f) Arrive(2, f, 16);
  auto held = [&] {
    int n = 0;
    for (FlowId f = 1; f <= 6; ++f) n += control(f).held ? 1 : 0;
    return n;
  };
  EXPECT_EQ(held(), 0) << "a D_App_multi bypasses";
  mech_.flow_accounts[3].wrs_arrived = 6;  // one QP's SQ_Len above 5
  Sample();
  // M_App_multi: QNum_capa (4) less the one QP the other tenant keeps.
  EXPECT_EQ(held(), 3);
  mech_.flow_accounts[3].wrs_completed = 6;
  for (int i = 0; i < 19; ++i) {
    now_ += 5 * kMs;
    Arrive(1, 0, 16);  // both keep sending
    for (FlowId f = 1; f <= 6; ++f) Arrive(2, f, 16);
    Sample();
  }
  EXPECT_EQ(held(), 3) << "within the last 100 ms a sample exceeded 5";
  for (int i = 0; i < 2; ++i) {
    now_ += 5 * kMs;
    Arrive(1, 0, 16);
    for (FlowId f = 1; f <= 6; ++f) Arrive(2, f, 16);
    Sample();
  }
  EXPECT_EQ(held(), 0) << "no sample above 5 in the last 100 ms: a D_App again";
}

TEST_P(PerfPolicyTest, IsolationStopsWhenTheOtherTenantGoesQuiet) {
  Make({"history_ms=20"});
  AddFlow(1, 0);
  AddFlow(2, 1);
  Arrive(1, 0, 1 << 20);
  Arrive(2, 1, 16);
  EXPECT_TRUE(isolated_b(0));
  for (int i = 0; i < 5; ++i) {
    now_ += 5 * kMs;
    Arrive(1, 0, 1 << 20);  // only B sends
    Sample();
  }
  EXPECT_EQ(control(0), FlowControl{}) << "alone again: no splitting";
}

TEST_P(PerfPolicyTest, DestroyedFlowsLeaveTheRoundRobin) {
  const auto [active, paused] = SingleNextToTwoQpBandwidthApp();
  ASSERT_TRUE(control(paused).held);
  policy_->OnFlowEnded(now_, active, FlowEnd::kDestroyed);
  EXPECT_FALSE(control(paused).held) << "a single QP is left: nothing to pause";
  Complete(2, paused, 1 << 20);  // no rotation to a dead flow
  EXPECT_FALSE(control(paused).held);
}

TEST_P(PerfPolicyTest, AFlushedActiveQpHandsItsSlotOn) {
  const auto [active, paused] = SingleNextToTwoQpBandwidthApp();
  policy_->OnFlowEnded(now_, active, FlowEnd::kError);
  EXPECT_FALSE(control(paused).held);
  EXPECT_TRUE(control(active).held);
}

TEST_P(PerfPolicyTest, ReportsClassAndIsolation) {
  struct Sink : ReportSink {
    void Number(std::string_view k, double v) override { numbers[std::string(k)] = v; }
    void Text(std::string_view k, std::string_view v) override {
      texts[std::string(k)] = std::string(v);
    }
    std::map<std::string, double> numbers;
    std::map<std::string, std::string> texts;
  };
  AddFlow(1, 0);
  AddFlow(2, 1);
  AddFlow(2, 2);
  Arrive(1, 0, 16);
  Arrive(2, 1, 1 << 20);
  Arrive(2, 2, 1 << 20);
  Sink s;
  policy_->ReportTenant(2, s);
  EXPECT_EQ(s.texts["class"], "B_App_multi");
  EXPECT_EQ(s.texts["isolation"], "LMSE+MQSE");
  EXPECT_EQ(s.numbers["active_qps"], 1);
  Sink d;
  policy_->ReportTenant(1, d);
  EXPECT_EQ(d.texts["class"], "D_App_single");
  EXPECT_EQ(d.texts["isolation"], "bypass");
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, PerfPolicyTest,
                         ::testing::Values(PerfPreemption::kStage,
                                           PerfPreemption::kCrossChannel),
                         [](const auto& info) {
                           return info.param == PerfPreemption::kStage ? "Stage"
                                                                       : "CrossChannel";
                         });

TEST(PerfPolicyCrossChannel, ZeroWaitUnitSetsTheInterruptCount) {
  std::string error;
  auto p = MakePerfPolicy(CardProfile{}, {"sub_msg_size=65536", "zero_wait_unit=4096"},
                          PerfPreemption::kCrossChannel, &error);
  ASSERT_NE(p, nullptr) << error;
  testing::FakeMechanisms mech;
  mech.has_cross_channel = mech.has_rnic_pause = true;
  p->Bind(mech);
  for (TenantId t : {1u, 2u}) {
    p->OnTenantAdded(t, TenantQos{});
    FlowInfo info;
    info.flow = t - 1;
    info.tenant = t;
    p->OnFlowAdded(1000, info);
  }
  WrInfo wr;
  wr.tenant = 1;
  wr.flow = 0;
  wr.bytes = 1 << 20;
  p->OnArrival(1000, wr);
  wr.tenant = 2;
  wr.flow = 1;
  wr.bytes = 16;
  p->OnArrival(1000, wr);
  EXPECT_EQ(mech.control(0).chunk_bytes, 65536u);
  EXPECT_EQ(mech.control(0).interrupt_waits, 16) << "0_WAIT_NUM = 64 KiB / 4 KiB";
  EXPECT_EQ(mech.control(0).window_bytes, 0u) << "the RNIC interrupts: no window";
}

TEST(PerfPolicyCrossChannel, WithoutWaitOnTheRnicItUsesTheStagesForm) {
  std::string error;
  auto p = MakePerfPolicy(CardProfile{}, {}, PerfPreemption::kCrossChannel, &error);
  ASSERT_NE(p, nullptr) << error;
  testing::FakeMechanisms mech;  // no cross-channel operations
  p->Bind(mech);
  p->OnTenantAdded(1, TenantQos{});
  p->OnTenantAdded(2, TenantQos{});
  for (FlowId f = 0; f < 3; ++f) {
    FlowInfo info;
    info.flow = f;
    info.tenant = f == 0 ? 1 : 2;
    p->OnFlowAdded(1000, info);
  }
  for (FlowId f = 0; f < 3; ++f) {
    WrInfo wr;
    wr.tenant = f == 0 ? 1 : 2;
    wr.flow = f;
    wr.bytes = 1 << 20;
    p->OnArrival(1000, wr);
  }
  EXPECT_EQ(mech.control(0).interrupt_waits, 0);
  EXPECT_GT(mech.control(0).window_bytes, 0u) << "a split is never unbounded";
  const FlowControl& held = mech.control(1).held ? mech.control(1) : mech.control(2);
  EXPECT_TRUE(held.held);
  EXPECT_FALSE(held.pause_on_rnic);
}

TEST(PerfPolicyOptions, UnknownOrOutOfRangeKnobsAreRefused) {
  std::string error;
  EXPECT_EQ(MakePerfPolicy(CardProfile{}, {"sub_msg_sz=1"}, PerfPreemption::kStage, &error),
            nullptr);
  EXPECT_NE(error.find("sub_msg_sz"), std::string::npos);
  EXPECT_EQ(MakePerfPolicy(CardProfile{}, {"qnum_allow=0"}, PerfPreemption::kStage, &error),
            nullptr);
  EXPECT_NE(MakePerfPolicy(CardProfile{}, {"qnum_allow=2"}, PerfPreemption::kStage, &error),
            nullptr);
}

}  // namespace
}  // namespace vrdma::policy
