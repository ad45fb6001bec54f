// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

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
double MetricOf(const TenantResult& t, Metric m) {
  switch (m) {
    case Metric::kGbps: return t.gbps;
    case Metric::kMmps: return t.mmps;
    case Metric::kAvgUs: return t.avg_us;
    case Metric::kP50Us: return t.p50_us;
    case Metric::kP99Us: return t.p99_us;
  }
  return 0;
}
constexpr const char* kMetricNames[] = {"gbps", "mmps", "avg_us", "p50_us", "p99_us"};
constexpr const char* kRatioNames[] = {"", " with/alone", " alone/with"};
}  // namespace

std::vector<RuleOutcome> EvaluateRules(const ScenarioResult& r) {
  std::vector<RuleOutcome> out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const ExpectRule& rule : r.spec.expect) {
    if (!rule.policies.empty() &&
        std::find(rule.policies.begin(), rule.policies.end(), r.policy) == rule.policies.end()) {
      continue;
    }
    for (size_t i : rule.tenants) {
      RuleOutcome o;
      o.scenario = r.spec.name;
      o.policy = r.policy;
      o.tenant = r.together[i].tenant;
      o.rule = &rule;
      const double with = MetricOf(r.together[i], rule.metric);
      const double alone = MetricOf(r.alone[i], rule.metric);
      switch (rule.ratio) {
        case RatioKind::kNone: o.value = with; break;
        case RatioKind::kWithOverAlone: o.value = alone != 0 ? with / alone : nan; break;
        case RatioKind::kAloneOverWith: o.value = with != 0 ? alone / with : nan; break;
      }
      o.pass = !std::isnan(o.value) && (!rule.le || o.value <= *rule.le) &&
               (!rule.ge || o.value >= *rule.ge);
      out.push_back(o);
    }
  }
  return out;
}

std::string FormatOutcome(const RuleOutcome& o) {
  const ExpectRule& r = *o.rule;
  std::string bounds;
  if (r.ge) bounds += fmt::format(">= {}", *r.ge);
  if (r.le) bounds += fmt::format("{}<= {}", bounds.empty() ? "" : ", ", *r.le);
  return fmt::format("{} {} [{}] {}: {}{} = {} (rule: {}; {})", o.pass ? "PASS" : "FAIL",
                     o.scenario, o.policy, o.tenant, kMetricNames[static_cast<int>(r.metric)],
                     kRatioNames[static_cast<int>(r.ratio)],
                     std::isnan(o.value) ? std::string("n/a (over zero)")
                                         : fmt::format("{:.3f}", o.value),
                     bounds, r.source);
}

std::string RuleSummary(const std::vector<RuleOutcome>& outcomes,
                        const std::vector<std::string>& policies, size_t* failed_pairs) {
  std::map<std::string, std::map<std::pair<std::string, std::string>, bool>> pairs;
  for (const RuleOutcome& o : outcomes) {
    auto [it, fresh] = pairs[o.policy].emplace(std::pair{o.scenario, o.tenant}, o.pass);
    if (!fresh) it->second = it->second && o.pass;
  }
  std::string out;
  *failed_pairs = 0;
  for (const std::string& p : policies) {
    size_t pass = 0, fail = 0;
    for (const auto& [pair, ok] : pairs[p]) (ok ? pass : fail)++;
    *failed_pairs += fail;
    out += fmt::format("{}: {} pairs passed, {} failed\n", p, pass, fail);
  }
  return out;
}

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
