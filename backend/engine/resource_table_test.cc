// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/resource_table.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backend/engine/key_map.h"

namespace vrdma::engine {
namespace {

struct Obj {
  int v;
};

TEST(ResourceTableTest, HandlesAreNeverZeroAndResolve) {
  ResourceTable<Obj> t(4);
  std::set<uint32_t> seen;
  for (int i = 0; i < 4; ++i) {
    Result<uint32_t> h = t.Insert(std::make_unique<Obj>(Obj{i}));
    ASSERT_TRUE(h.ok());
    EXPECT_NE(*h, 0u);
    EXPECT_TRUE(seen.insert(*h).second);
    ASSERT_NE(t.Lookup(*h), nullptr);
    EXPECT_EQ(t.Lookup(*h)->v, i);
  }
  EXPECT_TRUE(t.full());
  EXPECT_EQ(t.size(), 4u);
}

TEST(ResourceTableTest, ExhaustedTableRefuses) {
  ResourceTable<Obj> t(2);
  ASSERT_TRUE(t.Insert(std::make_unique<Obj>()).ok());
  ASSERT_TRUE(t.Insert(std::make_unique<Obj>()).ok());
  Result<uint32_t> h = t.Insert(std::make_unique<Obj>());
  EXPECT_EQ(h.status(), Status::kNoResource);
  EXPECT_EQ(t.PeekNextHandle().status(), Status::kNoResource);
}

TEST(ResourceTableTest, StaleHandleFailsAfterSlotReuse) {
  ResourceTable<Obj> t(1);
  uint32_t h1 = *t.Insert(std::make_unique<Obj>(Obj{1}));
  ASSERT_NE(t.Remove(h1), nullptr);
  EXPECT_EQ(t.Lookup(h1), nullptr);
  EXPECT_EQ(t.Remove(h1), nullptr);  // double destroy
  uint32_t h2 = *t.Insert(std::make_unique<Obj>(Obj{2}));
  EXPECT_EQ(HandleIndex(h1), HandleIndex(h2));  // same slot
  EXPECT_NE(h1, h2);                            // new generation
  EXPECT_EQ(t.Lookup(h1), nullptr);
  ASSERT_NE(t.Lookup(h2), nullptr);
  EXPECT_EQ(t.Lookup(h2)->v, 2);
}

TEST(ResourceTableTest, PeekMatchesInsert) {
  ResourceTable<Obj> t(3);
  uint32_t a = *t.Insert(std::make_unique<Obj>());
  (void)t.Remove(a);
  uint32_t peek = *t.PeekNextHandle();
  EXPECT_EQ(*t.Insert(std::make_unique<Obj>()), peek);
}

TEST(ResourceTableTest, ForeignAndMadeUpHandles) {
  ResourceTable<Obj> mine(8);
  ResourceTable<Obj> other(8);
  uint32_t h = *mine.Insert(std::make_unique<Obj>());
  (void)h;
  uint32_t foreign = *other.Insert(std::make_unique<Obj>());
  (void)other.Remove(foreign);
  uint32_t foreign2 = *other.Insert(std::make_unique<Obj>());  // generation 2
  const uint32_t cases[] = {
      0u,               // never valid
      0xffffffffu,      // index out of range
      8u | (1u << 16),  // index == capacity
      5u | (1u << 16),  // free slot
      HandleIndex(h),   // right index, generation 0
      foreign2,         // another table's generation on our slot 0
      h ^ (1u << 16),   // wrong generation
  };
  for (uint32_t c : cases) EXPECT_EQ(mine.Lookup(c), nullptr) << std::hex << c;
}

TEST(ResourceTableTest, GenerationWrapsSkippingZero) {
  ResourceTable<Obj> t(1);
  uint32_t last = 0;
  for (int i = 0; i < 0x10005; ++i) {
    uint32_t h = *t.Insert(std::make_unique<Obj>());
    EXPECT_NE(HandleGeneration(h), 0u);
    EXPECT_NE(h, last);
    last = h;
    (void)t.Remove(h);
  }
}

TEST(ResourceTableTest, CapacityClamped) {
  ResourceTable<Obj> t(1u << 20);
  EXPECT_EQ(t.capacity(), kMaxTableCapacity);
}

TEST(KeyMapTest, InsertFindEraseWithChurn) {
  KeyMap m(64);
  for (uint32_t k = 0; k < 64; ++k) ASSERT_TRUE(m.Insert(k * 7 + 1, k));
  EXPECT_FALSE(m.Insert(9999, 1));  // full
  for (uint32_t k = 0; k < 64; k += 2) ASSERT_TRUE(m.Erase(k * 7 + 1));
  EXPECT_FALSE(m.Insert(3 * 7 + 1, 5));  // duplicate key, map not full
  EXPECT_FALSE(m.Erase(12345));
  for (uint32_t k = 0; k < 64; ++k) {
    std::optional<uint32_t> v = m.Find(k * 7 + 1);
    if (k % 2 == 0) {
      EXPECT_FALSE(v.has_value()) << k;
    } else {
      ASSERT_TRUE(v.has_value()) << k;
      EXPECT_EQ(*v, k);
    }
  }
  EXPECT_EQ(m.size(), 32u);
  // Reinsert into the holes; everything still findable.
  for (uint32_t k = 0; k < 64; k += 2)
    ASSERT_TRUE(m.Insert(k * 7 + 1, k + 1000));
  for (uint32_t k = 0; k < 64; ++k) {
    ASSERT_TRUE(m.Find(k * 7 + 1).has_value());
    EXPECT_EQ(*m.Find(k * 7 + 1), k % 2 ? k : k + 1000);
  }
}

TEST(KeyMapTest, RandomizedAgainstStdMap) {
  KeyMap m(200);
  std::map<uint32_t, uint32_t> ref;
  uint32_t x = 12345;
  for (int i = 0; i < 20000; ++i) {
    x = x * 1103515245 + 12345;
    uint32_t key = (x >> 8) % 512;
    if ((x & 3) == 0) {
      EXPECT_EQ(m.Erase(key), ref.erase(key) == 1);
    } else if (ref.size() < 200 && !ref.count(key)) {
      ASSERT_TRUE(m.Insert(key, i));
      ref[key] = i;
    }
  }
  for (uint32_t k = 0; k < 512; ++k) {
    auto it = ref.find(k);
    std::optional<uint32_t> v = m.Find(k);
    ASSERT_EQ(v.has_value(), it != ref.end()) << k;
    if (v) {
      EXPECT_EQ(*v, it->second);
    }
  }
}

}  // namespace
}  // namespace vrdma::engine
