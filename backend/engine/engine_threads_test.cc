// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine with the daemon's threading: a data-path thread running an
// EpollEventLoop whose poller is Engine::PollOnce, control verbs from the
// test thread through a MailboxExecutor (RunSync over an rte_ring), guest
// rings written concurrently from the test thread. Checks that traffic
// keeps flowing while the control thread creates and destroys objects of
// another VM, and that the bytes arrive.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "backend/base/event_loop.h"
#include "backend/base/executor_mailbox.h"
#include "backend/engine/engine.h"
#include "backend/engine/testing/guest_env.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "policy/pass_through_policy.h"

namespace vrdma::engine {
namespace {

using testing::GuestEnv;
using testing::GuestRingRef;
using testing::GuestSend;

constexpr uint32_t kAll =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

struct Side {
  explicit Side(uint64_t base) : env(8u << 20, base) {}
  GuestEnv env;
  VmId vm = 0;
  uint32_t pd = 0, lkey = 0, qpn = 0, scq_h = 0, rcq_h = 0;
  uint64_t buf = 0, iova = 0;
  GuestRingRef scq, rcq, sq, rq;
  Gid gid{};
};

// A data-path thread whose RunSync hands closures over under a mutex, which
// ThreadSanitizer understands (it cannot see DPDK's rte_ring barriers, so
// with MailboxExecutor it reports every hand-over as a race). Same contract
// as MailboxExecutor: closures run on the data-path thread, between turns.
class LockedDatapath final : public Executor {
 public:
  LockedDatapath() : thread_([this] { Loop(); }) {}
  ~LockedDatapath() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    thread_.join();
  }
  void set_engine(Engine* e) { engine_.store(e); }
  void RunSync(const std::function<void()>& fn) override {
    std::lock_guard<std::mutex> caller(callers_mu_);  // one request at a time
    std::unique_lock<std::mutex> l(mu_);
    pending_ = &fn;
    done_ = false;
    cv_.wait(l, [this] { return done_; });
  }

 private:
  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        if (stop_) return;
        if (pending_ != nullptr) {
          (*pending_)();
          pending_ = nullptr;
          done_ = true;
          cv_.notify_all();
        }
      }
      if (Engine* e = engine_.load()) e->PollOnce();
    }
  }
  std::mutex callers_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* pending_ = nullptr;
  bool done_ = false;
  bool stop_ = false;
  std::atomic<Engine*> engine_{nullptr};
  std::thread thread_;
};

// Param: true = the daemon's EpollEventLoop + MailboxExecutor; false =
// LockedDatapath (for ThreadSanitizer).
class EngineThreadsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      loop_ = EpollEventLoop::Create();
      ASSERT_NE(loop_, nullptr);
      mailbox_ = MailboxExecutor::Create(*loop_);
      ASSERT_NE(mailbox_, nullptr);
      exec_ = mailbox_.get();
      engine_ = Engine::Create(rnic_, *exec_, policy_);
      Engine* engine = engine_.get();
      poller_ = loop_->AddPoller([engine] { return engine->PollOnce(); });
      thread_ = std::thread([this] { loop_->Run(); });
    } else {
      locked_ = std::make_unique<LockedDatapath>();
      exec_ = locked_.get();
      engine_ = Engine::Create(rnic_, *exec_, policy_);
      locked_->set_engine(engine_.get());
    }
  }
  void TearDown() override {
    // Stop polling the engine, then destroy it: its destructor detaches the
    // VMs through RunSync, so the data-path thread must still run.
    if (GetParam()) {
      exec_->RunSync([this] { loop_->RemovePoller(poller_); });
      engine_.reset();
      loop_->Stop();
      thread_.join();
      mailbox_.reset();
    } else {
      locked_->set_engine(nullptr);
      engine_.reset();
      locked_.reset();
    }
  }

  void Make(Side& s, uint8_t id) {
    s.gid = Gid{0xfe, 0x80};
    s.gid[15] = id;
    VmConfig c;
    c.gids = {s.gid};
    s.vm = *engine_->AttachVm(c, nullptr);
    engine_->SetGuestMemory(s.vm, s.env.memory());
    s.pd = *engine_->CreatePd(s.vm);
    s.buf = s.env.AllocPages(2);
    s.iova = uint64_t{id} << 40;
    RegMrRequest mr{s.pd, kAll, s.iova, 8192, 0, GuestEnv::Pages(s.buf, 2)};
    s.lkey = engine_->RegMr(s.vm, mr)->lkey;
    for (auto [ring, h] :
         {std::pair{&s.scq, &s.scq_h}, std::pair{&s.rcq, &s.rcq_h}}) {
      *ring = GuestRingRef(s.env, 6, 6);
      *h = engine_->CreateCq(s.vm, CreateCqRequest{63, ring->spec})->handle;
    }
    s.sq = GuestRingRef(s.env, 6, 8);
    s.rq = GuestRingRef(s.env, 6, 6);
    CreateQpRequest q;
    q.pd = s.pd;
    q.send_cq = s.scq_h;
    q.recv_cq = s.rcq_h;
    q.caps = {32, 32, 2, 1, 0};
    q.sq = s.sq.spec;
    q.rq = s.rq.spec;
    s.qpn = engine_->CreateQp(s.vm, q)->qpn;
  }

  void Connect(Side& s, const Side& peer) {
    ModifyQpRequest m;
    m.qpn = s.qpn;
    m.state = QpState::kInit;
    m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX |
             VIRTIO_RDMA_QP_PORT | VIRTIO_RDMA_QP_ACCESS_FLAGS;
    m.access_flags = kAll;
    ASSERT_EQ(engine_->ModifyQp(s.vm, m), Status::kOk);
    m.state = QpState::kRtr;
    m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_AV |
             VIRTIO_RDMA_QP_PATH_MTU | VIRTIO_RDMA_QP_DEST_QPN |
             VIRTIO_RDMA_QP_RQ_PSN | VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC |
             VIRTIO_RDMA_QP_MIN_RNR_TIMER;
    m.ah.dgid = peer.gid;
    m.dest_qpn = peer.qpn;
    m.min_rnr_timer = 1;
    ASSERT_EQ(engine_->ModifyQp(s.vm, m), Status::kOk);
    m.state = QpState::kRts;
    m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN |
             VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
             VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
    m.timeout = 10;
    m.retry_cnt = 7;
    m.rnr_retry = 7;
    ASSERT_EQ(engine_->ModifyQp(s.vm, m), Status::kOk);
  }

  SoftRnic rnic_;
  policy::PassThroughPolicy policy_;
  std::unique_ptr<EpollEventLoop> loop_;
  std::unique_ptr<MailboxExecutor> mailbox_;
  std::unique_ptr<LockedDatapath> locked_;
  Executor* exec_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::thread thread_;
  uint64_t poller_ = 0;
};

// Waits for one CQE in the guest's CQ ring (the guest's own polling).
bool WaitCqe(GuestRingRef& cq, ib_uverbs_wc* out) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const uint32_t c = cq.consumer();
    if (cq.producer() != c) {  // acquire: the CQE is visible
      std::memcpy(out, cq.elem(c), sizeof(*out));
      cq.set_consumer((c + 1) & cq.mask);
      return true;
    }
    std::this_thread::yield();
  }
  return false;
}

TEST_P(EngineThreadsTest, TrafficFlowsWhileControlVerbsRun) {
  Side a(0x100000), b(0x40000000), c(0x80000000);
  Make(a, 1);
  Make(b, 2);
  Make(c, 3);
  Connect(a, b);
  Connect(b, a);
  std::atomic<bool> stop{false};
  std::atomic<int> churn{0};
  // A control thread churning VM C's objects throughout.
  std::thread control([&] {
    while (!stop.load()) {
      Result<uint32_t> pd = engine_->CreatePd(c.vm);
      if (!pd.ok()) continue;
      RegMrRequest mr{*pd, kAll, 0x1000, 4096, 0, GuestEnv::Pages(c.buf, 1)};
      Result<RegMrResult> m = engine_->RegMr(c.vm, mr);
      if (m.ok()) (void)engine_->DeregMr(c.vm, m->handle);
      (void)engine_->DestroyPd(c.vm, *pd);
      (void)engine_->Stats(c.vm);
      churn.fetch_add(1);
    }
  });
  // At least 300 messages, and on until the control thread has churned a
  // while (it may start late on a loaded machine).
  uint32_t sent = 0;
  for (uint32_t i = 0; i < 300 || (churn.load() < 20 && i < 100000); ++i) {
    ++sent;
    uint8_t* src = a.env.host(a.buf) + (i % 16) * 256;
    for (int k = 0; k < 256; ++k) src[k] = static_cast<uint8_t>(i * 7 + k);
    testing::PostRecv(b.rq, 1000 + i, {{b.iova + (i % 16) * 256, 256, b.lkey}});
    testing::PostSend(
        a.sq, GuestSend{.wr_id = i,
                        .sges = {{a.iova + (i % 16) * 256, 256, a.lkey}}});
    // The device rings doorbells on the data-path thread.
    exec_->RunSync([&] { engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn); });
    ib_uverbs_wc ws, wr;
    ASSERT_TRUE(WaitCqe(a.scq, &ws)) << i;
    ASSERT_TRUE(WaitCqe(b.rcq, &wr)) << i;
    ASSERT_EQ(ws.wr_id, i);
    ASSERT_EQ(ws.status, 0u);
    ASSERT_EQ(wr.wr_id, 1000 + i);
    ASSERT_EQ(wr.byte_len, 256u);
    ASSERT_EQ(std::memcmp(b.env.host(b.buf) + (i % 16) * 256, src, 256), 0)
        << i;
  }
  stop.store(true);
  control.join();
  EXPECT_GE(churn.load(), 20);
  VmStats sa = *engine_->Stats(a.vm);
  EXPECT_EQ(sa.wqes_posted, sent);
  EXPECT_EQ(sa.cqes_written, sent);
  VmStats sc = *engine_->Stats(c.vm);
  EXPECT_EQ(sc.mrs, 1u);  // only Make's MR is left
  EXPECT_EQ(sc.pds, 1u);
}

INSTANTIATE_TEST_SUITE_P(Executors, EngineThreadsTest,
                         ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Mailbox" : "Locked";
                         });

}  // namespace
}  // namespace vrdma::engine
