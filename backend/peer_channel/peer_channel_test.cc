// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// PeerChannel over real UDP sockets on 127.0.0.1, in one process: driven
// by hand with a test clock (Turn), or each on its own EpollEventLoop
// thread. Loss and duplication are injected by the tx hook.
#include "backend/peer_channel/peer_channel.h"
#include "backend/peer_channel/testing/free_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "backend/base/byte_order.h"

namespace vrdma::peer {
namespace {

using testing::FreeAddress;

Gid G(uint8_t host, uint8_t vm) {
  Gid g{};
  g[10] = 0xff;
  g[11] = 0xff;
  g[12] = 10;
  g[14] = host;
  g[15] = vm;
  return g;
}

std::vector<uint8_t> Encoded(const PeerMessage& m) {
  std::vector<uint8_t> b(kMaxMessageBytes);
  b.resize(Encode(m, b));
  EXPECT_FALSE(b.empty());
  return b;
}

// A CREDIT carrying n: the test's numbered message.
std::vector<uint8_t> Numbered(uint32_t n) {
  return Encoded(PeerMessage{MsgType::kCredit, 99, 1, Credit{2, n}});
}

std::vector<uint8_t> LayerHello(uint32_t qpn, uint8_t host) {
  return Encoded(PeerMessage{MsgType::kHello, 99, 1, Hello{kUnitSize, qpn, 0x1111, G(host, 200)}});
}

struct Node {
  std::unique_ptr<PeerChannel> ch;
  std::vector<std::vector<uint8_t>> got;  // what the sink was handed
};

class PeerChannelTest : public ::testing::Test {
 protected:
  // n channels, each the peer of every other, on the test clock.
  void Make(int n, PeerChannelOptions base = {}) {
    std::vector<fabric::UdpAddress> addr;
    for (int i = 0; i < n; ++i) addr.push_back(FreeAddress());
    nodes_.resize(n);
    for (int i = 0; i < n; ++i) {
      PeerChannelOptions o = base;
      o.listen = addr[i];
      for (int j = 0; j < n; ++j) {
        if (j != i) o.peers.push_back(addr[j]);
      }
      o.daemon_id = 0x100 + i;
      o.clock = [this] { return now_; };
      if (!o.tx_hook) {
        o.tx_hook = [this, i](std::span<const uint8_t>) { return Fate(i); };
      }
      std::string error;
      nodes_[i].ch = PeerChannel::Open(o, &error);
      ASSERT_TRUE(nodes_[i].ch) << error;
      Node* node = &nodes_[i];
      node->ch->SetSink([node](std::span<const uint8_t> b) {
        node->got.emplace_back(b.begin(), b.end());
      });
    }
  }
  int Fate(int node) {
    if (mute_[node]) return 0;
    std::uniform_real_distribution<double> u(0, 1);
    if (u(rng_) < loss_) return 0;
    if (u(rng_) < dup_) return 2;
    return 1;
  }
  // Turns every channel, draining inboxes; the clock moves by step_ns.
  void Run(int turns, uint64_t step_ns = 1'000'000) {
    for (int t = 0; t < turns; ++t) {
      for (Node& n : nodes_) n.ch->Turn();
      for (Node& n : nodes_) {
        if (drain_) n.ch->DrainInbox();
      }
      now_ += step_ns;
    }
  }
  PeerChannel& ch(int i) { return *nodes_[i].ch; }
  // The numbers of the CREDITs a node's sink was handed, in order.
  static std::vector<uint32_t> Credits(const Node& n) {
    std::vector<uint32_t> out;
    for (const auto& b : n.got) {
      PeerMessage m;
      EXPECT_EQ(Decode(b, &m), PeerCheck::kOk);
      if (m.type == MsgType::kCredit) out.push_back(std::get<Credit>(m.body).posted);
    }
    return out;
  }

  uint64_t now_ = 1'000'000'000;
  std::vector<Node> nodes_;
  std::mt19937_64 rng_{15};
  double loss_ = 0, dup_ = 0;
  bool mute_[4] = {};
  bool drain_ = true;
};

TEST_F(PeerChannelTest, HelloDiscovery) {
  Make(2);
  Run(3);
  const auto pa = ch(0).Peers();
  const auto pb = ch(1).Peers();
  ASSERT_EQ(pa.size(), 1u);
  EXPECT_EQ(pa[0].id, ch(1).id());
  EXPECT_EQ(pb[0].id, ch(0).id());
  EXPECT_FALSE(pa[0].has_layer);  // no layer: a HELLO without an ACK QP
  EXPECT_EQ(pa[0].pending, 0u);
  EXPECT_EQ(ch(0).stats().rx_malformed, 0u);
  // Without a layer nothing goes to the sink.
  EXPECT_TRUE(nodes_[0].got.empty());
  // HELLO every second.
  const uint64_t sent = ch(0).stats().sent;
  Run(1001);
  EXPECT_EQ(ch(0).stats().sent, sent + 1);
}

TEST_F(PeerChannelTest, GidTableBothWays) {
  Make(2);
  const Gid a1 = G(1, 1), a2 = G(1, 2), b1 = G(2, 1);
  const Gid mine[] = {a1, a2};
  ch(0).AddGids(mine);
  ch(1).AddGids(std::span(&b1, 1));
  Run(3);
  auto tb = ch(1).GidTable();
  ASSERT_EQ(tb.size(), 2u);
  EXPECT_EQ(tb[0].second, ch(0).id());
  auto ta = ch(0).GidTable();
  ASSERT_EQ(ta.size(), 1u);
  EXPECT_EQ(ta[0].first, b1);
  // Owned, but not by a daemon with the layer: no peer for the layer.
  EXPECT_FALSE(ch(1).PeerOf(a1).has_value());
  // a's layer says hello (its ACK QP): b's layer is handed it, PeerOf answers.
  ch(0).Broadcast(LayerHello(0x55, 1));
  Run(2);
  EXPECT_EQ(ch(1).PeerOf(a1), ch(0).id());
  EXPECT_EQ(ch(1).PeerOf(a2), ch(0).id());
  EXPECT_FALSE(ch(1).PeerOf(b1).has_value());  // its own: not a peer's
  ASSERT_EQ(nodes_[1].got.size(), 1u);
  PeerMessage m;
  ASSERT_EQ(Decode(nodes_[1].got[0], &m), PeerCheck::kOk);
  EXPECT_EQ(m.type, MsgType::kHello);
  EXPECT_EQ(m.origin, ch(0).id());  // the channel's id, whatever the layer wrote
  // The channel's own periodic HELLO now carries the layer's ACK QP.
  Run(1001);
  EXPECT_EQ(ch(1).PeerOf(a1), ch(0).id());
  // Removal.
  ch(0).RemoveGids(std::span(&a1, 1));
  Run(2);
  EXPECT_FALSE(ch(1).PeerOf(a1).has_value());
  EXPECT_EQ(ch(1).PeerOf(a2), ch(0).id());
  EXPECT_EQ(ch(1).GidTable().size(), 1u);
}

TEST_F(PeerChannelTest, ThreeChannels) {
  Make(3);
  for (int i = 0; i < 3; ++i) {
    const Gid g = G(static_cast<uint8_t>(i + 1), 1);
    ch(i).AddGids(std::span(&g, 1));
    ch(i).Broadcast(LayerHello(0x10 + i, static_cast<uint8_t>(i + 1)));
  }
  Run(3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ch(i).GidTable().size(), 2u) << i;
    for (int j = 0; j < 3; ++j) {
      const auto owner = ch(i).PeerOf(G(static_cast<uint8_t>(j + 1), 1));
      if (i == j) {
        EXPECT_FALSE(owner.has_value());
      } else {
        EXPECT_EQ(owner, ch(j).id()) << i << " " << j;
      }
    }
  }
  // Send reaches only the daemon named.
  ASSERT_TRUE(ch(0).Send(ch(2).id(), Numbered(7)));
  Run(2);
  EXPECT_EQ(Credits(nodes_[2]), std::vector<uint32_t>{7});
  EXPECT_TRUE(Credits(nodes_[1]).empty());
}

// Every message arrives once, in order, under loss and duplication both
// ways (ACKs too).
TEST_F(PeerChannelTest, ExactlyOnceInOrderUnderLossAndDuplication) {
  loss_ = 0.3;
  dup_ = 0.2;
  Make(2);
  Run(40);
  ASSERT_EQ(ch(0).Peers()[0].id, ch(1).id());
  nodes_[1].got.clear();
  constexpr uint32_t kMessages = 500;
  uint32_t next = 0;
  for (int t = 0; t < 20000 && (next < kMessages || ch(0).Peers()[0].pending > 0); ++t) {
    while (next < kMessages && ch(0).Peers()[0].span < 32) {
      ASSERT_TRUE(ch(0).Send(ch(1).id(), Numbered(next)));
      ch(0).Turn();
      ++next;
    }
    Run(1, 250'000);
  }
  std::vector<uint32_t> seen;
  for (const auto& b : nodes_[1].got) {
    PeerMessage m;
    ASSERT_EQ(Decode(b, &m), PeerCheck::kOk);
    if (m.type == MsgType::kCredit) seen.push_back(std::get<Credit>(m.body).posted);
  }
  ASSERT_EQ(seen.size(), kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) ASSERT_EQ(seen[i], i);
  const PeerChannelStats& s = ch(0).stats();
  EXPECT_GT(s.resent, 100u);
  EXPECT_EQ(s.gave_up, 0u);
  EXPECT_EQ(s.evicted, 0u);
  EXPECT_GT(ch(1).stats().rx_duplicate, 10u);
  EXPECT_EQ(ch(1).stats().skipped, 0u);
  EXPECT_EQ(ch(1).stats().rx_malformed, 0u);
}

// Nobody answers: each message is resent 20 times, then given up.
TEST_F(PeerChannelTest, ResendLimit) {
  Make(2);
  mute_[1] = true;  // b never acks (nor says hello)
  Run(1);
  const uint64_t sent = ch(0).stats().sent;  // the HELLO
  const Gid g = G(1, 1);
  ch(0).AddGids(std::span(&g, 1));
  Run(30);
  const PeerChannelStats& s = ch(0).stats();
  EXPECT_EQ(s.sent, sent + 1);
  EXPECT_EQ(s.resent, 20u * s.sent);
  EXPECT_EQ(s.gave_up, s.sent);
  EXPECT_EQ(ch(0).Peers()[0].pending, 0u);
  // b got them (it only never answered): once each.
  EXPECT_EQ(ch(1).GidTable().size(), 1u);
}

// A peer that never acks loses the oldest pending messages beyond the
// window; the receiver, once it hears again, skips what was given up.
TEST_F(PeerChannelTest, WindowEvictsOldestAndReceiverSkips) {
  PeerChannelOptions o;
  o.window = 4;
  Make(2, o);
  Run(3);
  mute_[0] = true;  // a's messages are lost
  for (uint32_t i = 0; i < 10; ++i) ASSERT_TRUE(ch(0).Send(ch(1).id(), Numbered(i)));
  ch(0).Turn();
  EXPECT_EQ(ch(0).stats().evicted, 6u);
  EXPECT_EQ(ch(0).Peers()[0].pending, 4u);
  mute_[0] = false;
  Run(3);
  std::vector<uint32_t> seen;
  for (const auto& b : nodes_[1].got) {
    PeerMessage m;
    ASSERT_EQ(Decode(b, &m), PeerCheck::kOk);
    if (m.type == MsgType::kCredit) seen.push_back(std::get<Credit>(m.body).posted);
  }
  EXPECT_EQ(seen, (std::vector<uint32_t>{6, 7, 8, 9}));
  EXPECT_EQ(ch(1).stats().skipped, 6u);
}

// CONNECT is sent once: the layer repeats it by its own rule.
TEST_F(PeerChannelTest, ConnectIsNotResent) {
  Make(2);
  Run(3);
  mute_[1] = true;  // no ACKs
  Connect c{.src_vqpn = 5, .dst_vqpn = 6, .data_qpn = 7, .data_psn = 1, .backup_qpn = 7,
            .backup_psn = 1, .conn_token = 3, .mode = Mode::kUc, .rnr_retry = 7,
            .retry_budget_ns = 1000};
  const uint64_t resent = ch(0).stats().resent;
  ASSERT_TRUE(ch(0).Send(ch(1).id(), Encoded(PeerMessage{MsgType::kConnect, 99, 1, c})));
  Run(5);
  EXPECT_EQ(ch(0).stats().resent, resent);
  EXPECT_EQ(ch(0).Peers()[0].pending, 0u);
  EXPECT_EQ(ch(0).stats().gave_up, 0u);
  // A later message is delivered: nothing waits for the CONNECT.
  mute_[1] = false;
  nodes_[1].got.clear();
  mute_[0] = true;  // and the CONNECT is lost on a's side from now on
  ASSERT_TRUE(ch(0).Send(ch(1).id(), Encoded(PeerMessage{MsgType::kConnect, 99, 1, c})));
  Run(2);
  mute_[0] = false;
  ASSERT_TRUE(ch(0).Send(ch(1).id(), Numbered(1)));
  Run(3);
  // (b got the first CONNECT before the clear: only its ACKs were lost.)
  ASSERT_EQ(nodes_[1].got.size(), 1u);
  EXPECT_EQ(Credits(nodes_[1]), std::vector<uint32_t>{1});
  EXPECT_EQ(ch(1).stats().skipped, 1u);
}

// A full inbox holds messages back (unacknowledged) until the layer drains.
TEST_F(PeerChannelTest, FullInboxHoldsBack) {
  PeerChannelOptions o;
  o.inbox = 2;
  Make(2, o);
  Run(3);
  drain_ = false;
  for (uint32_t i = 0; i < 6; ++i) ASSERT_TRUE(ch(0).Send(ch(1).id(), Numbered(i)));
  Run(5);
  EXPECT_GT(ch(1).stats().inbox_full, 0u);
  EXPECT_EQ(ch(0).Peers()[0].pending, 4u);
  drain_ = true;
  Run(10);
  std::vector<uint32_t> seen;
  for (const auto& b : nodes_[1].got) {
    PeerMessage m;
    ASSERT_EQ(Decode(b, &m), PeerCheck::kOk);
    seen.push_back(std::get<Credit>(m.body).posted);
  }
  EXPECT_EQ(seen, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ch(0).Peers()[0].pending, 0u);
}

TEST_F(PeerChannelTest, SendToUnknownDaemonIsRefused) {
  Make(2);
  EXPECT_FALSE(ch(0).Send(0x777, Numbered(1)));  // nobody heard from yet
  Run(3);
  EXPECT_FALSE(ch(0).Send(0x777, Numbered(1)));
  EXPECT_FALSE(ch(0).Send(ch(1).id(), std::vector<uint8_t>(600, 0)));
  EXPECT_TRUE(ch(0).Send(ch(1).id(), Numbered(1)));
  // Bytes that are no message: dropped on the control side, counted.
  std::vector<uint8_t> junk(40, 0xab);
  EXPECT_TRUE(ch(0).Send(ch(1).id(), junk));
  Run(2);
  EXPECT_EQ(ch(0).stats().tx_invalid, 1u);
}

// A daemon restarted on the same address (a new id): its old GIDs go, the
// new incarnation is resynchronised.
TEST_F(PeerChannelTest, PeerRestart) {
  Make(2);
  const Gid g = G(2, 1), g2 = G(2, 2);
  ch(1).AddGids(std::span(&g, 1));
  Run(3);
  EXPECT_EQ(ch(0).GidTable().size(), 1u);
  PeerChannelOptions o;
  o.listen = ch(1).local_address();
  o.peers = {ch(0).local_address()};
  o.daemon_id = 0x999;
  o.clock = [this] { return now_; };
  nodes_[1].ch.reset();
  std::string error;
  nodes_[1].ch = PeerChannel::Open(o, &error);
  ASSERT_TRUE(nodes_[1].ch) << error;
  ch(1).AddGids(std::span(&g2, 1));
  Run(3);
  EXPECT_EQ(ch(0).stats().peer_restarts, 1u);
  EXPECT_EQ(ch(0).Peers()[0].id, 0x999u);
  auto t = ch(0).GidTable();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].first, g2);
  // Both ways work after the restart.
  ASSERT_TRUE(ch(0).Send(0x999, Numbered(5)));
  Run(2);
  EXPECT_EQ(ch(0).Peers()[0].pending, 0u);
  EXPECT_EQ(ch(1).Peers()[0].id, ch(0).id());
}

// Hostile datagrams: counted and dropped; the channel keeps working.
TEST_F(PeerChannelTest, HostileDatagrams) {
  // Node 1 is a raw socket the test writes with.
  fabric::UdpAddress raw_addr = FreeAddress();
  const int raw = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_EQ(bind(raw, raw_addr.sa(), raw_addr.len), 0);
  PeerChannelOptions o;
  o.listen = FreeAddress();
  o.peers = {raw_addr};
  o.daemon_id = 0x100;
  o.clock = [this] { return now_; };
  std::string error;
  auto a = PeerChannel::Open(o, &error);
  ASSERT_TRUE(a) << error;
  std::vector<std::vector<uint8_t>> got;
  a->SetSink([&](std::span<const uint8_t> b) { got.emplace_back(b.begin(), b.end()); });
  const fabric::UdpAddress to = a->local_address();
  auto send = [&](const std::vector<uint8_t>& b) {
    ASSERT_EQ(sendto(raw, b.data(), b.size(), 0, to.sa(), to.len), static_cast<ssize_t>(b.size()));
    a->Turn();
  };
  auto msg = [](uint64_t seq, uint32_t n, uint64_t origin = 0x200, uint32_t behind = 0) {
    PeerMessage m{MsgType::kCredit, origin, seq, Credit{2, n}};
    m.behind = behind;
    return Encoded(m);
  };
  send({});                                     // empty
  send(std::vector<uint8_t>(10, 1));            // truncated header
  std::vector<uint8_t> b = msg(1, 1);
  b.resize(b.size() - 3);                       // truncated body
  send(b);
  b = msg(1, 1);
  b[1] = 9;                                     // wrong version
  send(b);
  send(std::vector<uint8_t>(4000, 0x41));       // huge
  b = msg(1, 1);
  b[2] = 0xff;                                  // the length lies
  b[3] = 0xff;
  send(b);
  b = msg(5, 1);
  b[4] = 7;                                     // behind beyond seq
  send(b);
  const PeerChannelStats& s = a->stats();
  EXPECT_EQ(s.rx_malformed, 7u);
  EXPECT_EQ(s.checks[PeerCheck::kShort], 2u);
  EXPECT_EQ(s.checks[PeerCheck::kLong], 1u);
  EXPECT_EQ(s.checks[PeerCheck::kVersion], 1u);
  EXPECT_EQ(s.checks[PeerCheck::kSeq], 1u);
  EXPECT_EQ(a->Peers()[0].id, 0u);  // nothing valid heard yet
  send(msg(3, 1, a->id()));  // our own id
  EXPECT_EQ(s.rx_bad_origin, 1u);
  // A stranger.
  const int stranger = socket(AF_INET, SOCK_DGRAM, 0);
  b = msg(1, 1);
  ASSERT_GT(sendto(stranger, b.data(), b.size(), 0, to.sa(), to.len), 0);
  a->Turn();
  close(stranger);
  EXPECT_EQ(s.rx_unknown_sender, 1u);
  EXPECT_TRUE(got.empty());
  // Valid: seq 1, then a duplicate, one far outside the window, an ACK of
  // nothing.
  send(msg(1, 10));
  send(msg(1, 10));
  send(msg(1'000'000, 11, 0x200, 1'000'000 - 2));  // nothing given up, far ahead
  send(Encoded(PeerMessage{MsgType::kAck, 0x200, 0, Ack{12345}}));
  EXPECT_EQ(a->Peers()[0].id, 0x200u);
  EXPECT_EQ(s.rx_duplicate, 1u);
  EXPECT_EQ(s.rx_outside_window, 1u);
  EXPECT_EQ(s.rx_unknown_ack, 1u);
  // GIDS floods are bounded: the table takes max_gids_per_peer at most.
  for (uint32_t k = 0; k < 40; ++k) {
    Gids g;
    g.count = kMaxGidsPerMessage;
    for (uint32_t i = 0; i < g.count; ++i) {
      g.gids[i] = G(9, 0);
      StoreLe32(g.gids[i].data(), k * 100 + i + 1);
    }
    send(Encoded(PeerMessage{MsgType::kGids, 0x200, 2 + k, g}));
  }
  EXPECT_EQ(a->GidTable().size(), 1024u);
  EXPECT_EQ(s.gids_full, 40u * kMaxGidsPerMessage - 1024u);
  send(msg(42, 12));  // in order after the GIDS
  a->DrainInbox();
  ASSERT_EQ(got.size(), 2u);  // the CREDITs 10 and 12
  // Every valid one was acknowledged (the raw socket got the ACKs).
  uint8_t ack[kMaxMessageBytes];
  int acks = 0;
  while (recv(raw, ack, sizeof(ack), MSG_DONTWAIT) > 0) acks += ack[0] == 1;
  EXPECT_EQ(acks, 1 + 1 + 40 + 1);  // the duplicate is acknowledged again
  close(raw);
}

// Each channel on its own event-loop thread, real time; the test thread
// is the data path (Send, DrainInbox).
TEST_F(PeerChannelTest, OnEventLoops) {
  auto la = EpollEventLoop::Create();
  auto lb = EpollEventLoop::Create();
  ASSERT_TRUE(la && lb);
  fabric::UdpAddress aa = FreeAddress(), ab = FreeAddress();
  PeerChannelOptions oa, ob;
  oa.listen = aa;
  oa.peers = {ab};
  ob.listen = ab;
  ob.peers = {aa};
  std::string error;
  auto a = PeerChannel::Open(oa, &error);
  auto b = PeerChannel::Open(ob, &error);
  ASSERT_TRUE(a && b) << error;
  std::vector<uint32_t> seen;
  b->SetSink([&](std::span<const uint8_t> bytes) {
    PeerMessage m;
    if (Decode(bytes, &m) == PeerCheck::kOk && m.type == MsgType::kCredit) {
      seen.push_back(std::get<Credit>(m.body).posted);
    }
  });
  const Gid g = G(1, 1);
  a->AddGids(std::span(&g, 1));
  a->Start(*la);
  b->Start(*lb);
  std::thread ta([&] { la->Run(); });
  std::thread tb([&] { lb->Run(); });
  a->Broadcast(LayerHello(0x20, 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!b->PeerOf(g).has_value() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(b->PeerOf(g), a->id());
  uint64_t b_id = 0;
  while (b_id == 0 && std::chrono::steady_clock::now() < deadline) {
    b_id = 0;
    // a learns b's id from b's HELLO.
    for (int i = 0; i < 100 && !a->Send(b->id(), Numbered(0)); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    b_id = b->id();
  }
  for (uint32_t i = 1; i < 100; ++i) {
    while (!a->Send(b->id(), Numbered(i))) std::this_thread::yield();
  }
  while (seen.size() < 100 && std::chrono::steady_clock::now() < deadline) {
    b->DrainInbox();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ASSERT_EQ(seen.size(), 100u);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  la->Stop();
  lb->Stop();
  ta.join();
  tb.join();
  a->Stop();
  b->Stop();
}

}  // namespace
}  // namespace vrdma::peer
