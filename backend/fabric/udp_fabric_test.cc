// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// UdpFabric on 127.0.0.1 with ephemeral ports: delivery both ways, the
// batches of 32, the sender's drops, every receive check by its counter
// (hostile datagrams are built here byte by byte, not by the code under
// test), a small receive pool, and the kernel's drops when the socket's
// buffer overflows. Loopback usually delivers within sendmmsg, but not
// always: receivers poll until what they wait for arrives or 2 s pass.
#include "backend/fabric/udp_fabric.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/fabric/fabric_test_util.h"

namespace vrdma::fabric::testing {
namespace {

UdpAddress Loopback(uint16_t port = 0) {
  UdpAddress a;
  EXPECT_TRUE(ParseUdpAddress("127.0.0.1:" + std::to_string(port), &a));
  return a;
}

std::unique_ptr<UdpFabric> OpenLoopback(UdpFabricOptions o = {}) {
  std::string error;
  auto f = UdpFabric::Open(Loopback(), o, &error);
  EXPECT_NE(f, nullptr) << error;
  return f;
}

// Polls port until `want` packets in all have arrived (or 2 s pass),
// recording each; flushing `also` (a sender) on the way.
void PollFor(Fabric* port, size_t want, std::vector<Arrival>* out,
             uint64_t now_ns = 7) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (out->size() < want && std::chrono::steady_clock::now() < end) {
    const size_t before = out->size();
    Collect(port, now_ns, out);
    if (out->size() == before) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A plain UDP socket on 127.0.0.1 playing a stranger or a hostile peer.
class RawSocket {
 public:
  RawSocket() {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    UdpAddress a = Loopback();
    EXPECT_EQ(bind(fd_, a.sa(), a.len), 0);
    addr_.len = sizeof(addr_.storage);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr_.storage), &addr_.len);
  }
  ~RawSocket() { close(fd_); }
  void SendTo(const UdpAddress& to, const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(sendto(fd_, bytes.data(), bytes.size(), 0, to.sa(), to.len),
              static_cast<ssize_t>(bytes.size()));
  }
  const UdpAddress& addr() const { return addr_; }

 private:
  int fd_ = -1;
  UdpAddress addr_;
};

// A datagram as docs say the fabric frames it, written out by hand: magic
// "VRFB", version 1, three zero bytes, the dgid, then `payload` bytes of
// `fill`.
std::vector<uint8_t> Framed(const Gid& dgid, size_t payload, uint8_t fill = 0x5a) {
  std::vector<uint8_t> d(24 + payload, fill);
  const uint8_t head[8] = {'V', 'R', 'F', 'B', 1, 0, 0, 0};
  std::memcpy(&d[0], head, 8);
  std::memcpy(&d[8], dgid.data(), 16);
  return d;
}

class UdpFabricTest : public ::testing::Test {
 protected:
  void SetUp() override { Wire(a_.get(), b_.get()); }

  // a has HostGid(1), b HostGid(2), each routed to the other.
  static void Wire(UdpFabric* a, UdpFabric* b) {
    ASSERT_EQ(a->AddGid(HostGid(1)), Status::kOk);
    ASSERT_EQ(b->AddGid(HostGid(2)), Status::kOk);
    ASSERT_EQ(a->SetRoute(HostGid(2), b->local_address()), Status::kOk);
    ASSERT_EQ(b->SetRoute(HostGid(1), a->local_address()), Status::kOk);
  }

  std::unique_ptr<UdpFabric> a_ = OpenLoopback();
  std::unique_ptr<UdpFabric> b_ = OpenLoopback();
};

TEST_F(UdpFabricTest, DeliversBothWaysWithTheBytesSent) {
  EXPECT_FALSE(a_->local_address().SameEndpoint(b_->local_address().storage));
  EXPECT_NE(reinterpret_cast<const sockaddr_in&>(a_->local_address().storage).sin_port, 0);
  a_->Send(TestPacket(1, 10, 64).span(), HostGid(2), 10);
  a_->Send(TestPacket(2, 11, kMaxPacketBytes).span(), HostGid(2), 11);  // the largest
  b_->Send(TestPacket(3, 12, 100).span(), HostGid(1), 12);
  // Queued until a Poll or a full batch: the port is not idle meanwhile.
  EXPECT_EQ(a_->queued(), 2u);
  EXPECT_EQ(a_->NextEventNs(), std::optional<uint64_t>(10));
  a_->Flush();
  EXPECT_EQ(a_->NextEventNs(), std::nullopt);
  std::vector<Arrival> at_b, at_a;
  PollFor(b_.get(), 2, &at_b, 500);  // Poll flushes b's packet on its way
  PollFor(a_.get(), 1, &at_a, 600);
  ASSERT_EQ(at_b.size(), 2u);
  EXPECT_EQ(at_b[0].seq, 1u);
  EXPECT_EQ(at_b[0].len, 64u);
  EXPECT_EQ(at_b[0].sent_ns, 10u);
  EXPECT_EQ(at_b[0].arrival_ns, 500u);  // the time of the Poll: no clock read
  EXPECT_EQ(at_b[1].seq, 2u);
  EXPECT_EQ(at_b[1].len, kMaxPacketBytes);
  ASSERT_EQ(at_a.size(), 1u);
  EXPECT_EQ(at_a[0].seq, 3u);
  EXPECT_EQ(at_a[0].len, 100u);
  EXPECT_EQ(a_->stats().tx_packets, 2u);
  EXPECT_EQ(b_->stats().delivered, 2u);
  EXPECT_EQ(b_->stats().rx_dropped(), 0u);
  // The whole payload arrives, not just its first bytes.
  TestPacket big(2, 11, kMaxPacketBytes);
  big.bytes[kMaxPacketBytes - 1] = 0xee;
  a_->Send(big.span(), HostGid(2), 20);
  a_->Flush();
  std::array<Datagram, 4> got;
  int n = 0;
  for (int i = 0; i < 10000 && n == 0; ++i) n = b_->Poll(got, 30);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(0, std::memcmp(got[0].data, big.bytes.data(), kMaxPacketBytes));
}

TEST_F(UdpFabricTest, SendsInBatchesOf32) {
  for (uint64_t i = 0; i < 100; ++i) {
    a_->Send(TestPacket(i, 1000 + i, 200).span(), HostGid(2), 1000 + i);
  }
  // Three full batches left by themselves; four packets wait, the oldest
  // sent at 1096.
  EXPECT_EQ(a_->stats().tx_batches, 3u);
  EXPECT_EQ(a_->stats().tx_packets, 96u);
  EXPECT_EQ(a_->queued(), 4u);
  EXPECT_EQ(a_->NextEventNs(), std::optional<uint64_t>(1096));
  std::vector<Arrival> got;
  PollFor(b_.get(), 96, &got);
  EXPECT_EQ(got.size(), 96u);
  // a's Poll sends the rest, even with nothing to receive.
  std::array<Datagram, 32> none;
  EXPECT_EQ(a_->Poll(none, 2000), 0);
  EXPECT_EQ(a_->stats().tx_batches, 4u);
  EXPECT_EQ(a_->queued(), 0u);
  PollFor(b_.get(), 100, &got);
  ASSERT_EQ(got.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(got[i].seq, i);
  // recvmmsg took at most 32 at a time.
  EXPECT_GE(b_->stats().rx_batches, 4u);
  EXPECT_EQ(b_->stats().delivered, 100u);
}

TEST_F(UdpFabricTest, SenderDropsWhatItCannotCarry) {
  std::vector<uint8_t> too_long(kMaxPacketBytes + 1, 1);
  a_->Send(too_long, HostGid(2), 0);
  a_->Send({}, HostGid(2), 0);
  a_->Send(TestPacket(1, 0, 64).span(), HostGid(9), 0);  // no route
  a_->Flush();
  EXPECT_EQ(a_->stats().sent, 3u);
  EXPECT_EQ(a_->stats().dropped_oversize, 2u);
  EXPECT_EQ(a_->stats().dropped_no_route, 1u);
  EXPECT_EQ(a_->stats().tx_packets, 0u);
  EXPECT_EQ(a_->stats().tx_batches, 0u);
}

TEST_F(UdpFabricTest, EachHostileDatagramHitsItsCounter) {
  RawSocket raw;
  std::vector<Arrival> got;
  auto settle = [&] {
    // Every datagram sent so far has been taken from the socket.
    for (int i = 0; i < 20; ++i) {
      Collect(b_.get(), 0, &got);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  // A stranger: well framed, for a GID b has, from no route's address.
  raw.SendTo(b_->local_address(), Framed(HostGid(2), 100));
  settle();
  EXPECT_EQ(b_->stats().rx_unknown_source, 1u);
  EXPECT_TRUE(got.empty());
  // The same socket once b has a route to it.
  ASSERT_EQ(b_->SetRoute(HostGid(7), raw.addr()), Status::kOk);
  raw.SendTo(b_->local_address(), Framed(HostGid(2), kMaxPacketBytes + 1));
  settle();
  EXPECT_EQ(b_->stats().rx_oversize, 1u);
  raw.SendTo(b_->local_address(), Framed(HostGid(2), 0));  // a header alone
  raw.SendTo(b_->local_address(), std::vector<uint8_t>(10, 'V'));
  settle();
  EXPECT_EQ(b_->stats().rx_short, 2u);
  std::vector<uint8_t> bad_magic = Framed(HostGid(2), 50);
  bad_magic[0] = 'X';
  std::vector<uint8_t> bad_version = Framed(HostGid(2), 50);
  bad_version[4] = 2;
  std::vector<uint8_t> bad_reserved = Framed(HostGid(2), 50);
  bad_reserved[7] = 1;
  raw.SendTo(b_->local_address(), bad_magic);
  raw.SendTo(b_->local_address(), bad_version);
  raw.SendTo(b_->local_address(), bad_reserved);
  settle();
  EXPECT_EQ(b_->stats().rx_bad_header, 3u);
  raw.SendTo(b_->local_address(), Framed(HostGid(1), 50));  // a's GID, not b's
  settle();
  EXPECT_EQ(b_->stats().rx_unknown_gid, 1u);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(b_->stats().rx_dropped(), 8u);
  // Good ones between bad ones, up to the largest, are delivered whole.
  raw.SendTo(b_->local_address(), Framed(HostGid(2), kMaxPacketBytes, 0x11));
  raw.SendTo(b_->local_address(), bad_magic);
  raw.SendTo(b_->local_address(), Framed(HostGid(2), 1, 0x22));
  settle();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].len, kMaxPacketBytes);
  EXPECT_EQ(got[1].len, 1u);
  EXPECT_EQ(b_->stats().rx_bad_header, 4u);
  EXPECT_EQ(b_->stats().delivered, 2u);
  // Without its route the socket is a stranger again.
  ASSERT_EQ(b_->RemoveRoute(HostGid(7)), Status::kOk);
  raw.SendTo(b_->local_address(), Framed(HostGid(2), 50));
  settle();
  EXPECT_EQ(b_->stats().rx_unknown_source, 2u);
  EXPECT_EQ(b_->stats().delivered, 2u);
}

TEST_F(UdpFabricTest, ASmallPoolLendsItsSlotsInTurn) {
  UdpFabricOptions o;
  o.rx_packets = 8;
  auto c = OpenLoopback(o);
  ASSERT_EQ(c->AddGid(HostGid(3)), Status::kOk);
  ASSERT_EQ(c->SetRoute(HostGid(1), a_->local_address()), Status::kOk);
  ASSERT_EQ(a_->SetRoute(HostGid(3), c->local_address()), Status::kOk);
  for (uint64_t i = 0; i < 50; ++i) {
    a_->Send(TestPacket(i, i, 300 + static_cast<uint32_t>(i)).span(), HostGid(3), i);
  }
  a_->Flush();
  std::array<Datagram, 32> batch;
  std::vector<uint64_t> seqs;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (seqs.size() < 50 && std::chrono::steady_clock::now() < end) {
    const int n = c->Poll(batch, 0);
    ASSERT_LE(n, 8);  // never more than the pool, whatever the caller's span
    // A Poll's datagrams are distinct slots, intact until the next Poll.
    for (int i = 0; i < n; ++i) {
      uint64_t seq;
      std::memcpy(&seq, batch[i].data, 8);
      EXPECT_EQ(batch[i].len, 300 + seq);
      seqs.push_back(seq);
      for (int j = 0; j < i; ++j) EXPECT_NE(batch[i].data, batch[j].data);
    }
  }
  ASSERT_EQ(seqs.size(), 50u);  // none lost: the rest waited in the socket
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(seqs[i], i);
  EXPECT_EQ(c->stats().rx_kernel_drops, 0u);
}

TEST_F(UdpFabricTest, KernelDropsOfAFullSocketAreCounted) {
  UdpFabricOptions o;
  o.rcvbuf_bytes = 4096;  // the kernel's minimum-ish: a few datagrams
  auto c = OpenLoopback(o);
  ASSERT_EQ(c->AddGid(HostGid(3)), Status::kOk);
  ASSERT_EQ(c->SetRoute(HostGid(1), a_->local_address()), Status::kOk);
  ASSERT_EQ(a_->SetRoute(HostGid(3), c->local_address()), Status::kOk);
  constexpr uint64_t kBlast = 200;
  for (uint64_t i = 0; i < kBlast; ++i) {
    a_->Send(TestPacket(i, i, 4000).span(), HostGid(3), i);
  }
  a_->Flush();
  EXPECT_EQ(a_->stats().tx_packets, kBlast);  // the sender never knew
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<Arrival> got;
  Collect(c.get(), 0, &got);
  ASSERT_LT(got.size(), kBlast);
  // The count rides on the next datagram received: a marker after the
  // blast reports every drop before it.
  a_->Send(TestPacket(kBlast, 0, 64).span(), HostGid(3), 0);
  a_->Flush();
  PollFor(c.get(), got.size() + 1, &got);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().seq, kBlast);
  EXPECT_GT(c->stats().rx_kernel_drops, 0u);
  EXPECT_EQ(got.size() + c->stats().rx_kernel_drops, kBlast + 1);
}

TEST_F(UdpFabricTest, RoutesAndGids) {
  UdpAddress v6;
  ASSERT_TRUE(ParseUdpAddress("[::1]:4000", &v6));
  EXPECT_EQ(a_->SetRoute(HostGid(5), v6), Status::kInvalid);  // not the socket's family
  EXPECT_EQ(a_->SetRoute(Gid{}, b_->local_address()), Status::kInvalid);
  EXPECT_EQ(a_->RemoveRoute(HostGid(5)), Status::kBadHandle);
  // A route is replaced, not duplicated.
  EXPECT_EQ(a_->SetRoute(HostGid(2), a_->local_address()), Status::kOk);
  EXPECT_EQ(a_->num_routes(), 1u);
  EXPECT_EQ(a_->AddGid(HostGid(1)), Status::kBusy);
  EXPECT_EQ(a_->AddGid(Gid{}), Status::kInvalid);
  EXPECT_EQ(a_->RemoveGid(HostGid(2)), Status::kBadHandle);
  // By default as many GIDs as a SoftRnic registers (1024), so a daemon's
  // attach-vm never fails at the fabric before the RNIC's own limit.
  auto d = OpenLoopback();
  for (int i = 0; i < 1024; ++i) {
    Gid g = HostGid(1);
    g[13] = static_cast<uint8_t>(i >> 8);
    g[14] = static_cast<uint8_t>(i);
    ASSERT_EQ(d->AddGid(g), Status::kOk) << i;
  }
  EXPECT_EQ(d->AddGid(HostGid(2)), Status::kNoResource);
  UdpFabricOptions o;
  o.max_routes = 2;
  o.max_gids = 1;
  auto c = OpenLoopback(o);
  EXPECT_EQ(c->AddGid(HostGid(1)), Status::kOk);
  EXPECT_EQ(c->AddGid(HostGid(2)), Status::kNoResource);
  EXPECT_EQ(c->SetRoute(HostGid(1), b_->local_address()), Status::kOk);
  EXPECT_EQ(c->SetRoute(HostGid(2), b_->local_address()), Status::kOk);
  EXPECT_EQ(c->SetRoute(HostGid(3), b_->local_address()), Status::kNoResource);
  // Packets for a GID it gave back are another port's: dropped.
  ASSERT_EQ(b_->RemoveGid(HostGid(2)), Status::kOk);
  a_->SetRoute(HostGid(2), b_->local_address());
  a_->Send(TestPacket(1, 0, 64).span(), HostGid(2), 0);
  a_->Flush();
  std::vector<Arrival> got;
  for (int i = 0; i < 200 && b_->stats().rx_unknown_gid == 0; ++i) {
    Collect(b_.get(), 0, &got);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(b_->stats().rx_unknown_gid, 1u);
}

TEST(UdpFabricOpenTest, BadListenAddressesAreRefused) {
  std::string error;
  auto a = OpenLoopback();
  // Its port is taken.
  EXPECT_EQ(UdpFabric::Open(a->local_address(), {}, &error), nullptr);
  EXPECT_NE(error.find("bind 127.0.0.1:"), std::string::npos) << error;
  EXPECT_NE(error.find("in use"), std::string::npos) << error;
  EXPECT_EQ(UdpFabric::Open(UdpAddress{}, {}, &error), nullptr);
  UdpFabricOptions o;
  o.rx_packets = 0;
  EXPECT_EQ(UdpFabric::Open(Loopback(), o, &error), nullptr);
}

TEST(UdpFabricOpenTest, AsksForTheBuffersItIsGiven) {
  UdpFabricOptions o;
  o.rcvbuf_bytes = 1 << 20;
  auto a = OpenLoopback(o);
  auto plain = OpenLoopback();
  // The kernel doubles what it grants; without CAP_NET_ADMIN it grants at
  // most net.core.rmem_max.
  long rmem_max = 0;
  if (FILE* f = fopen("/proc/sys/net/core/rmem_max", "r")) {
    EXPECT_EQ(fscanf(f, "%ld", &rmem_max), 1);
    fclose(f);
  }
  EXPECT_GE(a->rcvbuf_bytes(), std::min<long>(1 << 20, rmem_max));
  EXPECT_GT(a->rcvbuf_bytes(), plain->rcvbuf_bytes());
}

TEST(UdpAddressTest, ParsesNumericAddressesOnly) {
  UdpAddress a;
  ASSERT_TRUE(ParseUdpAddress("10.1.2.3:4791", &a));
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(UdpAddressToString(a), "10.1.2.3:4791");
  ASSERT_TRUE(ParseUdpAddress("[fe80::1]:65535", &a));
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(UdpAddressToString(a), "[fe80::1]:65535");
  ASSERT_TRUE(ParseUdpAddress("0.0.0.0:0", &a));
  std::string error;
  for (const char* bad : {"10.1.2.3", "10.1.2.3:", "10.1.2.3:65536", "10.1.2.3:-1",
                          "10.1.2.3:12x", "host.example:80", "fe80::1:80", "[10.1.2.3]:80",
                          ":80", ""}) {
    EXPECT_FALSE(ParseUdpAddress(bad, &a, &error)) << bad;
    EXPECT_NE(error.find(bad), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace vrdma::fabric::testing
