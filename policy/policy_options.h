// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A policy's knobs as "key=value" strings (--policy-opt in the daemon and
// the bench): each policy lists its knobs once, with where each value goes
// and its allowed range, and ApplyKnobs parses a whole option list against
// that table. Control path only.
#ifndef VRDMA_POLICY_POLICY_OPTIONS_H_
#define VRDMA_POLICY_POLICY_OPTIONS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace vrdma::policy {

struct Knob {
  std::string_view name;
  std::variant<uint32_t*, uint64_t*, double*, bool*> value;
  double min = 0;  // inclusive bounds of the value (bools: 0 or 1)
  double max = 0;
};

// Splits "key=value"; false when there is no '=' or the key is empty.
bool SplitOption(std::string_view option, std::string_view* key,
                 std::string_view* value);
// A whole decimal number ("1e6" and "2.5" too); false when malformed.
bool ParseNumber(std::string_view text, double* out);

// Sets each option's knob; false (with *error naming the option) when a
// key is unknown, a value malformed, out of range or not an integer where
// the knob is one. Nothing is partly applied: on error no knob changed.
bool ApplyKnobs(const std::vector<std::string>& options,
                std::span<const Knob> knobs, std::string* error);

// "name=value, ..." of every knob's current value (what stats reports).
std::string DescribeKnobs(std::span<const Knob> knobs);

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_POLICY_OPTIONS_H_
