// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ParseFaultSpec: one pass over the items, each value split at ':' and
// every number checked for its range and unit.
#include "backend/fabric/fault_spec.h"

#include <charconv>
#include <cmath>
#include <vector>

namespace vrdma::fabric {
namespace {

// The ':'-separated parts of a value.
std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

// A number, then a unit from the table (the empty unit only if listed).
bool NumberWithUnit(std::string_view s,
                    std::initializer_list<std::pair<std::string_view, double>> units,
                    double* out) {
  size_t i = 0;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
  if (i == 0) return false;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + i, v);
  if (ec != std::errc() || end != s.data() + i || !std::isfinite(v)) {
    return false;
  }
  const std::string_view unit = s.substr(i);
  for (const auto& [name, scale] : units) {
    if (unit == name) {
      *out = v * scale;
      return true;
    }
  }
  return false;
}

bool Probability(std::string_view s, double* out) {
  return NumberWithUnit(s, {{"", 1.0}}, out) && *out <= 1.0;
}

bool Duration(std::string_view s, uint64_t* out) {
  double ns = 0;
  if (!NumberWithUnit(s, {{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}}, &ns) ||
      ns > 1e18 || ns != std::floor(ns)) {
    return false;
  }
  *out = static_cast<uint64_t>(ns);
  return true;
}

bool Rate(std::string_view s, uint64_t* out) {
  double bps = 0;
  if (!NumberWithUnit(s, {{"bps", 1.0}, {"kbps", 1e3}, {"mbps", 1e6}, {"gbps", 1e9}},
                      &bps) ||
      bps < 1 || bps > 1e15) {
    return false;
  }
  *out = static_cast<uint64_t>(bps);
  return true;
}

bool Bytes(std::string_view s, uint64_t* out) {
  double b = 0;
  if (!NumberWithUnit(s, {{"", 1.0}, {"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}},
                      &b) ||
      b < 1 || b > 1e15 || b != std::floor(b)) {
    return false;
  }
  *out = static_cast<uint64_t>(b);
  return true;
}

}  // namespace

Result<FaultConfig> ParseFaultSpec(std::string_view spec, std::string* error) {
  FaultConfig c;
  auto fail = [&](std::string_view item, const char* why) -> Result<FaultConfig> {
    if (error != nullptr) {
      *error = std::string(why) + " in '" + std::string(item) + "'";
    }
    return Status::kInvalid;
  };
  if (spec.empty()) return c;
  std::vector<std::string_view> seen;
  for (std::string_view item : Split(spec, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail(item, "no '='");
    const std::string_view key = item.substr(0, eq);
    const std::vector<std::string_view> v = Split(item.substr(eq + 1), ':');
    for (std::string_view k : seen) {
      if (k == key) return fail(item, "a key given twice");
    }
    seen.push_back(key);
    bool ok = false;
    if (key == "loss") {
      ok = v.size() == 1 && Probability(v[0], &c.loss);
    } else if (key == "burst") {
      ok = (v.size() == 2 || v.size() == 3) && Probability(v[0], &c.p_enter_bad) &&
           Probability(v[1], &c.p_leave_bad) &&
           (v.size() == 2 || Probability(v[2], &c.loss_bad)) && c.p_enter_bad > 0 &&
           c.p_leave_bad > 0;
    } else if (key == "reorder") {
      ok = v.size() == 2 && Probability(v[0], &c.p_reorder) &&
           Duration(v[1], &c.reorder_delay_ns);
    } else if (key == "dup") {
      ok = v.size() == 1 && Probability(v[0], &c.p_dup);
    } else if (key == "delay") {
      ok = (v.size() == 1 || v.size() == 2) && Duration(v[0], &c.delay_ns) &&
           (v.size() == 1 || Duration(v[1], &c.jitter_ns));
    } else if (key == "bottleneck") {
      ok = v.size() == 2 && Rate(v[0], &c.bottleneck_bps) &&
           Bytes(v[1], &c.bottleneck_bytes);
    } else {
      return fail(item, "an unknown key");
    }
    if (!ok) return fail(item, "a value out of range or without its unit");
  }
  return c;
}

}  // namespace vrdma::fabric
