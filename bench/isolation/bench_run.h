// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Runs one scenario of tenants on the RNIC MODEL: every host is a
// vhost-rdma daemon's scheduler stage (backend/scheduler, the code the
// daemon runs) with its own instance of the policy, posting to its card of
// the model through vrdma::Rnic; the results are reduced to per-tenant
// figures. Every figure is a model output, not a hardware measurement.
#ifndef VRDMA_BENCH_ISOLATION_BENCH_RUN_H_
#define VRDMA_BENCH_ISOLATION_BENCH_RUN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/isolation/workload.h"
#include "policy/scheduler_policy.h"

namespace vrdma::bench {

// Makes the policy of one host (a daemon) for the card it runs on.
using PolicyFactory = std::function<std::unique_ptr<policy::SchedulerPolicy>(
    const policy::CardProfile& card, uint32_t host)>;

// The pass-through policy (native RDMA).
PolicyFactory PassThrough();
// By name (policy/policy_registry.h) with its knobs ("key=value"); empty
// (and *error set) when unknown or malformed.
PolicyFactory PolicyByName(const std::string& name,
                           const std::vector<std::string>& options,
                           std::string* error);

// Empty when the model can run the scenario; else why not, naming the
// field ("f.yaml:12: s: tenants[0].qps.type: ud is not supported by the RNIC
// model yet"). The one place that says what the model cannot run yet;
// RunScenario aborts on a scenario it refuses, so check first.
std::string CheckRunnable(const ScenarioSpec& spec);

// Tenant t of spec alone gives the same figures for the same key.
std::string AloneKey(const ScenarioSpec& spec, const TenantSpec& t);

// Tenant i alone: the scenario with that tenant only; a tenant with
// `reliability` is measured against native RC on the lossless fabric
// (docs/reliability.md §9), so its "alone" is that reference.
ScenarioSpec AloneSpec(const ScenarioSpec& spec, size_t i);

// Multiplies the simulated duration and warm-up (a quick run: 0.25).
void ScaleDuration(ScenarioSpec* spec, double scale);

// Runs the scenario with all its tenants together. stats may be null.
std::vector<TenantResult> RunScenario(const ScenarioSpec& spec,
                                      const PolicyFactory& policy,
                                      RunStats* stats);

// Runs tenant i of the scenario alone (same card, fabric and timing).
TenantResult RunAlone(const ScenarioSpec& spec, size_t i, const PolicyFactory& policy,
                      RunStats* stats);

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_BENCH_RUN_H_
