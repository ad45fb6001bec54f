// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/lib/rxe_ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace vrdma::guest {
namespace {

TEST(RxeRingTest, BytesCoverHeaderAndElementsInWholePages) {
  EXPECT_EQ(RxeRing::Bytes(4, 6), 4096u);          // 384 + 1024
  EXPECT_EQ(RxeRing::Bytes(6, 6), 8192u);          // 384 + 4096
  EXPECT_EQ(RxeRing::Bytes(8, 8), 69632u);         // 384 + 65536 -> 17 pages
}

TEST(RxeRingTest, HeaderIsLibrxeLayout) {
  std::vector<uint8_t> mem(RxeRing::Bytes(3, 6), 0);
  RxeRing ring;
  ring.Init(mem.data(), 3, 6);
  uint32_t w[2];
  std::memcpy(w, mem.data(), 8);
  EXPECT_EQ(w[0], 6u);  // log2_elem_size
  EXPECT_EQ(w[1], 7u);  // index_mask
  EXPECT_EQ(ring.capacity(), 7u);
  // The first element is at byte 384.
  EXPECT_EQ(ring.ProducerSlot(), mem.data() + VIRTIO_RDMA_RING_HDR_SIZE);
}

// The driver produces, a "device" (raw header access, as the backend would)
// consumes: indices are masked, one slot stays empty, elements land at
// data + (index << log2_elem_size).
TEST(RxeRingTest, ProducerWrapsAndKeepsOneSlotEmpty) {
  std::vector<uint8_t> mem(RxeRing::Bytes(2, 6), 0);
  RxeRing ring;
  ring.Init(mem.data(), 2, 6);
  auto* hdr = reinterpret_cast<rxe_queue_buf*>(mem.data());
  uint32_t written = 0;
  for (int round = 0; round < 5; ++round) {
    // Fill to capacity (3 of 4 slots).
    for (int i = 0; i < 3; ++i) {
      ASSERT_FALSE(ring.Full());
      std::memcpy(ring.ProducerSlot(), &written, 4);
      ring.Produce();
      ++written;
    }
    EXPECT_TRUE(ring.Full());
    EXPECT_EQ(ring.FreeSlots(), 0u);
    EXPECT_LE(hdr->producer_index, hdr->index_mask);
    // Device consumes everything.
    uint32_t expect = written - 3;
    while (hdr->consumer_index != hdr->producer_index) {
      uint32_t v;
      std::memcpy(&v, hdr->data + (uint64_t{hdr->consumer_index} << 6), 4);
      EXPECT_EQ(v, expect++);
      hdr->consumer_index = (hdr->consumer_index + 1) & hdr->index_mask;
    }
    EXPECT_EQ(ring.FreeSlots(), 3u);
  }
}

// The device produces CQEs, the driver consumes them.
TEST(RxeRingTest, ConsumerSeesDeviceEntriesInOrder) {
  std::vector<uint8_t> mem(RxeRing::Bytes(3, 6), 0);
  RxeRing ring;
  ring.Init(mem.data(), 3, 6);
  auto* hdr = reinterpret_cast<rxe_queue_buf*>(mem.data());
  EXPECT_TRUE(ring.Empty());
  uint32_t seq = 0;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 5; ++i) {
      std::memcpy(hdr->data + (uint64_t{hdr->producer_index} << 6), &seq, 4);
      ++seq;
      hdr->producer_index = (hdr->producer_index + 1) & hdr->index_mask;
    }
    EXPECT_EQ(ring.Count(), 5u);
    for (uint32_t want = seq - 5; want < seq; ++want) {
      ASSERT_FALSE(ring.Empty());
      uint32_t v;
      std::memcpy(&v, ring.ConsumerSlot(), 4);
      EXPECT_EQ(v, want);
      ring.Consume();
      EXPECT_EQ(hdr->consumer_index, (want + 1) & 7u);
    }
    EXPECT_TRUE(ring.Empty());
  }
}

}  // namespace
}  // namespace vrdma::guest
