// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Memory windows (docs/virtio-rdma.md §4.7, rxe semantics): binding types 1
// and 2 and remote access through them, rebinding, invalidation by
// LOCAL_INV and by a peer's SEND_WITH_INV, every bind check, and the
// control calls (AllocMw, DeallocMw, DeregMr of a bound MR, limits).
// Windows live on b_ (the responder); a_ accesses them over qa_ -> qb_.
#include <cstring>
#include <vector>

#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

constexpr uint32_t kRemoteRw = kAccessRemoteRead | kAccessRemoteWrite;
constexpr uint64_t kWinOff = 4096;  // the window's start in b_'s buffer
constexpr uint64_t kWinLen = 1024;

class MwTest : public SoftRnicTest {
 protected:
  MwTest() = default;
  explicit MwTest(const RnicLimits& l) : SoftRnicTest(l) {}

  void SetUp() override {
    SoftRnicTest::SetUp();
    // b_'s buffer once more, now with windows allowed on it.
    auto mr = rnic_.RegMr(b_.pd, b_.buf.data(), b_.buf.size(), b_.iova,
                          kAllAccess | kAccessMwBind);
    ASSERT_TRUE(mr.ok());
    bind_mr_ = *mr;
    Connect(QpType::kRc);
  }

  RnicMw Alloc(const Vm& vm, uint8_t type) {
    auto mw = rnic_.AllocMw(vm.pd, type);
    EXPECT_TRUE(mw.ok());
    return mw.ok() ? *mw : RnicMw{};
  }

  static SendWr BindWr(uint32_t mw_rkey, uint32_t mr_lkey, uint64_t addr,
                       uint64_t length, uint8_t key, uint32_t access) {
    SendWr wr;
    wr.wr_id = 77;
    wr.opcode = WrOpcode::kBindMw;
    wr.send_flags = kSendSignaled;
    wr.bind = MwBind{mw_rkey, mr_lkey, addr, length, key, access};
    return wr;
  }
  // Binds [kWinOff, +kWinLen) of b_'s bindable MR.
  SendWr BindB(uint32_t mw_rkey, uint8_t key, uint32_t access = kRemoteRw) {
    return BindWr(mw_rkey, bind_mr_.lkey, b_.at(kWinOff), kWinLen, key,
                  access);
  }
  static uint32_t Rekey(uint32_t rkey, uint8_t key) {
    return (rkey & ~0xffu) | key;
  }

  // Posts wr on qp, runs it and returns its one completion on cq.
  Completion Run(RnicQp qp, RnicCq cq, const SendWr& wr) {
    EXPECT_EQ(Post(qp, wr), Status::kOk);
    Drain();
    std::vector<Completion> c = Poll(cq);
    EXPECT_FALSE(c.empty());
    return c.empty() ? Completion{} : c[0];
  }

  // An RDMA WRITE of len bytes of a_'s buffer (from offset 0) to iova addr
  // of b_ under rkey, over qp; its completion status.
  WcStatus Write(RnicQp qp, uint32_t rkey, uint64_t addr, uint32_t len) {
    SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, len);
    w.remote_addr = addr;
    w.rkey = rkey;
    return Run(qp, a_.scq, w).status;
  }
  WcStatus Read(RnicQp qp, uint32_t rkey, uint64_t addr, uint32_t len,
                uint64_t local_off) {
    SendWr w = Wr(WrOpcode::kRdmaRead, 2, a_, local_off, len);
    w.remote_addr = addr;
    w.rkey = rkey;
    return Run(qp, a_.scq, w).status;
  }

  // A fresh qa_/qb_ pair (after an error broke the last one).
  void Reconnect() {
    Connect(QpType::kRc);
    Poll(a_.scq);
    Poll(a_.rcq);
    Poll(b_.scq);
    Poll(b_.rcq);
  }

  RnicMr bind_mr_{};
};

TEST_F(MwTest, Type1BindThenWriteAndReadThroughTheWindow) {
  RnicMw mw = Alloc(b_, 1);
  EXPECT_EQ(mw.id, mw.rkey);
  EXPECT_NE(mw.rkey >> 8, bind_mr_.rkey >> 8);  // not an MR's key
  Completion c = Run(qb_, b_.scq, BindB(mw.rkey, 0x42));
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kBindMw);
  const uint32_t rkey = Rekey(mw.rkey, 0x42);

  std::memset(a_.buf.data(), 0xab, 256);
  EXPECT_EQ(Write(qa_, rkey, b_.at(kWinOff + 100), 256), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b_.buf.data() + kWinOff + 100, a_.buf.data(), 256), 0);

  // READ the whole window back into a_ at offset 8192: the MR's bytes.
  EXPECT_EQ(Read(qa_, rkey, b_.at(kWinOff), kWinLen, 8192),
            WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a_.buf.data() + 8192, b_.buf.data() + kWinOff, kWinLen),
            0);
}

TEST_F(MwTest, AccessOutsideTheWindowFails) {
  RnicMw mw = Alloc(b_, 1);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(mw.rkey, 1)).status, WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mw.rkey, 1);
  struct {
    uint64_t addr;
    uint32_t len;
  } cases[] = {
      {b_.at(kWinOff + kWinLen - 10), 20},  // runs past the end
      {b_.at(kWinOff - 1), 8},              // starts below
      {b_.at(0), 8},                        // in the MR, not the window
  };
  for (const auto& k : cases) {
    EXPECT_EQ(Write(qa_, rkey, k.addr, k.len), WcStatus::kRemAccessErr);
    EXPECT_EQ(StateOf(qa_), QpState::kErr);
    EXPECT_EQ(StateOf(qb_), QpState::kErr);
    Reconnect();
  }
  // The window itself is untouched by failed accesses.
  EXPECT_EQ(Write(qa_, rkey, b_.at(kWinOff), 8), WcStatus::kSuccess);
}

TEST_F(MwTest, AccessNotGrantedFails) {
  RnicMw mw = Alloc(b_, 1);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(mw.rkey, 9, kAccessRemoteRead)).status,
            WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mw.rkey, 9);
  EXPECT_EQ(Read(qa_, rkey, b_.at(kWinOff), 64, 0), WcStatus::kSuccess);
  EXPECT_EQ(Write(qa_, rkey, b_.at(kWinOff), 64), WcStatus::kRemAccessErr);
  Reconnect();
  SendWr fa = Wr(WrOpcode::kAtomicFetchAdd, 3, a_, 0, 8);
  fa.remote_addr = b_.at(kWinOff);
  fa.rkey = rkey;
  fa.compare_add = 1;
  EXPECT_EQ(Run(qa_, a_.scq, fa).status, WcStatus::kRemAccessErr);
}

TEST_F(MwTest, Type1RebindMovesTheWindowAndLengthZeroUnbinds) {
  RnicMw mw = Alloc(b_, 1);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(mw.rkey, 1)).status, WcStatus::kSuccess);
  const uint32_t first = Rekey(mw.rkey, 1);
  // Rebind (by the current rkey) to [16384, +512) under key 2.
  SendWr again = BindWr(first, bind_mr_.lkey, b_.at(16384), 512, 2, kRemoteRw);
  ASSERT_EQ(Run(qb_, b_.scq, again).status, WcStatus::kSuccess);
  const uint32_t second = Rekey(mw.rkey, 2);
  EXPECT_EQ(Write(qa_, second, b_.at(16384), 512), WcStatus::kSuccess);
  EXPECT_EQ(Write(qa_, second, b_.at(kWinOff), 8), WcStatus::kRemAccessErr);
  Reconnect();
  EXPECT_EQ(Write(qa_, first, b_.at(16384), 8), WcStatus::kRemAccessErr);
  Reconnect();
  // Length 0 unbinds; the window stays valid and can be bound again.
  SendWr unbind = BindWr(second, 0, 0, 0, 3, 0);
  ASSERT_EQ(Run(qb_, b_.scq, unbind).status, WcStatus::kSuccess);
  EXPECT_EQ(Write(qa_, Rekey(mw.rkey, 3), b_.at(16384), 8),
            WcStatus::kRemAccessErr);
  Reconnect();
  EXPECT_EQ(rnic_.DeregMr(bind_mr_), Status::kOk);  // nothing bound to it
}

TEST_F(MwTest, Type2IsBoundToItsQpAndLocalInvalidateFreesIt) {
  RnicMw mw = Alloc(b_, 2);
  Completion c = Run(qb_, b_.scq, BindB(mw.rkey, 5));
  ASSERT_EQ(c.status, WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mw.rkey, 5);
  EXPECT_EQ(Write(qa_, rkey, b_.at(kWinOff), 64), WcStatus::kSuccess);

  // Another connection into b_'s PD: the window is not bound to its QP.
  RnicQp qa2 = MakeQp(a_, QpType::kRc);
  RnicQp qb2 = MakeQp(b_, QpType::kRc);
  BringUp(qa2, QpType::kRc, a_, b_, qb2.qpn);
  BringUp(qb2, QpType::kRc, b_, a_, qa2.qpn);
  EXPECT_EQ(Write(qa2, rkey, b_.at(kWinOff), 64), WcStatus::kRemAccessErr);
  EXPECT_EQ(StateOf(qb2), QpState::kErr);
  Poll(b_.rcq);

  EXPECT_EQ(rnic_.DeregMr(bind_mr_), Status::kInvalid);  // bound to it
  SendWr inv;
  inv.wr_id = 9;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = kSendSignaled;
  inv.invalidate_rkey = rkey;
  c = Run(qb_, b_.scq, inv);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kLocalInv);
  EXPECT_EQ(StateOf(qb_), QpState::kRts);
  EXPECT_EQ(Write(qa_, rkey, b_.at(kWinOff), 64), WcStatus::kRemAccessErr);
  Reconnect();

  // Free again: it binds again, on any QP of its PD.
  EXPECT_EQ(Run(qb_, b_.scq, BindB(rkey, 6)).status, WcStatus::kSuccess);
  EXPECT_EQ(Write(qa_, Rekey(mw.rkey, 6), b_.at(kWinOff), 64),
            WcStatus::kSuccess);
}

TEST_F(MwTest, SendWithInvalidateFromThePeerInvalidates) {
  RnicMw mw = Alloc(b_, 2);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(mw.rkey, 7)).status, WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mw.rkey, 7);
  EXPECT_EQ(Write(qa_, rkey, b_.at(kWinOff), 8), WcStatus::kSuccess);

  ASSERT_EQ(PostR(qb_, Rwr(50, b_, 32768, 256)), Status::kOk);
  std::memset(a_.buf.data(), 0x5a, 100);
  SendWr s = Wr(WrOpcode::kSendWithInv, 4, a_, 0, 100);
  s.invalidate_rkey = rkey;
  Completion sc = Run(qa_, a_.scq, s);
  EXPECT_EQ(sc.status, WcStatus::kSuccess);
  EXPECT_EQ(sc.opcode, WcOpcode::kSend);
  std::vector<Completion> rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, 100u);
  EXPECT_TRUE(rc[0].wc_flags & kWcWithInv);
  EXPECT_FALSE(rc[0].wc_flags & kWcWithImm);
  EXPECT_EQ(rc[0].imm_data, rkey);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 32768, a_.buf.data(), 100), 0);

  EXPECT_EQ(Write(qa_, rkey, b_.at(kWinOff), 8), WcStatus::kRemAccessErr);
}

TEST_F(MwTest, SendWithInvalidateOfNoWindowFailsTheReceive) {
  RnicMw t1 = Alloc(b_, 1);  // type 1: never invalidated
  ASSERT_EQ(Run(qb_, b_.scq, BindB(t1.rkey, 1)).status, WcStatus::kSuccess);
  const uint32_t bad[] = {Rekey(t1.rkey, 1), bind_mr_.rkey, 0};
  for (uint32_t rkey : bad) {
    ASSERT_EQ(PostR(qb_, Rwr(60, b_, 32768, 256)), Status::kOk);
    SendWr s = Wr(WrOpcode::kSendWithInv, 4, a_, 0, 16);
    s.invalidate_rkey = rkey;
    // rxe's class J: the data was placed and acknowledged; the receive
    // fails and the receiving QP breaks.
    EXPECT_EQ(Run(qa_, a_.scq, s).status, WcStatus::kSuccess);
    std::vector<Completion> rc = Poll(b_.rcq);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].wr_id, 60u);
    EXPECT_EQ(rc[0].status, WcStatus::kRemInvReqErr);
    EXPECT_EQ(StateOf(qb_), QpState::kErr);
    Reconnect();
  }
}

// Every bind check: kMwBindErr, and the binding QP goes to ERR.
struct BindCase {
  const char* name;
  int which;
};
void PrintTo(const BindCase& c, std::ostream* os) { *os << c.name; }

class MwBindErrors : public MwTest,
                     public ::testing::WithParamInterface<BindCase> {};

TEST_P(MwBindErrors, FailWithMwBindErrAndBreakTheQp) {
  RnicMw t1 = Alloc(b_, 1);
  RnicMw t2 = Alloc(b_, 2);
  SendWr w = BindB(t1.rkey, 1);
  switch (GetParam().which) {
    case 0:  // the key byte is not the window's current one
      w.bind.mw_rkey = Rekey(t1.rkey, static_cast<uint8_t>(t1.rkey + 1));
      break;
    case 1:  // an MR's key is no window
      w.bind.mw_rkey = bind_mr_.rkey;
      break;
    case 2:  // the MR was not registered with MW_BIND
      w.bind.mr_lkey = b_.mr.lkey;
      break;
    case 3: {  // a writable window over an MR without LOCAL_WRITE
      auto ro = rnic_.RegMr(b_.pd, b_.buf.data(), b_.buf.size(), b_.iova,
                            kAccessRemoteRead | kAccessMwBind);
      ASSERT_TRUE(ro.ok());
      w.bind.mr_lkey = ro->lkey;
      break;
    }
    case 4:  // past the MR's end
      w.bind.addr = b_.at(kBufSize - 100);
      w.bind.length = 200;
      break;
    case 5:  // below the MR
      w.bind.addr = b_.iova - 8;
      break;
    case 6:  // a type 2 window is not bound to nothing
      w = BindWr(t2.rkey, bind_mr_.lkey, b_.at(kWinOff), 0, 1, kRemoteRw);
      break;
    case 7:  // a type 2 window binds only while free
      ASSERT_EQ(Run(qb_, b_.scq, BindB(t2.rkey, 1)).status,
                WcStatus::kSuccess);
      w = BindB(Rekey(t2.rkey, 1), 2);
      break;
    case 8:  // zero-based windows are not offered
      w.bind.access = kAccessRemoteRead | kAccessZeroBased;
      break;
    case 9:  // only remote rights
      w.bind.access = kAccessRemoteRead | kAccessLocalWrite;
      break;
    case 10:  // a type 2 window binds on a QP of its own PD only
      w = BindB(t2.rkey, 1);
      {
        Completion c = Run(qa_, a_.scq, w);
        EXPECT_EQ(c.status, WcStatus::kMwBindErr);
        EXPECT_EQ(c.opcode, WcOpcode::kBindMw);
        EXPECT_EQ(StateOf(qa_), QpState::kErr);
      }
      return;
    case 11:  // the MR's key is stale
      w.bind.mr_lkey = Rekey(bind_mr_.lkey, static_cast<uint8_t>(bind_mr_.lkey + 1));
      break;
  }
  Completion c = Run(qb_, b_.scq, w);
  EXPECT_EQ(c.status, WcStatus::kMwBindErr);
  EXPECT_EQ(c.opcode, WcOpcode::kBindMw);
  EXPECT_EQ(c.wr_id, 77u);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
}

INSTANTIATE_TEST_SUITE_P(
    All, MwBindErrors,
    ::testing::Values(BindCase{"WrongMwRkey", 0}, BindCase{"MrKeyAsMwKey", 1},
                      BindCase{"MrWithoutMwBind", 2},
                      BindCase{"WriteOnMrWithoutLocalWrite", 3},
                      BindCase{"PastMrEnd", 4}, BindCase{"BelowMr", 5},
                      BindCase{"Type2LengthZero", 6},
                      BindCase{"Type2NotFree", 7}, BindCase{"ZeroBased", 8},
                      BindCase{"LocalRight", 9},
                      BindCase{"Type2OtherPdQp", 10},
                      BindCase{"StaleMrKey", 11}),
    [](const ::testing::TestParamInfo<BindCase>& i) { return i.param.name; });

TEST_F(MwTest, LocalInvalidateOfAType1WindowFails) {
  RnicMw t1 = Alloc(b_, 1);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(t1.rkey, 1)).status, WcStatus::kSuccess);
  SendWr inv;
  inv.opcode = WrOpcode::kLocalInv;
  inv.wr_id = 8;
  inv.invalidate_rkey = Rekey(t1.rkey, 1);
  // Unsignaled: errors complete anyway.
  Completion c = Run(qb_, b_.scq, inv);
  EXPECT_EQ(c.status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(c.opcode, WcOpcode::kLocalInv);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  Reconnect();
  // Nor a free type 2 window, nor a key that is none.
  RnicMw t2 = Alloc(b_, 2);
  for (uint32_t rkey : {t2.rkey, bind_mr_.rkey}) {
    inv.invalidate_rkey = rkey;
    EXPECT_EQ(Run(qb_, b_.scq, inv).status, WcStatus::kLocQpOpErr);
    Reconnect();
  }
  // The type 1 window still works.
  EXPECT_EQ(Write(qa_, Rekey(t1.rkey, 1), b_.at(kWinOff), 8),
            WcStatus::kSuccess);
}

TEST_F(MwTest, WindowOpsArePostedOnConnectedQpsOnlyAndMoveNoBytes) {
  RnicMw t1 = Alloc(b_, 1);
  RnicQp ud = MakeQp(b_, QpType::kUd);
  BringUp(ud, QpType::kUd, b_, b_, 0);
  Status st = Status::kOk;
  SendWr w = BindB(t1.rkey, 1);
  EXPECT_EQ(rnic_.PostSend(ud, std::span<const SendWr>(&w, 1), &st), 0);
  EXPECT_EQ(st, Status::kInvalid);
  w.num_sge = 1;  // a bind carries no SGE
  w.sge[0] = Sge{b_.at(0), 8, b_.mr.lkey};
  EXPECT_EQ(Post(qb_, w), Status::kInvalid);
}

TEST_F(MwTest, DeregMrWithBoundWindowsIsInvalidUntilDeallocUnbinds) {
  RnicMw t1 = Alloc(b_, 1);
  RnicMw t2 = Alloc(b_, 2);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(t1.rkey, 1)).status, WcStatus::kSuccess);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(t2.rkey, 1)).status, WcStatus::kSuccess);
  EXPECT_EQ(rnic_.DeregMr(bind_mr_), Status::kInvalid);
  EXPECT_EQ(rnic_.DeallocMw(t1), Status::kOk);
  EXPECT_EQ(rnic_.DeregMr(bind_mr_), Status::kInvalid);  // t2 still bound
  EXPECT_EQ(rnic_.DeallocMw(t2), Status::kOk);
  EXPECT_EQ(rnic_.DeregMr(bind_mr_), Status::kOk);
}

TEST_F(MwTest, DeallocMw) {
  const uint32_t before = rnic_.ObjectCounts().mws;
  RnicMw t1 = Alloc(b_, 1);
  EXPECT_EQ(rnic_.ObjectCounts().mws, before + 1);
  ASSERT_EQ(Run(qb_, b_.scq, BindB(t1.rkey, 4)).status, WcStatus::kSuccess);
  EXPECT_EQ(rnic_.AllocMw(b_.pd, 3).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.AllocMw(RnicPd{12345}, 1).status(), Status::kBadHandle);
  // The window holds its PD.
  auto pd = rnic_.AllocPd();
  ASSERT_TRUE(pd.ok());
  auto held = rnic_.AllocMw(*pd, 2);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(rnic_.DeallocPd(*pd), Status::kBusy);
  EXPECT_EQ(rnic_.DeallocMw(*held), Status::kOk);
  EXPECT_EQ(rnic_.DeallocPd(*pd), Status::kOk);

  EXPECT_EQ(rnic_.DeallocMw(t1), Status::kOk);
  EXPECT_EQ(rnic_.DeallocMw(t1), Status::kBadHandle);
  EXPECT_EQ(rnic_.ObjectCounts().mws, before);
  // Its rkey names nothing now.
  EXPECT_EQ(Write(qa_, Rekey(t1.rkey, 4), b_.at(kWinOff), 8),
            WcStatus::kRemAccessErr);
}

TEST_F(MwTest, WindowOfAnotherPdIsNotUsable) {
  Vm c;
  MakeVm(&c, 3);
  auto cmr = rnic_.RegMr(c.pd, c.buf.data(), c.buf.size(), c.iova,
                         kAllAccess | kAccessMwBind);
  ASSERT_TRUE(cmr.ok());
  RnicMw mw = Alloc(c, 1);
  // rxe checks no PD on a type 1 bind (the engine makes sure both are the
  // VM's): bound here through qb_, used through qb_ it is another PD's.
  SendWr w = BindWr(mw.rkey, cmr->lkey, c.at(0), 4096, 1, kRemoteRw);
  ASSERT_EQ(Run(qb_, b_.scq, w).status, WcStatus::kSuccess);
  EXPECT_EQ(Write(qa_, Rekey(mw.rkey, 1), c.at(0), 8),
            WcStatus::kRemAccessErr);
}

class MwLimitTest : public MwTest {
 protected:
  static RnicLimits Two() {
    RnicLimits l = DefaultSoftRnicLimits();
    l.max_mw = 2;
    return l;
  }
  MwLimitTest() : MwTest(Two()) {}
};

TEST_F(MwLimitTest, MaxMwExhausted) {
  RnicMw first = Alloc(b_, 1);
  Alloc(b_, 2);
  EXPECT_EQ(rnic_.AllocMw(b_.pd, 1).status(), Status::kNoResource);
  EXPECT_EQ(rnic_.DeallocMw(first), Status::kOk);
  EXPECT_TRUE(rnic_.AllocMw(b_.pd, 1).ok());
}

class NoMwTest : public SoftRnicTest {
 protected:
  static RnicLimits None() {
    RnicLimits l = DefaultSoftRnicLimits();
    l.max_mw = 0;
    // SEND_WITH_INV and LOCAL_INV also serve fast-registration MRs: an
    // RNIC with neither refuses them.
    l.max_fr_mr = 0;
    return l;
  }
  NoMwTest() : SoftRnicTest(None()) {}
};

TEST_F(NoMwTest, WithoutWindowsAllocAndOpcodesAreRefused) {
  EXPECT_EQ(rnic_.AllocMw(a_.pd, 1).status(), Status::kUnsupported);
  Connect(QpType::kRc);
  SendWr s = Wr(WrOpcode::kSendWithInv, 1, a_, 0, 8);
  EXPECT_EQ(Post(qa_, s), Status::kInvalid);
}

}  // namespace
}  // namespace vrdma::testing
