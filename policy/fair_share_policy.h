// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The daemon's own scheduler: weighted fair sharing of the whole card
// among VMs, over bytes and messages at once, with a card-wide bound on
// the bulk work the RNIC holds. docs/fair-share.md is its design; see
// fair_share_policy.cc.
#ifndef VRDMA_POLICY_FAIR_SHARE_POLICY_H_
#define VRDMA_POLICY_FAIR_SHARE_POLICY_H_

#include <memory>
#include <string>
#include <vector>

#include "policy/scheduler_policy.h"

namespace vrdma::policy {

// nullptr (with *error) when a knob is unknown or out of range.
std::unique_ptr<SchedulerPolicy> MakeFairSharePolicy(
    const CardProfile& card, const std::vector<std::string>& options,
    std::string* error);

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_FAIR_SHARE_POLICY_H_
