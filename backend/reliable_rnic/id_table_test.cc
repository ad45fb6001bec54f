// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// IdTable: against a std::map under churn (fixed seed), its capacity, its
// tombstones, and a reader that must always find the live keys while the
// writer churns others.
#include "backend/reliable_rnic/id_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace vrdma::reliable {
namespace {

struct Rec {
  uint32_t id = 0;
  uint64_t value = 0;
};

TEST(IdTableTest, InsertFindErase) {
  IdTable<Rec> t(4);
  EXPECT_EQ(t.capacity(), 4u);
  EXPECT_EQ(t.index_size(), 8u);
  ASSERT_NE(t.Insert(7, {7, 70}), nullptr);
  ASSERT_NE(t.Insert(0, {0, 1}), nullptr);  // id 0 is an id like any other
  EXPECT_EQ(t.Insert(7, {7, 71}), nullptr) << "an id is recorded once";
  ASSERT_NE(t.Find(7), nullptr);
  EXPECT_EQ(t.Find(7)->value, 70u);
  EXPECT_EQ(t.Find(0)->value, 1u);
  EXPECT_EQ(t.Find(8), nullptr);
  ASSERT_NE(t.Insert(0xffffffff, {0xffffffff, 2}), nullptr);
  ASSERT_NE(t.Insert(12, {12, 3}), nullptr);
  EXPECT_EQ(t.live(), 4u);
  EXPECT_EQ(t.Insert(13, {13, 4}), nullptr) << "full";
  EXPECT_TRUE(t.Erase(7));
  EXPECT_FALSE(t.Erase(7));
  EXPECT_EQ(t.Find(7), nullptr);
  ASSERT_NE(t.Insert(13, {13, 4}), nullptr) << "its slot is free again";
  EXPECT_EQ(t.Find(0xffffffff)->value, 2u);
  EXPECT_EQ(t.Find(13)->value, 4u);
}

TEST(IdTableTest, ErasingEverythingLeavesNoTombstones) {
  IdTable<Rec> t(64);
  for (uint32_t i = 0; i < 64; ++i)
    ASSERT_NE(t.Insert(i * 16, {i * 16, i}), nullptr);
  for (uint32_t i = 0; i < 64; i += 2) ASSERT_TRUE(t.Erase(i * 16));
  for (uint32_t i = 1; i < 64; i += 2) ASSERT_EQ(t.Find(i * 16)->value, i);
  for (uint32_t i = 1; i < 64; i += 2) ASSERT_TRUE(t.Erase(i * 16));
  EXPECT_EQ(t.live(), 0u);
  EXPECT_EQ(t.tombstones(), 0u);
}

// Random inserts and erases of ids from a small range (so they collide and
// come back), checked against a map after every operation.
TEST(IdTableTest, ChurnAgreesWithAMap) {
  constexpr uint32_t kCap = 100;
  IdTable<Rec> t(kCap);
  std::map<uint32_t, uint64_t> model;
  std::mt19937_64 rng(10);
  uint64_t max_tombstones = 0, max_distance = 0;
  for (int op = 0; op < 200000; ++op) {
    const uint32_t id =
        static_cast<uint32_t>(rng() % 400) * 256;  // lower ids are sparse too
    if (rng() % 2 == 0) {
      const bool inserted = t.Insert(id, {id, uint64_t(op)}) != nullptr;
      const bool expect = model.size() < kCap && !model.contains(id);
      ASSERT_EQ(inserted, expect) << op;
      if (inserted) model[id] = op;
    } else {
      ASSERT_EQ(t.Erase(id), model.erase(id) == 1) << op;
    }
    ASSERT_EQ(t.live(), model.size());
    if (op % 1000 == 0) {
      for (uint32_t k = 0; k < 400; ++k) {
        const Rec* r = t.Find(k * 256);
        auto it = model.find(k * 256);
        ASSERT_EQ(r != nullptr, it != model.end()) << op << " id " << k * 256;
        if (r != nullptr) {
          ASSERT_EQ(r->value, it->second);
          max_distance = std::max(max_distance, t.Distance(k * 256));
        }
      }
      max_tombstones = std::max(max_tombstones, t.tombstones());
    }
  }
  // A live id stays a few entries from its home (its Insert took the first
  // entry not live), and the sweep keeps tombstones few: empty entries
  // remain, where misses end.
  EXPECT_LE(max_distance, 16u);
  EXPECT_LE(max_tombstones, 40u);
  std::printf(
      "tombstones at most %llu of %llu entries; live ids at most %llu from "
      "home\n",
      static_cast<unsigned long long>(max_tombstones),
      static_cast<unsigned long long>(t.index_size()),
      static_cast<unsigned long long>(max_distance));
}

// The data path reads while a control call writes (a lower RNIC whose
// control calls run beside the data path): keys that stay are found with
// their values every time, whatever the writer inserts and erases.
TEST(IdTableTest, ReaderFindsLiveKeysWhileTheWriterChurns) {
  constexpr uint32_t kStable = 32;
  IdTable<Rec> t(128);
  for (uint32_t i = 0; i < kStable; ++i)
    ASSERT_NE(t.Insert(i * 3, {i * 3, i + 1000}), nullptr);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> misses{0}, reads{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (uint32_t i = 0; i < kStable; ++i) {
        const Rec* r = t.Find(i * 3);
        if (r == nullptr || r->id != i * 3 || r->value != i + 1000) ++misses;
        ++reads;
      }
    }
  });
  std::mt19937_64 rng(3);
  std::vector<uint32_t> churn;
  for (int op = 0; op < 300000 || reads.load() < 100000; ++op) {
    if (churn.size() < 90 && (churn.empty() || rng() % 2 == 0)) {
      const uint32_t id = 1000000 + static_cast<uint32_t>(rng() % 5000);
      if (t.Insert(id, {id, 1}) != nullptr) churn.push_back(id);
    } else {
      const size_t k = rng() % churn.size();
      ASSERT_TRUE(t.Erase(churn[k]));
      churn[k] = churn.back();
      churn.pop_back();
    }
  }
  stop = true;
  reader.join();
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_GE(reads.load(), 100000u);
}

}  // namespace
}  // namespace vrdma::reliable
