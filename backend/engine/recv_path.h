// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RecvPath: receive queues and SRQs on the data path: guest receive WQEs
// pulled from the rings, checked and posted to the RNIC (replenish), or,
// when the only sender is a local QP, posted as that sender's stage
// announces its pieces. A part of the engine (README.md, "Parts");
// data-path thread (Replenish, Reset, Unlink and the receive mode also
// inside control verbs' RunSync closures).
//
// librxe posts receive WQEs with no doorbell: it writes the WQE and stores
// the producer index, nothing else. The engine therefore pulls receive
// WQEs lazily and posts them to the RNIC ("replenish"):
//   1. when the QP enters RTR (WQEs posted while in RESET/INIT), and when
//      an SRQ is created;
//   2. after every receive completion of the queue (Completions reports it
//      and the queue goes on ready_rq_, replenished later in the same
//      turn): the producer index is read once and every new WQE is posted,
//      up to the RNIC queue depth (high watermark = ring capacity, clamped
//      to the RNIC's max_qp_wr / max_srq_wr);
//   3. on the optional RQ / SRQ doorbell;
//   4. before a WR that consumes a receive (SEND, SEND_WITH_IMM,
//      WRITE_WITH_IMM) is posted to a QP of this engine (VmTable's QPN
//      owners), the destination's RQ/SRQ is replenished
//      (PrepareDestination): a receive posted before the send was posted
//      is on the RNIC when the message arrives, as on a real RNIC that
//      reads the RQ at arrival (UD would otherwise drop it);
//   5. a round-robin sweep, at most sweep_budget queues at the start of each
//      PollOnce, over queues whose RNIC-side posted count is below a low
//      watermark (half the depth): this catches WQEs posted while nothing
//      was in flight (and receives for peers on other hosts).
// So a busy queue costs O(1) per received message (one producer load per
// completion, amortised over the WQEs found), an idle queue costs at most
// one index load per sweep visit, and a queue at or above its low
// watermark costs nothing.
//
// The guest's RQ consumer index advances only when a WQE is finished
// (completed by the RNIC, flushed, or rejected), in ring order
// (recv_queue.h), so the guest can never overwrite a buffer the RNIC may
// still write into.
//
// A receive WQE that fails checks (bad lkey, MR of another PD, no
// LOCAL_WRITE, range outside the MR, too many SGEs) completes with an error
// CQE after the older receives and moves the QP to ERR. On an SRQ there is
// no QP to fail: the WQE is skipped (its slot released, counted in
// wqes_rejected). A QP in ERR has its ring flushed by ErrorFlush.
#ifndef VRDMA_BACKEND_ENGINE_RECV_PATH_H_
#define VRDMA_BACKEND_ENGINE_RECV_PATH_H_

#include <array>
#include <cstdint>

#include "backend/base/intrusive_list.h"
#include "backend/engine/completions.h"
#include "backend/engine/error_flush.h"
#include "backend/engine/objects.h"
#include "backend/engine/vm_table.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

class RecvPath {
 public:
  RecvPath(Rnic& rnic, sched::Stage& stage, const VmTable& vms,
           Completions& completions, ErrorFlush& errors,
           uint32_t sweep_budget)
      : rnic_(rnic), stage_(stage), vms_(vms), completions_(completions),
        errors_(errors), sweep_budget_(sweep_budget) {}
  RecvPath(const RecvPath&) = delete;
  RecvPath& operator=(const RecvPath&) = delete;

  // Posts what the guest added to rq's ring (or, announced, what the
  // sender described; in ERR: flushes it). True when it did work.
  bool Replenish(RecvQueue& rq);
  // rq had completions or errors: replenish (or flush) it later this turn.
  void Schedule(RecvQueue& rq) { ready_rq_.PushBack(&rq); }
  // The turn's passes: the low-watermark sweep (first), the ready queues
  // (after the CQs).
  bool Sweep() { return !sweep_rq_.empty() && SweepSome(); }
  bool RunReady() {
    bool did = false;
    // Bounded in case completions keep re-adding them.
    for (int i = 0; i < 1024 && !ready_rq_.empty(); ++i) {
      did |= Replenish(*ready_rq_.PopFront());
    }
    return did;
  }
  // rq leaves every work list (reset, destroy, broken ring).
  void Unlink(RecvQueue& rq);
  // The QP went to RESET: the RNIC discarded its receives; they are posted
  // again from the ring after RTR.
  void Reset(QpObj& qp);

  // Before a receive-consuming WR of qp reaches the RNIC: when its
  // destination is a QP on this engine, pull that QP's new receive WQEs.
  void PrepareDestination(const QpObj& qp, uint32_t remote_qpn);
  // sched::StageOwner::PrepareReceive: a piece of sender's consumes a
  // receive; false when the announced plan is full (the sender waits).
  bool PrepareReceive(QpObj& sender, const sched::ReceivePiece& piece);
  // At RTR: announced when the only possible sender is a local QP.
  void ChooseReceiveMode(QpObj& qp);
  // Whether sender's stage may split receive-consuming WRs.
  void UpdateReassembly(QpObj& sender);

 private:
  // qp: null for an SRQ's receives.
  WcStatus CheckRecvSemantics(uint32_t pd, const QpObj* qp, const VmContext& vm,
                              RecvWr& wr) const;
  void FailRecv(RecvQueue& rq, uint32_t slot, uint64_t guest_wr_id,
                WcStatus status);
  void UpdateSweep(RecvQueue& rq);
  // At most sweep_budget_ queues below their low watermark, round robin.
  bool SweepSome();
  // Announced receives, split SENDs (recv_path_announced.cc).
  // The local QP qp sends to (RC/UC, destination GID of its VM), if any.
  QpObj* LocalPeer(const QpObj& qp) const;
  // hold: a message's first piece waits while no guest WQE waits for it.
  bool AnnounceReceive(RecvQueue& rq, const sched::ReceivePiece& piece, bool hold);
  // The guest has posted a receive WQE that no description has taken yet.
  bool GuestWqeWaits(const RecvQueue& rq) const;
  bool PostAnnounced(RecvQueue& rq);

  Rnic& rnic_;
  sched::Stage& stage_;
  const VmTable& vms_;
  Completions& completions_;
  ErrorFlush& errors_;
  const uint32_t sweep_budget_;
  IntrusiveList<RecvQueue, &RecvQueue::sweep_hook> sweep_rq_;
  IntrusiveList<RecvQueue, &RecvQueue::ready_hook> ready_rq_;
  // Scratch, reused so nothing is built per WQE.
  static constexpr int kRecvBatch = 8;
  std::array<RecvWr, kRecvBatch> recv_batch_{};
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RECV_PATH_H_
