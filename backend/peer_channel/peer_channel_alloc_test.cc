// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The layer's side of PeerChannel (PeerOf, Send, Broadcast, DrainInbox:
// the data path's calls) never allocates: this binary replaces the global
// operator new with a counting one, counting only around those calls.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "backend/base/testing/counting_new.h"
#include "backend/peer_channel/peer_channel.h"
#include "backend/peer_channel/testing/free_address.h"

namespace vrdma::peer {
namespace {

using vrdma::testing::g_allocs;
using vrdma::testing::g_counting;

using testing::FreeAddress;

TEST(PeerChannelAllocTest, TheLayersCallsNeverAllocate) {
  const fabric::UdpAddress aa = FreeAddress(), ab = FreeAddress();
  uint64_t now = 1'000'000'000;
  PeerChannelOptions oa, ob;
  oa.listen = aa;
  oa.peers = {ab};
  oa.daemon_id = 1;
  oa.clock = [&] { return now; };
  ob = oa;
  ob.listen = ab;
  ob.peers = {aa};
  ob.daemon_id = 2;
  std::string error;
  auto a = PeerChannel::Open(oa, &error);
  auto b = PeerChannel::Open(ob, &error);
  ASSERT_TRUE(a && b) << error;
  uint64_t got = 0;
  b->SetSink([&](std::span<const uint8_t>) { ++got; });
  Gid g{};
  g[15] = 7;
  a->AddGids(std::span(&g, 1));
  uint8_t hello[kMaxMessageBytes];
  const size_t hn =
      Encode(PeerMessage{MsgType::kHello, 1, 1, Hello{kUnitSize, 0x20, 1, g}}, hello);
  uint8_t credit[kMaxMessageBytes];
  const size_t cn = Encode(PeerMessage{MsgType::kCredit, 1, 1, Credit{2, 3}}, credit);
  ASSERT_GT(hn, 0u);
  ASSERT_GT(cn, 0u);
  for (int i = 0; i < 5; ++i) {
    a->Turn();
    b->Turn();
    now += 1'000'000;
  }
  long allocs = 0;
  for (int round = 0; round < 200; ++round) {
    g_counting = true;
    a->Broadcast(std::span(hello, hn));
    for (int i = 0; i < 10; ++i) (void)a->Send(2, std::span(credit, cn));
    (void)b->PeerOf(g);
    (void)b->DrainInbox();
    g_counting = false;
    allocs += g_allocs;
    g_allocs = 0;
    a->Turn();
    b->Turn();
    now += 1'000'000;
  }
  g_counting = true;
  (void)b->DrainInbox();
  g_counting = false;
  allocs += g_allocs;
  EXPECT_EQ(allocs, 0);
  EXPECT_EQ(b->PeerOf(g), 1u);
  EXPECT_GE(got, 200u * 11u);
}

}  // namespace
}  // namespace vrdma::peer
