// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-isolation-bench: runs the multi-tenant scenario matrix on the RNIC
// MODEL through the scheduler stage and the pass-through policy, and writes
// results.csv, results.md and PNG plots. Every figure is a model output.
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
#ifdef VRDMA_HAVE_ENGINE_STAGE
#include "bench/isolation/engine_stage_run.h"
#endif
#include "bench/isolation/report.h"
#include "bench/isolation/scenarios.h"

namespace vb = vrdma::bench;

namespace {

std::string AloneKey(const vb::ScenarioSpec& s, const vb::TenantSpec& t) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", s.preset, s.duration_us,
                     s.warmup_us, s.seed, s.fabric.random_loss, static_cast<int>(t.op),
                     t.msg_bytes, t.batch, t.num_qps, static_cast<int>(t.mode), t.tx_depth,
                     t.start_us, t.stop_us, t.turnaround_ns, t.uc);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Multi-tenant isolation bench on the RNIC timing MODEL (not hardware)"};
  bool all = false, list = false;
  std::string out_dir = "isolation-results";
  std::vector<std::string> only;
  double scale = 1.0;
  bool no_plots = false;
  app.add_flag("--all", all, "run the whole scenario matrix");
  app.add_flag("--list", list, "list scenario names");
  app.add_option("--scenario", only, "run only these scenarios (repeatable)");
  app.add_option("--out", out_dir, "output directory");
  app.add_option("--scale", scale, "multiply simulated durations (e.g. 0.25 for a quick run)");
  app.add_flag("--no-plots", no_plots, "skip the PNG plots");
  std::string policy_name = "pass-through";
  app.add_option("--policy", policy_name, "scheduler policy (pass-through)");
  std::string stage = "direct";
  app.add_option("--stage", stage,
                 "direct: the bench's stage posting to the simulator (fast); engine: the "
                 "engine's SchedulerStage posting through vrdma::Rnic (single source host)")
      ->check(CLI::IsMember({"direct", "engine"}));
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
  std::filesystem::create_directories(out_dir);
  std::string command = "vrdma-isolation-bench";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];

  const vb::PolicyFactory policy = vb::PolicyByName(policy_name);
  if (!policy) {
    std::fprintf(stderr, "unknown policy %s\n", policy_name.c_str());
    return 2;
  }
  auto run = [&](const vb::ScenarioSpec& spec, vb::RunStats* st) {
#ifdef VRDMA_HAVE_ENGINE_STAGE
    if (stage == "engine") return vb::RunScenarioEngineStage(spec, policy, 100.0, st);
#endif
    return vb::RunScenario(spec, policy, st);
  };
#ifndef VRDMA_HAVE_ENGINE_STAGE
  if (stage == "engine") {
    std::fprintf(stderr, "--stage engine: use vrdma-isolation-bench-engine\n");
    return 2;
  }
#endif
  std::map<std::string, vb::TenantResult> alone_cache;
  std::vector<vb::ScenarioResult> results;
  vb::RunStats total;
  std::ofstream csv(out_dir + "/results.csv");
  csv << vb::CsvHeader();
  for (size_t i = 0; i < todo.size(); ++i) {
    vb::ScenarioResult r;
    r.spec = todo[i];
    std::printf("[%2zu/%zu] %-26s %4zu tenants ", i + 1, todo.size(), r.spec.name.c_str(),
                r.spec.tenants.size());
    std::fflush(stdout);
    for (size_t t = 0; t < r.spec.tenants.size(); ++t) {
      const std::string key = AloneKey(r.spec, r.spec.tenants[t]);
      auto it = alone_cache.find(key);
      if (it == alone_cache.end()) {
        vb::ScenarioSpec one = r.spec;
        one.tenants = {r.spec.tenants[t]};
        std::vector<vb::TenantResult> a = run(one, &r.stats);
        if (a.empty()) break;
        it = alone_cache.emplace(key, a.front()).first;
      }
      vb::TenantResult a = it->second;
      a.tenant = r.spec.tenants[t].name;
      r.alone.push_back(a);
    }
    r.together = run(r.spec, &r.stats);
    if (r.together.empty() || r.alone.size() != r.together.size()) {
      std::printf("skipped (needs one source host for --stage engine)\n");
      continue;
    }
    const double evs = r.stats.wall_s > 0 ? r.stats.events / r.stats.wall_s : 0;
    std::printf("%6.2f s wall, %5.1f M events/s, %llu drops, %llu pauses\n", r.stats.wall_s,
                evs / 1e6, static_cast<unsigned long long>(r.stats.drops),
                static_cast<unsigned long long>(r.stats.pauses));
    csv << vb::CsvRows(r);
    csv.flush();
    total.events += r.stats.events;
    total.wall_s += r.stats.wall_s;
    results.push_back(std::move(r));
  }
  std::ofstream(out_dir + "/results.md") << vb::MarkdownTable(results, command, policy_name);
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
