// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's implementation class, shared by its source files:
//   resources.cc          VM lifecycle, PDs, MRs, AHs, queries, stats
//   qp_control.cc         CQs, QPs (create/modify/query/destroy), SRQs
//   send_path.cc          doorbells, send queues, PollOnce
//   recv_path.cc          receive queues and SRQs (lazy replenish)
//   recv_path_announced.cc  announced receives, split SENDs
//   completions.cc        RNIC completions -> guest CQEs, notifications
//   host_peer.cc          the scheduler stage's owner, probes, QoS
//
// Threading: every Rnic call and every change to a VM's tables or to a
// published object runs on the data-path thread: control verbs do their
// checks and page-view mapping on the control thread, then run the rest in
// one Executor::RunSync closure. This also satisfies rnic.h's "one thread
// at a time" rule without locks. With InlineExecutor (tests) it is all one
// thread.
#ifndef VRDMA_BACKEND_ENGINE_ENGINE_IMPL_H_
#define VRDMA_BACKEND_ENGINE_ENGINE_IMPL_H_

#include <array>
#include <functional>
#include <memory>
#include <optional>

#include "backend/engine/engine.h"
#include "backend/base/intrusive_list.h"
#include "backend/engine/objects.h"
#include "backend/engine/quota.h"
#include "backend/engine/resource_table.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

// Guest WRs the scheduler stage holds per QP before the engine stops
// consuming its ring (backpressure).
inline constexpr uint32_t kStageQueueCapacity = 32;

// The daemon's own source GID (its probe QPs): ::ffff:127.0.0.1, never a
// VM's (attach-vm refuses it).
inline constexpr Gid kHostGid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};

class EngineImpl final : public Engine, private sched::StageOwner {
 public:
  EngineImpl(Rnic& rnic, Executor& executor, policy::SchedulerPolicy& policy,
             EngineOptions options);
  ~EngineImpl() override;

  Result<VmId> AttachVm(const VmConfig& config, VmEventSink* sink) override;
  void DetachVm(VmId vm) override;
  void SetGuestMemory(VmId vm,
                      std::shared_ptr<const GuestMemory> memory) override;
  Result<VmStats> Stats(VmId vm) const override;

  Result<DeviceAttr> QueryDevice(VmId vm) const override;
  Result<Gid> QueryGid(VmId vm, uint32_t index) const override;
  Result<uint32_t> CreatePd(VmId vm) override;
  Status DestroyPd(VmId vm, uint32_t pd) override;
  Result<RegMrResult> RegMr(VmId vm, const RegMrRequest& req) override;
  Status DeregMr(VmId vm, uint32_t mr) override;
  Result<CreateCqResult> CreateCq(VmId vm, const CreateCqRequest& req) override;
  Status DestroyCq(VmId vm, uint32_t cq) override;
  Status ReqNotifyCq(VmId vm, uint32_t cq, bool solicited_only) override;
  Result<CreateQpResult> CreateQp(VmId vm, const CreateQpRequest& req) override;
  Status ModifyQp(VmId vm, const ModifyQpRequest& req) override;
  Result<QueryQpResult> QueryQp(VmId vm, uint32_t qpn) const override;
  Status DestroyQp(VmId vm, uint32_t qpn) override;
  Result<uint32_t> CreateAh(VmId vm, uint32_t pd, const GuestAh& ah) override;
  Status DestroyAh(VmId vm, uint32_t ah) override;
  Result<CreateSrqResult> CreateSrq(VmId vm,
                                    const CreateSrqRequest& req) override;
  Status ModifySrq(VmId vm, uint32_t srq, uint32_t mask, uint32_t max_wr,
                   uint32_t srq_limit) override;
  Status DestroySrq(VmId vm, uint32_t srq) override;

  Status SetQos(VmId vm, const policy::TenantQos& qos) override;
  void Report(VmId vm, policy::ReportSink& sink) const override;
  void ReportPolicy(policy::ReportSink& sink) const override;

  void Doorbell(VmId vm, uint8_t kind, uint32_t handle) override;
  bool PollOnce() override;
  policy::Nanos NextDeadline() const override;

 private:
  // --- helpers (engine_vm.cc) ---
  VmContext* FindVm(VmId vm) const { return vms_.Lookup(vm); }
  RnicLimits VmLimits(const VmContext& vm) const;
  // Maps pages into *view and adds its pages and mappings to *charge;
  // kNoResource when the VM's mapping quota, less what *charge already
  // holds, cannot take the view.
  Status MapPages(const VmContext& vm, const std::vector<uint64_t>& pages,
                  GuestPageView* view, Charge* charge) const;
  // Destroys object `handle` of one of the VM's tables on the data-path
  // thread: kBadHandle when it is not there, kBusy while other objects
  // still refer to it (for objects that count references), otherwise
  // `release` undoes its RNIC object and accounting. The object, with its
  // page views, is freed after RunSync returns, on the calling thread.
  template <typename T, typename Release>
  Status DestroyObject(VmId id, ResourceTable<T> VmContext::*table,
                       uint32_t handle, Release release) {
    VmContext* vm = FindVm(id);
    if (vm == nullptr) return Status::kBadHandle;
    Status s = Status::kOk;
    std::unique_ptr<T> dead;
    executor_.RunSync([&] {
      T* obj = (vm->*table).Lookup(handle);
      if (obj == nullptr) {
        s = Status::kBadHandle;
        return;
      }
      if constexpr (requires { obj->refs; }) {
        if (obj->refs > 0) {
          s = Status::kBusy;
          return;
        }
      }
      release(*vm, *obj);
      dead = (vm->*table).Remove(handle);
    });
    rnic_.Reclaim();  // the RNIC's queue memory, freed here too
    return s;
  }
  // Teardown of single objects, on the data-path thread.
  void DestroyQpLocked(VmContext& vm, uint32_t handle);
  void DestroyMrLocked(VmContext& vm, uint32_t handle);
  void DestroyCqLocked(VmContext& vm, uint32_t handle);
  void DestroySrqLocked(VmContext& vm, uint32_t handle);

  // --- queues (engine_queues.cc) ---
  Status ModifyQpLocked(VmContext& vm, QpObj& qp, const ModifyQpRequest& req);
  void InitRecvQueue(RecvQueue& rq, const RingSpec& ring, uint32_t max_sge,
                     uint32_t rnic_max_wr, GuestPageView view);

  // --- send path (datapath_send.cc) ---
  QpObj* FindQp(const VmContext& vm, uint32_t qpn) const {
    std::optional<uint32_t> h = vm.qpn_to_qp.Find(qpn);
    return h ? vm.qps.Lookup(*h) : nullptr;
  }
  bool ProcessSq(QpObj& qp);
  // ERR or SQE: flush what the guest posted, oldest first.
  bool FlushSq(QpObj& qp);
  WcStatus CheckSendSemantics(const QpObj& qp, SendWr& wr,
                              uint32_t ah_handle) const;
  // Before a WR that consumes a receive (SEND, WRITE_WITH_IMM) reaches the
  // RNIC: when its destination QP is on this engine, pull that QP's new
  // receive WQEs first, so a receive the guest posted before the send was
  // posted is on the RNIC when the message arrives (as a real RNIC, which
  // reads the RQ at arrival, would find it).
  void PrepareDestination(const QpObj& qp, uint32_t remote_qpn);
  // Takes the consumed WQE at seq: a slot for it, its record kept.
  SendSlot& TakeSlot(QpObj& qp, uint64_t guest_wr_id, WrOpcode op,
                     bool signaled);
  // RNIC completions of the send CQ written, then every WR the stage still
  // holds for the QP reported as flushed. Only with the QP in ERR.
  void DrainSendSide(QpObj& qp);
  // Forgets every consumed WR the stage has not reported (reset, destroy:
  // the RNIC discards them without completions).
  void CloseSendWindow(QpObj& qp);
  // The stage reported the oldest consumed WR of qp done.
  void RetireOldest(QpObj& qp);
  // QP to ERR (the RNIC flushes what it holds); the rings are flushed by
  // FlushSq and ReplenishRecv, which run next.
  void EnterError(QpObj& qp);
  // Guest wrote an impossible ring index: QP to ERR and QP_FATAL event.
  void RingError(QpObj& qp);
  // sched::StageOwner
  void OnWrDone(void* owner, uint32_t tag, WcStatus status,
                uint32_t byte_len) override;
  void OnMarkerReached(void* owner, uint32_t tag, WcStatus status) override;
  void OnPostRefused(void* owner, uint32_t tag, Status status) override;
  bool PrepareReceive(void* owner, const sched::ReceivePiece& piece) override;
  bool SendPeerMessage(sched::DestId dest,
                       const policy::PeerMessage& m) override;
  bool OpenProbePath(sched::DestId dest) override;
  void CloseProbePath();

  // --- receive path (datapath_recv.cc) ---
  bool ReplenishRecv(RecvQueue& rq);
  bool FlushRecvRing(RecvQueue& rq);
  WcStatus CheckRecvSemantics(uint32_t pd, const VmContext& vm,
                              RecvWr& wr) const;
  void FailRecv(RecvQueue& rq, uint32_t slot, uint64_t guest_wr_id,
                WcStatus status);
  // Slot finished (completed, flushed or skipped): advance the consumer.
  void MarkRecvDone(RecvQueue& rq, uint32_t slot);
  void UpdateSweep(RecvQueue& rq);
  bool SweepRecv();
  void UnlinkRecv(RecvQueue& rq);
  void CheckSrqLimit(SrqObj& srq);

  // --- announced receives, split SENDs (datapath_recv_slices.cc) ---
  // The local QP qp sends to (RC/UC, destination GID of its VM), if any.
  QpObj* LocalPeer(const QpObj& qp) const;
  // At RTR: announced when the only possible sender is a local QP.
  void ChooseReceiveMode(QpObj& qp);
  // Whether sender's stage may split receive-consuming WRs.
  void UpdateReassembly(QpObj& sender);
  bool AnnounceReceive(RecvQueue& rq, const sched::ReceivePiece& piece);
  bool PostAnnounced(RecvQueue& rq);
  // Flush or reset: the plan is dropped; a WQE waiting for slices that will
  // never come completes (flushed) once what was posted of it has.
  void CloseOpenWqe(RecvQueue& rq);
  // A slice of slot completed; true when the WQE is complete (wc's status
  // and byte_len then set).
  bool CompleteRecvSlice(RecvQueue& rq, uint32_t slot, const Completion& c,
                         ib_uverbs_wc* wc);

  // --- completions (datapath_cq.cc) ---
  // Polls one batch, or until empty when drain; true when any.
  bool PollRnicCq(CqObj& cq, bool drain);
  void HandleCompletion(CqObj& cq, const Completion& c);
  // The QP failed on the RNIC's side (error completion).
  void NoteRnicError(QpObj& qp);
  bool WriteCqe(CqObj& cq, const ib_uverbs_wc& wc, bool solicited);
  void WriteErrorCqe(CqObj& cq, uint64_t wr_id, uint32_t qpn, WcOpcode op,
                     WcStatus status);
  void Expect(CqObj& cq, uint64_t n);
  void Retire(CqObj& cq, uint64_t n);
  void Event(VmContext& vm, uint32_t type, uint32_t handle);
  // The RNIC's asynchronous errors (slow path, a few per turn).
  bool PollRnicEvents();
  // The RNIC put cq's host CQ in error: CQ_ERR, every QP using it to ERR
  // with QP_FATAL; what it owed is flushed by the QPs' flush.
  void FailHostCq(CqObj& cq);
  // Receives on the RNIC whose completions a failed host CQ lost: flushed
  // (within the VM's flush budget). Returns true when work remains.
  bool FlushLostReceives(RecvQueue& rq, bool* did);
  // The VM's flush budget left in this turn (reset on its first use).
  uint32_t& FlushLeft(VmContext& vm) {
    if (vm.flush_turn != turn_) {
      vm.flush_turn = turn_;
      vm.flush_left = options_.flush_budget;
    }
    return vm.flush_left;
  }

  Rnic& rnic_;
  Executor& executor_;
  EngineOptions options_;
  RnicLimits limits_;
  sched::Stage stage_;
  ResourceTable<VmContext> vms_;
  KeyMap qpn_owner_;  // qpn -> VmId, every VM's QPs (data-path thread)
  // Peer messages the stage sent to this host (dest 0), delivered at the
  // start of the next turn. Fixed capacity; a full queue drops (the
  // policy's protocol tolerates loss: the next change sends again).
  std::array<policy::PeerMessage, 16> loopback_{};
  uint32_t loopback_count_ = 0;
  // The daemon's own loopback QP pair for probes towards this host (dest
  // 0), built the first time a policy probes.
  struct ProbeObjects {
    bool built = false;
    RnicPd pd;
    RnicMr mr;
    RnicCq cq;
    RnicQp a, b;
    alignas(64) std::array<uint8_t, 64> target{};
  };
  ProbeObjects probe_;
  std::vector<Gid> gids_in_use_;  // control thread: every attached VM's GIDs
  uint64_t mappings_admitted_ = 0;  // control thread: sum of max_mappings

  // Data-path work lists.
  IntrusiveList<QpObj, &QpObj::pending_hook> pending_sq_;
  IntrusiveList<CqObj, &CqObj::active_hook> active_cq_;
  IntrusiveList<RecvQueue, &RecvQueue::sweep_hook> sweep_rq_;
  IntrusiveList<RecvQueue, &RecvQueue::ready_hook> ready_rq_;
  // Receive rings in ERR with WQEs left to flush after their VM's budget
  // ran out: back on ready_rq_ at the start of the next turn.
  IntrusiveList<RecvQueue, &RecvQueue::flush_hook> flush_rq_;
  uint64_t turn_ = 0;  // PollOnce count (per-turn budgets)
  IntrusiveList<VmContext, &VmContext::events_hook> events_pending_;
  // One notification per VM for the events of a turn.
  void FlushEvents();
  // The clock, read at most once per turn and only when something needs
  // it (an idle turn reads no clock).
  policy::Nanos Now() {
    if (!now_valid_) {
      now_ = options_.clock();
      now_valid_ = true;
    }
    return now_;
  }
  policy::Nanos now_ = 0;
  bool now_valid_ = false;
  // Scratch for the data path, reused so nothing is built per WQE.
  static constexpr int kRecvBatch = 8;
  std::array<RecvWr, kRecvBatch> recv_batch_{};
  static constexpr int kPollBatch = 32;
  std::array<Completion, kPollBatch> poll_batch_{};
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_ENGINE_IMPL_H_
