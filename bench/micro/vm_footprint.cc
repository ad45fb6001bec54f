// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What one VM costs the daemon's host memory, against its quota: a VM with
// the default quotas creates QPs with the deepest rings the default limits
// allow (1023 send and receive WQEs, 4 SGEs), each on its own CQ, until
// the engine refuses (kNoResource from the first quota that runs out). It
// prints the daemon's anonymous RSS growth, the engine's host_bytes
// charge, the quota, and the kernel mappings the rings took. Figures only;
// nothing is asserted (docs/benchmarks.md).
//
//   build/bench/micro/vm_footprint [max_qps]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/base/executor.h"
#include "backend/engine/engine.h"
#include "backend/engine/testing/guest_env.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "policy/pass_through_policy.h"

namespace {

using vrdma::engine::testing::GuestEnv;
using vrdma::engine::testing::GuestRingRef;

// Anonymous resident memory of this process (the daemon's heap; guest RAM
// is shared memory and not counted here).
uint64_t RssAnonBytes() {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  while (fgets(line, sizeof(line), f) != nullptr) {
    if (sscanf(line, "RssAnon: %lu kB", &kb) == 1) break;
  }
  fclose(f);
  return kb * 1024;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vrdma;
  using namespace vrdma::engine;
  const uint32_t max_qps = argc > 1 ? static_cast<uint32_t>(atoi(argv[1])) : 1024;
  SoftRnic rnic;
  InlineExecutor exec;
  policy::PassThroughPolicy policy;
  std::unique_ptr<Engine> engine = Engine::Create(rnic, exec, policy);
  // Rings for max_qps QPs: 1023 x 512 B SQ + 1023 x 128 B RQ + a CQ each.
  GuestEnv env(uint64_t{max_qps} * 768 * 1024 + (16u << 20));
  VmConfig c;
  c.name = "vm";
  c.gids = {Gid{0xfe, 0x80, 1}};
  const Quotas q = c.quotas;
  VmId vm = *engine->AttachVm(c, nullptr);
  engine->SetGuestMemory(vm, env.memory());
  const uint32_t pd = *engine->CreatePd(vm);
  const uint64_t rss0 = RssAnonBytes();

  std::vector<GuestRingRef> rings;
  rings.reserve(3 * max_qps);
  uint32_t qps = 0;
  Status refused = Status::kOk;
  const char* what = "";
  for (; qps < max_qps; ++qps) {
    rings.emplace_back(env, 11, 6);  // CQ: 2047 CQEs
    Result<CreateCqResult> cq =
        engine->CreateCq(vm, CreateCqRequest{2047, rings.back().spec});
    if (!cq.ok()) {
      refused = cq.status();
      what = "CREATE_CQ";
      break;
    }
    CreateQpRequest r;
    r.pd = pd;
    r.send_cq = r.recv_cq = cq->handle;
    r.caps = {1023, 1023, 4, 4, 64};
    rings.emplace_back(env, 10, 9);
    r.sq = rings.back().spec;
    rings.emplace_back(env, 10, 7);
    r.rq = rings.back().spec;
    Result<CreateQpResult> qp = engine->CreateQp(vm, r);
    if (!qp.ok()) {
      refused = qp.status();
      what = "CREATE_QP";
      break;
    }
  }
  const VmStats s = *engine->Stats(vm);
  const uint64_t rss = RssAnonBytes() - rss0;
  printf("QPs created            %u (then %s: %s)\n", qps, what, StatusName(refused));
  printf("host_bytes charged     %.1f MiB of max_host_bytes %.1f MiB\n",
         s.host_bytes / 1048576.0, q.max_host_bytes / 1048576.0);
  printf("RssAnon growth         %.1f MiB (%.2f x the charge, %.2f x the quota)\n",
         rss / 1048576.0, static_cast<double>(rss) / s.host_bytes,
         static_cast<double>(rss) / q.max_host_bytes);
  printf("per QP (with its CQ)   %.1f KiB charged, %.1f KiB resident\n",
         s.host_bytes / 1024.0 / qps, rss / 1024.0 / qps);
  printf("pinned_bytes           %.1f MiB of %.1f MiB\n", s.pinned_bytes / 1048576.0,
         q.max_pinned_bytes / 1048576.0);
  printf("mappings               %u of max_mappings %u\n", s.mappings, q.max_mappings);
  engine->DetachVm(vm);
  return 0;
}
