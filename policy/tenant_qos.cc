// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// CheckTenantQos and CheckGuarantees: the one place that decides whether a
// TenantQos means something on a card, alone and next to the others
// (scheduler_policy.h). The daemon runs both on every attach-vm and set-qos;
// the bench's scenarios and tests can run the same rules, so no policy has
// to guard against a QoS they forbid.
#include <cinttypes>
#include <cstdio>

#include "policy/scheduler_policy.h"

namespace vrdma::policy {
namespace {

std::string Above(const char* field, uint64_t value, const char* what,
                  double limit, const char* unit) {
  char buf[192];
  std::snprintf(buf, sizeof(buf), "%s: %" PRIu64 " is above %s (%.0f %s)",
                field, value, what, limit, unit);
  return buf;
}

}  // namespace

bool CheckTenantQos(const TenantQos& qos, const CardProfile& card,
                    std::string* error) {
  if (qos.weight == 0) {
    *error = "weight: must be >= 1";
    return false;
  }
  if (static_cast<uint8_t>(qos.app_class) >
      static_cast<uint8_t>(TenantClass::kLatency)) {
    *error = "class: unknown class";
    return false;
  }
  const double line = card.line_rate_bps;
  if (static_cast<double>(qos.max_rate_bps) > line) {
    *error = Above("max_rate_bps", qos.max_rate_bps, "the card's line rate",
                   line, "bps");
    return false;
  }
  if (static_cast<double>(qos.max_msgs_per_s) > card.max_msgs_per_s) {
    *error = Above("max_msgs_per_s", qos.max_msgs_per_s,
                   "the card's message rate", card.max_msgs_per_s, "msgs/s");
    return false;
  }
  if (static_cast<double>(qos.min_rate_bps) > line) {
    *error = Above("min_rate_bps", qos.min_rate_bps, "the card's line rate",
                   line, "bps");
    return false;
  }
  if (qos.max_rate_bps != 0 && qos.min_rate_bps > qos.max_rate_bps) {
    *error = Above("min_rate_bps", qos.min_rate_bps, "max_rate_bps",
                   static_cast<double>(qos.max_rate_bps), "bps");
    return false;
  }
  return true;
}

bool CheckGuarantees(uint64_t guaranteed_bps, const CardProfile& card, std::string* error) {
  const double limit = kGuaranteeableShare * card.line_rate_bps;
  if (static_cast<double>(guaranteed_bps) <= limit) return true;
  char buf[192];
  std::snprintf(buf, sizeof(buf),
                "min_rate_bps: the guarantees on this card would sum to %" PRIu64
                " bps, above the %.0f bps (%.0f %% of the line) that can be guaranteed",
                guaranteed_bps, limit, kGuaranteeableShare * 100);
  *error = buf;
  return false;
}

}  // namespace vrdma::policy
