// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The scheduler stage and a policy at scale, on a no-op RNIC (the FakeRnic
// with complete_at_post): 1,000 tenants x 8 QPs, all active. Each iteration
// submits one signaled RDMA WRITE to every flow, serves the stage until it
// has nothing left to post, and hands every completion back. Reported:
// CPU ns per guest WR and per piece posted (a split WR is several), and the
// host bytes per QP the stage and the policy hold (allocated while the
// flows were added). The clock is virtual: it jumps to the stage's next
// timer whenever the stage waits for one (a paced grant), so the figure is
// the CPU the decisions cost, timers included, not a throughput.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/rnic/testing/fake_rnic.h"
#include "backend/scheduler/stage.h"
#include "policy/policy_registry.h"

namespace vrdma::bench {
namespace {

constexpr uint32_t kTenants = 1000;
constexpr uint32_t kQpsPerTenant = 8;

class CountingOwner : public sched::StageOwner {
 public:
  void OnWrDone(void*, uint32_t, WcStatus, uint32_t) override { ++done; }
  void OnMarkerReached(void*, uint32_t, WcStatus) override {}
  void OnPostRefused(void*, uint32_t, Status) override { ++refused; }
  bool PrepareReceive(void*, const sched::ReceivePiece&) override { return true; }
  bool SendPeerMessage(sched::DestId, const policy::PeerMessage&) override { return false; }
  uint64_t done = 0;
  uint64_t refused = 0;
};

size_t HeapInUse() { return mallinfo2().uordblks; }

struct Rig {
  Rig(const std::string& policy_name, uint32_t bytes) : wr_bytes(bytes) {
    rnic.complete_at_post = true;
    std::string error;
    policy = policy::MakePolicy(policy_name, policy::CardProfile{}, {}, 0, &error);
    if (!policy) return;
    stage = std::make_unique<sched::Stage>(rnic, *policy, owner);
    cq = *rnic.CreateCq(1u << 17);
    const size_t heap = HeapInUse();
    for (uint32_t t = 0; t < kTenants; ++t) {
      stage->AddTenant(t, policy::TenantQos{});
      for (uint32_t q = 0; q < kQpsPerTenant; ++q) {
        QpInit init;
        init.type = QpType::kRc;
        init.send_cq = cq;
        init.recv_cq = cq;
        const RnicQp qp = *rnic.CreateQp(init);
        QpAttr a;
        a.state = QpState::kRts;
        (void)rnic.ModifyQp(qp, a, kQpState);
        sched::FlowSpec s;
        s.tenant = t;
        s.qp = qp;
        s.type = QpType::kRc;
        s.send_cq = cq;
        s.rnic_depth = 64;
        s.queue_capacity = 16;
        s.cookie_base = uint64_t{flows.size()} << 32;
        flows.push_back(stage->AddFlow(sched::Stage::PrepareFlow(s), now));
      }
    }
    // The fake's own QP and CQ records are in this figure too: an upper
    // bound on the stage's and the policy's share.
    bytes_per_qp = static_cast<double>(HeapInUse() - heap) / flows.size();
  }

  // One WR per flow; serve; complete. Returns pieces posted.
  uint64_t Round() {
    now += 1'000'000;
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.num_sge = 1;
    w.sge[0] = {0x100000, wr_bytes, 5};
    w.remote_addr = 0x7000000;
    w.rkey = 9;
    w.send_flags = kSendSignaled;
    policy::WrInfo info;
    info.bytes = wr_bytes;
    info.signaled = true;
    for (uint32_t i = 0; i < flows.size(); ++i) {
      info.tenant = i / kQpsPerTenant;
      info.flow = flows[i];
      (void)stage->Submit(flows[i], w, i, info, now);
    }
    uint64_t pieces = 0;
    const uint64_t before = owner.done;
    while (owner.done - before < flows.size()) {
      stage->Run(now);
      Completion c[64];
      int n;
      bool any = false;
      while ((n = rnic.PollCq(cq, c)) > 0) {
        any = true;
        pieces += static_cast<uint64_t>(n);
        for (int k = 0; k < n; ++k) {
          stage->OnCompletion(flows[c[k].wr_id >> 32], c[k], now);
        }
      }
      if (!any && !stage->has_ready()) {
        // Nothing to do until the stage's next timer (a paced grant): the
        // clock jumps there, as a daemon's data path sleeps until it.
        const sched::Nanos next = stage->next_deadline();
        now = next == sched::kNoExpiry ? now + 1000 : std::max(now + 1, next);
      }
    }
    return pieces;
  }

  uint32_t wr_bytes;
  testing::FakeRnic rnic;
  CountingOwner owner;
  std::unique_ptr<policy::SchedulerPolicy> policy;
  std::unique_ptr<sched::Stage> stage;
  RnicCq cq;
  std::vector<sched::FlowId> flows;
  policy::Nanos now = 1000;
  double bytes_per_qp = 0;
};

void BM_StageScale(benchmark::State& state, std::string policy_name) {
  Rig rig(policy_name, static_cast<uint32_t>(state.range(0)));
  if (!rig.stage) {
    state.SkipWithError("no such policy");
    return;
  }
  rig.Round();  // warm: every FIFO and record ring touched
  uint64_t wrs = 0, signaled = 0;
  for (auto _ : state) {
    signaled += rig.Round();
    wrs += rig.flows.size();
  }
  const auto per = benchmark::Counter::kIsRate | benchmark::Counter::kInvert;
  state.counters["ns_per_wr"] = benchmark::Counter(static_cast<double>(wrs) * 1e-9, per);
  const policy::FlowAccount& a = rig.stage->flow_account(rig.flows[0]);
  const double pieces_per_wr =
      static_cast<double>(a.pieces_posted) / static_cast<double>(a.wrs_arrived);
  state.counters["posted_pieces_per_wr"] = pieces_per_wr;
  state.counters["signaled_per_wr"] = static_cast<double>(signaled) / static_cast<double>(wrs);
  state.counters["ns_per_post"] =
      benchmark::Counter(pieces_per_wr * static_cast<double>(wrs) * 1e-9, per);
  state.counters["host_bytes_per_qp"] = rig.bytes_per_qp;
  state.counters["refused"] = static_cast<double>(rig.owner.refused);
}

}  // namespace
}  // namespace vrdma::bench

int main(int argc, char** argv) {
  for (const char* name : {"pass-through", "fair-share"}) {
    benchmark::RegisterBenchmark((std::string("BM_StageScale/") + name).c_str(),
                                 vrdma::bench::BM_StageScale, std::string(name))
        ->Arg(64)
        ->Arg(4096)  // one post per WR either way: pass-through's per-post cost
        ->Arg(65536)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
