// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Every opcode moving real bytes between QPs of two "VMs" (different PDs,
// GIDs, iova ranges), verified byte for byte, plus ordering and signaling.
#include <cstring>
#include <numeric>

#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

using Transfer = SoftRnicTest;

TEST_F(Transfer, RcSendGathersAndScattersAcrossSges) {
  Connect(QpType::kRc);
  // Receive into two pieces of b's buffer; send from three pieces of a's.
  RecvWr r;
  r.wr_id = 77;
  r.num_sge = 2;
  r.sge[0] = Sge{b_.at(1000), 100, b_.mr.lkey};
  r.sge[1] = Sge{b_.at(5000), 400, b_.mr.lkey};
  ASSERT_EQ(PostR(qb_, r), Status::kOk);

  SendWr s;
  s.wr_id = 11;
  s.opcode = WrOpcode::kSend;
  s.send_flags = kSendSignaled;
  s.num_sge = 3;
  s.sge[0] = Sge{a_.at(0), 50, a_.mr.lkey};
  s.sge[1] = Sge{a_.at(300), 120, a_.mr.lkey};
  s.sge[2] = Sge{a_.at(9000), 30, a_.mr.lkey};
  std::vector<uint8_t> expect;
  expect.insert(expect.end(), a_.buf.begin(), a_.buf.begin() + 50);
  expect.insert(expect.end(), a_.buf.begin() + 300, a_.buf.begin() + 420);
  expect.insert(expect.end(), a_.buf.begin() + 9000, a_.buf.begin() + 9030);
  std::vector<uint8_t> b_before = b_.buf;
  ASSERT_EQ(Post(qa_, s), Status::kOk);

  // Asynchronous like hardware: nothing moves before Progress.
  EXPECT_TRUE(Poll(a_.scq).empty());
  EXPECT_EQ(b_.buf, b_before);
  now_ += 5;
  EXPECT_TRUE(rnic_.Progress());

  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 11u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(sc[0].byte_len, 200u);
  EXPECT_EQ(sc[0].qpn, qa_.qpn);
  EXPECT_EQ(sc[0].timestamp_ns, now_);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, 200u);
  EXPECT_EQ(rc[0].qpn, qb_.qpn);
  EXPECT_EQ(rc[0].wc_flags & kWcWithImm, 0u);
  EXPECT_EQ(rc[0].timestamp_ns, now_);

  EXPECT_EQ(0, std::memcmp(&b_.buf[1000], expect.data(), 100));
  EXPECT_EQ(0, std::memcmp(&b_.buf[5000], expect.data() + 100, 100));
  // Bytes beyond the message are untouched.
  EXPECT_EQ(0, std::memcmp(&b_.buf[5100], &b_before[5100], 300));
  EXPECT_EQ(0, std::memcmp(&b_.buf[0], &b_before[0], 1000));
}

TEST_F(Transfer, SendWithImmCarriesImmediate) {
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 64)), Status::kOk);
  SendWr s = Wr(WrOpcode::kSendWithImm, 2, a_, 100, 64);
  s.imm_data = 0xdeadbeef;
  ASSERT_EQ(Post(qa_, s), Status::kOk);
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].imm_data, 0xdeadbeefu);
  EXPECT_NE(rc[0].wc_flags & kWcWithImm, 0u);
  EXPECT_EQ(rc[0].src_qpn, qa_.qpn);
  EXPECT_EQ(0, std::memcmp(&b_.buf[0], &a_.buf[100], 64));
}

TEST_F(Transfer, InlineDataIsCopiedAtPostTime) {
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 128)), Status::kOk);
  uint8_t payload[100];
  for (int i = 0; i < 100; ++i) payload[i] = static_cast<uint8_t>(200 - i);
  SendWr s;
  s.wr_id = 5;
  s.opcode = WrOpcode::kSend;
  s.send_flags = kSendSignaled | kSendInline;
  s.inline_data = payload;
  s.inline_len = 100;
  ASSERT_EQ(Post(qa_, s), Status::kOk);
  uint8_t expect[100];
  std::memcpy(expect, payload, 100);
  std::memset(payload, 0, sizeof(payload));  // caller reuses its buffer
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 100u);
  EXPECT_EQ(0, std::memcmp(&b_.buf[0], expect, 100));
}

TEST_F(Transfer, InlineLargerThanQpCapIsRejected) {
  Connect(QpType::kRc);
  uint8_t payload[256] = {};
  SendWr s;
  s.opcode = WrOpcode::kSend;
  s.send_flags = kSendInline;
  s.inline_data = payload;
  s.inline_len = 129;  // caps.max_inline_data is 128
  EXPECT_EQ(Post(qa_, s), Status::kInvalid);
}

TEST_F(Transfer, RdmaWriteMovesBytesWithoutConsumingReceive) {
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(9, b_, 0, 64)), Status::kOk);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 3, a_, 2000, 3000);
  w.remote_addr = b_.at(20000);
  w.rkey = b_.mr.rkey;
  std::vector<uint8_t> before = b_.buf;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(sc[0].byte_len, 3000u);
  EXPECT_EQ(0, std::memcmp(&b_.buf[20000], &a_.buf[2000], 3000));
  EXPECT_EQ(b_.buf[19999], before[19999]);
  EXPECT_EQ(b_.buf[23000], before[23000]);
  EXPECT_TRUE(Poll(b_.rcq).empty());  // the receive is still posted
  // ... and is still there for a later send.
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 4, a_, 0, 8)), Status::kOk);
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
}

TEST_F(Transfer, RdmaWriteWithImmConsumesReceive) {
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(9, b_, 0, 4)), Status::kOk);  // buffer unused
  SendWr w = Wr(WrOpcode::kRdmaWriteWithImm, 3, a_, 100, 1500);
  w.remote_addr = b_.at(8000);
  w.rkey = b_.mr.rkey;
  w.imm_data = 0x01020304;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kRdmaWrite);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[0].byte_len, 1500u);
  EXPECT_EQ(rc[0].imm_data, 0x01020304u);
  EXPECT_NE(rc[0].wc_flags & kWcWithImm, 0u);
  EXPECT_EQ(0, std::memcmp(&b_.buf[8000], &a_.buf[100], 1500));
}

TEST_F(Transfer, RdmaWriteWithImmIgnoresReceiveSges) {
  Connect(QpType::kRc);
  RecvWr none;  // the usual zero-SGE receive for WRITE_WITH_IMM
  none.wr_id = 1;
  RecvWr junk = Rwr(2, b_, 0, 4);
  junk.sge[0].lkey = 0xbad00;  // never used: the data goes to the rkey
  ASSERT_EQ(PostR(qb_, none), Status::kOk);
  ASSERT_EQ(PostR(qb_, junk), Status::kOk);
  for (uint64_t id : {10, 11}) {
    SendWr w = Wr(WrOpcode::kRdmaWriteWithImm, id, a_, id * 100, 100);
    w.remote_addr = b_.at(id * 1000);
    w.rkey = b_.mr.rkey;
    ASSERT_EQ(Post(qa_, w), Status::kOk);
  }
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rc[i].wr_id, 1u + i);
    EXPECT_EQ(rc[i].status, WcStatus::kSuccess);
    EXPECT_EQ(rc[i].opcode, WcOpcode::kRecvRdmaWithImm);
  }
  EXPECT_EQ(0, std::memcmp(&b_.buf[11000], &a_.buf[1100], 100));
  EXPECT_EQ(StateOf(qb_), QpState::kRts);
}

TEST_F(Transfer, RdmaReadFillsLocalSges) {
  Connect(QpType::kRc);
  SendWr r;
  r.wr_id = 8;
  r.opcode = WrOpcode::kRdmaRead;
  r.send_flags = kSendSignaled;
  r.num_sge = 2;
  r.sge[0] = Sge{a_.at(100), 1000, a_.mr.lkey};
  r.sge[1] = Sge{a_.at(40000), 2000, a_.mr.lkey};
  r.remote_addr = b_.at(7);
  r.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, r), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(sc[0].byte_len, 3000u);
  EXPECT_EQ(0, std::memcmp(&a_.buf[100], &b_.buf[7], 1000));
  EXPECT_EQ(0, std::memcmp(&a_.buf[40000], &b_.buf[1007], 2000));
}

TEST_F(Transfer, AtomicsOperateOnRemoteAndReturnOriginal) {
  Connect(QpType::kRc);
  uint64_t v = 1000;
  std::memcpy(&b_.buf[64], &v, 8);

  SendWr fa = Wr(WrOpcode::kAtomicFetchAdd, 1, a_, 0, 8);
  fa.remote_addr = b_.at(64);
  fa.rkey = b_.mr.rkey;
  fa.compare_add = 5;
  SendWr cas_ok = Wr(WrOpcode::kAtomicCmpSwp, 2, a_, 8, 8);
  cas_ok.remote_addr = b_.at(64);
  cas_ok.rkey = b_.mr.rkey;
  cas_ok.compare_add = 1005;
  cas_ok.swap = 42;
  SendWr cas_miss = cas_ok;
  cas_miss.wr_id = 3;
  cas_miss.sge[0].addr = a_.at(16);
  cas_miss.swap = 7;  // compare 1005 no longer matches 42
  ASSERT_EQ(Post(qa_, fa), Status::kOk);
  ASSERT_EQ(Post(qa_, cas_ok), Status::kOk);
  ASSERT_EQ(Post(qa_, cas_miss), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(sc[1].opcode, WcOpcode::kCompSwap);
  EXPECT_EQ(sc[2].opcode, WcOpcode::kCompSwap);
  for (auto& c : sc) {
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(c.byte_len, 8u);
  }
  uint64_t r0, r1, r2, now_val;
  std::memcpy(&r0, &a_.buf[0], 8);
  std::memcpy(&r1, &a_.buf[8], 8);
  std::memcpy(&r2, &a_.buf[16], 8);
  std::memcpy(&now_val, &b_.buf[64], 8);
  EXPECT_EQ(r0, 1000u);
  EXPECT_EQ(r1, 1005u);
  EXPECT_EQ(r2, 42u);
  EXPECT_EQ(now_val, 42u);
}

TEST_F(Transfer, AtomicNeedsOneEightByteSge) {
  Connect(QpType::kRc);
  SendWr fa = Wr(WrOpcode::kAtomicFetchAdd, 1, a_, 0, 4);
  fa.remote_addr = b_.at(64);
  fa.rkey = b_.mr.rkey;
  EXPECT_EQ(Post(qa_, fa), Status::kInvalid);
}

TEST_F(Transfer, ZeroLengthWriteNeedsNoKey) {
  Connect(QpType::kRc);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.rkey = 0xdead;  // not checked for a zero-length RDMA
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[0].byte_len, 0u);
}

TEST_F(Transfer, OrderingAndSignalingPerQp) {
  Connect(QpType::kRc, {}, {}, 256);
  constexpr int kN = 200;
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(PostR(qb_, Rwr(1000 + i, b_, i * 256, 256)), Status::kOk);
  }
  // Interleave sends and writes; only every 10th WR is signaled.
  for (int i = 0; i < kN; ++i) {
    uint32_t flags = (i % 10 == 9) ? uint32_t{kSendSignaled} : 0u;
    ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, i, a_, i, 1 + i, flags)),
              Status::kOk);
  }
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), static_cast<size_t>(kN / 10));
  for (size_t k = 0; k < sc.size(); ++k) EXPECT_EQ(sc[k].wr_id, k * 10 + 9);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(rc[i].wr_id, 1000u + i);
    EXPECT_EQ(rc[i].byte_len, 1u + i);
  }
  // Check bytes of a few messages (each landed in its own receive slot).
  for (int i : {0, 57, 199}) {
    EXPECT_EQ(0, std::memcmp(&b_.buf[i * 256], &a_.buf[i], 1 + i)) << i;
  }
}

TEST_F(Transfer, SqSigAllSignalsEverything) {
  qa_ = MakeQp(a_, QpType::kRc, 16, /*sig_all=*/true);
  qb_ = MakeQp(b_, QpType::kRc, 16);
  BringUp(qa_, QpType::kRc, a_, b_, qb_.qpn);
  BringUp(qb_, QpType::kRc, b_, a_, qa_.qpn);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 16, /*flags=*/0);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  EXPECT_EQ(Poll(a_.scq).size(), 1u);
}

TEST_F(Transfer, PostSendStopsAtFullQueue) {
  Connect(QpType::kRc, {}, {}, 4);
  std::vector<SendWr> wrs(6, Wr(WrOpcode::kRdmaWrite, 0, a_, 0, 8));
  for (auto& w : wrs) {
    w.remote_addr = b_.at(0);
    w.rkey = b_.mr.rkey;
  }
  Status st = Status::kOk;
  EXPECT_EQ(rnic_.PostSend(qa_, wrs, &st), 4);
  EXPECT_EQ(st, Status::kNoResource);
  Drain();
  EXPECT_EQ(Poll(a_.scq).size(), 4u);
  EXPECT_EQ(rnic_.PostSend(qa_, wrs, &st), 4);  // space again
}

TEST_F(Transfer, UcSendAndWrite) {
  Connect(QpType::kUc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 100)), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 500, 100)), Status::kOk);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 2, a_, 900, 700);
  w.remote_addr = b_.at(3000);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(sc[1].opcode, WcOpcode::kRdmaWrite);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 100u);
  EXPECT_EQ(0, std::memcmp(&b_.buf[0], &a_.buf[500], 100));
  EXPECT_EQ(0, std::memcmp(&b_.buf[3000], &a_.buf[900], 700));
}

TEST_F(Transfer, UcRejectsReadAndAtomicsAtPost) {
  Connect(QpType::kUc);
  SendWr r = Wr(WrOpcode::kRdmaRead, 1, a_, 0, 8);
  EXPECT_EQ(Post(qa_, r), Status::kInvalid);
  r.opcode = WrOpcode::kAtomicFetchAdd;
  EXPECT_EQ(Post(qa_, r), Status::kInvalid);
}

TEST_F(Transfer, SqdHoldsWorkUntilRts) {
  Connect(QpType::kRc);
  QpAttr a;
  a.state = QpState::kSqd;
  ASSERT_EQ(rnic_.ModifyQp(qa_, a, kQpState), Status::kOk);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 32);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  EXPECT_TRUE(Poll(a_.scq).empty());
  a.state = QpState::kRts;
  ASSERT_EQ(rnic_.ModifyQp(qa_, a, kQpState), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(&b_.buf[0], &a_.buf[0], 32));
}

TEST_F(Transfer, ManyQpsProgressFairly) {
  // Three VMs' QPs into one target: every message arrives, each QP in order.
  Vm c;
  MakeVm(&c, 3);
  RnicQp qa2 = MakeQp(a_, QpType::kRc);
  RnicQp qc = MakeQp(c, QpType::kRc);
  RnicQp qb2 = MakeQp(b_, QpType::kRc);
  Connect(QpType::kRc);
  BringUp(qc, QpType::kRc, c, b_, qb2.qpn);
  BringUp(qb2, QpType::kRc, b_, c, qc.qpn);
  (void)qa2;
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(PostR(qb_, Rwr(i, b_, i * 8, 8)), Status::kOk);
    ASSERT_EQ(PostR(qb2, Rwr(100 + i, b_, 1000 + i * 8, 8)), Status::kOk);
  }
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, i, a_, i, 8)), Status::kOk);
    ASSERT_EQ(Post(qc, Wr(WrOpcode::kSend, i, c, i, 8)), Status::kOk);
  }
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 80u);
  uint64_t next_b = 0, next_c = 100;
  for (auto& x : rc) {
    ASSERT_EQ(x.status, WcStatus::kSuccess);
    if (x.qpn == qb_.qpn) {
      EXPECT_EQ(x.wr_id, next_b++);
    } else {
      EXPECT_EQ(x.qpn, qb2.qpn);
      EXPECT_EQ(x.wr_id, next_c++);
    }
  }
  EXPECT_EQ(0, std::memcmp(&b_.buf[1000 + 39 * 8], &c.buf[39], 8));
}

TEST_F(Transfer, LoopbackQpConnectedToItself) {
  qa_ = MakeQp(a_, QpType::kRc);
  BringUp(qa_, QpType::kRc, a_, a_, qa_.qpn);
  ASSERT_EQ(PostR(qa_, Rwr(1, a_, 30000, 100)), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 2, a_, 0, 100)), Status::kOk);
  SendWr r = Wr(WrOpcode::kRdmaRead, 3, a_, 40000, 200);
  r.remote_addr = a_.at(100);
  r.rkey = a_.mr.rkey;
  ASSERT_EQ(Post(qa_, r), Status::kOk);
  Drain();
  EXPECT_EQ(Poll(a_.scq).size(), 2u);
  EXPECT_EQ(Poll(a_.rcq).size(), 1u);
  EXPECT_EQ(0, std::memcmp(&a_.buf[30000], &a_.buf[0], 100));
  EXPECT_EQ(0, std::memcmp(&a_.buf[40000], &a_.buf[100], 200));
  // An error on a loopback QP completes the failing WQE exactly once.
  SendWr bad = Wr(WrOpcode::kRdmaWrite, 4, a_, 0, 8);
  bad.remote_addr = a_.at(0);
  bad.rkey = a_.mr.rkey ^ 1;
  ASSERT_EQ(Post(qa_, bad), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 5, a_, 0, 8)), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 4u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(sc[1].wr_id, 5u);
  EXPECT_EQ(sc[1].status, WcStatus::kWrFlushErr);
}

TEST_F(Transfer, ZeroByteSendAndUcWriteWithImm) {
  Connect(QpType::kUc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 16)), Status::kOk);
  ASSERT_EQ(PostR(qb_, Rwr(2, b_, 0, 16)), Status::kOk);
  SendWr z;
  z.wr_id = 7;
  z.opcode = WrOpcode::kSend;
  z.send_flags = kSendSignaled;
  ASSERT_EQ(Post(qa_, z), Status::kOk);
  SendWr w = Wr(WrOpcode::kRdmaWriteWithImm, 8, a_, 500, 64);
  w.remote_addr = b_.at(2000);
  w.rkey = b_.mr.rkey;
  w.imm_data = 99;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, 0u);
  EXPECT_EQ(rc[1].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[1].byte_len, 64u);
  EXPECT_EQ(rc[1].imm_data, 99u);
  EXPECT_EQ(0, std::memcmp(&b_.buf[2000], &a_.buf[500], 64));
}

TEST_F(Transfer, ResponderInSqdStillReceives) {
  Connect(QpType::kRc);
  QpAttr attr;
  attr.state = QpState::kSqd;
  ASSERT_EQ(rnic_.ModifyQp(qb_, attr, kQpState), Status::kOk);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 64)), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 2, a_, 0, 64)), Status::kOk);
  Drain();
  EXPECT_EQ(Poll(b_.rcq).size(), 1u);
  EXPECT_EQ(Poll(a_.scq).size(), 1u);
}

TEST_F(Transfer, PostRecvStopsAtFullQueue) {
  Connect(QpType::kRc, {}, {}, 2);
  std::vector<RecvWr> r(3, Rwr(1, b_, 0, 8));
  Status st;
  EXPECT_EQ(rnic_.PostRecv(qb_, r, &st), 2);
  EXPECT_EQ(st, Status::kNoResource);
  r[0].num_sge = 9;  // over the QP's max_recv_sge
  QpAttr attr;
  attr.state = QpState::kErr;
  ASSERT_EQ(rnic_.ModifyQp(qb_, attr, kQpState), Status::kOk);
  EXPECT_EQ(rnic_.PostRecv(qb_, r, &st), 0);
  EXPECT_EQ(st, Status::kInvalid);
}

TEST_F(Transfer, ReadNeedsResponderReadResources) {
  // The responder offers no RDMA READ/atomic resources (max_dest_rd_atomic 0).
  RnicQp qa2 = MakeQp(a_, QpType::kRc);
  RnicQp qb2 = MakeQp(b_, QpType::kRc);
  BringUp(qa2, QpType::kRc, a_, b_, qb2.qpn);
  ASSERT_EQ(ToInit(qb2, QpType::kRc), Status::kOk);
  QpAttr a;
  a.state = QpState::kRtr;
  a.av.sgid = b_.gid;
  a.av.dgid = a_.gid;
  a.dest_qpn = qa2.qpn;
  a.max_dest_rd_atomic = 0;
  a.path_mtu_bytes = 1024;
  ASSERT_EQ(rnic_.ModifyQp(qb2, a,
                           kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                               kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
            Status::kOk);
  SendWr r = Wr(WrOpcode::kRdmaRead, 1, a_, 0, 64);
  r.remote_addr = b_.at(0);
  r.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa2, r), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemInvReqErr);
}

}  // namespace
}  // namespace vrdma::testing
