// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Native RDMA: every work request goes to the RNIC as soon as it arrives,
// so the RNIC's own arbitration (round-robin over QPs, blind to size)
// decides. The baseline every other policy is measured against.
#ifndef VRDMA_POLICY_PASS_THROUGH_POLICY_H_
#define VRDMA_POLICY_PASS_THROUGH_POLICY_H_

#include "policy/scheduler_policy.h"

namespace vrdma::policy {

class PassThroughPolicy final : public SchedulerPolicy {
 public:
  void OnTenantAdded(TenantId, const TenantQos&) override {}
  void OnTenantRemoved(TenantId) override {}
  Verdict Admit(Nanos, const WrInfo&) override { return Verdict::kPostNow; }
  Decision Next(Nanos) override { return {}; }
  void OnPosted(Nanos, const WrInfo&, uint32_t) override {}
  void OnCompleted(Nanos, const WrInfo&, Nanos) override {}
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_PASS_THROUGH_POLICY_H_
