// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Scenario results (alone vs together per tenant, per policy) and their
// CSV/Markdown forms. Every figure is a MODEL output.
//
// "Alone" is always the tenant by itself on the same model card under the
// pass-through policy (native RDMA on a card of its own): every policy's
// "together" figures are compared with the same reference.
#ifndef VRDMA_BENCH_ISOLATION_REPORT_H_
#define VRDMA_BENCH_ISOLATION_REPORT_H_

#include <string>
#include <vector>

#include "bench/isolation/workload.h"

namespace vrdma::bench {

struct ScenarioResult {
  ScenarioSpec spec;
  std::string policy;
  std::vector<TenantResult> alone;
  std::vector<TenantResult> together;
  RunStats stats;
};

// One pass rule applied to one tenant of one scenario under one policy.
struct RuleOutcome {
  std::string scenario;
  std::string policy;
  std::string tenant;
  const ExpectRule* rule = nullptr;  // owned by the result's spec
  double value = 0;                  // NaN: a ratio over a zero
  bool pass = false;
};

// The scenario's rules that apply to the result's policy, per tenant.
std::vector<RuleOutcome> EvaluateRules(const ScenarioResult& r);
// "PASS d_vs_1b [pass-through] D: p99_us with/alone = 3.74 (rule: >= 3; f.yaml:31)"
std::string FormatOutcome(const RuleOutcome& o);
// Per policy: (scenario, tenant) pairs whose rules all passed, and the
// pairs with a failed rule; one line per policy in `policies` order.
std::string RuleSummary(const std::vector<RuleOutcome>& outcomes,
                        const std::vector<std::string>& policies, size_t* failed_pairs);

std::string CsvHeader();
std::string CsvRows(const ScenarioResult& r);
// One policy: the table per scenario and tenant.
std::string MarkdownTable(const std::vector<ScenarioResult>& results,
                          const std::string& command);
// Several policies side by side: results holds, per scenario, one result
// per policy in `policies` order.
std::string MarkdownSideBySide(const std::vector<ScenarioResult>& results,
                               const std::vector<std::string>& policies,
                               const std::string& command);

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_REPORT_H_
