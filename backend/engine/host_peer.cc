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

bool EngineImpl::OpenProbePath(sched::DestId dest) {
  // Every peer is local today (one host, SoftRnic): dest 0 only.
  if (dest != 0 || probe_.built) return false;
  ProbeObjects& p = probe_;
  bool ok = rnic_.AddGid(kHostGid) == Status::kOk;
  Result<RnicPd> pd = ok ? rnic_.AllocPd() : Status::kIoError;
  Result<RnicCq> cq = pd.ok() ? rnic_.CreateCq(64) : Status::kIoError;
  Result<RnicMr> mr =
      cq.ok() ? rnic_.RegMr(*pd, p.target.data(), p.target.size(),
                            reinterpret_cast<uint64_t>(p.target.data()),
                            kAccessLocalWrite | kAccessRemoteWrite)
              : Status::kIoError;
  ok = pd.ok() && cq.ok() && mr.ok();
  if (ok) {
    p.pd = *pd;
    p.cq = *cq;
    p.mr = *mr;
    QpInit init;
    init.pd = p.pd;
    init.send_cq = init.recv_cq = p.cq;
    init.caps = {4, 1, 1, 1, 16};
    Result<RnicQp> a = rnic_.CreateQp(init);
    Result<RnicQp> b = a.ok() ? rnic_.CreateQp(init) : Status::kIoError;
    ok = a.ok() && b.ok();
    if (a.ok()) p.a = *a;
    if (b.ok()) p.b = *b;
    for (auto [q, peer] : {std::pair{p.a, p.b}, std::pair{p.b, p.a}}) {
      if (!ok) break;
      // The attributes every RC transition requires (IBA 11.2.4.2).
      QpAttr at;
      at.state = QpState::kInit;
      at.access_flags = kAccessRemoteWrite;
      ok = rnic_.ModifyQp(q, at, kQpState | kQpPkeyIndex | kQpPort |
                                     kQpAccessFlags) == Status::kOk;
      at.state = QpState::kRtr;
      at.av.dgid = at.av.sgid = kHostGid;
      at.dest_qpn = peer.qpn;
      at.path_mtu_bytes = 1024;
      at.max_dest_rd_atomic = 1;
      at.min_rnr_timer = 1;
      ok = ok && rnic_.ModifyQp(q, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                                           kQpRqPsn | kQpMaxDestRdAtomic |
                                           kQpMinRnrTimer) == Status::kOk;
      at.state = QpState::kRts;
      at.timeout = 14;
      at.retry_cnt = 7;
      at.rnr_retry = 7;
      at.max_rd_atomic = 1;
      ok = ok && rnic_.ModifyQp(q, at, kQpState | kQpSqPsn | kQpTimeout |
                                           kQpRetryCnt | kQpRnrRetry |
                                           kQpMaxQpRdAtomic) == Status::kOk;
    }
  }
  p.built = true;  // once: a failed build is not retried
  if (!ok) {
    CloseProbePath();
    return false;
  }
  stage_.SetOwnCq(p.cq);
  stage_.AddProbePath(
      0, sched::ProbePath{p.a, reinterpret_cast<uint64_t>(p.target.data()),
                          p.mr.rkey});
  return true;
}

void EngineImpl::CloseProbePath() {
  ProbeObjects& p = probe_;
  if (!p.built) return;
  // Best effort, in dependency order; ids of objects never made are 0.
  for (RnicQp q : {p.a, p.b}) {
    if (q.id != 0) (void)rnic_.DestroyQp(q);
  }
  if (p.mr.id != 0) (void)rnic_.DeregMr(p.mr);
  if (p.cq.id != 0) (void)rnic_.DestroyCq(p.cq);
  if (p.pd.id != 0) (void)rnic_.DeallocPd(p.pd);
  (void)rnic_.RemoveGid(kHostGid);
  p = ProbeObjects{};
  p.built = true;
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
