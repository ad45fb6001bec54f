// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/scheduler/split.h"

#include "gtest/gtest.h"

namespace vrdma::sched {
namespace {

SendWr ThreeSges(WrOpcode op) {
  SendWr w;
  w.opcode = op;
  w.num_sge = 3;
  w.sge[0] = {0x1000, 100, 7};
  w.sge[1] = {0x9000, 50, 8};
  w.sge[2] = {0x20000, 200, 9};
  w.remote_addr = 0x500000;
  w.rkey = 42;
  w.imm_data = 0xabcd;
  w.send_flags = kSendFence | kSendSolicited | kSendSignaled;
  return w;
}

TEST(Split, PieceSlicesSgesAndAdvancesTheRemoteAddress) {
  const SendWr w = ThreeSges(WrOpcode::kRdmaWrite);
  SendWr p;
  BuildPiece(w, 80, 100, /*last=*/false, &p);
  ASSERT_EQ(p.num_sge, 3);
  EXPECT_EQ(p.sge[0].addr, 0x1000u + 80);
  EXPECT_EQ(p.sge[0].length, 20u);
  EXPECT_EQ(p.sge[1].addr, 0x9000u);
  EXPECT_EQ(p.sge[1].length, 50u);
  EXPECT_EQ(p.sge[2].addr, 0x20000u);
  EXPECT_EQ(p.sge[2].length, 30u);
  EXPECT_EQ(p.sge[2].lkey, 9u);
  EXPECT_EQ(p.total_length(), 100u);
  EXPECT_EQ(p.remote_addr, 0x500000u + 80);
  EXPECT_EQ(p.rkey, 42u);
  // Not the first piece: no fence; not the last: no solicited; the stage
  // decides signaling.
  EXPECT_EQ(p.send_flags, 0u);
}

TEST(Split, FirstPieceKeepsTheFenceLastKeepsImmediateAndSolicited) {
  const SendWr w = ThreeSges(WrOpcode::kRdmaWriteWithImm);
  SendWr first, last;
  BuildPiece(w, 0, 150, false, &first);
  BuildPiece(w, 150, 200, true, &last);
  EXPECT_EQ(first.opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(first.send_flags, uint32_t{kSendFence});
  EXPECT_EQ(first.imm_data, 0u);
  ASSERT_EQ(first.num_sge, 2);
  EXPECT_EQ(last.opcode, WrOpcode::kRdmaWriteWithImm);
  EXPECT_EQ(last.imm_data, 0xabcdu);
  EXPECT_EQ(last.send_flags, uint32_t{kSendSolicited});
  ASSERT_EQ(last.num_sge, 1);
  EXPECT_EQ(last.sge[0].addr, 0x20000u);
  EXPECT_EQ(last.remote_addr, 0x500000u + 150);

  const SendWr s = ThreeSges(WrOpcode::kSendWithImm);
  SendWr mid;
  BuildPiece(s, 100, 50, false, &mid);
  EXPECT_EQ(mid.opcode, WrOpcode::kSend);
  EXPECT_EQ(mid.remote_addr, s.remote_addr);  // SEND names no remote memory
}

TEST(Split, WhatMayBeSplit) {
  SendWr w = ThreeSges(WrOpcode::kRdmaWrite);
  EXPECT_TRUE(Splittable(w, QpType::kRc, false));
  EXPECT_TRUE(Splittable(w, QpType::kUc, false));
  EXPECT_FALSE(Splittable(w, QpType::kUd, true));
  w.send_flags |= kSendInline;
  EXPECT_FALSE(Splittable(w, QpType::kRc, true));
  SendWr r = ThreeSges(WrOpcode::kRdmaRead);
  EXPECT_TRUE(Splittable(r, QpType::kRc, false));
  for (WrOpcode op : {WrOpcode::kSend, WrOpcode::kSendWithImm,
                      WrOpcode::kRdmaWriteWithImm}) {
    SendWr s = ThreeSges(op);
    EXPECT_FALSE(Splittable(s, QpType::kRc, false));
    EXPECT_TRUE(Splittable(s, QpType::kRc, true));
  }
  SendWr a = ThreeSges(WrOpcode::kAtomicFetchAdd);
  EXPECT_FALSE(Splittable(a, QpType::kRc, true));
}

}  // namespace
}  // namespace vrdma::sched
