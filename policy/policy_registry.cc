// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "policy/policy_registry.h"

#include "policy/fair_share_policy.h"
#include "policy/justitia_policy.h"
#include "policy/pass_through_policy.h"
#include "policy/perf_policy.h"
#include "policy/policy_options.h"

namespace vrdma::policy {

bool ParseCardOption(std::string_view option, CardProfile* card,
                     std::string* error) {
  std::string_view key, value;
  double v = 0;
  if (!SplitOption(option, &key, &value) || !ParseNumber(value, &v) || v <= 0) {
    *error = "card option must be key=positive-number: " + std::string(option);
    return false;
  }
  if (key == "line_gbps") {
    card->line_rate_bps = v * 1e9;
  } else if (key == "max_mpps") {
    card->max_msgs_per_s = v * 1e6;
  } else if (key == "qp_mpps") {
    card->qp_msgs_per_s = v * 1e6;
  } else if (key == "mtu") {
    card->mtu_bytes = static_cast<uint32_t>(v);
  } else if (key == "pus") {
    card->processing_units = static_cast<uint32_t>(v);
  } else if (key == "rtt_us") {
    card->base_rtt_ns = static_cast<Nanos>(v * 1e3);
  } else {
    *error = "unknown card option: " + std::string(key);
    return false;
  }
  return true;
}

std::vector<std::string> PolicyNames() {
  return {"pass-through", "perf", "perf-xc", "justitia", "fair-share"};
}

std::unique_ptr<SchedulerPolicy> MakePolicy(
    std::string_view name, const CardProfile& card,
    const std::vector<std::string>& options, uint32_t host_id,
    std::string* error) {
  std::string unused;
  std::string& err = error != nullptr ? *error : unused;
  if (name == "pass-through") {
    if (!options.empty()) {
      err = "pass-through takes no options";
      return nullptr;
    }
    return std::make_unique<PassThroughPolicy>();
  }
  if (name == "perf" || name == "perf-xc") {
    const PerfPreemption how = name == "perf" ? PerfPreemption::kStage
                                              : PerfPreemption::kCrossChannel;
    return MakePerfPolicy(card, options, how, &err);
  }
  if (name == "justitia") return MakeJustitiaPolicy(card, options, host_id, &err);
  if (name == "fair-share") return MakeFairSharePolicy(card, options, &err);
  err = "unknown policy: " + std::string(name);
  return nullptr;
}

}  // namespace vrdma::policy
