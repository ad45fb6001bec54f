// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The seam between the scheduler stage (backend/scheduler) and a policy.
// A policy is pure decision logic: no I/O, no clock, no threads. The stage
// tells it what happens (tenants and flows come and go, work arrives and
// completes, timers fire, probes return, peer daemons report) with the
// current time, and the policy acts only through Mechanisms, which the
// stage implements: per-flow controls (hold, posting window, chunk size,
// credit gate, interrupts), credit grants, release times, one timer of its
// own, probes and messages to peer daemons. The same policy object runs in
// the daemon (wall clock, any Rnic) and in the isolation bench (the RNIC
// model's virtual clock). docs/scheduler.md describes the whole stage.
//
// Rules for implementations:
//   - control events (OnTenant*, OnFlowAdded/Ended, Report*) may allocate;
//   - data events (OnArrival, OnCompleted, OnRetired, OnCreditNeeded,
//     OnTimer, OnProbeCompleted, OnPeerMessage) must not allocate or block: they
//     run on the data path for every work request;
//   - every call comes from one thread at a time (the data-path thread).
#ifndef VRDMA_POLICY_SCHEDULER_POLICY_H_
#define VRDMA_POLICY_SCHEDULER_POLICY_H_

#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace vrdma::policy {

using Nanos = uint64_t;
using TenantId = uint32_t;  // one per VM (the engine's VmId)
using FlowId = uint32_t;    // the stage's id of a flow (one host QP); unique
                            // among the live flows of a stage, all VMs
using DestId = uint32_t;    // a receiving host as the stage's owner names it

inline constexpr Nanos kNever = UINT64_MAX;

// Justitia's application classes (§4.2), set per VM by the operator.
enum class TenantClass : uint8_t {
  kBandwidth = 0,   // the default: large messages, split and paced
  kThroughput = 1,  // small messages at high rate: batch paced
  kLatency = 2,     // sparse small messages: never delayed
};

// Operator-set QoS of a tenant (`attach-vm` / `set-qos`, docs/operators.md
// "QoS"). Rates count the bytes of the tenant's work requests (payload, as
// its applications measure them), in bits per second; zero means "none"
// wherever a field allows it. CheckTenantQos (below) holds the rules every
// producer of a TenantQos applies before a policy sees it, so a policy may
// rely on them: weight >= 1; a cap or guarantee never above the card;
// min_rate_bps <= max_rate_bps when both are set.
struct TenantQos {
  // Share of contended capacity relative to other tenants (1:3 gets a
  // quarter against three quarters). >= 1.
  uint32_t weight = 1;
  // The p99 completion latency the tenant asks for. 0: the policy's default.
  Nanos latency_target_ns = 0;
  // Cap on the tenant's byte rate. 0: none.
  uint64_t max_rate_bps = 0;
  // Cap on the tenant's message rate (guest work requests per second). 0:
  // none.
  uint64_t max_msgs_per_s = 0;
  // Guaranteed byte rate while the tenant has work to send. 0: none.
  uint64_t min_rate_bps = 0;
  TenantClass app_class = TenantClass::kBandwidth;
  bool operator==(const TenantQos&) const = default;
};

// The fields of a TenantQos as bits, for saying which of them a policy
// applies (ReportSink::EffectiveQos).
enum QosField : uint32_t {
  kQosWeight = 1u << 0,
  kQosLatencyTarget = 1u << 1,
  kQosMaxRate = 1u << 2,
  kQosMaxMsgs = 1u << 3,
  kQosMinRate = 1u << 4,
  kQosClass = 1u << 5,
};

enum class WrKind : uint8_t { kWrite, kSend, kRead, kAtomic };
enum class QpKind : uint8_t { kRc, kUc, kUd };

struct FlowInfo {
  FlowId flow = 0;
  TenantId tenant = 0;
  QpKind qp = QpKind::kRc;
  DestId dest = 0;
  uint32_t rnic_depth = 0;  // host send queue depth
};

// A guest work request as the policy sees it.
struct WrInfo {
  TenantId tenant = 0;
  FlowId flow = 0;
  WrKind kind = WrKind::kWrite;
  uint32_t bytes = 0;
  bool signaled = false;  // the guest asked for a completion
};

// What the stage enforces for a flow. Zero means "no limit" everywhere, so
// a default FlowControl is native RDMA: every WR goes to the RNIC whole, as
// soon as it arrives.
struct FlowControl {
  bool held = false;             // PAUSE: nothing of the flow is posted
  bool gated = false;            // each piece posted consumes granted credit
  uint32_t chunk_bytes = 0;      // split WRs larger than this into pieces
  uint64_t window_bytes = 0;     // bytes outstanding on the RNIC at most
  uint32_t window_wrs = 0;       // pieces outstanding on the RNIC at most
  uint16_t interrupt_waits = 0;  // zero-count WAITs after each non-last
                                 // piece (only where the RNIC has WAIT)
  // With held: the RNIC holds the flow instead of the stage (PeRF's own
  // PAUSE: a WAIT on the stage's control CQ, released by ENABLE). Only
  // where the stage has a preemption control queue; resumes then happen in
  // the order the flows were paused.
  bool pause_on_rnic = false;
  bool operator==(const FlowControl&) const = default;
};

// Completion-latency histogram buckets (FlowAccount::latency_hist): bucket
// i < kLatencyBuckets - 1 counts WRs whose latency (arrival -> completion)
// is below 2^i microseconds and not below 2^(i-1) (bucket 0: below 1 us);
// the last bucket counts the rest (4.19 s and more).
inline constexpr int kLatencyBuckets = 24;
constexpr int LatencyBucket(Nanos latency_ns) {
  const int b = std::bit_width(latency_ns / 1000);
  return b < kLatencyBuckets - 1 ? b : kLatencyBuckets - 1;
}

// Accounting the stage keeps per flow and per tenant. "Pieces" are what
// the RNIC sees (a split WR is several); WRs are the guest's.
struct FlowAccount {
  uint64_t wrs_arrived = 0;
  uint64_t bytes_arrived = 0;
  uint64_t wrs_completed = 0;    // signaled or not, successful or not
  uint64_t bytes_completed = 0;
  uint64_t pieces_posted = 0;
  uint64_t bytes_posted = 0;
  uint32_t queued_wrs = 0;       // in the stage, not fully posted
  uint64_t queued_bytes = 0;     // not yet posted
  uint32_t outstanding_pieces = 0;  // on the RNIC, not known complete
  uint64_t outstanding_bytes = 0;
  Nanos held_ns = 0;             // time with work queued that the controls
                                 // kept back (held, gate, window, pace)
  uint64_t bytes_paced = 0;      // posted when a release time they waited
                                 // for came (ReleaseAt: pacing)
  uint64_t wrs_split = 0;        // guest WRs posted as several pieces
  Nanos latency_sum_ns = 0;      // arrival -> completion, every WR
  Nanos latency_max_ns = 0;
  // Every WR's latency by LatencyBucket: sums to wrs_completed.
  std::array<uint64_t, kLatencyBuckets> latency_hist{};
  // PeRF's SQ_Len: guest WRs arrived and not complete.
  uint64_t sq_len() const { return wrs_arrived - wrs_completed; }
};
struct TenantAccount : FlowAccount {
  uint32_t flows = 0;
};

// Messages between daemons: receiver-side updates (Justitia §4.5) and
// receive credits (docs/scheduler.md, "Receive credits"). A fixed 32-byte
// little-endian message; docs/scheduler.md gives the wire layout.
struct PeerMessage {
  // kReceiveCredit: weights[0] names the sender's QP (the receiving QP's
  // destination QPN), weights[1] the receives posted on the receiving QP
  // since RTR (wrapping); ReceiveCredit() builds one.
  enum Type : uint8_t { kSenderHello = 1, kReceiverUpdate = 2, kReceiveCredit = 3 };
  uint8_t type = 0;
  uint8_t version = 1;
  uint16_t reserved = 0;
  uint32_t origin = 0;   // the sending daemon's own id (opaque to peers)
  // Weight sums of active tenants by class (TenantClass order): a hello
  // counts the sender's tenants towards the receiver, an update the
  // receiver's totals over every sender.
  uint32_t weights[3] = {0, 0, 0};
  uint32_t senders = 0;  // update: sending daemons counted
  uint64_t seq = 0;      // per origin, increasing

  static PeerMessage ReceiveCredit(uint32_t origin, uint32_t sender_qpn, uint32_t posted) {
    PeerMessage m;
    m.type = kReceiveCredit;
    m.origin = origin;
    m.weights[0] = sender_qpn;
    m.weights[1] = posted;
    return m;
  }
  uint32_t credit_qpn() const { return weights[0]; }
  uint32_t credit_posted() const { return weights[1]; }
};
static_assert(sizeof(PeerMessage) == 32);

// Where a policy writes what `stats` shows (control path only).
class ReportSink {
 public:
  virtual ~ReportSink() = default;
  virtual void Number(std::string_view key, double value) = 0;
  virtual void Text(std::string_view key, std::string_view value) = 0;
  // From ReportTenant: the QoS the policy applies to the tenant. `applied`
  // (QosField bits) names the fields it enforces; their values in `qos` are
  // the ones in force, which may differ from what the operator asked (a
  // guarantee the card cannot give shows what it gives). Fields not named
  // are ignored by the policy; a policy that never calls this applies none.
  virtual void EffectiveQos(const TenantQos& qos, uint32_t applied) {
    (void)qos;
    (void)applied;
  }
};

// What the stage offers a policy. Implemented by backend/scheduler.
class Mechanisms {
 public:
  virtual ~Mechanisms() = default;
  virtual void Configure(FlowId flow, const FlowControl& control) = 0;
  virtual const FlowControl& control(FlowId flow) const = 0;
  // Credit for a gated flow: pieces post while both last.
  virtual void Grant(FlowId flow, uint64_t bytes, uint32_t pieces) = 0;
  virtual uint64_t credit_bytes(FlowId flow) const = 0;
  // The flow posts nothing before t (pacing); 0 clears it.
  virtual void ReleaseAt(FlowId flow, Nanos t) = 0;
  // OnTimer at t (one timer; a later call replaces the earlier one).
  virtual void WakeAt(Nanos t) = 0;
  // A 10-byte probe to dest on the stage's own QP; false when no probe
  // path to dest exists or one is still outstanding.
  virtual bool SendProbe(DestId dest) = 0;
  // false when there is no channel to dest.
  virtual bool SendPeerMessage(DestId dest, const PeerMessage& m) = 0;
  virtual const FlowAccount& flow_account(FlowId flow) const = 0;
  virtual const TenantAccount& tenant_account(TenantId tenant) const = 0;
  // The RNIC offers cross-channel WAIT/ENABLE (interrupt_waits work; with
  // a preemption control queue, pause_on_rnic too).
  virtual bool cross_channel() const = 0;
  virtual bool rnic_pause() const { return false; }
};

// Figures of the card a policy plans for (from the RNIC model's preset in
// the bench, from flags or the device in the daemon).
struct CardProfile {
  double line_rate_bps = 100e9;
  double max_msgs_per_s = 105e6;      // the whole card
  double qp_msgs_per_s = 13e6;        // one QP (one processing unit)
  uint32_t mtu_bytes = 4096;
  uint32_t processing_units = 16;
  Nanos base_rtt_ns = 2000;           // small-message round trip, idle
};

// The meaning rules of a TenantQos against the card it runs on (the
// syntax, e.g. JSON types and signs, is the parser's): weight >= 1; each cap
// and the guarantee at most the card's line rate or message rate; the
// guarantee at most the byte cap. Returns false with *error naming the
// field (as TenantQos and the control socket spell it) at the first rule
// broken. Control path (allocates the message).
bool CheckTenantQos(const TenantQos& qos, const CardProfile& card,
                    std::string* error);

// Admission of guarantees: the min_rate_bps of every tenant on the card
// (the one being admitted included) sum to `guaranteed_bps`; they can all be
// given only while the sum stays within kGuaranteeableShare of the line
// (headroom for packet headers, ACKs and the small messages that are never
// held). false with *error saying what is left.
inline constexpr double kGuaranteeableShare = 0.9;
bool CheckGuarantees(uint64_t guaranteed_bps, const CardProfile& card, std::string* error);

enum class FlowEnd : uint8_t {
  kDestroyed,  // the QP is gone
  kError,      // the QP went to error: queued work was flushed
  kReset,      // the QP was reset: queued work was dropped
};

class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;

  // The stage binds itself once, before any event.
  void Bind(Mechanisms& mechanisms) { mech_ = &mechanisms; }
  virtual std::string_view name() const = 0;
  // Whether the stage holds a receive-consuming message while its
  // receiver advertises no receive for it (receive credits, docs/
  // scheduler.md). Native RDMA does not: its SENDs meet RNR.
  virtual bool HoldsSendsWithoutReceive() const { return false; }

  // Control events.
  virtual void OnTenantAdded(TenantId tenant, const TenantQos& qos) = 0;
  virtual void OnTenantQosChanged(TenantId tenant, const TenantQos& qos) = 0;
  virtual void OnTenantRemoved(TenantId tenant) = 0;
  virtual void OnFlowAdded(Nanos now, const FlowInfo& flow) = 0;
  virtual void OnFlowEnded(Nanos now, FlowId flow, FlowEnd how) = 0;

  // Data events.
  // A guest WR entered the stage (every WR, in per-flow order).
  virtual void OnArrival(Nanos now, const WrInfo& wr) = 0;
  // A guest WR left the stage: completed (ok) or failed/flushed. Reported
  // for unsignaled WRs too; latency is from arrival.
  virtual void OnCompleted(Nanos now, const WrInfo& wr, Nanos latency,
                           bool ok) = 0;
  // Pieces of a flow left the RNIC (their completion, or a later one's,
  // came back): what a policy that budgets the whole card's outstanding
  // work frees. Control WRs (WAITs, sentinels) are not counted; pieces
  // dropped by a flow's end are not reported (OnFlowEnded is).
  virtual void OnRetired(Nanos, FlowId, uint64_t /*bytes*/, uint32_t /*pieces*/) {}
  // A gated flow has queued work and not enough credit (once per episode).
  virtual void OnCreditNeeded(Nanos, FlowId) {}
  virtual void OnTimer(Nanos) {}
  virtual void OnProbeCompleted(Nanos, DestId, Nanos /*rtt*/) {}
  virtual void OnPeerMessage(Nanos, DestId /*from*/, const PeerMessage&) {}

  // What `stats` shows.
  virtual void Report(ReportSink&) const {}
  virtual void ReportTenant(TenantId, ReportSink&) const {}

 protected:
  Mechanisms& mech() const { return *mech_; }

 private:
  Mechanisms* mech_ = nullptr;
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_SCHEDULER_POLICY_H_
