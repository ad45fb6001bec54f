// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The layouts of docs/reliability.md §3.1-§3.3: golden byte vectors written
// out by hand from the tables (not by the encoder), so a field at the wrong
// offset, in the wrong byte order or of the wrong width fails; round trips
// of every type; MID expansion (§3.4) at the 14- and 32-bit wraps. The
// checks of §3.6 are in wire_checks_test.cc.
#include "backend/reliable_rnic/wire_format.h"

#include <endian.h>

#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace vrdma::reliable {
namespace {

// §3.2, one WRITE_TAIL with L and a guest immediate, every field distinct.
const std::vector<uint8_t> kGoldenHeader = {
    0x02, 0x01, 0x0a, 0x00,                          // type, version, flags, rsvd
    0x56, 0x34, 0x12, 0x00,                          // dst_vqpn 0x123456
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // gseq
    0x44, 0x33, 0x22, 0x11,                          // mid
    0x02, 0x00, 0x00, 0x00,                          // off_units 2
    0x10, 0x00, 0x00, 0x00,                          // data_len 16
    0xde, 0xad, 0xbe, 0xef,                          // guest imm, network order
    0x10, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // msg_len 8208
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // remote_addr
    0xd4, 0xc3, 0xb2, 0xa1,                          // rkey
    0x0d, 0xf0, 0xfe, 0xca,                          // conn_token
    0x07, 0x00, 0x00, 0x00,                          // rcv_index
    0x20, 0x00, 0x00, 0x00,                          // credits
};

DaemonHeader GoldenHeader() {
  DaemonHeader h;
  h.type = HeaderType::kWriteTail;
  h.flags = kHdrLast | kHdrWithImm;
  h.dst_vqpn = 0x123456;
  h.gseq = 0x0102030405060708;
  h.mid = 0x11223344;
  h.off_units = 2;
  h.data_len = 16;
  h.guest_imm_be = htobe32(0xdeadbeef);
  h.msg_len = 8208;
  h.remote_addr = 0x1122334455667788;
  h.rkey = 0xa1b2c3d4;
  h.conn_token = 0xcafef00d;
  h.rcv_index = 7;
  h.credits = 32;
  return h;
}

// §3.3, two entries (a WRITE chunk's number, then a SEND's gseq offset),
// with a sample and an RNR NAK.
const std::vector<uint8_t> kGoldenAck = {
    0x41, 0x01, 0x02, 0x03,                          // type, version, n, flags
    0xef, 0xcd, 0xab, 0x00,                          // dst_vqpn
    0x04, 0x03, 0x02, 0x01,                          // conn_token
    0x00, 0x01, 0x00, 0x00,                          // deliv_mid 0x100
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,  // base_gseq
    0x88, 0x13, 0x00, 0x00,                          // hold_ns 5000
    0x01, 0x01, 0x00, 0x00,                          // sample, nak_code, rsvd
    0x01, 0x01, 0x00, 0x00,                          // nak_mid 0x101
    0x40, 0x00, 0x00, 0x00,                          // credits 64
    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // bitmap: entry 1 SEND
    0x03, 0x00, 0x01, 0x01,                          // MID low 0x101, OFF 3
    0x05, 0x00, 0x00, 0x00,                          // gseq offset 5
};

Ack GoldenAck() {
  Ack a;
  a.n = 2;
  a.flags = kAckSampleValid | kAckNak;
  a.dst_vqpn = 0xabcdef;
  a.conn_token = 0x01020304;
  a.deliv_mid = 0x100;
  a.base_gseq = 0x1000000000000001;
  a.hold_ns = 5000;
  a.sample = 1;
  a.nak_code = static_cast<uint8_t>(NakCode::kRnrExceeded);
  a.nak_mid = 0x101;
  a.credits = 64;
  a.send_bitmap = 0x2;
  a.entries[0] = 0x01010003;
  a.entries[1] = 5;
  return a;
}

TEST(ReliableWireTest, GoldenHeaderEncodes) {
  std::vector<uint8_t> out(kHeaderSize, 0xee);
  ASSERT_TRUE(EncodeHeader(GoldenHeader(), out));
  EXPECT_EQ(out, kGoldenHeader);
}

TEST(ReliableWireTest, GoldenHeaderParses) {
  std::vector<uint8_t> packet = kGoldenHeader;
  packet.resize(kHeaderSize + 16, 0x5a);  // the 16 tail bytes
  DaemonHeader h;
  ASSERT_EQ(ParseHeader(packet, &h), std::nullopt);
  EXPECT_EQ(h, GoldenHeader());
  // The guest immediate stays as the bytes were: network order.
  uint8_t imm[4];
  std::memcpy(imm, &h.guest_imm_be, 4);
  EXPECT_EQ(imm[0], 0xde);
  EXPECT_EQ(imm[3], 0xef);
}

TEST(ReliableWireTest, GoldenHeaderParsesUnaligned) {
  // The same packet at an odd address: fields are read byte by byte.
  std::vector<uint8_t> buf(1 + kHeaderSize + 16, 0x5a);
  std::memcpy(buf.data() + 1, kGoldenHeader.data(), kHeaderSize);
  DaemonHeader h;
  ASSERT_EQ(ParseHeader(std::span(buf).subspan(1), &h), std::nullopt);
  EXPECT_EQ(h, GoldenHeader());
}

TEST(ReliableWireTest, GoldenAckEncodes) {
  std::vector<uint8_t> out(kAckMaxSize, 0xee);
  ASSERT_EQ(EncodeAck(GoldenAck(), out), 56u);
  out.resize(56);
  EXPECT_EQ(out, kGoldenAck);
}

TEST(ReliableWireTest, GoldenAckParses) {
  Ack a;
  ASSERT_EQ(ParseAck(kGoldenAck, &a), std::nullopt);
  EXPECT_EQ(a, GoldenAck());
  EXPECT_FALSE(a.entry_is_send(0));
  EXPECT_TRUE(a.entry_is_send(1));
  // Unaligned.
  std::vector<uint8_t> buf(3 + kGoldenAck.size());
  std::memcpy(buf.data() + 3, kGoldenAck.data(), kGoldenAck.size());
  Ack b;
  ASSERT_EQ(ParseAck(std::span(buf).subspan(3), &b), std::nullopt);
  EXPECT_EQ(b, GoldenAck());
}

TEST(ReliableWireTest, GoldenChunkImmediate) {
  // §3.1: H=1, L=0, MID low 0x2abc, OFF 0x1234 -> 0xaabc1234.
  const ChunkImm c{.hint = true, .last = false, .mid14 = 0x2abc, .off = 0x1234};
  EXPECT_EQ(EncodeChunkImm(c), 0xaabc1234u);
  EXPECT_EQ(EncodeChunkImm(c) & kReliableNumberMask, 0x2abc1234u);
  EXPECT_EQ(ReliableNumber(0x7fff2abc, 0x1234), 0x2abc1234u);
  // In Wr::imm_data it is in network order: bit 31 in the first byte.
  const uint32_t imm_data = ChunkImmToImmData(0xaabc1234);
  uint8_t b[4];
  std::memcpy(b, &imm_data, 4);
  EXPECT_EQ(b[0], 0xaa);
  EXPECT_EQ(b[1], 0xbc);
  EXPECT_EQ(b[2], 0x12);
  EXPECT_EQ(b[3], 0x34);
  EXPECT_EQ(ChunkImmFromImmData(imm_data), 0xaabc1234u);
  EXPECT_EQ(DecodeChunkImm(0x4000ffff),
            (ChunkImm{.hint = false, .last = true, .mid14 = 0, .off = 0xffff}));
}

TEST(ReliableWireTest, ChunkImmRoundTripsEveryFlagAndExtreme) {
  for (bool h : {false, true}) {
    for (bool l : {false, true}) {
      for (uint16_t mid14 : {0, 1, 0x2000, 0x3fff}) {
        for (uint16_t off : {0, 1, 0x8000, 0xffff}) {
          const ChunkImm c{.hint = h, .last = l, .mid14 = mid14, .off = off};
          EXPECT_EQ(DecodeChunkImm(EncodeChunkImm(c)), c);
          EXPECT_EQ(DecodeChunkImm(ChunkImmFromImmData(
                        ChunkImmToImmData(EncodeChunkImm(c)))),
                    c);
        }
      }
    }
  }
}

TEST(ReliableWireTest, HeaderRoundTripsEveryType) {
  for (HeaderType t : {HeaderType::kSendData, HeaderType::kWriteTail,
                       HeaderType::kWriteRetx, HeaderType::kReadReq,
                       HeaderType::kReadResp}) {
    DaemonHeader h = GoldenHeader();
    h.type = t;
    h.flags = kHdrKnownFlags;
    h.data_len = t == HeaderType::kReadReq ? 0 : 4096;
    std::vector<uint8_t> packet(kHeaderSize + h.data_len);
    ASSERT_TRUE(EncodeHeader(h, packet));
    DaemonHeader back;
    ASSERT_EQ(ParseHeader(packet, &back), std::nullopt) << int(t);
    EXPECT_EQ(back, h) << int(t);
  }
}

TEST(ReliableWireTest, HeaderRoundTripsRandomFields) {
  std::mt19937_64 rng(15);
  for (int i = 0; i < 1000; ++i) {
    DaemonHeader h;
    h.type = static_cast<HeaderType>(1 + rng() % 5);
    h.flags = rng() & kHdrKnownFlags;
    h.dst_vqpn = rng();
    h.gseq = rng();
    h.mid = rng();
    h.off_units = rng();
    h.data_len = h.type == HeaderType::kReadReq ? 0 : rng() % 4097;
    h.guest_imm_be = rng();
    h.msg_len = rng();
    h.remote_addr = rng();
    h.rkey = rng();
    h.conn_token = rng();
    h.rcv_index = rng();
    h.credits = rng();
    std::vector<uint8_t> packet(kHeaderSize + h.data_len);
    ASSERT_TRUE(EncodeHeader(h, packet));
    DaemonHeader back;
    ASSERT_EQ(ParseHeader(packet, &back), std::nullopt);
    ASSERT_EQ(back, h);
  }
}

TEST(ReliableWireTest, EncodeHeaderRefusesShortBuffer) {
  std::vector<uint8_t> out(kHeaderSize - 1, 0xee);
  EXPECT_FALSE(EncodeHeader(GoldenHeader(), out));
  EXPECT_EQ(out, std::vector<uint8_t>(kHeaderSize - 1, 0xee));
}

TEST(ReliableWireTest, AckRoundTripsEmptyAndFull) {
  Ack empty;
  empty.dst_vqpn = 9;
  empty.deliv_mid = 0xffffffff;
  empty.credits = 0xffffffff;
  std::vector<uint8_t> buf(kAckMaxSize);
  ASSERT_EQ(EncodeAck(empty, buf), kAckHeaderSize);
  Ack back;
  ASSERT_EQ(ParseAck(std::span(buf).first(kAckHeaderSize), &back),
            std::nullopt);
  EXPECT_EQ(back, empty);

  Ack full = GoldenAck();
  full.n = kAckMaxEntries;
  full.flags = kAckKnownFlags;
  full.send_bitmap = 0x0000aaaaaaaaaaaa;
  for (uint32_t i = 0; i < kAckMaxEntries; ++i) full.entries[i] = 0x01000000 * i + i;
  ASSERT_EQ(EncodeAck(full, buf), kAckMaxSize);
  EXPECT_EQ(kAckMaxSize, 240u);  // §3.3: at most 240 bytes
  ASSERT_EQ(ParseAck(buf, &back), std::nullopt);
  EXPECT_EQ(back, full);
  EXPECT_EQ(back.entries[47], 0x2f00002fu);
}

TEST(ReliableWireTest, AckRoundTripsRandomFields) {
  std::mt19937_64 rng(1515);
  std::vector<uint8_t> buf(kAckMaxSize);
  for (int i = 0; i < 1000; ++i) {
    Ack a;
    a.n = rng() % (kAckMaxEntries + 1);
    a.flags = rng() & kAckKnownFlags;
    a.dst_vqpn = rng();
    a.conn_token = rng();
    a.deliv_mid = rng();
    a.base_gseq = rng();
    a.hold_ns = rng();
    a.sample = rng();
    a.nak_code = rng();
    a.nak_mid = rng();
    a.credits = rng();
    a.send_bitmap = rng();
    for (uint32_t e = 0; e < a.n; ++e) a.entries[e] = rng();
    const size_t len = EncodeAck(a, buf);
    ASSERT_EQ(len, 48u + 4u * a.n);
    Ack back;
    ASSERT_EQ(ParseAck(std::span(buf).first(len), &back), std::nullopt);
    ASSERT_EQ(back, a);
  }
}

TEST(ReliableWireTest, EncodeAckRefusesTooManyEntriesOrShortBuffer) {
  std::vector<uint8_t> buf(kAckMaxSize + 4);
  Ack a = GoldenAck();
  a.n = kAckMaxEntries + 1;
  EXPECT_EQ(EncodeAck(a, buf), 0u);
  a.n = 2;
  EXPECT_EQ(EncodeAck(a, std::span(buf).first(55)), 0u);
  EXPECT_EQ(EncodeAck(a, std::span(buf).first(56)), 56u);
}

TEST(ReliableWireTest, AckEqualityIgnoresEntriesPastN) {
  Ack a = GoldenAck();
  Ack b = GoldenAck();
  b.entries[2] = 99;  // not on the wire
  EXPECT_EQ(a, b);
  b.entries[1] = 6;
  EXPECT_NE(a, b);
}

// §3.4: the receiver expands 14 bits to the MID in [deliv_mid, deliv_mid +
// 8192); the other half of the space lies behind deliv_mid.
TEST(ReliableWireTest, MidExpansionAhead) {
  EXPECT_EQ(ExpandMid(5, 0), 5u);
  EXPECT_EQ(ExpandMid(8191, 0), 8191u);
  EXPECT_EQ(ExpandMid(100 & 0x3fff, 100), 100u);
  // 16380 + 10 = 16390, low bits 6: past the 14-bit wrap.
  EXPECT_EQ(ExpandMid(6, 16380), 16390u);
  // 0x12345678 + 8191: the last MID ahead.
  EXPECT_EQ(ExpandMid((0x12345678u + 8191) & 0x3fff, 0x12345678),
            0x12345678u + 8191);
}

TEST(ReliableWireTest, MidExpansionBehind) {
  EXPECT_EQ(ExpandMid((100 - 1) & 0x3fff, 100), 99u);
  // 8192 ahead is the same low bits as 8192 behind: behind wins.
  EXPECT_EQ(ExpandMid((100 + 8192) & 0x3fff, 100 + 16384), 100u + 8192);
  EXPECT_EQ(ExpandMid((0x12345678u + 8192) & 0x3fff, 0x12345678),
            0x12345678u + 8192 - 16384);
}

TEST(ReliableWireTest, MidExpansionAtThe32BitWrap) {
  // deliv_mid just below 2^32: MIDs ahead wrap to small numbers.
  EXPECT_EQ(ExpandMid(0x3ff0, 0xfffffff0), 0xfffffff0u);
  EXPECT_EQ(ExpandMid(0x0005, 0xfffffff0), 0x00000005u);
  EXPECT_EQ(ExpandMid(0x3fff, 0xfffffff0), 0xffffffffu);
  // deliv_mid just past 2^32: MIDs behind wrap to large numbers.
  EXPECT_EQ(ExpandMid(0x3ffb, 3), 0xfffffffbu);
  EXPECT_EQ(ExpandMid(0x0003, 3), 3u);
}

TEST(ReliableWireTest, MidExpansionInvertsTruncationOverTheWindow) {
  // Every MID within [ref - 8192, ref + 8192) comes back from its 14 bits.
  for (uint32_t ref : {0u, 77u, 16383u, 0x7fffffffu, 0xffffe000u, 0xffffffffu}) {
    for (int32_t d = -8192; d < 8192; d += 7) {
      const uint32_t mid = ref + static_cast<uint32_t>(d);
      ASSERT_EQ(ExpandMid(mid & 0x3fff, ref), mid) << ref << " " << d;
    }
  }
}

}  // namespace
}  // namespace vrdma::reliable
