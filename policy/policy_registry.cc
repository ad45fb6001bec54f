// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "policy/policy_registry.h"

#include "policy/pass_through_policy.h"

namespace vrdma::policy {
namespace {

// Splits "key=value"; false when there is no '='.
bool SplitOption(std::string_view opt, std::string_view* key,
                 std::string_view* value) {
  const size_t eq = opt.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  *key = opt.substr(0, eq);
  *value = opt.substr(eq + 1);
  return true;
}

}  // namespace

std::vector<std::string> PolicyNames() { return {"pass-through"}; }

std::unique_ptr<SchedulerPolicy> MakePolicy(
    std::string_view name, const CardProfile& card,
    const std::vector<std::string>& options, uint32_t host_id,
    std::string* error) {
  (void)card;
  (void)host_id;
  std::string unused;
  std::string& err = error != nullptr ? *error : unused;
  if (name == "pass-through") {
    if (!options.empty()) {
      err = "pass-through takes no options";
      return nullptr;
    }
    return std::make_unique<PassThroughPolicy>();
  }
  for (const std::string& o : options) {
    std::string_view k, v;
    if (!SplitOption(o, &k, &v)) {
      err = "option must be key=value: " + o;
      return nullptr;
    }
  }
  err = "unknown policy: " + std::string(name);
  return nullptr;
}

}  // namespace vrdma::policy
