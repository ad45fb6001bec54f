// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test fixture: VMs with memfd guest RAM on one engine over an RNIC
// (EngineGuestsTest; EngineSoftRnicTest: over SoftRnic), each
// with a PD, a registered buffer (a pattern in it), CQs and one QP; WQEs
// are written into their rings by hand (rdma_user_rxe.h layouts, as
// librxe writes them) and the data path is turned until the guests' CQs
// show what a test waits for.
#ifndef VRDMA_BACKEND_ENGINE_TESTING_SOFT_RNIC_GUESTS_H_
#define VRDMA_BACKEND_ENGINE_TESTING_SOFT_RNIC_GUESTS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/engine/engine.h"
#include "backend/engine/testing/guest_env.h"
#include "backend/engine/testing/qp_bring_up.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "policy/pass_through_policy.h"

namespace vrdma::engine::testing {

inline constexpr uint32_t kAllAccess = kAccessLocalWrite | kAccessRemoteWrite |
                          kAccessRemoteRead | kAccessRemoteAtomic;
inline constexpr uint32_t kBufPages = 4;

// One guest: its RAM, a PD, a registered buffer, CQs and one QP.
struct Guest {
  explicit Guest(uint64_t gpa_base) : env(8u << 20, gpa_base) {}
  GuestEnv env;
  RecordingSink sink;
  Gid gid{};
  VmId vm = 0;
  uint32_t pd = 0;
  uint64_t buf_gpa = 0;
  uint64_t iova = 0;
  uint32_t lkey = 0, rkey = 0;
  GuestRingRef scq, rcq, sq, rq;
  uint32_t scq_h = 0, rcq_h = 0;
  uint32_t qpn = 0;
  uint8_t* buf() { return env.host(buf_gpa); }
};

// VMs on one engine over any RNIC. A derived fixture picks the RNIC and
// calls StartEngine; it must reset engine_ before its RNIC goes.
class EngineGuestsTest : public ::testing::Test {
 protected:
  void StartEngine(Rnic& rnic) {
    rnic_ = &rnic;
    engine_ = Engine::Create(rnic, exec_, policy_);
  }
  // Before any guest is added: the engine runs under another policy (and
  // options).
  void UsePolicy(policy::SchedulerPolicy& p, const EngineOptions& options = {}) {
    engine_.reset();
    engine_ = CreateEngine(*rnic_, exec_, p, options);
  }
  // Guest id's GID (its source GID on the RNIC).
  virtual Gid GidFor(uint8_t id) const { return MakeGid(id); }

  // kernel: the VM may have kernel QPs (Quotas::kernel_verbs) and its QP
  // is one (docs/virtio-rdma.md §4.8).
  void AddGuest(Guest& g, uint8_t id, QpType type = QpType::kRc, bool kernel = false) {
    g.gid = GidFor(id);
    VmConfig c;
    c.name = "vm" + std::to_string(id);
    c.gids = {g.gid};
    c.quotas.kernel_verbs = kernel;
    Result<VmId> vm = engine_->AttachVm(c, &g.sink);
    ASSERT_TRUE(vm.ok()) << StatusName(vm.status());
    g.vm = *vm;
    engine_->SetGuestMemory(g.vm, g.env.memory());
    g.pd = *engine_->CreatePd(g.vm);
    g.buf_gpa = g.env.AllocPages(kBufPages);
    for (uint32_t i = 0; i < kBufPages * 4096; ++i)
      g.buf()[i] = static_cast<uint8_t>(i * 3 + id);
    g.iova = uint64_t{id} << 36;
    RegMrRequest mr;
    mr.pd = g.pd;
    mr.access = kAllAccess;
    mr.iova = g.iova;
    mr.length = kBufPages * 4096;
    mr.pages = GuestEnv::Pages(g.buf_gpa, kBufPages);
    Result<RegMrResult> m = engine_->RegMr(g.vm, mr);
    ASSERT_TRUE(m.ok()) << StatusName(m.status());
    g.lkey = m->lkey;
    g.rkey = m->rkey;
    for (auto [ring, h] :
         {std::pair{&g.scq, &g.scq_h}, std::pair{&g.rcq, &g.rcq_h}}) {
      *ring = GuestRingRef(g.env, 6, 6);
      CreateCqRequest cq;
      cq.cqe = 63;
      cq.ring = ring->spec;
      Result<CreateCqResult> r = engine_->CreateCq(g.vm, cq);
      ASSERT_TRUE(r.ok()) << StatusName(r.status());
      *h = r->handle;
    }
    CreateQpRequest q;
    q.pd = g.pd;
    q.type = type;
    q.send_cq = g.scq_h;
    q.recv_cq = g.rcq_h;
    q.caps = {32, 32, 4, 4, 128};
    q.kernel = kernel;
    g.sq = GuestRingRef(g.env, 6, 9);
    g.rq = GuestRingRef(g.env, 6, 7);
    q.sq = g.sq.spec;
    q.rq = g.rq.spec;
    Result<CreateQpResult> r = engine_->CreateQp(g.vm, q);
    ASSERT_TRUE(r.ok()) << StatusName(r.status());
    g.qpn = r->qpn;
  }

  void BringUp(Guest& g, QpType type, const Guest* peer) {
    BringUpQp(*engine_, g.vm, g.qpn, type, kAllAccess,
              peer ? peer->gid : Gid{}, peer ? peer->qpn : 0, timers_);
  }
  // Both QPs to RTS, each toward the other.
  void Connect(Guest& a, Guest& b, QpType type) {
    BringUp(a, type, &b);
    BringUp(b, type, &a);
  }

  // Runs the data path until pred holds (bounded: max_turns turns, and on a
  // real device, where completions take wall-clock time, 20 s).
  bool RunUntil(const std::function<bool()>& pred, int max_turns = 200000) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int i = 0; real_device_ || i < max_turns; ++i) {
      if (pred()) return true;
      engine_->PollOnce();
      if (real_device_ && (i & 255) == 0 &&
          std::chrono::steady_clock::now() > deadline) {
        break;
      }
    }
    return pred();
  }

  // Collects CQEs as the guest polls them.
  static std::function<bool()> Collect(GuestRingRef& cq,
                                       std::vector<ib_uverbs_wc>& out,
                                       size_t n) {
    return [&cq, &out, n] {
      for (const ib_uverbs_wc& wc : DrainCq(cq)) out.push_back(wc);
      return out.size() >= n;
    };
  }

  Rnic* rnic_ = nullptr;
  // A real device: time-bounded waits and the QP timers of a real network.
  bool real_device_ = false;
  QpTimers timers_{};
  InlineExecutor exec_;
  policy::PassThroughPolicy policy_;
  std::unique_ptr<Engine> engine_;
};

class EngineSoftRnicTest : public EngineGuestsTest {
 protected:
  void SetUp() override { StartEngine(soft_rnic_); }
  ~EngineSoftRnicTest() override { engine_.reset(); }  // before soft_rnic_

  SoftRnic soft_rnic_;
};

}  // namespace vrdma::engine::testing

#endif  // VRDMA_BACKEND_ENGINE_TESTING_SOFT_RNIC_GUESTS_H_
