// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The tests' way to a built-in scenario: the same files the bench runs
// (bench/isolation/scenarios/), shortened by scale, with variables set as
// --set would. A scenario that does not load ends the test binary.
#ifndef VRDMA_BENCH_ISOLATION_BUILTIN_FOR_TEST_H_
#define VRDMA_BENCH_ISOLATION_BUILTIN_FOR_TEST_H_

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "bench/isolation/scenario_file.h"

namespace vrdma::bench {

inline ScenarioSpec Builtin(
    const std::string& name, double scale,
    const std::map<std::string, std::string>& set = {}) {
  std::string error;
  std::optional<ScenarioSpec> s = BuiltinScenario(name, scale, set, &error);
  if (!s) {
    std::fprintf(stderr, "built-in scenario %s: %s\n", name.c_str(),
                 error.c_str());
    std::abort();
  }
  return *s;
}

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_BUILTIN_FOR_TEST_H_
