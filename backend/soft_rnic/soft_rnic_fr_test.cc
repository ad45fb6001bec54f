// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Fast-registration MRs (docs/virtio-rdma.md §4.8, rxe semantics): AllocFrMr
// and its limits, kRegMr and every check it makes, access through a
// registered MR as an lkey (SEND source, receive buffer, READ destination)
// and as an rkey (WRITE, READ, atomics; loopback and over a fabric) with
// its bytes scattered over pages that are deliberately out of order in the
// backing MR, the key byte, invalidation by LOCAL_INV and SEND_WITH_INV,
// DeregMr, and the index space shared with windows.
#include <array>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "backend/soft_rnic/net/soft_rnic_net_test_util.h"
#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kRw = kAccessLocalWrite | kAccessRemoteRead |
                         kAccessRemoteWrite;
constexpr uint32_t kFrAll = kAllAccess;

// Where an FR MR's bytes are: its iova (not page aligned: the first page
// starts mid-way) and, for page i of the registration, the page of the
// backing buffer that holds it.
struct Layout {
  uint64_t iova = 0;
  uint64_t length = 0;
  std::array<uint32_t, 4> order;  // backing page of each registered page
  // Offset in the backing buffer of byte `off` of the registration.
  constexpr uint64_t Backing(uint64_t off) const {
    const uint64_t rel = (iova % kPage) + off;
    return uint64_t{order[rel / kPage]} * kPage + rel % kPage;
  }
};

// b_'s registration: 3 pages' worth from 0x800 into its first page, so 4
// pages, none adjacent or in order in b_'s buffer.
constexpr Layout kB{0x7000'0000'0800ull, 3 * kPage, {5, 2, 9, 7}};
// a_'s: another offset and order.
constexpr Layout kA{0x6000'0000'0300ull, 3 * kPage, {11, 3, 8, 1}};

void Randomize(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

class FrTest : public SoftRnicTest {
 protected:
  FrTest() = default;
  explicit FrTest(const RnicLimits& l) : SoftRnicTest(l) {}

  void SetUp() override {
    SoftRnicTest::SetUp();
    Connect(QpType::kRc);
    Randomize(a_.buf.data(), a_.buf.size(), 1);
    Randomize(b_.buf.data(), b_.buf.size(), 2);
  }

  RnicMr Alloc(const Vm& vm, uint32_t max_pages = 16) {
    auto mr = rnic_.AllocFrMr(vm.pd, max_pages);
    EXPECT_TRUE(mr.ok());
    return mr.ok() ? *mr : RnicMr{};
  }

  // The page list of layout l over vm's buffer (kept until the next call
  // for the same side: the RNIC copies it when the kRegMr runs).
  std::vector<FrPage>& Pages(const Vm& vm, const Layout& l) {
    std::vector<FrPage>& p = &vm == &a_ ? pages_a_ : pages_b_;
    p.clear();
    for (uint32_t page : l.order) {
      p.push_back(FrPage{vm.mr.lkey, vm.at(uint64_t{page} * kPage)});
    }
    return p;
  }

  static SendWr RegWr(uint32_t lkey, uint8_t key, const Layout& l,
                      uint32_t access, const std::vector<FrPage>& pages) {
    SendWr wr;
    wr.wr_id = 99;
    wr.opcode = WrOpcode::kRegMr;
    wr.send_flags = kSendSignaled;
    wr.reg.mr_lkey = lkey;
    wr.reg.key = key;
    wr.reg.iova = l.iova;
    wr.reg.length = l.length;
    wr.reg.access = access;
    wr.reg.pages = pages.data();
    wr.reg.num_pages = static_cast<uint32_t>(pages.size());
    return wr;
  }
  static uint32_t Rekey(uint32_t key, uint8_t byte) {
    return (key & ~0xffu) | byte;
  }

  // Posts wr on qp, runs it and returns its one completion on cq.
  Completion Run(RnicQp qp, RnicCq cq, const SendWr& wr) {
    EXPECT_EQ(Post(qp, wr), Status::kOk);
    Drain();
    std::vector<Completion> c = Poll(cq);
    EXPECT_EQ(c.size(), 1u);
    return c.empty() ? Completion{} : c[0];
  }

  // Registers b_'s MR whose current lkey is lkey (layout kB over b_'s
  // buffer) on qb_ with key byte key.
  WcStatus RegB(uint32_t lkey, uint8_t key, uint32_t access = kFrAll) {
    return Run(qb_, b_.scq, RegWr(lkey, key, kB, access, Pages(b_, kB)))
        .status;
  }

  // A WRITE of len bytes of a_'s buffer from src_off to remote iova addr
  // under rkey, on qa_.
  WcStatus Write(uint32_t rkey, uint64_t addr, uint32_t len,
                 uint64_t src_off = 0) {
    SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, src_off, len);
    w.remote_addr = addr;
    w.rkey = rkey;
    return Run(qa_, a_.scq, w).status;
  }
  WcStatus Read(uint32_t rkey, uint64_t addr, uint32_t len, uint64_t dst_off) {
    SendWr w = Wr(WrOpcode::kRdmaRead, 2, a_, dst_off, len);
    w.remote_addr = addr;
    w.rkey = rkey;
    return Run(qa_, a_.scq, w).status;
  }
  SendWr LocalInv(uint32_t rkey) {
    SendWr w;
    w.wr_id = 5;
    w.opcode = WrOpcode::kLocalInv;
    w.send_flags = kSendSignaled;
    w.invalidate_rkey = rkey;
    return w;
  }

  // A fresh qa_/qb_ pair (after an error broke the last one).
  void Reconnect() {
    Connect(QpType::kRc);
    Poll(a_.scq);
    Poll(a_.rcq);
    Poll(b_.scq);
    Poll(b_.rcq);
  }

  std::vector<FrPage> pages_a_, pages_b_;
};

TEST_F(FrTest, AllocChecksItsArgumentsAndLimits) {
  EXPECT_EQ(rnic_.limits().max_fr_mr, 4096u);
  EXPECT_EQ(rnic_.limits().max_fr_pages, 512u);
  EXPECT_EQ(rnic_.AllocFrMr(b_.pd, 0).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.AllocFrMr(b_.pd, 513).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.AllocFrMr(RnicPd{12345}, 1).status(), Status::kBadHandle);
  auto mr = rnic_.AllocFrMr(b_.pd, 512);
  ASSERT_TRUE(mr.ok());
  EXPECT_EQ(mr->lkey, mr->rkey);
  EXPECT_EQ(mr->id, mr->lkey);
  EXPECT_EQ(rnic_.ObjectCounts().fr_mrs, 1u);
  EXPECT_EQ(rnic_.DeallocPd(b_.pd), Status::kBusy);  // the MR holds it
  EXPECT_EQ(rnic_.DeregMr(*mr), Status::kOk);
  EXPECT_EQ(rnic_.ObjectCounts().fr_mrs, 0u);
  EXPECT_EQ(rnic_.DeregMr(*mr), Status::kBadHandle);

  // Beyond max_fr_mr.
  RnicLimits l = DefaultSoftRnicLimits();
  l.max_fr_mr = 2;
  SoftRnic small(l);
  RnicPd pd = *small.AllocPd();
  ASSERT_TRUE(small.AllocFrMr(pd, 1).ok());
  auto second = small.AllocFrMr(pd, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(small.AllocFrMr(pd, 1).status(), Status::kNoResource);
  EXPECT_EQ(small.DeregMr(*second), Status::kOk);
  EXPECT_TRUE(small.AllocFrMr(pd, 1).ok());

  // None at all: kUnsupported, and kRegMr is refused at post time.
  l.max_fr_mr = 0;
  SoftRnic none(l);
  EXPECT_EQ(none.limits().max_fr_pages, 0u);
  RnicPd npd = *none.AllocPd();
  EXPECT_EQ(none.AllocFrMr(npd, 1).status(), Status::kUnsupported);
}

TEST_F(FrTest, RegMrIsRefusedAtPostWithoutFastRegistrationAndOnUd) {
  RnicLimits l = DefaultSoftRnicLimits();
  l.max_fr_mr = 0;
  l.max_mw = 0;
  SoftRnic none(l);
  RnicPd pd = *none.AllocPd();
  RnicCq cq = *none.CreateCq(16);
  QpInit init;
  init.type = QpType::kRc;
  init.pd = pd;
  init.send_cq = init.recv_cq = cq;
  init.caps = QpCaps{16, 16, 1, 1, 0};
  RnicQp qp = *none.CreateQp(init);
  QpAttr a;
  a.state = QpState::kErr;
  ASSERT_EQ(none.ModifyQp(qp, a, kQpState), Status::kOk);
  SendWr reg;
  reg.opcode = WrOpcode::kRegMr;
  Status st = Status::kOk;
  // ERR takes posts (to flush them): the opcode is checked first.
  EXPECT_EQ(none.PostSend(qp, std::span(&reg, 1), &st), 0);
  EXPECT_EQ(st, Status::kInvalid);
  SendWr inv = LocalInv(0x1234);
  EXPECT_EQ(none.PostSend(qp, std::span(&inv, 1), &st), 0);
  EXPECT_EQ(st, Status::kInvalid);

  // Here: kRegMr on a UD QP, or with SGEs, is refused too.
  RnicQp ud = MakeQp(b_, QpType::kUd);
  BringUp(ud, QpType::kUd, b_, b_, 0);
  RnicMr mr = Alloc(b_);
  SendWr w = RegWr(mr.lkey, 1, kB, kFrAll, Pages(b_, kB));
  EXPECT_EQ(Post(ud, w), Status::kInvalid);
  w.num_sge = 1;
  w.sge[0] = Sge{b_.at(0), 8, b_.mr.lkey};
  EXPECT_EQ(Post(qb_, w), Status::kInvalid);
}

TEST_F(FrTest, RemoteWriteReadAndAtomicsGoThroughScatteredPages) {
  RnicMr mr = Alloc(b_);
  Completion c =
      Run(qb_, b_.scq, RegWr(mr.lkey, 0x42, kB, kFrAll, Pages(b_, kB)));
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kRegMr);
  EXPECT_EQ(c.wr_id, 99u);
  const uint32_t rkey = Rekey(mr.rkey, 0x42);

  // A WRITE across all four pages (from byte 50 to 100 before the end).
  const std::vector<uint8_t> before = b_.buf;
  const uint32_t len = static_cast<uint32_t>(kB.length - 150);
  ASSERT_EQ(Write(rkey, kB.iova + 50, len), WcStatus::kSuccess);
  std::vector<uint8_t> want = before;
  for (uint64_t j = 0; j < len; ++j) want[kB.Backing(50 + j)] = a_.buf[j];
  EXPECT_TRUE(b_.buf == want) << "every byte where its page puts it, no other";

  // A READ of the whole registration back into a_ at 32 KiB.
  ASSERT_EQ(Read(rkey, kB.iova, static_cast<uint32_t>(kB.length), 32768),
            WcStatus::kSuccess);
  for (uint64_t j = 0; j < kB.length; ++j) {
    ASSERT_EQ(a_.buf[32768 + j], b_.buf[kB.Backing(j)]) << j;
  }

  // Atomics on an aligned word in the third page.
  const uint64_t off = 2 * kPage + 64;  // registration offset
  const uint64_t target = kB.Backing(off);
  uint64_t v = 1000;
  std::memcpy(&b_.buf[target], &v, 8);
  SendWr fa = Wr(WrOpcode::kAtomicFetchAdd, 3, a_, 0, 8);
  fa.remote_addr = kB.iova + off;
  fa.rkey = rkey;
  fa.compare_add = 5;
  ASSERT_EQ(Run(qa_, a_.scq, fa).status, WcStatus::kSuccess);
  uint64_t got = 0;
  std::memcpy(&got, &a_.buf[0], 8);
  EXPECT_EQ(got, 1000u);
  std::memcpy(&v, &b_.buf[target], 8);
  EXPECT_EQ(v, 1005u);
  SendWr cs = Wr(WrOpcode::kAtomicCmpSwp, 4, a_, 8, 8);
  cs.remote_addr = kB.iova + off;
  cs.rkey = rkey;
  cs.compare_add = 1005;
  cs.swap = 77;
  ASSERT_EQ(Run(qa_, a_.scq, cs).status, WcStatus::kSuccess);
  std::memcpy(&v, &b_.buf[target], 8);
  EXPECT_EQ(v, 77u);

  // Outside [iova, iova + length): the rkey's remote access error.
  EXPECT_EQ(Write(rkey, kB.iova + kB.length - 4, 8), WcStatus::kRemAccessErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
}

TEST_F(FrTest, SendFromReceiveIntoAndReadIntoFrMrs) {
  RnicMr ma = Alloc(a_);
  RnicMr mb = Alloc(b_);
  ASSERT_EQ(
      Run(qa_, a_.scq, RegWr(ma.lkey, 7, kA, kRw, Pages(a_, kA))).status,
      WcStatus::kSuccess);
  ASSERT_EQ(RegB(mb.lkey, 8, kRw), WcStatus::kSuccess);
  const uint32_t ka = Rekey(ma.lkey, 7), kb = Rekey(mb.lkey, 8);

  // SEND 9000 bytes from a_'s registration (offset 0x300) into b_'s
  // (offset 0x10): both sides cross pages at different places.
  const uint32_t len = 9000;
  RecvWr r;
  r.wr_id = 11;
  r.num_sge = 1;
  r.sge[0] = Sge{kB.iova + 0x10, len, kb};
  ASSERT_EQ(PostR(qb_, r), Status::kOk);
  SendWr s;
  s.wr_id = 12;
  s.opcode = WrOpcode::kSend;
  s.send_flags = kSendSignaled;
  s.num_sge = 1;
  s.sge[0] = Sge{kA.iova + 0x300, len, ka};
  ASSERT_EQ(Run(qa_, a_.scq, s).status, WcStatus::kSuccess);
  std::vector<Completion> rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, len);
  for (uint64_t j = 0; j < len; ++j) {
    ASSERT_EQ(b_.buf[kB.Backing(0x10 + j)], a_.buf[kA.Backing(0x300 + j)]) << j;
  }

  // A READ of b_'s ordinary MR into a_'s registration (a local write).
  SendWr rd;
  rd.wr_id = 13;
  rd.opcode = WrOpcode::kRdmaRead;
  rd.send_flags = kSendSignaled;
  rd.num_sge = 1;
  rd.sge[0] = Sge{kA.iova + 100, 10000, ka};
  rd.remote_addr = b_.at(40000);
  rd.rkey = b_.mr.rkey;
  ASSERT_EQ(Run(qa_, a_.scq, rd).status, WcStatus::kSuccess);
  for (uint64_t j = 0; j < 10000; ++j) {
    ASSERT_EQ(a_.buf[kA.Backing(100 + j)], b_.buf[40000 + j]) << j;
  }

  // Past the registration's end as an lkey: kLocProtErr.
  s.sge[0] = Sge{kA.iova + kA.length - 8, 16, ka};
  EXPECT_EQ(Run(qa_, a_.scq, s).status, WcStatus::kLocProtErr);
}

TEST_F(FrTest, LocalWriteNeedsTheRightAndAReceiveIntoAReadOnlyMrFails) {
  RnicMr mb = Alloc(b_);
  ASSERT_EQ(RegB(mb.lkey, 1, kAccessRemoteRead), WcStatus::kSuccess);
  RecvWr r;
  r.wr_id = 21;
  r.num_sge = 1;
  r.sge[0] = Sge{kB.iova, 64, Rekey(mb.lkey, 1)};
  ASSERT_EQ(PostR(qb_, r), Status::kOk);
  SendWr s = Wr(WrOpcode::kSend, 22, a_, 0, 64);
  EXPECT_EQ(Run(qa_, a_.scq, s).status, WcStatus::kRemOpErr);
  std::vector<Completion> rc = Poll(b_.rcq);
  ASSERT_FALSE(rc.empty());
  EXPECT_EQ(rc[0].status, WcStatus::kLocProtErr);
}

TEST_F(FrTest, ANewKeyByteRetiresTheOldKey) {
  RnicMr mr = Alloc(b_);
  ASSERT_EQ(RegB(mr.lkey, 0x11), WcStatus::kSuccess);
  const uint32_t k1 = Rekey(mr.rkey, 0x11), k2 = Rekey(mr.rkey, 0x22);
  EXPECT_EQ(Write(k1, kB.iova, 64), WcStatus::kSuccess);
  ASSERT_EQ(Run(qb_, b_.scq, LocalInv(k1)).status, WcStatus::kSuccess);
  // The registration names the MR by its current lkey (key byte 0x11).
  ASSERT_EQ(Run(qb_, b_.scq, RegWr(k1, 0x22, kB, kFrAll, Pages(b_, kB)))
                .status,
            WcStatus::kSuccess);
  EXPECT_EQ(Write(k2, kB.iova, 64), WcStatus::kSuccess);
  EXPECT_EQ(Write(k1, kB.iova, 64), WcStatus::kRemAccessErr);
  Reconnect();
  // A kRegMr naming the old lkey is refused (and the MR is valid anyway).
  Completion c = Run(qb_, b_.scq, RegWr(k1, 0x33, kB, kFrAll, Pages(b_, kB)));
  EXPECT_EQ(c.status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
}

TEST_F(FrTest, RegMrOfAValidMrFailsAndBreaksTheQp) {
  RnicMr mr = Alloc(b_);
  ASSERT_EQ(RegB(mr.lkey, 1), WcStatus::kSuccess);
  Completion c =
      Run(qb_, b_.scq, RegWr(Rekey(mr.lkey, 1), 2, kB, kFrAll, Pages(b_, kB)));
  EXPECT_EQ(c.status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(c.opcode, WcOpcode::kRegMr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
}

TEST_F(FrTest, RegMrOfAnotherPdsMrFails) {
  RnicMr mr = Alloc(a_);  // a_'s PD, registered on b_'s QP
  EXPECT_EQ(RegB(mr.lkey, 1), WcStatus::kLocQpOpErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  Reconnect();
  // An ordinary MR's key is no fast-registration MR.
  EXPECT_EQ(Run(qb_, b_.scq, RegWr(b_.mr.lkey, 1, kB, kFrAll, Pages(b_, kB)))
                .status,
            WcStatus::kLocQpOpErr);
}

TEST_F(FrTest, PageCountsOutOfLineAreLocLenErr) {
  {
    RnicMr mr = Alloc(b_);
    std::vector<FrPage>& pages = Pages(b_, kB);
    pages.pop_back();  // 3 pages for a range that needs 4
    EXPECT_EQ(Run(qb_, b_.scq, RegWr(mr.lkey, 1, kB, kFrAll, pages)).status,
              WcStatus::kLocLenErr);
    EXPECT_EQ(StateOf(qb_), QpState::kErr);
    Reconnect();
    Pages(b_, kB);
    const FrPage first = pages[0];
    pages.push_back(first);  // 5 for 4
    EXPECT_EQ(Run(qb_, b_.scq, RegWr(mr.lkey, 1, kB, kFrAll, pages)).status,
              WcStatus::kLocLenErr);
    Reconnect();
  }
  // Consistent, but above the MR's max_pages.
  RnicMr small = Alloc(b_, 3);
  EXPECT_EQ(RegB(small.lkey, 1), WcStatus::kLocLenErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  Reconnect();
  // Exactly max_pages is fine.
  RnicMr four = Alloc(b_, 4);
  EXPECT_EQ(RegB(four.lkey, 1), WcStatus::kSuccess);
}

TEST_F(FrTest, BadAccessBitsAreLocQpOpErr) {
  RnicMr mr = Alloc(b_);
  const uint32_t bad[] = {
      kAllAccess | kAccessMwBind,                   // windows: not on these
      kAccessRemoteWrite,                           // without local write
      kAccessRemoteAtomic | kAccessRemoteRead,      // the same
      kAllAccess | kAccessZeroBased,                // unknown here
  };
  for (uint32_t access : bad) {
    EXPECT_EQ(RegB(mr.lkey, 1, access), WcStatus::kLocQpOpErr) << access;
    EXPECT_EQ(StateOf(qb_), QpState::kErr);
    Reconnect();
  }
  // Still invalid: a good registration takes.
  EXPECT_EQ(RegB(mr.lkey, 1, kAccessRemoteRead), WcStatus::kSuccess);
  // And grants only what it says: no remote write.
  EXPECT_EQ(Write(Rekey(mr.rkey, 1), kB.iova, 8), WcStatus::kRemAccessErr);
}

TEST_F(FrTest, ADeregisteredBackingMrFailsTheAccessNotTheRegistration) {
  // Pages over a second MR of b_'s buffer, which goes before the kRegMr.
  auto backing = rnic_.RegMr(b_.pd, b_.buf.data(), b_.buf.size(), b_.iova,
                             kAccessLocalWrite);
  ASSERT_TRUE(backing.ok());
  RnicMr mr = Alloc(b_);
  std::vector<FrPage>& pages = Pages(b_, kB);
  pages[2].lkey = backing->lkey;  // the third page only
  ASSERT_EQ(rnic_.DeregMr(*backing), Status::kOk);
  ASSERT_EQ(Run(qb_, b_.scq, RegWr(mr.lkey, 1, kB, kFrAll, pages)).status,
            WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mr.rkey, 1);
  // The first two pages resolve; a WRITE reaching the third does not, and
  // no byte of it lands.
  EXPECT_EQ(Write(rkey, kB.iova, static_cast<uint32_t>(kPage)),
            WcStatus::kSuccess);
  const std::vector<uint8_t> before = b_.buf;
  EXPECT_EQ(Write(rkey, kB.iova + kPage, static_cast<uint32_t>(kPage), 8192),
            WcStatus::kRemAccessErr);
  EXPECT_TRUE(b_.buf == before);
  Reconnect();
  // As an lkey: kLocProtErr.
  SendWr s = Wr(WrOpcode::kSend, 1, b_, 0, 0);
  s.sge[0] = Sge{kB.iova + 2 * kPage, 16, rkey};
  s.num_sge = 1;
  EXPECT_EQ(Run(qb_, b_.scq, s).status, WcStatus::kLocProtErr);
  Reconnect();
  // A page of another PD's MR, or one its MR does not hold whole, fails too.
  RnicMr other = Alloc(b_);
  Pages(b_, kB);
  pages[0].lkey = a_.mr.lkey;
  pages[0].addr = a_.at(0);
  pages[3].addr = b_.at(b_.buf.size() - 2048);  // the last 2 KiB only
  ASSERT_EQ(Run(qb_, b_.scq, RegWr(other.lkey, 2, kB, kFrAll, pages)).status,
            WcStatus::kSuccess);
  const uint32_t ok = Rekey(other.rkey, 2);
  EXPECT_EQ(Write(ok, kB.iova + kB.length - 100, 8), WcStatus::kRemAccessErr);
  Reconnect();
  EXPECT_EQ(Write(ok, kB.iova, 8), WcStatus::kRemAccessErr);
  Reconnect();
  EXPECT_EQ(Write(ok, kB.iova + kPage, 8), WcStatus::kSuccess);
}

TEST_F(FrTest, LocalInvalidateEndsRemoteAccess) {
  RnicMr mr = Alloc(b_);
  ASSERT_EQ(RegB(mr.lkey, 3), WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mr.rkey, 3);
  EXPECT_EQ(Write(rkey, kB.iova, 32), WcStatus::kSuccess);
  Completion c = Run(qb_, b_.scq, LocalInv(rkey));
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kLocalInv);
  EXPECT_EQ(Write(rkey, kB.iova, 32), WcStatus::kRemAccessErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  Reconnect();
  // It is invalid: a second LOCAL_INV succeeds as on rxe (rxe_invalidate_mr
  // takes any MR whose key matches) and leaves it invalid; a stale key byte
  // fails and breaks the QP.
  EXPECT_EQ(Run(qb_, b_.scq, LocalInv(rkey)).status, WcStatus::kSuccess);
  EXPECT_EQ(Write(rkey, kB.iova, 32), WcStatus::kRemAccessErr);
  Reconnect();
  EXPECT_EQ(Run(qb_, b_.scq, LocalInv(Rekey(mr.rkey, 2))).status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  Reconnect();
  // And another PD's QP cannot invalidate it.
  ASSERT_EQ(RegB(rkey, 4), WcStatus::kSuccess);
  EXPECT_EQ(Run(qa_, a_.scq, LocalInv(Rekey(mr.rkey, 4))).status,
            WcStatus::kLocQpOpErr);
  EXPECT_EQ(StateOf(qa_), QpState::kErr);
  Reconnect();
  EXPECT_EQ(Write(Rekey(mr.rkey, 4), kB.iova, 32), WcStatus::kSuccess);
}

TEST_F(FrTest, SendWithInvalidateInvalidatesTheReceiversFrMr) {
  RnicMr mr = Alloc(b_);
  ASSERT_EQ(RegB(mr.lkey, 9), WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mr.rkey, 9);
  ASSERT_EQ(PostR(qb_, Rwr(31, b_, 0, 64)), Status::kOk);
  SendWr s = Wr(WrOpcode::kSendWithInv, 32, a_, 0, 64);
  s.invalidate_rkey = rkey;
  EXPECT_EQ(Run(qa_, a_.scq, s).status, WcStatus::kSuccess);
  std::vector<Completion> rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].wc_flags & kWcWithInv, uint32_t{kWcWithInv});
  EXPECT_EQ(rc[0].imm_data, rkey);
  EXPECT_EQ(Write(rkey, kB.iova, 32), WcStatus::kRemAccessErr);
  Reconnect();
  // Invalid now: it can be registered again.
  EXPECT_EQ(Run(qb_, b_.scq, RegWr(rkey, 10, kB, kFrAll, Pages(b_, kB)))
                .status,
            WcStatus::kSuccess);
}

TEST_F(FrTest, SendWithInvalidateOfAnotherPdsFrMrIsRemInvReqErr) {
  // a_'s MR, valid; a_ asks b_ to invalidate it (b_'s PD is another).
  RnicMr mr = Alloc(a_);
  ASSERT_EQ(
      Run(qa_, a_.scq, RegWr(mr.lkey, 5, kA, kFrAll, Pages(a_, kA))).status,
      WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mr.rkey, 5);
  ASSERT_EQ(PostR(qb_, Rwr(41, b_, 0, 64)), Status::kOk);
  SendWr s = Wr(WrOpcode::kSendWithInv, 42, a_, 0, 64);
  s.invalidate_rkey = rkey;
  EXPECT_EQ(Run(qa_, a_.scq, s).status, WcStatus::kSuccess);  // acknowledged
  std::vector<Completion> rc = Poll(b_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  // a_'s MR is still valid: a_ invalidates it itself.
  EXPECT_EQ(Run(qa_, a_.scq, LocalInv(rkey)).status, WcStatus::kSuccess);
}

TEST_F(FrTest, DeregMrFreesAValidMr) {
  RnicMr mr = Alloc(b_);
  ASSERT_EQ(RegB(mr.lkey, 6), WcStatus::kSuccess);
  const uint32_t rkey = Rekey(mr.rkey, 6);
  EXPECT_EQ(rnic_.ObjectCounts().fr_mrs, 1u);
  EXPECT_EQ(rnic_.DeregMr(mr), Status::kOk);  // by its id, valid or not
  EXPECT_EQ(rnic_.ObjectCounts().fr_mrs, 0u);
  EXPECT_EQ(Write(rkey, kB.iova, 8), WcStatus::kRemAccessErr);
  EXPECT_EQ(rnic_.DeregMr(mr), Status::kBadHandle);
}

TEST_F(FrTest, AnIndexNeverNamesBothAWindowAndAnFrMr) {
  std::set<uint32_t> mw_idx, fr_idx;
  std::vector<RnicMw> mws;
  std::vector<RnicMr> frs;
  for (int i = 0; i < 64; ++i) {
    auto mw = rnic_.AllocMw(b_.pd, static_cast<uint8_t>(1 + i % 2));
    auto fr = rnic_.AllocFrMr(b_.pd, 1);
    ASSERT_TRUE(mw.ok() && fr.ok());
    mws.push_back(*mw);
    frs.push_back(*fr);
    mw_idx.insert(mw->rkey >> 8);
    fr_idx.insert(fr->rkey >> 8);
  }
  EXPECT_EQ(mw_idx.size(), 64u);
  EXPECT_EQ(fr_idx.size(), 64u);
  for (uint32_t i : fr_idx) {
    EXPECT_EQ(mw_idx.count(i), 0u) << i;
    EXPECT_NE(i, b_.mr.lkey >> 8);
    EXPECT_LE(i, 0xffffffu);
  }
  // Freed and allocated again, still apart.
  for (int i = 0; i < 64; i += 2) {
    ASSERT_EQ(rnic_.DeallocMw(mws[i]), Status::kOk);
    ASSERT_EQ(rnic_.DeregMr(frs[i]), Status::kOk);
  }
  for (int i = 0; i < 32; ++i) {
    auto fr = rnic_.AllocFrMr(b_.pd, 1);
    ASSERT_TRUE(fr.ok());
    EXPECT_EQ(mw_idx.count(fr->rkey >> 8), 0u);
  }
}

TEST_F(FrTest, CrossPageLocalGatherOfManySges) {
  // Several SGEs over two registrations and the ordinary MR, one message.
  RnicMr ma = Alloc(a_);
  ASSERT_EQ(
      Run(qa_, a_.scq, RegWr(ma.lkey, 1, kA, kFrAll, Pages(a_, kA))).status,
      WcStatus::kSuccess);
  const uint32_t ka = Rekey(ma.lkey, 1);
  SendWr w;
  w.wr_id = 7;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.num_sge = 3;
  w.sge[0] = Sge{kA.iova + 4000, 5000, ka};
  w.sge[1] = Sge{a_.at(100), 300, a_.mr.lkey};
  w.sge[2] = Sge{kA.iova + 10, 200, ka};
  w.remote_addr = b_.at(20000);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Run(qa_, a_.scq, w).status, WcStatus::kSuccess);
  for (uint64_t j = 0; j < 5000; ++j) {
    ASSERT_EQ(b_.buf[20000 + j], a_.buf[kA.Backing(4000 + j)]) << j;
  }
  EXPECT_EQ(std::memcmp(&b_.buf[25000], &a_.buf[100], 300), 0);
  for (uint64_t j = 0; j < 200; ++j) {
    ASSERT_EQ(b_.buf[25300 + j], a_.buf[kA.Backing(10 + j)]) << j;
  }
}

// Over a fabric: the packet responders resolve rkeys the same way.
class FrNetTest : public SoftRnicNetTest {
 protected:
  void SetUp() override {
    SoftRnicNetTest::SetUp();
    Randomize(va_.buf.data(), va_.buf.size(), 3);
    Randomize(vb_.buf.data(), vb_.buf.size(), 4);
  }
  // A registration of kB over vb_'s buffer on host B's qp; its rkey.
  uint32_t RegisterOnB(RnicQp qp, uint8_t key) {
    auto mr = b_.AllocFrMr(vb_.pd, 8);
    EXPECT_TRUE(mr.ok());
    for (uint32_t page : kB.order) {
      pages_.push_back(FrPage{vb_.mr.lkey, vb_.at(uint64_t{page} * kPage)});
    }
    SendWr wr;
    wr.wr_id = 1;
    wr.opcode = WrOpcode::kRegMr;
    wr.send_flags = kSendSignaled;
    wr.reg = FrReg{mr->lkey, key, kB.iova, kB.length, kFrAll, pages_.data(),
                   static_cast<uint32_t>(pages_.size()), mr->id};
    Post(b_, qp, wr);
    Pump();
    std::vector<Completion> c = Poll(b_, vb_.scq);
    EXPECT_EQ(c.size(), 1u);
    EXPECT_EQ(c.empty() ? WcStatus::kGeneralErr : c[0].status,
              WcStatus::kSuccess);
    return (mr->rkey & ~0xffu) | key;
  }
  std::vector<FrPage> pages_;
};

TEST_F(FrNetTest, RcWriteAndReadThroughAnFrMrCrossHosts) {
  ConnectRc();
  const uint32_t rkey = RegisterOnB(qb_, 0x5a);
  // Several MTU packets (1 KiB) across the pages' boundaries.
  const uint32_t len = static_cast<uint32_t>(kB.length - 300);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 2, va_, 0, len);
  w.remote_addr = kB.iova + 200;
  w.rkey = rkey;
  Post(a_, qa_, w);
  Pump();
  std::vector<Completion> c = Poll(a_, va_.scq);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  for (uint64_t j = 0; j < len; ++j) {
    ASSERT_EQ(vb_.buf[kB.Backing(200 + j)], va_.buf[j]) << j;
  }
  SendWr r = Wr(WrOpcode::kRdmaRead, 3, va_, 32768,
                static_cast<uint32_t>(kB.length));
  r.remote_addr = kB.iova;
  r.rkey = rkey;
  Post(a_, qa_, r);
  Pump();
  c = Poll(a_, va_.scq);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  for (uint64_t j = 0; j < kB.length; ++j) {
    ASSERT_EQ(va_.buf[32768 + j], vb_.buf[kB.Backing(j)]) << j;
  }
  // The old key byte is refused over the fabric too.
  SendWr bad = w;
  bad.rkey = rkey ^ 1;
  Post(a_, qa_, bad);
  Pump();
  c = Poll(a_, va_.scq);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemAccessErr);
}

TEST_F(FrNetTest, RcSendWithInvalidateInvalidatesAcrossHosts) {
  ConnectRc();
  const uint32_t rkey = RegisterOnB(qb_, 0x66);
  PostR(b_, qb_, Rwr(7, vb_, 0, 2000));
  SendWr s = Wr(WrOpcode::kSendWithInv, 8, va_, 0, 2000);  // two packets
  s.invalidate_rkey = rkey;
  Post(a_, qa_, s);
  Pump();
  std::vector<Completion> c = Poll(b_, vb_.rcq);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].wc_flags & kWcWithInv, uint32_t{kWcWithInv});
  EXPECT_EQ(c[0].imm_data, rkey);
  c = Poll(a_, va_.scq);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  // Invalid now: a WRITE through it is refused.
  SendWr w = Wr(WrOpcode::kRdmaWrite, 9, va_, 0, 64);
  w.remote_addr = kB.iova;
  w.rkey = rkey;
  Post(a_, qa_, w);
  Pump();
  c = Poll(a_, va_.scq);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemAccessErr);
}

TEST_F(FrNetTest, UcWriteThroughAnFrMrCrossesHosts) {
  ConnectUc();
  const uint32_t rkey = RegisterOnB(qb_, 0x21);
  const uint32_t len = 5000;
  SendWr w = Wr(WrOpcode::kRdmaWrite, 2, va_, 100, len);
  w.remote_addr = kB.iova + 3000;
  w.rkey = rkey;
  Post(a_, qa_, w);
  Pump();
  for (uint64_t j = 0; j < len; ++j) {
    ASSERT_EQ(vb_.buf[kB.Backing(3000 + j)], va_.buf[100 + j]) << j;
  }
  // Past the end: dropped for access, nothing placed.
  const std::vector<uint8_t> before = vb_.buf;
  w.remote_addr = kB.iova + kB.length - 100;
  Post(a_, qa_, w);
  Pump();
  EXPECT_TRUE(vb_.buf == before);
  EXPECT_GE(b_.net_stats().drops(NetDrop::kAccess), 1u);
}

}  // namespace
}  // namespace vrdma::testing
