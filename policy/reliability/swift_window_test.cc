// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SwiftWindow (docs/reliability.md §4.5): one unit per round trip below
// target, the multiplicative decrease and its 0.5 bound, at most once per
// round trip, the bounds, the loss rules (congestive -> min, random ->
// unchanged, two RTOs without an ACK -> min) and the pacing interval.
#include "policy/reliability/swift_window.h"

#include <cstdint>
#include <optional>

#include "gtest/gtest.h"

namespace vrdma::policy::reliability {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kKiB = 1024;
constexpr uint64_t kBase = 10 * kUs;    // base RTT of these tests
constexpr uint64_t kTarget = 20 * kUs;  // base + base (max_decrease 0.5)
constexpr uint64_t kBelow = 15 * kUs;   // a sample below target
constexpr uint64_t kSrtt = 15 * kUs;

TEST(SwiftWindowTest, DefaultsAreTheDocs) {
  SwiftWindow w;
  EXPECT_EQ(w.cwnd(), 64 * kKiB);
  EXPECT_EQ(w.TargetNs(kBase), kTarget);
  EXPECT_EQ(w.params().min_cwnd, 4 * kKiB);
  EXPECT_EQ(w.params().max_cwnd, 4096 * kKiB);
}

TEST(SwiftWindowTest, OneAckAddsUnitTimesAckedOverCwnd) {
  SwiftWindow w;
  w.OnAck(0, 8 * kKiB, kBelow, kSrtt, kBase);
  // 4096 x 8192 / 65536 = 512.
  EXPECT_EQ(w.cwnd(), 64 * kKiB + 512);
}

TEST(SwiftWindowTest, OneUnitPerRoundTripBelowTarget) {
  SwiftWindow w;
  uint64_t now = 0;
  for (int round = 1; round <= 20; ++round) {
    const uint64_t start = w.cwnd();
    // One round trip: the window's bytes come back in one-unit ACKs.
    for (uint64_t acked = 0; acked < start; acked += 4 * kKiB) {
      w.OnAck(now++, 4 * kKiB, kBelow, kSrtt, kBase);
    }
    const uint64_t grew = w.cwnd() - start;
    // Each ACK adds 4096 x 4096 / cwnd with cwnd in [start, start + 4096]:
    // the round adds between 4096 x start / (start + 4096) and 4096.
    EXPECT_LE(grew, 4 * kKiB) << round;
    EXPECT_GE(grew, 4 * kKiB * start / (start + 4 * kKiB) - 1) << round;
  }
  // 20 round trips: about 20 units more than 64 KiB.
  EXPECT_NEAR(static_cast<double>(w.cwnd()), 64.0 * kKiB + 20 * 4 * kKiB,
              4.0 * kKiB);
}

TEST(SwiftWindowTest, UnderOneUnitEachUnitAckedAddsAUnit) {
  SwiftWindowParams p;
  p.min_cwnd = 512;
  p.initial_cwnd = 512;
  SwiftWindow w(p);
  ASSERT_EQ(w.cwnd(), 512u);
  // The paced unit's ACK: + 4096 x 4096 / max(512, 4096) = + 4096, not the
  // 8 units 4096 x 4096 / 512 would add.
  w.OnAck(0, 4 * kKiB, kBelow, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 512 + 4 * kKiB);
}

TEST(SwiftWindowTest, DecreaseByDelayAboveTarget) {
  SwiftWindow w;
  // rtt 40 us, target 20 us: x (1 - 0.8 x 20 / 40) = x 0.6.
  w.OnAck(0, 4 * kKiB, 40 * kUs, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 39321u);  // floor(65536 x 0.6)
}

TEST(SwiftWindowTest, DecreaseBoundedByHalf) {
  SwiftWindow w;
  // rtt 200 us: 1 - 0.8 x 180 / 200 = 0.28, bounded to 0.5.
  w.OnAck(0, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 32 * kKiB);
}

TEST(SwiftWindowTest, AtTargetNeitherGrowsNorShrinks) {
  SwiftWindow w;
  w.OnAck(0, 4 * kKiB, kTarget, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 64 * kKiB);
}

TEST(SwiftWindowTest, DecreaseAtMostOncePerRoundTrip) {
  SwiftWindow w;
  w.OnAck(1000, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  ASSERT_EQ(w.cwnd(), 32 * kKiB);
  // Within srtt of the decrease: no second one.
  w.OnAck(1000 + kSrtt - 1, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 32 * kKiB);
  // One srtt later: the next.
  w.OnAck(1000 + kSrtt, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 16 * kKiB);
}

TEST(SwiftWindowTest, AClockGoingBackDoesNotAllowADecrease) {
  SwiftWindow w;
  w.OnAck(1000, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  ASSERT_EQ(w.cwnd(), 32 * kKiB);
  w.OnAck(999, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 32 * kKiB);
}

TEST(SwiftWindowTest, AckWithoutSampleLeavesTheWindow) {
  SwiftWindow w;
  w.OnAck(0, 64 * kKiB, std::nullopt, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 64 * kKiB);
}

TEST(SwiftWindowTest, StaysWithinMinAndMax) {
  SwiftWindowParams p;
  p.initial_cwnd = 1024;  // below the default min_cwnd: clamped
  EXPECT_EQ(SwiftWindow(p).cwnd(), 4 * kKiB);
  p.min_cwnd = 512;
  SwiftWindow low(p);
  for (uint64_t t = 0; t < 10; ++t) {
    low.OnAck(t * kSrtt, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  }
  EXPECT_EQ(low.cwnd(), 512u);
  p.initial_cwnd = 4096 * kKiB - 100;
  SwiftWindow high(p);
  high.OnAck(0, 4096 * kKiB, kBelow, kSrtt, kBase);
  EXPECT_EQ(high.cwnd(), 4096 * kKiB);
  p.initial_cwnd = 100 * 4096 * kKiB;  // an initial above max is clamped
  EXPECT_EQ(SwiftWindow(p).cwnd(), 4096 * kKiB);
}

TEST(SwiftWindowTest, CongestiveLossGoesToMin) {
  SwiftWindow w;
  w.OnAck(0, 4 * kKiB, kTarget, kSrtt, kBase);  // newest sample at target
  EXPECT_TRUE(w.OnLoss(1));
  EXPECT_EQ(w.cwnd(), 4 * kKiB);
}

TEST(SwiftWindowTest, RandomLossLeavesTheWindow) {
  SwiftWindow w;
  w.OnAck(0, 4 * kKiB, kBelow, kSrtt, kBase);
  const uint64_t before = w.cwnd();
  EXPECT_FALSE(w.OnLoss(1));
  EXPECT_EQ(w.cwnd(), before);
  // No sample yet at all: nothing says the loss was congestive.
  SwiftWindow fresh;
  EXPECT_FALSE(fresh.OnLoss(0));
  EXPECT_EQ(fresh.cwnd(), 64 * kKiB);
}

TEST(SwiftWindowTest, TheNewestSampleDecides) {
  SwiftWindow w;
  w.OnAck(0, 4 * kKiB, 200 * kUs, kSrtt, kBase);  // above: decrease
  w.OnAck(1, 4 * kKiB, kBelow, kSrtt, kBase);     // then below
  const uint64_t before = w.cwnd();
  EXPECT_FALSE(w.OnLoss(2));
  EXPECT_EQ(w.cwnd(), before);
}

TEST(SwiftWindowTest, TwoRtosWithoutAckGoToMin) {
  SwiftWindow w;
  w.OnAck(0, 4 * kKiB, kBelow, kSrtt, kBase);
  const uint64_t before = w.cwnd();
  EXPECT_FALSE(w.OnRto(1'000'000));  // one RTO, delay below target
  EXPECT_EQ(w.cwnd(), before);
  EXPECT_TRUE(w.OnRto(2'000'000));  // the second without an ACK between
  EXPECT_EQ(w.cwnd(), 4 * kKiB);
}

TEST(SwiftWindowTest, AnAckBetweenRtosRestartsTheCount) {
  SwiftWindow w;
  w.OnAck(0, 4 * kKiB, kBelow, kSrtt, kBase);
  EXPECT_FALSE(w.OnRto(1'000'000));
  w.OnAck(1'500'000, 4 * kKiB, std::nullopt, kSrtt, kBase);  // no sample
  const uint64_t before = w.cwnd();
  EXPECT_FALSE(w.OnRto(2'000'000));
  EXPECT_EQ(w.cwnd(), before);
}

TEST(SwiftWindowTest, ResetCountsAsTheRoundTripsDecrease) {
  SwiftWindow w;
  w.OnAck(0, 4 * kKiB, kTarget, kSrtt, kBase);
  ASSERT_TRUE(w.OnLoss(100));
  // Growth below target resumes at once...
  w.OnAck(101, 4 * kKiB, kBelow, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 8 * kKiB);
  // ...but no delay decrease within srtt of the reset.
  w.OnAck(102, 4 * kKiB, 200 * kUs, kSrtt, kBase);
  EXPECT_EQ(w.cwnd(), 8 * kKiB);
}

TEST(SwiftWindowTest, PacingIntervalOnlyUnderOneUnit) {
  SwiftWindowParams p;
  p.min_cwnd = 512;
  p.initial_cwnd = 512;
  EXPECT_EQ(SwiftWindow(p).PacingIntervalNs(20 * kUs, 4096), 160 * kUs);  // x 8
  p.initial_cwnd = 2048;
  EXPECT_EQ(SwiftWindow(p).PacingIntervalNs(20 * kUs, 4096), 40 * kUs);  // x 2
  p.initial_cwnd = 4096;
  EXPECT_EQ(SwiftWindow(p).PacingIntervalNs(20 * kUs, 4096), 0u);
  EXPECT_EQ(SwiftWindow().PacingIntervalNs(20 * kUs, 4096), 0u);
}

// A small message is paced by its own bytes, not a whole unit's: a 64-byte
// message under a 512-byte window waits srtt / 8, not 8 srtt (a latency
// probe behind an incast was held 128 us for 64 bytes).
TEST(SwiftWindowTest, PacingIntervalScalesWithTheBytesSent) {
  SwiftWindowParams p;
  p.min_cwnd = 512;
  p.initial_cwnd = 512;
  const SwiftWindow w(p);
  EXPECT_EQ(w.PacingIntervalNs(16 * kUs, 64), 2 * kUs);
  EXPECT_EQ(w.PacingIntervalNs(16 * kUs, 512), 16 * kUs);
  EXPECT_EQ(w.PacingIntervalNs(16 * kUs, 0), w.PacingIntervalNs(16 * kUs, 1));
  EXPECT_GT(w.PacingIntervalNs(16 * kUs, 0), 0u);
}

// The measured base counts only up to the fabric's base RTT: a standing
// queue seen from the first sample on (146 us in the model's 32:1 incast)
// does not become the target; a quieter path keeps its own.
TEST(SwiftWindowTest, TargetTakesTheMeasuredBaseOnlyUpToTheFabrics) {
  SwiftWindowParams p;
  p.fabric_base_rtt_ns = 4 * kUs;
  const SwiftWindow w(p);
  EXPECT_EQ(w.TargetNs(146 * kUs), 8 * kUs);
  EXPECT_EQ(w.TargetNs(3 * kUs), 6 * kUs);
  p.fabric_base_rtt_ns = 0;  // none: the measured base alone
  EXPECT_EQ(SwiftWindow(p).TargetNs(146 * kUs), 156 * kUs);
  EXPECT_EQ(SwiftWindow().params().fabric_base_rtt_ns, 50 * kUs);
  EXPECT_EQ(SwiftWindow().TargetNs(146 * kUs), 60 * kUs);
}

// Without the operator's target, the queue the target allows is 10 us
// but at most the base times max_decrease / (1 - max_decrease): what
// keeps the round trip full after the largest decrease; more only adds
// delay (10 us was 2.5 base RTTs of the model's 4 us fabric, and 32
// senders settled above one unit each, 100-240 KiB queued).
TEST(SwiftWindowTest, TheTargetsQueueIsAtMostWhatADecreaseNeeds) {
  SwiftWindowParams p;
  p.fabric_base_rtt_ns = 0;
  EXPECT_EQ(SwiftWindow(p).QueueAllowanceNs(4 * kUs), 4 * kUs);
  EXPECT_EQ(SwiftWindow(p).TargetNs(4 * kUs), 8 * kUs);
  p.max_decrease = 0.25;  // f >= 0.75: a third of the base suffices
  EXPECT_EQ(SwiftWindow(p).QueueAllowanceNs(30 * kUs), 10 * kUs);
  EXPECT_EQ(SwiftWindow(p).TargetNs(30 * kUs), 40 * kUs);
  p.max_decrease = 1.0;  // unbounded in theory: clamped, finite
  EXPECT_EQ(SwiftWindow(p).QueueAllowanceNs(1 * kUs), 9 * kUs);
  p.max_decrease = 0.0;  // no decrease can idle the link: no queue needed
  EXPECT_EQ(SwiftWindow(p).TargetNs(7 * kUs), 7 * kUs);
  p.max_decrease = 0.5;  // a slower fabric: the 10 us default bounds it
  EXPECT_EQ(SwiftWindow(p).QueueAllowanceNs(24 * kUs), 24 * kUs);
  EXPECT_EQ(SwiftWindow(p).TargetNs(24 * kUs), 34 * kUs);
  p.default_target_delay_ns = 30 * kUs;
  EXPECT_EQ(SwiftWindow(p).TargetNs(24 * kUs), 48 * kUs);
}

// The operator's target (--reliability-target-us) replaces the derived
// queue; the base is still capped by the fabric's.
TEST(SwiftWindowTest, TheOperatorsTargetDelayWins) {
  SwiftWindowParams p;
  p.fabric_base_rtt_ns = 4 * kUs;
  p.target_delay_ns = 10 * kUs;
  EXPECT_EQ(SwiftWindow(p).TargetNs(146 * kUs), 14 * kUs);
  EXPECT_EQ(SwiftWindow(p).TargetNs(3 * kUs), 13 * kUs);
}

// At the derived target a standing queue of one base RTT is already
// above it, so the window shrinks where a 10 us allowance let it grow
// (the model's 32:1 incast: base 4 us, samples 10.7 us at one unit each).
TEST(SwiftWindowTest, AQueueOfMoreThanOneBaseShrinksTheWindow) {
  SwiftWindowParams derived;
  derived.fabric_base_rtt_ns = 4 * kUs;
  derived.initial_cwnd = 8 * kKiB;
  SwiftWindowParams fixed = derived;
  fixed.target_delay_ns = 10 * kUs;
  SwiftWindow a(derived);
  SwiftWindow b(fixed);
  for (uint64_t t = 0; t < 20; ++t) {
    a.OnAck(t * 11 * kUs, 4 * kKiB, 10'700, 10'700, 10'700);
    b.OnAck(t * 11 * kUs, 4 * kKiB, 10'700, 10'700, 10'700);
  }
  EXPECT_EQ(a.cwnd(), a.params().min_cwnd);
  EXPECT_GT(b.cwnd(), 8 * kKiB);
}

// Under a standing queue, the capped target makes the window decrease
// where the measured base alone lets it grow (samples 152 us, base 146).
TEST(SwiftWindowTest, AStandingQueueShrinksTheWindowOnlyWithTheCap) {
  SwiftWindowParams capped;
  capped.fabric_base_rtt_ns = 4 * kUs;
  SwiftWindowParams uncapped;
  uncapped.fabric_base_rtt_ns = 0;
  SwiftWindow a(capped);
  SwiftWindow b(uncapped);
  for (uint64_t t = 0; t < 20; ++t) {
    a.OnAck(t * 160 * kUs, 4 * kKiB, 152 * kUs, 152 * kUs, 146 * kUs);
    b.OnAck(t * 160 * kUs, 4 * kKiB, 152 * kUs, 152 * kUs, 146 * kUs);
  }
  EXPECT_EQ(a.cwnd(), a.params().min_cwnd);
  EXPECT_GT(b.cwnd(), 64 * kKiB);
}

// A spurious RTO's reset undone (rto_undo.h): the window before it, clamped,
// never smaller than it is.
TEST(SwiftWindowTest, UndoRestoresTheWindowBeforeTheRto) {
  SwiftWindow w;
  const uint64_t before = w.cwnd();
  // The second RTO without an ACK resets it.
  ASSERT_TRUE(w.OnRto(0) || w.OnRto(1));
  ASSERT_EQ(w.cwnd(), w.params().min_cwnd);
  w.Undo(before);
  EXPECT_EQ(w.cwnd(), before);
  w.Undo(4096);
  EXPECT_EQ(w.cwnd(), before);
  w.Undo(uint64_t{1} << 40);
  EXPECT_EQ(w.cwnd(), w.params().max_cwnd);
}

}  // namespace
}  // namespace vrdma::policy::reliability
