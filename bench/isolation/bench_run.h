// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Runs one scenario of tenants on the RNIC MODEL through the scheduler
// stage and a policy, and reduces what happened to per-tenant figures.
#ifndef VRDMA_BENCH_ISOLATION_BENCH_RUN_H_
#define VRDMA_BENCH_ISOLATION_BENCH_RUN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/isolation/workload.h"
#include "policy/scheduler_policy.h"

namespace vrdma::bench {

using PolicyFactory = std::function<std::unique_ptr<policy::SchedulerPolicy>()>;

// The pass-through policy (native RDMA).
PolicyFactory PassThrough();
// By name ("pass-through"); later policies register here. Empty if unknown.
PolicyFactory PolicyByName(const std::string& name);

// Runs the scenario with all its tenants together. stats may be null.
std::vector<TenantResult> RunScenario(const ScenarioSpec& spec,
                                      const PolicyFactory& policy,
                                      RunStats* stats);

// Runs tenant i of the scenario alone (same card, fabric and timing).
TenantResult RunAlone(const ScenarioSpec& spec, size_t i, const PolicyFactory& policy,
                      RunStats* stats);

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_BENCH_RUN_H_
