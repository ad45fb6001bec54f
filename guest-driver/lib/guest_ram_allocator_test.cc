// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/lib/guest_ram_allocator.h"

#include <gtest/gtest.h>

#include <vector>

namespace vrdma::guest {
namespace {

class GuestRamAllocatorTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kBase = 0x10000;
  static constexpr uint64_t kSize = 16 * kGuestPageSize;
  std::vector<uint8_t> ram_ = std::vector<uint8_t>(kSize, 0xaa);
  GuestRamAllocator alloc_{ram_.data(), kBase, kSize};
};

TEST_F(GuestRamAllocatorTest, RoundsToPagesAndMapsHostPointers) {
  auto a = alloc_.Allocate(1);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->gpa, kBase);
  EXPECT_EQ(a->size, kGuestPageSize);
  EXPECT_EQ(a->host, ram_.data());
  auto b = alloc_.Allocate(kGuestPageSize + 1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gpa, kBase + kGuestPageSize);
  EXPECT_EQ(b->size, 2 * kGuestPageSize);
  EXPECT_EQ(b->host, ram_.data() + kGuestPageSize);
  EXPECT_EQ(alloc_.free_bytes(), kSize - 3 * kGuestPageSize);
}

TEST_F(GuestRamAllocatorTest, ZeroesWhatItHandsOut) {
  auto a = alloc_.Allocate(100);
  ASSERT_TRUE(a);
  for (uint64_t i = 0; i < a->size; ++i) ASSERT_EQ(a->host[i], 0) << i;
}

TEST_F(GuestRamAllocatorTest, PageListIsEveryPageInOrder) {
  auto a = alloc_.Allocate(3 * kGuestPageSize);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->page_gpas(),
            (std::vector<uint64_t>{kBase, kBase + 4096, kBase + 8192}));
}

TEST_F(GuestRamAllocatorTest, ExhaustionAndReuseAfterFree) {
  auto a = alloc_.Allocate(kSize);
  ASSERT_TRUE(a);
  EXPECT_FALSE(alloc_.Allocate(1));
  alloc_.Free(*a);
  EXPECT_EQ(alloc_.free_bytes(), kSize);
  EXPECT_TRUE(alloc_.Allocate(kSize));
}

TEST_F(GuestRamAllocatorTest, CoalescesNeighboursOnFree) {
  auto a = alloc_.Allocate(4 * kGuestPageSize);
  auto b = alloc_.Allocate(4 * kGuestPageSize);
  auto c = alloc_.Allocate(8 * kGuestPageSize);
  ASSERT_TRUE(a && b && c);
  alloc_.Free(*a);
  alloc_.Free(*c);
  // Two holes of 4 and 8 pages: 12 contiguous pages do not fit yet.
  EXPECT_FALSE(alloc_.Allocate(12 * kGuestPageSize));
  alloc_.Free(*b);
  auto all = alloc_.Allocate(kSize);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->gpa, kBase);
}

TEST_F(GuestRamAllocatorTest, DoubleAndForeignFreesAreIgnored) {
  auto a = alloc_.Allocate(kGuestPageSize);
  ASSERT_TRUE(a);
  alloc_.Free(*a);
  alloc_.Free(*a);
  GuestBuffer foreign{kBase + 5 * kGuestPageSize, nullptr, kGuestPageSize};
  alloc_.Free(foreign);
  EXPECT_EQ(alloc_.bad_frees(), 2u);
  EXPECT_EQ(alloc_.free_bytes(), kSize);
}

TEST_F(GuestRamAllocatorTest, TooLargeFails) {
  EXPECT_FALSE(alloc_.Allocate(kSize + 1));
  EXPECT_FALSE(alloc_.Allocate(~uint64_t{0}));
}

}  // namespace
}  // namespace vrdma::guest
