// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Variables in scenario files (docs/isolation-scenarios.md): `$name` and
// `${name}` stand for a variable's value anywhere in a scalar, `${a * 2 + 1}`
// for integer arithmetic on variables and literals, `$$` for a dollar.
#ifndef VRDMA_BENCH_ISOLATION_SCENARIO_VARS_H_
#define VRDMA_BENCH_ISOLATION_SCENARIO_VARS_H_

#include <functional>
#include <set>
#include <string>
#include <string_view>

namespace vrdma::bench {

// The value of a variable; false when it has none.
using VarLookup =
    std::function<bool(const std::string& name, std::string* value)>;

// Replaces every reference in text. False (and *error set) on an undefined
// variable, a malformed reference or expression, or a non-integer operand.
bool SubstituteVars(std::string_view text, const VarLookup& vars,
                    std::string* out, std::string* error);

// Adds the names text refers to (without checking they are defined).
void CollectVarRefs(std::string_view text, std::set<std::string>* names);

// A variable's name: [A-Za-z_][A-Za-z0-9_]*.
bool IsVarName(std::string_view name);

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_SCENARIO_VARS_H_
