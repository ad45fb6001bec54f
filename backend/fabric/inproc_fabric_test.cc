// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// InprocFabric: routes by GID, latency stamps, tail drop on a full queue,
// slots lent until the next Poll.
#include "backend/fabric/inproc_fabric.h"

#include <gtest/gtest.h>

#include <vector>

#include "backend/fabric/fabric_test_util.h"

namespace vrdma::fabric::testing {
namespace {

TEST(InprocFabricTest, RoutesByGid) {
  InprocFabric fabric;
  Fabric* a = fabric.AddPort();
  Fabric* b = fabric.AddPort();
  Fabric* c = fabric.AddPort();
  ASSERT_EQ(b->AddGid(HostGid(2)), Status::kOk);
  ASSERT_EQ(c->AddGid(HostGid(3)), Status::kOk);
  ASSERT_EQ(c->AddGid(HostGid(4)), Status::kOk);
  EXPECT_EQ(a->AddGid(HostGid(2)), Status::kBusy);  // b has it
  EXPECT_EQ(a->AddGid(Gid{}), Status::kInvalid);
  a->Send(TestPacket(1, 0, 100).span(), HostGid(2), 0);
  a->Send(TestPacket(2, 0, 200).span(), HostGid(4), 0);
  a->Send(TestPacket(3, 0, 100).span(), HostGid(9), 0);  // nobody
  std::vector<Arrival> at_b, at_c;
  Collect(b, 0, &at_b);
  Collect(c, 0, &at_c);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b[0].seq, 1u);
  EXPECT_EQ(at_b[0].len, 100u);
  ASSERT_EQ(at_c.size(), 1u);
  EXPECT_EQ(at_c[0].seq, 2u);
  EXPECT_EQ(fabric.stats(a).sent, 3u);
  EXPECT_EQ(fabric.stats(a).dropped_no_route, 1u);
  EXPECT_EQ(fabric.stats(c).delivered, 1u);
  // A removed GID routes nowhere; only its owner removes it.
  EXPECT_EQ(b->RemoveGid(HostGid(4)), Status::kBadHandle);
  EXPECT_EQ(c->RemoveGid(HostGid(4)), Status::kOk);
  a->Send(TestPacket(4, 0, 100).span(), HostGid(4), 0);
  EXPECT_EQ(fabric.stats(a).dropped_no_route, 2u);
}

TEST(InprocFabricTest, LatencyStampsArrival) {
  InprocFabric fabric(InprocFabricOptions{.latency_ns = 500});
  Fabric* a = fabric.AddPort();
  Fabric* b = fabric.AddPort();
  ASSERT_EQ(b->AddGid(HostGid(2)), Status::kOk);
  a->Send(TestPacket(1, 100, 64).span(), HostGid(2), 100);
  EXPECT_EQ(b->NextEventNs(), std::optional<uint64_t>(600));
  std::vector<Arrival> got;
  Collect(b, 599, &got);
  EXPECT_TRUE(got.empty());
  Collect(b, 600, &got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].arrival_ns, 600u);
  EXPECT_EQ(b->NextEventNs(), std::nullopt);
}

TEST(InprocFabricTest, FullQueueTailDropsAndOversizeIsRefused) {
  InprocFabric fabric(InprocFabricOptions{.queue_packets = 4});
  Fabric* a = fabric.AddPort();
  Fabric* b = fabric.AddPort();
  ASSERT_EQ(b->AddGid(HostGid(2)), Status::kOk);
  for (uint64_t i = 0; i < 6; ++i) {
    a->Send(TestPacket(i, 0, 64).span(), HostGid(2), 0);
  }
  EXPECT_EQ(fabric.stats(b).dropped_queue_full, 2u);
  std::vector<uint8_t> huge(kMaxPacketBytes + 1);
  a->Send(huge, HostGid(2), 0);
  a->Send(std::span<const uint8_t>(), HostGid(2), 0);
  EXPECT_EQ(fabric.stats(a).dropped_oversize, 2u);
  std::vector<Arrival> got;
  Collect(b, 0, &got);
  ASSERT_EQ(got.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(got[i].seq, i);  // the first four
}

TEST(InprocFabricTest, PolledSlotsStayTheCallersUntilTheNextPoll) {
  InprocFabric fabric(InprocFabricOptions{.queue_packets = 2});
  Fabric* a = fabric.AddPort();
  Fabric* b = fabric.AddPort();
  ASSERT_EQ(b->AddGid(HostGid(2)), Status::kOk);
  a->Send(TestPacket(1, 0, 64).span(), HostGid(2), 0);
  a->Send(TestPacket(2, 0, 64).span(), HostGid(2), 0);
  Datagram d[2];
  ASSERT_EQ(b->Poll(d, 0), 2);
  // Both slots are lent: a third packet finds the queue full and cannot
  // overwrite them.
  a->Send(TestPacket(3, 0, 64).span(), HostGid(2), 0);
  EXPECT_EQ(fabric.stats(b).dropped_queue_full, 1u);
  uint64_t seq = 0;
  std::memcpy(&seq, d[0].data, 8);
  EXPECT_EQ(seq, 1u);
  std::memcpy(&seq, d[1].data, 8);
  EXPECT_EQ(seq, 2u);
  // The next Poll gives them back.
  EXPECT_EQ(b->Poll(d, 0), 0);
  a->Send(TestPacket(4, 0, 64).span(), HostGid(2), 0);
  ASSERT_EQ(b->Poll(d, 0), 1);
  std::memcpy(&seq, d[0].data, 8);
  EXPECT_EQ(seq, 4u);
}

}  // namespace
}  // namespace vrdma::fabric::testing
