// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Completions: RNIC completions -> guest CQEs (struct ib_uverbs_wc in the
// guest's CQ ring), CQ notifications, the VMs' events, the RNIC's
// asynchronous errors. A part of the engine (README.md, "Parts"); runs on
// the data-path thread (Arm/Watch/Forget also inside RunSync closures).
//
// Which CQs are polled: active_cq_ holds the CQs that may have completions:
// expected > 0 (WRs on the RNIC that complete into it: sends consumed and
// not retired, receives posted and not completed) or srq_listeners > 0.
// An idle CQ is never polled. A send CQ stays active while unsignaled WRs
// are unretired (only a later signaled completion or a flush retires them).
//
// CQ ring protocol: the host owns the producer index (kept in CqObj::prod,
// never read back from the guest), writes the 48-byte CQE into the slot,
// then stores the producer with release. The guest's consumer index is
// acquire-loaded and checked; a full ring (or an impossible consumer index)
// is a CQ overflow: VIRTIO_RDMA_EV_CQ_ERR once, and this and later CQEs
// are dropped (an overflowed CQ is in error, as in IB).
//
// Notifications: an armed CQ raises VIRTIO_RDMA_EV_CQ_COMP once on the
// next CQE (or, when armed for solicited only, on the next receive or error
// CQE: rnic.h's Completion carries no solicited bit, so every receive
// completion counts as possibly solicited: a spurious wake-up is harmless,
// a missed one is not) and disarms. Events raised in a turn reach each VM
// in one notification (FlushEvents).
//
// What a completion means beyond its CQE is decided elsewhere: a send
// piece's completion goes to the scheduler stage (which reports the guest
// WRs it finishes to SendPath through sched::StageOwner); a receive
// completion, an RNIC error and a host CQ error go up through
// CompletionListener.
#ifndef VRDMA_BACKEND_ENGINE_COMPLETIONS_H_
#define VRDMA_BACKEND_ENGINE_COMPLETIONS_H_

#include <algorithm>
#include <array>
#include <cstdint>

#include "backend/base/intrusive_list.h"
#include "backend/engine/objects.h"
#include "backend/engine/turn.h"
#include "backend/engine/vm_table.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

// What Completions reports while it polls, to the parts that own the rule
// (the engine's facade routes each call). Data-path thread, inside a CQ
// batch: implementations only record work for later in the turn.
class CompletionListener {
 public:
  // A receive of rq completed: refill rq later in this turn (RecvPath).
  virtual void OnRecvCompleted(RecvQueue& rq) = 0;
  // The RNIC moved qp to ERR on its own (an error completion): our side is
  // flushed on the next pass (ErrorFlush::NoteRnicError).
  virtual void OnRnicQpError(QpObj& qp) = 0;
  // The RNIC reported cq's host CQ in error (ErrorFlush::FailHostCq).
  virtual void OnHostCqError(CqObj& cq) = 0;

 protected:
  ~CompletionListener() = default;
};

class Completions {
 public:
  Completions(Rnic& rnic, sched::Stage& stage, const VmTable& vms, Turn& turn,
              CompletionListener& listener)
      : rnic_(rnic), stage_(stage), vms_(vms), turn_(turn),
        listener_(listener) {}
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;

  // n more WRs on the RNIC complete into cq: it is polled until retired.
  void Expect(CqObj& cq, uint64_t n) {
    cq.expected += n;
    active_cq_.PushBack(&cq);
  }
  void Retire(CqObj& cq, uint64_t n) {
    cq.expected -= std::min(n, cq.expected);
  }
  // A QP with an SRQ receives into cq: SRQ receives may land at any time.
  void Watch(CqObj& cq) { active_cq_.PushBack(&cq); }
  // cq is no longer polled once nothing more is owed to it.
  void Settle(CqObj& cq) {
    if (cq.expected == 0 && cq.srq_listeners == 0) active_cq_.Remove(&cq);
  }
  // cq (or vm) is being destroyed.
  void Forget(CqObj& cq) {
    active_cq_.Remove(&cq);
    unpublished_.Remove(&cq);
  }
  void ForgetVm(VmContext& vm) { events_pending_.Remove(&vm); }

  // Arms cq for its next CQE, or (solicited_only) its next receive or
  // error CQE. "Next completion" is the stronger request; it is never
  // weakened.
  static void Arm(CqObj& cq, bool solicited_only) {
    if (!solicited_only) {
      cq.armed = CqObj::kArmNext;
    } else if (cq.armed != CqObj::kArmNext) {
      cq.armed = CqObj::kArmSolicited;
    }
  }

  // Writes a CQE at the host-owned producer index; false when the CQ is
  // (or just became) overflowed and the CQE was dropped. The guest sees it
  // once FlushEvents has stored the producer index (the end of the turn).
  bool WriteCqe(CqObj& cq, const ib_uverbs_wc& wc, bool solicited);
  void WriteErrorCqe(CqObj& cq, uint64_t wr_id, uint32_t qpn, WcOpcode op,
                     WcStatus status);
  // An event for vm's device; one notification per VM per turn.
  void Event(VmContext& vm, uint32_t type, uint32_t handle);
  // SRQ_LIMIT_REACHED once per arming when the WQEs srq holds drop below
  // its limit.
  void CheckSrqLimit(SrqObj& srq);
  // The end of a turn: the producer indices of CQs written to, then the
  // notifications of this turn's events.
  void FlushEvents();

  // Polls one batch of cq, or until empty when drain; true when any.
  bool Poll(CqObj& cq, bool drain);
  // One batch of every CQ that may hold completions.
  bool PollActive() {
    bool did = false;
    for (CqObj* cq = active_cq_.front(); cq != nullptr;) {
      CqObj* next = decltype(active_cq_)::next(cq);
      did |= Poll(*cq, /*drain=*/false);
      cq = next;
    }
    return did;
  }
  // The RNIC's asynchronous errors (slow path, a few per turn).
  bool PollRnicEvents();

 private:
  void HandleCompletion(CqObj& cq, const Completion& c);

  Rnic& rnic_;
  sched::Stage& stage_;
  const VmTable& vms_;
  Turn& turn_;
  CompletionListener& listener_;
  IntrusiveList<CqObj, &CqObj::active_hook> active_cq_;
  // CQs with CQEs written this turn whose producer index is not stored yet.
  IntrusiveList<CqObj, &CqObj::unpublished_hook> unpublished_;
  // VMs with events raised this turn, not yet notified.
  IntrusiveList<VmContext, &VmContext::events_hook> events_pending_;
  static constexpr int kPollBatch = 32;
  std::array<Completion, kPollBatch> poll_batch_{};
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_COMPLETIONS_H_
