// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-isolation-bench: runs the multi-tenant scenario matrix on the RNIC
// MODEL, every host a daemon's scheduler stage with the chosen policy, and
// writes results.csv, results.md and PNG plots. Every figure is a model
// output. --policy all runs native (pass-through) and every published
// policy on each scenario and prints them side by side.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/isolation/bench_run.h"
#include "bench/isolation/report.h"
#include "bench/isolation/scenarios.h"
#include "policy/policy_registry.h"

namespace vb = vrdma::bench;

namespace {

std::string AloneKey(const vb::ScenarioSpec& s, const vb::TenantSpec& t) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", s.preset,
                     s.duration_us, s.warmup_us, s.seed, s.fabric.random_loss,
                     static_cast<int>(t.op), t.msg_bytes, t.batch, t.num_qps,
                     static_cast<int>(t.mode), t.tx_depth, t.start_us, t.stop_us,
                     t.turnaround_ns, t.uc, t.src_host, t.dst_host);
}

// What --policy all compares: native and the published policies, on the
// model (which has PeRF's own cross-channel mechanism too).
const std::vector<std::string> kAllPolicies = {"pass-through", "perf", "perf-xc",
                                               "justitia"};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Multi-tenant isolation bench on the RNIC timing MODEL (not hardware)"};
  bool all = false, list = false;
  std::string out_dir = "isolation-results";
  std::vector<std::string> only;
  double scale = 1.0;
  bool no_plots = false;
  std::string policy_name = "pass-through";
  std::vector<std::string> policy_opts;
  app.add_flag("--all", all, "run the whole scenario matrix");
  app.add_flag("--list", list, "list scenario names");
  app.add_option("--scenario", only, "run only these scenarios (repeatable)");
  app.add_option("--out", out_dir, "output directory");
  app.add_option("--scale", scale, "multiply simulated durations (e.g. 0.25 for a quick run)");
  app.add_flag("--no-plots", no_plots, "skip the PNG plots");
  std::string names;
  for (const std::string& n : vrdma::policy::PolicyNames()) names += n + "|";
  app.add_option("--policy", policy_name,
                 "scheduler policy on every host: " + names +
                     "all (pass-through, perf, perf-xc, justitia side by side)");
  app.add_option("--policy-opt", policy_opts,
                 "a policy knob key=value (repeatable; not with --policy all)");
  CLI11_PARSE(app, argc, argv);

  std::vector<vb::ScenarioSpec> matrix = vb::AllScenarios();
  if (list) {
    for (const auto& s : matrix) std::printf("%-28s %-24s %zu tenants\n", s.name.c_str(), s.group.c_str(), s.tenants.size());
    return 0;
  }
  std::vector<vb::ScenarioSpec> todo;
  for (auto& s : matrix) {
    bool pick = all;
    for (const auto& n : only) pick = pick || n == s.name;
    if (!pick) continue;
    s.duration_us *= scale;
    s.warmup_us *= scale;
    todo.push_back(s);
  }
  if (todo.empty()) {
    std::fprintf(stderr, "nothing to run: use --all, --scenario NAME or --list\n");
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
    std::vector<vb::TenantResult> alone;
    for (const vb::TenantSpec& t : spec.tenants) {
      const std::string key = AloneKey(spec, t);
      auto it = alone_cache.find(key);
      if (it == alone_cache.end()) {
        vb::ScenarioSpec one = spec;
        one.tenants = {t};
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
      stats.drops += r.stats.drops;
      stats.pauses += r.stats.pauses;
      csv << vb::CsvRows(r);
      results.push_back(std::move(r));
    }
    csv.flush();
    const double evs = stats.wall_s > 0 ? stats.events / stats.wall_s : 0;
    std::printf("%6.2f s wall, %5.1f M events/s, %llu drops, %llu pauses\n", stats.wall_s,
                evs / 1e6, static_cast<unsigned long long>(stats.drops),
                static_cast<unsigned long long>(stats.pauses));
    total.events += stats.events;
    total.wall_s += stats.wall_s;
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
  return 0;
}
