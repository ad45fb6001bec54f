// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "policy/policy_options.h"

#include <charconv>
#include <cmath>

namespace vrdma::policy {

bool SplitOption(std::string_view option, std::string_view* key,
                 std::string_view* value) {
  const size_t eq = option.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  *key = option.substr(0, eq);
  *value = option.substr(eq + 1);
  return true;
}

bool ParseNumber(std::string_view text, double* out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *out);
  return !text.empty() && ec == std::errc() && p == end && std::isfinite(*out);
}

namespace {

const Knob* Find(std::span<const Knob> knobs, std::string_view key) {
  for (const Knob& k : knobs) {
    if (k.name == key) return &k;
  }
  return nullptr;
}

bool Check(const Knob& k, double v, std::string_view option, std::string* error) {
  const bool integral = !std::holds_alternative<double*>(k.value);
  if (v < k.min || v > k.max || (integral && v != std::floor(v))) {
    *error = std::string(option) + ": " + std::string(k.name) + " must be " +
             (integral ? "an integer" : "a number") + " in [" +
             std::to_string(k.min) + ", " + std::to_string(k.max) + "]";
    return false;
  }
  return true;
}

void Store(const Knob& k, double v) {
  std::visit(
      [v](auto* p) { *p = static_cast<std::remove_pointer_t<decltype(p)>>(v); },
      k.value);
}

}  // namespace

bool ApplyKnobs(const std::vector<std::string>& options,
                std::span<const Knob> knobs, std::string* error) {
  std::vector<std::pair<const Knob*, double>> parsed;
  for (const std::string& o : options) {
    std::string_view key, text;
    double v = 0;
    if (!SplitOption(o, &key, &text)) {
      *error = "option must be key=value: " + o;
      return false;
    }
    const Knob* k = Find(knobs, key);
    if (k == nullptr) {
      *error = "unknown option: " + std::string(key);
      return false;
    }
    if (std::holds_alternative<bool*>(k->value) && (text == "true" || text == "false")) {
      v = text == "true" ? 1 : 0;
    } else if (!ParseNumber(text, &v)) {
      *error = "not a number: " + o;
      return false;
    }
    if (!Check(*k, v, o, error)) return false;
    parsed.emplace_back(k, v);
  }
  for (const auto& [k, v] : parsed) Store(*k, v);
  return true;
}

std::string DescribeKnobs(std::span<const Knob> knobs) {
  std::string out;
  for (const Knob& k : knobs) {
    if (!out.empty()) out += ", ";
    out += std::string(k.name) + "=";
    std::visit(
        [&out](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool>) {
            out += *p ? "true" : "false";
          } else if constexpr (std::is_same_v<T, double>) {
            char buf[32];
            auto r = std::to_chars(buf, buf + sizeof(buf), *p);
            out.append(buf, r.ptr);
          } else {
            out += std::to_string(*p);
          }
        },
        k.value);
  }
  return out;
}

}  // namespace vrdma::policy
