// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A minimal scheduler stage for the isolation bench: it calls the real
// policy::SchedulerPolicy on the model's virtual clock, exactly like the
// engine's stage (backend/engine/scheduler_stage.h) does on the wall clock:
//   - Admit() every WR; kPostNow with nothing of the QP queued posts at once
//     (consecutive ones of one post list share one doorbell, as perftest's
//     post lists do);
//   - kQueue keeps it in the QP's FIFO until Next() names the flow;
//   - kPostNow behind queued WRs of the same QP waits its turn (per-QP order)
//     and then posts without asking Next() again;
//   - a WR released by Next() (or admitted kPostNow) that finds the QP's SQ
//     full stays at the head and goes when a completion makes room;
//   - kWait: Next() is asked again at wake_at through a model timer.
// Unlike the engine stage it honours Decision::max_bytes (posts that many
// bytes of a WRITE or READ unsignaled and keeps the rest queued for a later
// Next()), because the model needs no guest cookie per piece. It drives model::Simulator directly (not vrdma::Rnic) for
// speed; backend/rnic_model/model_rnic.h is the same model behind vrdma::Rnic.
// To be merged with the engine's stage once that can run without guest
// objects.
#ifndef VRDMA_BENCH_ISOLATION_MODEL_STAGE_H_
#define VRDMA_BENCH_ISOLATION_MODEL_STAGE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "backend/rnic_model/ring.h"
#include "backend/rnic_model/simulator.h"
#include "policy/scheduler_policy.h"

namespace vrdma::bench {

class ModelStage : public model::TimerSink {
 public:
  ModelStage(model::Simulator& sim, policy::SchedulerPolicy& policy)
      : sim_(sim), policy_(policy) {}

  // Registers a flow (one QP of one tenant); returns its FlowId.
  policy::FlowId AddFlow(policy::TenantId tenant, model::QpId qp);
  // Submits a post list for a flow at the current virtual time.
  void Submit(policy::FlowId flow, std::span<const model::Wr> wrs);
  // A signaled WR of the flow completed; admitted_at was its Submit time.
  void OnCompleted(policy::FlowId flow, const model::Wr& wr, model::Picos admitted_at);

  void OnTimer(uint64_t cookie) override;
  uint64_t queued() const { return queued_total_; }

 private:
  struct Entry {
    model::Wr wr;
    bool post_at_head = false;   // released: post when it reaches the head
    uint32_t piece_bytes = 0;    // released as a split: post only this much
  };
  struct Flow {
    policy::TenantId tenant = 0;
    model::QpId qp = 0;
    model::Ring<Entry> q;
  };
  static policy::WrInfo Info(const Flow& f, policy::FlowId id, const model::Wr& wr);
  // Posts wrs (the caller checked SQ room).
  void PostNow(Flow& f, policy::FlowId id, std::span<const model::Wr> wrs);
  void PostMarkedHeads(Flow& f, policy::FlowId id);
  void Pump();
  policy::Nanos now_ns() const { return sim_.now() / model::kPicosPerNano; }

  model::Simulator& sim_;
  policy::SchedulerPolicy& policy_;
  std::vector<Flow> flows_;
  std::vector<model::Wr> scratch_;
  uint64_t queued_total_ = 0;
  model::Picos wake_armed_ = UINT64_MAX;
  static constexpr uint64_t kRetryCookie = 1;
  static constexpr double kRetryNs = 1000;
  bool retry_armed_ = false;
};

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_MODEL_STAGE_H_
