// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The data path allocates nothing: steady-state send, completion and
// receive traffic through Doorbell/PollOnce is run with a global operator
// new that counts, on the FakeRnic (whose data calls do not allocate once
// its queues have grown) as a loopback that completes every WR as it is
// posted, under every policy the daemon offers, with and without the
// reliability layer (native mode, docs/reliability.md §10 step 10) over it.
#include <gtest/gtest.h>

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <tuple>

#include "backend/engine/engine.h"
#include "backend/engine/testing/guest_env.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "backend/rnic/testing/fake_rnic.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "policy/pass_through_policy.h"
#include "policy/policy_registry.h"

namespace {
std::atomic<long> g_allocs{0};
// Queue-sized blocks (>= 4 KiB) allocated and freed while g_on_datapath:
// inside the closures the engine runs on the data-path thread.
constexpr size_t kLarge = 4096;
bool g_on_datapath = false;
long g_large_allocs = 0;
long g_large_frees = 0;
}  // namespace

void* operator new(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (g_on_datapath && n >= kLarge) ++g_large_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Not inlined: GCC would pair the std::free with gtest's `new` and warn
// (-Wmismatched-new-delete), as it does once two suites are parameterized.
[[gnu::noinline]] void operator delete(void* p) noexcept {
  if (g_on_datapath && p != nullptr && malloc_usable_size(p) >= kLarge) ++g_large_frees;
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace vrdma::engine {
namespace {

using testing::GuestEnv;
using testing::GuestRingRef;
using testing::GuestSend;
using vrdma::testing::FakeRnic;

// (policy, over the reliability layer)
class EngineAllocTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(EngineAllocTest, SteadyStateDataPathDoesNotAllocate) {
  FakeRnic fake;
  fake.complete_at_post = true;  // each SEND lands in the QP's own RQ
  fake.deliver = true;
  std::unique_ptr<ReliableRnic> layer;
  if (std::get<1>(GetParam())) layer = std::make_unique<ReliableRnic>(fake);
  Rnic& rnic = layer ? static_cast<Rnic&>(*layer) : fake;
  InlineExecutor exec;
  std::string error;
  std::unique_ptr<policy::SchedulerPolicy> policy =
      policy::MakePolicy(std::get<0>(GetParam()), policy::CardProfile{}, {}, 0, &error);
  ASSERT_NE(policy, nullptr) << error;
  std::unique_ptr<Engine> engine = Engine::Create(rnic, exec, *policy);
  GuestEnv env;
  VmConfig c;
  c.gids = {Gid{0xfe, 0x80, 1}};
  VmId vm = *engine->AttachVm(c, nullptr);
  engine->SetGuestMemory(vm, env.memory());
  uint32_t pd = *engine->CreatePd(vm);
  uint64_t buf = env.AllocPages(1);
  RegMrRequest mr{pd, kAccessLocalWrite,      0x10000, 4096,
                  0,  GuestEnv::Pages(buf, 1)};
  uint32_t lkey = engine->RegMr(vm, mr)->lkey;
  GuestRingRef scq(env, 8, 6), rcq(env, 8, 6), sq(env, 6, 9), rq(env, 6, 6);
  uint32_t scq_h = engine->CreateCq(vm, CreateCqRequest{255, scq.spec})->handle;
  uint32_t rcq_h = engine->CreateCq(vm, CreateCqRequest{255, rcq.spec})->handle;
  CreateQpRequest q;
  q.pd = pd;
  q.send_cq = scq_h;
  q.recv_cq = rcq_h;
  q.caps = {63, 63, 2, 1, 64};
  q.sq = sq.spec;
  q.rq = rq.spec;
  uint32_t qpn = engine->CreateQp(vm, q)->qpn;
  ModifyQpRequest m;
  m.qpn = qpn;
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX |
           VIRTIO_RDMA_QP_PORT | VIRTIO_RDMA_QP_ACCESS_FLAGS;
  m.state = QpState::kInit;
  ASSERT_EQ(engine->ModifyQp(vm, m), Status::kOk);
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_AV | VIRTIO_RDMA_QP_PATH_MTU |
           VIRTIO_RDMA_QP_DEST_QPN | VIRTIO_RDMA_QP_RQ_PSN |
           VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER;
  m.state = QpState::kRtr;
  m.dest_qpn = qpn;  // a loopback
  ASSERT_EQ(engine->ModifyQp(vm, m), Status::kOk);
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN |
           VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
           VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
  m.state = QpState::kRts;
  ASSERT_EQ(engine->ModifyQp(vm, m), Status::kOk);

  auto turn = [&](uint64_t i) {
    testing::PostRecv(rq, i, {{0x10000, 8, lkey}});
    testing::PostSend(sq, GuestSend{.wr_id = i, .sges = {{0x10000, 8, lkey}}});
    testing::PostSend(
        sq, GuestSend{
                .wr_id = i, .flags = kSendInline, .inline_data = {1, 2, 3, 4}});
    engine->Doorbell(vm, VIRTIO_RDMA_DB_SQ, qpn);
    engine->Doorbell(vm, VIRTIO_RDMA_DB_CQ_ARM, scq_h);
    engine->PollOnce();
    engine->PollOnce();
    (void)testing::DrainCq(scq);  // the guest's polling (allocates: not
    (void)testing::DrainCq(rcq);  // engine code, counted out below)
  };
  for (uint64_t i = 0; i < 100; ++i) turn(i);  // warm up
  long engine_allocs = 0;
  long guest_allocs = 0;  // proves the counter sees allocations
  for (uint64_t i = 0; i < 2000; ++i) {
    const long before = g_allocs.load();
    testing::PostRecv(rq, i, {{0x10000, 8, lkey}});
    testing::PostSend(sq, GuestSend{.wr_id = i, .sges = {{0x10000, 8, lkey}}});
    const long after_guest = g_allocs.load();
    engine->Doorbell(vm, VIRTIO_RDMA_DB_SQ, qpn);
    engine->Doorbell(vm, VIRTIO_RDMA_DB_CQ_ARM, scq_h);
    engine->PollOnce();
    engine->PollOnce();
    engine_allocs += g_allocs.load() - after_guest;
    guest_allocs += after_guest - before;
    ASSERT_EQ(testing::DrainCq(scq).size(), 1u) << i;
    ASSERT_EQ(testing::DrainCq(rcq).size(), 1u) << i;
  }
  EXPECT_GT(guest_allocs, 0);
  EXPECT_EQ(engine_allocs, 0);
  EXPECT_EQ(engine->Stats(vm)->wqes_posted, 2000u + 200u);
}

INSTANTIATE_TEST_SUITE_P(Policies, EngineAllocTest,
                         ::testing::Combine(::testing::ValuesIn(policy::PolicyNames()),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           std::erase(n, '-');
                           return std::get<1>(info.param) ? n + "OverReliable" : n;
                         });

// Runs closures inline, marking them as the data-path thread's work.
class DataPathMarkingExecutor final : public Executor {
 public:
  void RunSync(const std::function<void()>& fn) override {
    g_on_datapath = true;
    fn();
    g_on_datapath = false;
  }
};

// RNIC control calls move no queue memory on the data-path thread: the
// engine prepares the RNIC's queues (and the CQ growth a QP needs) on the
// control thread and has the RNIC free what it lets go of there too, so
// creating and destroying deep QPs, CQs and SRQs allocates and frees no
// queue-sized block inside the closures the data path runs.
// ("Soft" or "ReliableOverSoft")
class EngineControlAllocTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineControlAllocTest, DeepQueuesAreBuiltAndFreedOffTheDataPath) {
  SoftRnic soft;
  std::unique_ptr<ReliableRnic> layer;
  if (GetParam() == "ReliableOverSoft") layer = std::make_unique<ReliableRnic>(soft);
  Rnic& rnic = layer ? static_cast<Rnic&>(*layer) : soft;
  DataPathMarkingExecutor exec;
  policy::PassThroughPolicy policy;
  std::unique_ptr<Engine> engine = Engine::Create(rnic, exec, policy);
  GuestEnv env(64u << 20);
  VmConfig c;
  c.gids = {Gid{0xfe, 0x80, 1}};
  VmId vm = *engine->AttachVm(c, nullptr);
  engine->SetGuestMemory(vm, env.memory());
  const uint32_t pd = *engine->CreatePd(vm);
  g_large_allocs = g_large_frees = 0;
  for (int round = 0; round < 3; ++round) {
    GuestRingRef cq_ring(env, 11, 6), sq(env, 10, 9), rq(env, 10, 7), srq_ring(env, 9, 7);
    Result<CreateCqResult> cq = engine->CreateCq(vm, CreateCqRequest{2047, cq_ring.spec});
    ASSERT_TRUE(cq.ok());
    Result<CreateSrqResult> srq =
        engine->CreateSrq(vm, CreateSrqRequest{pd, 511, 4, 0, srq_ring.spec});
    ASSERT_TRUE(srq.ok()) << StatusName(srq.status());
    CreateQpRequest q;
    q.pd = pd;
    q.send_cq = q.recv_cq = cq->handle;
    q.caps = {1023, 1023, 4, 4, 64};
    q.sq = sq.spec;
    q.rq = rq.spec;
    Result<CreateQpResult> qp = engine->CreateQp(vm, q);  // grows the host CQ
    ASSERT_TRUE(qp.ok()) << StatusName(qp.status());
    ASSERT_EQ(engine->DestroyQp(vm, qp->qpn), Status::kOk);
    ASSERT_EQ(engine->DestroySrq(vm, srq->handle), Status::kOk);
    ASSERT_EQ(engine->DestroyCq(vm, cq->handle), Status::kOk);
  }
  EXPECT_EQ(g_large_allocs, 0) << "queue memory allocated on the data-path thread";
  EXPECT_EQ(g_large_frees, 0) << "queue memory freed on the data-path thread";
  engine->DetachVm(vm);
}

INSTANTIATE_TEST_SUITE_P(Rnics, EngineControlAllocTest,
                         ::testing::Values(std::string("Soft"), std::string("ReliableOverSoft")),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace vrdma::engine
