// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/reliable_rnic/active_set.h"

#include <gtest/gtest.h>

#include <vector>

namespace vrdma::reliable {
namespace {

std::vector<uint32_t> Of(std::span<const uint32_t> s) {
  return {s.begin(), s.end()};
}

TEST(ActiveSetTest, EachSlotOnceInTheOrderAdded) {
  ActiveSet a;
  a.Resize(8);
  a.Add(5);
  a.Add(2);
  a.Add(5);
  a.Add(9);  // out of range
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(a.contains(5));
  EXPECT_FALSE(a.contains(9));
  EXPECT_EQ(Of(a.Take()), (std::vector<uint32_t>{5, 2}));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_FALSE(a.contains(5));
}

TEST(ActiveSetTest, WhatIsAddedWhileWalkingATakeIsTheNextTurns) {
  ActiveSet a;
  a.Resize(4);
  a.Add(1);
  a.Add(3);
  std::vector<uint32_t> walked;
  for (uint32_t s : a.Take()) {
    walked.push_back(s);
    a.Add(s);  // still busy
    a.Add(0);  // woken by it
  }
  EXPECT_EQ(walked, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(Of(a.Take()), (std::vector<uint32_t>{1, 0, 3}));
  EXPECT_TRUE(Of(a.Take()).empty());
}

TEST(ActiveSetTest, EveryTurnKeepsItsCapacity) {
  ActiveSet a;
  a.Resize(64);
  for (int turn = 0; turn < 100; ++turn) {
    for (uint32_t s = 0; s < 64; ++s) a.Add(s);
    EXPECT_EQ(a.Take().size(), 64u);
  }
}

// Turn: the set's slots pumped once each, kept while busy; a sweep pumps
// the live slots outside the set and counts the busy ones as missed.
TEST(ActiveSetTest, ATurnPumpsTheSetAndASweepFindsMissedWakes) {
  ActiveSet a;
  a.Resize(6);
  const std::vector<bool> live = {true, false, true, true, false, true};
  std::vector<int> pumped(6, 0);
  std::vector<bool> work = {false, false, true, true, false, false};
  auto exists = [&](uint32_t s) { return static_cast<bool>(live[s]); };
  auto pump = [&](uint32_t s) {
    ++pumped[s];
    return static_cast<bool>(work[s]);
  };
  uint64_t missed = 0;
  a.Add(2);  // woken; 3 has work but was not
  EXPECT_TRUE(a.Turn(false, 4, exists, pump, &missed));
  EXPECT_EQ(pumped, (std::vector<int>{0, 0, 1, 0, 0, 0}));
  EXPECT_TRUE(a.contains(2));  // still busy
  EXPECT_EQ(missed, 0u);
  EXPECT_TRUE(a.Turn(true, 4, exists, pump, &missed));
  // The sweep pumped 0, 3 and 5 (live, not in the set), then the set: 2
  // and the missed 3.
  EXPECT_EQ(pumped, (std::vector<int>{1, 0, 2, 2, 0, 1}));
  EXPECT_EQ(missed, 1u);
  work = {false, false, false, false, false, false};
  EXPECT_FALSE(a.Turn(false, 4, exists, pump, &missed));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_FALSE(a.Turn(false, 4, exists, pump, &missed));
  EXPECT_EQ(pumped, (std::vector<int>{1, 0, 3, 3, 0, 1}));
}

}  // namespace
}  // namespace vrdma::reliable
