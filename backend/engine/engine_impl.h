// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's implementation: a thin facade over its parts (README.md,
// "Parts of the engine"). It implements Engine by routing each call to
// the part that holds its rules, owns the parts and the scheduler stage,
// runs a data-path turn (PollOnce: the parts in order) and routes doorbells.
// It also implements the narrow interfaces through which a lower part makes
// a higher one act (CompletionListener, FlushScheduler) and the stage's
// sched::StageOwner, each call going to one part.
//
//   vm_table.h, turn.h       shared state: the VMs, the data path's turn
//   resources.*              VM admission, PDs, MRs, AHs, CQs, SRQs, stats
//   qp_control.*             QPs: create, modify (state machine), query
//   teardown.*               destroy objects, detach VMs
//   send_path.*              send queues -> stage -> RNIC; WR reports
//   recv_path*.cc, .h        receive queues and SRQs (lazy, announced)
//   completions.*            RNIC completions -> guest CQEs, events
//   error_flush.*            QPs to ERR, flushes, flush budgets
//   host_peer.*              loopback peer messages, probe QPs
//
// Threading: every Rnic call and every change to a VM's tables or to a
// published object runs on the data-path thread: control verbs do their
// checks and page-view mapping on the control thread, then run the rest in
// one Executor::RunSync closure. This also satisfies rnic.h's "one thread
// at a time" rule without locks. With InlineExecutor (tests) it is all one
// thread.
#ifndef VRDMA_BACKEND_ENGINE_ENGINE_IMPL_H_
#define VRDMA_BACKEND_ENGINE_ENGINE_IMPL_H_

#include <memory>

#include "backend/engine/completions.h"
#include "backend/engine/engine.h"
#include "backend/engine/error_flush.h"
#include "backend/engine/gsi.h"
#include "backend/engine/host_peer.h"
#include "backend/engine/objects.h"
#include "backend/engine/qp_control.h"
#include "backend/engine/recv_path.h"
#include "backend/engine/resources.h"
#include "backend/engine/send_path.h"
#include "backend/engine/teardown.h"
#include "backend/engine/turn.h"
#include "backend/engine/vm_table.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

class EngineImpl final : public Engine,
                         private sched::StageOwner,
                         private CompletionListener,
                         private FlushScheduler {
 public:
  EngineImpl(Rnic& rnic, Executor& executor, policy::SchedulerPolicy& policy,
             EngineOptions options);
  ~EngineImpl() override;

  Result<VmId> AttachVm(const VmConfig& config, VmEventSink* sink) override {
    return resources_.AttachVm(config, sink);
  }
  void DetachVm(VmId vm) override { teardown_.DetachVm(vm); }
  void SetGuestMemory(VmId vm,
                      std::shared_ptr<const GuestMemory> memory) override {
    resources_.SetGuestMemory(vm, std::move(memory));
  }
  Result<VmStats> Stats(VmId vm) const override {
    return resources_.Stats(vm);
  }

  Result<DeviceAttr> QueryDevice(VmId vm) const override {
    return resources_.QueryDevice(vm);
  }
  Result<Gid> QueryGid(VmId vm, uint32_t index) const override {
    return resources_.QueryGid(vm, index);
  }
  Result<uint32_t> CreatePd(VmId vm) override {
    return resources_.CreatePd(vm);
  }
  Status DestroyPd(VmId vm, uint32_t pd) override {
    return teardown_.DestroyPd(vm, pd);
  }
  Result<RegMrResult> RegMr(VmId vm, const RegMrRequest& req) override {
    return resources_.RegMr(vm, req);
  }
  Status DeregMr(VmId vm, uint32_t mr) override {
    return teardown_.DeregMr(vm, mr);
  }
  Result<AllocMwResult> AllocMw(VmId vm, uint32_t pd, uint8_t type) override {
    return resources_.AllocMw(vm, pd, type);
  }
  Status DeallocMw(VmId vm, uint32_t mw) override {
    return teardown_.DeallocMw(vm, mw);
  }
  Result<RegMrResult> AllocMr(VmId vm, const AllocMrRequest& req) override {
    return resources_.AllocMr(vm, req);
  }
  Result<CreateCqResult> CreateCq(VmId vm,
                                  const CreateCqRequest& req) override {
    return resources_.CreateCq(vm, req);
  }
  Status DestroyCq(VmId vm, uint32_t cq) override {
    return teardown_.DestroyCq(vm, cq);
  }
  Status ReqNotifyCq(VmId vm, uint32_t cq, bool solicited_only) override {
    return resources_.ReqNotifyCq(vm, cq, solicited_only);
  }
  // QPN 1 is the VM's GSI QP, which the engine carries itself (gsi.h).
  Result<CreateQpResult> CreateQp(VmId vm,
                                  const CreateQpRequest& req) override {
    return req.type == QpType::kGsi ? gsi_.Create(vm, req)
                                    : qps_.CreateQp(vm, req);
  }
  Status ModifyQp(VmId vm, const ModifyQpRequest& req) override {
    return req.qpn == VIRTIO_RDMA_GSI_QPN ? gsi_.Modify(vm, req)
                                          : qps_.ModifyQp(vm, req);
  }
  Result<QueryQpResult> QueryQp(VmId vm, uint32_t qpn) const override {
    return qpn == VIRTIO_RDMA_GSI_QPN ? gsi_.Query(vm) : qps_.QueryQp(vm, qpn);
  }
  Status DestroyQp(VmId vm, uint32_t qpn) override {
    if (qpn == VIRTIO_RDMA_GSI_QPN) return gsi_.Destroy(vm);
    return teardown_.DestroyQp(vm, qpn);
  }
  Result<uint32_t> CreateAh(VmId vm, uint32_t pd, const GuestAh& ah) override {
    return resources_.CreateAh(vm, pd, ah);
  }
  Status DestroyAh(VmId vm, uint32_t ah) override {
    return teardown_.DestroyAh(vm, ah);
  }
  Result<CreateSrqResult> CreateSrq(VmId vm,
                                    const CreateSrqRequest& req) override {
    return resources_.CreateSrq(vm, req);
  }
  Status ModifySrq(VmId vm, uint32_t srq, uint32_t mask, uint32_t max_wr,
                   uint32_t srq_limit) override {
    return resources_.ModifySrq(vm, srq, mask, max_wr, srq_limit);
  }
  Status DestroySrq(VmId vm, uint32_t srq) override {
    return teardown_.DestroySrq(vm, srq);
  }

  Status SetQos(VmId vm, const policy::TenantQos& qos) override;
  void Report(VmId vm, policy::ReportSink& sink) const override;
  void ReportPolicy(policy::ReportSink& sink) const override;

  void Doorbell(VmId vm, uint8_t kind, uint32_t handle) override;
  bool PollOnce() override;
  policy::Nanos NextDeadline() const override;

 private:
  // sched::StageOwner: owner is the QpObj of the WR's flow.
  void OnWrDone(void* owner, uint32_t tag, WcStatus status,
                uint32_t byte_len) override {
    send_.OnWrDone(*static_cast<QpObj*>(owner), tag, status, byte_len);
  }
  void OnMarkerReached(void* owner, uint32_t tag, WcStatus status) override {
    send_.OnMarkerReached(*static_cast<QpObj*>(owner), tag, status);
  }
  void OnPostRefused(void* owner, uint32_t, Status) override {
    send_.OnPostRefused(*static_cast<QpObj*>(owner));
  }
  bool PrepareReceive(void* owner, const sched::ReceivePiece& piece) override {
    return recv_.PrepareReceive(*static_cast<QpObj*>(owner), piece);
  }
  bool SendPeerMessage(sched::DestId dest,
                       const policy::PeerMessage& m) override {
    return peer_.SendPeerMessage(dest, m);
  }
  bool OpenProbePath(sched::DestId dest) override {
    return peer_.OpenProbePath(dest);
  }
  // CompletionListener.
  void OnRecvCompleted(RecvQueue& rq) override { recv_.Schedule(rq); }
  void OnRnicQpError(QpObj& qp) override { errors_.NoteRnicError(qp); }
  void OnHostCqError(CqObj& cq) override { errors_.FailHostCq(cq); }
  // FlushScheduler.
  void ScheduleSendFlush(QpObj& qp) override { send_.Schedule(qp); }
  void ScheduleRecvFlush(RecvQueue& rq) override { recv_.Schedule(rq); }

  Rnic& rnic_;
  Executor& executor_;
  const EngineOptions options_;
  Turn turn_;
  VmTable vms_;
  sched::Stage stage_;
  // Parts, lower ones first (each refers only to those before it).
  Completions completions_;
  ErrorFlush errors_;
  RecvPath recv_;
  SendPath send_;
  HostPeer peer_;
  Resources resources_;
  Gsi gsi_;
  QpControl qps_;
  Teardown teardown_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_ENGINE_IMPL_H_
