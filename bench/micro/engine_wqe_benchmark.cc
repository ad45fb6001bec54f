// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's cost per WQE, with nothing underneath: a guest (memfd RAM,
// librxe rings) writes `batch` signaled 64-byte RDMA WRITE WQEs, rings one
// SQ doorbell, and the engine (inline executor) reads, decodes, checks,
// schedules (the scheduler stage and the policy named in the benchmark's
// name) and posts them to a no-op RNIC (the FakeRnic with complete_at_post:
// it records nothing and completes each WR as it is posted); the
// benchmark iteration ends when the guest has consumed every CQE.
// ns_per_wqe = engine + guest-ring CPU cost per WQE on one thread (CPU
// time: on this shared 2-core machine wall time includes preemption).
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "backend/base/executor.h"
#include "backend/engine/engine.h"
#include "backend/engine/testing/guest_env.h"
#include "backend/rnic/testing/fake_rnic.h"
#include "policy/policy_registry.h"

namespace vrdma::bench {

bool g_failed = false;

namespace {

using engine::testing::GuestEnv;
using engine::testing::GuestRingRef;
using engine::testing::GuestSend;

class NullSink final : public engine::VmEventSink {
 public:
  void OnEvent(uint32_t, uint32_t) override {}
};

struct Rig {
  vrdma::testing::FakeRnic rnic;
  InlineExecutor executor;
  std::unique_ptr<policy::SchedulerPolicy> policy;
  std::unique_ptr<engine::Engine> engine;
  GuestEnv env{16u << 20};
  NullSink sink;
  engine::VmId vm = 0;
  GuestRingRef sq, scq, rq, rcq;
  uint32_t qpn = 0, lkey = 0;
  uint64_t buf_iova = 0x10000000;
  bool ok = false;

  explicit Rig(const std::string& policy_name) {
    rnic.complete_at_post = true;
    std::string error;
    policy = policy::MakePolicy(policy_name, policy::CardProfile{}, {}, 0, &error);
    if (!policy) return;
    engine = engine::Engine::Create(rnic, executor, *policy);
    engine::VmConfig c;
    c.name = "bench";
    Gid gid{};
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[15] = 1;
    c.gids = {gid};
    auto v = engine->AttachVm(c, &sink);
    if (!v.ok()) return;
    vm = *v;
    engine->SetGuestMemory(vm, env.memory());
    auto pd = engine->CreatePd(vm);
    if (!pd.ok()) return;
    const uint64_t buf = env.AllocPages(1);
    engine::RegMrRequest mr;
    mr.pd = *pd;
    mr.access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    mr.iova = buf_iova;
    mr.length = 4096;
    mr.pages = GuestEnv::Pages(buf, 1);
    auto m = engine->RegMr(vm, mr);
    if (!m.ok()) return;
    lkey = m->lkey;
    uint32_t cqh[2];
    GuestRingRef* cqr[2] = {&scq, &rcq};
    for (int i = 0; i < 2; ++i) {
      *cqr[i] = GuestRingRef(env, 10, 6);
      engine::CreateCqRequest cq;
      cq.cqe = 1023;
      cq.ring = cqr[i]->spec;
      auto r = engine->CreateCq(vm, cq);
      if (!r.ok()) return;
      cqh[i] = r->handle;
    }
    sq = GuestRingRef(env, 8, 8);
    rq = GuestRingRef(env, 4, 6);
    engine::CreateQpRequest q;
    q.pd = *pd;
    q.type = QpType::kRc;
    q.send_cq = cqh[0];
    q.recv_cq = cqh[1];
    q.caps = {255, 15, 1, 1, 0};
    q.sq = sq.spec;
    q.rq = rq.spec;
    auto qr = engine->CreateQp(vm, q);
    if (!qr.ok()) return;
    qpn = qr->qpn;
    engine::ModifyQpRequest mq;
    mq.qpn = qpn;
    mq.state = QpState::kInit;
    mq.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX | VIRTIO_RDMA_QP_PORT |
              VIRTIO_RDMA_QP_ACCESS_FLAGS;
    mq.access_flags = mr.access;
    if (engine->ModifyQp(vm, mq) != Status::kOk) return;
    mq = {};
    mq.qpn = qpn;
    mq.state = QpState::kRtr;
    mq.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_AV | VIRTIO_RDMA_QP_PATH_MTU |
              VIRTIO_RDMA_QP_DEST_QPN | VIRTIO_RDMA_QP_RQ_PSN |
              VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER;
    mq.ah.dgid = gid;
    mq.dest_qpn = qpn;
    mq.max_dest_rd_atomic = 1;
    mq.min_rnr_timer = 12;
    if (engine->ModifyQp(vm, mq) != Status::kOk) return;
    mq = {};
    mq.qpn = qpn;
    mq.state = QpState::kRts;
    mq.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN | VIRTIO_RDMA_QP_TIMEOUT |
              VIRTIO_RDMA_QP_RETRY_CNT | VIRTIO_RDMA_QP_RNR_RETRY |
              VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
    mq.timeout = 14;
    mq.retry_cnt = 7;
    mq.rnr_retry = 7;
    mq.max_rd_atomic = 1;
    if (engine->ModifyQp(vm, mq) != Status::kOk) return;
    ok = true;
  }
};

void BM_EngineWqe(benchmark::State& state, Rig* rig) {
  if (!rig->ok) {
    g_failed = true;
    state.SkipWithError("engine setup failed");
    return;
  }
  const int batch = static_cast<int>(state.range(0));
  GuestSend s;
  s.opcode = IB_UVERBS_WR_RDMA_WRITE;
  s.flags = kSendSignaled;
  s.remote_addr = rig->buf_iova;
  s.rkey = 0x1;
  s.sges = {Sge{rig->buf_iova, 64, rig->lkey}};
  uint64_t errors = 0;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) {
      s.wr_id = static_cast<uint64_t>(i);
      engine::testing::PostSend(rig->sq, s);
    }
    rig->engine->Doorbell(rig->vm, VIRTIO_RDMA_DB_SQ, rig->qpn);
    int seen = 0;
    for (int spins = 0; seen < batch && spins < 1000000; ++spins) {
      rig->engine->PollOnce();
      // Consume the CQEs like the guest would (status checked).
      uint32_t c = rig->scq.consumer();
      const uint32_t p = rig->scq.producer();
      while (c != p) {
        const auto* wc = reinterpret_cast<const ib_uverbs_wc*>(rig->scq.elem(c));
        if (wc->status != 0) ++errors;
        c = (c + 1) & rig->scq.mask;
        ++seen;
      }
      rig->scq.set_consumer(c);
    }
    if (seen < batch) {
      g_failed = true;
      state.SkipWithError("WQEs did not complete");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["ns_per_wqe"] = benchmark::Counter(
      static_cast<double>(state.iterations() * batch),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["error_cqes"] = static_cast<double>(errors);
  if (errors != 0) g_failed = true;  // every WQE here is valid
}
}  // namespace

// One engine per policy, shared by its batch sizes; they live for the
// whole run.
std::vector<std::unique_ptr<Rig>> RegisterPerPolicy() {
  std::vector<std::unique_ptr<Rig>> rigs;
  for (const std::string& name : policy::PolicyNames()) {
    Rig* rig = rigs.emplace_back(std::make_unique<Rig>(name)).get();
    benchmark::RegisterBenchmark(("BM_EngineWqe/" + name).c_str(), BM_EngineWqe, rig)
        ->Arg(1)
        ->Arg(16)
        ->Arg(64);
  }
  return rigs;
}

}  // namespace vrdma::bench

// A failed setup is an error exit (SkipWithError alone exits 0), so the
// smoke test in CMakeLists.txt catches a rotten benchmark.
int main(int argc, char** argv) {
  const auto rigs = vrdma::bench::RegisterPerPolicy();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return vrdma::bench::g_failed ? 1 : 0;
}
