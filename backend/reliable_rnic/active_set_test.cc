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

// Turn: the set's slots due by now pumped once each, kept while pending;
// a sweep pumps the live slots outside the set (the pending ones are
// missed wakes) and the sleeping ones early (those that did something had
// a missed deadline).
TEST(ActiveSetTest, ATurnPumpsTheDueAndASweepFindsMissedWakesAndDeadlines) {
  constexpr uint64_t kIdle = ActiveSet::kIdle;
  ActiveSet a;
  a.Resize(6);
  const std::vector<bool> live = {true, false, true, true, false, true};
  std::vector<int> pumped(6, 0);
  std::vector<uint64_t> next(6, kIdle);  // what each pump answers
  next[2] = 0;                           // 2: work at once
  next[3] = 0;                           // 3: the same, never woken
  auto exists = [&](uint32_t s) { return static_cast<bool>(live[s]); };
  auto pump = [&](uint32_t s) {
    ++pumped[s];
    return next[s];
  };
  std::vector<bool> did(6, false);  // what an early pump finds
  int early = 0;
  auto pump_early = [&](uint32_t s, uint64_t* due) {
    ++early;
    *due = pump(s);
    return static_cast<bool>(did[s]);
  };
  uint64_t missed = 0, missed_deadlines = 0;
  a.Add(2);  // woken; 3 has work but was not
  EXPECT_TRUE(a.Turn(100, false, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(pumped, (std::vector<int>{0, 0, 1, 0, 0, 0}));
  EXPECT_TRUE(a.contains(2));  // still due
  EXPECT_EQ(missed, 0u);
  EXPECT_TRUE(a.Turn(200, true, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  // The sweep pumped 0, 3 and 5 (live, not in the set), then the set: 2
  // and the missed 3.
  EXPECT_EQ(pumped, (std::vector<int>{1, 0, 2, 2, 0, 1}));
  EXPECT_EQ(missed, 1u);

  // 2 sleeps until 1000: the turns before cost it nothing, the one at
  // 1000 pumps it; woken, it is pumped at once. A turn says whether it
  // pumped anything or left a slot due at once: one that only sleepers
  // saw says no, and next_due says when one is.
  next = {kIdle, kIdle, 1000, kIdle, kIdle, kIdle};
  EXPECT_TRUE(a.Turn(300, false, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(a.size(), 1u);  // 3 left, 2 sleeps
  EXPECT_EQ(a.due(2), 1000u);
  EXPECT_EQ(a.next_due(), 1000u);
  EXPECT_FALSE(a.Turn(999, false, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(pumped, (std::vector<int>{1, 0, 3, 3, 0, 1}));
  EXPECT_TRUE(a.Turn(1000, false, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(pumped[2], 4);
  a.Add(2);
  EXPECT_EQ(a.due(2), 0u);
  EXPECT_TRUE(a.Turn(1001, false, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(pumped[2], 5);
  EXPECT_EQ(a.due(2), 1000u);  // its next answer: asleep again, overdue
  EXPECT_EQ(a.next_due(), 1000u);
  next[2] = 5000;
  EXPECT_TRUE(a.Turn(1002, false, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(a.due(2), 5000u);
  EXPECT_EQ(a.next_due(), 5000u);

  // A sweep pumps the sleeper early: nothing done is no missed deadline;
  // something done is one.
  EXPECT_FALSE(a.Turn(2000, true, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(early, 1);
  EXPECT_EQ(missed_deadlines, 0u);
  did[2] = true;
  next[2] = 7000;
  EXPECT_FALSE(a.Turn(3000, true, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(early, 2);
  EXPECT_EQ(missed_deadlines, 1u);
  EXPECT_EQ(a.due(2), 7000u);
  EXPECT_EQ(missed, 1u);

  // Nothing pending: the set empties (the turn pumped it).
  next[2] = kIdle;
  a.Add(2);
  EXPECT_TRUE(a.Turn(4000, false, 4, exists, pump, pump_early, &missed,
                     &missed_deadlines));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_FALSE(a.Turn(4001, false, 4, exists, pump, pump_early, &missed,
                      &missed_deadlines));
  EXPECT_EQ(a.next_due(), kIdle);
}

// The sleepers: a turn pumps exactly those due by then, each once, the
// earliest first; a wake moves one to the list, an earlier time moves it
// forward, a later one from an early pump back; none of it allocates.
TEST(ActiveSetTest, SleepersArePumpedWhenDueAndOnlyThen) {
  constexpr uint32_t kSlots = 257;
  constexpr uint64_t kIdle = ActiveSet::kIdle;
  ActiveSet a;
  a.Resize(kSlots);
  std::vector<uint64_t> at(kSlots);
  uint64_t x = 12345;
  for (uint32_t s = 0; s < kSlots; ++s) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    at[s] = 1 + (x >> 33) % 10000;  // some equal
    a.AddAt(s, at[s]);
  }
  at[7] = 0;
  a.Add(7);       // woken: due at once
  at[9] = 5;
  a.AddAt(9, 5);  // brought forward (or already earlier)
  a.AddAt(11, at[11] + 1);  // later: it keeps its earlier time
  EXPECT_EQ(a.size(), kSlots);
  std::vector<int> pumped(kSlots, 0);
  std::vector<uint64_t> pumped_at(kSlots, 0);
  auto exists = [](uint32_t) { return true; };
  uint64_t now = 0;
  auto pump = [&](uint32_t s) {
    ++pumped[s];
    pumped_at[s] = now;
    EXPECT_LE(at[s], now) << "slot " << s;
    return kIdle;
  };
  auto never = [](uint32_t, uint64_t*) { return false; };
  uint64_t missed = 0, deadlines = 0;
  for (now = 0; now <= 10000; now += 37) {
    a.Turn(now, false, kSlots, exists, pump, never, &missed, &deadlines);
    for (uint32_t s = 0; s < kSlots; ++s) {
      ASSERT_EQ(pumped[s], at[s] <= now ? 1 : 0) << "slot " << s << " at " << now;
    }
  }
  a.Turn(now, false, kSlots, exists, pump, never, &missed, &deadlines);
  EXPECT_EQ(a.size(), 0u);
  for (uint32_t s = 0; s < kSlots; ++s) {
    EXPECT_LT(pumped_at[s], at[s] + 37) << "slot " << s;  // at its turn
  }
  EXPECT_EQ(missed, 0u);

  // Back to sleep after a pump, and an early pump that moves a sleeper
  // later (the sweep): it is pumped at the new time, not the old.
  std::vector<uint64_t> answer(kSlots, kIdle);
  auto pump2 = [&](uint32_t s) {
    ++pumped[s];
    return answer[s];
  };
  pumped.assign(kSlots, 0);
  a.AddAt(3, 20'000);
  a.AddAt(4, 20'500);
  auto later = [&](uint32_t s, uint64_t* due) {
    *due = s == 3 ? 30'000 : 20'500;
    return false;
  };
  a.Turn(15'000, true, 2, [](uint32_t s) { return s == 3 || s == 4; }, pump2,
         later, &missed, &deadlines);
  EXPECT_EQ(a.due(3), 30'000u);
  a.Turn(20'600, false, kSlots, exists, pump2, never, &missed, &deadlines);
  EXPECT_EQ(pumped[3], 0);
  EXPECT_EQ(pumped[4], 1);
  answer[3] = 40'000;  // pumped at 30'000, asleep again
  a.Turn(30'000, false, kSlots, exists, pump2, never, &missed, &deadlines);
  EXPECT_EQ(pumped[3], 1);
  EXPECT_EQ(a.due(3), 40'000u);
  EXPECT_TRUE(a.contains(3));
  EXPECT_EQ(a.size(), 1u);
}

}  // namespace
}  // namespace vrdma::reliable
