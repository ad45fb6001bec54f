// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The lane queue pops in exactly the order of one (time, sequence) heap,
// whatever lanes the events name and however their times interleave.
#include "backend/rnic_model/event_queue.h"

#include <gtest/gtest.h>

#include <queue>
#include <random>
#include <tuple>
#include <vector>

namespace vrdma::model {
namespace {

TEST(EventQueue, PopsInTheOrderOfOneTimeSequenceHeap) {
  std::mt19937_64 rng(7);
  EventQueue q;
  using Key = std::tuple<Picos, uint64_t, uint64_t>;  // time, seq, payload
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ref;
  uint64_t seq = 0;
  Picos now = 0;
  for (int step = 0; step < 200000; ++step) {
    if (ref.empty() || rng() % 3 != 0) {
      // Mostly forward per lane, sometimes earlier than its last (heap),
      // many ties.
      const Picos t = now + rng() % 50;
      const uint32_t lane = static_cast<uint32_t>(rng() % 80);  // beyond kLanes too
      q.Push(t, 0, 0, seq, lane);
      ref.emplace(t, seq, seq);
      ++seq;
    } else {
      ASSERT_FALSE(q.empty());
      const Event e = q.Pop();
      const Key want = ref.top();
      ref.pop();
      ASSERT_EQ(e.time, std::get<0>(want)) << "step " << step;
      ASSERT_EQ(e.b, std::get<2>(want)) << "step " << step;
      now = e.time;
    }
    ASSERT_EQ(q.size(), ref.size());
  }
}

}  // namespace
}  // namespace vrdma::model
