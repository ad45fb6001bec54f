// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine test fixture: an engine on a FakeRnic, and "rigs" (a VM with a
// PD, a 4-page MR, send/receive CQs and a QP) brought up the way a guest
// would, through the Engine API.
#ifndef VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FIXTURE_H_
#define VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/engine/engine.h"
#include "backend/engine/engine_impl.h"
#include "backend/rnic/testing/fake_rnic.h"
#include "backend/engine/testing/guest_env.h"
#include "backend/engine/testing/qp_bring_up.h"
#include "policy/pass_through_policy.h"

namespace vrdma::engine::testing {

using vrdma::testing::FakeRnic;

inline constexpr uint32_t kLW = kAccessLocalWrite;
inline constexpr uint32_t kAll =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

// A VM with a PD, one 4-page MR, send and receive CQs and one QP.
struct Rig {
  VmId vm = 0;
  uint32_t pd = 0;
  uint64_t buf_gpa = 0;
  uint64_t iova = 0x40000000;
  uint32_t mr = 0, lkey = 0, rkey = 0;
  GuestRingRef scq, rcq, sq, rq;
  uint32_t scq_h = 0, rcq_h = 0;
  uint32_t qpn = 0;
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = CreateEngine(rnic_, *executor_, policy_, options_);
  }

  VmId Attach(GuestEnv& env, std::vector<Gid> gids,
              RecordingSink* sink = nullptr, Quotas q = {}) {
    VmConfig c;
    c.name = "vm";
    c.gids = std::move(gids);
    c.quotas = q;
    Result<VmId> vm = engine_->AttachVm(c, sink);
    EXPECT_TRUE(vm.ok());
    engine_->SetGuestMemory(*vm, env.memory());
    return *vm;
  }

  CreateCqRequest Cq(GuestRingRef& ring, GuestEnv& env, uint32_t log2_n = 5) {
    ring = GuestRingRef(env, log2_n, 6);
    CreateCqRequest r;
    r.cqe = (1u << log2_n) - 1;
    r.ring = ring.spec;
    return r;
  }

  // Toward a peer that need not exist: the fake RNIC moves no bytes.
  void ToRts(Rig& r, QpType type) {
    BringUpQp(*engine_, r.vm, r.qpn, type, kAll, MakeGid(0x99), 0x77);
  }

  CreateQpRequest QpReq(Rig& r, GuestEnv& env, QpType type) {
    CreateQpRequest q;
    q.pd = r.pd;
    q.type = type;
    q.send_cq = r.scq_h;
    q.recv_cq = r.rcq_h;
    q.caps = {8, 8, 4, 4, 128};
    r.sq = GuestRingRef(env, 4, 9);
    r.rq = GuestRingRef(env, 4, 7);
    q.sq = r.sq.spec;
    q.rq = r.rq.spec;
    return q;
  }

  Rig MakeRig(GuestEnv& env, VmId vm, QpType type = QpType::kRc,
              bool rts = true) {
    Rig r;
    r.vm = vm;
    r.pd = *engine_->CreatePd(vm);
    r.buf_gpa = env.AllocPages(4);
    RegMrRequest mr;
    mr.pd = r.pd;
    mr.access = kAll;
    mr.iova = r.iova;
    mr.length = 4 * 4096;
    mr.pages = GuestEnv::Pages(r.buf_gpa, 4);
    Result<RegMrResult> m = engine_->RegMr(vm, mr);
    EXPECT_TRUE(m.ok());
    r.mr = m->handle;
    r.lkey = m->lkey;
    r.rkey = m->rkey;
    r.scq_h = engine_->CreateCq(vm, Cq(r.scq, env))->handle;
    r.rcq_h = engine_->CreateCq(vm, Cq(r.rcq, env))->handle;
    Result<CreateQpResult> qp = engine_->CreateQp(vm, QpReq(r, env, type));
    EXPECT_TRUE(qp.ok()) << StatusName(qp.status());
    r.qpn = qp->qpn;
    if (rts) ToRts(r, type);
    return r;
  }

  void Poll(int turns = 3) {
    for (int i = 0; i < turns; ++i) engine_->PollOnce();
  }

  EngineOptions options_;  // a test's constructor may change them
  FakeRnic rnic_;
  InlineExecutor exec_;
  Executor* executor_ = &exec_;  // a test's constructor may change it
  policy::PassThroughPolicy policy_;
  std::unique_ptr<Engine> engine_;
};

// Doorbells alone start send work: no send queue is watched
// (EngineOptions::sq_watch_turns), for tests of what a doorbell does.
class DoorbellOnlyEngineTest : public EngineTest {
 protected:
  DoorbellOnlyEngineTest() { options_.sq_watch_turns = 0; }
};

}  // namespace vrdma::engine::testing

#endif  // VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FIXTURE_H_
