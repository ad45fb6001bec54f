// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// PeRF, the Preemption-enabled RDMA Framework (ATC'24), as a policy of the
// daemon's scheduler stage. PeRF is a per-application library; here one
// instance sees every tenant (VM) of the host's RNIC, which is what PeRF's
// master thread approximates with shared memory.
//
// Classifier (§3.3): a tenant is a B_App when the average message size of
// one of its QPs is >= 1 KiB (the largest over its QPs); otherwise an M_App
// when the highest SQ_Len sampled every 5 ms over the last second exceeded
// Th_M_App = 5 on one of its QPs; otherwise a D_App. With more than one QP
// it is an App_multi.
//
// Selective isolation (§3.4, §4.4): nothing is isolated while a tenant has
// the card to itself (work conserving; PeRF's master triggers isolation
// only when the problematic situation arises). With others present:
//   - D_Apps and M_App_singles bypass: their flows stay at the default
//     controls, posted as soon as they arrive.
//   - LMSE (§4.1): a B_App's WRs larger than SUB_MSG_SIZE (16 KiB) go as
//     sub-WRs with 0_WAIT_NUM = SUB_MSG_SIZE / 0_WAIT_UNIT (16) interrupt
//     points between them. Small WRs of a mixed QP pass whole; the stage's
//     FIFO keeps them behind an ongoing large one, as PeRF does.
//   - MQSE (§4.2): an App_multi (B or M) has QNum_allow active QPs, the
//     others PAUSEd; QPs are activated round robin, resuming the oldest
//     paused one. QNum_allow is 1 by default; an M_App_multi gets up to
//     QNum_capa (the QPs that reach the card's message rate) less the QPs
//     the other tenants keep active, so it keeps its rate without
//     saturating the processing units.
//   - ECE (§4.3): the stage consumes the completions of its own sub-WRs
//     and control WRs; the guest sees one CQE per signaled WR.
//
// The preemption mechanism (§3.5) comes in two forms (PerfPreemption):
// PeRF's own WAIT/ENABLE where the RNIC has cross-channel operations (the
// RNIC model), and the stage's holding plus a posting window per managed
// QP on upstream rdma-core, which has no WAIT/ENABLE (docs/scheduler.md).
#include "policy/perf_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "policy/policy_options.h"

namespace vrdma::policy {
namespace {

// PeRF App. A and §3.3 defaults; every one a knob (--policy-opt).
struct PerfParams {
  uint32_t sub_msg_bytes = 16 * 1024;  // SUB_MSG_SIZE
  uint32_t zero_wait_unit = 1024;      // 0_WAIT_UNIT
  uint32_t b_app_bytes = 1024;         // average size that makes a B_App
  uint32_t m_app_sq_len = 5;           // Th_M_App
  double sample_ms = 5;                // SQ_Len sampling period
  double history_ms = 1000;            // the classifier's memory
  uint32_t qnum_allow = 1;             // default QNum_allow
  uint32_t qnum_capa = 0;              // 0: from the card
  uint32_t rotate_wrs = 64;            // MQSE quantum for small messages
  // Isolate even a tenant that has the card to itself (PeRF's evaluation
  // runs it always on; the default triggers it only when others send).
  bool always_isolate = false;
  // kStage only: sub-messages a B_App's QP may have on the RNIC at once;
  // 0: twice the card's bandwidth-delay product (the link stays busy while
  // the oldest sub-message's completion travels back), at least one.
  uint32_t window_subs = 0;
};

enum class AppType : uint8_t { kD, kM, kB };

const char* TypeName(AppType t) {
  switch (t) {
    case AppType::kB: return "B_App";
    case AppType::kM: return "M_App";
    default: return "D_App";
  }
}

class PerfPolicy final : public SchedulerPolicy {
 public:
  PerfPolicy(const CardProfile& card, const PerfParams& p, PerfPreemption how)
      : p_(p), how_(how) {
    if (p_.qnum_capa == 0) {
      // The QPs that run at the per-QP message rate without saturating the
      // card's processing (PeRF's footnote: a parameter of each RNIC).
      p_.qnum_capa = static_cast<uint32_t>(
          std::max(1.0, std::floor(card.max_msgs_per_s / card.qp_msgs_per_s)));
    }
    if (p_.window_subs == 0) {
      const double bdp = card.line_rate_bps / 8 * static_cast<double>(card.base_rtt_ns) / 1e9;
      p_.window_subs = static_cast<uint32_t>(
          std::max(1.0, std::ceil(2 * bdp / p_.sub_msg_bytes)));
    }
    sample_ns_ = static_cast<Nanos>(p_.sample_ms * 1e6);
    history_ns_ = static_cast<Nanos>(p_.history_ms * 1e6);
  }

  std::string_view name() const override {
    return how_ == PerfPreemption::kStage ? "perf" : "perf-xc";
  }

  // ---------------------------------------------------------- control --
  void OnTenantAdded(TenantId id, const TenantQos&) override { GetTenant(id); }
  void OnTenantQosChanged(TenantId, const TenantQos&) override {}
  void OnTenantRemoved(TenantId id) override {
    auto it = tenants_.find(id);
    if (it == tenants_.end()) return;
    for (FlowId f : it->second.flows) flows_[f] = Flow{};  // none should be left
    tenants_.erase(it);
  }

  void OnFlowAdded(Nanos now, const FlowInfo& info) override {
    if (info.flow >= flows_.size()) flows_.resize(size_t{info.flow} + 1);
    Tenant& t = GetTenant(info.tenant);
    Flow& f = flows_[info.flow];
    f = Flow{};
    f.live = true;
    f.tenant = &t;
    t.flows.push_back(info.flow);
    t.paused.reserve(t.flows.size());
    if (!timer_armed_) {
      timer_armed_ = true;
      mech().WakeAt(now + sample_ns_);
    }
    ApplyAll(now);
  }

  void OnFlowEnded(Nanos now, FlowId id, FlowEnd how) override {
    if (id >= flows_.size() || !flows_[id].live) return;
    if (how != FlowEnd::kDestroyed) {
      // Its queued work was flushed or dropped: the QP starts empty, and
      // an MQSE slot it held is free for a sibling.
      Flow& f = flows_[id];
      if (f.mqse_active && f.tenant->managed) Rotate(*f.tenant, id);
      return;
    }
    Tenant& t = *flows_[id].tenant;
    std::erase(t.flows, id);
    std::erase(t.paused, id);
    flows_[id] = Flow{};
    ApplyAll(now);
  }

  // ------------------------------------------------------------- data --
  void OnArrival(Nanos now, const WrInfo& wr) override {
    Flow& f = flows_[wr.flow];
    Tenant& t = *f.tenant;
    // Average message size per QP (PeRF's onloading estimate): an
    // exponentially weighted mean, seeded by the first WR.
    const uint64_t size = wr.bytes;
    f.avg_bytes = f.arrivals == 0 ? size : f.avg_bytes - f.avg_bytes / 8 + size / 8;
    ++f.arrivals;
    const bool large = f.avg_bytes >= p_.b_app_bytes;
    const bool was_present = Present(t, now);
    t.last_arrival = now;
    if (large != f.large || !was_present) {
      f.large = large;
      Reclassify(t, now);
      ApplyAll(now);
      return;
    }
    if (t.managed && !f.mqse_active) ActivateForArrival(t, wr.flow);
  }

  void OnCompleted(Nanos, const WrInfo& wr, Nanos, bool) override {
    Flow& f = flows_[wr.flow];
    if (!f.live || !f.mqse_active || !f.tenant->managed) return;
    // MQSE round robin: after its quantum the active QP yields to the
    // oldest paused QP of its tenant (one large WR, or rotate_wrs small).
    ++f.done_since_active;
    const bool quantum = wr.bytes > p_.sub_msg_bytes ||
                         f.done_since_active >= p_.rotate_wrs;
    if (quantum && !f.tenant->paused.empty()) Rotate(*f.tenant, wr.flow);
  }

  void OnTimer(Nanos now) override {
    // Sample SQ_Len of every QP (§3.3).
    bool changed = false;
    for (FlowId id = 0; id < flows_.size(); ++id) {
      Flow& f = flows_[id];
      if (!f.live) continue;
      if (mech().flow_account(id).sq_len() > p_.m_app_sq_len) {
        f.sq_over_at = now;
        f.sq_over_seen = true;
      }
    }
    for (auto& [id, t] : tenants_) {
      const bool present = Present(t, now);
      changed |= present != t.was_present;
      t.was_present = present;
      changed |= Reclassify(t, now);
    }
    if (changed) ApplyAll(now);
    mech().WakeAt(now + sample_ns_);
  }

  void Report(ReportSink& out) const override {
    out.Text("interrupts", rnic_interrupts() ? "zero-count WAIT" : "posting window");
    out.Text("pause", how_ == PerfPreemption::kCrossChannel && mech().rnic_pause()
                          ? "WAIT on the preemption control CQ"
                          : "held in the stage");
    out.Number("qnum_capa", p_.qnum_capa);
    out.Number("zero_wait_num", ZeroWaitNum());
    out.Number("sub_msg_size", p_.sub_msg_bytes);
    if (!rnic_interrupts()) out.Number("window_subs", p_.window_subs);
    out.Number("rotations", static_cast<double>(rotations_));
  }

  void ReportTenant(TenantId id, ReportSink& out) const override {
    auto it = tenants_.find(id);
    if (it == tenants_.end()) return;
    const Tenant& t = it->second;
    std::string type = TypeName(t.type);
    type += t.flows.size() > 1 ? "_multi" : "_single";
    out.Text("class", type);
    const char* isolation = !t.isolated ? "none (alone)"
                            : t.lmse && t.managed ? "LMSE+MQSE"
                            : t.lmse    ? "LMSE"
                            : t.managed ? "MQSE"
                                        : "bypass";
    out.Text("isolation", isolation);
    out.Number("qps", static_cast<double>(t.flows.size()));
    out.Number("qnum_allow", t.allow);
    uint32_t active = 0;
    for (FlowId f : t.flows) active += flows_[f].mqse_active ? 1 : 0;
    out.Number("active_qps", active);
  }

  // Tests read these.
  AppType type_of(TenantId id) const { return tenants_.at(id).type; }
  uint32_t allow_of(TenantId id) const { return tenants_.at(id).allow; }

 private:
  struct Tenant;
  struct Flow {
    bool live = false;
    bool large = false;         // average message size >= b_app_bytes
    bool sq_over_seen = false;  // a sample of SQ_Len exceeded Th_M_App
    bool mqse_active = true;    // not PAUSEd by MQSE
    Tenant* tenant = nullptr;
    uint64_t arrivals = 0;
    uint64_t avg_bytes = 0;
    Nanos sq_over_at = 0;
    uint32_t done_since_active = 0;
  };
  struct Tenant {
    std::vector<FlowId> flows;
    std::vector<FlowId> paused;  // MQSE, oldest first (capacity: flows)
    AppType type = AppType::kD;
    bool isolated = false;  // others present: PeRF's isolation is on
    bool managed = false;   // MQSE manages its QPs
    bool lmse = false;
    bool was_present = false;
    uint32_t allow = 0;     // QNum_allow in force
    Nanos last_arrival = kNever;
  };

  Tenant& GetTenant(TenantId id) { return tenants_[id]; }

  bool Present(const Tenant& t, Nanos now) const {
    return t.last_arrival != kNever && now - t.last_arrival <= history_ns_;
  }

  uint16_t ZeroWaitNum() const {
    return static_cast<uint16_t>(
        std::min<uint32_t>(UINT16_MAX, p_.sub_msg_bytes / p_.zero_wait_unit));
  }

  // The classifier; true when the type changed.
  bool Reclassify(Tenant& t, Nanos now) {
    AppType type = AppType::kD;
    for (FlowId id : t.flows) {
      const Flow& f = flows_[id];
      if (f.large) {
        type = AppType::kB;
        break;
      }
      if (f.sq_over_seen && now - f.sq_over_at <= history_ns_) type = AppType::kM;
    }
    const bool changed = type != t.type;
    t.type = type;
    return changed;
  }

  // Decides every tenant's isolation and sets every flow's controls. Runs
  // when a tenant or flow comes or goes, a class changes, or a tenant
  // starts or stops sending: rare events, never per WR.
  void ApplyAll(Nanos now) {
    uint32_t present = 0;
    for (auto& [id, t] : tenants_) present += Present(t, now) ? 1 : 0;
    // QPs the tenants outside M_App_multi keep active, for QNum_capa.
    uint32_t fixed_active = 0, m_multi = 0;
    for (auto& [id, t] : tenants_) {
      t.isolated = Present(t, now) && (present > 1 || p_.always_isolate);
      const bool multi = t.flows.size() > 1;
      t.lmse = t.isolated && t.type == AppType::kB;
      t.managed = t.isolated && multi && t.type != AppType::kD;
      t.allow = static_cast<uint32_t>(t.flows.size());
      if (t.managed && t.type == AppType::kB) t.allow = p_.qnum_allow;
      if (t.managed && t.type == AppType::kM) {
        ++m_multi;
      } else if (Present(t, now)) {
        fixed_active += t.allow;
      }
    }
    for (auto& [id, t] : tenants_) {
      if (t.managed && t.type == AppType::kM) {
        const uint32_t room =
            p_.qnum_capa > fixed_active ? (p_.qnum_capa - fixed_active) / m_multi : 0;
        t.allow = std::min<uint32_t>(static_cast<uint32_t>(t.flows.size()),
                                     std::max(p_.qnum_allow, room));
      }
      ApplyTenant(t);
    }
  }

  // PeRF's own interrupts where the RNIC has WAIT; otherwise (perf-xc on
  // an RNIC without cross-channel operations) the stage's form, never an
  // unbounded split.
  bool rnic_interrupts() const {
    return how_ == PerfPreemption::kCrossChannel && mech().cross_channel();
  }

  FlowControl ControlFor(const Tenant& t, const Flow& f) const {
    FlowControl c;
    if (t.lmse) {
      c.chunk_bytes = p_.sub_msg_bytes;
      if (rnic_interrupts()) {
        c.interrupt_waits = ZeroWaitNum();
      } else {
        c.window_bytes = uint64_t{p_.window_subs} * p_.sub_msg_bytes;
      }
    }
    if (t.managed && !f.mqse_active) {
      c.held = true;
      c.pause_on_rnic = how_ == PerfPreemption::kCrossChannel && mech().rnic_pause();
    }
    return c;
  }

  void SetControl(FlowId id) {
    const Flow& f = flows_[id];
    const FlowControl c = ControlFor(*f.tenant, f);
    if (!(mech().control(id) == c)) mech().Configure(id, c);
  }

  void ApplyTenant(Tenant& t) {
    if (!t.managed) {
      t.paused.clear();
      for (FlowId id : t.flows) flows_[id].mqse_active = true;
    } else {
      // Too many active: the oldest active ones stay, the rest pause (in
      // flow order, so the round robin starts with the oldest); too few:
      // the oldest paused ones resume.
      uint32_t active = 0;
      for (FlowId id : t.flows) {
        Flow& f = flows_[id];
        if (!f.mqse_active) continue;
        if (active < t.allow) {
          ++active;
          continue;
        }
        f.mqse_active = false;
        t.paused.push_back(id);
      }
      while (active < t.allow && !t.paused.empty()) {
        flows_[t.paused.front()].mqse_active = true;
        flows_[t.paused.front()].done_since_active = 0;
        t.paused.erase(t.paused.begin());
        ++active;
      }
    }
    for (FlowId id : t.flows) SetControl(id);
  }

  // MQSE round robin: `from` is paused (it becomes the newest paused QP)
  // and the oldest paused QP resumes. No allocation: paused has capacity
  // for every flow of the tenant.
  void Rotate(Tenant& t, FlowId from) {
    if (t.paused.empty()) return;
    const FlowId next = t.paused.front();
    std::copy(t.paused.begin() + 1, t.paused.end(), t.paused.begin());
    t.paused.back() = from;
    Flow& f = flows_[from];
    f.mqse_active = false;
    Flow& n = flows_[next];
    n.mqse_active = true;
    n.done_since_active = 0;
    ++rotations_;
    SetControl(from);
    SetControl(next);
  }

  // Work arrived on a paused QP: an active sibling with nothing queued or
  // outstanding gives it its slot now (work conserving).
  void ActivateForArrival(Tenant& t, FlowId id) {
    if (how_ == PerfPreemption::kCrossChannel && mech().rnic_pause()) {
      return;  // resumes go in pause order
    }
    for (FlowId a : t.flows) {
      const Flow& f = flows_[a];
      if (!f.mqse_active) continue;
      const FlowAccount& acc = mech().flow_account(a);
      if (acc.queued_wrs == 0 && acc.outstanding_pieces == 0) {
        // Put `id` at the head of the paused queue, then rotate `a` out.
        auto pos = std::find(t.paused.begin(), t.paused.end(), id);
        if (pos == t.paused.end()) return;
        std::rotate(t.paused.begin(), pos, pos + 1);
        Rotate(t, a);
        return;
      }
    }
  }

  PerfParams p_;
  PerfPreemption how_;
  Nanos sample_ns_ = 0;
  Nanos history_ns_ = 0;
  bool timer_armed_ = false;
  uint64_t rotations_ = 0;
  std::vector<Flow> flows_;  // by FlowId
  std::unordered_map<TenantId, Tenant> tenants_;
};

}  // namespace

std::unique_ptr<SchedulerPolicy> MakePerfPolicy(
    const CardProfile& card, const std::vector<std::string>& options,
    PerfPreemption how, std::string* error) {
  PerfParams p;
  const Knob knobs[] = {
      {"sub_msg_size", &p.sub_msg_bytes, 1024, 1u << 30},
      {"zero_wait_unit", &p.zero_wait_unit, 1, 1u << 30},
      {"b_app_bytes", &p.b_app_bytes, 1, 1u << 30},
      {"th_m_app", &p.m_app_sq_len, 0, 1u << 20},
      {"sample_ms", &p.sample_ms, 0.001, 60000},
      {"history_ms", &p.history_ms, 0.001, 3.6e6},
      {"qnum_allow", &p.qnum_allow, 1, 1u << 16},
      {"qnum_capa", &p.qnum_capa, 0, 1u << 16},
      {"rotate_wrs", &p.rotate_wrs, 1, 1u << 20},
      {"window_subs", &p.window_subs, 0, 1024},
      {"always_isolate", &p.always_isolate, 0, 1},
  };
  if (!ApplyKnobs(options, knobs, error)) {
    *error = "perf: " + *error;
    return nullptr;
  }
  return std::make_unique<PerfPolicy>(card, p, how);
}

}  // namespace vrdma::policy
