// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The QP state machine: the pure transition table, attribute value checks,
// IB timer encodings, and the same rules through SoftRnic::ModifyQp and the
// post calls.
#include "backend/soft_rnic/qp_state.h"

#include <gtest/gtest.h>

#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::soft {
namespace {

using S = QpState;
using T = QpType;

constexpr uint32_t kRcInit = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
constexpr uint32_t kUdInit = kQpState | kQpPkeyIndex | kQpPort | kQpQkey;
constexpr uint32_t kRcRtr = kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                            kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
constexpr uint32_t kUcRtr =
    kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
constexpr uint32_t kRcRts = kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                            kQpSqPsn | kQpMaxQpRdAtomic;

struct Case {
  const char* name;
  T type;
  S cur;
  S next;
  uint32_t mask;
  Status want;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Transition : public ::testing::TestWithParam<Case> {};

TEST_P(Transition, MatchesSpec) {
  const Case& c = GetParam();
  EXPECT_EQ(CheckQpTransition(c.type, c.cur, c.next, c.mask), c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, Transition,
    ::testing::Values(
        // The normal bring-up, per service type.
        Case{"RcResetInit", T::kRc, S::kReset, S::kInit, kRcInit, Status::kOk},
        Case{"UcResetInit", T::kUc, S::kReset, S::kInit, kRcInit, Status::kOk},
        Case{"UdResetInit", T::kUd, S::kReset, S::kInit, kUdInit, Status::kOk},
        Case{"RcInitRtr", T::kRc, S::kInit, S::kRtr, kRcRtr, Status::kOk},
        Case{"UcInitRtr", T::kUc, S::kInit, S::kRtr, kUcRtr, Status::kOk},
        Case{"UdInitRtr", T::kUd, S::kInit, S::kRtr, kQpState, Status::kOk},
        Case{"RcRtrRts", T::kRc, S::kRtr, S::kRts, kRcRts, Status::kOk},
        Case{"UcRtrRts", T::kUc, S::kRtr, S::kRts, kQpState | kQpSqPsn,
             Status::kOk},
        Case{"UdRtrRts", T::kUd, S::kRtr, S::kRts, kQpState | kQpSqPsn,
             Status::kOk},
        Case{"RtsSqd", T::kRc, S::kRts, S::kSqd, kQpState, Status::kOk},
        Case{"SqdRts", T::kRc, S::kSqd, S::kRts, kQpState, Status::kOk},
        Case{"UdSqeRts", T::kUd, S::kSqe, S::kRts, kQpState, Status::kOk},
        Case{"UcSqeRts", T::kUc, S::kSqe, S::kRts, kQpState, Status::kOk},
        Case{"RtsRtsMinRnr", T::kRc, S::kRts, S::kRts,
             kQpState | kQpMinRnrTimer, Status::kOk},
        Case{"SqdSqdAv", T::kRc, S::kSqd, S::kSqd, kQpState | kQpAv,
             Status::kOk},
        Case{"InitInitNoState", T::kRc, S::kInit, S::kInit, kQpAccessFlags,
             Status::kOk},
        // Any state to RESET and ERR.
        Case{"RtsErr", T::kRc, S::kRts, S::kErr, kQpState, Status::kOk},
        Case{"ResetErr", T::kUd, S::kReset, S::kErr, kQpState, Status::kOk},
        Case{"ErrReset", T::kRc, S::kErr, S::kReset, kQpState, Status::kOk},
        Case{"SqdReset", T::kUc, S::kSqd, S::kReset, kQpState, Status::kOk},
        Case{"ErrErr", T::kRc, S::kErr, S::kErr, kQpState, Status::kOk},
        // Transitions the spec does not have.
        Case{"ResetRtr", T::kRc, S::kReset, S::kRtr, kRcRtr, Status::kBadState},
        Case{"ResetRts", T::kUd, S::kReset, S::kRts, kQpState,
             Status::kBadState},
        Case{"InitRts", T::kRc, S::kInit, S::kRts, kRcRts, Status::kBadState},
        Case{"RtrInit", T::kRc, S::kRtr, S::kInit, kRcInit, Status::kBadState},
        Case{"RtrRtr", T::kUd, S::kRtr, S::kRtr, kQpState, Status::kBadState},
        Case{"RtsRtr", T::kRc, S::kRts, S::kRtr, kRcRtr, Status::kBadState},
        Case{"RtsInit", T::kRc, S::kRts, S::kInit, kRcInit, Status::kBadState},
        Case{"ErrRts", T::kRc, S::kErr, S::kRts, kQpState, Status::kBadState},
        Case{"ErrInit", T::kUd, S::kErr, S::kInit, kUdInit, Status::kBadState},
        Case{"SqdRtr", T::kRc, S::kSqd, S::kRtr, kQpState, Status::kBadState},
        Case{"RtsSqe", T::kUd, S::kRts, S::kSqe, kQpState, Status::kBadState},
        Case{"RcSqeRts", T::kRc, S::kSqe, S::kRts, kQpState, Status::kBadState},
        Case{"InitSqd", T::kRc, S::kInit, S::kSqd, kQpState, Status::kBadState},
        Case{"ResetReset", T::kRc, S::kReset, S::kReset, kQpState, Status::kOk},
        // Missing required attributes.
        Case{"RcInitNoAccess", T::kRc, S::kReset, S::kInit,
             kRcInit & ~kQpAccessFlags, Status::kInvalid},
        Case{"UdInitNoQkey", T::kUd, S::kReset, S::kInit, kUdInit & ~kQpQkey,
             Status::kInvalid},
        Case{"RcRtrNoMinRnr", T::kRc, S::kInit, S::kRtr,
             kRcRtr & ~kQpMinRnrTimer, Status::kInvalid},
        Case{"RcRtrNoAv", T::kRc, S::kInit, S::kRtr, kRcRtr & ~kQpAv,
             Status::kInvalid},
        Case{"UcRtrNoDest", T::kUc, S::kInit, S::kRtr, kUcRtr & ~kQpDestQpn,
             Status::kInvalid},
        Case{"RcRtsNoTimeout", T::kRc, S::kRtr, S::kRts, kRcRts & ~kQpTimeout,
             Status::kInvalid},
        Case{"UdRtsNoSqPsn", T::kUd, S::kRtr, S::kRts, kQpState,
             Status::kInvalid},
        // Attributes not allowed on a transition.
        Case{"UdInitWithAccess", T::kUd, S::kReset, S::kInit,
             kUdInit | kQpAccessFlags, Status::kInvalid},
        Case{"RcInitWithAv", T::kRc, S::kReset, S::kInit, kRcInit | kQpAv,
             Status::kInvalid},
        Case{"UdRtrWithAv", T::kUd, S::kInit, S::kRtr, kQpState | kQpAv,
             Status::kInvalid},
        Case{"UcRtrWithMinRnr", T::kUc, S::kInit, S::kRtr,
             kUcRtr | kQpMinRnrTimer, Status::kInvalid},
        Case{"UcRtsWithTimeout", T::kUc, S::kRtr, S::kRts,
             kQpState | kQpSqPsn | kQpTimeout, Status::kInvalid},
        Case{"RtsRtsWithDest", T::kRc, S::kRts, S::kRts, kQpState | kQpDestQpn,
             Status::kInvalid},
        Case{"ErrWithAttr", T::kRc, S::kRts, S::kErr, kQpState | kQpQkey,
             Status::kInvalid},
        Case{"UnknownBit", T::kRc, S::kReset, S::kInit, kRcInit | (1u << 30),
             Status::kInvalid}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(QpAttrValues, RangesOfIbEncodings) {
  QpAttr a;
  EXPECT_EQ(CheckQpAttrValues(a, 0xffffffff & ~kQpAv, 4096), Status::kOk);
  struct V {
    uint32_t mask;
    void (*set)(QpAttr&);
  };
  const V bad[] = {
      {kQpPathMtu, [](QpAttr& x) { x.path_mtu_bytes = 3000; }},
      {kQpPathMtu, [](QpAttr& x) { x.path_mtu_bytes = 8192; }},
      {kQpPathMtu, [](QpAttr& x) { x.path_mtu_bytes = 128; }},
      {kQpTimeout, [](QpAttr& x) { x.timeout = 32; }},
      {kQpRetryCnt, [](QpAttr& x) { x.retry_cnt = 8; }},
      {kQpRnrRetry, [](QpAttr& x) { x.rnr_retry = 8; }},
      {kQpMinRnrTimer, [](QpAttr& x) { x.min_rnr_timer = 32; }},
      {kQpDestQpn, [](QpAttr& x) { x.dest_qpn = 1u << 24; }},
      {kQpSqPsn, [](QpAttr& x) { x.sq_psn = 1u << 24; }},
      {kQpRqPsn, [](QpAttr& x) { x.rq_psn = 1u << 24; }},
      {kQpAccessFlags, [](QpAttr& x) { x.access_flags = 0x10; }},
      {kQpMaxQpRdAtomic, [](QpAttr& x) { x.max_rd_atomic = 17; }},
  };
  for (const V& v : bad) {
    QpAttr x;
    v.set(x);
    EXPECT_EQ(CheckQpAttrValues(x, v.mask, 4096), Status::kInvalid) << v.mask;
    // The same value is ignored when its mask bit is not set.
    EXPECT_EQ(CheckQpAttrValues(x, kQpState, 4096), Status::kOk);
  }
  a.path_mtu_bytes = 4096;
  EXPECT_EQ(CheckQpAttrValues(a, kQpPathMtu, 1024), Status::kInvalid);
}

TEST(IbTimers, Encodings) {
  EXPECT_EQ(RnrTimerNs(0), 655'360'000u);
  EXPECT_EQ(RnrTimerNs(1), 10'000u);
  EXPECT_EQ(RnrTimerNs(12), 640'000u);
  EXPECT_EQ(RnrTimerNs(14), 1'280'000u);
  EXPECT_EQ(RnrTimerNs(31), 491'520'000u);
  EXPECT_EQ(AckTimeoutNs(1), 8192u);
  EXPECT_EQ(AckTimeoutNs(14), 4096u << 14);
  EXPECT_EQ(AckTimeoutNs(0), ~uint64_t{0});
}

}  // namespace
}  // namespace vrdma::soft

namespace vrdma::testing {
namespace {

using ModifyQp = SoftRnicTest;

TEST_F(ModifyQp, IllegalTransitionsLeaveStateAlone) {
  RnicQp qp = MakeQp(a_, QpType::kRc);
  QpAttr attr;
  attr.state = QpState::kRts;
  EXPECT_EQ(rnic_.ModifyQp(qp, attr, kQpState), Status::kBadState);
  EXPECT_EQ(StateOf(qp), QpState::kReset);
  ASSERT_EQ(ToInit(qp, QpType::kRc), Status::kOk);
  // Missing min_rnr_timer: rejected, nothing applied.
  attr.state = QpState::kRtr;
  attr.av.sgid = a_.gid;
  attr.av.dgid = b_.gid;
  attr.dest_qpn = 1234;
  EXPECT_EQ(rnic_.ModifyQp(qp, attr,
                           kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                               kQpRqPsn | kQpMaxDestRdAtomic),
            Status::kInvalid);
  EXPECT_EQ(StateOf(qp), QpState::kInit);
  EXPECT_EQ(rnic_.QueryQp(qp)->dest_qpn, 0u);
  // A source GID this port does not have.
  Gid foreign = b_.gid;
  foreign[15] = 0x77;
  EXPECT_EQ(ToRtr(qp, QpType::kRc, foreign, b_.gid, 1234), Status::kInvalid);
  ASSERT_EQ(ToRtr(qp, QpType::kRc, a_.gid, b_.gid, 1234), Status::kOk);
  auto q = rnic_.QueryQp(qp);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->state, QpState::kRtr);
  EXPECT_EQ(q->dest_qpn, 1234u);
  EXPECT_EQ(q->av.dgid, b_.gid);
  EXPECT_EQ(rnic_.ModifyQp(RnicQp{qp.id ^ 1, 0}, attr, kQpState),
            Status::kBadHandle);
}

TEST_F(ModifyQp, PostingDependsOnState) {
  RnicQp qp = MakeQp(a_, QpType::kRc);
  SendWr w = Wr(WrOpcode::kSend, 1, a_, 0, 8);
  RecvWr r = Rwr(1, a_, 0, 8);
  EXPECT_EQ(Post(qp, w), Status::kBadState);   // RESET
  EXPECT_EQ(PostR(qp, r), Status::kBadState);  // RESET
  ASSERT_EQ(ToInit(qp, QpType::kRc), Status::kOk);
  EXPECT_EQ(Post(qp, w), Status::kBadState);  // INIT
  EXPECT_EQ(PostR(qp, r), Status::kOk);       // receives from INIT on
  ASSERT_EQ(ToRtr(qp, QpType::kRc, a_.gid, b_.gid, 1234), Status::kOk);
  EXPECT_EQ(Post(qp, w), Status::kBadState);  // RTR
  ASSERT_EQ(ToRts(qp, QpType::kRc), Status::kOk);
  EXPECT_EQ(Post(qp, w), Status::kOk);
  // Too many SGEs for the QP's caps.
  w.num_sge = 9;
  EXPECT_EQ(Post(qp, w), Status::kInvalid);
  Status st;
  EXPECT_EQ(rnic_.PostSend(RnicQp{0x12345, 0x12345},
                           std::span<const SendWr>(&w, 1), &st),
            0);
  EXPECT_EQ(st, Status::kBadHandle);
}

}  // namespace
}  // namespace vrdma::testing
