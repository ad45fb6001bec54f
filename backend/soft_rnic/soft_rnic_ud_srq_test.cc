// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// UD (GRH in the receive buffer, Q_Keys, MTU, silent drops, SQE) and shared
// receive queues.
#include <cstring>

#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

constexpr uint32_t kQkey = 0x1111;

class Ud : public SoftRnicTest {
 protected:
  void SetUp() override {
    SoftRnicTest::SetUp();
    ua_ = MakeQp(a_, QpType::kUd);
    ub_ = MakeQp(b_, QpType::kUd);
    BringUp(ua_, QpType::kUd, a_, b_, 0);
    BringUp(ub_, QpType::kUd, b_, a_, 0);
    AddressVector av;
    av.sgid = a_.gid;
    av.dgid = b_.gid;
    av.flow_label = 0xabcde;
    av.traffic_class = 0x5a;
    av.hop_limit = 17;
    auto ah = rnic_.CreateAh(a_.pd, av);
    ASSERT_TRUE(ah.ok());
    ah_ = *ah;
  }

  SendWr UdSend(uint64_t wr_id, uint64_t off, uint32_t len,
                uint32_t qkey = kQkey) {
    SendWr w = Wr(WrOpcode::kSend, wr_id, a_, off, len);
    w.ah = ah_;
    w.remote_qpn = ub_.qpn;
    w.remote_qkey = qkey;
    return w;
  }

  RnicQp ua_{}, ub_{};
  RnicAh ah_{};
};

TEST_F(Ud, SendDeliversGrhAndPayload) {
  ASSERT_EQ(PostR(ub_, Rwr(1, b_, 0, 40 + 1000)), Status::kOk);
  SendWr w = UdSend(7, 300, 1000);
  w.opcode = WrOpcode::kSendWithImm;
  w.imm_data = 0x11223344;
  ASSERT_EQ(Post(ua_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, 1040u);
  EXPECT_EQ(rc[0].src_qpn, ua_.qpn);
  EXPECT_EQ(rc[0].qpn, ub_.qpn);
  EXPECT_EQ(rc[0].wc_flags, uint32_t{kWcGrh | kWcWithImm});
  EXPECT_EQ(rc[0].imm_data, 0x11223344u);
  const uint8_t* g = b_.buf.data();
  EXPECT_EQ(g[0], 0x65);  // version 6, traffic class high nibble 5
  EXPECT_EQ(g[1], 0xaa);  // traffic class low nibble a, flow label 0xa....
  EXPECT_EQ(g[2], 0xbc);
  EXPECT_EQ(g[3], 0xde);
  EXPECT_EQ((g[4] << 8) | g[5], 8 + 12 + 8 + 1000 + 4);  // UDP, BTH, DETH, ICRC
  EXPECT_EQ(g[6], 17);  // RoCE v2: UDP
  EXPECT_EQ(g[7], 17);
  EXPECT_EQ(0, std::memcmp(g + 8, a_.gid.data(), 16));
  EXPECT_EQ(0, std::memcmp(g + 24, b_.gid.data(), 16));
  EXPECT_EQ(0, std::memcmp(g + 40, &a_.buf[300], 1000));
}

TEST_F(Ud, QkeyMismatchIsDropped) {
  ASSERT_EQ(PostR(ub_, Rwr(1, b_, 0, 200)), Status::kOk);
  std::vector<uint8_t> before = b_.buf;
  ASSERT_EQ(Post(ua_, UdSend(7, 0, 100, kQkey + 1)), Status::kOk);
  Drain();
  ASSERT_EQ(Poll(a_.scq).size(), 1u);  // UD never learns
  EXPECT_TRUE(Poll(b_.rcq).empty());
  EXPECT_EQ(b_.buf, before);
  // The receive is still there for a good message.
  ASSERT_EQ(Post(ua_, UdSend(8, 0, 100)), Status::kOk);
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
}

TEST_F(Ud, HighBitQkeyUsesSendersQkey) {
  ASSERT_EQ(PostR(ub_, Rwr(1, b_, 0, 200)), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(7, 0, 100, 0x80000000u)), Status::kOk);
  Drain();
  EXPECT_EQ(Poll(b_.rcq).size(), 1u);  // both QPs were set up with kQkey
}

TEST_F(Ud, LargerThanMtuFailsLocallyAndEntersSqe) {
  ASSERT_EQ(PostR(ub_, Rwr(1, b_, 0, 8192)), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(7, 0, 4097)), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(8, 0, 10)), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(sc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(StateOf(ua_), QpState::kSqe);
  EXPECT_TRUE(Poll(b_.rcq).empty());
  // SQE -> RTS recovers the send queue.
  QpAttr attr;
  attr.state = QpState::kRts;
  ASSERT_EQ(rnic_.ModifyQp(ua_, attr, kQpState), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(9, 0, 4096)), Status::kOk);
  Drain();
  sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 4136u);
}

TEST_F(Ud, ReceiveWithoutRoomForGrhIsLengthError) {
  ASSERT_EQ(PostR(ub_, Rwr(1, b_, 0, 100)), Status::kOk);  // 40 + 61 > 100
  ASSERT_EQ(Post(ua_, UdSend(7, 0, 61)), Status::kOk);
  Drain();
  EXPECT_EQ(Poll(a_.scq)[0].status, WcStatus::kSuccess);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
  // Another sender's oversized message must not take the receiver's QP down.
  EXPECT_EQ(StateOf(ub_), QpState::kRts);
  ASSERT_EQ(PostR(ub_, Rwr(2, b_, 0, 100)), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(8, 0, 60)), Status::kOk);
  Drain();
  rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 2u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 100u);
}

TEST_F(Ud, BadReceiveSgeBreaksTheReceiver) {
  RecvWr r = Rwr(1, b_, 0, 200);
  r.sge[0].lkey = a_.mr.lkey;  // not the receiver's PD
  ASSERT_EQ(PostR(ub_, r), Status::kOk);
  ASSERT_EQ(PostR(ub_, Rwr(2, b_, 0, 200)), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(7, 0, 10)), Status::kOk);
  Drain();
  EXPECT_EQ(Poll(a_.scq)[0].status, WcStatus::kSuccess);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(rc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(StateOf(ub_), QpState::kErr);
}

TEST_F(Ud, NoReceiveOrNoRouteIsDropped) {
  ASSERT_EQ(Post(ua_, UdSend(1, 0, 10)), Status::kOk);  // no receive posted
  SendWr to_rc = UdSend(2, 0, 10);
  RnicQp rc_qp = MakeQp(b_, QpType::kRc);
  to_rc.remote_qpn = rc_qp.qpn;  // not a UD QP
  ASSERT_EQ(Post(ua_, to_rc), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[1].status, WcStatus::kSuccess);
  ASSERT_EQ(PostR(ub_, Rwr(1, b_, 0, 200)), Status::kOk);
  ASSERT_EQ(rnic_.RemoveGid(b_.gid), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(3, 0, 10)), Status::kOk);  // dgid gone
  Drain();
  EXPECT_EQ(Poll(a_.scq).size(), 1u);
  EXPECT_TRUE(Poll(b_.rcq).empty());
}

TEST_F(Ud, AhIsCapturedAtPostTime) {
  ASSERT_EQ(PostR(ub_, Rwr(1, b_, 0, 200)), Status::kOk);
  ASSERT_EQ(Post(ua_, UdSend(7, 0, 10)), Status::kOk);
  ASSERT_EQ(rnic_.DestroyAh(ah_), Status::kOk);
  Drain();
  EXPECT_EQ(Poll(b_.rcq).size(), 1u);
  // A destroyed AH can no longer be posted with.
  EXPECT_EQ(Post(ua_, UdSend(8, 0, 10)), Status::kInvalid);
}

TEST_F(Ud, PostChecks) {
  // An AH of another PD, and RDMA opcodes, are rejected at post time.
  AddressVector av;
  av.sgid = b_.gid;
  av.dgid = a_.gid;
  auto other = rnic_.CreateAh(b_.pd, av);
  ASSERT_TRUE(other.ok());
  SendWr w = UdSend(1, 0, 10);
  w.ah = *other;
  EXPECT_EQ(Post(ua_, w), Status::kInvalid);
  w = UdSend(1, 0, 10);
  w.opcode = WrOpcode::kRdmaWrite;
  EXPECT_EQ(Post(ua_, w), Status::kInvalid);
  // An AH must name a source GID of this port.
  av.sgid[15] = 0x99;
  EXPECT_EQ(rnic_.CreateAh(a_.pd, av).status(), Status::kInvalid);
}

class Srq : public SoftRnicTest {};

TEST_F(Srq, QpsShareReceivesInOrder) {
  auto srq = rnic_.CreateSrq(b_.pd, 16, 4);
  ASSERT_TRUE(srq.ok());
  RnicQp qa1 = MakeQp(a_, QpType::kRc);
  RnicQp qa2 = MakeQp(a_, QpType::kRc);
  RnicQp qb1 = MakeQp(b_, QpType::kRc, 64, false, &*srq);
  RnicQp qb2 = MakeQp(b_, QpType::kRc, 64, false, &*srq);
  BringUp(qa1, QpType::kRc, a_, b_, qb1.qpn);
  BringUp(qa2, QpType::kRc, a_, b_, qb2.qpn);
  BringUp(qb1, QpType::kRc, b_, a_, qa1.qpn);
  BringUp(qb2, QpType::kRc, b_, a_, qa2.qpn);

  std::vector<RecvWr> rwrs;
  for (int i = 0; i < 4; ++i) rwrs.push_back(Rwr(50 + i, b_, i * 100, 100));
  Status st;
  ASSERT_EQ(rnic_.PostSrqRecv(*srq, rwrs, &st), 4);
  // Receives of an SRQ-attached QP go to the SRQ only.
  EXPECT_EQ(PostR(qb1, Rwr(1, b_, 0, 8)), Status::kInvalid);

  ASSERT_EQ(Post(qa1, Wr(WrOpcode::kSend, 1, a_, 1000, 10)), Status::kOk);
  ASSERT_EQ(Post(qa2, Wr(WrOpcode::kSend, 2, a_, 2000, 20)), Status::kOk);
  ASSERT_EQ(Post(qa1, Wr(WrOpcode::kSend, 3, a_, 3000, 30)), Status::kOk);
  Drain();
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 3u);
  // SRQ WQEs are consumed oldest first, whichever QP receives.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rc[i].wr_id, 50u + i);
  uint32_t total = 0;
  for (auto& c : rc) {
    EXPECT_TRUE(c.qpn == qb1.qpn || c.qpn == qb2.qpn);
    const uint8_t* dst = &b_.buf[(c.wr_id - 50) * 100];
    uint64_t src = c.byte_len == 10 ? 1000 : c.byte_len == 20 ? 2000 : 3000;
    EXPECT_EQ(0, std::memcmp(dst, &a_.buf[src], c.byte_len));
    total += c.byte_len;
  }
  EXPECT_EQ(total, 60u);

  // Busy while QPs use it.
  EXPECT_EQ(rnic_.DestroySrq(*srq), Status::kBusy);
}

TEST_F(Srq, EmptySrqMeansRnr) {
  auto srq = rnic_.CreateSrq(b_.pd, 4, 1);
  ASSERT_TRUE(srq.ok());
  qa_ = MakeQp(a_, QpType::kRc);
  qb_ = MakeQp(b_, QpType::kRc, 64, false, &*srq);
  BringUp(qa_, QpType::kRc, a_, b_, qb_.qpn);
  BringUp(qb_, QpType::kRc, b_, a_, qa_.qpn);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 10)), Status::kOk);
  rnic_.Progress();
  EXPECT_TRUE(Poll(a_.scq).empty());
  RecvWr r = Rwr(9, b_, 0, 10);
  Status st;
  ASSERT_EQ(rnic_.PostSrqRecv(*srq, std::span<const RecvWr>(&r, 1), &st), 1);
  now_ += 10'000'000;
  Drain();
  EXPECT_EQ(Poll(a_.scq).size(), 1u);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
  // Too many SGEs, and a full SRQ, are refused.
  r.num_sge = 2;
  EXPECT_EQ(rnic_.PostSrqRecv(*srq, std::span<const RecvWr>(&r, 1), &st), 0);
  EXPECT_EQ(st, Status::kInvalid);
  r.num_sge = 1;
  std::vector<RecvWr> many(5, r);
  EXPECT_EQ(rnic_.PostSrqRecv(*srq, many, &st), 4);
  EXPECT_EQ(st, Status::kNoResource);
}

TEST_F(Srq, ErrorFlushDoesNotTouchSrqWqes) {
  auto srq = rnic_.CreateSrq(b_.pd, 4, 1);
  ASSERT_TRUE(srq.ok());
  qb_ = MakeQp(b_, QpType::kRc, 64, false, &*srq);
  RecvWr r = Rwr(9, b_, 0, 10);
  Status st;
  ASSERT_EQ(rnic_.PostSrqRecv(*srq, std::span<const RecvWr>(&r, 1), &st), 1);
  QpAttr attr;
  attr.state = QpState::kErr;
  ASSERT_EQ(rnic_.ModifyQp(qb_, attr, kQpState), Status::kOk);
  EXPECT_TRUE(Poll(b_.rcq).empty());
  ASSERT_EQ(rnic_.DestroyQp(qb_), Status::kOk);
  EXPECT_EQ(rnic_.DestroySrq(*srq), Status::kOk);
}

}  // namespace
}  // namespace vrdma::testing
