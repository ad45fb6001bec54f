// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Native RDMA: every work request goes to the RNIC whole, as soon as it
// arrives, so the RNIC's own arbitration (round-robin over QPs, blind to
// size) decides. The baseline every other policy is measured against. It
// leaves every flow at the default FlowControl, which the stage serves on
// its fast path. Deciding nothing, it is also the base of test policies,
// which override only the events they observe or act on.
#ifndef VRDMA_POLICY_PASS_THROUGH_POLICY_H_
#define VRDMA_POLICY_PASS_THROUGH_POLICY_H_

#include "policy/scheduler_policy.h"

namespace vrdma::policy {

class PassThroughPolicy : public SchedulerPolicy {
 public:
  std::string_view name() const override { return "pass-through"; }
  void OnTenantAdded(TenantId, const TenantQos&) override {}
  void OnTenantQosChanged(TenantId, const TenantQos&) override {}
  void OnTenantRemoved(TenantId) override {}
  void OnFlowAdded(Nanos, const FlowInfo&) override {}
  void OnFlowEnded(Nanos, FlowId, FlowEnd) override {}
  void OnArrival(Nanos, const WrInfo&) override {}
  void OnCompleted(Nanos, const WrInfo&, Nanos, bool) override {}
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_PASS_THROUGH_POLICY_H_
