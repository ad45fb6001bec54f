// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// PeRF (ATC'24, §3-§4, App. A) on the scheduler stage. See perf_policy.cc.
#ifndef VRDMA_POLICY_PERF_POLICY_H_
#define VRDMA_POLICY_PERF_POLICY_H_

#include <memory>
#include <string>
#include <vector>

#include "policy/scheduler_policy.h"

namespace vrdma::policy {

// How PeRF's preemption reaches the RNIC.
enum class PerfPreemption : uint8_t {
  // Upstream rdma-core has no WAIT/ENABLE: the stage keeps a paused QP's
  // work and bounds what each managed QP has on the RNIC (posting window);
  // an interrupt point is the window closing after a sub-message.
  kStage,
  // PeRF's own mechanism where the RNIC has cross-channel operations (the
  // model): PAUSE is a WAIT on the preemption control CQ released by
  // ENABLE, interrupts are zero-count WAITs between sub-messages.
  kCrossChannel,
};

// nullptr (with *error) when a knob is unknown or out of range.
std::unique_ptr<SchedulerPolicy> MakePerfPolicy(
    const CardProfile& card, const std::vector<std::string>& options,
    PerfPreemption how, std::string* error);

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_PERF_POLICY_H_
