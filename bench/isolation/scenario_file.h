// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Scenario files of the isolation bench: YAML, one or more scenarios per
// file, with variables, sweeps, tenant shapes and pass rules
// (docs/isolation-scenarios.md). Loading checks every file and every sweep
// point before anything runs; each error names the file, line and field:
//   latency_vs_bw.yaml:14: d_vs_1b: tenants[1].qps.type: expected one of
//   rc, uc, ud, got "rd"
// The built-in matrix is bench/isolation/scenarios/*.yaml.
#ifndef VRDMA_BENCH_ISOLATION_SCENARIO_FILE_H_
#define VRDMA_BENCH_ISOLATION_SCENARIO_FILE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/isolation/workload.h"

namespace vrdma::bench {

// Variables set on the command line: they win over a file's defaults and
// sweeps, and each must be used by some scenario loaded.
struct VarOverrides {
  std::map<std::string, std::string> set;                 // --set name=value
  std::map<std::string, std::vector<std::string>> sweep;  // --sweep name=a,b
};

struct LoadedScenarios {
  std::vector<ScenarioSpec> scenarios;  // every sweep point, in file order
  std::vector<std::string> errors;      // empty: all of them are valid
};

// Loads the files in order; scenario names must be unique across them.
LoadedScenarios LoadScenarioFiles(const std::vector<std::string>& paths,
                                  const VarOverrides& overrides);
// The same from text (file_name only names it in errors).
LoadedScenarios LoadScenarioText(const std::string& file_name,
                                 const std::string& yaml,
                                 const VarOverrides& overrides);

// The *.yaml files of dir, sorted by name; empty (and *error set) when the
// directory cannot be read or has none.
std::vector<std::string> ScenarioFilesIn(const std::string& dir,
                                         std::string* error);

// Where the built-in scenario files are (compiled in).
std::string BuiltinScenarioDir();

// "name=value" into overrides->set, "name=a,b,c" into overrides->sweep.
bool ParseSetOption(const std::string& arg, VarOverrides* overrides,
                    std::string* error);
bool ParseSweepOption(const std::string& arg, VarOverrides* overrides,
                      std::string* error);

// One built-in scenario by name (after --set-like overrides), its duration
// multiplied by scale: what the tests run. nullopt, *error set, when the
// files do not load or have no such scenario.
std::optional<ScenarioSpec> BuiltinScenario(
    const std::string& name, double scale,
    const std::map<std::string, std::string>& set, std::string* error);

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_SCENARIO_FILE_H_
