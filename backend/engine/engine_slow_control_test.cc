// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Where the engine makes the RNIC's slow control calls (rnic_calls.h):
// every control call but the GIDs' (RegMr, CreateQp, ModifyQp, PDs, CQs
// and their growth, AHs, SRQs, and their destroys) runs beside the data
// path when the RNIC allows it, and on the data path when it does not.
//
// The test thread is the data-path thread: it polls the engine and runs the
// closures RunSync hands it. A second thread is the control thread making
// VM C's calls. The FakeRnic holds each slow call on the thread that makes
// it (slow_call), as a physical RNIC holds a registration while it pins
// pages, and VM A's sends must complete meanwhile.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "backend/engine/testing/engine_fixture.h"
#include "backend/engine/testing/qp_bring_up.h"

namespace vrdma::engine {
namespace {

using namespace std::chrono_literals;
using testing::DrainCq;
using testing::GuestEnv;
using testing::GuestSend;
using testing::MakeGid;
using testing::Rig;

// The data-path thread is the one that made it; RunSync from another
// thread waits until that one runs the closure (RunPending).
class DataThread final : public Executor {
 public:
  void RunSync(const std::function<void()>& fn) override {
    if (on_data_thread()) return fn();
    std::unique_lock<std::mutex> l(mu_);
    pending_ = &fn;
    done_ = false;
    cv_.wait(l, [this] { return done_; });
  }
  void RunPending() {
    std::lock_guard<std::mutex> l(mu_);
    if (pending_ == nullptr) return;
    (*pending_)();
    pending_ = nullptr;
    done_ = true;
    cv_.notify_all();
  }
  bool on_data_thread() const { return std::this_thread::get_id() == id_; }

 private:
  const std::thread::id id_ = std::this_thread::get_id();
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* pending_ = nullptr;
  bool done_ = false;
};

class SlowControlTest : public testing::EngineTest {
 protected:
  SlowControlTest() { executor_ = &data_; }
  // The engine goes first: its detach runs on data_, and in the guests'
  // memory.
  void TearDown() override { engine_.reset(); }

  // From here on the fake holds each slow call made off the data-path
  // thread until Release, and counts those made on it.
  void HoldSlowCalls() {
    rnic_.slow_call = [this](const std::function<void()>& work) {
      if (data_.on_data_thread()) {
        ++on_data_path_;  // the data path waits for this one
        work();
        return;
      }
      {
        std::unique_lock<std::mutex> l(mu_);
        ++held_;
        cv_.wait(l, [this] { return open_; });
        --held_;
      }
      data_.RunSync(work);  // the fake's tables belong to the data path
    };
  }
  int held() {
    std::lock_guard<std::mutex> l(mu_);
    return held_;
  }
  void SetOpen(bool open) {
    std::lock_guard<std::mutex> l(mu_);
    open_ = open;
    cv_.notify_all();
  }
  // One data-path turn: a closure handed over, then the engine's poll.
  void Turn() {
    data_.RunPending();
    engine_->PollOnce();
  }
  // Turns until pred() or 10 s.
  template <typename Pred>
  bool TurnUntil(Pred pred) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return false;
      Turn();
    }
    return true;
  }

  // VM A sends n messages and its CQ gets their CQEs.
  bool SendsComplete(Rig& a, int n) {
    for (int i = 0; i < n; ++i) {
      testing::PostSend(a.sq, GuestSend{.wr_id = next_wr_++, .sges = {{a.iova, 64, a.lkey}}});
    }
    engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
    size_t got = 0;
    return TurnUntil([&] {
      got += DrainCq(a.scq).size();
      return got == static_cast<size_t>(n);
    });
  }

  // Runs call() on a control thread; with the RNIC holding it, VM A's sends
  // complete before it is let go. Returns whether it was held (the call ran
  // beside the data path).
  template <typename Call>
  bool HeldWhileASends(Rig& a, Call call) {
    SetOpen(false);
    std::atomic<bool> done{false};
    std::thread control([&] {
      call();
      done.store(true);
    });
    const bool held_in_rnic = TurnUntil([&] { return held() == 1 || done.load(); }) &&
                              held() == 1;
    if (held_in_rnic) {
      EXPECT_TRUE(SendsComplete(a, 8)) << "VM A's sends wait for VM C's control call";
      EXPECT_EQ(held(), 1) << "the call is still in the RNIC";
    }
    SetOpen(true);
    EXPECT_TRUE(TurnUntil([&] { return done.load(); }));
    control.join();
    return held_in_rnic;
  }

  // VM A with a QP in RTS (it sends), VM C with a PD, an MR, CQs and a
  // QP (the calls are its); from here on the fake holds slow calls.
  void Make(bool beside) {
    rnic_.beside = beside;
    rnic_.auto_complete = true;
    a_ = MakeRig(env_a_, Attach(env_a_, {MakeGid(1)}));
    c_ = Attach(env_c_, {MakeGid(3)});
    rc_ = MakeRig(env_c_, c_, QpType::kRc, /*rts=*/false);
    HoldSlowCalls();
  }
  // One page of VM C's, registered.
  RegMrRequest MrReq() {
    RegMrRequest req;
    req.pd = rc_.pd;
    req.access = testing::kAll;
    req.iova = 0x80000000;
    req.length = 4096;
    req.pages = GuestEnv::Pages(env_c_.AllocPages(1), 1);
    return req;
  }

  GuestEnv env_a_, env_c_;
  Rig a_, rc_;
  VmId c_ = 0;
  DataThread data_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int held_ = 0;
  std::atomic<int> on_data_path_{0};
  uint64_t next_wr_ = 1;
};

TEST_F(SlowControlTest, BesideTheDataPathWhenTheRnicAllowsIt) {
  Make(/*beside=*/true);
  Result<RegMrResult> mr = Status::kIoError;
  const RegMrRequest req = MrReq();
  EXPECT_TRUE(HeldWhileASends(a_, [&] { mr = engine_->RegMr(c_, req); })) << "RegMr";
  ASSERT_TRUE(mr.ok());

  // A second QP on the same CQs: they grow (ResizeCq) before it is made.
  Rig second = rc_;
  Result<CreateQpResult> qp = Status::kIoError;
  const CreateQpRequest qreq = QpReq(second, env_c_, QpType::kRc);
  const std::map<uint32_t, uint32_t> depths_before = rnic_.cq_depths;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { qp = engine_->CreateQp(c_, qreq); })) << "CreateQp";
  ASSERT_TRUE(qp.ok());
  EXPECT_EQ(engine_->Stats(c_)->qps, 2u);
  EXPECT_NE(rnic_.cq_depths, depths_before) << "a CQ of VM C grew";

  Status destroyed = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { destroyed = engine_->DestroyQp(c_, qp->qpn); }))
      << "DestroyQp";
  EXPECT_EQ(destroyed, Status::kOk);
  Status dereg = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { dereg = engine_->DeregMr(c_, mr->handle); }))
      << "DeregMr";
  EXPECT_EQ(dereg, Status::kOk);

  // ModifyQp: VM C brings its QP up (INIT, RTR, RTS), then back to RESET,
  // which the data path lets go of first.
  EXPECT_TRUE(HeldWhileASends(a_, [&] {
    testing::BringUpQp(*engine_, c_, rc_.qpn, QpType::kRc, testing::kAll, MakeGid(0x99), 0x77);
  })) << "ModifyQp";
  EXPECT_EQ(rnic_.qps.at(rc_.qpn).attr.state, QpState::kRts);
  ModifyQpRequest reset;
  reset.qpn = rc_.qpn;
  reset.state = QpState::kReset;
  reset.mask = VIRTIO_RDMA_QP_STATE;
  Status to_reset = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { to_reset = engine_->ModifyQp(c_, reset); }))
      << "ModifyQp to RESET";
  EXPECT_EQ(to_reset, Status::kOk);
  EXPECT_EQ(rnic_.qps.at(rc_.qpn).attr.state, QpState::kReset);
  EXPECT_EQ(engine_->QueryQp(c_, rc_.qpn)->attr.state, QpState::kReset);

  // A CQ made and destroyed.
  testing::GuestRingRef cq_ring(env_c_, 4, 6);
  const CreateCqRequest cq_req = Cq(cq_ring, env_c_);
  Result<CreateCqResult> cq = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { cq = engine_->CreateCq(c_, cq_req); }))
      << "CreateCq";
  ASSERT_TRUE(cq.ok());
  EXPECT_EQ(engine_->Stats(c_)->cqs, 3u);
  Status cq_gone = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { cq_gone = engine_->DestroyCq(c_, cq->handle); }))
      << "DestroyCq";
  EXPECT_EQ(cq_gone, Status::kOk);
  EXPECT_EQ(engine_->Stats(c_)->cqs, 2u);

  // A PD, an AH and an SRQ made and destroyed.
  Result<uint32_t> pd = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { pd = engine_->CreatePd(c_); })) << "CreatePd";
  ASSERT_TRUE(pd.ok());
  GuestAh ah;
  ah.dgid = MakeGid(1);
  ah.sgid_index = 0;
  Result<uint32_t> ah_h = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { ah_h = engine_->CreateAh(c_, *pd, ah); }))
      << "CreateAh";
  ASSERT_TRUE(ah_h.ok());
  testing::GuestRingRef ring(env_c_, 4, 7);
  const CreateSrqRequest sreq{*pd, 15, 4, 0, ring.spec};
  Result<CreateSrqResult> srq = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { srq = engine_->CreateSrq(c_, sreq); })) << "CreateSrq";
  ASSERT_TRUE(srq.ok());
  EXPECT_EQ(engine_->Stats(c_)->srqs, 1u);
  Status gone = Status::kIoError;
  EXPECT_TRUE(HeldWhileASends(a_, [&] { gone = engine_->DestroySrq(c_, srq->handle); }))
      << "DestroySrq";
  EXPECT_EQ(gone, Status::kOk);
  EXPECT_TRUE(HeldWhileASends(a_, [&] { gone = engine_->DestroyAh(c_, *ah_h); }))
      << "DestroyAh";
  EXPECT_EQ(gone, Status::kOk);
  EXPECT_TRUE(HeldWhileASends(a_, [&] { gone = engine_->DestroyPd(c_, *pd); })) << "DestroyPd";
  EXPECT_EQ(gone, Status::kOk);
  EXPECT_TRUE(rnic_.srqs.empty());
  EXPECT_TRUE(rnic_.ahs.empty());
  EXPECT_EQ(engine_->Stats(c_)->pds, 1u);

  EXPECT_EQ(on_data_path_.load(), 0) << "no slow call ran on the data-path thread";
  EXPECT_EQ(rnic_.qps.count(qp->qpn), 0u);
  EXPECT_EQ(rnic_.mrs.count(mr->lkey), 0u);
  EXPECT_EQ(engine_->Stats(c_)->qps, 1u);
  EXPECT_EQ(engine_->Stats(c_)->mrs, 1u);
  rnic_.slow_call = nullptr;
}

// A software RNIC's tables belong to the data-path thread: its slow calls
// run there, in RunSync closures.
TEST_F(SlowControlTest, OnTheDataPathWhenTheRnicDoesNot) {
  Make(/*beside=*/false);
  Result<RegMrResult> mr = Status::kIoError;
  const RegMrRequest req = MrReq();
  EXPECT_FALSE(HeldWhileASends(a_, [&] { mr = engine_->RegMr(c_, req); }));
  ASSERT_TRUE(mr.ok());
  EXPECT_FALSE(HeldWhileASends(a_, [&] { (void)engine_->DeregMr(c_, mr->handle); }));
  EXPECT_FALSE(HeldWhileASends(a_, [&] { engine_->DetachVm(c_); }));
  // RegMr, DeregMr; the detach's DestroyQp, its MR's DeregMr, its two CQs'
  // DestroyCq and its PD's DeallocPd.
  EXPECT_EQ(on_data_path_.load(), 7);
  EXPECT_TRUE(SendsComplete(a_, 8));
  rnic_.slow_call = nullptr;
}

}  // namespace
}  // namespace vrdma::engine
