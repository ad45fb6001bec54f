// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's side of the scheduler stage (backend/scheduler): what the
// stage reports about guest WRs becomes guest CQEs and QP state, receive
// pieces become receive WQEs posted at the destination, peer messages to
// this host loop back, and the operator's QoS and the policy's reports go
// through here. Data-path thread, except SetQos/Report (RunSync).
#include "backend/engine/engine_impl.h"

namespace vrdma::engine {

void EngineImpl::OnWrDone(void* owner, uint32_t tag, WcStatus status,
                          uint32_t byte_len) {
  QpObj& qp = *static_cast<QpObj*>(owner);
  // The stage reports WRs in the order they were consumed.
  const SendSlot& s = qp.slots[tag & qp.slot_mask];
  RetireOldest(qp);
  const bool ok = status == WcStatus::kSuccess;
  if (!ok && status != WcStatus::kWrFlushErr && qp.state != QpState::kErr) {
    NoteRnicError(qp);  // the RNIC moved its QP to ERR: flush our side next
  }
  // Unsignaled WRs stay silent unless they fail (errors and flushes are
  // always reported, as by an RNIC).
  if (ok && !s.signaled) return;
  ib_uverbs_wc wc{};
  wc.wr_id = s.guest_wr_id;
  wc.status = static_cast<uint32_t>(status);
  wc.opcode = static_cast<uint32_t>(SendCompletionOpcode(s.opcode));
  wc.byte_len = ok ? byte_len : 0;
  wc.qp_num = qp.qpn;
  wc.port_num = 1;
  (void)WriteCqe(*qp.send_cq, wc, /*solicited=*/!ok);
}

void EngineImpl::OnMarkerReached(void* owner, uint32_t tag, WcStatus status) {
  QpObj& qp = *static_cast<QpObj*>(owner);
  const SendSlot s = qp.slots[tag & qp.slot_mask];
  // Every WR before the bad one has completed: now it fails, the QP goes
  // to ERR, and what follows in the ring is flushed (FlushSq).
  EnterError(qp);
  DrainSendSide(qp);
  RetireOldest(qp);
  WriteErrorCqe(*qp.send_cq, s.guest_wr_id, qp.qpn,
                SendCompletionOpcode(s.opcode), status);
}

void EngineImpl::OnPostRefused(void* owner, uint32_t, Status) {
  // The RNIC left RTS on its own (an error it has not completed yet, or a
  // state change): treat it as an RNIC error; the flush reports every WR.
  QpObj& qp = *static_cast<QpObj*>(owner);
  if (qp.state != QpState::kErr) NoteRnicError(qp);
}

bool EngineImpl::PrepareReceive(void* owner, const sched::ReceivePiece& piece) {
  QpObj& qp = *static_cast<QpObj*>(owner);
  if (QpObj* dest = LocalPeer(qp);
      dest != nullptr && dest->srq == nullptr && dest->rq.announced &&
      dest->state != QpState::kErr) {
    return AnnounceReceive(dest->rq, piece);
  }
  // Receives posted ahead: make sure what the guest posted is on the RNIC.
  if (piece.first) PrepareDestination(qp, piece.remote_qpn);
  return true;
}

bool EngineImpl::SendPeerMessage(sched::DestId dest,
                                 const policy::PeerMessage& m) {
  // Every peer of this daemon is local today (one host, SoftRnic): dest 0
  // is this daemon. Messages to it are delivered on the next turn.
  if (dest != 0 || loopback_count_ == loopback_.size()) return false;
  loopback_[loopback_count_++] = m;
  return true;
}

Status EngineImpl::SetQos(VmId id, const policy::TenantQos& qos) {
  if (qos.weight == 0) return Status::kInvalid;
  Status s = Status::kOk;
  executor_.RunSync([&] {
    VmContext* vm = FindVm(id);
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
    if (FindVm(id) != nullptr) stage_.policy().ReportTenant(id, sink);
  });
}

void EngineImpl::ReportPolicy(policy::ReportSink& sink) const {
  executor_.RunSync([&] {
    sink.Text("name", stage_.policy().name());
    stage_.policy().Report(sink);
  });
}

policy::Nanos EngineImpl::NextDeadline() const {
  const sched::Nanos t = stage_.next_deadline();
  return t == sched::kNoExpiry ? policy::kNever : t;
}

}  // namespace vrdma::engine
