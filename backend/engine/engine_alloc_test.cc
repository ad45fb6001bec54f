// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The data path allocates nothing: steady-state send, completion and
// receive traffic through Doorbell/PollOnce is run with a global operator
// new that counts, on an RNIC double that itself never allocates, under
// every policy the daemon offers.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>

#include "backend/engine/engine.h"
#include "backend/engine/testing/guest_env.h"
#include "policy/policy_registry.h"

namespace {
std::atomic<long> g_allocs{0};
}  // namespace

void* operator new(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace vrdma::engine {
namespace {

using testing::GuestEnv;
using testing::GuestRingRef;
using testing::GuestSend;

// Completes every signaled send and one posted receive per send, from fixed
// arrays (no allocation after construction).
class ArrayRnic final : public Rnic {
 public:
  RnicLimits limits() const override {
    RnicLimits l;
    l.max_qp = 64;
    l.max_qp_wr = 1024;
    l.max_sge = 8;
    l.max_cq = 64;
    l.max_cqe = 4096;
    l.max_mr = 64;
    l.max_mr_size = 1ull << 30;
    l.max_pd = 64;
    l.max_srq = 8;
    l.max_srq_wr = 1024;
    l.max_inline_data = 128;
    l.max_msg_sz = 1u << 30;
    l.active_mtu_bytes = 4096;
    return l;
  }
  Status AddGid(const Gid&) override { return Status::kOk; }
  Status RemoveGid(const Gid&) override { return Status::kOk; }
  Result<RnicPd> AllocPd() override { return RnicPd{next_++}; }
  Status DeallocPd(RnicPd) override { return Status::kOk; }
  Result<RnicMr> RegMr(RnicPd, uint8_t*, uint64_t, uint64_t,
                       uint32_t) override {
    uint32_t k = next_++;
    return RnicMr{k, k, k};
  }
  Status DeregMr(RnicMr) override { return Status::kOk; }
  Result<RnicCq> CreateCq(uint32_t) override { return RnicCq{next_++}; }
  Status DestroyCq(RnicCq) override { return Status::kOk; }
  Result<RnicSrq> CreateSrq(RnicPd, uint32_t, uint32_t) override {
    return RnicSrq{next_++};
  }
  Status DestroySrq(RnicSrq) override { return Status::kOk; }
  Result<RnicQp> CreateQp(const QpInit& init) override {
    init_ = init;
    uint32_t k = next_++;
    return RnicQp{k, k};
  }
  Status ModifyQp(RnicQp, const QpAttr&, uint32_t) override {
    return Status::kOk;
  }
  Result<QpAttr> QueryQp(RnicQp) const override { return QpAttr{}; }
  Status DestroyQp(RnicQp) override { return Status::kOk; }
  Result<RnicAh> CreateAh(RnicPd, const AddressVector&) override {
    return RnicAh{next_++};
  }
  Status DestroyAh(RnicAh) override { return Status::kOk; }
  int PostSend(RnicQp qp, std::span<const SendWr> wrs, Status*) override {
    for (const SendWr& wr : wrs) {
      if (wr.send_flags & kSendSignaled) Push(send_, wr.wr_id, qp.qpn, false);
      if (recv_head_ != recv_tail_) {  // the message lands in a receive
        Push(recv_, recv_ids_[recv_head_++ % kN], qp.qpn, true);
      }
    }
    return static_cast<int>(wrs.size());
  }
  int PostRecv(RnicQp, std::span<const RecvWr> wrs, Status*) override {
    for (const RecvWr& wr : wrs) recv_ids_[recv_tail_++ % kN] = wr.wr_id;
    return static_cast<int>(wrs.size());
  }
  int PostSrqRecv(RnicSrq, std::span<const RecvWr> wrs, Status*) override {
    return static_cast<int>(wrs.size());
  }
  int PollCq(RnicCq cq, std::span<Completion> out) override {
    Queue& q = cq.id == init_.send_cq.id ? send_ : recv_;
    int n = 0;
    while (n < static_cast<int>(out.size()) && q.head != q.tail) {
      out[n++] = q.c[q.head++ % kN];
    }
    return n;
  }
  bool Progress() override { return false; }

 private:
  static constexpr uint32_t kN = 4096;
  struct Queue {
    std::array<Completion, kN> c{};
    uint32_t head = 0, tail = 0;
  };
  static void Push(Queue& q, uint64_t wr_id, uint32_t qpn, bool recv) {
    Completion& c = q.c[q.tail++ % kN];
    c = Completion{};
    c.wr_id = wr_id;
    c.qpn = qpn;
    c.opcode = recv ? WcOpcode::kRecv : WcOpcode::kSend;
    c.byte_len = 8;
  }
  QpInit init_;
  Queue send_, recv_;
  std::array<uint64_t, kN> recv_ids_{};
  uint32_t recv_head_ = 0, recv_tail_ = 0;
  uint32_t next_ = 1;
};

class EngineAllocTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineAllocTest, SteadyStateDataPathDoesNotAllocate) {
  ArrayRnic rnic;
  InlineExecutor exec;
  std::string error;
  std::unique_ptr<policy::SchedulerPolicy> policy =
      policy::MakePolicy(GetParam(), policy::CardProfile{}, {}, 0, &error);
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
                         ::testing::ValuesIn(policy::PolicyNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::erase(n, '-');
                           return n;
                         });

}  // namespace
}  // namespace vrdma::engine
