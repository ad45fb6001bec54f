// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Fast-registration MRs through the engine and SoftRnic
// (docs/virtio-rdma.md §4.8): ALLOC_MR, the REG_MR WQE mapping guest pages
// that are neither contiguous nor in order, remote access through the
// registration, LOCAL_INV and SEND_WITH_INV of its rkey, DEREG_MR; and the
// hostile cases, each asserting the rule that fired: another VM's MR, a
// page outside the VM's RAM or not page aligned, more pages than the MR
// holds, REG_MR on a QP that is not a kernel QP, a VM the operator did not
// allow.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/engine/testing/soft_rnic_guests.h"

namespace vrdma::engine {
namespace {

using testing::EngineSoftRnicTest;
using testing::Guest;
using testing::GuestSend;

constexpr uint32_t St(WcStatus s) { return static_cast<uint32_t>(s); }
constexpr uint32_t kOk = St(WcStatus::kSuccess);
constexpr uint32_t kLocQpOpErr = St(WcStatus::kLocQpOpErr);
constexpr uint32_t kLocLenErr = St(WcStatus::kLocLenErr);
constexpr uint32_t kLocProtErr = St(WcStatus::kLocProtErr);
constexpr uint32_t kRemAccessErr = St(WcStatus::kRemAccessErr);
constexpr uint32_t kFrAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
constexpr uint64_t kIova = 0xffff888012345000;  // a kernel virtual address, as nvme's

uint32_t WithKey(uint32_t key, uint8_t byte) { return (key & ~0xffu) | byte; }

class EngineFrTest : public EngineSoftRnicTest {
 protected:
  void SetUp() override {
    EngineSoftRnicTest::SetUp();
    AddGuest(a_, 1, QpType::kRc, /*kernel=*/true);
    AddGuest(b_, 2, QpType::kRc, /*kernel=*/true);
    Connect(a_, b_, QpType::kRc);
  }

  ib_uverbs_wc Run(Guest& g, const GuestSend& s) {
    testing::PostSend(g.sq, s);
    engine_->Doorbell(g.vm, VIRTIO_RDMA_DB_SQ, g.qpn);
    std::vector<ib_uverbs_wc> out;
    EXPECT_TRUE(RunUntil(Collect(g.scq, out, 1)));
    return out.empty() ? ib_uverbs_wc{} : out[0];
  }

  // A fast-registration MR of g's PD with its page list in g's RAM.
  struct Fr {
    uint32_t handle = 0, lkey = 0;
    uint64_t list = 0;  // guest-physical
  };
  Fr AllocFr(Guest& g, uint32_t max_pages) {
    Fr fr;
    fr.list = g.env.AllocPages(1);
    Result<RegMrResult> r = engine_->AllocMr(g.vm, {g.pd, max_pages, fr.list});
    EXPECT_TRUE(r.ok()) << StatusName(r.status());
    if (r.ok()) {
      fr.handle = r->handle;
      fr.lkey = r->lkey;
      EXPECT_EQ(r->rkey, r->lkey);
    }
    return fr;
  }
  void WriteList(Guest& g, const Fr& fr, const std::vector<uint64_t>& pages) {
    std::memcpy(g.env.host(fr.list), pages.data(), pages.size() * sizeof(uint64_t));
  }
  GuestSend RegMr(const Fr& fr, uint8_t key, uint64_t iova, uint64_t length) {
    return GuestSend{.wr_id = 70,
                     .opcode = VIRTIO_RDMA_WR_REG_MR,
                     .bind = {.mr_lkey = fr.lkey, .addr = iova, .length = length,
                              .rkey = key, .access = kFrAccess}};
  }
  ib_uverbs_wc WriteFromB(uint64_t addr, uint32_t rkey, uint32_t len) {
    return Run(b_, GuestSend{.wr_id = 80,
                             .opcode = IB_UVERBS_WR_RDMA_WRITE,
                             .remote_addr = addr,
                             .rkey = rkey,
                             .sges = {{b_.iova, len, b_.lkey}}});
  }
  QpState StateOf(Guest& g) { return engine_->QueryQp(g.vm, g.qpn)->attr.state; }

  Guest a_{0x100000}, b_{0x40000000};
};

// The registration maps three pages given out of order; a WRITE that
// crosses both page boundaries lands piece by piece in them, a READ
// brings the same bytes back, and the completion is REG_MR's.
TEST_F(EngineFrTest, RemoteWriteAndReadThroughScatteredPages) {
  const uint64_t pages = a_.env.AllocPages(3);
  const std::vector<uint64_t> order = {pages + 8192, pages, pages + 4096};
  Fr fr = AllocFr(a_, 8);
  WriteList(a_, fr, order);
  const uint32_t rkey = WithKey(fr.lkey, 0x5a);
  ib_uverbs_wc reg = Run(a_, RegMr(fr, 0x5a, kIova + 0x100, 3 * 4096 - 0x100));
  EXPECT_EQ(reg.status, kOk);
  EXPECT_EQ(reg.opcode, uint32_t{VIRTIO_RDMA_WC_REG_MR});
  EXPECT_EQ(engine_->Stats(a_.vm)->fr_mrs, 1u);

  // 9000 bytes from iova + 0x200: 3584 in the first page (order[0] +
  // 0x200..), 4096 in the second, 1320 in the third.
  ASSERT_EQ(WriteFromB(kIova + 0x200, rkey, 9000).status, kOk);
  EXPECT_EQ(std::memcmp(a_.env.host(order[0]) + 0x200, b_.buf(), 3584), 0);
  EXPECT_EQ(std::memcmp(a_.env.host(order[1]), b_.buf() + 3584, 4096), 0);
  EXPECT_EQ(std::memcmp(a_.env.host(order[2]), b_.buf() + 7680, 1320), 0);

  const std::vector<uint8_t> sent(b_.buf(), b_.buf() + 9000);
  std::memset(b_.buf(), 0, 9000);
  ib_uverbs_wc read = Run(b_, GuestSend{.wr_id = 81,
                                        .opcode = IB_UVERBS_WR_RDMA_READ,
                                        .remote_addr = kIova + 0x200,
                                        .rkey = rkey,
                                        .sges = {{b_.iova, 9000, b_.lkey}}});
  ASSERT_EQ(read.status, kOk);
  EXPECT_EQ(std::memcmp(b_.buf(), sent.data(), sent.size()), 0);

  // Outside [iova, iova + length): the RNIC's range rule.
  EXPECT_EQ(WriteFromB(kIova, rkey, 16).status, kRemAccessErr);
}

// LOCAL_INV of the registration's rkey closes it: the next WRITE fails on
// the RNIC, and a new REG_MR with a new key byte opens it again.
TEST_F(EngineFrTest, LocalInvalidateThenRegisterAgain) {
  const uint64_t page = a_.env.AllocPages(1);
  Fr fr = AllocFr(a_, 1);
  WriteList(a_, fr, {page});
  const uint32_t rkey = WithKey(fr.lkey, 1);
  ASSERT_EQ(Run(a_, RegMr(fr, 1, kIova, 4096)).status, kOk);
  ASSERT_EQ(WriteFromB(kIova, rkey, 64).status, kOk);
  ib_uverbs_wc inv = Run(a_, GuestSend{.wr_id = 9, .opcode = IB_UVERBS_WR_LOCAL_INV, .imm = rkey});
  EXPECT_EQ(inv.status, kOk);
  EXPECT_EQ(inv.opcode, uint32_t{IB_UVERBS_WC_LOCAL_INV});
  EXPECT_EQ(WriteFromB(kIova, rkey, 64).status, kRemAccessErr);
}

TEST_F(EngineFrTest, SendWithInvalidateClosesTheRegistration) {
  const uint64_t page = a_.env.AllocPages(1);
  Fr fr = AllocFr(a_, 1);
  WriteList(a_, fr, {page});
  const uint32_t rkey = WithKey(fr.lkey, 2);
  ASSERT_EQ(Run(a_, RegMr(fr, 2, kIova, 4096)).status, kOk);
  testing::PostRecv(a_.rq, 31, {{a_.iova, 64, a_.lkey}});
  engine_->Doorbell(a_.vm, VIRTIO_RDMA_DB_RQ, a_.qpn);
  ASSERT_EQ(Run(b_, GuestSend{.wr_id = 8,
                              .opcode = IB_UVERBS_WR_SEND_WITH_INV,
                              .imm = rkey,
                              .sges = {{b_.iova, 32, b_.lkey}}})
                .status,
            kOk);
  std::vector<ib_uverbs_wc> ra;
  ASSERT_TRUE(RunUntil(Collect(a_.rcq, ra, 1)));
  EXPECT_EQ(ra[0].status, kOk);
  EXPECT_TRUE(ra[0].wc_flags & kWcWithInv);
  EXPECT_EQ(ra[0].ex.invalidate_rkey, rkey);
  EXPECT_EQ(WriteFromB(kIova, rkey, 64).status, kRemAccessErr);
}

// The registration's lkey names its pages locally too: a SEND from it.
TEST_F(EngineFrTest, LocalSgeThroughTheRegistration) {
  const uint64_t pages = a_.env.AllocPages(2);
  for (uint32_t i = 0; i < 8192; ++i) a_.env.host(pages)[i] = static_cast<uint8_t>(i * 5 + 1);
  Fr fr = AllocFr(a_, 2);
  WriteList(a_, fr, {pages + 4096, pages});
  const uint32_t key = WithKey(fr.lkey, 3);
  ASSERT_EQ(Run(a_, RegMr(fr, 3, kIova, 8192)).status, kOk);
  testing::PostRecv(b_.rq, 32, {{b_.iova, 8192, b_.lkey}});
  engine_->Doorbell(b_.vm, VIRTIO_RDMA_DB_RQ, b_.qpn);
  ASSERT_EQ(Run(a_, GuestSend{.wr_id = 10, .sges = {{kIova + 4000, 200, key}}}).status, kOk);
  std::vector<ib_uverbs_wc> rb;
  ASSERT_TRUE(RunUntil(Collect(b_.rcq, rb, 1)));
  EXPECT_EQ(rb[0].status, kOk);
  EXPECT_EQ(std::memcmp(b_.buf(), a_.env.host(pages + 4096) + 4000, 96), 0);
  EXPECT_EQ(std::memcmp(b_.buf() + 96, a_.env.host(pages), 104), 0);
}

// Hostile: another VM's fast-registration MR is not found (the engine's
// rule: the RNIC would not tell the VMs apart).
TEST_F(EngineFrTest, RegMrOfAnotherVmsMrFails) {
  Fr theirs = AllocFr(b_, 1);
  const uint64_t page = a_.env.AllocPages(1);
  Fr mine = AllocFr(a_, 1);
  WriteList(a_, mine, {page});
  Fr forged = mine;
  forged.lkey = theirs.lkey;
  const uint64_t rejected = engine_->Stats(a_.vm)->wqes_rejected;
  EXPECT_EQ(Run(a_, RegMr(forged, 4, kIova, 4096)).status, kLocQpOpErr);
  EXPECT_EQ(engine_->Stats(a_.vm)->wqes_rejected, rejected + 1);
  EXPECT_EQ(StateOf(a_), QpState::kErr);
}

// Hostile page lists: a page outside the VM's RAM (another VM's, here), a
// page not 4 KiB aligned: the engine's copy of the list refuses both.
TEST_F(EngineFrTest, PageOutsideTheVmsRamFails) {
  Fr fr = AllocFr(a_, 2);
  WriteList(a_, fr, {a_.env.AllocPages(1), b_.buf_gpa});
  EXPECT_EQ(Run(a_, RegMr(fr, 5, kIova, 8192)).status, kLocProtErr);
  EXPECT_EQ(StateOf(a_), QpState::kErr);
}

TEST_F(EngineFrTest, UnalignedPageFails) {
  Fr fr = AllocFr(a_, 1);
  WriteList(a_, fr, {a_.env.AllocPages(1) + 512});
  EXPECT_EQ(Run(a_, RegMr(fr, 6, kIova, 512)).status, kLocProtErr);
}

// More pages than the MR was allocated for: the engine's bound.
TEST_F(EngineFrTest, MorePagesThanAllocatedFails) {
  Fr fr = AllocFr(a_, 2);
  const uint64_t pages = a_.env.AllocPages(3);
  WriteList(a_, fr, {pages, pages + 4096, pages + 8192});
  EXPECT_EQ(Run(a_, RegMr(fr, 7, kIova + 1, 8192)).status, kLocLenErr);  // 3 pages
}

// REG_MR is a kernel QP's opcode: on a user QP the decoder refuses it.
TEST_F(EngineFrTest, RegMrOnAUserQpIsAnUnknownOpcode) {
  Guest c{0x80000000};
  AddGuest(c, 3, QpType::kRc, /*kernel=*/false);
  BringUp(c, QpType::kRc, &b_);
  Fr fr{.lkey = 0x100};
  EXPECT_EQ(Run(c, RegMr(fr, 1, kIova, 4096)).status, kLocQpOpErr);
}

TEST_F(EngineFrTest, AllocMrChecksAndQuotas) {
  // Not allowed by the operator: no kernel consumers.
  Guest c{0x80000000};
  AddGuest(c, 3);
  const uint64_t list = c.env.AllocPages(1);
  EXPECT_EQ(engine_->AllocMr(c.vm, {c.pd, 1, list}).status(), Status::kUnsupported);

  const uint64_t my_list = a_.env.AllocPages(1);
  const uint32_t max = engine_->QueryDevice(a_.vm)->limits.max_fr_pages;
  ASSERT_GT(max, 0u);
  EXPECT_EQ(engine_->AllocMr(a_.vm, {a_.pd, 0, my_list}).status(), Status::kInvalid);
  EXPECT_EQ(engine_->AllocMr(a_.vm, {a_.pd, max + 1, my_list}).status(), Status::kInvalid);
  EXPECT_EQ(engine_->AllocMr(a_.vm, {a_.pd, 1, my_list + 4}).status(), Status::kInvalid);
  // The list must be the VM's RAM: b's buffer is not.
  EXPECT_EQ(engine_->AllocMr(a_.vm, {a_.pd, 1, b_.buf_gpa}).status(), Status::kInvalid);
  EXPECT_EQ(engine_->AllocMr(a_.vm, {a_.pd + 100, 1, my_list}).status(), Status::kBadHandle);

  Result<RegMrResult> fr = engine_->AllocMr(a_.vm, {a_.pd, max, my_list});
  ASSERT_TRUE(fr.ok()) << StatusName(fr.status());
  EXPECT_EQ(soft_rnic_.ObjectCounts().fr_mrs, 1u);
  EXPECT_EQ(engine_->Stats(a_.vm)->fr_mrs, 1u);
  EXPECT_EQ(engine_->Stats(a_.vm)->mrs, 2u);  // and the fixture's buffer
  EXPECT_EQ(engine_->DeregMr(a_.vm, fr->handle), Status::kOk);
  EXPECT_EQ(soft_rnic_.ObjectCounts().fr_mrs, 0u);
  EXPECT_EQ(engine_->Stats(a_.vm)->fr_mrs, 0u);
}

// A deregistered MR's page array stays with the VM, charged, because a
// REG_MR WR still queued in the stage or the RNIC may point into it
// (objects.h, fr_page_pool); the next ALLOC_MR of no more pages takes it
// instead of allocating, so DEREG/ALLOC cycles cost nothing more.
TEST_F(EngineFrTest, DeregisteredPageArraysAreKeptAndReused) {
  const uint64_t list = a_.env.AllocPages(1);
  const uint64_t base = engine_->Stats(a_.vm)->host_bytes;
  Result<RegMrResult> first = engine_->AllocMr(a_.vm, {a_.pd, 16, list});
  ASSERT_TRUE(first.ok());
  const uint64_t with_one = engine_->Stats(a_.vm)->host_bytes;
  EXPECT_GE(with_one - base, 16 * sizeof(FrPage));
  ASSERT_EQ(engine_->DeregMr(a_.vm, first->handle), Status::kOk);
  const uint64_t after_dereg = engine_->Stats(a_.vm)->host_bytes;
  EXPECT_GE(after_dereg - base, 16 * sizeof(FrPage));  // the array is kept
  for (int i = 0; i < 100; ++i) {
    Result<RegMrResult> again = engine_->AllocMr(a_.vm, {a_.pd, 1 + i % 16, list});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(engine_->Stats(a_.vm)->host_bytes, with_one) << i;  // reused
    ASSERT_EQ(engine_->DeregMr(a_.vm, again->handle), Status::kOk);
  }
  // More pages than any kept array: a new one.
  Result<RegMrResult> big = engine_->AllocMr(a_.vm, {a_.pd, 32, list});
  ASSERT_TRUE(big.ok());
  EXPECT_GE(engine_->Stats(a_.vm)->host_bytes - with_one, 32 * sizeof(FrPage));
}

TEST_F(EngineFrTest, FrMrQuotaIsTheVmsOwn) {
  Guest c{0x80000000};
  VmConfig cfg;
  cfg.name = "vm3";
  cfg.gids = {testing::MakeGid(3)};
  cfg.quotas.kernel_verbs = true;
  cfg.quotas.max_fr_mr = 2;
  Result<VmId> vm = engine_->AttachVm(cfg, &c.sink);
  ASSERT_TRUE(vm.ok());
  engine_->SetGuestMemory(*vm, c.env.memory());
  const uint32_t pd = *engine_->CreatePd(*vm);
  const uint64_t list = c.env.AllocPages(1);
  EXPECT_TRUE(engine_->AllocMr(*vm, {pd, 4, list}).ok());
  EXPECT_TRUE(engine_->AllocMr(*vm, {pd, 4, list}).ok());
  EXPECT_EQ(engine_->AllocMr(*vm, {pd, 4, list}).status(), Status::kNoResource);
  // Another VM is not affected.
  EXPECT_TRUE(engine_->AllocMr(a_.vm, {a_.pd, 4, a_.env.AllocPages(1)}).ok());
}

// A registered, valid MR goes with its VM: DetachVm gives the RNIC's back.
TEST_F(EngineFrTest, DetachReleasesRegisteredMrs) {
  const uint64_t page = a_.env.AllocPages(1);
  Fr fr = AllocFr(a_, 1);
  WriteList(a_, fr, {page});
  ASSERT_EQ(Run(a_, RegMr(fr, 8, kIova, 4096)).status, kOk);
  (void)AllocFr(b_, 1);
  EXPECT_EQ(soft_rnic_.ObjectCounts().fr_mrs, 2u);
  engine_->DetachVm(a_.vm);
  EXPECT_EQ(soft_rnic_.ObjectCounts().fr_mrs, 1u);  // b's stays
}

}  // namespace
}  // namespace vrdma::engine
