// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-isolation-bench: runs multi-tenant scenarios from YAML files
// (docs/isolation-scenarios.md; the built-in matrix is
// bench/isolation/scenarios/) on the RNIC MODEL, every host a daemon's
// scheduler stage with the chosen policy, and writes results.csv,
// results.md and PNG plots. Every figure is a model output. --policy all
// runs native (pass-through) and every published policy on each scenario
// and prints them side by side. The files' pass rules are checked per
// policy; any failed rule makes the exit status 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/isolation/bench_run.h"
#include "bench/isolation/report.h"
#include "bench/isolation/scenario_file.h"
#include "policy/policy_registry.h"

namespace vb = vrdma::bench;

namespace {

// What --policy all compares: every policy the registry makes (native, the
// published ones, on the model with PeRF's own cross-channel mechanism too,
// and the daemon's own).
const std::vector<std::string> kAllPolicies = vrdma::policy::PolicyNames();

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Multi-tenant isolation bench on the RNIC timing MODEL (not hardware)"};
  bool all = false, list = false;
  std::string out_dir = "isolation-results";
  std::vector<std::string> only, files, sets, sweeps;
  std::string scenario_dir = vb::BuiltinScenarioDir();
  double scale = 1.0;
  bool no_plots = false;
  std::string policy_name = "pass-through";
  std::vector<std::string> policy_opts;
  app.add_flag("--all", all, "run every scenario (of the built-in directory or the files given)");
  app.add_flag("--list", list, "list the scenarios (every sweep point) and exit");
  app.add_option("--scenario", only, "run only these scenarios (repeatable)");
  app.add_option("--scenario-file", files,
                 "a scenario file (repeatable); instead of the built-in directory");
  app.add_option("--scenario-dir", scenario_dir, "the built-in scenario directory")
      ->capture_default_str();
  app.add_option("--set", sets, "a variable of the files: name=value (repeatable)");
  app.add_option("--sweep", sweeps, "sweep a variable: name=v1,v2,... (repeatable)");
  app.add_option("--out", out_dir, "output directory");
  app.add_option("--scale", scale, "multiply simulated durations (e.g. 0.25 for a quick run)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-plots", no_plots, "skip the PNG plots");
  std::string names;
  for (const std::string& n : vrdma::policy::PolicyNames()) names += n + "|";
  app.add_option("--policy", policy_name,
                 "scheduler policy on every host: " + names +
                     "all (every one side by side)");
  app.add_option("--policy-opt", policy_opts,
                 "a policy knob key=value (repeatable; not with --policy all)");
  CLI11_PARSE(app, argc, argv);

  // Everything is read and checked before anything runs.
  vb::VarOverrides overrides;
  for (const std::string& a : sets) {
    std::string error;
    if (!vb::ParseSetOption(a, &overrides, &error)) return Fail("--set " + error);
  }
  for (const std::string& a : sweeps) {
    std::string error;
    if (!vb::ParseSweepOption(a, &overrides, &error)) return Fail("--sweep " + error);
  }
  if (files.empty()) {
    std::string error;
    files = vb::ScenarioFilesIn(scenario_dir, &error);
    if (files.empty()) return Fail(error);
  }
  vb::LoadedScenarios loaded = vb::LoadScenarioFiles(files, overrides);
  if (!loaded.errors.empty()) {
    for (const std::string& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
    std::fprintf(stderr, "%zu error(s) in the scenario files: nothing ran\n",
                 loaded.errors.size());
    return 2;
  }
  if (list) {
    for (const auto& s : loaded.scenarios) {
      std::printf("%-28s %-24s %5zu tenants  %s\n", s.name.c_str(), s.group.c_str(),
                  s.tenants.size(), s.source.c_str());
    }
    return 0;
  }
  std::vector<vb::ScenarioSpec> todo;
  for (const std::string& n : only) {
    if (std::none_of(loaded.scenarios.begin(), loaded.scenarios.end(),
                     [&](const vb::ScenarioSpec& s) { return s.name == n; })) {
      return Fail("--scenario " + n + ": no such scenario (see --list)");
    }
  }
  const bool run_all = all || (only.empty() && !app.get_option("--scenario-file")->empty());
  const bool builtin = app.get_option("--scenario-file")->empty();
  for (auto& s : loaded.scenarios) {
    const bool named = std::find(only.begin(), only.end(), s.name) != only.end();
    if (!run_all && !named) continue;
    // in_all: false keeps a scenario out of --all over the built-in
    // directory (scenarios/98_lossy.yaml); it runs by name or by file.
    if (run_all && !named && builtin && !s.in_all) continue;
    vb::ScaleDuration(&s, scale);
    todo.push_back(s);
  }
  if (todo.empty()) return Fail("nothing to run: use --all, --scenario NAME, --scenario-file FILE or --list");
  std::string refused;
  for (const auto& s : todo) {
    const std::string r = vb::CheckRunnable(s);
    if (!r.empty()) refused += r + "\n";
  }
  if (!refused.empty()) {
    std::fprintf(stderr, "%snothing ran\n", refused.c_str());
    return 2;
  }
  const bool side_by_side = policy_name == "all";
  if (side_by_side && !policy_opts.empty()) {
    std::fprintf(stderr, "--policy-opt needs one --policy\n");
    return 2;
  }
  const std::vector<std::string> policies =
      side_by_side ? kAllPolicies : std::vector<std::string>{policy_name};
  std::vector<vb::PolicyFactory> factories;
  for (const std::string& p : policies) {
    std::string error;
    factories.push_back(vb::PolicyByName(p, policy_opts, &error));
    if (!factories.back()) {
      std::fprintf(stderr, "--policy %s: %s\n", p.c_str(), error.c_str());
      return 2;
    }
  }
  const vb::PolicyFactory native = vb::PassThrough();
  std::filesystem::create_directories(out_dir);
  std::string command = "vrdma-isolation-bench";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];

  std::map<std::string, vb::TenantResult> alone_cache;
  std::vector<vb::ScenarioResult> results;
  vb::RunStats total;
  std::ofstream csv(out_dir + "/results.csv");
  csv << vb::CsvHeader();
  for (size_t i = 0; i < todo.size(); ++i) {
    const vb::ScenarioSpec& spec = todo[i];
    std::printf("[%2zu/%zu] %-26s %4zu tenants ", i + 1, todo.size(), spec.name.c_str(),
                spec.tenants.size());
    std::fflush(stdout);
    vb::RunStats stats;
    vb::RunStats together;  // the runs with every tenant (not the alone runs)
    std::vector<vb::TenantResult> alone;
    std::string layer_lines;
    for (size_t ti = 0; ti < spec.tenants.size(); ++ti) {
      const vb::TenantSpec& t = spec.tenants[ti];
      const vb::ScenarioSpec one = vb::AloneSpec(spec, ti);
      const std::string key = vb::AloneKey(one, one.tenants.front());
      auto it = alone_cache.find(key);
      if (it == alone_cache.end()) {
        it = alone_cache.emplace(key, vb::RunScenario(one, native, &stats).front()).first;
      }
      vb::TenantResult a = it->second;
      a.tenant = t.name;
      alone.push_back(a);
    }
    for (size_t p = 0; p < policies.size(); ++p) {
      vb::ScenarioResult r;
      r.spec = spec;
      r.policy = policies[p];
      r.alone = alone;
      r.together = vb::RunScenario(spec, factories[p], &r.stats);
      stats.events += r.stats.events;
      stats.wall_s += r.stats.wall_s;
      together.events += r.stats.events;
      together.wall_s += r.stats.wall_s;
      stats.drops += r.stats.drops;
      stats.pauses += r.stats.pauses;
      stats.rnic_signals += r.stats.rnic_signals;
      if (r.stats.layer_connects_uc + r.stats.layer_peer_unmatched > 0) {
        // Only with tenants in uc mode: the default run's output is unchanged.
        const vb::RunStats& l = r.stats;
        layer_lines += fmt::format(
            "    layer [{}]: {} uc connects, {} chunks, {} units resent ({} RACK, {} RTO "
            "losses), {} cwnd resets, {} ACKs, {} peer messages unmatched, {} WRs failed, "
            "{} drops after the warm-up, deepest switch queue {} KiB\n",
            policies[p], l.layer_connects_uc, l.layer_chunks_sent, l.layer_retx_sent,
            l.layer_lost_rack, l.layer_lost_rto, l.layer_cwnd_resets, l.layer_acks_sent,
            l.layer_peer_unmatched, l.layer_messages_failed, l.drops_after_warmup,
            l.max_port_bytes / 1024);
      }
      stats.guest_wrs += r.stats.guest_wrs;
      stats.model_qps = std::max(stats.model_qps, r.stats.model_qps);
      stats.qp_state_bytes = std::max(stats.qp_state_bytes, r.stats.qp_state_bytes);
      stats.rss_growth_bytes = std::max(stats.rss_growth_bytes, r.stats.rss_growth_bytes);
      csv << vb::CsvRows(r);
      results.push_back(std::move(r));
    }
    csv.flush();
    const double evs = stats.wall_s > 0 ? stats.events / stats.wall_s : 0;
    // Memory per simulated QP (the largest run): the model's accounted
    // per-QP state, and the resident-set growth over that run per QP.
    const double qps = std::max<double>(1, stats.model_qps);
    std::printf(
        "%6.2f s wall, %5.1f M events/s (together: %.2f s, %.1f M events), %llu drops, %llu "
        "pauses, %llu QPs: %.2f KiB/QP model state, %.2f KiB/QP RSS growth, %.3f RNIC "
        "CQEs per guest WR\n",
        stats.wall_s, evs / 1e6, together.wall_s, together.events / 1e6,
        static_cast<unsigned long long>(stats.drops),
        static_cast<unsigned long long>(stats.pauses),
        static_cast<unsigned long long>(stats.model_qps), stats.qp_state_bytes / qps / 1024,
        stats.rss_growth_bytes / qps / 1024,
        stats.guest_wrs > 0 ? static_cast<double>(stats.rnic_signals) / stats.guest_wrs : 0.0);
    std::fputs(layer_lines.c_str(), stdout);
    total.events += stats.events;
    total.wall_s += stats.wall_s;
  }
  // Pass rules, per policy (pairs = scenario and victim tenant).
  std::vector<vb::RuleOutcome> outcomes;
  for (const vb::ScenarioResult& r : results) {
    for (vb::RuleOutcome& o : vb::EvaluateRules(r)) outcomes.push_back(std::move(o));
  }
  size_t failed_pairs = 0;
  std::string rules;
  for (const vb::RuleOutcome& o : outcomes) rules += vb::FormatOutcome(o) + "\n";
  const std::string summary = vb::RuleSummary(outcomes, policies, &failed_pairs);
  if (!outcomes.empty()) {
    std::printf("pass rules (MODEL figures):\n%s%s", rules.c_str(), summary.c_str());
    std::ofstream(out_dir + "/rules.txt") << rules << summary;
  }
  const std::string md = side_by_side ? vb::MarkdownSideBySide(results, policies, command)
                                      : vb::MarkdownTable(results, command);
  std::ofstream(out_dir + "/results.md") << md;
  std::printf("total: %.1f s wall, %.1f M events, %.1f M events/s\n", total.wall_s,
              total.events / 1e6, total.wall_s > 0 ? total.events / total.wall_s / 1e6 : 0);
  std::printf("wrote %s/results.csv and %s/results.md\n", out_dir.c_str(), out_dir.c_str());
  std::fflush(stdout);
  if (!no_plots) {
    // Debian's interpreter has python3-matplotlib; a pyenv on PATH may not.
    const char* py = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    const std::string cmd = fmt::format("{} {} {}", py, VRDMA_ISOLATION_PLOT_SCRIPT, out_dir);
    if (std::system(cmd.c_str()) != 0) std::printf("plots skipped (python3-matplotlib missing?)\n");
  }
  return failed_pairs > 0 ? 1 : 0;
}
