// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ErrorFlush: QPs entering ERR, and the flush of what they leave behind.
// A part of the engine (README.md, "Parts"); data-path thread (EnterError
// also inside ModifyQp's RunSync closure).
//
// A QP goes to ERR on a bad WQE (after every WR before it), a guest-written
// impossible ring index (QP_FATAL), an RNIC error completion, a host CQ the
// RNIC failed (CQ_ERR, QP_FATAL for its QPs), or ModifyQp. Then everything
// is reported, oldest first: what the RNIC completed or flushed and what
// the scheduler stage still holds (DrainSendSide), then the WQEs left in
// the guest's rings, with kWrFlushErr (FlushSq, FlushRecvRing), and the
// receives whose completions a failed host CQ lost (FlushLostReceives).
//
// Flush budget: the kWrFlushErr CQEs written for ring WQEs cost at most
// EngineOptions::flush_budget per VM per turn, send and receive rings of
// all the VM's QPs together; the rest waits for later turns (counted in
// VmStats::flush_deferred). Not under this budget: DrainSendSide (at most
// the host SQ depth plus the stage's FIFO per QP, work that passed the
// data budget to get there).
//
// The rings' work lists are not ErrorFlush's: a QP that enters ERR is put
// on them through FlushScheduler, and FlushSq/FlushRecvRing tell their
// caller what to do with the queue next.
#ifndef VRDMA_BACKEND_ENGINE_ERROR_FLUSH_H_
#define VRDMA_BACKEND_ENGINE_ERROR_FLUSH_H_

#include <cstdint>

#include "backend/base/intrusive_list.h"
#include "backend/engine/completions.h"
#include "backend/engine/objects.h"
#include "backend/engine/turn.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

// The send and receive paths' work lists, as ErrorFlush needs them (the
// engine's facade routes each call): a QP that entered ERR is flushed by
// the paths on their next pass.
class FlushScheduler {
 public:
  virtual void ScheduleSendFlush(QpObj& qp) = 0;     // SendPath
  virtual void ScheduleRecvFlush(RecvQueue& rq) = 0;  // RecvPath

 protected:
  ~FlushScheduler() = default;
};

class ErrorFlush {
 public:
  ErrorFlush(Rnic& rnic, sched::Stage& stage, Completions& completions,
             Turn& turn, uint32_t flush_budget, FlushScheduler& scheduler)
      : rnic_(rnic), stage_(stage), completions_(completions), turn_(turn),
        flush_budget_(flush_budget), scheduler_(scheduler) {}
  ErrorFlush(const ErrorFlush&) = delete;
  ErrorFlush& operator=(const ErrorFlush&) = delete;

  // QP to ERR (the RNIC flushes what it holds); its rings are flushed by
  // the send and receive paths, which run next.
  void EnterError(QpObj& qp);
  // The RNIC moved the QP to ERR itself; our side is flushed on the next
  // pass (not here: this runs inside a CQ batch).
  void NoteRnicError(QpObj& qp);
  // The guest wrote an impossible ring index: QP to ERR and QP_FATAL.
  void RingError(QpObj& qp);
  // The RNIC put cq's host CQ in error: CQ_ERR, every QP using it to ERR
  // with QP_FATAL; what it owed is flushed by the QPs' flush.
  void FailHostCq(CqObj& cq);
  // RNIC completions of the send CQ written, then every WR the stage still
  // holds for the QP reported as flushed. Only with the QP in ERR.
  void DrainSendSide(QpObj& qp);

  // ERR or SQE: flush what the guest posted to the send ring, oldest
  // first. done: nothing left (the caller takes the QP off its list).
  struct SendFlush {
    bool did = false;
    bool done = false;
  };
  SendFlush FlushSq(QpObj& qp);
  // A QP in ERR: flush its receive ring. next: what the caller does with
  // the queue's sweep membership afterwards.
  enum class RecvNext { kKeep, kUnlink, kUpdateSweep };
  struct RecvFlush {
    bool did = false;
    RecvNext next = RecvNext::kKeep;
  };
  RecvFlush FlushRecvRing(RecvQueue& rq);

  // Receive rings whose flush ran out of budget: ready again next turn.
  RecvQueue* TakeDeferredRecv() { return flush_rq_.PopFront(); }
  bool has_deferred() const { return !flush_rq_.empty(); }
  void Forget(RecvQueue& rq) { flush_rq_.Remove(&rq); }

 private:
  // Receives on the RNIC whose completions a failed host CQ lost: flushed
  // (within the VM's flush budget). Returns true when work remains.
  bool FlushLostReceives(RecvQueue& rq, bool* did);
  // Flush or reset: the announced plan is dropped; a WQE waiting for
  // slices that will never come completes (flushed) once what was posted
  // of it has.
  void CloseOpenWqe(RecvQueue& rq);
  // The VM's flush budget left in this turn (reset on its first use).
  uint32_t& FlushLeft(VmContext& vm) {
    if (vm.flush_turn != turn_.count()) {
      vm.flush_turn = turn_.count();
      vm.flush_left = flush_budget_;
    }
    return vm.flush_left;
  }

  Rnic& rnic_;
  sched::Stage& stage_;
  Completions& completions_;
  Turn& turn_;
  const uint32_t flush_budget_;
  FlushScheduler& scheduler_;
  // Receive rings in ERR with WQEs left to flush after their VM's budget
  // ran out: back on RecvPath's ready list at the start of the next turn.
  IntrusiveList<RecvQueue, &RecvQueue::flush_hook> flush_rq_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_ERROR_FLUSH_H_
