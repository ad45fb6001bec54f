// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Gsi: each VM's GSI QP (QP1), carried by the engine in software
// (docs/virtio-rdma.md §4.6). The guest's RDMA CM sends its MADs there; QP1
// of a physical port belongs to the host, so these datagrams never go to
// the RNIC: Gsi copies each one from the sender's guest memory into a
// receive the destination VM posted on its own QP1, with the RoCE v2
// network header in front (roce_grh.h), and writes both CQEs.
//
// Rules (each checked here, the one place):
//  - one GSI QP per VM, QPN 1, UD's attributes and states (qp_attr_check);
//  - every SGE uses the local DMA lkey and lies inside the VM's guest RAM
//    (kLocProtErr otherwise); a send is SEND or SEND_WITH_IMM of at most
//    kMaxMad bytes (kLocLenErr) to QPN 1 (kLocQpOpErr) with an AH of the VM;
//  - a datagram for a GID no VM of this engine has, or for a QP1 not in
//    RTR/RTS or without a posted receive, is dropped and counted
//    (VmStats::gsi_dropped), as a fabric drops UD; the send still succeeds;
//  - the CPU time is the sender's: at most kTurnBudget datagrams (or
//    flushed WQEs) of a VM per data-path turn, and kRatePerSec per second
//    after a burst of kBurst (a token bucket; the RDMA CM needs three
//    MADs a connection); the rest waits, on the guest's ring, for later
//    turns (NextDeadline says when).
//
// Threads: Create/Modify/Query/Destroy on the control thread (their state
// changes in RunSync closures); Schedule, Run and Unpublish on the data
// path.
#ifndef VRDMA_BACKEND_ENGINE_GSI_H_
#define VRDMA_BACKEND_ENGINE_GSI_H_

#include <memory>

#include "backend/base/executor.h"
#include "backend/base/intrusive_list.h"
#include "backend/engine/completions.h"
#include "backend/engine/objects.h"
#include "backend/engine/resources.h"
#include "backend/engine/turn.h"
#include "backend/engine/vm_table.h"

namespace vrdma::engine {

class Gsi {
 public:
  static constexpr uint32_t kMaxMad = 256;        // IB_MGMT_MAD_SIZE
  static constexpr uint32_t kTurnBudget = 16;     // per VM per turn
  static constexpr uint32_t kMaxDepth = 4096;     // send or receive WRs
  static constexpr double kRatePerSec = 20000;    // datagrams per VM
  static constexpr double kBurst = 64;

  Gsi(Executor& executor, VmTable& vms, Resources& resources,
      Completions& completions, Turn& turn)
      : executor_(executor), vms_(vms), resources_(resources),
        completions_(completions), turn_(turn) {}
  Gsi(const Gsi&) = delete;
  Gsi& operator=(const Gsi&) = delete;

  // Control thread.
  Result<CreateQpResult> Create(VmId id, const CreateQpRequest& req);
  Status Modify(VmId id, const ModifyQpRequest& req);
  Result<QueryQpResult> Query(VmId id) const;
  Status Destroy(VmId id);

  // Data path (or a RunSync closure).
  void Schedule(VmContext& vm);  // its SQ doorbell
  bool Run();                    // the turn's sends and flushes
  // When a QP1 that waits for its rate has a datagram's budget again
  // (policy::kNever: none waits).
  policy::Nanos NextDeadline() const { return next_deadline_; }
  // Takes vm's GSI QP off the data path and gives its references back;
  // the caller frees the object (its views) on the control thread.
  std::unique_ptr<GsiQp> Unpublish(VmContext& vm);

 private:
  // One send WQE of qp (delivered, or failed with its error CQE): false
  // when the ring has none or is broken.
  bool SendOne(GsiQp& qp);
  // Delivers len bytes from av's sender to the VM owning av.dgid.
  void Deliver(const AddressVector& av, const uint8_t* data, uint32_t len,
               bool has_imm, uint32_t imm, bool solicited, VmContext& from);
  // Refills qp's tokens; the WQEs it may take this turn.
  uint32_t Budget(GsiQp& qp, policy::Nanos now);
  // Flushes up to *budget WQEs of a QP in ERR; true when any was left.
  bool FlushSome(GsiQp& qp, uint32_t* budget);
  // A WQE failed: its error CQE, then the QP goes to ERR (QP_FATAL for a
  // broken ring).
  void Fail(GsiQp& qp, CqObj& cq, uint64_t wr_id, WcOpcode op, WcStatus st);
  void EnterError(GsiQp& qp);

  Executor& executor_;
  VmTable& vms_;
  Resources& resources_;
  Completions& completions_;
  Turn& turn_;
  IntrusiveList<GsiQp, &GsiQp::pending_hook> pending_;
  policy::Nanos next_deadline_ = policy::kNever;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_GSI_H_
