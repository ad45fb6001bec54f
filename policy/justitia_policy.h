// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Justitia (NSDI'22, §4-§5) on the scheduler stage. See justitia_policy.cc.
#ifndef VRDMA_POLICY_JUSTITIA_POLICY_H_
#define VRDMA_POLICY_JUSTITIA_POLICY_H_

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/policy_options.h"
#include "policy/scheduler_policy.h"
#include "policy/tail_estimator.h"

namespace vrdma::policy {

// nullptr (with *error) when a knob is unknown or out of range.
std::unique_ptr<SchedulerPolicy> MakeJustitiaPolicy(
    const CardProfile& card, const std::vector<std::string>& options,
    uint32_t host_id, std::string* error);

// Knobs (--policy-opt key=value). Defaults are the paper's (§4.3, §5.2)
// or, where it gives none, the artifact's (SymbioticLab/Justitia,
// rdma_pacer/pacer.{c,h} and monitor.c).
struct JustitiaConfig {
  uint32_t ref_period_us = 20;         // RefPeriod (§4.3.2)
  uint32_t ref_count = 10000;          // RefCount: the sliding window
  // Target_99 when no latency tenant's operator set latency_target_ns:
  // target_us if > 0, else the latency oracle (the lowest reference-flow
  // round trip seen towards that receiver, i.e. its idle RTT; the card's
  // base RTT before any sample) times target_factor.
  double target_us = 0;
  double target_factor = 1.5;
  uint32_t token_bytes = 1000000;      // Token_Bytes without latency tenants
  uint32_t token_bytes_latency = 5000; // the dictionary's entry (§5.2)
  uint32_t token_ops = 0;              // Token_Ops; 0: derived (§4.3.4)
  double step_mbps = 8;                // additive increase per RefPeriod
                                       // (artifact: +1 MB/s per update)
  uint32_t burst_tokens = 5;           // bucket depth (artifact MAX_TOKEN)
  bool l_as_one = true;                // count latency weight as L = 1
  uint32_t max_peers = 64;             // receiver-side sender table
};

class JustitiaPolicy final : public SchedulerPolicy {
 public:
  JustitiaPolicy(const CardProfile& card, uint32_t host_id);

  // Applies "key=value" knobs and sizes the policy's tables; false (with
  // *error) when a knob is unknown or out of range.
  [[nodiscard]] bool Init(const std::vector<std::string>& options,
                          std::string* error);

  std::string_view name() const override { return "justitia"; }
  void OnTenantAdded(TenantId tenant, const TenantQos& qos) override;
  void OnTenantQosChanged(TenantId tenant, const TenantQos& qos) override;
  void OnTenantRemoved(TenantId tenant) override;
  void OnFlowAdded(Nanos now, const FlowInfo& flow) override;
  void OnFlowEnded(Nanos now, FlowId flow, FlowEnd how) override;
  void OnArrival(Nanos, const WrInfo&) override {}
  void OnCompleted(Nanos, const WrInfo&, Nanos, bool) override {}
  void OnCreditNeeded(Nanos now, FlowId flow) override;
  void OnTimer(Nanos now) override;
  void OnProbeCompleted(Nanos now, DestId dest, Nanos rtt) override;
  void OnPeerMessage(Nanos now, DestId from, const PeerMessage& m) override;
  void Report(ReportSink& sink) const override;
  void ReportTenant(TenantId tenant, ReportSink& sink) const override;

  // What the tests and Report read.
  [[nodiscard]] const JustitiaConfig& config() const { return config_; }
  [[nodiscard]] double safe_util_bps() const { return safe_util_bps_; }
  [[nodiscard]] double r_min_bps() const { return r_min_bps_; }
  [[nodiscard]] uint32_t token_bytes() const { return token_bytes_; }
  [[nodiscard]] uint32_t token_ops() const { return token_ops_; }
  [[nodiscard]] double tau_ns() const { return tau_ns_; }
  [[nodiscard]] uint64_t tokens_generated() const { return tokens_given_; }
  [[nodiscard]] uint64_t tokens_received(TenantId tenant) const {
    auto it = tenant_index_.find(tenant);
    return it == tenant_index_.end() ? 0 : tenants_[it->second].tokens;
  }
  // Latency-sensitive weight seen (local + remote receivers' updates).
  [[nodiscard]] uint32_t latency_weight() const { return w_lat_local_ + w_lat_remote_; }
  [[nodiscard]] bool reference_flow(DestId dest) const {
    const int32_t i = FindDest(dest);
    return i != kNone && dests_[i].ref;
  }
  [[nodiscard]] Nanos estimated_99_ns(DestId dest) const {
    const int32_t i = FindDest(dest);
    return i == kNone ? 0 : dests_[i].rtt.Quantile(0.99);
  }
  [[nodiscard]] Nanos target_99_ns(DestId dest) const {
    const int32_t i = FindDest(dest);
    return i == kNone ? Target99(Dest{}) : Target99(dests_[i]);
  }

 private:
  static constexpr int32_t kNone = -1;
  static constexpr int kClasses = 3;

  struct Tenant {
    TenantId id = 0;
    bool live = false;
    TenantQos qos;
    uint32_t flows = 0;            // live flows
    int32_t wait_head = kNone;     // flows waiting for a token (FIFO)
    int32_t wait_tail = kNone;
    int32_t ring_next = kNone;     // ring of tenants with waiting flows
    int32_t ring_prev = kNone;
    bool in_ring = false;
    uint32_t round_left = 0;       // tokens left in its weighted turn
    uint64_t tokens = 0;           // tokens received
  };
  struct Flow {
    bool live = false;
    uint32_t tenant = 0;           // index into tenants_
    uint32_t dest = 0;             // index into dests_
    bool waiting = false;
    int32_t wait_next = kNone;
    int32_t wait_prev = kNone;
  };
  // A receiver this host sends to: its reference flow and what it said.
  struct Dest {
    DestId id = 0;
    std::array<uint32_t, kClasses> local{};  // our weights towards it
    std::array<uint32_t, kClasses> hello{};  // what we last told it
    bool hello_sent = false;
    std::array<uint32_t, kClasses> totals{}; // its last update
    bool has_update = false;
    uint32_t update_origin = 0;
    uint64_t update_seq = 0;
    bool ref = false;                        // reference flow running
    Nanos min_rtt = kNever;                  // the latency oracle
    TailEstimator rtt;                       // last RefCount round trips
  };
  // A sender that told us (as its receiver) its weights.
  struct Peer {
    bool used = false;
    uint32_t origin = 0;
    DestId from = 0;
    uint64_t seq = 0;
    std::array<uint32_t, kClasses> weights{};
  };

  uint32_t TenantIndex(TenantId tenant);  // adds a default one (control)
  uint32_t DestIndex(DestId dest);        // adds one (control)
  [[nodiscard]] int32_t FindDest(DestId dest) const;
  [[nodiscard]] TenantClass ClassOf(const Tenant& t) const { return t.qos.app_class; }
  [[nodiscard]] uint32_t WeightOf(const Tenant& t) const {
    return t.qos.weight == 0 ? 1 : t.qos.weight;
  }
  [[nodiscard]] FlowControl ControlFor(TenantClass c) const;

  // Control path: recount local weights, tell receivers, reshape.
  void Recount(Nanos now);
  // Data path too (no allocation): R_min, L, token size, reference flows.
  void Reevaluate(Nanos now);
  void SetTokenBytes(uint32_t bytes);
  void SetSafeUtil(double bps);
  void SendHellos();

  // Token bucket and weighted round robin (§4.3.4).
  void Accrue(Nanos now);
  void Distribute();
  void GiveToken();
  void Enqueue(FlowId flow);
  void Dequeue(FlowId flow);
  void RingInsert(uint32_t t);
  void RingRemove(uint32_t t);
  void ArmTimer();
  // A flow waits for a token (the cursor may be a tenant keeping its turn
  // with none waiting; any other tenant in the ring has one).
  [[nodiscard]] bool anyone_waiting() const {
    if (ring_cursor_ == kNone) return false;
    const Tenant& t = tenants_[ring_cursor_];
    return t.wait_head != kNone || t.ring_next != ring_cursor_;
  }

  // Reference flows and Pseudocode 1.
  void RefTick();
  [[nodiscard]] Nanos Target99(const Dest& d) const;

  CardProfile card_;
  uint32_t host_id_;
  JustitiaConfig config_;
  std::vector<Tenant> tenants_;
  std::unordered_map<TenantId, uint32_t> tenant_index_;
  std::vector<Flow> flows_;                 // by FlowId
  std::vector<Dest> dests_;
  std::vector<Peer> peers_;                 // max_peers, sized in Init

  // Weights of local tenants with live flows, by class.
  uint32_t w_hungry_local_ = 0;             // bandwidth + throughput
  uint32_t w_lat_local_ = 0;
  uint32_t w_hungry_remote_ = 0;            // other senders at our receivers
  uint32_t w_lat_remote_ = 0;
  Nanos operator_target_ns_ = 0;            // smallest set latency target

  double safe_util_bps_;
  double r_min_bps_;
  uint32_t token_bytes_;
  uint32_t token_ops_ = 1;
  double tau_ns_ = 0;

  double bucket_ = 1;                       // tokens (artifact starts at 1)
  Nanos bucket_at_ = 0;                     // time bucket_ is valid for
  int32_t ring_cursor_ = kNone;             // tenant whose turn it is
  uint64_t tokens_given_ = 0;

  uint32_t refs_ = 0;                       // reference flows running
  Nanos next_ref_at_ = kNever;
  Nanos armed_at_ = kNever;
  Nanos last_now_ = 0;
  uint64_t seq_ = 0;                        // our peer messages
  uint64_t aimd_decreases_ = 0;
  uint64_t aimd_increases_ = 0;
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_JUSTITIA_POLICY_H_
