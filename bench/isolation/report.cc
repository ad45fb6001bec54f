// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/report.h"

#include <fmt/format.h>

#include <algorithm>

namespace vrdma::bench {

namespace {
std::string CsvQuote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) o += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}
double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

constexpr const char* kPreamble =
    "# Isolation bench on the RNIC MODEL (not hardware)\n\n"
    "Produced by `{}`. Alone = the tenant by itself on the same model card, "
    "native (pass-through); together = the whole mix under the policy. MCT = "
    "message completion time (post to CQE). p99 x = together p99 / alone "
    "p99; rate / = alone rate / together rate.\n\n";
}  // namespace

std::string CsvHeader() {
  return "scenario,group,preset,tenant,alone_gbps,alone_mmps,alone_avg_us,alone_p99_us,"
         "together_gbps,together_mmps,together_avg_us,together_p99_us,"
         "p99_growth,rate_drop,paper,policy\n";
}

std::string CsvRows(const ScenarioResult& r) {
  std::string out;
  for (size_t i = 0; i < r.together.size(); ++i) {
    const TenantResult& a = r.alone[i];
    const TenantResult& t = r.together[i];
    out += fmt::format("{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},"
                       "{:.3f},{:.3f},{},{}\n",
                       r.spec.name, r.spec.group, r.spec.preset, t.tenant, a.gbps, a.mmps,
                       a.avg_us, a.p99_us, t.gbps, t.mmps, t.avg_us, t.p99_us,
                       Ratio(t.p99_us, a.p99_us), Ratio(a.mmps, t.mmps), CsvQuote(r.spec.paper),
                       r.policy);
  }
  return out;
}

std::string MarkdownTable(const std::vector<ScenarioResult>& results,
                          const std::string& command) {
  std::string out = fmt::format(kPreamble, command);
  out += fmt::format("Policy: {}.\n\n", results.empty() ? "" : results[0].policy);
  out +=
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

std::string MarkdownSideBySide(const std::vector<ScenarioResult>& results,
                               const std::vector<std::string>& policies,
                               const std::string& command) {
  std::string out = fmt::format(kPreamble, command);
  out += "Per policy: p99 x / rate / / Gbps of the tenant in the mix.\n\n";
  out += "| scenario | tenant | alone p99 us / Mmps / Gbps |";
  for (const std::string& p : policies) out += " " + p + " |";
  out += " paper |\n|---|---|---|";
  for (size_t i = 0; i < policies.size(); ++i) out += "---|";
  out += "---|\n";
  const size_t n = policies.size();
  for (size_t s = 0; s + n <= results.size(); s += n) {
    const ScenarioResult& first = results[s];
    const size_t shown = std::min<size_t>(first.together.size(), 4);
    for (size_t i = 0; i < shown; ++i) {
      const TenantResult& a = first.alone[i];
      out += fmt::format("| {} | {} | {:.2f} / {:.2f} / {:.2f} |",
                         i == 0 ? first.spec.name : "", a.tenant, a.p99_us, a.mmps, a.gbps);
      for (size_t p = 0; p < n; ++p) {
        const TenantResult& t = results[s + p].together[i];
        out += fmt::format(" {:.2f} / {:.2f} / {:.1f} |", Ratio(t.p99_us, a.p99_us),
                           Ratio(a.mmps, t.mmps), t.gbps);
      }
      out += fmt::format(" {} |\n", i == 0 ? first.spec.paper : "");
    }
    if (first.together.size() > shown) {
      out += fmt::format("| | (+{} more tenants in the CSV) | |", first.together.size() - shown);
      for (size_t p = 0; p <= n; ++p) out += " |";
      out += "\n";
    }
  }
  return out;
}

}  // namespace vrdma::bench
