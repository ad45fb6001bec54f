// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The peer channel's codec: every type round-trips at its documented size,
// two messages match bytes written out here by hand, every check fires on
// its own malformed case (each counter exactly once over the table), Encode
// refuses what Decode would, and 200,000 randomly mutated messages (fixed
// seed) are either refused or re-encode to the same bytes.
#include "backend/peer_channel/peer_message.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

namespace vrdma::peer {
namespace {

Gid G(uint8_t last) { return Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last}; }

std::vector<uint8_t> Bytes(const PeerMessage& m) {
  std::vector<uint8_t> out(kMaxMessageBytes);
  const size_t n = Encode(m, out);
  EXPECT_GT(n, 0u) << static_cast<int>(m.type);
  out.resize(n);
  return out;
}

PeerMessage Msg(MsgType t, Body b, uint64_t seq = 7) {
  return PeerMessage{t, 0x1122334455667788ull, t == MsgType::kAck ? 0 : seq, b};
}

Connect AConnect() {
  return Connect{.src_vqpn = 0x000102,
                 .dst_vqpn = 0xffffff,
                 .data_qpn = 0x345,
                 .data_psn = 0xffffff,
                 .backup_qpn = 0x346,
                 .backup_psn = 0,
                 .conn_token = 0xdeadbeef,
                 .mode = Mode::kUc,
                 .rnr_retry = 7,
                 .retry_budget_ns = 123'456'789'000};
}

Gids TwoGids() {
  Gids g;
  g.add = false;
  g.count = 2;
  g.gids[0] = G(2);
  g.gids[1] = G(3);
  return g;
}

// One valid message of every type, and its body size from the table in
// peer_message.h.
struct Sample {
  PeerMessage m;
  size_t body;
};
std::vector<Sample> EveryType() {
  Gids full;
  full.count = kMaxGidsPerMessage;
  for (uint32_t i = 0; i < full.count; ++i) full.gids[i] = G(static_cast<uint8_t>(i + 1));
  return {
      {Msg(MsgType::kAck, Ack{~0ull}), 8},
      {Msg(MsgType::kHello, Hello{kUnitSize, 0x123456, 0x80000001, G(9)}), 32},
      {Msg(MsgType::kGids, TwoGids()), 8 + 32},
      {Msg(MsgType::kGids, full), 8 + 16 * 30},
      {Msg(MsgType::kConnect, AConnect()), 40},
      {Msg(MsgType::kConnectOk, AConnect()), 40},
      {Msg(MsgType::kConnectNative, ConnectNative{5, 6, 1}), 16},
      {Msg(MsgType::kSwitch, Switch{9, 77, 10, 11, 12, 13, Mode::kRc}), 32},
      {Msg(MsgType::kDrained, Drained{9, 0xffffffff, 12}), 16},
      {Msg(MsgType::kReady, Ready{9}), 8},
      {Msg(MsgType::kRecover, Recover{9, 0x400}), 8},
      {Msg(MsgType::kRecovered, Recovered{9, 0xabcdef}), 8},
      {Msg(MsgType::kCredit, Credit{0x200, 0xfffffffe}), 8},
  };
}

TEST(PeerMessageTest, EveryTypeRoundTripsAtItsSize) {
  for (const Sample& s : EveryType()) {
    const std::vector<uint8_t> b = Bytes(s.m);
    EXPECT_EQ(b.size(), kHeaderBytes + s.body) << static_cast<int>(s.m.type);
    EXPECT_LE(b.size(), kMaxMessageBytes);
    PeerMessage back;
    ASSERT_EQ(Decode(b, &back), PeerCheck::kOk) << static_cast<int>(s.m.type);
    EXPECT_EQ(back, s.m) << static_cast<int>(s.m.type);
  }
}

TEST(PeerMessageTest, BytesAsDocumented) {
  // HELLO from daemon 0x0102030405060708, seq 1.
  PeerMessage h{MsgType::kHello, 0x0102030405060708ull, 1,
                Hello{4096, 0x0a0b0c, 0x11223344, G(0x77)}};
  const std::vector<uint8_t> want = {
      2, 1, 56, 0, 0, 0, 0, 0,                          // type, version, length 56
      8, 7, 6, 5, 4, 3, 2, 1,                           // origin
      1, 0, 0, 0, 0, 0, 0, 0,                           // seq
      0, 0x10, 0, 0,                                    // unit_size 4096
      0x0c, 0x0b, 0x0a, 0,                              // ACK QPN
      0x44, 0x33, 0x22, 0x11,                           // Q_Key
      0, 0, 0, 0,                                       // reserved
      0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77};  // GID
  EXPECT_EQ(Bytes(h), want);
  // GIDS remove of two GIDs.
  std::vector<uint8_t> gids = {3, 1, 64, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1,
                               2, 0, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0, 0};
  for (uint8_t last : {2, 3}) {
    const Gid g = G(last);
    gids.insert(gids.end(), g.begin(), g.end());
  }
  EXPECT_EQ(Bytes(PeerMessage{MsgType::kGids, 0x0102030405060708ull, 2, TwoGids()}), gids);
}

// A valid message's bytes, changed by `mutate`, must fail `check`.
struct Bad {
  const char* what;
  PeerMessage base;
  std::function<void(std::vector<uint8_t>&)> mutate;
  PeerCheck check;
};

void SetLength(std::vector<uint8_t>& b) {
  b[2] = static_cast<uint8_t>(b.size());
  b[3] = static_cast<uint8_t>(b.size() >> 8);
}

TEST(PeerMessageTest, EachCheckFiresOnItsCase) {
  const PeerMessage hello = Msg(MsgType::kHello, Hello{kUnitSize, 0x10, 1, G(1)});
  const PeerMessage conn = Msg(MsgType::kConnect, AConnect());
  const PeerMessage gids = Msg(MsgType::kGids, TwoGids());
  const PeerMessage ack = Msg(MsgType::kAck, Ack{5});
  const PeerMessage sw = Msg(MsgType::kSwitch, Switch{9, 77, 10, 11, 12, 13, Mode::kRc});
  const constexpr size_t H = kHeaderBytes;
  const std::vector<Bad> cases = {
      {"short", hello, [](auto& b) { b.resize(23); }, PeerCheck::kShort},
      {"long", hello, [](auto& b) { b.resize(513); SetLength(b); }, PeerCheck::kLong},
      {"length", hello, [](auto& b) { b[2] += 1; }, PeerCheck::kLength},
      {"version", hello, [](auto& b) { b[1] = 2; }, PeerCheck::kVersion},
      {"type", hello, [](auto& b) { b[0] = 13; }, PeerCheck::kType},
      {"reserved", conn, [](auto& b) { b[H + 31] = 1; }, PeerCheck::kReserved},
      {"origin", hello, [](auto& b) { std::fill(b.begin() + 8, b.begin() + 16, 0); },
       PeerCheck::kOrigin},
      {"seq", hello, [](auto& b) { std::fill(b.begin() + 16, b.begin() + 24, 0); },
       PeerCheck::kSeq},
      {"body length", hello, [](auto& b) { b.push_back(0); SetLength(b); },
       PeerCheck::kBodyLength},
      {"qpn", conn, [](auto& b) { b[H + 11] = 1; }, PeerCheck::kQpn},  // data QPN > 2^24
      {"psn", sw, [](auto& b) { b[H + 15] = 1; }, PeerCheck::kPsn},    // data PSN > 2^24
      {"mode", conn, [](auto& b) { b[H + 28] = 0; }, PeerCheck::kMode},  // native in CONNECT
      {"rnr_retry", conn, [](auto& b) { b[H + 29] = 8; }, PeerCheck::kRnrRetry},
      {"token", sw, [](auto& b) { std::fill(b.begin() + H + 4, b.begin() + H + 8, 0); },
       PeerCheck::kToken},
      {"retry budget", conn, [](auto& b) { std::fill(b.begin() + H + 32, b.end(), 0); },
       PeerCheck::kRetryBudget},
      {"unit size", hello, [](auto& b) { b[H + 1] = 0x20; }, PeerCheck::kUnitSize},
      {"gid op", gids, [](auto& b) { b[H] = 3; }, PeerCheck::kGidOp},
      {"gid count", gids, [](auto& b) { b[H + 1] = 31; }, PeerCheck::kGidCount},
      {"zero gid", gids, [](auto& b) { std::fill(b.begin() + H + 24, b.end(), 0); },
       PeerCheck::kZeroGid},
      {"duplicate gid", gids, [](auto& b) { b[b.size() - 1] = 2; }, PeerCheck::kDuplicateGid},
      {"ack seq", ack, [](auto& b) { std::fill(b.begin() + H, b.end(), 0); },
       PeerCheck::kAckSeq},
  };
  PeerCheckCounters counters;
  for (const Bad& c : cases) {
    std::vector<uint8_t> b = Bytes(c.base);
    c.mutate(b);
    PeerMessage m;
    const PeerCheck got = Decode(b, &m);
    EXPECT_EQ(got, c.check) << c.what << ": " << PeerCheckName(got);
    counters.Count(got);
  }
  // Every check has its case, and each fired exactly once.
  for (size_t i = 1; i < static_cast<size_t>(PeerCheck::kCount); ++i) {
    EXPECT_EQ(counters.n[i], 1u) << PeerCheckName(static_cast<PeerCheck>(i));
  }
  EXPECT_EQ(counters[PeerCheck::kOk], 0u);
  EXPECT_STREQ(PeerCheckName(PeerCheck::kDuplicateGid), "peer_duplicate_gid");
}

TEST(PeerMessageTest, EncodeRefusesWhatDecodeWould) {
  std::vector<uint8_t> out(kMaxMessageBytes);
  // The body of another type.
  EXPECT_EQ(Encode(PeerMessage{MsgType::kHello, 1, 1, Ready{9}}, out), 0u);
  // A QPN too wide, a PSN too wide, QP1, a zero token.
  Connect c = AConnect();
  c.dst_vqpn = 0x1000000;
  EXPECT_EQ(Encode(Msg(MsgType::kConnect, c), out), 0u);
  EXPECT_EQ(Encode(Msg(MsgType::kRecovered, Recovered{9, 0x1000000}), out), 0u);
  EXPECT_EQ(Encode(Msg(MsgType::kReady, Ready{1}), out), 0u);
  EXPECT_EQ(Encode(Msg(MsgType::kConnectNative, ConnectNative{5, 6, 0}), out), 0u);
  // Too many GIDs for one message, or none.
  Gids g;
  g.count = kMaxGidsPerMessage + 1;
  EXPECT_EQ(Encode(Msg(MsgType::kGids, g), out), 0u);
  g.count = 0;
  EXPECT_EQ(Encode(Msg(MsgType::kGids, g), out), 0u);
  // Origin 0; an ACK with a seq; a room too small.
  EXPECT_EQ(Encode(PeerMessage{MsgType::kReady, 0, 1, Ready{9}}, out), 0u);
  EXPECT_EQ(Encode(PeerMessage{MsgType::kAck, 1, 1, Ack{3}}, out), 0u);
  std::vector<uint8_t> small(kHeaderBytes + 7);
  EXPECT_EQ(Encode(Msg(MsgType::kReady, Ready{9}), small), 0u);
  small.resize(kHeaderBytes + 8);
  EXPECT_EQ(Encode(Msg(MsgType::kReady, Ready{9}), small), kHeaderBytes + 8);
}

// The header's behind field (the channel's resync) and a HELLO without the
// layer's ACK QP.
TEST(PeerMessageTest, BehindAndLayerlessHello) {
  PeerMessage m = Msg(MsgType::kReady, Ready{9});
  m.seq = 10;
  m.behind = 9;
  std::vector<uint8_t> b = Bytes(m);
  EXPECT_EQ(b[4], 9);
  PeerMessage back;
  ASSERT_EQ(Decode(b, &back), PeerCheck::kOk);
  EXPECT_EQ(back, m);
  b[4] = 10;  // behind == seq: nothing before seq 1
  EXPECT_EQ(Decode(b, &back), PeerCheck::kSeq);
  std::vector<uint8_t> out(kMaxMessageBytes);
  m.behind = 10;
  EXPECT_EQ(Encode(m, out), 0u);
  PeerMessage ack = Msg(MsgType::kAck, Ack{5});
  ack.seq = 0;
  ack.behind = 1;
  EXPECT_EQ(Encode(ack, out), 0u);
  ack.behind = 0;
  b = Bytes(ack);
  b[5] = 1;
  EXPECT_EQ(Decode(b, &back), PeerCheck::kSeq);

  const PeerMessage none = Msg(MsgType::kHello, Hello{kUnitSize, 0, 0, Gid{}});
  b = Bytes(none);
  ASSERT_EQ(Decode(b, &back), PeerCheck::kOk);
  EXPECT_EQ(back, none);
  // Partly there is not "none".
  EXPECT_EQ(Encode(Msg(MsgType::kHello, Hello{kUnitSize, 0, 1, Gid{}}), out), 0u);
  EXPECT_EQ(Encode(Msg(MsgType::kHello, Hello{kUnitSize, 0, 0, G(1)}), out), 0u);
  EXPECT_EQ(Encode(Msg(MsgType::kHello, Hello{kUnitSize, 5, 0, Gid{}}), out), 0u);
}

TEST(PeerMessageTest, MutatedMessagesAreRefusedOrCanonical) {
  std::mt19937_64 rng(15);
  const std::vector<Sample> samples = EveryType();
  PeerCheckCounters counters;
  constexpr int kRuns = 200'000;
  for (int i = 0; i < kRuns; ++i) {
    std::vector<uint8_t> b = Bytes(samples[rng() % samples.size()].m);
    switch (rng() % 4) {
      case 0:  // flip bits
        for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
          b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        }
        break;
      case 1:  // a random byte
        b[rng() % b.size()] = static_cast<uint8_t>(rng());
        break;
      case 2:  // cut or grow, length field kept consistent or not
        b.resize(rng() % (kMaxMessageBytes + 16));
        if (b.size() >= 4 && rng() % 2 == 0) SetLength(b);
        break;
      default:  // random bytes after a valid header
        for (size_t k = kHeaderBytes; k < b.size(); ++k) b[k] = static_cast<uint8_t>(rng());
        break;
    }
    PeerMessage m;
    const PeerCheck got = Decode(b, &m);
    counters.Count(got);
    if (got == PeerCheck::kOk) {
      // Accepted: exactly the bytes its own encoding gives.
      std::vector<uint8_t> again(kMaxMessageBytes);
      again.resize(Encode(m, again));
      ASSERT_EQ(again, b) << i;
    }
  }
  uint64_t total = 0;
  for (uint64_t n : counters.n) total += n;
  EXPECT_EQ(total, static_cast<uint64_t>(kRuns));
  // The mutations reach deep checks, not only the header's.
  EXPECT_GT(counters[PeerCheck::kOk], 0u);
  EXPECT_GT(counters[PeerCheck::kQpn], 0u);
  EXPECT_GT(counters[PeerCheck::kReserved], 0u);
  EXPECT_GT(counters[PeerCheck::kDuplicateGid] + counters[PeerCheck::kZeroGid], 0u);
}

}  // namespace
}  // namespace vrdma::peer
