// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The decision logic of the backend's scheduler stage. A policy is pure:
// no I/O, no clock of its own, no threads. It is told what happens (a work
// request arrives, is posted, completes) with the current time, and answers
// what to post next. The same policy object therefore runs inside the real
// daemon (wall clock) and inside the RNIC timing model (virtual clock).
//
// The stage (backend/scheduler) owns the queues of work requests; the
// policy only sees their descriptions and picks. Policies that reorder,
// split, pace or hold work per VM (PeRF, Justitia, Bifrost, SwiftRDMA, TPL)
// implement this interface; PassThroughPolicy is native RDMA behaviour.
#ifndef VRDMA_POLICY_SCHEDULER_POLICY_H_
#define VRDMA_POLICY_SCHEDULER_POLICY_H_

#include <cstdint>

namespace vrdma::policy {

using Nanos = uint64_t;
using TenantId = uint32_t;   // one per VM
using FlowId = uint32_t;     // the stage's index of a QP

// Operator-set QoS of a tenant (virsh sets these through the daemon).
struct TenantQos {
  uint32_t weight = 1;
  Nanos latency_target_ns = 0;      // 0: none
  uint64_t max_rate_bps = 0;        // 0: unlimited
};

enum class WrKind : uint8_t { kWrite, kSend, kRead, kAtomic };

// A work request as the policy sees it.
struct WrInfo {
  TenantId tenant = 0;
  FlowId flow = 0;
  WrKind kind = WrKind::kWrite;
  uint32_t bytes = 0;
  bool signaled = false;
};

enum class Verdict : uint8_t {
  kPostNow,   // post it at once (the stage may bypass its queues)
  kQueue,     // keep it queued; Next() will release it
};

struct Decision {
  enum class Kind : uint8_t { kPost, kWait, kIdle } kind = Kind::kIdle;
  TenantId tenant = 0;
  FlowId flow = 0;
  uint32_t max_bytes = 0;   // kPost: 0 = whole WR; else post at most this many
                            // bytes now and keep the rest queued (split)
  Nanos wake_at = 0;        // kWait: ask again at this time
};

class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;

  virtual void OnTenantAdded(TenantId tenant, const TenantQos& qos) = 0;
  virtual void OnTenantRemoved(TenantId tenant) = 0;

  // A work request became ready to post.
  virtual Verdict Admit(Nanos now, const WrInfo& wr) = 0;
  // Which queued flow to serve next. The stage calls it until it returns
  // something other than kPost, then again at wake_at or on the next event.
  virtual Decision Next(Nanos now) = 0;
  // bytes of wr went to the RNIC at now.
  virtual void OnPosted(Nanos now, const WrInfo& wr, uint32_t bytes) = 0;
  // A signaled work request of (tenant, flow) completed; latency is from
  // Admit to completion.
  virtual void OnCompleted(Nanos now, const WrInfo& wr, Nanos latency) = 0;
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_SCHEDULER_POLICY_H_
