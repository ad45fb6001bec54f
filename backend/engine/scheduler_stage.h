// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The scheduler stage between WQE translation and the RNIC. Every checked
// send WR is shown to the policy (Admit):
//   - kPostNow with the QP's FIFO empty: posted at once (the fast path; with
//     PassThroughPolicy every WR takes it and the stage costs one virtual
//     call);
//   - kQueue: copied (with its inline bytes) into the QP's preallocated FIFO
//     until policy Next() names the flow;
//   - kPostNow while older WRs of the QP are queued: queued behind them
//     (per-QP order is a verbs guarantee) and marked to post as soon as it
//     reaches the head, without asking Next() again.
// A WR the RNIC refuses because its send queue is full stays at the head
// of the FIFO and is retried on the next turn.
//
// Not implemented: splitting (Decision::max_bytes below the WR's size). The
// whole WR is posted and splits_ignored() counts it; splitting a WRITE into
// two host WRs needs a second cookie per guest WQE.
// The policy has no "cancel": when a QP is flushed or destroyed its queued
// WRs are dropped here and a later Next() naming it is ignored.
#ifndef VRDMA_BACKEND_ENGINE_SCHEDULER_STAGE_H_
#define VRDMA_BACKEND_ENGINE_SCHEDULER_STAGE_H_

#include <cstdint>

#include "backend/base/status.h"
#include "backend/engine/intrusive_list.h"
#include "backend/engine/objects.h"
#include "backend/rnic/rnic.h"
#include "policy/scheduler_policy.h"

namespace vrdma::engine {

class SchedulerStage {
 public:
  class Sink {
   public:
    virtual ~Sink() = default;
    // The QP of a policy decision; nullptr when it no longer exists.
    virtual QpObj* ResolveFlow(policy::TenantId tenant,
                               policy::FlowId flow) = 0;
    // A queued WR the RNIC refused (not "full"): the QP must fail it.
    virtual void OnQueuedPostFailed(QpObj& qp, uint32_t slot, Status s) = 0;
  };

  // Default capacity of a QP's FIFO (bounded by the SQ window).
  static constexpr uint32_t kFlowCapacity = 32;
  static constexpr int kMaxDecisionsPerTurn = 64;

  SchedulerStage(Rnic& rnic, policy::SchedulerPolicy& policy, Sink& sink)
      : rnic_(rnic), policy_(policy), sink_(sink) {}

  policy::SchedulerPolicy& policy() { return policy_; }

  // kOk: posted or queued (the WQE has been taken); kNoResource: not taken
  // (the QP's FIFO is full), retry later; anything else: the RNIC refused it.
  Status Submit(QpObj& qp, const SendWr& wr, const policy::WrInfo& info,
                uint32_t slot, policy::Nanos now);
  // Posts what may go now. Returns true when it posted anything.
  bool Drain(policy::Nanos now);
  bool has_queued() const { return !queued_.empty(); }

  // Drops every queued WR of qp (QP flushed or destroyed), calling
  // fn(slot) for each, oldest first.
  template <typename Fn>
  void FlushFlow(QpObj& qp, Fn&& fn) {
    while (!qp.flow.empty()) {
      fn(qp.flow.front().slot);
      qp.flow.PopFront();
    }
    queued_.Remove(&qp);
  }

  uint64_t splits_ignored() const { return splits_ignored_; }
  uint64_t stale_decisions() const { return stale_decisions_; }

 private:
  Status Post(QpObj& qp, const SendWr& wr, const policy::WrInfo& info,
              policy::Nanos now);
  void Enqueue(QpObj& qp, const SendWr& wr, const policy::WrInfo& info,
               uint32_t slot, bool post_at_head);
  // Posts head entries marked post_at_head; true when it posted any.
  bool PostMarkedHeads(QpObj& qp, policy::Nanos now);

  Rnic& rnic_;
  policy::SchedulerPolicy& policy_;
  Sink& sink_;
  IntrusiveList<QpObj, &QpObj::queued_hook> queued_;
  uint64_t splits_ignored_ = 0;
  uint64_t stale_decisions_ = 0;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_SCHEDULER_STAGE_H_
