// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// HostPeer (host_peer.h): loopback peer messages and the probe QP pair.
#include "backend/engine/host_peer.h"

#include <utility>

namespace vrdma::engine {

bool HostPeer::SendPeerMessage(sched::DestId dest,
                                 const policy::PeerMessage& m) {
  // Every peer of this daemon is local today (one host, SoftRnic): dest 0
  // is this daemon. Messages to it are delivered on the next turn.
  if (dest != 0 || loopback_count_ == loopback_.size()) return false;
  loopback_[loopback_count_++] = m;
  return true;
}

bool HostPeer::DeliverSome(Turn& turn) {
  bool did = false;
  for (uint32_t i = 0; i < loopback_count_; ++i) {
    stage_.OnPeerMessage(0, loopback_[i], turn.Now());
    did = true;
  }
  loopback_count_ = 0;
  return did;
}

bool HostPeer::OpenProbePath(sched::DestId dest) {
  // Every peer is local today (one host): dest 0 only. Built on the
  // data-path thread: not on an RNIC whose slow control calls run on the
  // control thread meanwhile (rnic.h: never two at once; OpenAtStart).
  if (dest != 0 || probe_.built || rnic_.control_beside_data_path()) return false;
  return Build();
}

void HostPeer::OpenAtStart() {
  if (rnic_.control_beside_data_path() && gid_ != kHostGid && !probe_.built) (void)Build();
}

bool HostPeer::Build() {
  ProbeObjects& p = probe_;
  bool ok = rnic_.AddGid(gid_) == Status::kOk;
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
      at.av.dgid = at.av.sgid = gid_;
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
    Close();
    return false;
  }
  stage_.SetOwnCq(p.cq);
  stage_.AddProbePath(
      0, sched::ProbePath{p.a, reinterpret_cast<uint64_t>(p.target.data()),
                          p.mr.rkey});
  return true;
}

void HostPeer::Close() {
  ProbeObjects& p = probe_;
  if (!p.built) return;
  // Best effort, in dependency order; ids of objects never made are 0.
  for (RnicQp q : {p.a, p.b}) {
    if (q.id != 0) (void)rnic_.DestroyQp(q);
  }
  if (p.mr.id != 0) (void)rnic_.DeregMr(p.mr);
  if (p.cq.id != 0) (void)rnic_.DestroyCq(p.cq);
  if (p.pd.id != 0) (void)rnic_.DeallocPd(p.pd);
  (void)rnic_.RemoveGid(gid_);
  p = ProbeObjects{};
  p.built = true;
}

}  // namespace vrdma::engine
