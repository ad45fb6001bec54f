// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// AckTrigger (docs/reliability.md §4.3): one test per row of the trigger
// table (chunk count, packet count, H, out of order or duplicate, timer,
// NAK or waiting message), which row fires first, and the reset after an
// ACK.
#include "policy/reliability/ack_trigger.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace vrdma::policy::reliability {
namespace {

constexpr uint64_t kUs = 1'000;

// The in-order unit n of a stream of one-unit, one-MID-per-unit SENDs.
Arrival Unit(uint32_t mid, uint64_t bytes = 64) {
  Arrival a;
  a.mid = mid;
  a.units = 1;
  a.wire_bytes = bytes;
  a.last = true;
  return a;
}

TEST(AckTriggerTest, ThirtyTwoChunks) {
  AckTrigger t(4096, 0);
  for (uint32_t i = 0; i < 31; ++i) {
    ASSERT_EQ(t.OnArrival(i, Unit(i)), AckReason::kNone) << i;
  }
  EXPECT_EQ(t.pending_chunks(), 31u);
  EXPECT_EQ(t.OnArrival(31, Unit(31)), AckReason::kChunks);
  t.OnAckSent();
  EXPECT_EQ(t.pending_chunks(), 0u);
  EXPECT_EQ(t.OnArrival(32, Unit(32)), AckReason::kNone);
}

TEST(AckTriggerTest, SixtyFourPackets) {
  AckTrigger t(1024, 0);
  // One-unit chunks of a 1 MiB WRITE at a 1 KiB MTU: 4 packets each.
  Arrival a;
  a.units = 1;
  a.wire_bytes = 4096;
  for (uint32_t i = 0; i < 15; ++i) {
    a.off_units = i;
    ASSERT_EQ(t.OnArrival(i, a), AckReason::kNone) << i;
  }
  EXPECT_EQ(t.pending_packets(), 60u);
  a.off_units = 15;
  EXPECT_EQ(t.OnArrival(15, a), AckReason::kPackets);  // 64 packets
}

TEST(AckTriggerTest, PacketsRoundUpAndAZeroLengthPieceIsOne) {
  AckTrigger t(1024, 0);
  EXPECT_EQ(t.OnArrival(0, Unit(0, 0)), AckReason::kNone);
  EXPECT_EQ(t.pending_packets(), 1u);
  EXPECT_EQ(t.OnArrival(1, Unit(1, 1025)), AckReason::kNone);
  EXPECT_EQ(t.pending_packets(), 3u);
  AckTrigger big_mtu(4096, 0);
  EXPECT_EQ(big_mtu.OnArrival(0, Unit(0, 4160)), AckReason::kNone);
  EXPECT_EQ(big_mtu.pending_packets(), 2u);  // header + unit > one MTU
}

TEST(AckTriggerTest, TheHBit) {
  AckTrigger t(4096, 0);
  EXPECT_EQ(t.OnArrival(0, Unit(0)), AckReason::kNone);
  Arrival a = Unit(1);
  a.hint = true;
  EXPECT_EQ(t.OnArrival(1, a), AckReason::kHint);
}

TEST(AckTriggerTest, AGapIsOutOfOrder) {
  AckTrigger t(4096, 7);
  Arrival a;
  a.mid = 7;
  a.units = 4;
  EXPECT_EQ(t.OnArrival(0, a), AckReason::kNone);  // (7, 0..3)
  a.off_units = 8;                                 // (7, 4..7) missing
  EXPECT_EQ(t.OnArrival(1, a), AckReason::kOutOfOrder);
  a.off_units = 12;  // follows the furthest piece: in order again
  EXPECT_EQ(t.OnArrival(2, a), AckReason::kNone);
  a.off_units = 4;  // the hole filled (a retransmission): behind
  EXPECT_EQ(t.OnArrival(3, a), AckReason::kOutOfOrder);
  a.off_units = 16;  // the expectation did not move back
  EXPECT_EQ(t.OnArrival(4, a), AckReason::kNone);
}

TEST(AckTriggerTest, TheLPieceMovesToTheNextMid) {
  AckTrigger t(4096, 7);
  Arrival a;
  a.mid = 7;
  a.units = 2;
  EXPECT_EQ(t.OnArrival(0, a), AckReason::kNone);
  // MID 8 before MID 7's L (a tail held back, §2.3): out of order.
  Arrival b = Unit(8);
  EXPECT_EQ(t.OnArrival(1, b), AckReason::kOutOfOrder);
  b.mid = 9;  // after MID 8's L
  EXPECT_EQ(t.OnArrival(2, b), AckReason::kNone);
  a.off_units = 2;  // MID 7's tail, late
  a.last = true;
  EXPECT_EQ(t.OnArrival(3, a), AckReason::kOutOfOrder);
}

TEST(AckTriggerTest, MidsCompareAcrossTheWrap) {
  AckTrigger t(4096, 0xffffffffu);
  EXPECT_EQ(t.OnArrival(0, Unit(0xffffffffu)), AckReason::kNone);
  EXPECT_EQ(t.OnArrival(1, Unit(0)), AckReason::kNone);
  EXPECT_EQ(t.OnArrival(2, Unit(0xfffffffeu)), AckReason::kOutOfOrder);
  EXPECT_EQ(t.OnArrival(3, Unit(1)), AckReason::kNone);
}

TEST(AckTriggerTest, ADuplicateIsOutOfOrder) {
  AckTrigger t(4096, 0);
  EXPECT_EQ(t.OnArrival(0, Unit(0)), AckReason::kNone);
  Arrival d = Unit(0);
  d.duplicate = true;  // e.g. a fabric duplicate of a delivered message
  EXPECT_EQ(t.OnArrival(1, d), AckReason::kOutOfOrder);
  // Flagged duplicate at the expected position (the receiver knows best).
  Arrival e = Unit(1);
  e.duplicate = true;
  EXPECT_EQ(t.OnArrival(2, e), AckReason::kOutOfOrder);
}

TEST(AckTriggerTest, TimerSinceTheOldestUnacknowledgedArrival) {
  AckTrigger t(4096, 0);
  EXPECT_EQ(t.DeadlineNs(), std::nullopt);
  EXPECT_EQ(t.OnTimer(1'000'000), AckReason::kNone);  // nothing pending
  EXPECT_EQ(t.OnArrival(100, Unit(0)), AckReason::kNone);
  EXPECT_EQ(t.OnArrival(100 + 20 * kUs, Unit(1)), AckReason::kNone);
  ASSERT_EQ(t.DeadlineNs(), std::optional<uint64_t>(100 + 32 * kUs));
  EXPECT_EQ(t.OnTimer(100 + 32 * kUs - 1), AckReason::kNone);
  EXPECT_EQ(t.OnTimer(100 + 32 * kUs), AckReason::kTimer);
  // A late timer: the next arrival finds it due.
  EXPECT_EQ(t.OnArrival(100 + 40 * kUs, Unit(2)), AckReason::kTimer);
  t.OnAckSent();
  EXPECT_EQ(t.DeadlineNs(), std::nullopt);
  EXPECT_EQ(t.OnArrival(200 * kUs, Unit(3)), AckReason::kNone);
  EXPECT_EQ(t.DeadlineNs(), std::optional<uint64_t>(232 * kUs));
}

TEST(AckTriggerTest, AClockGoingBackIsNotATimer) {
  AckTrigger t(4096, 0);
  EXPECT_EQ(t.OnArrival(1000, Unit(0)), AckReason::kNone);
  EXPECT_EQ(t.OnArrival(999, Unit(1)), AckReason::kNone);
  EXPECT_EQ(t.OnTimer(0), AckReason::kNone);
}

TEST(AckTriggerTest, ANakOrAWaitingMessage) {
  AckTrigger t(4096, 0);
  Arrival a = Unit(0);
  a.nak_or_waiting = true;
  EXPECT_EQ(t.OnArrival(0, a), AckReason::kNakOrWaiting);
}

TEST(AckTriggerTest, TheFirstRowThatHoldsIsReported) {
  AckTrigger t(4096, 0);
  for (uint32_t i = 0; i < 31; ++i)
    ASSERT_EQ(t.OnArrival(i, Unit(i)), AckReason::kNone);
  Arrival a = Unit(40);  // out of order, with H and a NAK, the 32nd
  a.hint = true;
  a.nak_or_waiting = true;
  EXPECT_EQ(t.OnArrival(31, a), AckReason::kChunks);
  t.OnAckSent();
  Arrival b = Unit(50);
  b.hint = true;
  EXPECT_EQ(t.OnArrival(32, b), AckReason::kHint);
}

TEST(AckTriggerTest, ParamsChangeTheThresholds) {
  AckTriggerParams p;
  p.max_chunks = 2;
  p.max_packets = 1000;
  p.timer_ns = 5;
  AckTrigger t(4096, 0, p);
  EXPECT_EQ(t.OnArrival(0, Unit(0)), AckReason::kNone);
  EXPECT_EQ(t.OnArrival(1, Unit(1)), AckReason::kChunks);
  t.OnAckSent();
  EXPECT_EQ(t.OnArrival(10, Unit(2)), AckReason::kNone);
  EXPECT_EQ(t.OnTimer(15), AckReason::kTimer);
}

}  // namespace
}  // namespace vrdma::policy::reliability
