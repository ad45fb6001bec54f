// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The same scenarios, but through the ENGINE's own scheduler stage
// (backend/engine/scheduler_stage.h) posting to the model behind vrdma::Rnic
// (backend/rnic_model/model_rnic.h), driven by polling on the virtual clock
// as the daemon's data path would: Progress() by a quantum, PollCq, Drain.
// Slower than bench_run.h's direct path; used to check that both agree.
// Limits: every tenant must send from the same host (the stage has one
// Rnic); the host turnaround is the polling quantum.
#ifndef VRDMA_BENCH_ISOLATION_ENGINE_STAGE_RUN_H_
#define VRDMA_BENCH_ISOLATION_ENGINE_STAGE_RUN_H_

#include <vector>

#include "bench/isolation/bench_run.h"
#include "bench/isolation/workload.h"

namespace vrdma::bench {

// Empty result when the scenario has several source hosts.
std::vector<TenantResult> RunScenarioEngineStage(const ScenarioSpec& spec,
                                                 const PolicyFactory& policy,
                                                 double quantum_ns, RunStats* stats);

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_ENGINE_STAGE_RUN_H_
