// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Per-VM quotas on what a VM's objects cost the host (quota.h): kernel
// mappings of page views, host memory (the engine's shadow state and the
// RNIC's queues), pinned guest pages; and the engine's admission of VMs
// against the process's mapping budget. Each test names the rule that
// refused and checks that another VM was not affected.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/base/executor.h"
#include "backend/engine/engine.h"
#include "backend/engine/testing/guest_env.h"
#include "backend/memory/testing/test_mappings.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "policy/pass_through_policy.h"

namespace vrdma::engine {
namespace {

using testing::GuestEnv;
using testing::GuestRingRef;

constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

class EngineQuotaTest : public ::testing::Test {
 protected:
  void Start(EngineOptions options = {}) {
    engine_ = CreateEngine(rnic_, exec_, policy_, std::move(options));
  }

  Result<VmId> Attach(GuestEnv& env, uint8_t gid, Quotas q) {
    VmConfig c;
    c.name = "vm";
    c.gids = {Gid{0xfe, 0x80, gid}};
    c.quotas = q;
    Result<VmId> vm = engine_->AttachVm(c, nullptr);
    if (vm.ok()) engine_->SetGuestMemory(*vm, env.memory());
    return vm;
  }

  // An MR over pages (any layout) of env.
  Result<RegMrResult> RegMr(VmId vm, uint32_t pd, std::vector<uint64_t> pages) {
    RegMrRequest r;
    r.pd = pd;
    r.access = kAll;
    r.iova = 0x10000;
    r.length = pages.size() * 4096;
    r.pages = std::move(pages);
    return engine_->RegMr(vm, r);
  }

  Result<CreateCqResult> CreateCq(GuestEnv& env, VmId vm, GuestRingRef& ring) {
    ring = GuestRingRef(env, 5, 6);
    return engine_->CreateCq(vm, CreateCqRequest{31, ring.spec});
  }

  Result<CreateQpResult> CreateQp(GuestEnv& env, VmId vm, uint32_t pd, uint32_t cq,
                                  uint32_t log2_depth) {
    CreateQpRequest q;
    q.pd = pd;
    q.type = QpType::kRc;
    q.send_cq = q.recv_cq = cq;
    const uint32_t depth = (1u << log2_depth) - 1;
    q.caps = {depth, depth, 4, 4, 64};
    sq_ = GuestRingRef(env, log2_depth, 9);
    rq_ = GuestRingRef(env, log2_depth, 7);
    q.sq = sq_.spec;
    q.rq = rq_.spec;
    return engine_->CreateQp(vm, q);
  }

  VmStats Stats(VmId vm) { return engine_->Stats(vm).value(); }

  SoftRnic rnic_;
  InlineExecutor exec_;
  policy::PassThroughPolicy policy_;
  std::unique_ptr<Engine> engine_;
  GuestRingRef sq_, rq_;
};

// Scattered or aliased MR pages cost one kernel mapping each: a VM runs
// into its own mapping quota (kNoResource, before anything is mapped),
// while another VM registers as before.
TEST_F(EngineQuotaTest, PerPageMappingsStopAtTheVmsQuota) {
  Start();
  GuestEnv a, b;
  Quotas q;
  q.max_mappings = 64;
  VmId va = *Attach(a, 1, q);
  VmId vb = *Attach(b, 2, q);
  const uint32_t pa = *engine_->CreatePd(va);
  const uint32_t pb = *engine_->CreatePd(vb);
  const uint64_t page = a.AllocPages(1);
  const int baseline = vrdma::testing::CountMappingsOf(a.fd());

  // One page aliased 65 times: 65 mappings > 64.
  EXPECT_EQ(RegMr(va, pa, std::vector<uint64_t>(65, page)).status(), Status::kNoResource);
  EXPECT_EQ(Stats(va).mappings, 0u);
  EXPECT_EQ(vrdma::testing::CountMappingsOf(a.fd()), baseline) << "refused before mapping";
  // 60 of them fit; then 5 more do not, 4 do.
  Result<RegMrResult> m60 = RegMr(va, pa, std::vector<uint64_t>(60, page));
  ASSERT_TRUE(m60.ok());
  EXPECT_EQ(Stats(va).mappings, 60u);
  EXPECT_EQ(vrdma::testing::CountMappingsOf(a.fd()), baseline + 60);
  EXPECT_EQ(RegMr(va, pa, std::vector<uint64_t>(5, page)).status(), Status::kNoResource);
  Result<RegMrResult> m4 = RegMr(va, pa, std::vector<uint64_t>(4, page));
  ASSERT_TRUE(m4.ok());
  EXPECT_EQ(Stats(va).mappings, 64u);
  // A CQ ring needs a mapping too: refused for A, fine for B.
  GuestRingRef ring;
  EXPECT_EQ(CreateCq(a, va, ring).status(), Status::kNoResource);
  EXPECT_TRUE(CreateCq(b, vb, ring).ok());
  // B's physically contiguous 64-page MR is one mapping.
  const uint64_t run = b.AllocPages(64);
  ASSERT_TRUE(RegMr(vb, pb, GuestEnv::Pages(run, 64)).ok());
  EXPECT_EQ(Stats(vb).mappings, 2u);
  // Deregistering gives the mappings back.
  ASSERT_EQ(engine_->DeregMr(va, m60->handle), Status::kOk);
  EXPECT_EQ(Stats(va).mappings, 4u);
  EXPECT_EQ(vrdma::testing::CountMappingsOf(a.fd()), baseline + 4);
}

// The engine admits a VM only while every admitted VM's max_mappings fits
// in the budget together, so no VM's mapping can fail for lack of the
// process's vm.max_map_count.
TEST_F(EngineQuotaTest, AdmissionKeepsMappingQuotasWithinTheBudget) {
  Start(EngineOptions{.mapping_budget = 1000});
  GuestEnv a, b;
  Quotas big, small;
  big.max_mappings = 600;
  small.max_mappings = 400;
  Result<VmId> va = Attach(a, 1, big);
  ASSERT_TRUE(va.ok());
  EXPECT_EQ(Attach(b, 2, big).status(), Status::kNoResource);
  Result<VmId> vb = Attach(b, 2, small);
  ASSERT_TRUE(vb.ok());
  engine_->DetachVm(*va);
  EXPECT_TRUE(Attach(a, 3, big).ok()) << "a detached VM's share is back";
}

// The same for pinning: the sum of the attached VMs' max_pinned_bytes
// stays within EngineOptions::pinned_budget (the daemon's RLIMIT_MEMLOCK on
// a physical RNIC).
TEST_F(EngineQuotaTest, AdmissionKeepsPinnedQuotasWithinTheBudget) {
  Start(EngineOptions{.pinned_budget = 1ull << 30});
  GuestEnv a, b;
  Quotas big, small;
  big.max_pinned_bytes = 768ull << 20;
  small.max_pinned_bytes = 256ull << 20;
  Result<VmId> va = Attach(a, 1, big);
  ASSERT_TRUE(va.ok());
  EXPECT_EQ(Attach(b, 2, big).status(), Status::kNoResource);
  Result<VmId> vb = Attach(b, 2, small);
  ASSERT_TRUE(vb.ok()) << "exactly the budget";
  engine_->DetachVm(*va);
  EXPECT_TRUE(Attach(a, 3, big).ok()) << "a detached VM's share is back";
}

// A QP costs host memory: the engine's shadow state (send slots, receive
// slots, the scheduler's FIFO and records) and the RNIC's queues. A VM at
// its host-memory quota gets kNoResource; everything is given back.
TEST_F(EngineQuotaTest, HostMemoryIsChargedPerObjectAndGivenBack) {
  Start();
  GuestEnv a(32u << 20), b;
  Quotas q;
  VmId va = *Attach(a, 1, q);
  const uint32_t pd = *engine_->CreatePd(va);
  GuestRingRef cq_ring;
  const uint32_t cq = CreateCq(a, va, cq_ring)->handle;
  const uint64_t after_cq = Stats(va).host_bytes;
  EXPECT_GE(after_cq, rnic_.CqHostBytes(31)) << "the RNIC's CQ is charged";

  Result<CreateQpResult> qp = CreateQp(a, va, pd, cq, 10);  // 1023-deep rings
  ASSERT_TRUE(qp.ok());
  const uint64_t with_qp = Stats(va).host_bytes;
  const QpCaps rnic_caps{1023, 1023, 4, 4, 64};
  // The QP's own charge, and the growth of the host CQ its completions need.
  EXPECT_GE(with_qp - after_cq, rnic_.QpHostBytes(rnic_caps)) << "the RNIC's queues";
  EXPECT_LT(with_qp - after_cq, rnic_.QpHostBytes(rnic_caps) + 512u * 1024);
  ASSERT_EQ(engine_->DestroyQp(va, qp->qpn), Status::kOk);
  // The QP's charge is back; the grown host CQ stays charged to its CQ.
  EXPECT_LE(Stats(va).host_bytes, with_qp - rnic_.QpHostBytes(rnic_caps));
  EXPECT_GT(Stats(va).host_bytes, after_cq);

  // A VM whose quota is one byte short of that CQ and QP: refused, then a
  // shallower QP fits; another VM is not affected.
  engine_->DetachVm(va);
  Quotas tight;
  tight.max_host_bytes = with_qp - 1;
  va = *Attach(a, 1, tight);
  const uint32_t pd2 = *engine_->CreatePd(va);
  const uint32_t cq2 = CreateCq(a, va, cq_ring)->handle;
  EXPECT_EQ(CreateQp(a, va, pd2, cq2, 10).status(), Status::kNoResource);
  EXPECT_EQ(Stats(va).qps, 0u);
  EXPECT_TRUE(CreateQp(a, va, pd2, cq2, 4).ok());
  VmId vb = *Attach(b, 2, q);
  const uint32_t pb = *engine_->CreatePd(vb);
  const uint32_t cqb = CreateCq(b, vb, cq_ring)->handle;
  EXPECT_TRUE(CreateQp(b, vb, pb, cqb, 10).ok());
  EXPECT_LE(Stats(va).host_bytes, tight.max_host_bytes);
}

// Detach gives everything back: nothing is charged to a VM that holds
// nothing.
TEST_F(EngineQuotaTest, EverythingIsGivenBackWhenObjectsAreDestroyed) {
  Start();
  GuestEnv a;
  VmId va = *Attach(a, 1, Quotas{});
  const uint32_t pd = *engine_->CreatePd(va);
  GuestRingRef ring;
  const uint32_t cq = CreateCq(a, va, ring)->handle;
  Result<CreateQpResult> qp = CreateQp(a, va, pd, cq, 6);
  ASSERT_TRUE(qp.ok());
  Result<RegMrResult> mr = RegMr(va, pd, GuestEnv::Pages(a.AllocPages(8), 8));
  ASSERT_TRUE(mr.ok());
  VmStats s = Stats(va);
  EXPECT_GT(s.host_bytes, 0u);
  EXPECT_EQ(s.mappings, 1u + 2u + 1u);  // CQ ring, SQ and RQ rings, MR
  ASSERT_EQ(engine_->DestroyQp(va, qp->qpn), Status::kOk);
  ASSERT_EQ(engine_->DeregMr(va, mr->handle), Status::kOk);
  ASSERT_EQ(engine_->DestroyCq(va, cq), Status::kOk);
  s = Stats(va);
  EXPECT_EQ(s.host_bytes, 0u);
  EXPECT_EQ(s.mappings, 0u);
  EXPECT_EQ(s.pinned_bytes, 0u);
}

}  // namespace
}  // namespace vrdma::engine
