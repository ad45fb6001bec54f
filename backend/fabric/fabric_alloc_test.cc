// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Send and Poll of InprocFabric, FaultyFabric and UdpFabric never
// allocate: this binary replaces the global operator new with a counting
// one and runs every fault (holds, drops, duplicates, the bottleneck) and
// UdpFabric's batches and drops with counting on only around the
// data-path calls.
#include <gtest/gtest.h>

#include "backend/base/testing/counting_new.h"
#include "backend/fabric/fabric_test_util.h"
#include "backend/fabric/faulty_fabric.h"
#include "backend/fabric/inproc_fabric.h"
#include "backend/fabric/udp_fabric.h"

namespace vrdma::fabric::testing {
namespace {

using vrdma::testing::g_allocs;
using vrdma::testing::g_counting;

TEST(FabricAllocTest, SendAndPollNeverAllocate) {
  InprocFabric fabric(InprocFabricOptions{.queue_packets = 64});
  Fabric* a = fabric.AddPort();
  Fabric* b = fabric.AddPort();
  ASSERT_EQ(b->AddGid(HostGid(2)), Status::kOk);
  FaultConfig c;
  c.loss = 0.05;
  c.p_enter_bad = 0.01;
  c.p_leave_bad = 0.3;
  c.p_reorder = 0.05;
  c.reorder_delay_ns = 5000;
  c.p_dup = 0.05;
  c.delay_ns = 1000;
  c.jitter_ns = 500;
  c.bottleneck_bps = 10'000'000'000;
  c.bottleneck_bytes = 16'000;
  FaultyFabric faulty(a, c, 1, /*hold=*/32);  // small: it fills
  Datagram out[8];
  uint64_t received = 0;
  g_counting = true;
  for (uint64_t i = 0; i < 20'000; ++i) {
    const uint64_t now = i * 50;
    faulty.Send(TestPacket(i, now, 64 + static_cast<uint32_t>(i % 4000)).span(),
                HostGid(i % 7 == 0 ? 3 : 2), now);  // some to nowhere
    if (i % 3 == 0) received += b->Poll(out, now);
    (void)faulty.NextEventNs();
  }
  g_counting = false;
  EXPECT_EQ(g_allocs, 0);
  // The run did exercise every path.
  EXPECT_GT(received, 0u);
  EXPECT_GT(faulty.stats().hold_full, 0u);
  EXPECT_GT(faulty.stats().released, 0u);
  EXPECT_GT(faulty.fault_stats().bottleneck_drops, 0u);
  EXPECT_GT(faulty.fault_stats().duplicated, 0u);
  EXPECT_GT(fabric.stats(b).dropped_queue_full + fabric.stats(a).dropped_no_route, 0u);
}

TEST(FabricAllocTest, UdpSendAndPollNeverAllocate) {
  UdpAddress lo;
  ASSERT_TRUE(ParseUdpAddress("127.0.0.1:0", &lo));
  std::string error;
  auto a = UdpFabric::Open(lo, {}, &error);
  auto b = UdpFabric::Open(lo, {}, &error);
  ASSERT_TRUE(a && b) << error;
  ASSERT_EQ(b->AddGid(HostGid(2)), Status::kOk);
  ASSERT_EQ(a->SetRoute(HostGid(2), b->local_address()), Status::kOk);
  ASSERT_EQ(b->SetRoute(HostGid(1), a->local_address()), Status::kOk);
  Datagram out[64];
  uint64_t received = 0;
  g_counting = true;
  for (uint64_t i = 0; i < 5'000; ++i) {
    a->Send(TestPacket(i, i, 64 + static_cast<uint32_t>(i % 4000)).span(),
            HostGid(i % 7 == 0 ? 3 : 2), i);  // some to no route
    if (i % 50 == 0) {
      (void)a->Poll(out, i);  // flushes
      received += b->Poll(out, i);
    }
  }
  a->Flush();
  for (int i = 0; i < 100; ++i) received += b->Poll(out, 0);
  g_counting = false;
  EXPECT_EQ(g_allocs, 0);
  EXPECT_GT(received, 0u);
  EXPECT_GT(a->stats().tx_batches, 0u);
  EXPECT_GT(a->stats().dropped_no_route, 0u);
}

}  // namespace
}  // namespace vrdma::fabric::testing
