// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The scheduler stage: the one place between translated guest work
// requests and the RNIC where work is queued, split, held, paced and
// preempted. The daemon's engine and the isolation bench (on the RNIC
// model) run this same class; docs/scheduler.md is its design.
//
// A flow is one host QP. Its owner (the engine for a guest QP, the bench
// for a tenant QP) submits checked SendWrs with a tag (the owner's record
// of the guest WR); the stage keeps them in the flow's preallocated FIFO,
// posts them (whole, or as pieces) as the flow's FlowControl allows, and
// reports each guest WR exactly once through StageOwner::OnWrDone, after
// its last piece completed (or with the first error, or flushed). The
// owner hands every send completion of the flow's QP to OnCompletion: the
// low kRecordBits bits of the RNIC wr_id are the stage's.
//
// A policy (policy/scheduler_policy.h) decides; the stage is the
// Mechanisms it acts through.
//
// Threading: everything runs on the data-path thread, except PrepareFlow
// (allocates a flow's storage, any thread). Nothing here allocates after
// AddFlow; a full FIFO is backpressure (Submit returns false).
#ifndef VRDMA_BACKEND_SCHEDULER_STAGE_H_
#define VRDMA_BACKEND_SCHEDULER_STAGE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/base/intrusive_list.h"
#include "backend/base/status.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/flow.h"
#include "backend/scheduler/stage_types.h"
#include "backend/scheduler/timer_wheel.h"
#include "policy/scheduler_policy.h"

namespace vrdma::sched {

struct StageOptions {
  uint32_t max_flows = 1u << 16;
  Nanos timer_granularity_ns = 256;
  // Adaptive signaling (TPL, docs/scheduler.md "Signals"): a WR the guest
  // signaled is posted signaled only every signal period of the flow (and
  // as the last of a post list), and the period follows the RNIC's load.
  // The guest's CQEs are unchanged; the RNIC writes fewer.
  bool adaptive_signaling = false;
};

class Stage final : public policy::Mechanisms {
 public:
  Stage(Rnic& rnic, policy::SchedulerPolicy& policy, StageOwner& owner,
        StageOptions options = {});
  ~Stage() override;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  policy::SchedulerPolicy& policy() { return policy_; }
  const policy::SchedulerPolicy& policy() const { return policy_; }

  // --- control ---
  // Allocates a flow's FIFO and records (any thread).
  static std::unique_ptr<FlowStorage> PrepareFlow(const FlowSpec& spec);
  // How many piece records a flow gets: twice the RNIC depth, a power of
  // two (unsignaled WRs the RNIC completed silently stay unretired until a
  // signaled one completes, so the records need slack beyond the RNIC's).
  static uint32_t RecordCapacity(const FlowSpec& spec);
  // kNoFlow when the flow table is full.
  FlowId AddFlow(std::unique_ptr<FlowStorage> storage, Nanos now);
  // Forgets the flow (queued WRs are dropped unreported) and returns its
  // storage for the caller to free off the data path.
  std::unique_ptr<FlowStorage> RemoveFlow(FlowId flow, Nanos now);
  // SEND and WRITE_WITH_IMM may be split only when the receiving side
  // reassembles them (docs/scheduler.md); otherwise they go whole.
  void SetReceiverReassembles(FlowId flow, bool yes);
  void AddTenant(TenantId tenant, const policy::TenantQos& qos);
  void SetTenantQos(TenantId tenant, const policy::TenantQos& qos);
  void RemoveTenant(TenantId tenant);
  // The CQ of the stage's own QPs (probes); polled in Run.
  void SetOwnCq(RnicCq cq) { own_cq_ = cq; has_own_cq_ = true; }
  void AddProbePath(DestId dest, const ProbePath& path);
  // PeRF's own PAUSE/RESUME (pause_on_rnic), where the RNIC has WAIT and
  // ENABLE. Posts the first stock of pcq WRITEs.
  Status SetPreemptionControl(const PreemptionControl& pc);

  // --- data path ---
  // Zero-copy submission: the owner decodes the WR straight into the FIFO
  // slot Reserve returns (inline bytes into inline_buf, room for the flow's
  // max_inline), then Commits it once checked. wr == nullptr: the FIFO is
  // full (backpressure). An uncommitted slot is simply reused.
  struct Slot {
    SendWr* wr = nullptr;
    uint8_t* inline_buf = nullptr;
  };
  Slot Reserve(FlowId flow);
  void Commit(FlowId flow, uint32_t tag, const policy::WrInfo& info,
              Nanos now);
  // Reserve, copy (inline bytes too), Commit. false: the FIFO is full.
  bool Submit(FlowId flow, const SendWr& wr, uint32_t tag,
              const policy::WrInfo& info, Nanos now);
  // A WR that failed the owner's checks: it fails (OnMarkerReached) once
  // every WR submitted before it is done, as on a native QP. false: full.
  bool SubmitMarker(FlowId flow, uint32_t tag, WcStatus status, Nanos now);
  // Fires timers, polls the stage's own CQ and posts what may go. Returns
  // true when it did anything.
  bool Run(Nanos now);
  // Posts what one flow may post now (the owner's end of a batch, or a
  // full FIFO). Returns true when it posted anything.
  bool Kick(FlowId flow, Nanos now);
  // The flow may post again (what it waited for outside the stage, e.g.
  // its destination's receive descriptions, is there); Run serves it.
  void Wake(FlowId flow);
  // A completion polled from the flow's send CQ whose wr_id carries this
  // flow's cookie_base.
  void OnCompletion(FlowId flow, const Completion& c, Nanos now);
  // The QP failed or was reset: every WR the stage still knows of is
  // reported (kError: OnWrDone with kWrFlushErr, oldest first) or dropped
  // (kReset), and the flow starts empty.
  void EndFlowWork(FlowId flow, policy::FlowEnd how, Nanos now);
  void OnPeerMessage(DestId from, const policy::PeerMessage& m, Nanos now);

  // Work now: something may be posted, or the RNIC owes completions of
  // signaled pieces (they may wait on its timers; a software RNIC runs
  // those only when polled), or a probe is out.
  bool busy() const {
    return !ready_.empty() || signaled_outstanding_ > 0 ||
           probes_outstanding_ > 0 || enables_issued_ < released_upto_;
  }
  // Flows that may post now (after Run: the RNIC refused for lack of room,
  // or a pass was full).
  bool has_ready() const { return !ready_.empty(); }
  // Whether Run has anything to do: flows to serve, timers, its own CQs.
  bool needs_run() const {
    return !ready_.empty() || timers_.size() > 0 || probes_outstanding_ > 0 ||
           pc_.pcq_depth > 0;
  }
  // The earliest timer (release time, policy timer), kNoExpiry if none.
  Nanos next_deadline() const { return timers_.NextExpiry(); }
  uint32_t queued_wrs(FlowId flow) const;
  uint64_t stale_completions() const { return stale_completions_; }
  // Pieces posted signaled (each a CQE the RNIC writes and the data path
  // polls), over the stage's life.
  uint64_t rnic_signals() const { return rnic_signals_; }
  // Guest WRs reported done (OnWrDone), over the stage's life.
  uint64_t wrs_done() const { return wrs_done_; }
  // A flow's signal period (1 unless adaptive_signaling).
  uint32_t signal_period(FlowId flow) const;

  // --- policy::Mechanisms ---
  void Configure(FlowId flow, const policy::FlowControl& control) override;
  const policy::FlowControl& control(FlowId flow) const override;
  void Grant(FlowId flow, uint64_t bytes, uint32_t pieces) override;
  uint64_t credit_bytes(FlowId flow) const override;
  void ReleaseAt(FlowId flow, Nanos t) override;
  void WakeAt(Nanos t) override;
  bool SendProbe(DestId dest) override;
  bool SendPeerMessage(DestId dest, const policy::PeerMessage& m) override;
  const policy::FlowAccount& flow_account(FlowId flow) const override;
  const policy::TenantAccount& tenant_account(TenantId tenant) const override;
  bool cross_channel() const override { return cross_channel_; }
  bool rnic_pause() const override { return pc_.pcq_depth > 0; }

 private:
  struct Probe {
    bool live = false;
    bool refused = false;  // the owner could not build a path
    bool outstanding = false;
    ProbePath path;
    Nanos sent_at = 0;
  };
  // One WR handed to the RNIC in a pass: a whole guest WR (from the FIFO),
  // a piece of one, or a control WR (WAIT, sentinel). Committed to the
  // flow's state only once the RNIC accepted it.
  struct Emit {
    SendWr* wr = nullptr;
    uint32_t entry = 0;   // FIFO position, counted from q_head
    uint32_t offset = 0;  // of the piece in its WR
    uint32_t length = 0;
    uint8_t flags = 0;    // RecordFlags
    bool completes_entry = false;
  };
  enum class Stop : uint8_t {
    kEmpty, kHeld, kPaced, kCredit, kWindow, kRecords, kMarker, kPassFull,
    kReceiver,
  };
  static constexpr uint32_t kMaxPass = 64;

  FlowStorage* Get(FlowId flow) const {
    return flow < flows_.size() ? flows_[flow].get() : nullptr;
  }
  StageTenant* FindTenant(TenantId tenant);
  static void AddAccount(const policy::FlowAccount& a, policy::FlowAccount* to);
  void MakeReady(FlowStorage& f);
  // Posts what the flow may post now; returns true when it posted any.
  bool ServeFlow(FlowStorage& f);
  void Retire(FlowStorage& f, uint32_t seq, WcStatus status, uint32_t byte_len);
  void FinishWr(FlowStorage& f, uint32_t tag, const policy::WrInfo& info,
                Nanos arrival, WcStatus status, uint32_t byte_len,
                bool tell_policy = true);
  void NoteBlocked(FlowStorage& f, bool blocked);
  // Emits the flow's pieces into emits_ until a control stops it.
  Stop Plan(FlowStorage& f, uint32_t* count);
  // Plan for a flow at the default controls: whole WRs only.
  Stop PlanNative(FlowStorage& f, uint32_t* count);
  // After a plan: the last piece comes back visibly when the flow must see
  // it, and a marker waiting behind unsignaled work gets its sentinel.
  void FinishPlan(FlowStorage& f, Stop stop, uint32_t* count);
  // Whether a WR the guest signaled goes to the RNIC signaled; when not,
  // the flow owes a signal (FlowStorage::signal_owed) that its plan's last
  // piece pays.
  bool SignalGuestWr(FlowStorage& f, uint32_t since_signal);
  // TPL's rule on a signaled piece's completion: the period grows while
  // that piece took under 1.8x the latency at period 1, and halves above
  // 2.5x.
  void AdaptSignalPeriod(FlowStorage& f, const Record& r);
  // Hands emits_[0, count) to the RNIC and commits what it accepted.
  // Returns the number accepted; *refused the RNIC's status if it refused.
  uint32_t PostPlanned(FlowStorage& f, uint32_t count, Status* refused);
  void CommitEmit(FlowStorage& f, const Emit& e);
  void PollOwnCq();
  // Preemption control: keep pcq stocked; enable pcq WRITEs up to ticket.
  void StockPcq();
  void ReleaseTicket(uint64_t ticket);
  void FireTimer(TimerWheel::Entry* e);

  Rnic& rnic_;
  policy::SchedulerPolicy& policy_;
  StageOwner& owner_;
  StageOptions options_;
  bool cross_channel_ = false;
  const bool holds_sends_;  // policy_.HoldsSendsWithoutReceive()
  Nanos now_ = 0;
  std::vector<std::unique_ptr<FlowStorage>> flows_;  // by FlowId
  std::vector<FlowId> free_ids_;
  std::vector<std::unique_ptr<StageTenant>> tenants_;
  IntrusiveList<FlowStorage, &FlowStorage::ready_hook> ready_;
  TimerWheel timers_;
  TimerWheel::Entry policy_timer_;
  uint64_t signaled_outstanding_ = 0;  // signaled pieces on the RNIC
  bool has_own_cq_ = false;
  RnicCq own_cq_;
  PreemptionControl pc_;
  uint64_t tickets_issued_ = 0;   // WAITs handed to paused flows
  uint64_t enables_issued_ = 0;   // pcq WRITEs enabled
  uint64_t pcq_posted_ = 0;       // pcq WRITEs posted (enabled or not)
  uint64_t released_upto_ = 0;    // tickets the policy has released
  std::vector<Probe> probes_;  // by DestId
  uint32_t probes_outstanding_ = 0;
  uint64_t stale_completions_ = 0;
  uint64_t rnic_signals_ = 0;
  uint64_t wrs_done_ = 0;
  std::array<Completion, 16> own_poll_{};
  std::array<Emit, kMaxPass> emits_{};
  std::array<SendWr, kMaxPass> scratch_{};
  mutable policy::TenantAccount no_tenant_{};
  policy::FlowAccount no_flow_{};
  policy::FlowControl no_control_{};
};

}  // namespace vrdma::sched

#endif  // VRDMA_BACKEND_SCHEDULER_STAGE_H_
