// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The test double's own behaviour: its queues, its three ways of
// completing sends, delivery, flushes.
#include "backend/rnic/testing/fake_rnic.h"

#include <gtest/gtest.h>

#include <vector>

namespace vrdma::testing {
namespace {

TEST(FifoTest, KeepsOrderAcrossWrapAndGrowth) {
  Fifo<int> f;
  int next_in = 0, next_out = 0;
  // Wrap the first ring a few times, then grow with the head mid-ring.
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 6; ++i) f.push_back(next_in++);
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(f.front(), next_out++);
      f.pop_front();
    }
  }
  for (int i = 0; i < 40; ++i) f.push_back(next_in++);
  ASSERT_EQ(f.size(), static_cast<size_t>(next_in - next_out));
  EXPECT_EQ(f.back(), next_in - 1);
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i], next_out + int(i));
  while (!f.empty()) {
    EXPECT_EQ(f.front(), next_out++);
    f.pop_front();
  }
  f.push_back(7);
  f.clear();
  EXPECT_TRUE(f.empty());
}

class FakeRnicTest : public ::testing::Test {
 protected:
  RnicQp MakeQp(QpType type, bool srq = false) {
    QpInit init;
    init.type = type;
    init.pd = pd_;
    init.send_cq = scq_;
    init.recv_cq = rcq_;
    if (srq) {
      init.has_srq = true;
      init.srq = *rnic_.CreateSrq(pd_, 16, 1);
      srq_ = init.srq;
    }
    RnicQp qp = *rnic_.CreateQp(init);
    QpAttr a;
    a.state = QpState::kRts;
    a.dest_qpn = qp.qpn;  // RC: a loopback
    EXPECT_EQ(rnic_.ModifyQp(qp, a, kQpState | kQpDestQpn), Status::kOk);
    return qp;
  }
  static SendWr Wr(uint64_t id, WrOpcode op, uint32_t flags = kSendSignaled) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.num_sge = 1;
    wr.sge[0] = Sge{0x1000, 100, 1};
    return wr;
  }
  int Post(RnicQp qp, const SendWr& wr) {
    Status err = Status::kOk;
    return rnic_.PostSend(qp, std::span<const SendWr>(&wr, 1), &err);
  }
  void PostRecv(RnicQp qp, uint64_t id) {
    RecvWr r;
    r.wr_id = id;
    Status err = Status::kOk;
    ASSERT_EQ(rnic_.PostRecv(qp, std::span<const RecvWr>(&r, 1), &err), 1);
  }
  std::vector<Completion> Poll(RnicCq cq) {
    Completion c[16];
    const int n = rnic_.PollCq(cq, c);
    return std::vector<Completion>(c, c + n);
  }

  FakeRnic rnic_;
  RnicPd pd_ = *rnic_.AllocPd();
  RnicCq scq_ = *rnic_.CreateCq(64);
  RnicCq rcq_ = *rnic_.CreateCq(64);
  RnicSrq srq_{};
};

TEST_F(FakeRnicTest, CompletesWhenToldWithTheTablesOpcodeAndFlushesOnErr) {
  RnicQp qp = MakeQp(QpType::kRc);
  ASSERT_EQ(Post(qp, Wr(1, WrOpcode::kRdmaRead)), 1);
  ASSERT_EQ(Post(qp, Wr(2, WrOpcode::kAtomicFetchAdd)), 1);
  ASSERT_EQ(Post(qp, Wr(3, WrOpcode::kSend, 0)), 1);
  EXPECT_TRUE(Poll(scq_).empty()) << "nothing completes by itself";
  EXPECT_FALSE(rnic_.Progress());
  ASSERT_EQ(rnic_.qps.at(qp.id).sends.size(), 3u);
  rnic_.CompleteSend(qp.qpn);
  std::vector<Completion> c = Poll(scq_);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(c[0].byte_len, 100u);
  QpAttr a;
  a.state = QpState::kErr;
  ASSERT_EQ(rnic_.ModifyQp(qp, a, kQpState), Status::kOk);
  c = Poll(scq_);
  ASSERT_EQ(c.size(), 2u) << "flushed, signaled or not";
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(c[0].opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(c[1].wr_id, 3u);
  Status err = Status::kOk;
  const SendWr late = Wr(4, WrOpcode::kSend);
  EXPECT_EQ(rnic_.PostSend(qp, std::span<const SendWr>(&late, 1), &err), 0);
  EXPECT_EQ(err, Status::kBadState);
}

TEST_F(FakeRnicTest, AutoCompleteCompletesSignaledSendsOnProgress) {
  rnic_.auto_complete = true;
  RnicQp qp = MakeQp(QpType::kRc);
  ASSERT_EQ(Post(qp, Wr(1, WrOpcode::kRdmaWrite, 0)), 1);
  ASSERT_EQ(Post(qp, Wr(2, WrOpcode::kRdmaWriteWithImm)), 1);
  EXPECT_TRUE(Poll(scq_).empty());
  EXPECT_TRUE(rnic_.Progress());
  std::vector<Completion> c = Poll(scq_);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 2u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_TRUE(rnic_.qps.at(qp.id).sends.empty());
}

TEST_F(FakeRnicTest, CompleteAtPostWithDeliverIsALoopback) {
  rnic_.complete_at_post = true;
  rnic_.deliver = true;
  RnicQp qp = MakeQp(QpType::kRc);
  PostRecv(qp, 100);
  SendWr imm = Wr(1, WrOpcode::kSendWithImm);
  imm.imm_data = 0x12345678;
  ASSERT_EQ(Post(qp, imm), 1);
  ASSERT_EQ(Post(qp, Wr(2, WrOpcode::kSend)), 1);  // finds no receive
  EXPECT_TRUE(rnic_.qps.at(qp.id).sends.empty()) << "records nothing";
  EXPECT_EQ(rnic_.posts, 2u);
  std::vector<Completion> s = Poll(scq_);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].opcode, WcOpcode::kSend);
  std::vector<Completion> r = Poll(rcq_);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 100u);
  EXPECT_EQ(r[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(r[0].byte_len, 100u);
  EXPECT_EQ(r[0].imm_data, 0x12345678u);
  EXPECT_EQ(r[0].wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(r[0].src_qpn, qp.qpn);
  // WRITE_WITH_IMM takes a receive and lands no bytes in it; WRITE none.
  PostRecv(qp, 101);
  ASSERT_EQ(Post(qp, Wr(3, WrOpcode::kRdmaWrite)), 1);
  ASSERT_EQ(Post(qp, Wr(4, WrOpcode::kRdmaWriteWithImm)), 1);
  r = Poll(rcq_);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 101u);
  EXPECT_EQ(r[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(r[0].byte_len, 0u);
}

TEST_F(FakeRnicTest, UdDeliversToTheRemoteQpnAndItsSrq) {
  rnic_.complete_at_post = true;
  rnic_.deliver = true;
  RnicQp sender = MakeQp(QpType::kUd);
  RnicQp receiver = MakeQp(QpType::kUd, /*srq=*/true);
  RecvWr r;
  r.wr_id = 7;
  Status err = Status::kOk;
  ASSERT_EQ(rnic_.PostSrqRecv(srq_, std::span<const RecvWr>(&r, 1), &err), 1);
  SendWr wr = Wr(1, WrOpcode::kSend, 0);
  wr.remote_qpn = receiver.qpn;
  ASSERT_EQ(Post(sender, wr), 1);
  EXPECT_TRUE(Poll(scq_).empty()) << "unsignaled";
  std::vector<Completion> c = Poll(rcq_);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 7u);
  EXPECT_EQ(c[0].qpn, receiver.qpn);
  EXPECT_EQ(c[0].src_qpn, sender.qpn);
}

TEST(FakeRnicMwTest, RecordsWindowsAndRefusesWhatSoftRnicRefuses) {
  FakeRnic rnic;
  auto pd = rnic.AllocPd();
  ASSERT_TRUE(pd.ok());
  auto t1 = rnic.AllocMw(*pd, 1);
  auto t2 = rnic.AllocMw(*pd, 2);
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_NE(t1->rkey, t2->rkey);
  ASSERT_EQ(rnic.mws.size(), 2u);
  EXPECT_EQ(rnic.mws[t2->id].type, 2);
  EXPECT_EQ(rnic.mws[t2->id].pd, pd->id);
  EXPECT_EQ(rnic.AllocMw(*pd, 3).status(), Status::kInvalid);
  EXPECT_EQ(rnic.AllocMw(RnicPd{999}, 1).status(), Status::kBadHandle);
  EXPECT_EQ(rnic.DeallocMw(*t1), Status::kOk);
  EXPECT_EQ(rnic.DeallocMw(*t1), Status::kBadHandle);
  EXPECT_EQ(rnic.mws.size(), 1u);
  rnic.lim.max_mw = 1;
  EXPECT_EQ(rnic.AllocMw(*pd, 1).status(), Status::kNoResource);
  rnic.lim.max_mw = 0;
  EXPECT_EQ(rnic.AllocMw(*pd, 1).status(), Status::kUnsupported);
}

}  // namespace
}  // namespace vrdma::testing
