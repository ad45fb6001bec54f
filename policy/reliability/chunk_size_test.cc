// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ChunkSize (docs/reliability.md §4.1): alignment to UNIT_SIZE, at least
// one unit while the window is open, no MID crossing, the delay scaling,
// halving at loss and doubling after a round trip without loss, and H.
#include "policy/reliability/chunk_size.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace vrdma::policy::reliability {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kTarget = 20 * kUs;
constexpr uint64_t kSrtt = 15 * kUs;  // below target: no scaling

TEST(ChunkSizeTest, RoundsTheWindowDownToUnits) {
  ChunkSize c;
  // 64 KiB - 10000 = 55536 -> 13 units.
  auto k = c.Next(64 * kKiB, 10000, 0, 1 * kMiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 13 * 4096u);
  EXPECT_FALSE(k->last);
}

TEST(ChunkSizeTest, CappedByMaxChunk) {
  ChunkSize c;
  auto k = c.Next(4 * kMiB, 0, 0, 1 * kMiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 64 * kKiB);
}

TEST(ChunkSizeTest, AtLeastOneUnitWhileTheWindowIsOpen) {
  ChunkSize c;
  auto k = c.Next(512, 0, 0, 1 * kMiB, kTarget, kSrtt);  // min_cwnd
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 4096u);
  k = c.Next(64 * kKiB, 64 * kKiB - 1, 0, 1 * kMiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 4096u);
}

TEST(ChunkSizeTest, NothingWhileTheWindowIsClosed) {
  ChunkSize c;
  EXPECT_FALSE(c.Next(64 * kKiB, 64 * kKiB, 0, 1 * kMiB, kTarget, kSrtt));
  EXPECT_FALSE(c.Next(512, 4096, 0, 1 * kMiB, kTarget, kSrtt));
}

TEST(ChunkSizeTest, TheMessagesEndIsTheLastChunk) {
  ChunkSize c;
  auto k = c.Next(64 * kKiB, 0, 8 * kKiB, 5000, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 5000u);  // the tail need not be whole units
  EXPECT_TRUE(k->last);
  k = c.Next(64 * kKiB, 0, 0, 100, kTarget, kSrtt);  // under a unit
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 100u);
  EXPECT_TRUE(k->last);
  k = c.Next(64 * kKiB, 0, 0, 0, kTarget, kSrtt);  // zero-length: one L
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 0u);
  EXPECT_TRUE(k->last);
}

TEST(ChunkSizeTest, NeverCrossesAMid) {
  ChunkSize c;
  const uint64_t mid = 256 * kMiB;  // 2^16 units
  auto k = c.Next(4 * kMiB, 0, mid - 8 * kKiB, 1 * kMiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 8 * kKiB);
  EXPECT_TRUE(k->last);  // the MID's last chunk, L
  k = c.Next(4 * kMiB, 0, mid, 1 * kMiB - 8 * kKiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 64 * kKiB);
  EXPECT_FALSE(k->last);
}

TEST(ChunkSizeTest, RandomChunksKeepEveryRule) {
  std::mt19937_64 rng(15);
  ChunkSize c;
  int waited = 0;
  for (int i = 0; i < 20'000; ++i) {
    const uint64_t cwnd = 512 + rng() % (4 * kMiB);
    const uint64_t inflight = rng() % cwnd;
    const uint64_t offset = (rng() % (1 << 17)) * 4096;  // across 2 MIDs
    const uint64_t left = rng() % (2 * kMiB);
    const uint64_t srtt = rng() % (200 * kUs);
    auto k = c.Next(cwnd, inflight, offset, left, kTarget, srtt);
    const uint64_t mid_end = (offset / (256 * kMiB) + 1) * 256 * kMiB;
    if (!k) {
      // Only a message that one chunk could carry whole, sliced by the
      // room alone, waits; and only with a window of 4 times it in flight.
      ASSERT_GT(inflight, 0u) << i;
      ASSERT_LE(left, c.MaxChunk(kTarget, srtt)) << i;
      ASSERT_LE(offset + left, mid_end) << i;
      ASSERT_GT(left, cwnd - inflight) << i;
      ASSERT_GE(cwnd, 4 * left) << i;
      ++waited;
      continue;
    }
    ASSERT_LE(offset + k->bytes, mid_end) << i;
    ASSERT_LE(k->bytes, left) << i;
    ASSERT_LE(k->bytes, 64 * kKiB) << i;
    if (!k->last) {
      ASSERT_EQ(k->bytes % 4096, 0u) << i;
      ASSERT_GE(k->bytes, 4096u) << i;
      // Within the window unless the window has less than a unit left.
      ASSERT_TRUE(k->bytes <= cwnd - inflight || k->bytes == 4096) << i;
    } else {
      ASSERT_TRUE(k->bytes == left || offset + k->bytes == mid_end) << i;
    }
  }
  EXPECT_GT(waited, 0);  // the rule was exercised
}

TEST(ChunkSizeTest, AMessageOneChunkCarriesWaitsForRoomRatherThanBeSliced) {
  ChunkSize c;
  // 300 KiB window, 280 KiB in flight: 20 KiB of room for a 64 KiB WRITE.
  // The window holds 4 x 64 KiB: wait (its end would otherwise wait for
  // the slice's ACK).
  EXPECT_FALSE(c.Next(300 * kKiB, 280 * kKiB, 0, 64 * kKiB, kTarget, kSrtt));
  // Room for all of it: one chunk with L.
  auto k = c.Next(300 * kKiB, 236 * kKiB, 0, 64 * kKiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 64 * kKiB);
  EXPECT_TRUE(k->last);
  // A window under 4 x the message: slicing keeps the pipe busy.
  k = c.Next(200 * kKiB, 180 * kKiB, 0, 64 * kKiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 20 * kKiB);
  EXPECT_FALSE(k->last);
  // Nothing in flight: never wait (no ACK would open the window).
  k = c.Next(20 * kKiB, 0, 0, 64 * kKiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 20 * kKiB);
  // More than one chunk can carry (max_chunk scaled down by the delay to
  // 32 KiB): it is sliced anyway, so the room is used.
  k = c.Next(300 * kKiB, 280 * kKiB, 0, 64 * kKiB, kTarget, 40 * kUs);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 20 * kKiB);
  // The rule off.
  ChunkSize off(ChunkSizeParams{.whole_ratio = 0});
  k = off.Next(300 * kKiB, 280 * kKiB, 0, 64 * kKiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 20 * kKiB);
}

TEST(ChunkSizeTest, ScaledDownByQueuing) {
  ChunkSize c;
  EXPECT_EQ(c.MaxChunk(kTarget, 10 * kUs), 64 * kKiB);   // srtt < target
  EXPECT_EQ(c.MaxChunk(kTarget, 40 * kUs), 32 * kKiB);   // x 20 / 40
  EXPECT_EQ(c.MaxChunk(kTarget, 60 * kUs), 20 * kKiB);   // 21845 -> 5 units
  EXPECT_EQ(c.MaxChunk(kTarget, 1000 * kUs), 4 * kKiB);  // at least a unit
  EXPECT_EQ(c.MaxChunk(kTarget, 0), 64 * kKiB);          // no sample yet
}

TEST(ChunkSizeTest, HalvedAtEachLossDownToAUnit) {
  ChunkSize c;
  const uint64_t want[] = {32, 16, 8, 4, 4};
  for (uint64_t kib : want) {
    c.OnLoss(0);
    EXPECT_EQ(c.max_chunk(), kib * kKiB);
  }
  auto k = c.Next(4 * kMiB, 0, 0, 1 * kMiB, kTarget, kSrtt);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->bytes, 4 * kKiB);
}

TEST(ChunkSizeTest, DoubledAfterEachRoundTripWithoutLoss) {
  ChunkSize c;
  c.OnLoss(1000);
  c.OnLoss(1000);
  ASSERT_EQ(c.max_chunk(), 16 * kKiB);
  c.OnAck(1000 + kSrtt - 1, kSrtt);  // not yet a round trip
  EXPECT_EQ(c.max_chunk(), 16 * kKiB);
  c.OnAck(1000 + kSrtt, kSrtt);
  EXPECT_EQ(c.max_chunk(), 32 * kKiB);
  c.OnAck(1000 + kSrtt + 1, kSrtt);  // once per round trip
  EXPECT_EQ(c.max_chunk(), 32 * kKiB);
  c.OnAck(1000 + 2 * kSrtt, kSrtt);
  EXPECT_EQ(c.max_chunk(), 64 * kKiB);
  c.OnAck(1000 + 5 * kSrtt, kSrtt);  // up to 64 KiB
  EXPECT_EQ(c.max_chunk(), 64 * kKiB);
}

TEST(ChunkSizeTest, ALossRestartsTheRoundTrip) {
  ChunkSize c;
  c.OnLoss(0);
  c.OnLoss(kSrtt - 1);
  c.OnAck(kSrtt, kSrtt);  // a round trip after the first loss only
  EXPECT_EQ(c.max_chunk(), 16 * kKiB);
}

TEST(ChunkSizeTest, MaxChunkIsAParam) {
  ChunkSizeParams p;
  p.max_chunk = 10000;  // rounded down to 2 units
  ChunkSize c(p);
  EXPECT_EQ(c.max_chunk(), 8 * kKiB);
}

TEST(ChunkSizeTest, HintWhenTheChunkFillsTheWindowOrEndsTheQueue) {
  EXPECT_TRUE(ChunkSize::Hint(64 * kKiB, 64 * kKiB, false));
  EXPECT_TRUE(ChunkSize::Hint(512, 4096, false));  // one unit past a min
  EXPECT_TRUE(ChunkSize::Hint(64 * kKiB, 8 * kKiB, true));
  EXPECT_FALSE(ChunkSize::Hint(64 * kKiB, 8 * kKiB, false));
}

// A spurious RTO's halving undone (rto_undo.h): back to what it was, never
// below what it is, never above the parameter.
TEST(ChunkSizeTest, UndoRestoresTheMaxChunkBeforeTheLoss) {
  ChunkSize c;
  const uint64_t before = c.max_chunk();
  c.OnLoss(0);
  c.OnLoss(0);
  ASSERT_EQ(c.max_chunk(), before / 4);
  c.Undo(before);
  EXPECT_EQ(c.max_chunk(), before);
  c.Undo(4096);
  EXPECT_EQ(c.max_chunk(), before);
  c.Undo(before * 4);
  EXPECT_EQ(c.max_chunk(), before);
}

}  // namespace
}  // namespace vrdma::policy::reliability
