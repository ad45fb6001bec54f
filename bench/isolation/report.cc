// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/report.h"

#include <fmt/format.h>

namespace vrdma::bench {

namespace {
std::string CsvQuote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) o += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}
double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
}  // namespace

std::string CsvHeader() {
  return "scenario,group,preset,tenant,alone_gbps,alone_mmps,alone_avg_us,alone_p99_us,"
         "together_gbps,together_mmps,together_avg_us,together_p99_us,"
         "p99_growth,rate_drop,paper\n";
}

std::string CsvRows(const ScenarioResult& r) {
  std::string out;
  for (size_t i = 0; i < r.together.size(); ++i) {
    const TenantResult& a = r.alone[i];
    const TenantResult& t = r.together[i];
    out += fmt::format("{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},"
                       "{:.3f},{:.3f},{}\n",
                       r.spec.name, r.spec.group, r.spec.preset, t.tenant, a.gbps, a.mmps,
                       a.avg_us, a.p99_us, t.gbps, t.mmps, t.avg_us, t.p99_us,
                       Ratio(t.p99_us, a.p99_us), Ratio(a.mmps, t.mmps), CsvQuote(r.spec.paper));
  }
  return out;
}

std::string MarkdownTable(const std::vector<ScenarioResult>& results, const std::string& command,
                          const std::string& policy) {
  std::string out =
      "# Isolation bench on the RNIC MODEL (not hardware)\n\n"
      "Produced by `" + command + "`. Policy: " + policy + ". "
      "Alone = the tenant by itself on the same model card; together = the whole mix. "
      "MCT = message completion time (post to CQE).\n\n"
      "| scenario | card | tenant | alone Gbps | alone Mmps | alone avg/p99 us | "
      "together Gbps | together Mmps | together avg/p99 us | p99 x | rate / | paper |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ScenarioResult& r : results) {
    // Crowds: show the first few tenants only.
    const size_t shown = std::min<size_t>(r.together.size(), 4);
    for (size_t i = 0; i < shown; ++i) {
      const TenantResult& a = r.alone[i];
      const TenantResult& t = r.together[i];
      out += fmt::format("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f}/{:.2f} | {:.2f} | {:.2f} | "
                         "{:.2f}/{:.2f} | {:.2f} | {:.2f} | {} |\n",
                         i == 0 ? r.spec.name : "", i == 0 ? r.spec.preset : "", t.tenant,
                         a.gbps, a.mmps, a.avg_us, a.p99_us, t.gbps, t.mmps, t.avg_us, t.p99_us,
                         Ratio(t.p99_us, a.p99_us), Ratio(a.mmps, t.mmps),
                         i == 0 ? r.spec.paper : "");
    }
    if (r.together.size() > shown) {
      out += fmt::format("| | | (+{} more tenants in the CSV) | | | | | | | | | |\n",
                         r.together.size() - shown);
    }
  }
  return out;
}

}  // namespace vrdma::bench
