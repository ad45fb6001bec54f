// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// QP lifecycle on the data path: states that hold or flush work, destroy
// with completions in flight, CQ notification modes, VM table limits.
#include <gtest/gtest.h>

#include "backend/engine/testing/engine_fixture.h"

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

ModifyQpRequest To(uint32_t qpn, QpState s) {
  ModifyQpRequest m;
  m.qpn = qpn;
  m.mask = VIRTIO_RDMA_QP_STATE;
  m.state = s;
  return m;
}

TEST_F(EngineTest, WqesPostedBeforeRtsRunAtRts) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm, QpType::kRc, /*rts=*/false);
  testing::PostSend(r.sq, GuestSend{.wr_id = 1, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);  // in RESET: held
  Poll();
  EXPECT_TRUE(rnic_.qps.at(r.qpn).sends.empty());
  EXPECT_EQ(r.sq.consumer(), 0u);
  ToRts(r, QpType::kRc);
  Poll();  // no new doorbell needed
  ASSERT_EQ(rnic_.qps.at(r.qpn).sends.size(), 1u);
  EXPECT_EQ(r.sq.consumer(), 1u);
}

TEST_F(EngineTest, SqdHoldsAndRtsReleases) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm);
  ASSERT_EQ(engine_->ModifyQp(vm, To(r.qpn, QpState::kSqd)), Status::kOk);
  testing::PostSend(r.sq, GuestSend{.wr_id = 1, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  EXPECT_TRUE(rnic_.qps.at(r.qpn).sends.empty());
  ASSERT_EQ(engine_->ModifyQp(vm, To(r.qpn, QpState::kRts)), Status::kOk);
  Poll();
  EXPECT_EQ(rnic_.qps.at(r.qpn).sends.size(), 1u);
}

TEST_F(EngineTest, DestroyWithCompletionsInFlightDropsThem) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig a = MakeRig(env, vm);
  // A second QP sharing a's CQs.
  Rig b = a;
  CreateQpRequest q = QpReq(b, env, QpType::kRc);
  b.qpn = engine_->CreateQp(vm, q)->qpn;
  ToRts(b, QpType::kRc);
  Poll();
  testing::PostSend(a.sq,
                    GuestSend{.wr_id = 0xa, .sges = {{a.iova, 8, a.lkey}}});
  testing::PostSend(b.sq,
                    GuestSend{.wr_id = 0xb, .sges = {{a.iova, 8, a.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, a.qpn);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, b.qpn);
  Poll(1);
  // Both complete on the RNIC, then a is destroyed before the CQ is polled.
  const uint32_t rnic_cq = rnic_.qps.at(a.qpn).init.send_cq.id;
  rnic_.CompleteSend(a.qpn);
  rnic_.CompleteSend(b.qpn);
  ASSERT_EQ(rnic_.cqs.at(rnic_cq).size(), 2u);
  ASSERT_EQ(engine_->DestroyQp(vm, a.qpn), Status::kOk);
  EXPECT_EQ(engine_->DestroyQp(vm, a.qpn), Status::kBadHandle);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, a.qpn);  // stale qpn: ignored
  Poll();
  std::vector<ib_uverbs_wc> wcs = DrainCq(a.scq);
  ASSERT_EQ(wcs.size(), 1u);  // a's completion had a stale cookie
  EXPECT_EQ(wcs[0].wr_id, 0xbu);
  EXPECT_EQ(wcs[0].qp_num, b.qpn);
  EXPECT_EQ(engine_->Stats(vm)->qps, 1u);
  EXPECT_EQ(engine_->DestroyCq(vm, a.scq_h), Status::kBusy);  // b still uses it
  ASSERT_EQ(engine_->DestroyQp(vm, b.qpn), Status::kOk);
  EXPECT_EQ(engine_->DestroyCq(vm, a.scq_h), Status::kOk);
}

TEST_F(EngineTest, SolicitedArmIgnoresSuccessfulSends) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm);
  Poll();
  // One CQ for both directions to see the difference.
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_CQ_ARM_SOLICITED, r.scq_h);
  testing::PostSend(r.sq, GuestSend{.wr_id = 1, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(1);
  rnic_.CompleteSend(r.qpn);
  Poll(1);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_CQ_COMP), 0);
  ASSERT_EQ(DrainCq(r.scq).size(), 1u);
  // An error completion is always solicited.
  testing::PostSend(r.sq, GuestSend{.wr_id = 2, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(1);
  rnic_.CompleteSend(r.qpn, WcStatus::kRemAccessErr);
  Poll(2);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_CQ_COMP), 1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kRemAccessErr));
  // The RNIC put the QP in ERR; the engine follows: later WQEs flush.
  testing::PostSend(r.sq, GuestSend{.wr_id = 3, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 3u);
  EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(engine_->QueryQp(vm, r.qpn)->attr.state, QpState::kErr);
  // Unknown doorbell kinds and handles are counted, not acted on.
  engine_->Doorbell(vm, 0, r.qpn);
  engine_->Doorbell(vm, 99, r.qpn);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_CQ_ARM, 0);
  engine_->Doorbell(0xffffffff, VIRTIO_RDMA_DB_SQ, r.qpn);
}

TEST_F(EngineTest, ResetAfterErrorReusesTheRings) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm);
  testing::PostRecv(r.rq, 1, {{r.iova, 64, r.lkey}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r.qpn);
  ASSERT_EQ(rnic_.qps.at(r.qpn).recvs.size(), 1u);
  ASSERT_EQ(engine_->ModifyQp(vm, To(r.qpn, QpState::kErr)), Status::kOk);
  Poll();
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.rcq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(r.rq.consumer(), 1u);
  ASSERT_EQ(engine_->ModifyQp(vm, To(r.qpn, QpState::kReset)), Status::kOk);
  // A receive posted in RESET waits for RTR.
  testing::PostRecv(r.rq, 2, {{r.iova, 64, r.lkey}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r.qpn);
  Poll();
  EXPECT_TRUE(rnic_.qps.at(r.qpn).recvs.empty());
  ToRts(r, QpType::kRc);
  ASSERT_EQ(rnic_.qps.at(r.qpn).recvs.size(), 1u);
  rnic_.CompleteRecv(r.qpn, 5);
  Poll();
  wcs = DrainCq(r.rcq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 2u);
  EXPECT_EQ(wcs[0].status, 0u);
  EXPECT_EQ(r.rq.consumer(), 2u);
}

TEST_F(EngineTest, VmTableIsBounded) {
  EngineOptions o;
  o.max_vms = 2;
  engine_ = CreateEngine(rnic_, exec_, policy_, o);
  VmConfig c;
  c.gids = {MakeGid(1)};
  Result<VmId> a = engine_->AttachVm(c, nullptr);
  c.gids = {MakeGid(2)};
  Result<VmId> b = engine_->AttachVm(c, nullptr);
  c.gids = {MakeGid(3)};
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(), Status::kNoResource);
  EXPECT_EQ(rnic_.gids.count(MakeGid(3)), 0u);  // nothing left behind
  engine_->DetachVm(*a);
  Result<VmId> d = engine_->AttachVm(c, nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(*d, *a);  // a new generation: the old id stays dead
  EXPECT_EQ(engine_->CreatePd(*a).status(), Status::kBadHandle);
  Quotas q;
  q.max_qp = 1u << 17;  // beyond a table
  c.quotas = q;
  c.gids = {MakeGid(4)};
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(), Status::kInvalid);
}

}  // namespace
}  // namespace vrdma::engine
