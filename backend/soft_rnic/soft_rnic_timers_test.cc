// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RNR NAK and transport retry behaviour on the injected clock: exact retry
// times, exhaustion, infinite RNR retry, unreachable or vanished peers.
#include <cstring>

#include "backend/soft_rnic/qp_state.h"
#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

using Timers = SoftRnicTest;

constexpr uint64_t kRnr12 = 640'000;  // min_rnr_timer 12 = 0.64 ms

TEST_F(Timers, RnrRetrySucceedsOnceReceiveIsPosted) {
  Conn ca, cb;
  ca.min_rnr_timer = 1;   // the requester's own value does not matter:
  cb.min_rnr_timer = 12;  // the responder's NAK carries its timer
  Connect(QpType::kRc, ca, cb);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  const uint64_t t0 = now_;
  EXPECT_TRUE(rnic_.Progress());  // attempt: RNR NAK
  EXPECT_TRUE(Poll(a_.scq).empty());
  EXPECT_EQ(rnic_.NextTimerNs(), t0 + kRnr12);
  ASSERT_EQ(PostR(qb_, Rwr(2, b_, 0, 64)), Status::kOk);
  now_ += kRnr12 - 1;
  // The timer still runs: no retry yet, but the RNIC reports itself busy so
  // a polling loop keeps calling it.
  EXPECT_TRUE(rnic_.Progress());
  EXPECT_TRUE(Poll(b_.rcq).empty());
  now_ += 1;
  EXPECT_TRUE(rnic_.Progress());
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  auto rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].timestamp_ns, now_);
  EXPECT_EQ(0, std::memcmp(&b_.buf[0], &a_.buf[0], 32));
}

TEST_F(Timers, RnrRetryExhausted) {
  Conn ca;
  ca.rnr_retry = 2;
  Connect(QpType::kRc, ca);
  uint64_t t0 = now_;
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 2, a_, 0, 32, 0)), Status::kOk);
  rnic_.Progress();  // first attempt at t0
  now_ = t0 + kRnr12;
  rnic_.Progress();  // retry 1
  now_ = t0 + 2 * kRnr12 - 1;
  rnic_.Progress();
  EXPECT_TRUE(Poll(a_.scq).empty());
  now_ = t0 + 2 * kRnr12;
  rnic_.Progress();  // retry 2: NAK with no retries left
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(sc[0].timestamp_ns, t0 + 2 * kRnr12);
  EXPECT_EQ(sc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(StateOf(qa_), QpState::kErr);
  EXPECT_EQ(StateOf(qb_), QpState::kRts);  // RNR is not the responder's error
}

TEST_F(Timers, RnrRetrySevenIsInfinite) {
  Conn ca;
  ca.rnr_retry = 7;
  Connect(QpType::kRc, ca);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  for (int i = 0; i < 500; ++i) {
    rnic_.Progress();
    now_ += kRnr12;
  }
  EXPECT_TRUE(Poll(a_.scq).empty());
  ASSERT_EQ(PostR(qb_, Rwr(2, b_, 0, 64)), Status::kOk);
  rnic_.Progress();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
}

TEST_F(Timers, RnrBlocksLaterWorkOnTheSameQp) {
  Connect(QpType::kRc);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 2, a_, 100, 32);
  w.remote_addr = b_.at(1000);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  std::vector<uint8_t> before = b_.buf;
  rnic_.Progress();
  EXPECT_EQ(b_.buf, before);  // the write waits behind the send
  ASSERT_EQ(PostR(qb_, Rwr(5, b_, 0, 64)), Status::kOk);
  now_ += kRnr12;
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 1u);
  EXPECT_EQ(sc[1].wr_id, 2u);
  EXPECT_EQ(0, std::memcmp(&b_.buf[1000], &a_.buf[100], 32));
}

TEST_F(Timers, WaitingQpDoesNotBlockOthers) {
  Connect(QpType::kRc);
  RnicQp qa2 = MakeQp(a_, QpType::kRc);
  RnicQp qb2 = MakeQp(b_, QpType::kRc);
  BringUp(qa2, QpType::kRc, a_, b_, qb2.qpn);
  BringUp(qb2, QpType::kRc, b_, a_, qa2.qpn);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  rnic_.Progress();  // qa_ now waits for its RNR timer
  for (int i = 0; i < 5; ++i) {
    SendWr w = Wr(WrOpcode::kRdmaWrite, 10 + i, a_, 100 * i, 50);
    w.remote_addr = b_.at(5000 + 100 * i);
    w.rkey = b_.mr.rkey;
    ASSERT_EQ(Post(qa2, w), Status::kOk);
    EXPECT_TRUE(rnic_.Progress());
  }
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 5u);
  for (auto& c : sc) EXPECT_EQ(c.qpn, qa2.qpn);
  EXPECT_TRUE(rnic_.Progress());  // only a timer left: still busy
  EXPECT_TRUE(Poll(a_.scq).empty());
  EXPECT_TRUE(rnic_.NextTimerNs().has_value());
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 64)), Status::kOk);
  now_ += kRnr12;
  EXPECT_TRUE(rnic_.Progress());
  sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].qpn, qa_.qpn);
}

TEST_F(Timers, DestroyingScheduledQpsIsSafe) {
  Connect(QpType::kRc);
  RnicQp qa2 = MakeQp(a_, QpType::kRc);
  RnicQp qb2 = MakeQp(b_, QpType::kRc);
  BringUp(qa2, QpType::kRc, a_, b_, qb2.qpn);
  BringUp(qb2, QpType::kRc, b_, a_, qa2.qpn);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  rnic_.Progress();  // qa_ waits on its RNR timer
  ASSERT_EQ(Post(qa2, Wr(WrOpcode::kSend, 2, a_, 0, 32)), Status::kOk);
  // qa_ is on the timer list, qa2 on the active list: destroy both.
  ASSERT_EQ(rnic_.DestroyQp(qa_), Status::kOk);
  ASSERT_EQ(rnic_.DestroyQp(qa2), Status::kOk);
  EXPECT_FALSE(rnic_.NextTimerNs().has_value());
  now_ += 100 * kRnr12;
  EXPECT_FALSE(rnic_.Progress());
  EXPECT_TRUE(Poll(a_.scq).empty());
  // The slots are reused by new QPs that work normally.
  Connect(QpType::kRc);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 64)), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 3, a_, 0, 32)), Status::kOk);
  Drain();
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 3u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
}

// Transport retries: with retry_cnt = n the head WR is sent n + 1 times,
// one ACK timeout apart, and fails one timeout after the last attempt.
class Retries : public SoftRnicTest {
 protected:
  void ExpectRetryExceeded(RnicQp qp, RnicCq cq, uint8_t timeout,
                           uint8_t retry_cnt) {
    const uint64_t period = soft::AckTimeoutNs(timeout);
    const uint64_t t0 = now_;
    for (int i = 0; i <= retry_cnt; ++i) {
      now_ = t0 + i * period;  // every attempt, none answered
      rnic_.Progress();
    }
    now_ = t0 + (retry_cnt + 1) * period - 1;
    rnic_.Progress();
    EXPECT_TRUE(Poll(cq).empty());
    now_ = t0 + (retry_cnt + 1) * period;
    rnic_.Progress();
    auto c = Poll(cq);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kRetryExcErr);
    EXPECT_EQ(c[0].timestamp_ns, now_);
    EXPECT_EQ(StateOf(qp), QpState::kErr);
  }
};

TEST_F(Retries, DestroyedPeerExhaustsRetries) {
  Conn ca;
  ca.retry_cnt = 2;
  Connect(QpType::kRc, ca);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  ASSERT_EQ(rnic_.DestroyQp(qb_), Status::kOk);  // WR already in flight
  ExpectRetryExceeded(qa_, a_.scq, ca.timeout, 2);
}

TEST_F(Retries, UnregisteredDgidExhaustsRetries) {
  Connect(QpType::kRc);
  ASSERT_EQ(rnic_.RemoveGid(b_.gid), Status::kOk);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 32);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  ExpectRetryExceeded(qa_, a_.scq, 10, 3);
}

TEST_F(Retries, PeerInErrorDoesNotAnswer) {
  Conn ca;
  ca.retry_cnt = 0;
  Connect(QpType::kRc, ca);
  QpAttr attr;
  attr.state = QpState::kErr;
  ASSERT_EQ(rnic_.ModifyQp(qb_, attr, kQpState), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  ExpectRetryExceeded(qa_, a_.scq, ca.timeout, 0);
}

TEST_F(Retries, PeerNotConnectedBackIsUnreachable) {
  // b's QP points at another QP of a: a's messages find no matching peer.
  qa_ = MakeQp(a_, QpType::kRc);
  RnicQp other = MakeQp(a_, QpType::kRc);
  qb_ = MakeQp(b_, QpType::kRc);
  Conn ca;
  ca.retry_cnt = 1;
  BringUp(qa_, QpType::kRc, a_, b_, qb_.qpn, ca);
  BringUp(qb_, QpType::kRc, b_, a_, other.qpn);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 64)), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  ExpectRetryExceeded(qa_, a_.scq, ca.timeout, 1);
  EXPECT_TRUE(Poll(b_.rcq).empty());
}

TEST_F(Timers, PeerReachingRtrDuringRetriesReceives) {
  qa_ = MakeQp(a_, QpType::kRc);
  qb_ = MakeQp(b_, QpType::kRc);
  BringUp(qa_, QpType::kRc, a_, b_, qb_.qpn);
  ASSERT_EQ(ToInit(qb_, QpType::kRc), Status::kOk);
  ASSERT_EQ(PostR(qb_, Rwr(1, b_, 0, 64)), Status::kOk);  // allowed in INIT
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  uint64_t period = soft::AckTimeoutNs(Conn{}.timeout);
  rnic_.Progress();
  now_ += period;
  rnic_.Progress();  // retry 1: still INIT, no answer
  EXPECT_TRUE(Poll(b_.rcq).empty());
  ASSERT_EQ(ToRtr(qb_, QpType::kRc, b_.gid, a_.gid, qa_.qpn), Status::kOk);
  now_ += period;
  rnic_.Progress();  // retry 2: an RTR QP receives
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  ASSERT_EQ(Poll(b_.rcq).size(), 1u);
}

TEST_F(Timers, TimeoutZeroWaitsForever) {
  Conn ca;
  ca.timeout = 0;
  Connect(QpType::kRc, ca);
  ASSERT_EQ(rnic_.DestroyQp(qb_), Status::kOk);
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 1, a_, 0, 32)), Status::kOk);
  rnic_.Progress();
  now_ += uint64_t{1} << 50;
  EXPECT_FALSE(rnic_.Progress());  // an infinite wait is not "busy"
  EXPECT_FALSE(rnic_.NextTimerNs().has_value());
  EXPECT_TRUE(Poll(a_.scq).empty());
  QpAttr attr;
  attr.state = QpState::kErr;
  ASSERT_EQ(rnic_.ModifyQp(qa_, attr, kQpState), Status::kOk);
  auto sc = Poll(a_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kWrFlushErr);
}

TEST_F(Timers, IdleRnicReportsNoWork) {
  Connect(QpType::kRc);
  EXPECT_FALSE(rnic_.Progress());
}

}  // namespace
}  // namespace vrdma::testing
