// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The facade (engine_impl.h): construction and wiring of the parts, the
// data path's turn, doorbells, and the operator's QoS and the policy's
// reports.
#include "backend/engine/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace vrdma::engine {

std::unique_ptr<Engine> Engine::Create(Rnic& rnic, Executor& executor,
                                       policy::SchedulerPolicy& policy) {
  return CreateEngine(rnic, executor, policy, EngineOptions{});
}

std::unique_ptr<Engine> CreateEngine(Rnic& rnic, Executor& executor,
                                     policy::SchedulerPolicy& policy,
                                     EngineOptions options) {
  if (!options.clock) {
    options.clock = [] {
      return static_cast<policy::Nanos>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now().time_since_epoch())
              .count());
    };
  }
  return std::make_unique<EngineImpl>(rnic, executor, policy,
                                      std::move(options));
}

EngineImpl::EngineImpl(Rnic& rnic, Executor& executor,
                       policy::SchedulerPolicy& policy, EngineOptions options)
    : rnic_(rnic),
      executor_(executor),
      options_(std::move(options)),
      turn_(options_.clock),
      vms_(options_.max_vms, rnic.limits().max_qp),
      stage_(rnic, policy, *this,
             {.adaptive_signaling = options_.adaptive_signaling}),
      completions_(rnic, stage_, vms_, turn_, *this),
      errors_(rnic, stage_, completions_, turn_, options_.flush_budget, *this),
      recv_(rnic, stage_, vms_, completions_, errors_, options_.sweep_budget),
      send_(stage_, completions_, errors_, turn_,
            {options_.sq_budget, options_.sq_watch_turns,
             options_.sq_watch_per_vm}),
      peer_(rnic, stage_, options_.probe_gid),
      resources_(rnic, executor, stage_, vms_, completions_, recv_,
                 {options_.mapping_budget, options_.pinned_budget}, peer_.gid()),
      gsi_(executor, vms_, resources_, completions_, turn_),
      qps_(rnic, executor, stage_, vms_,
           {resources_, send_, recv_, errors_, completions_}, options_.clock),
      teardown_(rnic, executor, stage_, vms_,
                {resources_, send_, recv_, completions_, gsi_}, options_.clock) {
  peer_.OpenAtStart();  // the data path does not run this engine yet
}

EngineImpl::~EngineImpl() {
  for (uint32_t id : vms_.vms.Handles()) teardown_.DetachVm(id);
  // The data path no longer runs (its poller is gone before the engine):
  // the RNIC is this thread's now.
  peer_.Close();
}

void EngineImpl::Doorbell(VmId id, uint8_t kind, uint32_t handle) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return;
  switch (kind) {
    case VIRTIO_RDMA_DB_SQ:
      if (handle == VIRTIO_RDMA_GSI_QPN && vm->gsi != nullptr) {
        gsi_.Schedule(*vm);
        return;
      }
      if (QpObj* qp = VmTable::FindQp(*vm, handle)) {
        send_.Schedule(*qp);
        return;
      }
      break;
    case VIRTIO_RDMA_DB_RQ:
      if (QpObj* qp = VmTable::FindQp(*vm, handle);
          qp != nullptr && qp->srq == nullptr) {
        recv_.Replenish(qp->rq);
        return;
      }
      break;
    case VIRTIO_RDMA_DB_SRQ:
      if (SrqObj* srq = vm->srqs.Lookup(handle)) {
        recv_.Replenish(srq->rq);
        return;
      }
      break;
    case VIRTIO_RDMA_DB_CQ_ARM:
    case VIRTIO_RDMA_DB_CQ_ARM_SOLICITED:
      if (CqObj* cq = vm->cqs.Lookup(handle)) {
        Completions::Arm(*cq, kind == VIRTIO_RDMA_DB_CQ_ARM_SOLICITED);
        return;
      }
      break;
    default:
      break;
  }
  ++vm->doorbells_ignored;
}

bool EngineImpl::PollOnce() {
  turn_.Begin();  // a fresh flush budget for every VM
  bool did = false;
  // Receive rings whose flush ran out of budget last turn.
  while (RecvQueue* rq = errors_.TakeDeferredRecv()) recv_.Schedule(*rq);
  // Peer messages the stage sent to this host last turn.
  did |= peer_.DeliverLoopback(turn_);
  // Receives first: a WQE the guest posted before this turn is on the RNIC
  // before this turn's sends are delivered (UD drops a message that finds
  // no receive).
  did |= recv_.Sweep();
  did |= send_.Run();
  if (stage_.needs_run()) did |= stage_.Run(turn_.Now());
  did |= rnic_.Progress();
  did |= completions_.PollActive();
  // Slow path: a host CQ the RNIC put in error fails its QPs; their
  // flush (next turn) ends what the stage was owed.
  did |= completions_.PollRnicEvents();
  // Receive queues that had completions or errors: refill or flush.
  did |= recv_.RunReady();
  did |= gsi_.Run();  // QP1 datagrams, in software
  completions_.FlushEvents();  // one guest notification per VM this turn
  turn_.End();  // work between turns (doorbells, RunSync) reads afresh
  // Work the stage can do now is work only this loop can release, and the
  // completions the RNIC owes for signaled pieces may wait on its timers
  // (RNR, retransmission) that only run in Progress: report busy so the
  // event loop keeps polling. Unsignaled WRs and posted receives alone do
  // not keep it busy, nor does work the stage holds until a later time
  // (NextDeadline says when) or until the policy releases it.
  return did || stage_.busy() || peer_.has_loopback() ||
         errors_.has_deferred();
}

policy::Nanos EngineImpl::NextDeadline() const {
  const sched::Nanos t = stage_.next_deadline();
  // The RNIC's timers (a reliability layer's RTOs, ACK timers, pacing):
  // its Progress() reports only work due now (Rnic::NextTimedWorkNs).
  return std::min({t == sched::kNoExpiry ? policy::kNever : t, gsi_.NextDeadline(),
                   policy::Nanos{rnic_.NextTimedWorkNs()}});
}

Status EngineImpl::SetQos(VmId id, const policy::TenantQos& qos) {
  if (qos.weight == 0) return Status::kInvalid;
  Status s = Status::kOk;
  executor_.RunSync([&] {
    VmContext* vm = vms_.Find(id);
    if (vm == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    vm->config.qos = qos;
    stage_.SetTenantQos(id, qos);
  });
  return s;
}

void EngineImpl::Report(VmId id, policy::ReportSink& sink) const {
  executor_.RunSync([&] {
    if (vms_.Find(id) != nullptr) stage_.policy().ReportTenant(id, sink);
  });
}

void EngineImpl::ReportPolicy(policy::ReportSink& sink) const {
  executor_.RunSync([&] {
    sink.Text("name", stage_.policy().name());
    stage_.policy().Report(sink);
    // The stage's own, for every VM: CQEs asked of the RNIC and guest WRs
    // reported done (their ratio shows adaptive signaling at work).
    sink.Number("stage_rnic_signals", static_cast<double>(stage_.rnic_signals()));
    sink.Number("stage_wrs_done", static_cast<double>(stage_.wrs_done()));
  });
}

}  // namespace vrdma::engine
