// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Memory windows through the engine and SoftRnic (docs/virtio-rdma.md §4.7):
// ALLOC_MW and DEALLOC_MW, BIND_MW / LOCAL_INV / SEND_WITH_INV WQEs written
// as librxe writes them, remote access through a window, and the hostile
// cases: another VM's window or MR, a window outlived by its MR.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/engine/testing/soft_rnic_guests.h"

namespace vrdma::engine {
namespace {

using testing::DrainCq;
using testing::EngineSoftRnicTest;
using testing::Guest;
using testing::GuestSend;
using testing::kAllAccess;
using testing::kBufPages;
using testing::MakeGid;

constexpr uint32_t kRemoteRw = kAccessRemoteRead | kAccessRemoteWrite;
constexpr uint32_t St(WcStatus s) { return static_cast<uint32_t>(s); }
constexpr uint32_t kOk = St(WcStatus::kSuccess);
constexpr uint32_t kRemAccessErr = St(WcStatus::kRemAccessErr);
constexpr uint32_t kMwBindErr = St(WcStatus::kMwBindErr);
constexpr uint32_t kLocQpOpErr = St(WcStatus::kLocQpOpErr);

class EngineMwTest : public EngineSoftRnicTest {
 protected:
  void SetUp() override {
    EngineSoftRnicTest::SetUp();
    AddGuest(a_, 1);
    AddGuest(b_, 2);
    Connect(a_, b_, QpType::kRc);
    bind_mr_ = RegBindMr(b_);
  }

  // A second MR over the guest's buffer that windows may be bound to.
  RegMrResult RegBindMr(Guest& g) {
    RegMrRequest mr;
    mr.pd = g.pd;
    mr.access = kAllAccess | kAccessMwBind;
    mr.iova = g.iova + (1ull << 30);
    mr.length = kBufPages * 4096;
    mr.pages = testing::GuestEnv::Pages(g.buf_gpa, kBufPages);
    Result<RegMrResult> m = engine_->RegMr(g.vm, mr);
    EXPECT_TRUE(m.ok()) << StatusName(m.status());
    return m.ok() ? *m : RegMrResult{};
  }

  // Posts one WR on g's QP and returns its send CQE.
  ib_uverbs_wc Run(Guest& g, const GuestSend& s) {
    testing::PostSend(g.sq, s);
    engine_->Doorbell(g.vm, VIRTIO_RDMA_DB_SQ, g.qpn);
    std::vector<ib_uverbs_wc> out;
    EXPECT_TRUE(RunUntil(Collect(g.scq, out, 1)));
    return out.empty() ? ib_uverbs_wc{} : out[0];
  }

  GuestSend Bind(uint32_t mw_rkey, uint32_t key, uint64_t addr, uint64_t len,
                 uint32_t mr_lkey, uint32_t access = kRemoteRw) {
    GuestSend s{.wr_id = 77, .opcode = IB_UVERBS_WR_BIND_MW};
    s.bind = MwBind{.mw_rkey = mw_rkey, .mr_lkey = mr_lkey, .addr = addr, .length = len,
                    .rkey = key, .access = access};
    return s;
  }
  // A's RDMA WRITE of 64 bytes to addr under rkey.
  ib_uverbs_wc WriteFromA(uint64_t addr, uint32_t rkey) {
    return Run(a_, GuestSend{.wr_id = 5,
                             .opcode = IB_UVERBS_WR_RDMA_WRITE,
                             .remote_addr = addr,
                             .rkey = rkey,
                             .sges = {{a_.iova, 64, a_.lkey}}});
  }
  static uint32_t NewKey(uint32_t rkey, uint8_t key) { return (rkey & ~0xffu) | key; }

  Guest a_{0x100000}, b_{0x40000000};
  RegMrResult bind_mr_{};
};

TEST_F(EngineMwTest, Type2WindowGivesRemoteAccessUntilInvalidated) {
  Result<AllocMwResult> mw = engine_->AllocMw(b_.vm, b_.pd, 2);
  ASSERT_TRUE(mw.ok()) << StatusName(mw.status());
  EXPECT_EQ(engine_->Stats(b_.vm)->mws, 1u);
  const uint64_t base = b_.iova + (1ull << 30);
  const uint32_t rkey = NewKey(mw->rkey, 0x42);
  ib_uverbs_wc wc = Run(b_, Bind(mw->rkey, 0x42, base + 4096, 4096, bind_mr_.lkey));
  EXPECT_EQ(wc.status, kOk);
  EXPECT_EQ(wc.opcode, uint32_t{IB_UVERBS_WC_BIND_MW});

  // Through the window: A's bytes land in B's buffer at the window's place.
  EXPECT_EQ(WriteFromA(base + 4096 + 128, rkey).status, kOk);
  EXPECT_EQ(std::memcmp(b_.buf() + 4096 + 128, a_.buf(), 64), 0);
  // Outside the window (inside the MR): the remote access error.
  EXPECT_EQ(WriteFromA(base + 64, rkey).status, kRemAccessErr);
}

TEST_F(EngineMwTest, LocalInvalidateClosesTheWindow) {
  // A's QP went to ERR in the previous test's fixture only; here both are fresh.
  Result<AllocMwResult> mw = engine_->AllocMw(b_.vm, b_.pd, 2);
  ASSERT_TRUE(mw.ok());
  const uint64_t base = b_.iova + (1ull << 30);
  const uint32_t rkey = NewKey(mw->rkey, 7);
  ASSERT_EQ(Run(b_, Bind(mw->rkey, 7, base, 4096, bind_mr_.lkey)).status, kOk);
  ib_uverbs_wc inv = Run(b_, GuestSend{.wr_id = 9, .opcode = IB_UVERBS_WR_LOCAL_INV, .imm = rkey});
  EXPECT_EQ(inv.status, kOk);
  EXPECT_EQ(inv.opcode, uint32_t{IB_UVERBS_WC_LOCAL_INV});
  EXPECT_EQ(WriteFromA(base, rkey).status, kRemAccessErr);
}

TEST_F(EngineMwTest, SendWithInvalidateReportsTheRkeyAndInvalidates) {
  Result<AllocMwResult> mw = engine_->AllocMw(b_.vm, b_.pd, 2);
  ASSERT_TRUE(mw.ok());
  const uint64_t base = b_.iova + (1ull << 30);
  const uint32_t rkey = NewKey(mw->rkey, 3);
  ASSERT_EQ(Run(b_, Bind(mw->rkey, 3, base, 4096, bind_mr_.lkey)).status, kOk);
  testing::PostRecv(b_.rq, 31, {{b_.iova + 8192, 64, b_.lkey}});
  ib_uverbs_wc s = Run(a_, GuestSend{.wr_id = 8,
                                     .opcode = IB_UVERBS_WR_SEND_WITH_INV,
                                     .imm = rkey,
                                     .sges = {{a_.iova, 32, a_.lkey}}});
  EXPECT_EQ(s.status, kOk);
  std::vector<ib_uverbs_wc> rb;
  ASSERT_TRUE(RunUntil(Collect(b_.rcq, rb, 1)));
  EXPECT_EQ(rb[0].status, kOk);
  EXPECT_EQ(rb[0].wr_id, 31u);
  EXPECT_EQ(rb[0].byte_len, 32u);
  EXPECT_TRUE(rb[0].wc_flags & kWcWithInv);
  EXPECT_EQ(rb[0].ex.invalidate_rkey, rkey);
  EXPECT_EQ(WriteFromA(base, rkey).status, kRemAccessErr);
}

// Hostile: a bind naming another VM's window never reaches the RNIC.
TEST_F(EngineMwTest, BindOfAnotherVmsWindowFails) {
  Result<AllocMwResult> theirs = engine_->AllocMw(a_.vm, a_.pd, 1);
  ASSERT_TRUE(theirs.ok());
  const uint64_t rejected = engine_->Stats(b_.vm)->wqes_rejected;
  ib_uverbs_wc wc = Run(b_, Bind(theirs->rkey, 1, b_.iova + (1ull << 30), 4096, bind_mr_.lkey));
  EXPECT_EQ(wc.status, kMwBindErr);
  // The engine's rule fired (mw_access.h), not the RNIC's.
  EXPECT_EQ(engine_->Stats(b_.vm)->wqes_rejected, rejected + 1);
}

// Hostile: B's own window bound to A's MR (B names A's lkey).
TEST_F(EngineMwTest, BindToAnotherVmsMrFails) {
  const RegMrResult a_mr = RegBindMr(a_);
  Result<AllocMwResult> mw = engine_->AllocMw(b_.vm, b_.pd, 1);
  ASSERT_TRUE(mw.ok());
  const uint64_t rejected = engine_->Stats(b_.vm)->wqes_rejected;
  ib_uverbs_wc wc = Run(b_, Bind(mw->rkey, 1, a_.iova + (1ull << 30), 4096, a_mr.lkey));
  EXPECT_EQ(wc.status, kMwBindErr);
  EXPECT_EQ(engine_->Stats(b_.vm)->wqes_rejected, rejected + 1);
}

TEST_F(EngineMwTest, LocalInvalidateOfAnotherVmsWindowFails) {
  Result<AllocMwResult> theirs = engine_->AllocMw(a_.vm, a_.pd, 2);
  ASSERT_TRUE(theirs.ok());
  const uint64_t rejected = engine_->Stats(b_.vm)->wqes_rejected;
  ib_uverbs_wc wc = Run(b_, GuestSend{.wr_id = 2, .opcode = IB_UVERBS_WR_LOCAL_INV,
                                      .imm = theirs->rkey});
  EXPECT_EQ(wc.status, kLocQpOpErr);
  EXPECT_EQ(engine_->Stats(b_.vm)->wqes_rejected, rejected + 1);
}

// The RNIC's own rules still apply to the VM's own objects: a bind without
// MW_BIND on the MR fails there (not rejected by the engine).
TEST_F(EngineMwTest, BindToAnMrWithoutMwBindFailsOnTheRnic) {
  Result<AllocMwResult> mw = engine_->AllocMw(b_.vm, b_.pd, 2);
  ASSERT_TRUE(mw.ok());
  const uint64_t rejected = engine_->Stats(b_.vm)->wqes_rejected;
  ib_uverbs_wc wc = Run(b_, Bind(mw->rkey, 1, b_.iova, 4096, b_.lkey));
  EXPECT_EQ(wc.status, kMwBindErr);
  EXPECT_EQ(engine_->Stats(b_.vm)->wqes_rejected, rejected);
}

// IBA 10.6.7.2.6, as rxe: an MR with bound windows is not deregistered, and
// stays usable; once its window is gone it is.
TEST_F(EngineMwTest, DeregOfAnMrWithABoundWindowIsRefused) {
  Result<AllocMwResult> mw = engine_->AllocMw(b_.vm, b_.pd, 1);
  ASSERT_TRUE(mw.ok());
  const uint64_t base = b_.iova + (1ull << 30);
  ASSERT_EQ(Run(b_, Bind(mw->rkey, 9, base, 8192, bind_mr_.lkey)).status, kOk);
  EXPECT_EQ(engine_->DeregMr(b_.vm, bind_mr_.handle), Status::kInvalid);
  EXPECT_EQ(engine_->Stats(b_.vm)->mrs, 2u);
  // Still registered: the window still reaches its bytes.
  EXPECT_EQ(WriteFromA(base + 256, NewKey(mw->rkey, 9)).status, kOk);
  EXPECT_EQ(std::memcmp(b_.buf() + 256, a_.buf(), 64), 0);
  EXPECT_EQ(engine_->DestroyPd(b_.vm, b_.pd), Status::kBusy);  // the window holds it
  ASSERT_EQ(engine_->DeallocMw(b_.vm, mw->handle), Status::kOk);
  EXPECT_EQ(engine_->DeregMr(b_.vm, bind_mr_.handle), Status::kOk);
  EXPECT_EQ(engine_->Stats(b_.vm)->mws, 0u);
}

TEST_F(EngineMwTest, QuotaAndTypes) {
  engine_.reset();
  UsePolicy(policy_);
  Guest g(0x100000);
  VmConfig c;
  c.name = "q";
  c.gids = {MakeGid(9)};
  c.quotas.max_mw = 2;
  Result<VmId> vm = engine_->AttachVm(c, &g.sink);
  ASSERT_TRUE(vm.ok());
  const uint32_t pd = *engine_->CreatePd(*vm);
  EXPECT_EQ(engine_->QueryDevice(*vm)->limits.max_mw, 2u);
  EXPECT_EQ(engine_->AllocMw(*vm, pd, 3).status(), Status::kInvalid);
  EXPECT_EQ(engine_->AllocMw(*vm, pd + 1, 1).status(), Status::kBadHandle);
  ASSERT_TRUE(engine_->AllocMw(*vm, pd, 1).ok());
  ASSERT_TRUE(engine_->AllocMw(*vm, pd, 2).ok());
  EXPECT_EQ(engine_->AllocMw(*vm, pd, 1).status(), Status::kNoResource);
  engine_->DetachVm(*vm);
  // A VM whose quota is 0 is offered no windows at all.
  c.name = "none";
  c.quotas.max_mw = 0;
  vm = engine_->AttachVm(c, &g.sink);
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(engine_->QueryDevice(*vm)->limits.max_mw, 0u);
  EXPECT_EQ(engine_->AllocMw(*vm, *engine_->CreatePd(*vm), 1).status(), Status::kUnsupported);
}

// Detaching a VM with bound windows releases every RNIC object (windows
// before the MRs they hold).
TEST_F(EngineMwTest, DetachWithBoundWindowsLeavesNothing) {
  const SoftRnicCounts before_b = soft_rnic_.ObjectCounts();
  Result<AllocMwResult> w1 = engine_->AllocMw(b_.vm, b_.pd, 1);
  Result<AllocMwResult> w2 = engine_->AllocMw(b_.vm, b_.pd, 2);
  ASSERT_TRUE(w1.ok() && w2.ok());
  const uint64_t base = b_.iova + (1ull << 30);
  ASSERT_EQ(Run(b_, Bind(w1->rkey, 1, base, 4096, bind_mr_.lkey)).status, kOk);
  ASSERT_EQ(Run(b_, Bind(w2->rkey, 2, base, 4096, bind_mr_.lkey)).status, kOk);
  EXPECT_EQ(soft_rnic_.ObjectCounts().mws, before_b.mws + 2);
  engine_->DetachVm(b_.vm);
  const SoftRnicCounts after = soft_rnic_.ObjectCounts();
  EXPECT_EQ(after.mws, 0u);
  EXPECT_EQ(after.mrs, 1u);  // A's
  EXPECT_EQ(after.pds, 1u);
}

}  // namespace
}  // namespace vrdma::engine
