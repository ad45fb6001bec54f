// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Policies by name, with their knobs as "key=value" strings: the one place
// the daemon (--policy, --policy-opt) and the isolation bench (--policy)
// make a policy, so both run the same configurations.
#ifndef VRDMA_POLICY_POLICY_REGISTRY_H_
#define VRDMA_POLICY_POLICY_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/scheduler_policy.h"

namespace vrdma::policy {

// The names MakePolicy knows, in the order tools list them.
std::vector<std::string> PolicyNames();

// nullptr, with *error saying why, when the name or a knob is unknown or a
// value is malformed. host_id: the daemon's own id among its peers (the
// policies that talk to other daemons put it in their messages).
std::unique_ptr<SchedulerPolicy> MakePolicy(
    std::string_view name, const CardProfile& card,
    const std::vector<std::string>& options, uint32_t host_id,
    std::string* error);

// A figure of the card ("line_gbps", "max_mpps", "qp_mpps", "mtu", "pus",
// "rtt_us") from "key=value"; false (with *error) when unknown or bad.
bool ParseCardOption(std::string_view option, CardProfile* card,
                     std::string* error);

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_POLICY_REGISTRY_H_
