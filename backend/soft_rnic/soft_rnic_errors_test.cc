// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Protection and length errors on both sides of a connection, and the flush
// that follows: local keys, remote keys (wrong key, other PD, out of range,
// missing right), QP access flags, receive buffer checks.
#include <cstring>
#include <limits>

#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

class Errors : public SoftRnicTest {
 protected:
  // VM c with a 2-entry CQ and an RC QP connected to one of b_'s; returns
  // c's QP.
  RnicQp SmallCqVmConnectedToB(Vm* c) {
    MakeVm(c, 3, /*cq_depth=*/2);
    RnicQp qc = MakeQp(*c, QpType::kRc);
    RnicQp qb = MakeQp(b_, QpType::kRc);
    BringUp(qc, QpType::kRc, *c, b_, qb.qpn);
    BringUp(qb, QpType::kRc, b_, *c, qc.qpn);
    return qc;
  }
  // A signaled 8-byte WRITE from c to b_'s buffer.
  void WriteToB(Vm& c, RnicQp qc, uint64_t wr_id) {
    SendWr w = Wr(WrOpcode::kRdmaWrite, wr_id, c, 0, 8);
    w.remote_addr = b_.at(0);
    w.rkey = b_.mr.rkey;
    ASSERT_EQ(Post(qc, w), Status::kOk);
  }
};

// A bad local SGE fails the WR with kLocProtErr, moves the RC QP to ERR and
// flushes what follows; nothing reaches the responder.
struct LocalCase {
  const char* name;
  WrOpcode op;
  int mutate;  // 0 wrong lkey, 1 stale lkey, 2 other PD, 3 out of range,
               // 4 iova below MR, 5 no local write (READ target)
};

void PrintTo(const LocalCase& c, std::ostream* os) { *os << c.name; }

class LocalErrors : public SoftRnicTest,
                    public ::testing::WithParamInterface<LocalCase> {};

TEST_P(LocalErrors, FailWithLocProtErrAndFlush) {
  const LocalCase& c = GetParam();
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 4096)), Status::kOk);
  SendWr w = Wr(c.op, 10, a_, 0, 256);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey;
  switch (c.mutate) {
    case 0:
      w.sge[0].lkey ^= 0x100;  // another index
      break;
    case 1: {
      // Deregister and register again: same slot or not, the old key is dead.
      RnicMr old = a_.mr;
      ASSERT_EQ(rnic_.DeregMr(old), Status::kOk);
      auto mr =
          rnic_.RegMr(a_.pd, a_.buf.data(), a_.buf.size(), a_.iova, kAllAccess);
      ASSERT_TRUE(mr.ok());
      EXPECT_NE(mr->lkey, old.lkey);
      a_.mr = *mr;
      w.sge[0].lkey = old.lkey;
      break;
    }
    case 2:
      w.sge[0] = Sge{b_.at(0), 256, b_.mr.lkey};  // b's MR, a's QP
      break;
    case 3:
      w.sge[0].addr = a_.at(kBufSize - 100);
      break;
    case 4:
      w.sge[0].addr = a_.iova - 1;
      break;
    case 5: {
      auto ro = rnic_.RegMr(a_.pd, a_.buf.data(), 1024, a_.iova + 0x100000,
                            kAccessRemoteRead);
      ASSERT_TRUE(ro.ok());
      w.sge[0] = Sge{a_.iova + 0x100000, 256, ro->lkey};
      break;
    }
  }
  SendWr next = Wr(WrOpcode::kSend, 11, a_, 0, 8, /*flags=*/0);
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  ASSERT_EQ(Post(qa_, next), Status::kOk);
  std::vector<uint8_t> b_before = b_.buf;
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 10u);
  EXPECT_EQ(sc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(sc[1].wr_id, 11u);  // unsignaled, still flushed
  EXPECT_EQ(sc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(StateOf(qa_), QpState::kErr);
  EXPECT_EQ(StateOf(qb_), QpState::kRts);
  EXPECT_TRUE(Poll(b_.rcq).empty());
  EXPECT_EQ(b_.buf, b_before);
}

INSTANTIATE_TEST_SUITE_P(
    All, LocalErrors,
    ::testing::Values(LocalCase{"WrongKey", WrOpcode::kSend, 0},
                      LocalCase{"StaleKey", WrOpcode::kSend, 1},
                      LocalCase{"OtherPd", WrOpcode::kRdmaWrite, 2},
                      LocalCase{"PastEnd", WrOpcode::kSend, 3},
                      LocalCase{"BelowIova", WrOpcode::kSend, 4},
                      LocalCase{"ReadIntoReadOnly", WrOpcode::kRdmaRead, 5}),
    [](const auto& info) { return std::string(info.param.name); });

// Remote key problems: the RC requester completes with kRemAccessErr and
// both QPs go to ERR; no remote byte changes.
struct RemoteCase {
  const char* name;
  WrOpcode op;
  int mutate;  // 0 bad rkey, 1 rkey of another PD, 2 past end,
               // 3 address wrap, 4 MR lacks the right, 5 rkey 0 (local MR)
};

void PrintTo(const RemoteCase& c, std::ostream* os) { *os << c.name; }

class RemoteErrors : public SoftRnicTest,
                     public ::testing::WithParamInterface<RemoteCase> {};

TEST_P(RemoteErrors, FailWithRemAccessErr) {
  const RemoteCase& c = GetParam();
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 4096)), Status::kOk);
  bool atomic = c.op == WrOpcode::kAtomicFetchAdd;
  uint32_t len = atomic ? 8 : 512;
  SendWr w = Wr(c.op, 10, a_, 0, len);
  w.remote_addr = b_.at(1024);
  w.rkey = b_.mr.rkey;
  switch (c.mutate) {
    case 0:
      w.rkey ^= 0x7;  // right index, wrong tag
      break;
    case 1:
      w.rkey = a_.mr.rkey;  // a valid rkey, but of the requester's PD
      w.remote_addr = a_.at(1024);
      break;
    case 2:
      w.remote_addr = b_.at(kBufSize - len + 8);
      break;
    case 3:
      w.remote_addr = std::numeric_limits<uint64_t>::max() - 7;
      break;
    case 4: {
      // b registers a second MR with only the wrong remote right.
      uint32_t access = c.op == WrOpcode::kRdmaRead
                            ? uint32_t{kAccessLocalWrite | kAccessRemoteWrite}
                            : uint32_t{kAccessRemoteRead};
      auto mr = rnic_.RegMr(b_.pd, b_.buf.data(), kBufSize, b_.iova + 0x100000,
                            access);
      ASSERT_TRUE(mr.ok());
      w.rkey = mr->rkey;
      w.remote_addr = b_.iova + 0x100000 + 1024;
      break;
    }
    case 5: {
      auto mr = rnic_.RegMr(b_.pd, b_.buf.data(), kBufSize, b_.iova + 0x100000,
                            kAccessLocalWrite);
      ASSERT_TRUE(mr.ok());
      ASSERT_EQ(mr->rkey, 0u);  // no remote access: no rkey
      w.rkey = mr->lkey;        // guessing the lkey does not help
      w.remote_addr = b_.iova + 0x100000 + 1024;
      break;
    }
  }
  std::vector<uint8_t> b_before = b_.buf;
  std::vector<uint8_t> a_before = a_.buf;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(StateOf(qa_), QpState::kErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  // The responder's posted receive is flushed by its move to ERR.
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(b_.buf, b_before);
  EXPECT_EQ(a_.buf, a_before);
}

INSTANTIATE_TEST_SUITE_P(
    All, RemoteErrors,
    ::testing::Values(
        RemoteCase{"WriteBadRkey", WrOpcode::kRdmaWrite, 0},
        RemoteCase{"WriteOtherPdRkey", WrOpcode::kRdmaWrite, 1},
        RemoteCase{"WritePastEnd", WrOpcode::kRdmaWrite, 2},
        RemoteCase{"WriteWrap", WrOpcode::kRdmaWrite, 3},
        RemoteCase{"WriteNoRemoteWrite", WrOpcode::kRdmaWrite, 4},
        RemoteCase{"WriteRkeyZero", WrOpcode::kRdmaWrite, 5},
        RemoteCase{"WriteImmBadRkey", WrOpcode::kRdmaWriteWithImm, 0},
        RemoteCase{"ReadBadRkey", WrOpcode::kRdmaRead, 0},
        RemoteCase{"ReadOtherPdRkey", WrOpcode::kRdmaRead, 1},
        RemoteCase{"ReadPastEnd", WrOpcode::kRdmaRead, 2},
        RemoteCase{"ReadNoRemoteRead", WrOpcode::kRdmaRead, 4},
        RemoteCase{"AtomicBadRkey", WrOpcode::kAtomicFetchAdd, 0},
        RemoteCase{"AtomicPastEnd", WrOpcode::kAtomicFetchAdd, 2},
        RemoteCase{"AtomicNoRemoteAtomic", WrOpcode::kAtomicFetchAdd, 4}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(Errors, QpWithoutRemoteWriteRejectsWriteAsInvalidRequest) {
  Conn cb;
  cb.access = kAccessLocalWrite | kAccessRemoteRead;
  Connect(QpType::kRc, {}, cb);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 64);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey;
  std::vector<uint8_t> before = b_.buf;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  EXPECT_EQ(b_.buf, before);
}

TEST_F(Errors, MisalignedAtomicIsInvalidRequest) {
  Connect(QpType::kRc);
  SendWr w = Wr(WrOpcode::kAtomicCmpSwp, 1, a_, 0, 8);
  w.remote_addr = b_.at(4);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(StateOf(qa_), QpState::kErr);
}

TEST_F(Errors, SendLongerThanReceiveBuffer) {
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 100)), Status::kOk);
  ASSERT_EQ(PostR(qb_, Rwr(2, b_, 100, 100)), Status::kOk);
  std::vector<uint8_t> before = b_.buf;
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 7, a_, 0, 101)), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemInvReqErr);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(rc[1].wr_id, 2u);
  EXPECT_EQ(rc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(StateOf(qa_), QpState::kErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  EXPECT_EQ(b_.buf, before);
}

TEST_F(Errors, ReceiveWithBadLkeyIsRemoteOperationError) {
  Connect(QpType::kRc);
  RecvWr r = Rwr(1, b_, 0, 100);
  r.sge[0].lkey = a_.mr.lkey;  // not b's PD
  ASSERT_EQ(PostR(qb_, r), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 7, a_, 0, 50)), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemOpErr);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
}

TEST_F(Errors, UcBadRkeyIsDroppedSilently) {
  Connect(QpType::kUc);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 64);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey ^ 0x3;
  std::vector<uint8_t> before = b_.buf;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  // The next message on the same QP still arrives.
  SendWr ok = Wr(WrOpcode::kRdmaWrite, 2, a_, 100, 64);
  ok.remote_addr = b_.at(1000);
  ok.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, ok), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);  // UC never learns
  EXPECT_EQ(sc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(&b_.buf[0], &before[0], 1000));
  EXPECT_EQ(0, std::memcmp(&b_.buf[1000], &a_.buf[100], 64));
  EXPECT_EQ(StateOf(qb_), QpState::kRts);
  EXPECT_TRUE(Poll(b_.rcq).empty());
}

TEST_F(Errors, UcSendWithoutReceiveIsDropped) {
  Connect(QpType::kUc);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 64)), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  // A receive posted later does not get the dropped message.
  ASSERT_EQ(PostR(qb_, Rwr(5, b_, 0, 64)), Status::kOk);
  Drain();
  EXPECT_TRUE(Poll(b_.rcq).empty());
}

TEST_F(Errors, ModifyToErrFlushesEverythingOutstanding) {
  Connect(QpType::kRc);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, i, a_, 0, 8, /*flags=*/0)),
              Status::kOk);
    ASSERT_EQ(PostR(qa_, Rwr(100 + i, a_, 0, 8)), Status::kOk);
  }
  QpAttr attr;
  attr.state = QpState::kErr;
  ASSERT_EQ(rnic_.ModifyQp(qa_, attr, kQpState), Status::kOk);
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sc[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(sc[i].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(sc[i].opcode, WcOpcode::kSend);
    EXPECT_EQ(sc[i].qpn, qa_.qpn);
  }
  auto rc = Poll(a_.rcq);
  ASSERT_EQ(rc.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rc[i].wr_id, 100u + i);
    EXPECT_EQ(rc[i].status, WcStatus::kWrFlushErr);
  }
  // Later posts are accepted and flushed, like hardware.
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 9, a_, 0, 8, 0)), Status::kOk);
  ASSERT_EQ(PostR(qa_, Rwr(109, a_, 0, 8)), Status::kOk);
  EXPECT_TRUE(rnic_.Progress());
  sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 9u);
  EXPECT_EQ(sc[0].status, WcStatus::kWrFlushErr);
  rc = Poll(a_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 109u);
  // RESET empties silently and the QP can be brought up again.
  attr.state = QpState::kReset;
  ASSERT_EQ(rnic_.ModifyQp(qa_, attr, kQpState), Status::kOk);
  BringUp(qa_, QpType::kRc, a_, b_, qb_.qpn);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 8)), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 10, a_, 0, 8)), Status::kOk);
  Drain();
  sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
}

TEST_F(Errors, DeregisteredMrFailsQueuedWork) {
  Connect(QpType::kRc);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 64);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  ASSERT_EQ(rnic_.DeregMr(b_.mr), Status::kOk);  // after post, before run
  std::vector<uint8_t> before = b_.buf;
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(b_.buf, before);
}

TEST_F(Errors, CqOverflowDropsAndCounts) {
  Vm c;
  const RnicQp qc = SmallCqVmConnectedToB(&c);
  for (uint64_t i = 0; i < 5; ++i) ASSERT_NO_FATAL_FAILURE(WriteToB(c, qc, i));
  Drain();
  auto stats = rnic_.QueryCqStats(c.scq);
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(stats->overflowed);
  EXPECT_EQ(stats->dropped, 3u);
  auto sc = Poll(c.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 0u);
  EXPECT_EQ(sc[1].wr_id, 1u);
  // The CQ stays in error: room again, but completions are still lost.
  ASSERT_NO_FATAL_FAILURE(WriteToB(c, qc, 9));
  Drain();
  EXPECT_TRUE(Poll(c.scq).empty());
  EXPECT_EQ(rnic_.QueryCqStats(c.scq)->dropped, 4u);
}

TEST_F(Errors, CqOverflowIsReportedOnceAsAnAsyncEvent) {
  Vm c;
  const RnicQp qc = SmallCqVmConnectedToB(&c);
  AsyncEvent ev;
  EXPECT_FALSE(rnic_.PollAsyncEvent(&ev)) << "nothing before the overflow";
  for (uint64_t i = 0; i < 5; ++i) ASSERT_NO_FATAL_FAILURE(WriteToB(c, qc, i));
  Drain();
  ASSERT_TRUE(rnic_.PollAsyncEvent(&ev));
  EXPECT_EQ(ev.type, AsyncEvent::Type::kCqError);
  EXPECT_EQ(ev.id, c.scq.id);
  EXPECT_FALSE(rnic_.PollAsyncEvent(&ev)) << "once per CQ, not per loss";
}

TEST_F(Errors, ResizeCqGrowsAndKeepsWhatItHolds) {
  Vm c;
  const RnicQp qc = SmallCqVmConnectedToB(&c);
  ASSERT_NO_FATAL_FAILURE(WriteToB(c, qc, 0));
  Drain();  // one completion held
  EXPECT_EQ(rnic_.ResizeCq(c.scq, DefaultSoftRnicLimits().max_cqe + 1),
            Status::kInvalid);
  ASSERT_EQ(rnic_.ResizeCq(c.scq, 5), Status::kOk);
  for (uint64_t i = 1; i < 5; ++i) ASSERT_NO_FATAL_FAILURE(WriteToB(c, qc, i));
  Drain();
  EXPECT_FALSE(rnic_.QueryCqStats(c.scq)->overflowed);
  auto sc = Poll(c.scq);
  ASSERT_EQ(sc.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(sc[i].wr_id, i);
}

}  // namespace
}  // namespace vrdma::testing
