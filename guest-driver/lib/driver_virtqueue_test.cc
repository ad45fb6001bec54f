// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The driver side against a minimal device written from the virtio spec
// (not against our own device code, so a shared misreading would show).
#include "guest-driver/lib/driver_virtqueue.h"

#define VIRTIO_RING_NO_LEGACY
#include <linux/virtio_ring.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace vrdma::guest {
namespace {

constexpr uint64_t kGpa = 0x100000;

// A spec-level device: walks chains through `next`, writes used elements.
class SpecDevice {
 public:
  SpecDevice(uint8_t* base, const DriverVirtqueue& vq)
      : base_(base), size_(vq.size()) {
    desc_ = reinterpret_cast<vring_desc*>(base + (vq.desc_gpa() - kGpa));
    avail_ = reinterpret_cast<vring_avail*>(base + (vq.avail_gpa() - kGpa));
    used_ = reinterpret_cast<vring_used*>(base + (vq.used_gpa() - kGpa));
  }
  struct Chain {
    uint16_t head;
    std::vector<vring_desc> descs;
  };
  bool Pop(Chain* c) {
    if (__atomic_load_n(&avail_->idx, __ATOMIC_ACQUIRE) == last_avail_) return false;
    c->head = avail_->ring[last_avail_ % size_];
    ++last_avail_;
    c->descs.clear();
    uint16_t i = c->head;
    for (int n = 0; n <= size_; ++n) {
      c->descs.push_back(desc_[i]);
      if (!(desc_[i].flags & VRING_DESC_F_NEXT)) break;
      i = desc_[i].next;
    }
    return true;
  }
  void Push(uint16_t head, uint32_t len) {
    used_->ring[used_idx_ % size_] = {head, len};
    ++used_idx_;
    __atomic_store_n(&used_->idx, used_idx_, __ATOMIC_RELEASE);
  }
  void SetNoNotify(bool on) { used_->flags = on ? VRING_USED_F_NO_NOTIFY : 0; }
  void SetAvailEvent(uint16_t v) {
    std::memcpy(&used_->ring[size_], &v, sizeof(v));  // avail_event
  }
  uint16_t avail_flags() const { return avail_->flags; }

 private:
  uint8_t* base_;
  uint16_t size_;
  vring_desc* desc_;
  vring_avail* avail_;
  vring_used* used_;
  uint16_t last_avail_ = 0;
  uint16_t used_idx_ = 0;
};

class DriverVirtqueueTest : public ::testing::Test {
 protected:
  void Init(uint16_t size, bool event_idx) {
    mem_.assign(DriverVirtqueue::RingBytes(size), 0);
    ASSERT_TRUE(vq_.Init(mem_.data(), kGpa, size, event_idx));
    dev_ = std::make_unique<SpecDevice>(mem_.data(), vq_);
  }
  std::vector<uint8_t> mem_;
  DriverVirtqueue vq_;
  std::unique_ptr<SpecDevice> dev_;
};

TEST_F(DriverVirtqueueTest, RejectsBadSizes) {
  std::vector<uint8_t> mem(1 << 20);
  DriverVirtqueue vq;
  EXPECT_FALSE(vq.Init(mem.data(), kGpa, 0, false));
  EXPECT_FALSE(vq.Init(mem.data(), kGpa, 3, false));
  EXPECT_FALSE(vq.Init(mem.data(), kGpa, 100, false));
  EXPECT_TRUE(vq.Init(mem.data(), kGpa, 128, false));
}

TEST_F(DriverVirtqueueTest, LayoutIsAlignedAndInsideRingBytes) {
  Init(256, false);
  EXPECT_EQ(vq_.desc_gpa() % 16, 0u);
  EXPECT_EQ(vq_.avail_gpa() % 2, 0u);
  EXPECT_EQ(vq_.used_gpa() % 4, 0u);
  EXPECT_LE(vq_.used_gpa() - kGpa + 6 + 8 * 256 + 2, mem_.size());
  EXPECT_EQ(mem_.size() % 4096, 0u);
}

TEST_F(DriverVirtqueueTest, ChainIsVisibleOnlyAfterPublishWithFlagsInOrder) {
  Init(8, false);
  const DriverBuf bufs[3] = {{0x1000, 16, false}, {0x2000, 8, true}, {0x3000, 64, true}};
  auto head = vq_.Add(bufs);
  ASSERT_TRUE(head);
  SpecDevice::Chain c;
  EXPECT_FALSE(dev_->Pop(&c));
  EXPECT_TRUE(vq_.Publish());
  ASSERT_TRUE(dev_->Pop(&c));
  EXPECT_EQ(c.head, *head);
  ASSERT_EQ(c.descs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.descs[i].addr, bufs[i].gpa);
    EXPECT_EQ(c.descs[i].len, bufs[i].len);
    EXPECT_EQ((c.descs[i].flags & VRING_DESC_F_WRITE) != 0, bufs[i].device_writable);
    EXPECT_EQ((c.descs[i].flags & VRING_DESC_F_NEXT) != 0, i < 2);
  }
  // The driver polls: it never asks for interrupts.
  EXPECT_EQ(dev_->avail_flags() & VRING_AVAIL_F_NO_INTERRUPT, VRING_AVAIL_F_NO_INTERRUPT);
}

TEST_F(DriverVirtqueueTest, UsedReturnsHeadLengthAndFreesDescriptors) {
  Init(4, false);
  const DriverBuf two[2] = {{0x1000, 8, false}, {0x2000, 8, true}};
  auto a = vq_.Add(two);
  auto b = vq_.Add(two);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(vq_.num_free(), 0);
  EXPECT_EQ(vq_.in_flight(), 2);  // chains, not descriptors
  EXPECT_FALSE(vq_.Add({two, 1}));  // full
  vq_.Publish();
  SpecDevice::Chain c1, c2;
  ASSERT_TRUE(dev_->Pop(&c1));
  ASSERT_TRUE(dev_->Pop(&c2));
  EXPECT_FALSE(vq_.PollUsed());
  // Out-of-order completion is legal.
  dev_->Push(c2.head, 5);
  auto u = vq_.PollUsed();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->head, *b);
  EXPECT_EQ(u->written, 5u);
  EXPECT_EQ(vq_.num_free(), 2);
  dev_->Push(c1.head, 7);
  u = vq_.PollUsed();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->head, *a);
  EXPECT_EQ(vq_.num_free(), 4);
  EXPECT_EQ(vq_.in_flight(), 0);
  EXPECT_FALSE(vq_.PollUsed());
}

TEST_F(DriverVirtqueueTest, ManyRoundsAcrossIndexWrap) {
  Init(16, false);
  uint64_t n = 0;
  for (int round = 0; round < 70000 / 16 + 10; ++round) {
    for (int i = 0; i < 16; ++i) {
      const DriverBuf b{0x1000 + uint64_t(n % 1000) * 8, 8, false};
      ASSERT_TRUE(vq_.Add({&b, 1}));
      ++n;
    }
    vq_.Publish();
    SpecDevice::Chain c;
    int popped = 0;
    while (dev_->Pop(&c)) {
      dev_->Push(c.head, 0);
      ++popped;
    }
    ASSERT_EQ(popped, 16);
    int got = 0;
    while (vq_.PollUsed()) ++got;
    ASSERT_EQ(got, 16);
    ASSERT_EQ(vq_.num_free(), 16);
  }
}

TEST_F(DriverVirtqueueTest, KickFollowsNoNotifyFlag) {
  Init(8, false);
  const DriverBuf b{0x1000, 8, false};
  dev_->SetNoNotify(true);
  ASSERT_TRUE(vq_.Add({&b, 1}));
  EXPECT_FALSE(vq_.Publish());
  dev_->SetNoNotify(false);
  ASSERT_TRUE(vq_.Add({&b, 1}));
  EXPECT_TRUE(vq_.Publish());
  // Nothing new: nothing to kick for.
  EXPECT_FALSE(vq_.Publish());
}

TEST_F(DriverVirtqueueTest, KickFollowsAvailEventWithEventIdx) {
  Init(8, true);
  const DriverBuf b{0x1000, 8, false};
  // The device wants a kick when avail idx moves past 2 (event = 2).
  dev_->SetAvailEvent(2);
  ASSERT_TRUE(vq_.Add({&b, 1}));  // idx 0 -> 1
  EXPECT_FALSE(vq_.Publish());
  ASSERT_TRUE(vq_.Add({&b, 1}));  // 1 -> 2
  EXPECT_FALSE(vq_.Publish());
  ASSERT_TRUE(vq_.Add({&b, 1}));  // 2 -> 3: crosses event 2
  EXPECT_TRUE(vq_.Publish());
  // A batch that jumps over the event also kicks.
  dev_->SetAvailEvent(4);
  ASSERT_TRUE(vq_.Add({&b, 1}));
  ASSERT_TRUE(vq_.Add({&b, 1}));  // 3 -> 5
  EXPECT_TRUE(vq_.Publish());
}

}  // namespace
}  // namespace vrdma::guest
