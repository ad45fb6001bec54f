// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Scenario results (alone vs together per tenant) and their CSV/Markdown
// forms. Every figure is a MODEL output.
#ifndef VRDMA_BENCH_ISOLATION_REPORT_H_
#define VRDMA_BENCH_ISOLATION_REPORT_H_

#include <string>
#include <vector>

#include "bench/isolation/workload.h"

namespace vrdma::bench {

struct ScenarioResult {
  ScenarioSpec spec;
  std::vector<TenantResult> alone;
  std::vector<TenantResult> together;
  RunStats stats;
};

std::string CsvHeader();
std::string CsvRows(const ScenarioResult& r);
std::string MarkdownTable(const std::vector<ScenarioResult>& results,
                          const std::string& command, const std::string& policy);

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_REPORT_H_
