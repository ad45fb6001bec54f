// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Hardening against a hostile or unlucky VM, on a FakeRnic: host CQs sized
// so they cannot overflow (cq_sizing.h), a host CQ the RNIC fails anyway
// (its QPs to ERR, the data path idle), flush work under a per-VM
// per-turn budget, and flushes of hostile WQEs read through the decoder.
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <span>
#include <vector>

#include "backend/engine/cq_sizing.h"
#include "backend/engine/engine_impl.h"
#include "backend/engine/testing/engine_fixture.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {
namespace {

using testing::DrainCq;
using testing::EngineTest;
using testing::GuestEnv;
using testing::GuestRingRef;
using testing::GuestSend;
using testing::MakeGid;
using testing::RecordingSink;
using testing::Rig;

// ------------------------------------------------------- the sizing rule

TEST(CqSizing, DemandIsStageRecordsPlusReceiveDepth) {
  // Send side: the flow's records (twice the host SQ depth, power of two).
  sched::FlowSpec f;
  f.rnic_depth = 15;
  const uint32_t records = sched::Stage::RecordCapacity(f);
  EXPECT_EQ(records, 32u);
  EXPECT_EQ(QpCqDemand(/*sends_here=*/true, records, /*recv_depth=*/15), 47u);
  EXPECT_EQ(QpCqDemand(/*sends_here=*/true, records, 0), 32u);
  EXPECT_EQ(QpCqDemand(/*sends_here=*/false, records, 15), 15u);
}

TEST(CqSizing, RequiredDepthGrowsOrRefuses) {
  EXPECT_EQ(RequiredCqDepth(10, 20, 31, 65535), 31u);        // fits: unchanged
  EXPECT_EQ(RequiredCqDepth(10, 22, 31, 65535), 32u);        // grows to the sum
  EXPECT_EQ(RequiredCqDepth(65000, 536, 65535, 65535), 0u);  // beyond max
  EXPECT_EQ(RequiredCqDepth(0, uint64_t{1} << 33, 31, 65535), 0u);
}

TEST_F(EngineTest, HostCqGrowsToItsQpsWorstCaseOrTheQpIsRefused) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm, QpType::kRc, /*rts=*/false);
  // Guest CQs of 31 CQEs; the QP's SQ ring holds 15 (host SQ depth 15,
  // 32 stage records), its RQ 15.
  const uint32_t scq = rnic_.qps.at(r.qpn).init.send_cq.id;
  const uint32_t rcq = rnic_.qps.at(r.qpn).init.recv_cq.id;
  EXPECT_EQ(rnic_.cq_depths.at(scq), 32u) << "grown to the records";
  EXPECT_EQ(rnic_.cq_depths.at(rcq), 31u) << "15 receives fit";
  // A second QP on the same CQs needs 64 / 30: the send CQ must grow.
  rnic_.resize_supported = false;
  Rig r2 = r;
  const size_t qps_before = rnic_.qps.size();
  Result<CreateQpResult> q = engine_->CreateQp(vm, QpReq(r2, env, QpType::kRc));
  EXPECT_EQ(q.status(), Status::kNoResource);
  EXPECT_EQ(rnic_.qps.size(), qps_before) << "refused before the RNIC QP";
  EXPECT_EQ(rnic_.cq_depths.at(scq), 32u);
  // Where the RNIC can resize, it grows instead.
  rnic_.resize_supported = true;
  q = engine_->CreateQp(vm, QpReq(r2, env, QpType::kRc));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(rnic_.cq_depths.at(scq), 64u);
  EXPECT_EQ(rnic_.cq_depths.at(rcq), 31u);
  // Destroying a QP gives its demand back: a third fits without growing.
  ASSERT_EQ(engine_->DestroyQp(vm, q->qpn), Status::kOk);
  rnic_.resize_supported = false;
  EXPECT_TRUE(engine_->CreateQp(vm, QpReq(r2, env, QpType::kRc)).ok());
}

// ------------------------------------------- a host CQ the RNIC fails

TEST_F(EngineTest, RnicCqErrorFailsItsQpsAndTheDataPathGoesIdle) {
  GuestEnv env;
  RecordingSink sink_a, sink_b;
  VmId a = Attach(env, {MakeGid(1)}, &sink_a);
  VmId b = Attach(env, {MakeGid(2)}, &sink_b);
  Rig ra = MakeRig(env, a);
  Rig rb = MakeRig(env, b);
  Poll();
  // A's signaled WR is on the RNIC; its host send CQ then fails (an
  // overflow): the completion it owed never comes.
  testing::PostSend(ra.sq,
                    GuestSend{.wr_id = 7, .sges = {{ra.iova, 8, ra.lkey}}});
  engine_->Doorbell(a, VIRTIO_RDMA_DB_SQ, ra.qpn);
  Poll(1);
  ASSERT_EQ(rnic_.qps.at(ra.qpn).sends.size(), 1u);
  rnic_.qps.at(ra.qpn).sends.clear();  // executed; its completion lost
  rnic_.FailCq(rnic_.qps.at(ra.qpn).init.send_cq.id);
  bool busy = true;
  for (int i = 0; i < 5 && busy; ++i) busy = engine_->PollOnce();
  EXPECT_FALSE(busy) << "nothing is owed any more: the loop may sleep";
  EXPECT_FALSE(engine_->PollOnce());
  // The guest hears it: CQ_ERR on its CQ, QP_FATAL on the QP, the WR
  // flushed, and the counter.
  EXPECT_EQ(sink_a.Count(VIRTIO_RDMA_EV_CQ_ERR), 1);
  EXPECT_EQ(sink_a.Count(VIRTIO_RDMA_EV_QP_FATAL), 1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(ra.scq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(engine_->Stats(a)->rnic_cq_errors, 1u);
  Result<QueryQpResult> qa = engine_->QueryQp(a, ra.qpn);
  ASSERT_TRUE(qa.ok());
  EXPECT_EQ(qa->attr.state, QpState::kErr);
  // The failed CQ takes no QP again.
  Rig ra2 = ra;
  EXPECT_EQ(engine_->CreateQp(a, QpReq(ra2, env, QpType::kRc)).status(),
            Status::kBadState);
  // B is untouched and keeps working.
  EXPECT_EQ(sink_b.Count(VIRTIO_RDMA_EV_CQ_ERR), 0);
  EXPECT_EQ(sink_b.Count(VIRTIO_RDMA_EV_QP_FATAL), 0);
  EXPECT_EQ(engine_->Stats(b)->rnic_cq_errors, 0u);
  testing::PostSend(rb.sq,
                    GuestSend{.wr_id = 9, .sges = {{rb.iova, 8, rb.lkey}}});
  engine_->Doorbell(b, VIRTIO_RDMA_DB_SQ, rb.qpn);
  Poll(1);
  rnic_.CompleteSend(rb.qpn);
  Poll(1);
  wcs = DrainCq(rb.scq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 9u);
  EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kSuccess));
}

TEST_F(EngineTest, RnicRecvCqErrorFlushesThePostedReceives) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm);
  for (uint64_t i = 0; i < 3; ++i) {
    testing::PostRecv(r.rq, 50 + i, {{r.iova, 64, r.lkey}});
  }
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r.qpn);
  Poll(1);
  ASSERT_EQ(rnic_.qps.at(r.qpn).recvs.size(), 3u);
  rnic_.FailCq(rnic_.qps.at(r.qpn).init.recv_cq.id);
  Poll();
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_QP_FATAL), 1);
  // The receives the RNIC held are flushed though their completions were
  // lost, and the guest gets its RQ slots back.
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.rcq);
  ASSERT_EQ(wcs.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 50 + i);
    EXPECT_EQ(wcs[i].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  }
  EXPECT_EQ(r.rq.consumer(), 3u);
  EXPECT_FALSE(engine_->PollOnce()) << "nothing is owed any more";
}

// ------------------------------------------------ flush under a budget

TEST_F(EngineTest, FlushOfErroredRingsIsBudgetedPerVmPerTurn) {
  constexpr int kQps = 8;
  constexpr uint32_t kSq = 255, kRq = 15;
  constexpr uint32_t kBudget = 32;
  EngineOptions opts;
  opts.flush_budget = kBudget;
  engine_ = CreateEngine(rnic_, exec_, policy_, opts);
  GuestEnv env(16u << 20);
  VmId a = Attach(env, {MakeGid(1)});
  VmId b = Attach(env, {MakeGid(2)});
  rnic_.auto_complete = true;
  Rig rb = MakeRig(env, b);
  // A: kQps QPs with full rings, in INIT (nothing posted to the RNIC).
  Rig ra;
  ra.vm = a;
  ra.pd = *engine_->CreatePd(a);
  ra.scq_h = engine_->CreateCq(a, Cq(ra.scq, env, 12))->handle;
  ra.rcq_h = engine_->CreateCq(a, Cq(ra.rcq, env, 12))->handle;
  std::vector<GuestRingRef> sqs(kQps), rqs(kQps);
  std::vector<uint32_t> qpns;
  for (int i = 0; i < kQps; ++i) {
    CreateQpRequest q;
    q.pd = ra.pd;
    q.send_cq = ra.scq_h;
    q.recv_cq = ra.rcq_h;
    q.caps = {kSq, kRq, 1, 1, 0};
    sqs[i] = GuestRingRef(env, 8, 8);
    rqs[i] = GuestRingRef(env, 4, 6);
    q.sq = sqs[i].spec;
    q.rq = rqs[i].spec;
    Result<CreateQpResult> r = engine_->CreateQp(a, q);
    ASSERT_TRUE(r.ok()) << StatusName(r.status());
    qpns.push_back(r->qpn);
    for (uint32_t k = 0; k < kSq; ++k) {
      testing::PostSend(sqs[i], GuestSend{.wr_id = k});  // garbage is fine
    }
    for (uint32_t k = 0; k < kRq; ++k) testing::PostRecv(rqs[i], k, {});
  }
  Poll(1);
  for (uint32_t qpn : qpns) {
    ModifyQpRequest m;
    m.qpn = qpn;
    m.mask = VIRTIO_RDMA_QP_STATE;
    m.state = QpState::kErr;
    ASSERT_EQ(engine_->ModifyQp(a, m), Status::kOk);
  }
  const uint64_t total = kQps * (kSq + kRq);
  const uint64_t budget = kBudget;
  uint64_t written = engine_->Stats(a)->cqes_written;
  ASSERT_EQ(written, 0u);
  // B posts a WR while A's flood is flushed: it completes within a few
  // turns, long before A's flush is done.
  testing::PostSend(rb.sq,
                    GuestSend{.wr_id = 42, .sges = {{rb.iova, 8, rb.lkey}}});
  engine_->Doorbell(b, VIRTIO_RDMA_DB_SQ, rb.qpn);
  int b_done_at = -1;
  int turns = 0;
  for (; written < total && turns < 1000; ++turns) {
    engine_->PollOnce();
    const uint64_t now = engine_->Stats(a)->cqes_written;
    ASSERT_LE(now - written, budget) << "turn " << turns;
    written = now;
    if (b_done_at < 0 && !DrainCq(rb.scq).empty()) b_done_at = turns;
  }
  EXPECT_EQ(written, total) << "everything is flushed eventually";
  EXPECT_GE(turns, static_cast<int>(total / budget));
  ASSERT_GE(b_done_at, 0);
  EXPECT_LE(b_done_at, 2);
  EXPECT_GT(engine_->Stats(a)->flush_deferred, 0u);
  std::vector<ib_uverbs_wc> s = DrainCq(ra.scq), r = DrainCq(ra.rcq);
  EXPECT_EQ(s.size(), uint64_t{kQps} * kSq);
  EXPECT_EQ(r.size(), uint64_t{kQps} * kRq);
  for (const ib_uverbs_wc& wc : s) {
    EXPECT_EQ(wc.status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  }
  for (int i = 0; i < kQps; ++i) {
    EXPECT_EQ(sqs[i].consumer(), kSq);
    EXPECT_EQ(rqs[i].consumer(), kRq);
  }
  EXPECT_FALSE(engine_->PollOnce()) << "idle once flushed";
}

// ----------------------------------- flushes read WQEs through the decoder

// A QP in ERR flushes what the guest left in its rings. Each CQE reports
// what the decoder says of the WQE (DecodeSendFlush / DecodeRecvFlush), not
// raw ring bytes: an opcode the QP may not use reports SEND, as the error
// CQE of the same WQE would in RTS.
TEST_F(EngineTest, FlushOfHostileWqesReportsWhatTheDecoderSays) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  const uint32_t ops[] = {IB_UVERBS_WR_SEND,
                          IB_UVERBS_WR_RDMA_WRITE,
                          IB_UVERBS_WR_RDMA_READ,
                          IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD,
                          static_cast<uint32_t>(WrOpcode::kWait),  // host-only
                          0xffffffffu};
  // By QP type, the opcode each flush CQE must carry.
  const uint32_t rc[] = {IB_UVERBS_WC_SEND,      IB_UVERBS_WC_RDMA_WRITE,
                         IB_UVERBS_WC_RDMA_READ, IB_UVERBS_WC_FETCH_ADD,
                         IB_UVERBS_WC_SEND,      IB_UVERBS_WC_SEND};
  const uint32_t ud[] = {IB_UVERBS_WC_SEND, IB_UVERBS_WC_SEND,
                         IB_UVERBS_WC_SEND, IB_UVERBS_WC_SEND,
                         IB_UVERBS_WC_SEND, IB_UVERBS_WC_SEND};
  for (QpType type : {QpType::kRc, QpType::kUd}) {
    SCOPED_TRACE(static_cast<int>(type));
    Rig r = MakeRig(env, vm, type);
    ModifyQpRequest m;
    m.qpn = r.qpn;
    m.mask = VIRTIO_RDMA_QP_STATE;
    m.state = QpState::kErr;
    ASSERT_EQ(engine_->ModifyQp(vm, m), Status::kOk);
    SendQueueLimits limits;
    limits.type = type;
    std::vector<FlushedWqe> decoded;
    for (size_t i = 0; i < std::size(ops); ++i) {
      const uint32_t slot = r.sq.producer();
      // Unknown flags, absurd SGE count: none of it may matter.
      testing::PostSend(r.sq, GuestSend{.wr_id = 0xbad0 + i,
                                        .opcode = ops[i],
                                        .flags = 0xffffffffu,
                                        .ah = 0xdead});
      uint32_t n = 0xffffffffu;
      std::memcpy(r.sq.elem(slot) + send_wqe::kDmaNumSge, &n, 4);
      decoded.push_back(DecodeSendFlush(
          std::span<const uint8_t, kSendFlushBytes>(r.sq.elem(slot),
                                                    kSendFlushBytes),
          limits));
    }
    const uint32_t rslot = r.rq.producer();
    testing::PostRecv(r.rq, 0xbeef, {});
    uint32_t n = 0xffffffffu;
    std::memcpy(r.rq.elem(rslot) + recv_wqe::kDmaNumSge, &n, 4);
    engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
    Poll();
    std::vector<ib_uverbs_wc> s = DrainCq(r.scq);
    ASSERT_EQ(s.size(), std::size(ops));
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(s[i].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
      EXPECT_EQ(s[i].wr_id, 0xbad0 + i);
      EXPECT_EQ(s[i].wr_id, decoded[i].wr_id);
      EXPECT_EQ(s[i].opcode, static_cast<uint32_t>(decoded[i].opcode)) << i;
      EXPECT_EQ(s[i].opcode, type == QpType::kUd ? ud[i] : rc[i]) << i;
    }
    std::vector<ib_uverbs_wc> rw = DrainCq(r.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 0xbeefu);
    EXPECT_EQ(rw[0].opcode, static_cast<uint32_t>(WcOpcode::kRecv));
    EXPECT_EQ(rw[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
    EXPECT_EQ(r.sq.consumer(), r.sq.producer());
    EXPECT_EQ(r.rq.consumer(), r.rq.producer());
  }
}

}  // namespace
}  // namespace vrdma::engine
