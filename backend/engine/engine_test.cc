// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Engine tests on a FakeRnic with memfd guest memory: control verbs and
// their checks, per-VM isolation (the data path: engine_datapath_test.cc).
#include "backend/engine/engine.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backend/engine/testing/engine_fixture.h"
#include "backend/rnic/testing/fake_rnic.h"
#include "backend/engine/testing/guest_env.h"
#include "policy/pass_through_policy.h"

namespace vrdma::engine {
namespace {

using testing::DoorbellOnlyEngineTest;
using testing::EngineTest;
using testing::FakeRnic;
using testing::GuestEnv;
using testing::GuestRingRef;
using testing::GuestSend;
using testing::kAll;
using testing::kLW;
using testing::MakeGid;
using testing::Rig;

// ------------------------------------------------------------ VM lifecycle

TEST_F(EngineTest, AttachChecksGids) {
  GuestEnv env(1 << 20);
  VmConfig c;
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(),
            Status::kInvalid);  // no GID
  c.gids.assign(9, MakeGid(1));
  for (int i = 0; i < 9; ++i) c.gids[i][15] = static_cast<uint8_t>(i + 1);
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(), Status::kInvalid);  // > 8
  c.gids = {Gid{}};
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(),
            Status::kInvalid);  // zero GID
  c.gids = {MakeGid(1), MakeGid(1)};
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(),
            Status::kInvalid);  // duplicate
  c.gids = {MakeGid(1), MakeGid(2)};
  Result<VmId> a = engine_->AttachVm(c, nullptr);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(rnic_.gids.size(), 2u);
  c.gids = {MakeGid(3), MakeGid(2)};  // GID 2 belongs to the first VM
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(), Status::kInvalid);
  EXPECT_EQ(*engine_->QueryGid(*a, 1), MakeGid(2));
  EXPECT_EQ(engine_->QueryGid(*a, 2).status(), Status::kInvalid);
  engine_->DetachVm(*a);
  EXPECT_TRUE(rnic_.gids.empty());
  EXPECT_TRUE(engine_->AttachVm(c, nullptr).ok());  // GIDs free again
  EXPECT_EQ(engine_->Stats(*a).status(), Status::kBadHandle);
}

TEST_F(EngineTest, QuotasAreEnforced) {
  GuestEnv env;
  Quotas q;
  q.max_pd = 2;
  q.max_cq = 1;
  q.max_mr = 1;
  q.max_pinned_bytes = 3 * 4096;
  VmId vm = Attach(env, {MakeGid(1)}, nullptr, q);
  uint32_t pd = *engine_->CreatePd(vm);
  ASSERT_TRUE(engine_->CreatePd(vm).ok());
  EXPECT_EQ(engine_->CreatePd(vm).status(), Status::kNoResource);

  RegMrRequest mr;
  mr.pd = pd;
  mr.length = 3 * 4096;
  mr.pages = GuestEnv::Pages(env.AllocPages(4), 4);
  mr.length = 4 * 4096;
  EXPECT_EQ(engine_->RegMr(vm, mr).status(), Status::kNoResource);  // pinned
  mr.pages.resize(2);
  mr.length = 2 * 4096;
  ASSERT_TRUE(engine_->RegMr(vm, mr).ok());
  EXPECT_EQ(engine_->RegMr(vm, mr).status(), Status::kNoResource);  // max_mr
  GuestRingRef cq;
  CreateCqRequest c = Cq(cq, env, 4);  // 384 + 1024: one page, 3 pinned total
  ASSERT_TRUE(engine_->CreateCq(vm, c).ok());
  EXPECT_EQ(engine_->CreateCq(vm, Cq(cq, env, 4)).status(),
            Status::kNoResource);
  VmStats s = *engine_->Stats(vm);
  EXPECT_EQ(s.pds, 2u);
  EXPECT_EQ(s.mrs, 1u);
  EXPECT_EQ(s.cqs, 1u);
  EXPECT_EQ(s.pinned_bytes, 3u * 4096);
}

// ------------------------------------------------------------ MRs

TEST_F(EngineTest, RegMrMapsExactlyTheGuestPages) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  uint32_t pd = *engine_->CreatePd(vm);
  // Two pages in reverse guest order: the view must follow the list.
  uint64_t a = env.AllocPages(1);
  uint64_t b = env.AllocPages(1);
  std::memset(env.host(a), 'A', 4096);
  std::memset(env.host(b), 'B', 4096);
  RegMrRequest r;
  r.pd = pd;
  r.access = kLW;
  r.iova = 0x1000;
  r.first_page_offset = 100;
  r.length = 5000;
  r.pages = {b, a};
  Result<RegMrResult> m = engine_->RegMr(vm, r);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->rkey, 0u);  // no remote access asked
  const FakeRnic::Mr& fm = rnic_.mrs.at(m->lkey);
  EXPECT_EQ(fm.length, 5000u);
  EXPECT_EQ(fm.iova, 0x1000u);
  EXPECT_EQ(fm.access, kLW);
  EXPECT_EQ(fm.addr[0], 'B');
  EXPECT_EQ(fm.addr[4095 - 100], 'B');
  EXPECT_EQ(fm.addr[4096 - 100], 'A');
  // Writes through the registration reach guest RAM.
  fm.addr[4096 - 100] = 'Z';
  EXPECT_EQ(*env.host(a), 'Z');
  ASSERT_EQ(engine_->DestroyPd(vm, pd), Status::kBusy);
  ASSERT_EQ(engine_->DeregMr(vm, m->handle), Status::kOk);
  EXPECT_TRUE(rnic_.mrs.empty());
  EXPECT_EQ(engine_->DeregMr(vm, m->handle), Status::kBadHandle);  // stale
  EXPECT_EQ(engine_->DestroyPd(vm, pd), Status::kOk);
  EXPECT_EQ(engine_->Stats(vm)->pinned_bytes, 0u);
}

TEST_F(EngineTest, RegMrRejectsBadRequests) {
  GuestEnv env(1 << 20);
  GuestEnv other(1 << 20, 0x10000000);
  VmId vm = Attach(env, {MakeGid(1)});
  VmId vm2 = Attach(other, {MakeGid(2)});
  uint32_t pd = *engine_->CreatePd(vm);
  (void)*engine_->CreatePd(vm2);
  uint32_t pd2 = *engine_->CreatePd(vm2);  // a slot VM 1 does not use
  uint64_t page = env.AllocPages(2);
  struct Case {
    const char* name;
    uint32_t pd;
    uint32_t access;
    uint64_t iova, length;
    uint32_t off;
    std::vector<uint64_t> pages;
    Status want;
  };
  const Case cases[] = {
      {"ok", pd, kLW, 0, 8192, 0, {page, page + 4096}, Status::kOk},
      {"foreign pd", pd2, kLW, 0, 4096, 0, {page}, Status::kBadHandle},
      {"pd 0", 0, kLW, 0, 4096, 0, {page}, Status::kBadHandle},
      {"remote write w/o local",
       pd,
       kAccessRemoteWrite,
       0,
       4096,
       0,
       {page},
       Status::kInvalid},
      {"beyond pages", pd, kLW, 0, 4097, 0, {page}, Status::kInvalid},
      {"wrapped length", pd, kLW, 0, ~0ull, 1, {page}, Status::kInvalid},
      {"iova wraps", pd, kLW, ~0ull, 2, 0, {page}, Status::kInvalid},
      {"unaligned page", pd, kLW, 0, 10, 0, {page + 8}, Status::kInvalid},
      {"page outside guest",
       pd,
       kLW,
       0,
       10,
       0,
       {env.end_gpa()},
       Status::kFault},
      {"page below guest", pd, kLW, 0, 10, 0, {0}, Status::kFault},
      {"other VM's page", pd, kLW, 0, 10, 0, {0x10000000}, Status::kFault},
      {"page straddles end",
       pd,
       kLW,
       0,
       8192,
       0,
       {page, env.end_gpa()},
       Status::kFault},
  };
  for (const Case& c : cases) {
    RegMrRequest r;
    r.pd = c.pd;
    r.access = c.access;
    r.iova = c.iova;
    r.length = c.length;
    r.first_page_offset = c.off;
    r.pages = c.pages;
    EXPECT_EQ(engine_->RegMr(vm, r).status(), c.want) << c.name;
  }
  EXPECT_EQ(engine_->Stats(vm)->mrs, 1u);
  EXPECT_EQ(engine_->Stats(vm)->pinned_bytes, 8192u);
}

// ------------------------------------------------------------ queues

TEST_F(EngineTest, RingGeometryChecked) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  GuestRingRef ring;
  CreateCqRequest c = Cq(ring, env, 4);
  c.cqe = 16;  // a 16-element ring holds 15
  EXPECT_EQ(engine_->CreateCq(vm, c).status(), Status::kInvalid);
  c = Cq(ring, env, 4);
  c.ring.log2_elem_size = 5;  // 32-byte CQEs
  EXPECT_EQ(engine_->CreateCq(vm, c).status(), Status::kInvalid);
  c = Cq(ring, env, 4);
  c.ring.log2_num_elem = 7;  // 384 + 8192 needs 3 pages
  EXPECT_EQ(engine_->CreateCq(vm, c).status(), Status::kInvalid);
  c = Cq(ring, env, 4);
  c.ring.pages = {env.end_gpa()};
  EXPECT_EQ(engine_->CreateCq(vm, c).status(), Status::kFault);

  Rig r;
  r.vm = vm;
  r.pd = *engine_->CreatePd(vm);
  r.scq_h = engine_->CreateCq(vm, Cq(r.scq, env))->handle;
  r.rcq_h = engine_->CreateCq(vm, Cq(r.rcq, env))->handle;
  struct Case {
    const char* name;
    void (*mutate)(CreateQpRequest&);
    Status want;
  };
  const Case cases[] = {
      {"ok", [](CreateQpRequest&) {}, Status::kOk},
      {"send_wr beyond ring",
       [](CreateQpRequest& q) { q.caps.max_send_wr = 16; }, Status::kInvalid},
      {"send_wr 0", [](CreateQpRequest& q) { q.caps.max_send_wr = 0; },
       Status::kInvalid},
      {"16 sges fit a 512-byte element",
       [](CreateQpRequest& q) { q.caps.max_send_sge = 16; }, Status::kOk},
      {"sges beyond device",
       [](CreateQpRequest& q) { q.caps.max_send_sge = 17; }, Status::kInvalid},
      {"inline beyond element",
       [](CreateQpRequest& q) { q.caps.max_inline_data = 256 + 64; },
       Status::kInvalid},
      {"inline beyond device",
       [](CreateQpRequest& q) { q.caps.max_inline_data = 100000; },
       Status::kInvalid},
      {"recv sge beyond element",
       [](CreateQpRequest& q) { q.caps.max_recv_sge = 6; }, Status::kInvalid},
      {"bad type", [](CreateQpRequest& q) { q.type = static_cast<QpType>(5); },
       Status::kInvalid},
      // The request's own rules come before its handles are looked up.
      {"rq pages with srq", [](CreateQpRequest& q) { q.srq = 1; },
       Status::kInvalid},
      {"bad send cq", [](CreateQpRequest& q) { q.send_cq = 12345; },
       Status::kBadHandle},
      {"bad pd", [](CreateQpRequest& q) { q.pd = q.pd + (1u << 16); },
       Status::kBadHandle},
      {"sq too many pages",
       [](CreateQpRequest& q) {
         q.sq.pages.push_back(q.sq.pages.back() + 4096);
       },
       Status::kInvalid},
  };
  for (const Case& c : cases) {
    CreateQpRequest q = QpReq(r, env, QpType::kRc);
    c.mutate(q);
    EXPECT_EQ(engine_->CreateQp(vm, q).status(), c.want) << c.name;
  }
  EXPECT_EQ(engine_->Stats(vm)->qps, 2u);
  EXPECT_EQ(engine_->DestroyCq(vm, r.scq_h), Status::kBusy);
}

TEST_F(DoorbellOnlyEngineTest, ForeignHandlesAreBadHandles) {
  GuestEnv e1, e2(8u << 20, 0x10000000);
  VmId v1 = Attach(e1, {MakeGid(1)});
  VmId v2 = Attach(e2, {MakeGid(2)});
  // Handles are per VM: the same number names different objects in two
  // VMs. Fill VM 1's first slots so its rig's handles are slots VM 2 has
  // never used.
  GuestRingRef filler;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine_->CreatePd(v1).ok());
    ASSERT_TRUE(engine_->CreateCq(v1, Cq(filler, e1, 1)).ok());
  }
  Rig a = MakeRig(e1, v1);
  Rig b = MakeRig(e2, v2);
  Poll();
  // VM 2 names VM 1's objects.
  CreateQpRequest q = QpReq(b, e2, QpType::kRc);
  q.send_cq = a.scq_h;
  EXPECT_EQ(engine_->CreateQp(v2, q).status(), Status::kBadHandle);
  q = QpReq(b, e2, QpType::kRc);
  q.pd = a.pd;
  EXPECT_EQ(engine_->CreateQp(v2, q).status(), Status::kBadHandle);
  EXPECT_EQ(engine_->DestroyCq(v2, a.rcq_h), Status::kBadHandle);
  EXPECT_EQ(engine_->DestroyPd(v2, a.pd), Status::kBadHandle);
  ModifyQpRequest m;
  m.qpn = a.qpn;
  m.mask = VIRTIO_RDMA_QP_STATE;
  m.state = QpState::kErr;
  EXPECT_EQ(engine_->ModifyQp(v2, m), Status::kBadHandle);
  EXPECT_EQ(engine_->QueryQp(v2, a.qpn).status(), Status::kBadHandle);
  EXPECT_EQ(engine_->DestroyQp(v2, a.qpn), Status::kBadHandle);
  EXPECT_EQ(engine_->DeregMr(v2, a.mr + 1), Status::kBadHandle);
  EXPECT_EQ(engine_->ReqNotifyCq(v2, 0xdead, false), Status::kBadHandle);
  EXPECT_EQ(engine_->CreatePd(12345).status(), Status::kBadHandle);
  // VM 1's QP is untouched.
  EXPECT_EQ(rnic_.qps.at(a.qpn).attr.state, QpState::kRts);

  // Doorbells naming the other VM's QP are ignored.
  testing::PostSend(a.sq, GuestSend{.wr_id = 1, .sges = {{a.iova, 8, a.lkey}}});
  engine_->Doorbell(v2, VIRTIO_RDMA_DB_SQ, a.qpn);
  Poll();
  EXPECT_TRUE(rnic_.qps.at(a.qpn).sends.empty());
  engine_->Doorbell(v1, VIRTIO_RDMA_DB_SQ, a.qpn);
  Poll();
  EXPECT_EQ(rnic_.qps.at(a.qpn).sends.size(), 1u);

  // A WQE naming the other VM's lkey is a protection error. As on a native
  // QP, it fails after the WR before it has completed, which is not
  // flushed for it.
  testing::PostSend(a.sq, GuestSend{.wr_id = 2, .sges = {{b.iova, 8, b.lkey}}});
  engine_->Doorbell(v1, VIRTIO_RDMA_DB_SQ, a.qpn);
  Poll();
  EXPECT_TRUE(DrainCq(a.scq).empty());
  EXPECT_EQ(rnic_.qps.at(a.qpn).attr.state, QpState::kRts);
  rnic_.CompleteSend(a.qpn);
  Poll();
  std::vector<ib_uverbs_wc> wcs = DrainCq(a.scq);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, 0u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, static_cast<uint32_t>(WcStatus::kLocProtErr));
  EXPECT_EQ(rnic_.qps.at(a.qpn).attr.state, QpState::kErr);
  EXPECT_EQ(engine_->Stats(v1)->wqes_rejected, 1u);
  EXPECT_EQ(rnic_.qps.at(b.qpn).attr.state, QpState::kRts);
}

// ------------------------------------------------------------ GIDs / AVs

TEST_F(EngineTest, SourceGidComesFromTheVmTable) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1), MakeGid(2)});
  Rig r = MakeRig(env, vm, QpType::kRc, /*rts=*/false);
  ModifyQpRequest m;
  m.qpn = r.qpn;
  m.state = QpState::kInit;
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX |
           VIRTIO_RDMA_QP_PORT | VIRTIO_RDMA_QP_ACCESS_FLAGS;
  ASSERT_EQ(engine_->ModifyQp(vm, m), Status::kOk);
  m.state = QpState::kRtr;
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_AV | VIRTIO_RDMA_QP_PATH_MTU |
           VIRTIO_RDMA_QP_DEST_QPN | VIRTIO_RDMA_QP_RQ_PSN |
           VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER;
  m.ah.dgid = MakeGid(0x42);
  for (uint8_t spoof : {2, 3, 8, 255}) {
    m.ah.sgid_index = spoof;
    EXPECT_EQ(engine_->ModifyQp(vm, m), Status::kInvalid) << int{spoof};
  }
  m.ah.sgid_index = 1;
  ASSERT_EQ(engine_->ModifyQp(vm, m), Status::kOk);
  const FakeRnic::Qp& fq = rnic_.qps.at(r.qpn);
  EXPECT_EQ(fq.attr.av.sgid, MakeGid(2));
  EXPECT_EQ(fq.attr.av.dgid, MakeGid(0x42));
  EXPECT_EQ(fq.attr.state, QpState::kRtr);
  Result<QueryQpResult> qr = engine_->QueryQp(vm, r.qpn);
  ASSERT_TRUE(qr.ok());
  EXPECT_EQ(qr->attr.state, QpState::kRtr);
  EXPECT_EQ(qr->attr.ah.sgid_index, 1);
  EXPECT_EQ(qr->cap.max_send_wr, 8u);

  GuestAh ah;
  ah.dgid = MakeGid(0x43);
  ah.sgid_index = 2;
  EXPECT_EQ(engine_->CreateAh(vm, r.pd, ah).status(), Status::kInvalid);
  ah.sgid_index = 0;
  Result<uint32_t> h = engine_->CreateAh(vm, r.pd, ah);
  ASSERT_TRUE(h.ok());
  EXPECT_NE(*h, 0u);
  bool found = false;
  for (auto& [id, av] : rnic_.ah_avs) {
    if (av.dgid == MakeGid(0x43)) {
      EXPECT_EQ(av.sgid, MakeGid(1));
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(EngineTest, IllegalTransitionsRejected) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm, QpType::kRc, /*rts=*/false);
  ModifyQpRequest m;
  m.qpn = r.qpn;
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN |
           VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
           VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
  m.state = QpState::kRts;
  EXPECT_EQ(engine_->ModifyQp(vm, m), Status::kBadState);  // RESET -> RTS
  EXPECT_EQ(rnic_.qps.at(r.qpn).attr.state, QpState::kReset);
  m.mask = VIRTIO_RDMA_QP_STATE;
  m.state = QpState::kErr;
  EXPECT_EQ(engine_->ModifyQp(vm, m), Status::kOk);
  m.state = QpState::kRts;
  EXPECT_EQ(engine_->ModifyQp(vm, m), Status::kBadState);
  m.state = QpState::kReset;
  EXPECT_EQ(engine_->ModifyQp(vm, m), Status::kOk);
}

}  // namespace
}  // namespace vrdma::engine
