// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The scheduler stage's pieces, end to end through the engine and SoftRnic
// between two VMs: the guest never sees them. One CQE per guest WR after
// its last piece, the bytes where they belong at the receiver (a split
// SEND put back together in one receive WQE), unsignaled WRs silent, an
// error in a piece reported once, and WRs that must not be split kept
// whole. docs/scheduler.md, "Split".
#include <gtest/gtest.h>

#include <cstring>

#include "backend/engine/testing/soft_rnic_guests.h"
#include "policy/pass_through_policy.h"

namespace vrdma::engine {
namespace {

using testing::DrainCq;
using testing::EngineSoftRnicTest;
using testing::Guest;
using testing::GuestSend;
using testing::kBufPages;

constexpr uint32_t kChunk = 4096;

// Splits every flow's WRs into kChunk pieces, at most two outstanding.
class SplitEverything : public policy::PassThroughPolicy {
 public:
  std::string_view name() const override { return "split-everything"; }
  void OnFlowAdded(policy::Nanos, const policy::FlowInfo& f) override {
    policy::FlowControl c;
    c.chunk_bytes = kChunk;
    c.window_bytes = 2 * kChunk;
    mech().Configure(f.flow, c);
  }
  void OnCompleted(policy::Nanos, const policy::WrInfo&, policy::Nanos,
                   bool) override {
    ++completed;
  }
  int completed = 0;
};

class EngineSplitTest : public EngineSoftRnicTest {
 protected:
  void SetUp() override {
    EngineSoftRnicTest::SetUp();
    UsePolicy(split_);
    AddGuest(a_, 1);
    AddGuest(b_, 2);
    Connect(a_, b_, QpType::kRc);
  }
  void TearDown() override { engine_.reset(); }  // before split_
  uint64_t Pieces() { return engine_->Stats(a_.vm)->sched.pieces_posted; }
  void Ring() { engine_->Doorbell(a_.vm, VIRTIO_RDMA_DB_SQ, a_.qpn); }

  SplitEverything split_;
  Guest a_{0x100000}, b_{0x40000000};
};

TEST_F(EngineSplitTest, WriteGoesInPiecesAndCompletesOnce) {
  const uint32_t len = 3 * kChunk + 100;
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa1,
                                     .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                     .remote_addr = b_.iova + 77,
                                     .rkey = b_.rkey,
                                     .sges = {{a_.iova + 5, 1000, a_.lkey},
                                              {a_.iova + 3000, len - 1000, a_.lkey}}});
  Ring();
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a_.scq, sa, 1)));
  for (int i = 0; i < 100; ++i) engine_->PollOnce();
  for (const ib_uverbs_wc& wc : DrainCq(a_.scq)) sa.push_back(wc);
  ASSERT_EQ(sa.size(), 1u) << "one CQE for the guest's WR";
  EXPECT_EQ(sa[0].wr_id, 0xa1u);
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(sa[0].opcode, static_cast<uint32_t>(WcOpcode::kRdmaWrite));
  EXPECT_EQ(Pieces(), 4u);
  EXPECT_EQ(std::memcmp(b_.buf() + 77, a_.buf() + 5, 1000), 0);
  EXPECT_EQ(std::memcmp(b_.buf() + 77 + 1000, a_.buf() + 3000, len - 1000), 0);
  EXPECT_EQ(split_.completed, 1);
}

TEST_F(EngineSplitTest, ReadGoesInPiecesAndFillsTheLocalBuffer) {
  const uint32_t len = 2 * kChunk + 1234;
  std::memset(a_.buf() + 100, 0, len);
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa2,
                                     .opcode = IB_UVERBS_WR_RDMA_READ,
                                     .remote_addr = b_.iova + 50,
                                     .rkey = b_.rkey,
                                     .sges = {{a_.iova + 100, len, a_.lkey}}});
  Ring();
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a_.scq, sa, 1)));
  ASSERT_EQ(sa.size(), 1u);
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(sa[0].opcode, static_cast<uint32_t>(WcOpcode::kRdmaRead));
  EXPECT_EQ(sa[0].byte_len, len);
  EXPECT_EQ(Pieces(), 3u);
  EXPECT_EQ(std::memcmp(a_.buf() + 100, b_.buf() + 50, len), 0);
}

TEST_F(EngineSplitTest, SendIsPutBackTogetherInOneReceive) {
  const uint32_t big = 2 * kChunk + 3000;
  // B's receive spans two SGEs whose boundary falls inside a piece; a
  // second receive takes the small SEND that follows the split one.
  testing::PostRecv(b_.rq, 0xb1, {{b_.iova + 10, 5000, b_.lkey},
                                  {b_.iova + 8000, 7000, b_.lkey}});
  testing::PostRecv(b_.rq, 0xb2, {{b_.iova + 15500, 200, b_.lkey}});
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa3,
                                     .opcode = IB_UVERBS_WR_SEND_WITH_IMM,
                                     .imm = 0x0a0b0c0d,
                                     .sges = {{a_.iova, big, a_.lkey}}});
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa4,
                                     .sges = {{a_.iova + 13000, 150, a_.lkey}}});
  Ring();
  std::vector<ib_uverbs_wc> sa, rb;
  ASSERT_TRUE(RunUntil(
      [&] { return Collect(a_.scq, sa, 2)() && Collect(b_.rcq, rb, 2)(); }));
  ASSERT_EQ(rb.size(), 2u);
  EXPECT_EQ(rb[0].wr_id, 0xb1u);
  EXPECT_EQ(rb[0].status, 0u);
  EXPECT_EQ(rb[0].byte_len, big);
  EXPECT_EQ(rb[0].ex.imm_data, 0x0a0b0c0du);
  EXPECT_TRUE(rb[0].wc_flags & kWcWithImm);
  EXPECT_EQ(rb[1].wr_id, 0xb2u);
  EXPECT_EQ(rb[1].byte_len, 150u);
  EXPECT_EQ(std::memcmp(b_.buf() + 10, a_.buf(), 5000), 0);
  EXPECT_EQ(std::memcmp(b_.buf() + 8000, a_.buf() + 5000, big - 5000), 0);
  EXPECT_EQ(std::memcmp(b_.buf() + 15500, a_.buf() + 13000, 150), 0);
  ASSERT_EQ(sa.size(), 2u);
  EXPECT_EQ(sa[0].wr_id, 0xa3u);
  EXPECT_EQ(sa[1].wr_id, 0xa4u);
  EXPECT_EQ(Pieces(), 3u + 1u);
  EXPECT_EQ(b_.rq.consumer(), 2u);
}

TEST_F(EngineSplitTest, WriteWithImmediateReportsTheWholeLength) {
  const uint32_t len = kChunk * 2 + 512;
  testing::PostRecv(b_.rq, 0xb5, {});
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa5,
                                     .opcode = IB_UVERBS_WR_RDMA_WRITE_WITH_IMM,
                                     .imm = 0x11223344,
                                     .remote_addr = b_.iova + 1,
                                     .rkey = b_.rkey,
                                     .sges = {{a_.iova + 2, len, a_.lkey}}});
  Ring();
  std::vector<ib_uverbs_wc> sa, rb;
  ASSERT_TRUE(RunUntil(
      [&] { return Collect(a_.scq, sa, 1)() && Collect(b_.rcq, rb, 1)(); }));
  EXPECT_EQ(sa[0].status, 0u);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].status, 0u);
  EXPECT_EQ(rb[0].opcode, static_cast<uint32_t>(WcOpcode::kRecvRdmaWithImm));
  EXPECT_EQ(rb[0].byte_len, len);
  EXPECT_EQ(rb[0].ex.imm_data, 0x11223344u);
  EXPECT_EQ(Pieces(), 3u);
  EXPECT_EQ(std::memcmp(b_.buf() + 1, a_.buf() + 2, len), 0);
}

TEST_F(EngineSplitTest, UnsignaledWrStaysSilent) {
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa6,
                                     .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                     .flags = 0,
                                     .remote_addr = b_.iova,
                                     .rkey = b_.rkey,
                                     .sges = {{a_.iova, 3 * kChunk, a_.lkey}}});
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa7,
                                     .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                     .remote_addr = b_.iova + 3 * kChunk,
                                     .rkey = b_.rkey,
                                     .sges = {{a_.iova, 64, a_.lkey}}});
  Ring();
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a_.scq, sa, 1)));
  for (int i = 0; i < 200; ++i) engine_->PollOnce();
  for (const ib_uverbs_wc& wc : DrainCq(a_.scq)) sa.push_back(wc);
  ASSERT_EQ(sa.size(), 1u) << "the stage's own signals stay its own";
  EXPECT_EQ(sa[0].wr_id, 0xa7u);
  EXPECT_EQ(split_.completed, 2) << "the policy sees both";
  EXPECT_EQ(std::memcmp(b_.buf(), a_.buf(), 3 * kChunk), 0);
}

TEST_F(EngineSplitTest, ErrorInAPieceIsReportedOnceAndTheQpFails) {
  // The last piece runs past the end of B's MR: the responder refuses it.
  const uint32_t len = 3 * kChunk;
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa8,
                                     .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                     .remote_addr = b_.iova + kBufPages * 4096 - 2 * kChunk,
                                     .rkey = b_.rkey,
                                     .sges = {{a_.iova, len, a_.lkey}}});
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa9,
                                     .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                     .remote_addr = b_.iova,
                                     .rkey = b_.rkey,
                                     .sges = {{a_.iova, 8, a_.lkey}}});
  Ring();
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a_.scq, sa, 2)));
  for (int i = 0; i < 200; ++i) engine_->PollOnce();
  for (const ib_uverbs_wc& wc : DrainCq(a_.scq)) sa.push_back(wc);
  ASSERT_EQ(sa.size(), 2u) << "one report per guest WR, not per piece";
  EXPECT_EQ(sa[0].wr_id, 0xa8u);
  EXPECT_EQ(sa[0].status, static_cast<uint32_t>(WcStatus::kRemAccessErr));
  EXPECT_EQ(sa[1].wr_id, 0xa9u);
  EXPECT_EQ(sa[1].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(engine_->QueryQp(a_.vm, a_.qpn)->attr.state, QpState::kErr);
}

TEST_F(EngineSplitTest, InlineAndAtomicsAreNeverSplit) {
  std::vector<uint8_t> data(100, 0x5a);
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xaa,
                                     .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                     .flags = kSendSignaled | kSendInline,
                                     .remote_addr = b_.iova + 9000,
                                     .rkey = b_.rkey,
                                     .inline_data = data});
  Ring();
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a_.scq, sa, 1)));
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(Pieces(), 1u);
  EXPECT_EQ(std::memcmp(b_.buf() + 9000, data.data(), data.size()), 0);
}

// A receiver on an SRQ can be fed by any QP: it cannot be told about the
// pieces in order, so a SEND to it is not split (it goes whole, in its
// turn).
TEST_F(EngineSoftRnicTest, SendToAnSrqIsNotSplit) {
  SplitEverything split;
  UsePolicy(split);
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  CreateSrqRequest sr;
  sr.pd = b.pd;
  sr.max_wr = 8;
  sr.max_sge = 2;
  testing::GuestRingRef srq_ring(b.env, 4, 7);  // 15 WQEs
  sr.ring = srq_ring.spec;
  Result<CreateSrqResult> srq = engine_->CreateSrq(b.vm, sr);
  ASSERT_TRUE(srq.ok());
  CreateQpRequest q;
  q.pd = b.pd;
  q.type = QpType::kRc;
  q.send_cq = b.scq_h;
  q.recv_cq = b.rcq_h;
  q.srq = srq->handle;
  q.caps = {32, 0, 4, 0, 128};
  testing::GuestRingRef sq(b.env, 6, 9);
  q.sq = sq.spec;
  Result<CreateQpResult> bq = engine_->CreateQp(b.vm, q);
  ASSERT_TRUE(bq.ok());
  Guest bs = Guest(0);
  bs.vm = b.vm;
  bs.qpn = bq->qpn;
  bs.gid = b.gid;
  Connect(a, bs, QpType::kRc);
  testing::PostRecv(srq_ring, 0xb9, {{b.iova, 12000, b.lkey}});
  engine_->Doorbell(b.vm, VIRTIO_RDMA_DB_SRQ, srq->handle);
  testing::PostSend(a.sq, GuestSend{.wr_id = 0xab, .sges = {{a.iova, 10000, a.lkey}}});
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
  std::vector<ib_uverbs_wc> sa, rb;
  ASSERT_TRUE(RunUntil(
      [&] { return Collect(a.scq, sa, 1)() && Collect(b.rcq, rb, 1)(); }));
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(rb[0].byte_len, 10000u);
  EXPECT_EQ(engine_->Stats(a.vm)->sched.pieces_posted, 1u);
  EXPECT_EQ(std::memcmp(b.buf(), a.buf(), 10000), 0);
  engine_.reset();
}

// Receive credits in one daemon (docs/scheduler.md): under a policy that
// holds sends, a SEND to a local QP whose guest has posted no receive
// waits in the stage instead of meeting RNR on the RNIC, and goes when the
// guest posts one; natively it goes at once.
class HoldSends : public policy::SchedulerPolicy {
 public:
  std::string_view name() const override { return "hold-sends"; }
  bool HoldsSendsWithoutReceive() const override { return true; }
  void OnTenantAdded(policy::TenantId, const policy::TenantQos&) override {}
  void OnTenantQosChanged(policy::TenantId, const policy::TenantQos&) override {}
  void OnTenantRemoved(policy::TenantId) override {}
  void OnFlowAdded(policy::Nanos, const policy::FlowInfo&) override {}
  void OnFlowEnded(policy::Nanos, policy::FlowId, policy::FlowEnd) override {}
  void OnArrival(policy::Nanos, const policy::WrInfo&) override {}
  void OnCompleted(policy::Nanos, const policy::WrInfo&, policy::Nanos, bool) override {}
};

class ReceiveCreditTest : public EngineSoftRnicTest,
                          public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    EngineSoftRnicTest::SetUp();
    if (GetParam()) UsePolicy(hold_);
    AddGuest(a_, 1);
    AddGuest(b_, 2);
    BringUp(a_, QpType::kRc, &b_);  // rnr_retry 7: retries for ever
    BringUp(b_, QpType::kRc, &a_);
  }
  void TearDown() override { engine_.reset(); }  // before hold_

  HoldSends hold_;
  Guest a_{0x100000}, b_{0x40000000};
};

TEST_P(ReceiveCreditTest, ASendWaitsForItsReceiveOnlyWhenThePolicyHolds) {
  const bool holds = GetParam();
  testing::PostSend(a_.sq, GuestSend{.wr_id = 0xa1, .sges = {{a_.iova, 300, a_.lkey}}});
  engine_->Doorbell(a_.vm, VIRTIO_RDMA_DB_SQ, a_.qpn);
  for (int i = 0; i < 2000; ++i) engine_->PollOnce();
  const VmStats before = *engine_->Stats(a_.vm);
  // Held: never posted to the RNIC. Native: posted, meeting RNR there.
  EXPECT_EQ(before.sched.pieces_posted, holds ? 0u : 1u);
  EXPECT_EQ(before.sends_held_for_receive > 0, holds) << "the rule that fired";
  EXPECT_TRUE(DrainCq(a_.scq).empty());

  testing::PostRecv(b_.rq, 0xb1, {{b_.iova + 64, 512, b_.lkey}});  // no doorbell
  std::vector<ib_uverbs_wc> sa, rb;
  ASSERT_TRUE(RunUntil([&] { return Collect(a_.scq, sa, 1)() && Collect(b_.rcq, rb, 1)(); }));
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(rb[0].wr_id, 0xb1u);
  EXPECT_EQ(rb[0].byte_len, 300u);
  EXPECT_EQ(std::memcmp(b_.buf() + 64, a_.buf(), 300), 0);
  EXPECT_EQ(engine_->Stats(a_.vm)->sched.pieces_posted, 1u);
}

INSTANTIATE_TEST_SUITE_P(Policies, ReceiveCreditTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Holding" : "Native"; });

}  // namespace
}  // namespace vrdma::engine
