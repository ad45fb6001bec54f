// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RtoUndo (docs/reliability.md §4.4): an ACK of a transmission an RTO
// declared lost proves the RTO spurious and gives back the state before
// it, once per episode; an ACK of anything sent after the RTO first, or a
// RACK loss, ends the episode without it; the floor is 5/4 of the late
// round trip, the largest while proofs keep coming, and lapses
// floor_hold_ns after the last; Rto takes it as its least timeout.
#include "policy/reliability/rto_undo.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "policy/reliability/rto.h"

namespace vrdma::policy::reliability {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr UndoState kBefore{65536, 480000};

TEST(RtoUndoTest, TheOriginalArrivingLateProvesTheRtoSpurious) {
  RtoUndo u;
  u.OnRto(/*next_gseq=*/10, kBefore);
  u.OnRto(12, UndoState{32768, 4096});  // a second pass: the first state stays
  EXPECT_EQ(u.OnAcked(3, /*was_lost=*/false, 5 * kMs, 1 * kMs), std::nullopt);
  const std::optional<UndoState> s = u.OnAcked(4, true, 6 * kMs, 2 * kMs);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->max_chunk, kBefore.max_chunk);
  EXPECT_EQ(s->cwnd, kBefore.cwnd);
  EXPECT_FALSE(u.open());
  EXPECT_EQ(u.OnAcked(5, true, 6 * kMs, 2 * kMs), std::nullopt);  // once
  EXPECT_EQ(u.FloorNs(6 * kMs), 5 * kMs);  // late 4 ms x 5/4
}

TEST(RtoUndoTest, ARetransmissionAcknowledgedFirstProvesNothing) {
  RtoUndo u;
  u.OnRto(10, kBefore);
  EXPECT_EQ(u.OnAcked(10, false, 5 * kMs, 4 * kMs), std::nullopt);
  EXPECT_FALSE(u.open());
  EXPECT_EQ(u.OnAcked(4, true, 6 * kMs, 1 * kMs), std::nullopt);
  EXPECT_EQ(u.FloorNs(6 * kMs), 0u);
}

TEST(RtoUndoTest, ARackLossEndsTheEpisode) {
  RtoUndo u;
  u.OnRto(10, kBefore);
  u.OnRackLoss();
  EXPECT_EQ(u.OnAcked(4, true, 6 * kMs, 1 * kMs), std::nullopt);
}

TEST(RtoUndoTest, NoEpisodeNoUndo) {
  RtoUndo u;
  EXPECT_EQ(u.OnAcked(4, true, 6 * kMs, 1 * kMs), std::nullopt);
}

TEST(RtoUndoTest, TheFloorKeepsTheLargestAndLapsesAfterTheHold) {
  RtoUndo u(RtoUndoParams{.floor_hold_ns = 100 * kMs});
  u.OnRto(10, kBefore);
  ASSERT_TRUE(u.OnAcked(1, true, 9 * kMs, 1 * kMs));  // late 8 ms: 10 ms
  u.OnRto(20, kBefore);
  ASSERT_TRUE(u.OnAcked(11, true, 14 * kMs, 10 * kMs));  // late 4 ms
  EXPECT_EQ(u.FloorNs(14 * kMs), 10 * kMs);
  EXPECT_EQ(u.FloorNs(114 * kMs - 1), 10 * kMs);  // held from the newest proof
  EXPECT_EQ(u.FloorNs(114 * kMs), 0u);
  u.OnRto(30, kBefore);
  ASSERT_TRUE(u.OnAcked(21, true, 200 * kMs, 196 * kMs));  // a new, smaller one
  EXPECT_EQ(u.FloorNs(200 * kMs), 5 * kMs);
}

TEST(RtoUndoTest, RtoTakesTheFloorUpToItsCap) {
  Rto rto;
  RttEstimator rtt;
  rtt.AddSample(0, 100'000);  // srtt 100 us, rttvar 50 us
  const uint64_t base = rto.TimeoutNs(rtt, 0);
  EXPECT_EQ(rto.TimeoutNs(rtt, 0, base - 1), base);
  EXPECT_EQ(rto.TimeoutNs(rtt, 0, 5 * kMs), 5 * kMs);
  EXPECT_EQ(rto.TimeoutNs(rtt, 1, 5 * kMs), 10 * kMs);  // backed off from it
  EXPECT_EQ(rto.TimeoutNs(rtt, 0, 1000 * kMs), rto.params().max_ns);
}

}  // namespace
}  // namespace vrdma::policy::reliability
