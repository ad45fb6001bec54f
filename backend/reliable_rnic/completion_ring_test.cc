// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// CompletionRing: order, capacity, wrap, against a std::deque.
#include "backend/reliable_rnic/completion_ring.h"

#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <random>

namespace vrdma::reliable {
namespace {

Completion C(uint64_t wr_id) {
  Completion c;
  c.wr_id = wr_id;
  c.qpn = static_cast<uint32_t>(wr_id * 3 + 1);
  c.byte_len = static_cast<uint32_t>(wr_id * 7);
  return c;
}

TEST(CompletionRingTest, OldestFirst) {
  CompletionRing ring(8);
  for (uint64_t i = 1; i <= 5; ++i) ASSERT_TRUE(ring.Push(C(i)));
  EXPECT_EQ(ring.size(), 5u);
  std::array<Completion, 3> out;
  ASSERT_EQ(ring.Pop(out), 3);  // fewer than it holds: the oldest three
  EXPECT_EQ(out[0].wr_id, 1u);
  EXPECT_EQ(out[1].wr_id, 2u);
  EXPECT_EQ(out[2].wr_id, 3u);
  EXPECT_EQ(out[2].qpn, 10u);
  EXPECT_EQ(out[2].byte_len, 21u);
  ASSERT_EQ(ring.Pop(out), 2);
  EXPECT_EQ(out[0].wr_id, 4u);
  EXPECT_EQ(out[1].wr_id, 5u);
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.Pop(out), 0);
  EXPECT_EQ(ring.produced(), 5u);
}

TEST(CompletionRingTest, FullRingRefusesAndKeepsWhatItHas) {
  CompletionRing ring(5);  // rounded up
  EXPECT_EQ(ring.capacity(), 8u);
  EXPECT_EQ(CompletionRing::BytesFor(5),
            sizeof(CompletionRing) + 8 * sizeof(Completion));
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(ring.Push(C(i)));
  EXPECT_FALSE(ring.Push(C(99)));
  EXPECT_FALSE(ring.Push(C(100)));
  EXPECT_EQ(ring.size(), 8u);
  EXPECT_EQ(ring.produced(), 8u);
  std::array<Completion, 16> out;
  ASSERT_EQ(ring.Pop(out), 8);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(out[i].wr_id, i);
  // Room again once polled.
  EXPECT_TRUE(ring.Push(C(8)));
  EXPECT_EQ(CompletionRing(0).capacity(), 1u);
}

// Pushes and pops in random batches (fixed seed) wrap the indices many
// times; what comes out is what a deque of the accepted pushes says.
TEST(CompletionRingTest, WrapsInOrder) {
  CompletionRing ring(4);
  std::deque<uint64_t> model;
  std::mt19937_64 rng(15);
  uint64_t next = 0, popped = 0, refused = 0;
  for (int round = 0; round < 5000; ++round) {
    const int pushes = static_cast<int>(rng() % 6);
    for (int i = 0; i < pushes; ++i) {
      const bool ok = ring.Push(C(next));
      EXPECT_EQ(ok, model.size() < 4) << round;
      if (ok) {
        model.push_back(next);
      } else {
        ++refused;
      }
      ++next;
    }
    std::array<Completion, 3> out;
    const size_t want = rng() % 4;
    const int n = ring.Pop(std::span<Completion>(out.data(), want));
    ASSERT_EQ(static_cast<size_t>(n), std::min(want, model.size() + 0))
        << round;
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(out[i].wr_id, model.front()) << round;
      model.pop_front();
      ++popped;
    }
    ASSERT_EQ(ring.size(), model.size());
  }
  EXPECT_GT(popped, 1000u);  // the indices went round the 4 slots many times
  EXPECT_GT(refused, 0u);
  EXPECT_EQ(ring.produced(), next - refused);
}

}  // namespace
}  // namespace vrdma::reliable
