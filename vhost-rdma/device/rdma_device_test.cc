// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The device driven like the protocol layer drives it: real Virtqueues over
// memfd guest RAM (the test writes split-ring descriptors by hand, as a
// driver would), a mock engine, fake event loops whose handlers the test
// fires, and an inline executor (data path = the test thread).
#include "vhost-rdma/device/rdma_device.h"

#include <endian.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vhost-rdma/device/fake_event_loop.h"
#include "vhost-rdma/device/mock_engine.h"
#include "vhost-rdma/vhost_user/test_guest_ram.h"
#include "vhost-rdma/vhost_user/vring.h"

namespace vrdma::device {
namespace {

using ::testing::_;
using ::testing::Field;
using ::testing::NiceMock;
using ::testing::Return;
using testing::FakeLoop;
using testing::MockEngine;
using vhost::kVringDescFNext;
using vhost::kVringDescFWrite;
using vhost::testing::TestGuestRam;
using vhost::testing::TestRing;

constexpr engine::VmId kVm = 7;
constexpr uint64_t kRam = 4 << 20;
constexpr uint16_t kQsize = 64;
// Guest-physical layout: one ring per queue, then buffers.
constexpr uint64_t kRingBase = 0x10000;  // queue q at kRingBase + q * 0x4000
constexpr uint64_t kBuf = 0x100000;

engine::DeviceAttr Attr() {
  engine::DeviceAttr a;
  a.limits.max_qp = 100;
  a.limits.max_sge = 8;
  a.limits.active_mtu_bytes = 1024;
  a.limits.node_guid = 0xabcdef;
  a.max_mr_pages = 64;
  a.max_ah = 10;
  return a;
}

class Queue {
 public:
  Queue(TestGuestRam& ram, uint32_t index)
      : ring_(ram, kQsize, kRingBase + index * 0x4000,
              kRingBase + index * 0x4000 + 0x1000,
              kRingBase + index * 0x4000 + 0x2000) {
    vq.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~Queue() {
    close(vq.kick_fd);
    close(vq.call_fd);
  }
  Status Setup(std::shared_ptr<const GuestMemory> memory) {
    return vq.Setup(std::move(memory), kQsize, ring_.addrs(), 0, false);
  }
  void Kick() { eventfd_write(vq.kick_fd, 1); }

  TestRing ring_;
  vhost::Virtqueue vq;
};

class RdmaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.name = "vm0";
    config_.gids.resize(2);
    config_.gids[0][0] = 0xfe;
    config_.gids[1][15] = 0x02;
    ON_CALL(engine_, AttachVm(_, _)).WillByDefault(Return(kVm));
    ON_CALL(engine_, QueryDevice(_)).WillByDefault(Return(Attr()));
    EXPECT_CALL(engine_, AttachVm(_, _)).Times(::testing::AtLeast(1));
    // Time slices and the control quota out of the way: a loaded machine
    // (a sanitizer build, CI) must not cut a test's drain short. The tests
    // of those rules make their own device.
    auto dev = RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                  {.num_doorbell_queues = 2,
                                   .max_queue_size = 256,
                                   .control_slice_ns = 10'000'000'000,
                                   .control_share = 0});
    ASSERT_TRUE(dev.ok());
    dev_ = std::move(*dev);
    memory_ = ram_.Memory();
    ASSERT_NE(memory_, nullptr);
    dev_->SetMemory(memory_);
    ASSERT_EQ(dev_->SetFeatures(dev_->device_features()), Status::kOk);
    for (auto* q : {&ctrl_, &event_, &db0_}) ASSERT_EQ(q->Setup(memory_), Status::kOk);
  }
  void TearDown() override {
    if (dev_) {
      EXPECT_CALL(engine_, DetachVm(kVm));
      dev_.reset();
    }
  }

  // Publishes one control command: `req` split in two readable descriptors
  // at `split`, then `writable` device-writable bytes. Returns the response
  // buffer's guest address.
  uint64_t PostCommand(const std::vector<uint8_t>& req, uint32_t writable,
                       size_t split = 0) {
    const uint16_t head = next_desc_;
    uint64_t at = next_buf_;
    if (split == 0 || split >= req.size()) split = req.size();
    std::memcpy(ram_.at(at), req.data(), req.size());
    uint16_t d = next_desc_;
    ctrl_.ring_.SetDesc(d, at, static_cast<uint32_t>(split), kVringDescFNext,
                        static_cast<uint16_t>(d + 1));
    ++d;
    if (split < req.size()) {
      ctrl_.ring_.SetDesc(d, at + split,
                          static_cast<uint32_t>(req.size() - split),
                          kVringDescFNext, static_cast<uint16_t>(d + 1));
      ++d;
    }
    const uint64_t resp = at + ((req.size() + 63) & ~uint64_t{63});
    std::memset(ram_.at(resp), 0xee, 512);
    ctrl_.ring_.SetDesc(d, resp, writable, kVringDescFWrite);
    ++d;
    next_desc_ = d;
    next_buf_ = resp + 512;
    ctrl_.ring_.Publish(head);
    return resp;
  }

  uint32_t RespStatus(uint64_t resp) {
    uint32_t s;
    std::memcpy(&s, ram_.at(resp), 4);
    return le32toh(s);
  }
  uint32_t UsedLen(uint16_t i) { return ctrl_.ring_.used()->ring[i].len; }
  uint16_t UsedIdx(Queue& q) { return q.ring_.used()->idx; }

  template <typename T>
  static void Put(std::vector<uint8_t>& b, const T& v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  static std::vector<uint8_t> Cmd(uint32_t code) {
    std::vector<uint8_t> b;
    Put(b, virtio_rdma_cmd_hdr{htole32(code), 0});
    return b;
  }

  NiceMock<MockEngine> engine_;
  engine::VmConfig config_;
  FakeLoop control_, datapath_;
  InlineExecutor exec_;
  TestGuestRam ram_{kRam};
  std::shared_ptr<const GuestMemory> memory_;
  Queue ctrl_{ram_, 0}, event_{ram_, 1}, db0_{ram_, 2};
  std::unique_ptr<RdmaDevice> dev_;
  uint16_t next_desc_ = 0;
  uint64_t next_buf_ = kBuf;
};

TEST_F(RdmaDeviceTest, ShapeAndConfigSpace) {
  EXPECT_EQ(dev_->num_queues(), 4u);
  EXPECT_EQ(dev_->max_queue_size(), 256);
  EXPECT_EQ(dev_->device_features(),
            (1ull << VIRTIO_RDMA_F_SRQ) | (1ull << VIRTIO_RDMA_F_UD));
  auto cfg = dev_->config();
  ASSERT_EQ(cfg.size(), sizeof(virtio_rdma_config));
  virtio_rdma_config c;
  std::memcpy(&c, cfg.data(), sizeof(c));
  EXPECT_EQ(le32toh(c.abi_version), 1u);
  EXPECT_EQ(le32toh(c.num_doorbell_queues), 2u);
  EXPECT_EQ(le32toh(c.max_qp), 100u);
  EXPECT_EQ(le32toh(c.max_mr_pages), 64u);
  EXPECT_EQ(c.num_gids, 2);
  EXPECT_EQ(c.gids[0][0], 0xfe);
  EXPECT_EQ(c.gids[1][15], 0x02);
  EXPECT_EQ(dev_->SetFeatures(1ull << VIRTIO_RDMA_F_ATOMIC), Status::kInvalid);
  // No MAC given: no RoCE, and a driver cannot take it anyway.
  EXPECT_EQ(dev_->SetFeatures(1ull << VIRTIO_RDMA_F_ROCE), Status::kInvalid);
  for (uint8_t b : c.mac) EXPECT_EQ(b, 0);
  // Transport bits above the device range are not the device's business.
  EXPECT_EQ(dev_->SetFeatures((1ull << 32) | 1), Status::kOk);
}

// With the VM NIC's MAC the device offers RoCE v2 on it (§2.1).
TEST_F(RdmaDeviceTest, AMacOffersRoceAndNamesTheNic) {
  engine::VmConfig roce = config_;
  roce.mac = engine::MacAddress{0x52, 0x54, 0x00, 0x77, 0x00, 0x02};
  auto dev = RdmaDevice::Create(engine_, roce, control_, datapath_, exec_,
                                {.num_doorbell_queues = 1});
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ((*dev)->device_features(), (1ull << VIRTIO_RDMA_F_SRQ) |
                                           (1ull << VIRTIO_RDMA_F_UD) |
                                           (1ull << VIRTIO_RDMA_F_ROCE));
  virtio_rdma_config c;
  std::memcpy(&c, (*dev)->config().data(), sizeof(c));
  EXPECT_EQ(c.mac[0], 0x52);
  EXPECT_EQ(c.mac[5], 0x02);
  EXPECT_EQ((*dev)->SetFeatures(1ull << VIRTIO_RDMA_F_ROCE), Status::kOk);
  EXPECT_CALL(engine_, DetachVm(kVm));
}

// Atomics are offered when the RNIC has them.
TEST_F(RdmaDeviceTest, AtomicsFollowTheRnic) {
  engine::DeviceAttr a = Attr();
  a.limits.atomics = true;
  EXPECT_CALL(engine_, QueryDevice(_)).WillOnce(Return(a));
  auto dev = RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                {.num_doorbell_queues = 1});
  ASSERT_TRUE(dev.ok());
  EXPECT_TRUE((*dev)->device_features() & (1ull << VIRTIO_RDMA_F_ATOMIC));
  EXPECT_EQ((*dev)->SetFeatures(1ull << VIRTIO_RDMA_F_ATOMIC), Status::kOk);
  EXPECT_CALL(engine_, DetachVm(kVm));
}

// Kernel consumers (§4.8) are offered when the engine's limits for the VM
// have fast-registration MRs: the RNIC has them and the operator set
// kernel_verbs (Resources::VmLimits). Without, a driver cannot take them.
TEST_F(RdmaDeviceTest, KernelConsumersFollowTheVmsLimits) {
  EXPECT_EQ(dev_->SetFeatures(1ull << VIRTIO_RDMA_F_KERNEL), Status::kInvalid);
  engine::DeviceAttr a = Attr();
  a.limits.max_fr_mr = 256;
  a.limits.max_fr_pages = 512;
  EXPECT_CALL(engine_, QueryDevice(_)).WillOnce(Return(a));
  auto dev = RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                {.num_doorbell_queues = 1});
  ASSERT_TRUE(dev.ok());
  EXPECT_TRUE((*dev)->device_features() & (1ull << VIRTIO_RDMA_F_KERNEL));
  EXPECT_EQ((*dev)->SetFeatures(1ull << VIRTIO_RDMA_F_KERNEL), Status::kOk);
  EXPECT_CALL(engine_, DetachVm(kVm));
}

TEST_F(RdmaDeviceTest, RejectsBadOptions) {
  EXPECT_FALSE(RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                  {.num_doorbell_queues = 0})
                   .ok());
  EXPECT_FALSE(RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                  {.num_doorbell_queues = 65})
                   .ok());
  EXPECT_FALSE(RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                  {.max_queue_size = 100})
                   .ok());
  ON_CALL(engine_, AttachVm(_, _)).WillByDefault(Return(Status::kNoResource));
  auto r = RdmaDevice::Create(engine_, config_, control_, datapath_, exec_);
  EXPECT_EQ(r.status(), Status::kNoResource);
}

TEST_F(RdmaDeviceTest, ControlCommandsBeforeAndAfterStart) {
  EXPECT_CALL(engine_, CreatePd(kVm))
      .WillOnce(Return(0x10001u))
      .WillOnce(Return(0x20001u));
  const uint64_t r1 = PostCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), 16);
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  // Queued before the start: served at once.
  ASSERT_EQ(UsedIdx(ctrl_), 1);
  EXPECT_EQ(UsedLen(0), 16u);
  EXPECT_EQ(RespStatus(r1), VIRTIO_RDMA_OK);
  virtio_rdma_resp_create_pd pd;
  std::memcpy(&pd, ram_.at(r1 + 8), sizeof(pd));
  EXPECT_EQ(le32toh(pd.pd_handle), 0x10001u);

  const uint64_t r2 = PostCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), 16);
  ctrl_.Kick();
  control_.Fire(ctrl_.vq.kick_fd);
  ASSERT_EQ(UsedIdx(ctrl_), 2);
  std::memcpy(&pd, ram_.at(r2 + 8), sizeof(pd));
  EXPECT_EQ(le32toh(pd.pd_handle), 0x20001u);
  // The guest was interrupted.
  uint64_t v = 0;
  EXPECT_EQ(eventfd_read(ctrl_.vq.call_fd, &v), 0);
  EXPECT_GE(v, 1u);
}

TEST_F(RdmaDeviceTest, RegMrWithPageListSplitAcrossDescriptors) {
  std::vector<uint8_t> req = Cmd(VIRTIO_RDMA_CMD_REG_MR);
  virtio_rdma_req_reg_mr mr{};
  mr.pd_handle = htole32(3);
  mr.access_flags = htole32(VIRTIO_RDMA_ACCESS_LOCAL_WRITE);
  mr.iova = htole64(0x5000);
  mr.length = htole64(8192);
  mr.npages = htole32(2);
  Put(req, mr);
  Put(req, htole64(uint64_t{0x200000}));
  Put(req, htole64(uint64_t{0x300000}));
  EXPECT_CALL(engine_,
              RegMr(kVm, ::testing::AllOf(
                             Field(&engine::RegMrRequest::pd, 3u),
                             Field(&engine::RegMrRequest::length, 8192u),
                             Field(&engine::RegMrRequest::pages,
                                   std::vector<uint64_t>{0x200000, 0x300000}))))
      .WillOnce(Return(engine::RegMrResult{5, 0x1234, 0}));
  // Split in the middle of the first page address.
  const uint64_t r = PostCommand(req, 8 + sizeof(virtio_rdma_resp_reg_mr), 45);
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  EXPECT_EQ(RespStatus(r), VIRTIO_RDMA_OK);
  virtio_rdma_resp_reg_mr out;
  std::memcpy(&out, ram_.at(r + 8), sizeof(out));
  EXPECT_EQ(le32toh(out.mr_handle), 5u);
  EXPECT_EQ(le32toh(out.lkey), 0x1234u);
}

TEST_F(RdmaDeviceTest, BadChainsGetErrorsAndNeverReachTheEngine) {
  EXPECT_CALL(engine_, CreatePd(_)).Times(0);
  EXPECT_CALL(engine_, CreateAh(_, _, _)).Times(0);
  // Writable part too small for the response body: ERR_INVALID, not run.
  const uint64_t small = PostCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), 12);
  // Writable part too small even for the header: nothing written.
  const uint64_t tiny = PostCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), 7);
  // Garbage command.
  std::vector<uint8_t> junk(40, 0xa5);
  const uint64_t garbage = PostCommand(junk, 64);
  // Truncated REG_MR.
  std::vector<uint8_t> cut = Cmd(VIRTIO_RDMA_CMD_REG_MR);
  cut.resize(20);
  const uint64_t trunc = PostCommand(cut, 64);
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  ASSERT_EQ(UsedIdx(ctrl_), 4);
  EXPECT_EQ(RespStatus(small), VIRTIO_RDMA_ERR_INVALID);
  EXPECT_EQ(UsedLen(0), 8u);
  EXPECT_EQ(UsedLen(1), 0u);
  EXPECT_EQ(ram_.at(tiny)[0], 0xee);  // untouched
  EXPECT_EQ(RespStatus(garbage), VIRTIO_RDMA_ERR_INVALID);
  EXPECT_EQ(RespStatus(trunc), VIRTIO_RDMA_ERR_INVALID);
  EXPECT_EQ(UsedLen(3), 8u);
}

TEST_F(RdmaDeviceTest, FeatureGating) {
  ASSERT_EQ(dev_->SetFeatures(1ull << VIRTIO_RDMA_F_SRQ), Status::kOk);  // no UD
  EXPECT_CALL(engine_, CreateAh(_, _, _)).Times(0);
  std::vector<uint8_t> req = Cmd(VIRTIO_RDMA_CMD_CREATE_AH);
  virtio_rdma_req_create_ah ah{};
  ah.attr.port_num = 1;
  ah.attr.is_global = 1;
  Put(req, ah);
  const uint64_t r = PostCommand(req, 16);
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  EXPECT_EQ(RespStatus(r), VIRTIO_RDMA_ERR_UNSUPPORTED);
}

TEST_F(RdmaDeviceTest, EngineErrorsAreReported) {
  EXPECT_CALL(engine_, DestroyPd(kVm, 9)).WillOnce(Return(Status::kBusy));
  std::vector<uint8_t> req = Cmd(VIRTIO_RDMA_CMD_DESTROY_PD);
  Put(req, virtio_rdma_req_handle{htole32(9), 0});
  const uint64_t r = PostCommand(req, 8);
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  EXPECT_EQ(RespStatus(r), VIRTIO_RDMA_ERR_BUSY);
}

TEST_F(RdmaDeviceTest, BrokenControlRingStopsQuietly) {
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  ctrl_.ring_.avail()->idx = kQsize + 5;  // more than the ring holds
  ctrl_.Kick();
  control_.Fire(ctrl_.vq.kick_fd);
  EXPECT_TRUE(ctrl_.vq.broken());
  EXPECT_EQ(UsedIdx(ctrl_), 0);
  ctrl_.Kick();
  control_.Fire(ctrl_.vq.kick_fd);  // still fine
  dev_->StopQueue(0);
  EXPECT_TRUE(control_.fds.empty());
}

TEST_F(RdmaDeviceTest, ControlBudgetYieldsAndReKicks) {
  auto dev = RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                // The count budget alone (a slow sanitizer
                                // build must not use up a time slice).
                                {.control_budget = 2, .control_slice_ns = 10'000'000'000});
  ASSERT_TRUE(dev.ok());
  EXPECT_CALL(engine_, CreatePd(_)).Times(3).WillRepeatedly(Return(1u));
  for (int i = 0; i < 3; ++i) PostCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), 16);
  ASSERT_EQ((*dev)->StartQueue(0, ctrl_.vq), Status::kOk);
  EXPECT_EQ(UsedIdx(ctrl_), 2);
  // It signalled its own kick fd to come back after other fds.
  control_.Fire(ctrl_.vq.kick_fd);
  EXPECT_EQ(UsedIdx(ctrl_), 3);
  (*dev)->StopQueue(0);
}

// The control thread is shared by every VM: expensive commands yield it
// after their time slice, whatever the chain budget, and their time is
// counted for the VM.
TEST_F(RdmaDeviceTest, ExpensiveCommandsYieldAfterTheirTimeSlice) {
  auto dev = RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                {.control_budget = 64, .control_slice_ns = 1'000'000});
  ASSERT_TRUE(dev.ok());
  EXPECT_CALL(engine_, CreatePd(_)).Times(3).WillRepeatedly([](engine::VmId) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // > the slice
    return Result<uint32_t>(1u);
  });
  for (int i = 0; i < 3; ++i) PostCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), 16);
  ASSERT_EQ((*dev)->StartQueue(0, ctrl_.vq), Status::kOk);
  EXPECT_EQ(UsedIdx(ctrl_), 1) << "one command, then the slice was used up";
  EXPECT_EQ((*dev)->control_yields(), 1u);
  control_.Fire(ctrl_.vq.kick_fd);
  EXPECT_EQ(UsedIdx(ctrl_), 2);
  control_.Fire(ctrl_.vq.kick_fd);
  EXPECT_EQ(UsedIdx(ctrl_), 3);
  EXPECT_GE((*dev)->control_ns(), 6'000'000u);
  (*dev)->StopQueue(0);
}

// Over time a VM gets its control_share of the control thread: once its
// burst is spent its commands wait in its ring (not failed) until its
// quota has refilled, and a timer, not a guest kick, brings them back.
TEST_F(RdmaDeviceTest, ControlTimeBeyondItsQuotaWaits) {
  auto dev = RdmaDevice::Create(engine_, config_, control_, datapath_, exec_,
                                {.control_budget = 64,
                                 .control_slice_ns = 1'000'000,
                                 .control_share = 0.1,
                                 .control_burst_ns = 30'000'000});
  ASSERT_TRUE(dev.ok());
  // 20 ms each: one leaves the 30 ms burst positive whatever a slow
  // (sanitizer) build or a loaded machine adds below 10 ms (a 7 ms burst
  // and 5 ms commands once failed under ctest -j2 with ASan, and so did a
  // 15 ms burst and 10 ms commands beside a second build's tests); two
  // always spend it.
  EXPECT_CALL(engine_, CreatePd(_)).Times(3).WillRepeatedly([](engine::VmId) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return Result<uint32_t>(1u);
  });
  for (int i = 0; i < 3; ++i) PostCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), 16);
  ASSERT_EQ((*dev)->StartQueue(0, ctrl_.vq), Status::kOk);
  ASSERT_EQ(UsedIdx(ctrl_), 1);           // the time slice
  control_.Fire(ctrl_.vq.kick_fd);
  ASSERT_EQ(UsedIdx(ctrl_), 2);           // >= 40 ms of a 30 ms burst spent
  control_.Fire(ctrl_.vq.kick_fd);
  EXPECT_EQ(UsedIdx(ctrl_), 2) << "the quota rule held the third command";
  EXPECT_GE((*dev)->control_throttles(), 1u);
  // Over its burst at a 10 % share: it waits ten times the excess (tens
  // of ms) before it may run again.
  const int timer = (*dev)->control_timer_fd();
  ASSERT_GE(timer, 0);
  ASSERT_EQ(control_.fds.count(timer), 1u);
  pollfd p{timer, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "not before the quota refills";
  ASSERT_EQ(poll(&p, 1, 2000), 1) << "the timer brings it back";
  control_.Fire(timer);
  EXPECT_EQ(UsedIdx(ctrl_), 3);
  (*dev)->StopQueue(0);
  EXPECT_TRUE(control_.fds.empty());
}

TEST_F(RdmaDeviceTest, DoorbellsArePolledThenKicksRearmed) {
  ASSERT_EQ(dev_->StartQueue(2, db0_.vq), Status::kOk);
  ASSERT_EQ(datapath_.pollers.size(), 1u);
  ASSERT_EQ(datapath_.fds.count(db0_.vq.kick_fd), 1u);

  auto post_db = [&](uint16_t d, uint32_t handle, uint8_t kind, uint32_t len) {
    virtio_rdma_doorbell rec{};
    rec.handle = htole32(handle);
    rec.kind = kind;
    const uint64_t at = kBuf + 0x80000 + d * 16;
    std::memcpy(ram_.at(at), &rec, sizeof(rec));
    db0_.ring_.SetDesc(d, at, len);
    db0_.ring_.Publish(d);
  };
  EXPECT_CALL(engine_, Doorbell(kVm, VIRTIO_RDMA_DB_SQ, 0x11u));
  EXPECT_CALL(engine_, Doorbell(kVm, VIRTIO_RDMA_DB_CQ_ARM, 0x22u));
  post_db(0, 0x11, VIRTIO_RDMA_DB_SQ, 8);
  post_db(1, 0x99, 9, 8);                   // bad kind
  post_db(2, 0x99, VIRTIO_RDMA_DB_SQ, 4);   // short record
  post_db(3, 0x22, VIRTIO_RDMA_DB_CQ_ARM, 8);
  EXPECT_TRUE(datapath_.PollAll());
  EXPECT_EQ(UsedIdx(db0_), 4);
  EXPECT_EQ(dev_->bad_doorbells(), 2u);
  // Busy: the guest is told not to kick.
  EXPECT_TRUE(db0_.ring_.used()->flags & vhost::kVringUsedFNoNotify);
  EXPECT_FALSE(datapath_.PollAll());
  // Idle: kicks back on.
  datapath_.ArmAll();
  EXPECT_FALSE(db0_.ring_.used()->flags & vhost::kVringUsedFNoNotify);

  // A kick is served from the fd handler too.
  EXPECT_CALL(engine_, Doorbell(kVm, VIRTIO_RDMA_DB_RQ, 0x33u));
  post_db(4, 0x33, VIRTIO_RDMA_DB_RQ, 8);
  db0_.Kick();
  datapath_.Fire(db0_.vq.kick_fd);
  EXPECT_EQ(UsedIdx(db0_), 5);

  dev_->StopQueue(2);
  EXPECT_TRUE(datapath_.pollers.empty());
  EXPECT_TRUE(datapath_.fds.empty());
  EXPECT_EQ(dev_->bad_doorbells(), 2u);
}

TEST_F(RdmaDeviceTest, EventsAndLostCount) {
  // Event queue not started yet: lost.
  dev_->OnEvent(VIRTIO_RDMA_EV_CQ_COMP, 1);
  ASSERT_EQ(dev_->StartQueue(1, event_.vq), Status::kOk);
  dev_->OnEvent(VIRTIO_RDMA_EV_CQ_COMP, 2);  // no buffer: lost
  EXPECT_EQ(dev_->lost_events(), 2u);

  const uint64_t small = kBuf + 0x90000, buf = kBuf + 0x90100;
  event_.ring_.SetDesc(0, small, 8, kVringDescFWrite);  // too small: skipped
  event_.ring_.Publish(0);
  event_.ring_.SetDesc(1, buf, 16, kVringDescFWrite);
  event_.ring_.Publish(1);
  dev_->OnEvent(VIRTIO_RDMA_EV_QP_FATAL, 0x123456);
  EXPECT_EQ(UsedIdx(event_), 2);
  virtio_rdma_event ev;
  std::memcpy(&ev, ram_.at(buf), sizeof(ev));
  EXPECT_EQ(le32toh(ev.type), VIRTIO_RDMA_EV_QP_FATAL);
  EXPECT_EQ(le32toh(ev.handle), 0x123456u);
  EXPECT_EQ(le32toh(ev.lost), 2u);
  EXPECT_EQ(dev_->lost_events(), 0u);
  EXPECT_EQ(event_.ring_.used()->ring[0].len, 0u);
  EXPECT_EQ(event_.ring_.used()->ring[1].len, 16u);

  dev_->StopQueue(1);
  dev_->OnEvent(VIRTIO_RDMA_EV_CQ_COMP, 3);
  EXPECT_EQ(dev_->lost_events(), 1u);
  EXPECT_TRUE(datapath_.fds.empty());
}

TEST_F(RdmaDeviceTest, ResetDetachesAndNextStartReattaches) {
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  ASSERT_EQ(dev_->StartQueue(2, db0_.vq), Status::kOk);
  EXPECT_CALL(engine_, DetachVm(kVm));
  dev_->Reset();
  EXPECT_FALSE(dev_->vm().has_value());
  EXPECT_TRUE(control_.fds.empty());
  EXPECT_TRUE(datapath_.fds.empty());
  EXPECT_TRUE(datapath_.pollers.empty());
  ::testing::Mock::VerifyAndClearExpectations(&engine_);

  EXPECT_CALL(engine_, AttachVm(_, dev_.get())).WillOnce(Return(kVm));
  EXPECT_CALL(engine_, SetGuestMemory(kVm, memory_));  // memory re-installed
  ASSERT_EQ(ctrl_.Setup(memory_), Status::kOk);
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
  EXPECT_EQ(dev_->vm(), kVm);
}

TEST_F(RdmaDeviceTest, DriverResetThroughStatusReleasesTheVm) {
  ASSERT_EQ(dev_->StartQueue(2, db0_.vq), Status::kOk);
  dev_->SetStatus(0x0f);  // ACK | DRIVER | DRIVER_OK | FEATURES_OK
  EXPECT_TRUE(dev_->vm().has_value());
  ::testing::Mock::VerifyAndClearExpectations(&engine_);
  EXPECT_CALL(engine_, DetachVm(kVm));
  dev_->SetStatus(0);
  EXPECT_FALSE(dev_->vm().has_value());
  EXPECT_TRUE(datapath_.pollers.empty());
  ::testing::Mock::VerifyAndClearExpectations(&engine_);
  // A second 0 (the next probe's reset) detaches nothing.
  EXPECT_CALL(engine_, DetachVm(_)).Times(0);
  dev_->SetStatus(0);
  ::testing::Mock::VerifyAndClearExpectations(&engine_);
  EXPECT_CALL(engine_, AttachVm(_, _)).WillOnce(Return(kVm));
  ASSERT_EQ(dev_->StartQueue(0, ctrl_.vq), Status::kOk);
}

TEST_F(RdmaDeviceTest, StartQueueValidatesIndex) {
  EXPECT_EQ(dev_->StartQueue(4, db0_.vq), Status::kInvalid);
  dev_->StopQueue(99);  // ignored
}

TEST(EnginePollerTest, RegistersPollOnceOnce) {
  NiceMock<MockEngine> engine;
  FakeLoop loop;
  EXPECT_CALL(engine, PollOnce()).WillOnce(Return(true)).WillOnce(Return(false));
  RegisterEnginePoller(loop, engine);
  ASSERT_EQ(loop.pollers.size(), 1u);
  EXPECT_TRUE(loop.PollAll());
  EXPECT_FALSE(loop.PollAll());
}

}  // namespace
}  // namespace vrdma::device
