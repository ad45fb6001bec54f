// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The packet header: a round trip of every field, and each syntax check
// failing on its own.
#include "backend/soft_rnic/net/packet.h"

#include <gtest/gtest.h>

#include <vector>

namespace vrdma::soft::net {
namespace {

Header Sample() {
  Header h;
  h.opcode = kUc | kWriteFirst;
  h.flags = kFlagSolicited;
  h.traffic_class = 0x28;
  h.hop_limit = 17;
  h.payload_len = 3;
  h.dest_qpn = 0xabcdef;
  h.src_qpn = 0x123456;
  h.psn = 0xfffffe;
  h.flow_label = 0xfedcb;
  h.qkey = 0x80001111;
  h.imm = 0xdeadbeef;
  h.remote_addr = 0x1122334455667788;
  h.rkey = 0x4242;
  h.dma_len = 9000;
  h.compare_add = 7;
  h.swap = 8;
  for (int i = 0; i < 16; ++i) {
    h.dgid[i] = static_cast<uint8_t>(i);
    h.sgid[i] = static_cast<uint8_t>(100 + i);
  }
  return h;
}

std::vector<uint8_t> Encode(const Header& h) {
  std::vector<uint8_t> p(kHeaderBytes + h.payload_len, 0x5a);
  EncodeHeader(h, p.data());
  return p;
}

TEST(PacketTest, RoundTripsEveryField) {
  const Header h = Sample();
  std::vector<uint8_t> p = Encode(h);
  Header d;
  ASSERT_EQ(Decode(p, &d), Check::kOk);
  EXPECT_EQ(d.opcode, h.opcode);
  EXPECT_EQ(d.flags, h.flags);
  EXPECT_EQ(d.traffic_class, h.traffic_class);
  EXPECT_EQ(d.hop_limit, h.hop_limit);
  EXPECT_EQ(d.payload_len, 3);
  EXPECT_EQ(d.dest_qpn, h.dest_qpn);
  EXPECT_EQ(d.src_qpn, h.src_qpn);
  EXPECT_EQ(d.psn, h.psn);
  EXPECT_EQ(d.flow_label, h.flow_label);
  EXPECT_EQ(d.qkey, h.qkey);
  EXPECT_EQ(d.imm, h.imm);
  EXPECT_EQ(d.remote_addr, h.remote_addr);
  EXPECT_EQ(d.rkey, h.rkey);
  EXPECT_EQ(d.dma_len, h.dma_len);
  EXPECT_EQ(d.compare_add, h.compare_add);
  EXPECT_EQ(d.swap, h.swap);
  EXPECT_EQ(d.dgid, h.dgid);
  EXPECT_EQ(d.sgid, h.sgid);
  // The layout is little endian at the documented offsets.
  EXPECT_EQ(p[0], kVersion);
  EXPECT_EQ(p[1], kUc | kWriteFirst);
  EXPECT_EQ(p[8], 0xef);
  EXPECT_EQ(p[10], 0xab);
  EXPECT_EQ(p[64], 0);
  EXPECT_EQ(p[80], 100);
}

TEST(PacketTest, EachCheckFailsAlone) {
  Header d;
  std::vector<uint8_t> p = Encode(Sample());
  EXPECT_EQ(Decode(std::span(p).first(kHeaderBytes - 1), &d), Check::kShort);
  auto with = [&](auto edit) {
    std::vector<uint8_t> q = p;
    edit(q);
    return Decode(q, &d);
  };
  EXPECT_EQ(with([](auto& q) { q[0] = 2; }), Check::kVersion);
  EXPECT_EQ(with([](auto& q) { q.pop_back(); }), Check::kLength);
  EXPECT_EQ(with([](auto& q) { q.push_back(0); }), Check::kLength);
  // A payload longer than any MTU, consistent with the packet's length.
  std::vector<uint8_t> big(kHeaderBytes + kMaxPayload + 1);
  Header hb = Sample();
  hb.payload_len = kMaxPayload + 1;
  EncodeHeader(hb, big.data());
  EXPECT_EQ(Decode(big, &d), Check::kLength);
  EXPECT_EQ(with([](auto& q) { q[1] = 0x1f; }), Check::kOpcode);
  EXPECT_EQ(with([](auto& q) { q[1] = kUd | kWriteOnly; }), Check::kOpcode);
  EXPECT_EQ(with([](auto& q) { q[1] = kUc | kReadRequest; }), Check::kOpcode);
  EXPECT_EQ(with([](auto& q) { q[1] = 0x80 | kSendOnly; }), Check::kOpcode);
  EXPECT_EQ(with([](auto& q) { q[2] = 0x80; }), Check::kField);
  EXPECT_EQ(with([](auto& q) { q[11] = 1; }), Check::kField);  // dest_qpn
  EXPECT_EQ(with([](auto& q) { q[15] = 1; }), Check::kField);  // src_qpn
  EXPECT_EQ(with([](auto& q) { q[19] = 1; }), Check::kField);  // psn
  EXPECT_EQ(with([](auto& q) { q[22] = 0x10; }), Check::kField);  // flow label
}

TEST(PacketTest, TransportsHaveTheirOpcodes) {
  EXPECT_TRUE(OpInfoOf(kUd | kSendOnly).valid);
  EXPECT_TRUE(OpInfoOf(kUd | kSendOnlyImm).imm);
  EXPECT_FALSE(OpInfoOf(kUd | kSendFirst).valid);
  EXPECT_TRUE(OpInfoOf(kUc | kWriteOnlyImm).reth);
  EXPECT_FALSE(OpInfoOf(kUc | kWriteMiddle).reth);
  EXPECT_FALSE(OpInfoOf(kUc | kCmpSwap).valid);
  EXPECT_TRUE(OpInfoOf(kUc | kSendLastInv).inv);
  EXPECT_TRUE(OpInfoOf(kRc | kCmpSwap).valid);
  const OpInfo m = OpInfoOf(kUc | kSendMiddle);
  EXPECT_TRUE(m.valid && m.send && !m.first && !m.last);
}

}  // namespace
}  // namespace vrdma::soft::net
