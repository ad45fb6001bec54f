// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The sender's timers as the turns see them (docs/reliability.md §2.1
// "Turns"): the bound before which a pump skips the loss and budget
// checks, and a data path that sleeps whenever nothing is due at once
// (Rnic::NextTimedWorkNs).
#include <gtest/gtest.h>

#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace vrdma::testing {
namespace {

// A budget shorter than the least RTO (200 us): the WR fails when its
// budget ends, not at the first RTO after it. The pump skips the loss
// and budget checks until the earliest of their deadlines
// (Sender::checks_at_), which a message's start must bring forward. No
// sweep here: a sweep runs the checks of every connection (it must find
// what a wrong checks_at_ hides), and every turn's would end the WR at
// its budget whatever checks_at_ said.
TEST_F(ReliableUcTest, ABudgetShorterThanTheRtoEndsTheWrAtTheBudget) {
  idle_sweep_ns_ = uint64_t{1} << 40;
  Build();
  QpConf c;
  c.timeout = 1;    // 4.096 us << 1 = 8.2 us
  c.retry_cnt = 1;  // budget: 2 x 8.2 us
  Connect(c);
  tap_b_->MatchTo(kDaemonA);  // B's daemon sends no ACK to A
  const uint64_t t0 = now_;
  Post(Write(1, 0, 0, 100));
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 20000));
  EXPECT_EQ(got_[0].status, WcStatus::kRetryExcErr);
  const uint64_t budget = 2 * (uint64_t{4096} << 1);
  EXPECT_GE(now_ - t0, budget);
  EXPECT_LT(now_ - t0, 200'000u);
  EXPECT_EQ(la_->counters().lost_rto, 0u);
  EXPECT_EQ(la_->counters().retry_exceeded, 1u);
}

// A data path that sleeps whenever the layers have nothing due at once,
// until the earliest of their timers (the engine arms NextTimedWorkNs as
// its loop's deadline; SleepUntilWork jumps the clock there). A timer it
// left out would be run only by the next HELLO, a second later.

// The one packet of a WRITE is lost: only its RTO can find it, and the
// sleeping data path wakes for it.
TEST_F(ReliableUcTest, AnRtoWakesADataPathThatSleeps) {
  idle_sweep_ns_ = uint64_t{1} << 40;  // a sweep every turn keeps it awake
  sleep_when_idle_ = true;
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  int dropped = 0;
  tap_a_->match = [&](std::span<const uint8_t> p, const Gid&) {
    return IsUcWrite(p) && dropped++ == 0;
  };
  const uint64_t sleeps = sleeps_;
  uint64_t took = 0;
  PostAndVerify({{1, 0, 0, 4096}}, 20000, &took);
  EXPECT_EQ(dropped, 1);  // the original only (its units go again by SEND)
  EXPECT_EQ(la_->counters().lost_rto, 1u);
  EXPECT_GT(sleeps_, sleeps);
  EXPECT_LT(took, 50'000'000u) << "woken by something later than the RTO";
}

// At 2 % loss every WRITE still arrives once, in place, the transfer
// taking milliseconds, not HELLO intervals.
TEST_F(ReliableUcTest, ADataPathThatSleepsUntilTheTimersLosesNothing) {
  idle_sweep_ns_ = uint64_t{1} << 40;
  sleep_when_idle_ = true;
  fabric::FaultConfig f;
  f.loss = 0.02;
  Build(f, f, 5);
  Connect();
  const uint64_t sleeps = sleeps_;
  uint64_t took = 0;
  PostAndVerify(MixedPlan(40, 3), 400000, &took);
  const auto& a = la_->counters();
  EXPECT_GT(a.retx_sent, 0u);
  EXPECT_EQ(a.messages_completed, 40u);
  EXPECT_GT(sleeps_, sleeps);
  EXPECT_LT(took, 100'000'000u);
}

// Nothing in flight, nothing due: the layers ask for no turn before their
// next HELLO (and the lower's own timers).
TEST_F(ReliableUcTest, AnIdleLayerSleepsUntilItsNextHello) {
  idle_sweep_ns_ = uint64_t{1} << 40;
  Build();
  Connect();
  PostAndVerify({{1, 0, 0, 4096}}, 2000);
  Run(2000);  // the ACK timers and repeats run out
  EXPECT_FALSE(la_->Progress());
  EXPECT_GT(la_->NextTimedWorkNs(), now_ + 10 * kStepNs);
  EXPECT_NE(la_->NextTimedWorkNs(), UINT64_MAX);  // the HELLO
}

}  // namespace
}  // namespace vrdma::testing
