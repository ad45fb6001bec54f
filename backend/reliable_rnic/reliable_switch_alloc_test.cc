// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The live switch's data path allocates nothing (docs/reliability.md §6,
// step 17): once SetMode (a control call, which makes the switch's record,
// its hold queue and the new connection) has run on both ends, the
// switch itself (SWITCH, the drain, DRAINED, taking the receives back,
// the reconnect, READY, the held WRs) and the traffic through it run
// under a global operator new that counts; and a SetMode during a switch,
// whose ask the data path leaves to the daemon's tick (RunDueAsks).
#include <gtest/gtest.h>

#include "backend/base/testing/counting_new.h"
#include "backend/reliable_rnic/reliable_switch_test_util.h"

namespace vrdma::testing {
namespace {

// The test's own records sized beforehand, and the counter checked.
class ReliableSwitchAllocTest : public ReliableSwitchTest {
 protected:
  void Prepare() {
    got_.reserve(4096);
    got_b_.reserve(4096);
    recv_a_.reserve(4096);
    recv_b_.reserve(4096);
    ab_.ops.reserve(4096);
    ba_.ops.reserve(4096);
    ab_.sends.reserve(4096);
    ba_.sends.reserve(4096);
    ab_.errors.reserve(64);
    ba_.errors.reserve(64);
    g_counting = true;
    void* volatile p = ::operator new(16);
    ::operator delete(p);
    g_counting = false;
    ASSERT_EQ(g_allocs, 1);
    g_allocs = 0;
  }
};

// One switch from `from` to `to` under WRITEs, SENDs and READs both ways;
// allocations counted once both ends' SetMode (control calls) returned.
class ReliableSwitchAllocChain : public ReliableSwitchAllocTest {
 public:
  void Once(ReliabilityMode from, ReliabilityMode to) {
    Setup(from);
    Traffic(30, 200);  // warm up, every kind of WR seen once
    const size_t total = 120;
    Prepare();
    la_->SetMode(std::span(&va_.gid, 1), to);
    lb_->SetMode(std::span(&vb_.gid, 1), to);
    g_counting = true;
    for (int i = 0; i < 400000 && !(ab_.done(total) && ba_.done(total)); ++i) {
      TrafficTurn(total);
    }
    g_counting = false;
    const bool switched = Switched(*la_, va_.gid) && Switched(*lb_, vb_.gid);
    const long allocs = g_allocs;
    ASSERT_TRUE(ab_.done(total) && ba_.done(total));
    EXPECT_TRUE(switched);
    EXPECT_EQ(la_->counters().switches_done, 1u);
    EXPECT_EQ(allocs, 0);
    ExpectClean();
  }
};

TEST_F(ReliableSwitchAllocChain, NativeToUc) {
  Once(ReliabilityMode::kNative, ReliabilityMode::kUc);
}

TEST_F(ReliableSwitchAllocChain, UcToNative) {
  Once(ReliabilityMode::kUc, ReliabilityMode::kNative);
}

TEST_F(ReliableSwitchAllocChain, NativeToRc) {
  Once(ReliabilityMode::kNative, ReliabilityMode::kRc);
}

TEST_F(ReliableSwitchAllocChain, RcToUc) {
  Once(ReliabilityMode::kRc, ReliabilityMode::kUc);
}

TEST_F(ReliableSwitchAllocChain, UcToRc) {
  Once(ReliabilityMode::kUc, ReliabilityMode::kRc);
}

TEST_F(ReliableSwitchAllocChain, RcToNative) {
  Once(ReliabilityMode::kRc, ReliabilityMode::kNative);
}

// A SetMode while a switch runs is asked once it ended (§6 "Who
// switches"): the data path finds the ask due, and the daemon's tick
// (RunDueAsks, a control call, here uncounted) makes it with its new
// path. Through both switches the data path allocates nothing.
TEST_F(ReliableSwitchAllocTest, ADeferredAskIsMadeOffTheDataPath) {
  Setup(ReliabilityMode::kNative);
  Traffic(30, 200);
  const size_t total = 160;
  Prepare();
  control_tick_ = [this] {
    const bool counting = g_counting;
    g_counting = false;
    RunDueAsks();
    g_counting = counting;
  };
  SwitchBothNow(ReliabilityMode::kUc);
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kRc);  // deferred on both
  lb_->SetMode(std::span(&vb_.gid, 1), ReliabilityMode::kRc);
  g_counting = true;
  for (int i = 0; i < 400000 && !(ab_.done(total) && ba_.done(total) &&
                                  la_->counters().switches_done == 2 &&
                                  lb_->counters().switches_done == 2);
       ++i) {
    TrafficTurn(total);
  }
  g_counting = false;
  const long allocs = g_allocs;
  ASSERT_TRUE(ab_.done(total) && ba_.done(total));
  EXPECT_EQ(la_->counters().switches_done, 2u);
  EXPECT_EQ(lb_->counters().switches_done, 2u);
  EXPECT_TRUE(BothSettleIn(ReliabilityMode::kRc));
  EXPECT_EQ(allocs, 0);
  ExpectClean();
}

}  // namespace
}  // namespace vrdma::testing
