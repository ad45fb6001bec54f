// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/message_validation.h"

#include <cstring>

#include "gtest/gtest.h"
#include "vhost-rdma/vhost_user/messages.h"

namespace vrdma::vhost {
namespace {

constexpr uint32_t kV = kVhostUserVersion;
uint32_t R(Request r) { return static_cast<uint32_t>(r); }

struct HeaderCase {
  const char* name;
  VhostUserHeader hdr;
  Status status;
};

TEST(MessageValidationTest, Headers) {
  const HeaderCase cases[] = {
      {"get features", {R(Request::kGetFeatures), kV, 0}, Status::kOk},
      {"get features need reply", {R(Request::kGetFeatures), kV | kNeedReplyMask, 0}, Status::kOk},
      {"get features with payload", {R(Request::kGetFeatures), kV, 8}, Status::kInvalid},
      {"version 0", {R(Request::kGetFeatures), 0, 0}, Status::kInvalid},
      {"version 2", {R(Request::kGetFeatures), 2, 0}, Status::kInvalid},
      {"reply bit on request", {R(Request::kGetFeatures), kV | kReplyMask, 0}, Status::kInvalid},
      {"unknown flag", {R(Request::kGetFeatures), kV | 0x100, 0}, Status::kInvalid},
      {"request 0", {0, kV, 0}, Status::kUnsupported},
      {"unknown request", {1000, kV, 0}, Status::kUnsupported},
      {"huge request", {UINT32_MAX, kV, 0}, Status::kUnsupported},
      {"log base unsupported", {R(Request::kSetLogBase), kV, 16}, Status::kUnsupported},
      {"postcopy unsupported", {R(Request::kPostcopyAdvise), kV, 0}, Status::kUnsupported},
      {"set features short", {R(Request::kSetFeatures), kV, 4}, Status::kInvalid},
      {"set features long", {R(Request::kSetFeatures), kV, 16}, Status::kInvalid},
      {"set features", {R(Request::kSetFeatures), kV, 8}, Status::kOk},
      {"vring num", {R(Request::kSetVringNum), kV, 8}, Status::kOk},
      {"vring num short", {R(Request::kSetVringNum), kV, 7}, Status::kInvalid},
      {"vring addr", {R(Request::kSetVringAddr), kV, 40}, Status::kOk},
      {"vring addr short", {R(Request::kSetVringAddr), kV, 32}, Status::kInvalid},
      {"mem table one region", {R(Request::kSetMemTable), kV, 40}, Status::kOk},
      {"mem table eight regions", {R(Request::kSetMemTable), kV, 264}, Status::kOk},
      {"mem table no regions", {R(Request::kSetMemTable), kV, 8}, Status::kInvalid},
      {"mem table too big", {R(Request::kSetMemTable), kV, 296}, Status::kInvalid},
      {"mem table 4 GiB", {R(Request::kSetMemTable), kV, UINT32_MAX}, Status::kInvalid},
      {"config header only", {R(Request::kGetConfig), kV, 12}, Status::kOk},
      {"config full", {R(Request::kGetConfig), kV, 268}, Status::kOk},
      {"config too big", {R(Request::kGetConfig), kV, 269}, Status::kInvalid},
      {"config short", {R(Request::kGetConfig), kV, 11}, Status::kInvalid},
      {"status", {R(Request::kSetStatus), kV, 8}, Status::kOk},
      {"get status payload", {R(Request::kGetStatus), kV, 8}, Status::kInvalid},
  };
  for (const auto& c : cases) EXPECT_EQ(CheckHeader(c.hdr), c.status) << c.name;
}

TEST(MessageValidationTest, FdCounts) {
  struct Case {
    Request r;
    size_t fds;
    bool ok;
  } cases[] = {
      {Request::kSetMemTable, 0, false}, {Request::kSetMemTable, 1, true},
      {Request::kSetMemTable, 8, true},  {Request::kSetMemTable, 9, false},
      {Request::kSetVringKick, 0, true}, {Request::kSetVringKick, 1, true},
      {Request::kSetVringKick, 2, false}, {Request::kSetVringCall, 2, false},
      {Request::kSetFeatures, 1, false}, {Request::kGetFeatures, 1, false},
      {Request::kSetVringNum, 1, false}, {Request::kSetStatus, 0, true},
  };
  for (const auto& c : cases) {
    VhostUserHeader h{R(c.r), kV, 8};
    EXPECT_EQ(CheckFdCount(h, c.fds) == Status::kOk, c.ok)
        << RequestName(R(c.r)) << " with " << c.fds << " fds";
  }
}

TEST(MessageValidationTest, Acks) {
  const uint64_t ack = 1ull << kProtoReplyAck;
  EXPECT_TRUE(WantsAck({R(Request::kSetFeatures), kV | kNeedReplyMask, 8}, ack));
  EXPECT_FALSE(WantsAck({R(Request::kSetFeatures), kV | kNeedReplyMask, 8}, 0));
  EXPECT_FALSE(WantsAck({R(Request::kSetFeatures), kV, 8}, ack));
  EXPECT_FALSE(WantsAck({R(Request::kGetVringBase), kV | kNeedReplyMask, 8}, ack));
}

TEST(MessageSyntaxTest, VringState) {
  struct Case {
    VhostUserVringState s;
    bool ok;
  } cases[] = {
      {{0, 256}, true}, {{3, 1}, true},     {{4, 256}, false},  {{0, 0}, false},
      {{0, 100}, false}, {{0, 512}, false}, {{UINT32_MAX, 2}, false},
      {{0, 0x80000000u}, false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(CheckVringState(c.s, 4, 256) == Status::kOk, c.ok) << c.s.index << "/" << c.s.num;
  }
  EXPECT_EQ(CheckVringBase({0, 0xffff}, 4), Status::kOk);
  EXPECT_EQ(CheckVringBase({0, 0x10000}, 4), Status::kInvalid);
  EXPECT_EQ(CheckVringBase({4, 0}, 4), Status::kInvalid);
  EXPECT_EQ(CheckVringEnable({1, 1}, 4), Status::kOk);
  EXPECT_EQ(CheckVringEnable({1, 2}, 4), Status::kInvalid);
}

TEST(MessageSyntaxTest, VringAddr) {
  VhostUserVringAddr good{1, 0, 0x1000, 0x3000, 0x2000, 0};
  EXPECT_EQ(CheckVringAddr(good, 2), Status::kOk);
  auto bad = good;
  bad.index = 2;
  EXPECT_EQ(CheckVringAddr(bad, 2), Status::kInvalid);
  bad = good;
  bad.flags = 2;
  EXPECT_EQ(CheckVringAddr(bad, 2), Status::kInvalid);
  bad = good;
  bad.flags = 1;
  EXPECT_EQ(CheckVringAddr(bad, 2), Status::kUnsupported);
  bad = good;
  bad.desc_user_addr = 0x1008;
  EXPECT_EQ(CheckVringAddr(bad, 2), Status::kInvalid);
  bad = good;
  bad.used_user_addr = 0x3002;
  EXPECT_EQ(CheckVringAddr(bad, 2), Status::kInvalid);
  bad = good;
  bad.avail_user_addr = 0x2001;
  EXPECT_EQ(CheckVringAddr(bad, 2), Status::kInvalid);
}

TEST(MessageSyntaxTest, Memory) {
  VhostUserMemory m{};
  m.nregions = 2;
  m.regions[0] = {0, 0x1000, 0x10000, 0};
  m.regions[1] = {0x100000, 0x1000, 0x20000, 0};
  EXPECT_EQ(CheckMemory(m, MemTablePayloadSize(2)), Status::kOk);
  EXPECT_EQ(CheckMemory(m, MemTablePayloadSize(1)), Status::kInvalid);  // size lies
  auto bad = m;
  bad.nregions = 0;
  EXPECT_EQ(CheckMemory(bad, MemTablePayloadSize(2)), Status::kInvalid);
  bad.nregions = 9;
  EXPECT_EQ(CheckMemory(bad, sizeof(VhostUserMemory)), Status::kInvalid);
  bad = m;
  bad.regions[1].memory_size = 0;
  EXPECT_EQ(CheckMemory(bad, MemTablePayloadSize(2)), Status::kInvalid);
  bad = m;
  bad.regions[1].guest_phys_addr = UINT64_MAX - 0x10;
  EXPECT_EQ(CheckMemory(bad, MemTablePayloadSize(2)), Status::kInvalid);
  bad = m;
  bad.regions[0].userspace_addr = UINT64_MAX;
  EXPECT_EQ(CheckMemory(bad, MemTablePayloadSize(2)), Status::kInvalid);
  bad = m;
  bad.regions[0].mmap_offset = UINT64_MAX - 0xfff;
  EXPECT_EQ(CheckMemory(bad, MemTablePayloadSize(2)), Status::kInvalid);
}

TEST(MessageSyntaxTest, Config) {
  struct Case {
    uint32_t offset, size, payload;
    bool ok;
  } cases[] = {
      {0, 256, ConfigPayloadSize(256), true},
      {0, 4, ConfigPayloadSize(4), true},
      {252, 4, ConfigPayloadSize(4), true},
      {253, 4, ConfigPayloadSize(4), false},
      {0, 257, ConfigPayloadSize(256), false},
      {UINT32_MAX, 2, ConfigPayloadSize(2), false},  // wraps
      {4, UINT32_MAX, ConfigPayloadSize(256), false},
      {0, 8, ConfigPayloadSize(4), false},  // payload shorter than size
  };
  for (const auto& c : cases) {
    VhostUserConfig cfg{};
    cfg.offset = c.offset;
    cfg.size = c.size;
    EXPECT_EQ(CheckConfig(cfg, c.payload) == Status::kOk, c.ok) << c.offset << "+" << c.size;
  }
}

TEST(MessageSyntaxTest, VringFdPayload) {
  EXPECT_EQ(CheckVringFdPayload(1, 2), Status::kOk);
  EXPECT_EQ(CheckVringFdPayload(1 | kVringNoFdMask, 2), Status::kOk);
  EXPECT_EQ(CheckVringFdPayload(2, 2), Status::kInvalid);
  EXPECT_EQ(CheckVringFdPayload(1ull << 9, 2), Status::kInvalid);
  EXPECT_EQ(CheckVringFdPayload(1ull << 63, 2), Status::kInvalid);
}

}  // namespace
}  // namespace vrdma::vhost
