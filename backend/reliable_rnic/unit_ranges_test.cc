// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/reliable_rnic/unit_ranges.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace vrdma::reliable {
namespace {

// The ranges a set of units makes: sorted, disjoint, not touching.
std::vector<std::pair<uint32_t, uint32_t>> RangesOf(const std::vector<bool>& got) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t u = 0; u < got.size(); ++u) {
    if (!got[u]) continue;
    if (!out.empty() && out.back().second == u) {
      ++out.back().second;
    } else {
      out.emplace_back(u, u + 1);
    }
  }
  return out;
}

std::vector<std::pair<uint32_t, uint32_t>> RangesOf(const UnitRanges& r) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t i = 0; i < r.size(); ++i) out.emplace_back(r[i].begin, r[i].end);
  return out;
}

TEST(UnitRangesTest, InOrderPiecesMakeOneRange) {
  UnitRanges r;
  ASSERT_TRUE(r.Insert({0, 4}));
  ASSERT_TRUE(r.Insert({4, 5}));  // touching: merged
  ASSERT_TRUE(r.Insert({3, 9}));  // overlapping the end
  EXPECT_TRUE(r.Exactly(9));
  EXPECT_TRUE(r.Covered({2, 9}));
  EXPECT_FALSE(r.Covered({8, 10}));
}

TEST(UnitRangesTest, AFullSetRefusesARangeMoreButTakesAMerge) {
  UnitRanges r;
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(r.Insert({2 * i, 2 * i + 1}, 4));
  EXPECT_FALSE(r.Insert({9, 10}, 4));  // a fifth range
  EXPECT_EQ(r.size(), 4u);
  EXPECT_TRUE(r.Insert({6, 8}, 4));  // extends the last
  EXPECT_TRUE(r.Insert({1, 2}, 4));  // joins the first two
  EXPECT_EQ(RangesOf(r), (std::vector<std::pair<uint32_t, uint32_t>>{
                             {0, 3}, {4, 5}, {6, 8}}));
  EXPECT_FALSE(UnitRanges().Insert({0, 1}, 0));
}

// Random pieces of a 64-unit message against a bitmap: the ranges are
// always the bitmap's, and an insert is refused exactly when it would make
// more than max ranges (then nothing changes).
TEST(UnitRangesTest, RandomPiecesMatchABitmap) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    const uint32_t max = 1 + rng() % UnitRanges::kMaxRanges;
    UnitRanges r;
    std::vector<bool> got(64, false);
    for (int step = 0; step < 40; ++step) {
      const uint32_t begin = rng() % 64;
      // Mostly in order, as pieces come.
      const uint32_t len = 1 + rng() % 4;
      const uint32_t end = std::min<uint32_t>(64, begin + len);
      std::vector<bool> next = got;
      for (uint32_t u = begin; u < end; ++u) next[u] = true;
      const bool fits = RangesOf(next).size() <= max;
      ASSERT_EQ(r.Insert({begin, end}, max), fits)
          << "round " << round << " step " << step;
      if (fits) got = next;
      ASSERT_EQ(RangesOf(r), RangesOf(got)) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace vrdma::reliable
