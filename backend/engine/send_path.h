// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SendPath: the guest's send queues -> the scheduler stage (backend/
// scheduler) -> the RNIC, and the stage's reports of guest WRs done ->
// guest CQEs. A part of the engine (README.md, "Parts"); data-path thread
// (Schedule/Unschedule/CloseSendWindow also inside control verbs' RunSync
// closures).
//
// Send queue protocol. A doorbell puts the QP on pending_sq_ (an intrusive
// list: no allocation, duplicates are no-ops). Each turn, for every pending
// QP in RTS: the guest's producer index is loaded once (acquire); each new
// WQE is copied to engine memory (header, then only the SGEs or inline
// bytes it declares), decoded (wqe_decoder.h), checked against the VM's
// objects (lkeys in the VM and the QP's PD, ranges inside the MR, UD AH of
// the VM and PD), turned into a host SendWr whose wr_id is an engine cookie
// (QP handle + ring slot, objects.h) and handed to the scheduler stage.
// Once the stage has taken it (posted, or copied into its FIFO) the slot is
// free for the guest and the consumer index is stored (release) once per
// batch: librxe reads consumer_index as "space available".
//
// The engine remembers each consumed WQE (guest wr_id, opcode, signaled)
// under a per-QP sequence number; seq & slot_mask is the WR's tag in the
// scheduler stage, which posts it (whole or in pieces) and reports it done,
// in order, once its last piece completed (OnWrDone). Backpressure: a full
// stage FIFO stops the consumption of the ring.
//
// A WQE that fails checks becomes a marker in the stage: it fails (error
// CQE, QP to ERR) only after every WR before it is done, as on a native
// QP, and nothing after it is consumed; the rest of the ring is then
// flushed (kWrFlushErr, ErrorFlush). QPs in RESET/INIT/RTR/SQD keep their
// WQEs in the ring until RTS.
//
// Watching. A QP whose ring drained stays on pending_sq_ for
// Options::watch_turns turns after its last WQE (at most watch_per_vm QPs
// of one VM), so WQEs the guest posts meanwhile are taken on the next turn
// without their doorbell. Reading the producer index early is what the
// doorbell would have led to: the same acquire load, the same checks.
#ifndef VRDMA_BACKEND_ENGINE_SEND_PATH_H_
#define VRDMA_BACKEND_ENGINE_SEND_PATH_H_

#include <cstdint>

#include "backend/base/intrusive_list.h"
#include "backend/engine/completions.h"
#include "backend/engine/error_flush.h"
#include "backend/engine/objects.h"
#include "backend/engine/turn.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

class SendPath {
 public:
  struct Options {
    uint32_t sq_budget;       // EngineOptions::sq_budget
    uint32_t watch_turns;     // EngineOptions::sq_watch_turns
    uint32_t watch_per_vm;    // EngineOptions::sq_watch_per_vm
  };
  SendPath(sched::Stage& stage, Completions& completions, ErrorFlush& errors,
           Turn& turn, Options options)
      : stage_(stage), completions_(completions), errors_(errors),
        turn_(turn), options_(options) {}
  SendPath(const SendPath&) = delete;
  SendPath& operator=(const SendPath&) = delete;

  // qp has WQEs to take (doorbell, RTS) or, in ERR, to flush.
  void Schedule(QpObj& qp) { pending_sq_.PushBack(&qp); }
  void Unschedule(QpObj& qp);
  // The turn's pass over the pending send queues.
  bool Run() {
    bool did = false;
    for (QpObj* qp = pending_sq_.front(); qp != nullptr;) {
      QpObj* next = decltype(pending_sq_)::next(qp);
      did |= ProcessSq(*qp);
      qp = next;
    }
    return did;
  }
  // Forgets every consumed WR the stage has not reported (reset, destroy:
  // the RNIC discards them without completions).
  void CloseSendWindow(QpObj& qp);

  // sched::StageOwner reports about qp's WRs (owner = the QpObj).
  void OnWrDone(QpObj& qp, uint32_t tag, WcStatus status, uint32_t byte_len);
  void OnMarkerReached(QpObj& qp, uint32_t tag, WcStatus status);
  void OnPostRefused(QpObj& qp);

 private:
  bool ProcessSq(QpObj& qp);
  // qp's ring is drained (took: this turn gave WQEs): watch it or drop it.
  void Drained(QpObj& qp, bool took);
  WcStatus CheckSendSemantics(const QpObj& qp, SendWr& wr,
                              uint32_t ah_handle) const;
  // Takes the consumed WQE at seq: a slot for it, its record kept.
  SendSlot& TakeSlot(QpObj& qp, uint64_t guest_wr_id, WrOpcode op,
                     bool signaled);
  // The stage reported the oldest consumed WR of qp done.
  void RetireOldest(QpObj& qp);

  sched::Stage& stage_;
  Completions& completions_;
  ErrorFlush& errors_;
  Turn& turn_;
  const Options options_;
  IntrusiveList<QpObj, &QpObj::pending_hook> pending_sq_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_SEND_PATH_H_
