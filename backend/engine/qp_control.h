// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// QpControl: creating, modifying and querying a VM's QPs: the engine's side
// of the QP state machine (qp_attr_check.h checks a transition; ModifyQp
// applies it to the RNIC, then to the send and receive paths), the QP's
// flow in the scheduler stage, and the host CQ sizing rule (cq_sizing.h)
// applied at creation. A part of the engine (README.md, "Parts"); control
// thread and Executor::RunSync closures, the RNIC's QP calls where the slow
// RNIC calls run (rnic_calls.h).
#ifndef VRDMA_BACKEND_ENGINE_QP_CONTROL_H_
#define VRDMA_BACKEND_ENGINE_QP_CONTROL_H_

#include <cstdint>
#include <functional>

#include "backend/base/executor.h"
#include "backend/engine/completions.h"
#include "backend/engine/engine.h"
#include "backend/engine/error_flush.h"
#include "backend/engine/objects.h"
#include "backend/engine/recv_path.h"
#include "backend/engine/resources.h"
#include "backend/engine/send_path.h"
#include "backend/engine/vm_table.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

// A QP transition as decided on the data-path thread: what the RNIC is
// asked, from which state to which.
struct QpTransition {
  QpAttr attr;
  uint32_t mask = 0;
  QpState from = QpState::kReset;
  QpState next = QpState::kReset;
};

// Guest WRs the scheduler stage holds per QP before the engine stops
// consuming its ring (backpressure).
inline constexpr uint32_t kStageQueueCapacity = 32;

class QpControl {
 public:
  struct Parts {
    Resources& resources;
    SendPath& send;
    RecvPath& recv;
    ErrorFlush& errors;
    Completions& completions;
  };
  QpControl(Rnic& rnic, Executor& executor, sched::Stage& stage,
            VmTable& vms, const Parts& parts,
            const std::function<policy::Nanos()>& clock)
      : rnic_(rnic), executor_(executor), stage_(stage), vms_(vms),
        resources_(parts.resources), send_(parts.send), recv_(parts.recv),
        errors_(parts.errors), completions_(parts.completions),
        limits_(parts.resources.limits()), clock_(clock) {}
  QpControl(const QpControl&) = delete;
  QpControl& operator=(const QpControl&) = delete;

  Result<CreateQpResult> CreateQp(VmId id, const CreateQpRequest& req);
  Status ModifyQp(VmId id, const ModifyQpRequest& req);
  Result<QueryQpResult> QueryQp(VmId id, uint32_t qpn) const;

 private:
  // The steps of ModifyQp, each on the data-path thread; the RNIC's
  // ModifyQp runs between the first two and the last, where the slow RNIC
  // calls run (rnic_calls.h).
  // 1. Checks req without side effects and fills *t.
  Status PlanModifyQp(const VmContext& vm, const QpObj& qp, const ModifyQpRequest& req,
                      QpTransition* t) const;
  // 2. Before a transition to RESET, whose RNIC call discards the QP's
  // outstanding work: the data path lets go of the QP first.
  void QuiesceForReset(QpObj& qp);
  // 3. After the RNIC applied t: the engine's side.
  void ApplyModifyQp(QpObj& qp, const ModifyQpRequest& req, const QpTransition& t);

  Rnic& rnic_;
  Executor& executor_;
  sched::Stage& stage_;
  VmTable& vms_;
  Resources& resources_;
  SendPath& send_;
  RecvPath& recv_;
  ErrorFlush& errors_;
  Completions& completions_;
  const RnicLimits& limits_;
  const std::function<policy::Nanos()>& clock_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_QP_CONTROL_H_
