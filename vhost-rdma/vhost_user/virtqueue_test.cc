// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/virtqueue.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "vhost-rdma/vhost_user/eventfd_io.h"
#include "vhost-rdma/vhost_user/test_guest_ram.h"
#include "vhost-rdma/vhost_user/vring.h"

namespace vrdma::vhost {
namespace {

using testing::TestGuestRam;
using testing::TestRing;

constexpr uint64_t kRam = 1 << 20;
constexpr uint16_t kSize = 128;
constexpr uint64_t kDesc = 0x1000, kAvail = 0x2000, kUsed = 0x3000;
constexpr uint64_t kBuf = 0x10000;   // data buffers
constexpr uint64_t kTable = 0x8000;  // indirect tables

class VirtqueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = ram_.Memory();
    ASSERT_NE(memory_, nullptr);
  }
  void StartRing(bool event_idx = false, uint16_t base = 0) {
    ring_.avail()->idx = base;
    ring_.used()->idx = base;
    ASSERT_EQ(vq_.Setup(memory_, kSize, ring_.addrs(), base, event_idx), Status::kOk);
  }
  bool CallSignalled(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) return false;
    uint64_t v;
    return read(fd, &v, sizeof(v)) == sizeof(v);
  }

  TestGuestRam ram_{kRam};
  TestRing ring_{ram_, kSize, kDesc, kAvail, kUsed};
  std::shared_ptr<const GuestMemory> memory_;
  Virtqueue vq_;
};

TEST_F(VirtqueueTest, EmptyRingPopsNothing) {
  StartRing();
  EXPECT_FALSE(vq_.HasAvailable());
  EXPECT_FALSE(vq_.Pop().has_value());
}

TEST_F(VirtqueueTest, PopsChainReadsWritesAndPushes) {
  StartRing();
  std::memcpy(ram_.at(kBuf), "hello ", 6);
  std::memcpy(ram_.at(kBuf + 0x100), "world", 5);
  ring_.SetDesc(5, kBuf, 6, kVringDescFNext, 9);
  ring_.SetDesc(9, kBuf + 0x100, 5, kVringDescFNext, 2);
  ring_.SetDesc(2, kBuf + 0x200, 4, kVringDescFWrite | kVringDescFNext, 3);
  ring_.SetDesc(3, kBuf + 0x300, 8, kVringDescFWrite);
  ring_.Publish(5);
  EXPECT_TRUE(vq_.HasAvailable());

  auto got = vq_.Pop();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok());
  const DescChain& c = got->value();
  EXPECT_EQ(c.head, 5);
  EXPECT_EQ(c.num_readable, 2);
  EXPECT_EQ(c.num_writable, 2);
  EXPECT_EQ(c.readable_bytes(), 11u);
  EXPECT_EQ(c.writable_bytes(), 12u);
  uint8_t buf[32] = {};
  EXPECT_EQ(c.Read(0, {buf, sizeof(buf)}), 11u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 11), "hello world");
  EXPECT_EQ(c.Read(4, {buf, 3}), 3u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 3), "o w");

  const uint8_t out[] = "0123456789ABCDEF";
  EXPECT_EQ(c.Write(2, {out, 16}), 10u);  // 12 writable bytes, from offset 2
  EXPECT_EQ(std::memcmp(ram_.at(kBuf + 0x202), "01", 2), 0);
  EXPECT_EQ(std::memcmp(ram_.at(kBuf + 0x300), "23456789", 8), 0);

  vq_.Push(c.head, 10);
  EXPECT_EQ(ring_.used()->idx, 1);
  EXPECT_EQ(ring_.used()->ring[0].id, 5u);
  EXPECT_EQ(ring_.used()->ring[0].len, 10u);
  EXPECT_EQ(vq_.last_avail_idx(), 1);
  EXPECT_FALSE(vq_.Pop().has_value());
}

TEST_F(VirtqueueTest, IndexWrapsAround16Bits) {
  StartRing(false, 65530);
  for (int i = 0; i < 12; ++i) {
    ring_.SetDesc(static_cast<uint16_t>(i), kBuf + i * 16, 16);
    ring_.Publish(static_cast<uint16_t>(i));
  }
  for (int i = 0; i < 12; ++i) {
    auto got = vq_.Pop();
    ASSERT_TRUE(got.has_value() && got->ok()) << i;
    EXPECT_EQ(got->value().head, i);
    vq_.Push(got->value().head, 0);
  }
  EXPECT_EQ(vq_.last_avail_idx(), static_cast<uint16_t>(65530 + 12));
  EXPECT_EQ(ring_.used()->idx, static_cast<uint16_t>(65530 + 12));
}

TEST_F(VirtqueueTest, IndirectTable) {
  StartRing();
  auto* table = reinterpret_cast<VringDesc*>(ram_.at(kTable));
  table[0] = {kBuf, 4, kVringDescFNext, 2};
  table[2] = {kBuf + 64, 8, kVringDescFNext | kVringDescFWrite, 1};
  table[1] = {kBuf + 128, 8, kVringDescFWrite, 0};
  ring_.SetDesc(7, kTable, 3 * 16, kVringDescFIndirect);
  ring_.Publish(7);
  auto got = vq_.Pop();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ(got->value().head, 7);
  EXPECT_EQ(got->value().num_readable, 1);
  EXPECT_EQ(got->value().num_writable, 2);
  EXPECT_EQ(got->value().descs[0].host, memory_->Translate(kBuf, 4).value());
  EXPECT_EQ(got->value().descs[1].host, memory_->Translate(kBuf + 64, 8).value());
  EXPECT_EQ(got->value().descs[2].host, memory_->Translate(kBuf + 128, 8).value());
}

// A malicious ring: `build` writes descriptors and publishes; Pop must
// return `status`, and the queue stays broken afterwards.
struct BadRingCase {
  const char* name;
  std::function<void(TestRing&, TestGuestRam&)> build;
  Status status;
};

TEST_F(VirtqueueTest, RejectsMaliciousRings) {
  const uint64_t kHugeAddr = UINT64_MAX - 8;
  const std::vector<BadRingCase> cases = {
      {"loop of two", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kBuf, 8, kVringDescFNext, 1);
         r.SetDesc(1, kBuf, 8, kVringDescFNext, 0);
         r.Publish(0);
       }, Status::kInvalid},
      {"self loop", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(3, kBuf, 8, kVringDescFNext, 3);
         r.Publish(3);
       }, Status::kInvalid},
      {"chain too long", [](TestRing& r, TestGuestRam&) {
         for (uint16_t i = 0; i < 70; ++i) r.SetDesc(i, kBuf, 8, kVringDescFNext, i + 1);
         r.SetDesc(70, kBuf, 8);
         r.Publish(0);
       }, Status::kInvalid},
      {"next out of ring", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kBuf, 8, kVringDescFNext, kSize);
         r.Publish(0);
       }, Status::kInvalid},
      {"head out of ring", [](TestRing& r, TestGuestRam&) { r.Publish(kSize); }, Status::kInvalid},
      {"avail idx jumps past size", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kBuf, 8);
         r.avail()->ring[0] = 0;
         r.avail()->idx = kSize + 1;
       }, Status::kInvalid},
      {"avail idx goes backwards", [](TestRing& r, TestGuestRam&) {
         r.avail()->idx = static_cast<uint16_t>(-1);
       }, Status::kInvalid},
      {"address out of ram", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kRam, 8);
         r.Publish(0);
       }, Status::kFault},
      {"address straddles end", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kRam - 4, 8);
         r.Publish(0);
       }, Status::kFault},
      {"address wraps", [kHugeAddr](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kHugeAddr, 64);
         r.Publish(0);
       }, Status::kFault},
      {"readable after writable", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kBuf, 8, kVringDescFWrite | kVringDescFNext, 1);
         r.SetDesc(1, kBuf, 8);
         r.Publish(0);
       }, Status::kInvalid},
      {"indirect len not multiple of 16", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kTable, 24, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kInvalid},
      {"indirect len zero", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kTable, 0, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kInvalid},
      {"indirect with next", [](TestRing& r, TestGuestRam& ram) {
         auto* t = reinterpret_cast<VringDesc*>(ram.at(kTable));
         t[0] = {kBuf, 8, 0, 0};
         r.SetDesc(0, kTable, 16, kVringDescFIndirect | kVringDescFNext, 1);
         r.SetDesc(1, kBuf, 8);
         r.Publish(0);
       }, Status::kInvalid},
      {"nested indirect", [](TestRing& r, TestGuestRam& ram) {
         auto* t = reinterpret_cast<VringDesc*>(ram.at(kTable));
         t[0] = {kTable + 0x100, 16, kVringDescFIndirect, 0};
         r.SetDesc(0, kTable, 16, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kInvalid},
      {"indirect after a direct desc", [](TestRing& r, TestGuestRam& ram) {
         auto* t = reinterpret_cast<VringDesc*>(ram.at(kTable));
         t[0] = {kBuf, 8, 0, 0};
         r.SetDesc(0, kBuf, 8, kVringDescFNext, 1);
         r.SetDesc(1, kTable, 16, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kInvalid},
      {"indirect table out of ram", [](TestRing& r, TestGuestRam&) {
         r.SetDesc(0, kRam - 16, 32, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kFault},
      {"indirect loop", [](TestRing& r, TestGuestRam& ram) {
         auto* t = reinterpret_cast<VringDesc*>(ram.at(kTable));
         t[0] = {kBuf, 8, kVringDescFNext, 1};
         t[1] = {kBuf, 8, kVringDescFNext, 0};
         r.SetDesc(0, kTable, 32, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kInvalid},
      {"indirect next out of table", [](TestRing& r, TestGuestRam& ram) {
         auto* t = reinterpret_cast<VringDesc*>(ram.at(kTable));
         t[0] = {kBuf, 8, kVringDescFNext, 2};
         t[2] = {kBuf, 8, 0, 0};  // exists in RAM, but beyond the 2-entry table
         r.SetDesc(0, kTable, 32, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kInvalid},
      {"indirect entry out of ram", [](TestRing& r, TestGuestRam& ram) {
         auto* t = reinterpret_cast<VringDesc*>(ram.at(kTable));
         t[0] = {kRam + 4096, 8, 0, 0};
         r.SetDesc(0, kTable, 16, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kFault},
      {"indirect table too long", [](TestRing& r, TestGuestRam& ram) {
         auto* t = reinterpret_cast<VringDesc*>(ram.at(kTable));
         for (uint16_t i = 0; i < 100; ++i) t[i] = {kBuf, 8, kVringDescFNext, uint16_t(i + 1)};
         t[99].flags = 0;
         r.SetDesc(0, kTable, 100 * 16, kVringDescFIndirect);
         r.Publish(0);
       }, Status::kInvalid},
  };
  for (const auto& c : cases) {
    TestGuestRam ram(kRam);
    TestRing ring(ram, kSize, kDesc, kAvail, kUsed);
    Virtqueue vq;
    ASSERT_EQ(vq.Setup(ram.Memory(), kSize, ring.addrs(), 0, false), Status::kOk);
    c.build(ring, ram);
    auto got = vq.Pop();
    ASSERT_TRUE(got.has_value()) << c.name;
    EXPECT_FALSE(got->ok()) << c.name;
    EXPECT_EQ(got->status(), c.status) << c.name;
    EXPECT_TRUE(vq.broken()) << c.name;
    EXPECT_EQ(ring.used()->idx, 0) << c.name;
    // Broken stays broken, even if the guest "fixes" the ring.
    auto again = vq.Pop();
    ASSERT_TRUE(again.has_value()) << c.name;
    EXPECT_EQ(again->status(), Status::kInvalid) << c.name;
  }
}

TEST_F(VirtqueueTest, SetupRejectsBadRings) {
  EXPECT_EQ(vq_.Setup(memory_, 100, ring_.addrs(), 0, false), Status::kInvalid);
  EXPECT_EQ(vq_.Setup(memory_, 0, ring_.addrs(), 0, false), Status::kInvalid);
  EXPECT_EQ(vq_.Setup(nullptr, kSize, ring_.addrs(), 0, false), Status::kBadState);
  VringAddrs outside = ring_.addrs();
  outside.used_user_addr = TestGuestRam::kUserBase + kRam - 16;
  EXPECT_EQ(vq_.Setup(memory_, kSize, outside, 0, false), Status::kFault);
  VringAddrs gpa_not_uva = ring_.addrs();
  gpa_not_uva.desc_user_addr = kDesc;  // a GPA, not a frontend address
  EXPECT_EQ(vq_.Setup(memory_, kSize, gpa_not_uva, 0, false), Status::kFault);
  VringAddrs misaligned = ring_.addrs();
  misaligned.desc_user_addr += 8;
  EXPECT_EQ(vq_.Setup(memory_, kSize, misaligned, 0, false), Status::kFault);
  EXPECT_FALSE(vq_.ready());
}

TEST_F(VirtqueueTest, RemapFollowsNewTable) {
  StartRing();
  // Same file, mapped at a different user address: ring moves with it.
  auto other = GuestMemory::Map({{0, kRam, 0x5000'0000, 0, dup(ram_.fd())}}, {});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(vq_.Remap(*other), Status::kFault);  // ring user addresses gone
  EXPECT_TRUE(vq_.broken());

  Virtqueue vq2;
  ASSERT_EQ(vq2.Setup(memory_, kSize, ring_.addrs(), 0, false), Status::kOk);
  EXPECT_EQ(vq2.Remap(ram_.Memory()), Status::kOk);
  memory_.reset();  // the queue holds its own reference
  ring_.SetDesc(0, kBuf, 8);
  ring_.Publish(0);
  auto got = vq2.Pop();
  ASSERT_TRUE(got.has_value() && got->ok());
}

TEST_F(VirtqueueTest, NotifyHonoursNoInterruptFlag) {
  StartRing();
  int call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  vq_.call_fd = call;
  ring_.SetDesc(0, kBuf, 8);
  ring_.Publish(0);
  ring_.Publish(0);
  auto a = vq_.Pop();
  ASSERT_TRUE(a.has_value() && a->ok());
  vq_.Push(0, 0);
  ring_.avail()->flags = kVringAvailFNoInterrupt;
  vq_.NotifyGuest();
  EXPECT_FALSE(CallSignalled(call));
  auto b = vq_.Pop();
  ASSERT_TRUE(b.has_value() && b->ok());
  vq_.Push(0, 0);
  ring_.avail()->flags = 0;
  vq_.NotifyGuest();
  EXPECT_TRUE(CallSignalled(call));
  vq_.NotifyGuest();  // nothing new pushed
  EXPECT_FALSE(CallSignalled(call));
  close(call);
}

TEST_F(VirtqueueTest, NotifyHonoursUsedEvent) {
  StartRing(/*event_idx=*/true);
  int call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  vq_.call_fd = call;
  ring_.SetDesc(0, kBuf, 8);
  *ring_.used_event() = 2;  // interrupt once used idx passes 2
  for (int i = 0; i < 4; ++i) ring_.Publish(0);
  bool signalled[4];
  for (int i = 0; i < 4; ++i) {
    auto got = vq_.Pop();
    ASSERT_TRUE(got.has_value() && got->ok());
    vq_.Push(0, 0);
    vq_.NotifyGuest();
    signalled[i] = CallSignalled(call);
  }
  // used idx after each push: 1, 2, 3, 4; need_event(2, new, old) fires
  // only for the step 2 -> 3.
  EXPECT_FALSE(signalled[0]);
  EXPECT_FALSE(signalled[1]);
  EXPECT_TRUE(signalled[2]);
  EXPECT_FALSE(signalled[3]);
  close(call);
}

// A frontend that makes its call fd blocking and fills the counter: the
// signal is interrupted, the queue stops signalling that fd, and says so
// (the connection ends on it).
TEST_F(VirtqueueTest, ACallFdThatWouldBlockIsGivenUp) {
  auto watchdog = FdWatchdog::Start(std::chrono::milliseconds(5));
  ASSERT_NE(watchdog, nullptr);
  watchdog->WatchThisThread();
  StartRing();
  const int call = eventfd(0, EFD_CLOEXEC);  // blocking
  const uint64_t full = 0xfffffffffffffffeull;
  ASSERT_EQ(write(call, &full, sizeof(full)), 8);
  vq_.call_fd = call;
  ring_.SetDesc(0, kBuf, 8);
  ring_.Publish(0);
  ring_.Publish(0);
  auto a = vq_.Pop();
  ASSERT_TRUE(a.has_value() && a->ok());
  vq_.Push(0, 0);
  vq_.NotifyGuest();
  EXPECT_TRUE(vq_.call_stalled());
  const uint64_t interrupts = watchdog->interrupts();
  EXPECT_GE(interrupts, 1u);  // more if the thread was preempted inside the call
  auto b = vq_.Pop();
  ASSERT_TRUE(b.has_value() && b->ok());
  vq_.Push(0, 0);
  vq_.NotifyGuest();  // given up: not tried again
  EXPECT_EQ(watchdog->interrupts(), interrupts);
  close(call);
}

TEST_F(VirtqueueTest, KickSuppression) {
  StartRing(false);
  vq_.SetKickEnabled(false);
  EXPECT_EQ(ring_.used()->flags & kVringUsedFNoNotify, kVringUsedFNoNotify);
  vq_.SetKickEnabled(true);
  EXPECT_EQ(ring_.used()->flags & kVringUsedFNoNotify, 0);

  Virtqueue ev;
  ring_.SetDesc(0, kBuf, 8);
  ASSERT_EQ(ev.Setup(memory_, kSize, ring_.addrs(), 0, true), Status::kOk);
  ring_.Publish(0);
  ring_.Publish(0);
  ASSERT_TRUE(ev.Pop().has_value());
  ASSERT_TRUE(ev.Pop().has_value());
  ev.SetKickEnabled(true);
  EXPECT_EQ(*ring_.avail_event(), 2);
}

}  // namespace
}  // namespace vrdma::vhost
