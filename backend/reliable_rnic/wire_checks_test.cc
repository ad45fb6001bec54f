// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The checks of docs/reliability.md §3.6 that wire_format.cc makes: one test
// per row (each hostile case asserts the counter it hits), that a valid
// packet passes, and that when several checks fail the first in §3.6's
// order is the one counted. Rows decided by the layer's tables
// (ack_unknown_qp, rx_access_nak, rx_duplicate, rx_ranges_full,
// rx_lower_error, the "already acked" part of ack_unknown_number and the
// hold-time part of ack_bad_sample) are not here.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/reliable_rnic/wire_format.h"

namespace vrdma::reliable {
namespace {

constexpr uint32_t kVqpn = 0x000123;
constexpr uint32_t kToken = 0x5eed1234;

// ---- Counters -------------------------------------------------------------------

TEST(ReliableWireTest, CounterNamesAreThoseOfTheDocInCheckOrder) {
  // §3.6's table, top to bottom, with §3.4's two acknowledged-again
  // counters where their checks run.
  const std::vector<std::string> expected = {
      "ack_malformed",     "ack_unknown_qp",        "ack_stale_token",
      "ack_bad_mid",       "ack_unknown_number",    "ack_bad_nak",
      "ack_bad_sample",    "rx_malformed",          "rx_wrong_qp",
      "rx_stale_token",    "rx_after_delivery",     "rx_mid_outside_window",
      "rx_bad_offset",     "rx_bad_rcv_index",      "rx_access_nak",
      "rx_duplicate",      "rx_ranges_full",        "rx_lower_error"};
  ASSERT_EQ(kWireCounterCount, expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(WireCounterName(static_cast<WireCounter>(i)), expected[i]);
  }
  EXPECT_STREQ(WireCounterName(WireCounter::kCount), "unknown");
  EXPECT_EQ(WireCounterAction(WireCounter::kAckUnknownNumber),
            WireAction::kSkipEntry);
  EXPECT_EQ(WireCounterAction(WireCounter::kAckBadSample), WireAction::kNoSample);
  EXPECT_EQ(WireCounterAction(WireCounter::kRxAccessNak), WireAction::kNak);
  EXPECT_EQ(WireCounterAction(WireCounter::kRxAfterDelivery),
            WireAction::kAckAgain);
  EXPECT_EQ(WireCounterAction(WireCounter::kRxLowerError), WireAction::kRepost);
  EXPECT_EQ(WireCounterAction(WireCounter::kRxMidOutsideWindow),
            WireAction::kDrop);
}

// ---- ACK ------------------------------------------------------------------------

// A connection that sent MIDs [100, 110) and gseqs [0, 1000), with every MID
// below 100 acknowledged as delivered.
AckContext Sender() {
  return AckContext{.conn_token = kToken, .acked_mid = 100, .next_mid = 110,
                    .next_gseq = 1000};
}

Ack ValidAck() {
  Ack a;
  a.n = 2;
  a.flags = kAckSampleValid;
  a.dst_vqpn = kVqpn;
  a.conn_token = kToken;
  a.deliv_mid = 103;
  a.base_gseq = 900;
  a.hold_ns = 1000;
  a.sample = 1;
  a.credits = 5;
  a.send_bitmap = 0x1;                     // entry 0: a SEND
  a.entries[0] = 99;                       // gseq 999
  a.entries[1] = ReliableNumber(105, 2);   // a WRITE chunk of MID 105
  return a;
}

std::vector<uint8_t> Bytes(const Ack& a) {
  std::vector<uint8_t> b(kAckMaxSize);
  b.resize(EncodeAck(a, b));
  return b;
}

WireCheck ParseAckBytes(const std::vector<uint8_t>& b) {
  Ack a;
  return ParseAck(b, &a);
}

TEST(ReliableWireTest, ValidAckPassesEveryCheck) {
  const Ack a = ValidAck();
  Ack parsed;
  ASSERT_EQ(ParseAck(Bytes(a), &parsed), std::nullopt);
  EXPECT_EQ(CheckAck(parsed, Sender()), std::nullopt);
  AckEntry e;
  ASSERT_EQ(CheckAckEntry(parsed, 0, Sender(), &e), std::nullopt);
  EXPECT_TRUE(e.is_send);
  EXPECT_EQ(e.gseq, 999u);
  ASSERT_EQ(CheckAckEntry(parsed, 1, Sender(), &e), std::nullopt);
  EXPECT_FALSE(e.is_send);
  EXPECT_EQ(e.mid, 105u);
  EXPECT_EQ(e.off, 2u);
  EXPECT_EQ(CheckAckSampleIndex(parsed), std::nullopt);
}

TEST(ReliableWireTest, AckMalformed) {
  const std::vector<uint8_t> good = Bytes(ValidAck());  // 56 bytes, n = 2
  ASSERT_EQ(ParseAckBytes(good), std::nullopt);
  const WireCheck kHit = WireCounter::kAckMalformed;

  EXPECT_EQ(ParseAckBytes(std::vector<uint8_t>(good.begin(), good.begin() + 47)),
            kHit);                                       // shorter than 48
  EXPECT_EQ(ParseAckBytes({}), kHit);                   // empty
  auto b = good;
  b.pop_back();                                          // 55: not 48 + 4n
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = good;
  b.push_back(0);                                        // 57: n says 56
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = good;
  b.insert(b.end(), 4, 0);                               // 60: n says 56
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = good;
  b[2] = 3;                                              // n = 3, 56 bytes
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = std::vector<uint8_t>(48 + 4 * 49, 0);              // n = 49, length fits
  std::memcpy(b.data(), good.data(), 48);
  b[2] = 49;
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = good;
  b[1] = 2;                                              // version
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = good;
  b[0] = 0x01;                                           // a header's type
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = good;
  b[3] |= 0x08;                                          // unknown flag
  EXPECT_EQ(ParseAckBytes(b), kHit);
  b = good;
  b[31] = 1;                                             // reserved
  EXPECT_EQ(ParseAckBytes(b), kHit);
}

TEST(ReliableWireTest, AckStaleToken) {
  Ack a = ValidAck();
  a.conn_token = kToken + 1;
  EXPECT_EQ(CheckAck(a, Sender()), WireCounter::kAckStaleToken);
}

TEST(ReliableWireTest, AckBadMid) {
  Ack a = ValidAck();
  for (uint32_t mid : {100u, 105u, 110u}) {  // [acked, sent] inclusive
    a.deliv_mid = mid;
    EXPECT_EQ(CheckAck(a, Sender()), std::nullopt) << mid;
  }
  for (uint32_t mid : {99u, 111u, 0u, 0x80000064u}) {
    a.deliv_mid = mid;
    EXPECT_EQ(CheckAck(a, Sender()), WireCounter::kAckBadMid) << mid;
  }
  // Across the 32-bit wrap: acked 0xfffffffe, sent up to 2.
  const AckContext wrap{.conn_token = kToken, .acked_mid = 0xfffffffe,
                        .next_mid = 2, .next_gseq = 1000};
  for (uint32_t mid : {0xfffffffeu, 0xffffffffu, 0u, 2u}) {
    a.deliv_mid = mid;
    EXPECT_EQ(CheckAck(a, wrap), std::nullopt) << mid;
  }
  for (uint32_t mid : {0xfffffffdu, 3u}) {
    a.deliv_mid = mid;
    EXPECT_EQ(CheckAck(a, wrap), WireCounter::kAckBadMid) << mid;
  }
}

TEST(ReliableWireTest, AckUnknownNumber) {
  const AckContext ctx = Sender();
  AckEntry e;
  Ack a = ValidAck();
  const WireCheck kHit = WireCounter::kAckUnknownNumber;

  a.entries[0] = 100;  // gseq 1000: never sent
  EXPECT_EQ(CheckAckEntry(a, 0, ctx, &e), kHit);
  a.base_gseq = ~uint64_t{0} - 5;  // base + entry wraps past 2^64
  a.entries[0] = 10;
  EXPECT_EQ(CheckAckEntry(a, 0, ctx, &e), kHit);

  a = ValidAck();
  a.entries[1] = ReliableNumber(105, 2) | 0x40000000;  // not a number
  EXPECT_EQ(CheckAckEntry(a, 1, ctx, &e), kHit);
  a.entries[1] = ReliableNumber(99, 0);   // below acked_mid
  EXPECT_EQ(CheckAckEntry(a, 1, ctx, &e), kHit);
  a.entries[1] = ReliableNumber(110, 0);  // not sent yet
  EXPECT_EQ(CheckAckEntry(a, 1, ctx, &e), kHit);
  a.entries[1] = ReliableNumber(100, 0xffff);  // the oldest in flight
  ASSERT_EQ(CheckAckEntry(a, 1, ctx, &e), std::nullopt);
  EXPECT_EQ(e.mid, 100u);
  EXPECT_EQ(e.off, 0xffff);
  // An index at or past n names no entry.
  EXPECT_EQ(CheckAckEntry(a, 2, ctx, &e), kHit);

  // A WRITE entry's 14 MID bits expand around the acked MID, across 2^32.
  const AckContext wrap{.conn_token = kToken, .acked_mid = 0xfffffff0,
                        .next_mid = 0x10, .next_gseq = 1000};
  a.entries[1] = ReliableNumber(0x5, 7);
  ASSERT_EQ(CheckAckEntry(a, 1, wrap, &e), std::nullopt);
  EXPECT_EQ(e.mid, 0x5u);
  a.entries[1] = ReliableNumber(0x10, 7);
  EXPECT_EQ(CheckAckEntry(a, 1, wrap, &e), kHit);
}

TEST(ReliableWireTest, AckBadNak) {
  Ack a = ValidAck();
  a.flags |= kAckNak;
  a.nak_code = static_cast<uint8_t>(NakCode::kRemoteAccess);
  a.nak_mid = 103;  // deliv_mid: the oldest undelivered
  EXPECT_EQ(CheckAck(a, Sender()), std::nullopt);
  a.nak_mid = 109;  // the newest sent
  EXPECT_EQ(CheckAck(a, Sender()), std::nullopt);

  const WireCheck kHit = WireCounter::kAckBadNak;
  a.nak_mid = 102;  // delivered per this very ACK
  EXPECT_EQ(CheckAck(a, Sender()), kHit);
  a.nak_mid = 110;  // never sent
  EXPECT_EQ(CheckAck(a, Sender()), kHit);
  a.nak_mid = 105;
  for (uint8_t code : {0, 5, 0xff}) {  // unknown codes
    a.nak_code = code;
    EXPECT_EQ(CheckAck(a, Sender()), kHit) << int(code);
  }
  // A code or a MID without the NAK flag.
  a = ValidAck();
  a.nak_code = static_cast<uint8_t>(NakCode::kRnrExceeded);
  EXPECT_EQ(CheckAck(a, Sender()), kHit);
  a.nak_code = 0;
  a.nak_mid = 105;
  EXPECT_EQ(CheckAck(a, Sender()), kHit);
}

TEST(ReliableWireTest, AckBadSample) {
  Ack a = ValidAck();
  a.sample = 2;  // n = 2
  EXPECT_EQ(CheckAckSampleIndex(a), WireCounter::kAckBadSample);
  a.n = 0;
  a.sample = 0;
  EXPECT_EQ(CheckAckSampleIndex(a), WireCounter::kAckBadSample);
  // Without the flag nothing is sampled, whatever the field says.
  a.flags = 0;
  a.sample = 200;
  EXPECT_EQ(CheckAckSampleIndex(a), std::nullopt);
}

TEST(ReliableWireTest, AckFirstFailureWins) {
  Ack a = ValidAck();
  a.conn_token = 0;
  a.deliv_mid = 1;
  a.flags |= kAckNak;  // with nak_code 0: bad
  EXPECT_EQ(CheckAck(a, Sender()), WireCounter::kAckStaleToken);
  a.conn_token = kToken;
  EXPECT_EQ(CheckAck(a, Sender()), WireCounter::kAckBadMid);
  a.deliv_mid = 103;
  EXPECT_EQ(CheckAck(a, Sender()), WireCounter::kAckBadNak);
  // A malformed ACK is refused before anything else is looked at.
  auto b = Bytes(a);
  b[1] = 0;
  EXPECT_EQ(ParseAckBytes(b), WireCounter::kAckMalformed);
}

// ---- Daemon header ----------------------------------------------------------------

// The receiver: deliv_mid 1000, its own READs [50, 60) outstanding, the
// next receive-consuming message to complete is index 20 of an RQ of 16.
RxContext Receiver() {
  RxContext c;
  c.vqpn = kVqpn;
  c.conn_token = kToken;
  c.deliv_mid = 1000;
  c.read_mid_begin = 50;
  c.read_mid_end = 60;
  c.rcv_next = 20;
  c.rcv_window = 16;
  return c;
}

// Unit 1 (the last, 904 bytes) of a 5000-byte SEND.
DaemonHeader ValidSend() {
  DaemonHeader h;
  h.type = HeaderType::kSendData;
  h.flags = kHdrLast;
  h.dst_vqpn = kVqpn;
  h.conn_token = kToken;
  h.mid = 1003;
  h.off_units = 1;
  h.data_len = 904;
  h.msg_len = 5000;
  h.rcv_index = 22;
  return h;
}

std::vector<uint8_t> Packet(const DaemonHeader& h, size_t data_len) {
  std::vector<uint8_t> b(kHeaderSize + data_len, 0xab);
  EXPECT_TRUE(EncodeHeader(h, b));
  return b;
}

WireCheck ParsePacket(const std::vector<uint8_t>& b) {
  DaemonHeader h;
  return ParseHeader(b, &h);
}

TEST(ReliableWireTest, ValidHeadersPassEveryCheck) {
  const RxContext ctx = Receiver();
  DaemonHeader parsed;
  ASSERT_EQ(ParseHeader(Packet(ValidSend(), 904), &parsed), std::nullopt);
  EXPECT_EQ(CheckHeader(parsed, ctx), std::nullopt);

  DaemonHeader h = ValidSend();  // a zero-length SEND: one header, L
  h.off_units = 0;
  h.data_len = 0;
  h.msg_len = 0;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);

  h = ValidSend();  // a whole first unit, not the last
  h.flags = 0;
  h.off_units = 0;
  h.data_len = 4096;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);

  h = ValidSend();  // the WRITE_WITH_IMM tail of a 8192-byte message
  h.type = HeaderType::kWriteTail;
  h.flags = kHdrLast | kHdrWithImm;
  h.data_len = 4096;
  h.msg_len = 8192;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);

  h = ValidSend();  // a retransmitted middle unit of a WRITE: no rcv_index
  h.type = HeaderType::kWriteRetx;
  h.flags = kHdrRetransmission;
  h.off_units = 1;
  h.data_len = 4096;
  h.msg_len = 3 * 4096;
  h.rcv_index = 0xdead;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);

  h = ValidSend();  // a 1 GiB READ's request for one MID's worth
  h.type = HeaderType::kReadReq;
  h.flags = kHdrLast;
  h.off_units = 0;
  h.data_len = 0;
  h.msg_len = kMidBytes;
  h.rcv_index = 0;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);

  h = ValidSend();  // a response to this end's READ of MID 55
  h.type = HeaderType::kReadResp;
  h.mid = 55;
  h.rcv_index = 0;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);
}

TEST(ReliableWireTest, RxMalformed) {
  const std::vector<uint8_t> good = Packet(ValidSend(), 904);
  ASSERT_EQ(ParsePacket(good), std::nullopt);
  const WireCheck kHit = WireCounter::kRxMalformed;

  EXPECT_EQ(ParsePacket(std::vector<uint8_t>(good.begin(), good.begin() + 63)),
            kHit);                                        // shorter than 64
  auto b = good;
  b.pop_back();                                           // data_len != len - 64
  EXPECT_EQ(ParsePacket(b), kHit);
  b = good;
  b.push_back(0);
  EXPECT_EQ(ParsePacket(b), kHit);
  b = good;
  b[1] = 0;                                               // version
  EXPECT_EQ(ParsePacket(b), kHit);
  for (uint8_t type : {0, 6, 0x41}) {                     // unknown types
    b = good;
    b[0] = type;
    EXPECT_EQ(ParsePacket(b), kHit) << int(type);
  }
  b = good;
  b[3] = 1;                                               // reserved
  EXPECT_EQ(ParsePacket(b), kHit);
  b = good;
  b[2] |= 0x20;                                           // unknown flag
  EXPECT_EQ(ParsePacket(b), kHit);

  DaemonHeader h = ValidSend();
  h.data_len = 4097;                                      // over one unit
  EXPECT_EQ(ParsePacket(Packet(h, 4097)), kHit);
  h.data_len = 4096;
  EXPECT_EQ(ParsePacket(Packet(h, 4096)), std::nullopt);
  h.data_len = 0xffffffc0;  // data_len + 64 wraps to 0 in 32 bits
  EXPECT_EQ(ParsePacket(Packet(h, 0)), kHit);

  h = ValidSend();
  h.type = HeaderType::kReadReq;                          // a READ_REQ with data
  h.data_len = 8;
  EXPECT_EQ(ParsePacket(Packet(h, 8)), kHit);
}

TEST(ReliableWireTest, RxWrongQp) {
  DaemonHeader h = ValidSend();
  h.dst_vqpn = kVqpn + 1;
  EXPECT_EQ(CheckHeader(h, Receiver()), WireCounter::kRxWrongQp);
  h.dst_vqpn = kVqpn | 0x01000000;  // the 24 bits match, the field does not
  EXPECT_EQ(CheckHeader(h, Receiver()), WireCounter::kRxWrongQp);
}

TEST(ReliableWireTest, RxStaleToken) {
  DaemonHeader h = ValidSend();
  h.conn_token = ~kToken;
  EXPECT_EQ(CheckHeader(h, Receiver()), WireCounter::kRxStaleToken);
}

TEST(ReliableWireTest, RxMidWindowOfHeaders) {
  RxContext ctx = Receiver();
  DaemonHeader h = ValidSend();
  h.mid = 1000;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);
  h.mid = 1063;  // the last record of the ring
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);
  h.mid = 1064;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxMidOutsideWindow);
  h.mid = 1000u + 0x7fffffffu;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxMidOutsideWindow);
  h.mid = 999;  // delivered: acknowledged again
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxAfterDelivery);
  h.mid = 0;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxAfterDelivery);

  // Across 2^32.
  ctx.deliv_mid = 0xffffffe0;
  h.mid = 0x1f;  // 63 ahead
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);
  h.mid = 0x20;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxMidOutsideWindow);
  h.mid = 0xffffffdf;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxAfterDelivery);

  // A smaller ring told in CONNECT.
  ctx = Receiver();
  ctx.mid_window = 8;
  h.mid = 1008;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxMidOutsideWindow);
}

TEST(ReliableWireTest, RxMidWindowOfReadResponses) {
  const RxContext ctx = Receiver();  // READs [50, 60)
  DaemonHeader h = ValidSend();
  h.type = HeaderType::kReadResp;
  for (uint32_t mid : {50u, 59u}) {
    h.mid = mid;
    EXPECT_EQ(CheckHeader(h, ctx), std::nullopt) << mid;
  }
  h.mid = 49;  // a READ already complete: acknowledged again
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxAfterDelivery);
  h.mid = 60;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxMidOutsideWindow);
  h.mid = 1003;  // inside the receive ring, but not a READ of this end
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxMidOutsideWindow);
  RxContext none = ctx;  // no READ outstanding
  none.read_mid_begin = none.read_mid_end = 60;
  h.mid = 60;
  EXPECT_EQ(CheckHeader(h, none), WireCounter::kRxMidOutsideWindow);
}

TEST(ReliableWireTest, RxBadOffsetOfHeaders) {
  RxContext ctx = Receiver();
  const WireCheck kHit = WireCounter::kRxBadOffset;
  DaemonHeader h = ValidSend();  // unit 1 of 5000 bytes

  h.flags = 0;  // the last unit without L
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h = ValidSend();
  h.off_units = 0;  // L on unit 0 of two
  h.data_len = 4096;
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h = ValidSend();
  h.data_len = 903;  // short of the message's end
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h = ValidSend();
  h.off_units = 0;  // a first unit that is not whole
  h.flags = 0;
  h.data_len = 4000;
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h = ValidSend();
  h.off_units = 2;  // past the message
  h.data_len = 0;
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h.off_units = 0xffffffff;  // far past it
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h = ValidSend();
  h.msg_len = 0;  // a zero-length message with data
  h.off_units = 0;
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h.data_len = 0;  // and without L
  h.flags = 0;
  EXPECT_EQ(CheckHeader(h, ctx), kHit);

  // One MID covers at most 256 MiB.
  h = ValidSend();
  h.type = HeaderType::kReadReq;
  h.off_units = 0;
  h.data_len = 0;
  h.msg_len = kMidBytes + 1;
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h.msg_len = 4096;
  h.off_units = 1;  // a READ_REQ is one piece at 0
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h.off_units = 0;
  h.flags = 0;      // ... and the whole message
  EXPECT_EQ(CheckHeader(h, ctx), kHit);

  h = ValidSend();  // a tail that is not the last piece
  h.type = HeaderType::kWriteTail;
  h.flags = kHdrWithImm;
  h.off_units = 0;
  h.data_len = 4096;
  EXPECT_EQ(CheckHeader(h, ctx), kHit);

  // msg_len consistent across pieces: the record says 6000.
  ctx.known_msg_len = 6000;
  h = ValidSend();
  EXPECT_EQ(CheckHeader(h, ctx), kHit);
  h.data_len = 6000 - 4096;
  h.msg_len = 6000;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);
}

TEST(ReliableWireTest, RxBadRcvIndex) {
  const RxContext ctx = Receiver();  // [20, 36)
  DaemonHeader h = ValidSend();
  for (uint32_t idx : {20u, 35u}) {
    h.rcv_index = idx;
    EXPECT_EQ(CheckHeader(h, ctx), std::nullopt) << idx;
  }
  for (uint32_t idx : {19u, 36u, 0u, 0xffffffffu}) {
    h.rcv_index = idx;
    EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxBadRcvIndex) << idx;
  }
  h.type = HeaderType::kWriteTail;  // the tail consumes a receive too
  h.rcv_index = 36;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxBadRcvIndex);
  // Across 2^32: [0xfffffffc, 12).
  RxContext wrap = ctx;
  wrap.rcv_next = 0xfffffffc;
  h.rcv_index = 11;
  EXPECT_EQ(CheckHeader(h, wrap), std::nullopt);
  h.rcv_index = 12;
  EXPECT_EQ(CheckHeader(h, wrap), WireCounter::kRxBadRcvIndex);
  // Types that consume no receive carry no index to check.
  h.type = HeaderType::kReadResp;
  h.mid = 55;
  EXPECT_EQ(CheckHeader(h, wrap), std::nullopt);
}

TEST(ReliableWireTest, RxFirstFailureWins) {
  const RxContext ctx = Receiver();
  DaemonHeader h = ValidSend();
  h.dst_vqpn = 0;
  h.conn_token = 0;
  h.mid = 5000;
  h.msg_len = 1;
  h.rcv_index = 0;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxWrongQp);
  h.dst_vqpn = kVqpn;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxStaleToken);
  h.conn_token = kToken;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxMidOutsideWindow);
  h.mid = 1003;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxBadOffset);
  h.msg_len = 5000;
  EXPECT_EQ(CheckHeader(h, ctx), WireCounter::kRxBadRcvIndex);
  h.rcv_index = 20;
  EXPECT_EQ(CheckHeader(h, ctx), std::nullopt);
  // A packet that is also malformed is counted malformed: CheckHeader is
  // never reached.
  h.dst_vqpn = 0;
  auto b = Packet(h, 904);
  b[3] = 0xff;
  EXPECT_EQ(ParsePacket(b), WireCounter::kRxMalformed);
}

// ---- Chunk immediates ---------------------------------------------------------------

WireCheck Chunk(bool last, uint32_t mid, uint16_t off, uint32_t byte_len,
                const RxContext& ctx) {
  const ChunkImm imm{.hint = false, .last = last,
                     .mid14 = static_cast<uint16_t>(mid & kMidLowMask),
                     .off = off};
  const ChunkImm wire = DecodeChunkImm(EncodeChunkImm(imm));
  return CheckChunk(wire, ExpandMid(wire.mid14, ctx.deliv_mid), byte_len, ctx);
}

TEST(ReliableWireTest, ChunkMidWindow) {
  RxContext ctx = Receiver();  // deliv_mid 1000
  EXPECT_EQ(Chunk(true, 1000, 0, 100, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 1063, 0, 100, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 1064, 0, 100, ctx), WireCounter::kRxMidOutsideWindow);
  EXPECT_EQ(Chunk(true, 1000 + 8191, 0, 100, ctx),
            WireCounter::kRxMidOutsideWindow);
  EXPECT_EQ(Chunk(true, 999, 0, 100, ctx), WireCounter::kRxAfterDelivery);
  // 8192 ahead has the low bits of 8192 behind: a delivered MID.
  EXPECT_EQ(Chunk(true, 1000 + 8192, 0, 100, ctx),
            WireCounter::kRxAfterDelivery);
  // Across 2^32.
  ctx.deliv_mid = 0xfffffff0;
  EXPECT_EQ(Chunk(true, 0x2f, 0, 100, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 0x30, 0, 100, ctx), WireCounter::kRxMidOutsideWindow);
  EXPECT_EQ(Chunk(true, 0xffffffef, 0, 100, ctx),
            WireCounter::kRxAfterDelivery);
}

TEST(ReliableWireTest, ChunkBadOffset) {
  RxContext ctx = Receiver();
  const WireCheck kHit = WireCounter::kRxBadOffset;
  EXPECT_EQ(Chunk(false, 1001, 0, 65536, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 1001, 16, 1, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 1001, 0, 0, ctx), std::nullopt);  // zero-length WRITE
  // The last unit of a MID: ends at 256 MiB exactly.
  EXPECT_EQ(Chunk(true, 1001, 0xffff, 4096, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 1001, 0xffff, 4097, ctx), kHit);     // past the MID
  EXPECT_EQ(Chunk(false, 1001, 0, 4095, ctx), kHit);        // not whole units
  EXPECT_EQ(Chunk(false, 1001, 0, 0, ctx), kHit);           // empty, not L
  EXPECT_EQ(Chunk(true, 1001, 3, 0, ctx), kHit);            // empty at off 3

  // The record knows the message is 3 units + 10 bytes.
  ctx.known_msg_len = 3 * 4096 + 10;
  EXPECT_EQ(Chunk(false, 1001, 0, 3 * 4096, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 1001, 3, 10, ctx), std::nullopt);
  EXPECT_EQ(Chunk(true, 1001, 3, 11, ctx), kHit);           // L, wrong end
  EXPECT_EQ(Chunk(true, 1001, 2, 4096, ctx), kHit);
  EXPECT_EQ(Chunk(false, 1001, 3, 4096, ctx), kHit);        // past the end
  ctx.known_msg_len = 2 * 4096;  // whole units: the chunk at the end has L
  EXPECT_EQ(Chunk(false, 1001, 0, 2 * 4096, ctx), kHit);
  EXPECT_EQ(Chunk(true, 1001, 0, 2 * 4096, ctx), std::nullopt);
  // The window is checked first.
  EXPECT_EQ(Chunk(false, 2000, 0, 4095, ctx), WireCounter::kRxMidOutsideWindow);
}

}  // namespace
}  // namespace vrdma::reliable
