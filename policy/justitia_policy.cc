// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Justitia (Zhang et al., NSDI'22) as a scheduler-stage policy.
//
//   §4.2   Tenants are latency-, throughput- or bandwidth-sensitive
//          (TenantQos.app_class, bandwidth by default). Latency tenants
//          bypass: their flows keep the default FlowControl.
//   §4.3.1 R_min = (ΣwB+ΣwT) / (ΣwB+ΣwT+ΣwL) × MaxRate (hose model), with
//          the latency weight counted as L = 1 by default (l_as_one), and
//          the other senders' weights at our receivers (§4.5) in the sum.
//   §4.3.2 A reference flow (10-byte probes, Mechanisms::SendProbe) towards
//          every receiver a latency tenant (ours, or another sender's, as
//          its update says) talks to, every RefPeriod; Estimated_99 over
//          the last RefCount round trips (policy/tail_estimator.h).
//   §4.3.3 SafeUtil by Pseudocode 1's AIMD, every RefPeriod.
//   §4.3.4 Multi-resource tokens (Token_Bytes, Token_Ops), one per
//          τ = Token_Bytes / SafeUtil, to backlogged bandwidth/throughput
//          tenants in weighted round robin.
//   §4.4   Shapers: bandwidth flows are gated and split into Token_Bytes
//          chunks; throughput flows are gated, not split (batch pacing).
//   §4.5   Receiver-side updates over the 32-byte PeerMessage.
//   §5.2   Token_Bytes: 1 MB without latency tenants, the dictionary's
//          5 KB (the artifact's 5000 bytes) with them.
//
// The generator is a token bucket evaluated lazily (when a flow needs
// credit and on the policy timer) rather than the artifact's spinning
// thread; the timer is armed for the next token only while someone waits.
// Units: rates in bits/s (SafeUtil's additive step: step_mbps per
// RefPeriod; the artifact adds 1 MB/s per update), times in ns.
#include "policy/justitia_policy.h"

#include <algorithm>
#include <cmath>

namespace vrdma::policy {

namespace {

constexpr int kB = static_cast<int>(TenantClass::kBandwidth);
constexpr int kT = static_cast<int>(TenantClass::kThroughput);
constexpr int kL = static_cast<int>(TenantClass::kLatency);

std::array<Knob, 11> KnobsOf(JustitiaConfig& c) {
  return {{
      {"ref_period_us", &c.ref_period_us, 1, 100000},
      {"ref_count", &c.ref_count, 1, 1000000},
      {"target_us", &c.target_us, 0, 1e6},
      {"target_factor", &c.target_factor, 1, 1000},
      {"token_bytes", &c.token_bytes, 64, 1u << 30},
      {"token_bytes_latency", &c.token_bytes_latency, 64, 1u << 30},
      {"token_ops", &c.token_ops, 0, 1e8},
      {"step_mbps", &c.step_mbps, 0, 1e6},
      {"burst_tokens", &c.burst_tokens, 1, 1000000},
      {"l_as_one", &c.l_as_one, 0, 1},
      {"max_peers", &c.max_peers, 1, 65536},
  }};
}

constexpr const char* kClassNames[] = {"bandwidth", "throughput", "latency"};

}  // namespace

JustitiaPolicy::JustitiaPolicy(const CardProfile& card, uint32_t host_id)
    : card_(card),
      host_id_(host_id),
      safe_util_bps_(card.line_rate_bps),
      r_min_bps_(card.line_rate_bps),
      token_bytes_(config_.token_bytes) {}

bool JustitiaPolicy::Init(const std::vector<std::string>& options,
                          std::string* error) {
  if (!ApplyKnobs(options, KnobsOf(config_), error)) return false;
  peers_.assign(config_.max_peers, Peer{});
  token_bytes_ = 0;  // SetTokenBytes derives Token_Ops and τ
  SetTokenBytes(config_.token_bytes);
  SetSafeUtil(card_.line_rate_bps);
  return true;
}

// ------------------------------------------------------------ control --

uint32_t JustitiaPolicy::TenantIndex(TenantId tenant) {
  auto it = tenant_index_.find(tenant);
  if (it != tenant_index_.end()) return it->second;
  const uint32_t i = static_cast<uint32_t>(tenants_.size());
  tenants_.push_back(Tenant{});
  tenants_.back().id = tenant;
  tenants_.back().live = true;
  tenant_index_[tenant] = i;
  return i;
}

int32_t JustitiaPolicy::FindDest(DestId dest) const {
  for (size_t i = 0; i < dests_.size(); ++i) {
    if (dests_[i].id == dest) return static_cast<int32_t>(i);
  }
  return kNone;
}

uint32_t JustitiaPolicy::DestIndex(DestId dest) {
  const int32_t i = FindDest(dest);
  if (i != kNone) return static_cast<uint32_t>(i);
  // Every receiver gets its reference-flow window now: a latency tenant
  // (ours or, through an update, another sender's) may appear on the data
  // path, where nothing may allocate.
  dests_.emplace_back();
  dests_.back().id = dest;
  dests_.back().rtt.Reset(config_.ref_count);
  return static_cast<uint32_t>(dests_.size() - 1);
}

FlowControl JustitiaPolicy::ControlFor(TenantClass c) const {
  FlowControl fc;
  if (c == TenantClass::kLatency) return fc;  // bypass (§4.2)
  fc.gated = true;
  if (c == TenantClass::kBandwidth) fc.chunk_bytes = token_bytes_;
  return fc;
}

void JustitiaPolicy::OnTenantAdded(TenantId tenant, const TenantQos& qos) {
  Tenant& t = tenants_[TenantIndex(tenant)];
  t.live = true;
  t.qos = qos;
  Recount(last_now_);
}

void JustitiaPolicy::OnTenantQosChanged(TenantId tenant, const TenantQos& qos) {
  const uint32_t ti = TenantIndex(tenant);
  const TenantClass before = ClassOf(tenants_[ti]);
  tenants_[ti].qos = qos;
  if (ClassOf(tenants_[ti]) != before) {
    const FlowControl fc = ControlFor(qos.app_class);
    for (size_t f = 0; f < flows_.size(); ++f) {
      if (!flows_[f].live || flows_[f].tenant != ti) continue;
      if (qos.app_class == TenantClass::kLatency) Dequeue(static_cast<FlowId>(f));
      mech().Configure(static_cast<FlowId>(f), fc);
    }
  }
  Recount(last_now_);
}

void JustitiaPolicy::OnTenantRemoved(TenantId tenant) {
  auto it = tenant_index_.find(tenant);
  if (it == tenant_index_.end()) return;
  for (size_t f = 0; f < flows_.size(); ++f) {
    if (flows_[f].live && flows_[f].tenant == it->second) Dequeue(static_cast<FlowId>(f));
  }
  tenants_[it->second].live = false;
  Recount(last_now_);
}

void JustitiaPolicy::OnFlowAdded(Nanos now, const FlowInfo& info) {
  last_now_ = std::max(last_now_, now);
  const uint32_t ti = TenantIndex(info.tenant);
  const uint32_t di = DestIndex(info.dest);
  if (info.flow >= flows_.size()) flows_.resize(size_t{info.flow} + 1);
  Flow& f = flows_[info.flow];
  if (f.live) Dequeue(info.flow);  // a reused id
  f = Flow{};
  f.live = true;
  f.tenant = ti;
  f.dest = di;
  ++tenants_[ti].flows;
  const TenantClass c = ClassOf(tenants_[ti]);
  if (c != TenantClass::kLatency) mech().Configure(info.flow, ControlFor(c));
  Recount(now);
}

void JustitiaPolicy::OnFlowEnded(Nanos now, FlowId flow, FlowEnd how) {
  last_now_ = std::max(last_now_, now);
  if (flow >= flows_.size() || !flows_[flow].live) return;
  Dequeue(flow);
  if (how == FlowEnd::kDestroyed) {
    Flow& f = flows_[flow];
    f.live = false;
    --tenants_[f.tenant].flows;
    Recount(now);
    return;
  }
  // Error or reset: the QP stays; it asks for credit again when it has
  // work (the stage starts a new episode).
  ArmTimer();
}

void JustitiaPolicy::Recount(Nanos now) {
  w_hungry_local_ = 0;
  w_lat_local_ = 0;
  operator_target_ns_ = 0;
  for (Dest& d : dests_) d.local.fill(0);
  // Which tenant sends to which receiver (tenants x receivers).
  std::vector<uint8_t> sends(tenants_.size() * dests_.size(), 0);
  for (const Flow& f : flows_) {
    if (f.live) sends[size_t{f.tenant} * dests_.size() + f.dest] = 1;
  }
  for (size_t ti = 0; ti < tenants_.size(); ++ti) {
    const Tenant& t = tenants_[ti];
    if (!t.live || t.flows == 0) continue;
    const int c = static_cast<int>(ClassOf(t));
    const uint32_t w = WeightOf(t);
    if (c == kL) {
      w_lat_local_ += w;
      if (t.qos.latency_target_ns > 0) {
        operator_target_ns_ = operator_target_ns_ == 0
                                  ? t.qos.latency_target_ns
                                  : std::min(operator_target_ns_, t.qos.latency_target_ns);
      }
    } else {
      w_hungry_local_ += w;
    }
    for (size_t di = 0; di < dests_.size(); ++di) {
      if (sends[ti * dests_.size() + di]) dests_[di].local[c] += w;
    }
  }
  SendHellos();
  Reevaluate(now);
}

void JustitiaPolicy::SendHellos() {
  for (Dest& d : dests_) {
    if (d.hello_sent && d.hello == d.local) continue;
    d.hello = d.local;
    d.hello_sent = true;
    PeerMessage m;
    m.type = PeerMessage::kSenderHello;
    m.origin = host_id_;
    for (int c = 0; c < kClasses; ++c) m.weights[c] = d.local[c];
    m.seq = ++seq_;
    (void)mech().SendPeerMessage(d.id, m);
  }
}

// ---------------------------------------------- shares, token size, refs --

void JustitiaPolicy::Reevaluate(Nanos now) {
  w_hungry_remote_ = 0;
  w_lat_remote_ = 0;
  for (const Dest& d : dests_) {
    if (!d.has_update) continue;
    // The receiver's totals include what we told it.
    const auto others = [&d](int c) {
      return d.totals[c] > d.hello[c] ? d.totals[c] - d.hello[c] : 0u;
    };
    w_hungry_remote_ += others(kB) + others(kT);
    w_lat_remote_ += others(kL);
  }
  const uint32_t lat = latency_weight();
  const double l_term = config_.l_as_one ? (lat > 0 ? 1.0 : 0.0) : lat;
  const double line = card_.line_rate_bps;
  r_min_bps_ = w_hungry_local_ == 0
                   ? line
                   : line * w_hungry_local_ /
                         (w_hungry_local_ + w_hungry_remote_ + l_term);
  SetTokenBytes(lat > 0 ? config_.token_bytes_latency : config_.token_bytes);
  // Pseudocode 1, line 2: no latency tenant, no limit; SafeUtil never
  // falls below R_min.
  SetSafeUtil(lat == 0 ? line : std::max(safe_util_bps_, r_min_bps_));
  // A reference flow to every receiver a latency tenant talks to.
  for (Dest& d : dests_) {
    const bool want = d.local[kL] > 0 || (d.has_update && d.totals[kL] > d.hello[kL]);
    if (want == d.ref) continue;
    d.ref = want;
    if (want) {
      ++refs_;
      d.rtt.Clear();  // a new reference flow: no old samples
    } else {
      --refs_;
    }
  }
  if (refs_ == 0) {
    next_ref_at_ = kNever;
  } else if (next_ref_at_ == kNever) {
    next_ref_at_ = now;  // probe at once
  }
  ArmTimer();
}

void JustitiaPolicy::SetTokenBytes(uint32_t bytes) {
  if (bytes == token_bytes_) return;
  Accrue(last_now_);
  token_bytes_ = bytes;
  // §4.3.4: Token_Ops is what the card's message rate does in the time a
  // token's bytes take at line rate (1 MB, 48 Gbps, 30 Mops: 5000 ops).
  const double secs = bytes * 8.0 / card_.line_rate_bps;
  token_ops_ = config_.token_ops != 0
                   ? config_.token_ops
                   : static_cast<uint32_t>(std::max(1.0, std::round(card_.max_msgs_per_s * secs)));
  bucket_ = std::min(bucket_, 1.0);  // accrued tokens were of the old size
  tau_ns_ = token_bytes_ * 8e9 / safe_util_bps_;
  const FlowControl fc = ControlFor(TenantClass::kBandwidth);
  for (size_t f = 0; f < flows_.size(); ++f) {
    if (flows_[f].live && ClassOf(tenants_[flows_[f].tenant]) == TenantClass::kBandwidth) {
      mech().Configure(static_cast<FlowId>(f), fc);
    }
  }
}

void JustitiaPolicy::SetSafeUtil(double bps) {
  Accrue(last_now_);  // what accrued so far, at the old rate
  safe_util_bps_ = std::clamp(bps, 1e6, card_.line_rate_bps);
  tau_ns_ = token_bytes_ * 8e9 / safe_util_bps_;  // Pseudocode 1, line 11
}

// ------------------------------------------------------------- tokens --

void JustitiaPolicy::Accrue(Nanos now) {
  if (now <= bucket_at_) return;
  if (tau_ns_ > 0) {
    bucket_ = std::min<double>(config_.burst_tokens,
                               bucket_ + static_cast<double>(now - bucket_at_) / tau_ns_);
  }
  bucket_at_ = now;
}

void JustitiaPolicy::Distribute() {
  while (bucket_ >= 1.0 && anyone_waiting()) {
    GiveToken();
    bucket_ -= 1.0;
  }
}

void JustitiaPolicy::GiveToken() {
  // A tenant whose turn is not over stays the cursor between its flow's
  // grant and its next request; if it has not asked again by the next
  // token, its turn lapses.
  while (ring_cursor_ != kNone && tenants_[ring_cursor_].wait_head == kNone) {
    RingRemove(static_cast<uint32_t>(ring_cursor_));
  }
  if (ring_cursor_ == kNone) return;
  const uint32_t ti = static_cast<uint32_t>(ring_cursor_);
  Tenant& t = tenants_[ti];
  const FlowId flow = static_cast<FlowId>(t.wait_head);
  ++t.tokens;
  ++tokens_given_;
  if (t.round_left > 0) --t.round_left;
  Dequeue(flow);  // round robin among the tenant's flows
  if (t.in_ring && ring_cursor_ == static_cast<int32_t>(ti) && t.round_left == 0) {
    ring_cursor_ = t.ring_next;  // its weight's worth this round: next
    Tenant& next = tenants_[ring_cursor_];
    next.round_left = WeightOf(next);
  }
  // A multi-resource token: its bytes (one chunk of a bandwidth flow) and
  // its operations (a throughput flow's batch), whichever runs out first.
  mech().Grant(flow, token_bytes_, token_ops_);
}

void JustitiaPolicy::Enqueue(FlowId flow) {
  Flow& f = flows_[flow];
  if (f.waiting) return;
  Tenant& t = tenants_[f.tenant];
  f.waiting = true;
  f.wait_next = kNone;
  f.wait_prev = t.wait_tail;
  if (t.wait_tail != kNone) {
    flows_[t.wait_tail].wait_next = static_cast<int32_t>(flow);
  } else {
    t.wait_head = static_cast<int32_t>(flow);
  }
  t.wait_tail = static_cast<int32_t>(flow);
  if (!t.in_ring) RingInsert(f.tenant);
}

void JustitiaPolicy::Dequeue(FlowId flow) {
  Flow& f = flows_[flow];
  if (!f.waiting) return;
  Tenant& t = tenants_[f.tenant];
  if (f.wait_prev != kNone) {
    flows_[f.wait_prev].wait_next = f.wait_next;
  } else {
    t.wait_head = f.wait_next;
  }
  if (f.wait_next != kNone) {
    flows_[f.wait_next].wait_prev = f.wait_prev;
  } else {
    t.wait_tail = f.wait_prev;
  }
  f.waiting = false;
  f.wait_next = f.wait_prev = kNone;
  if (t.wait_head != kNone || !t.in_ring) return;
  // The cursor keeps the rest of its turn (GiveToken drops it if it lapses).
  if (ring_cursor_ != static_cast<int32_t>(f.tenant) || t.round_left == 0) {
    RingRemove(f.tenant);
  }
}

void JustitiaPolicy::RingInsert(uint32_t ti) {
  Tenant& t = tenants_[ti];
  t.in_ring = true;
  if (ring_cursor_ == kNone) {
    t.ring_next = t.ring_prev = static_cast<int32_t>(ti);
    ring_cursor_ = static_cast<int32_t>(ti);
    t.round_left = WeightOf(t);
    return;
  }
  // At the end of the current round: just before the cursor.
  Tenant& cur = tenants_[ring_cursor_];
  const int32_t prev = cur.ring_prev;
  t.ring_next = ring_cursor_;
  t.ring_prev = prev;
  tenants_[prev].ring_next = static_cast<int32_t>(ti);
  cur.ring_prev = static_cast<int32_t>(ti);
}

void JustitiaPolicy::RingRemove(uint32_t ti) {
  Tenant& t = tenants_[ti];
  t.in_ring = false;
  if (t.ring_next == static_cast<int32_t>(ti)) {
    ring_cursor_ = kNone;
  } else {
    tenants_[t.ring_prev].ring_next = t.ring_next;
    tenants_[t.ring_next].ring_prev = t.ring_prev;
    if (ring_cursor_ == static_cast<int32_t>(ti)) {
      ring_cursor_ = t.ring_next;
      tenants_[ring_cursor_].round_left = WeightOf(tenants_[ring_cursor_]);
    }
  }
  t.ring_next = t.ring_prev = kNone;
}

void JustitiaPolicy::ArmTimer() {
  Nanos want = refs_ > 0 ? next_ref_at_ : kNever;
  if (anyone_waiting()) {
    // The next whole token (bucket_ < 1 after Distribute).
    const double gap = std::max(0.0, 1.0 - bucket_) * tau_ns_;
    want = std::min(want, bucket_at_ + static_cast<Nanos>(std::ceil(gap)));
  }
  if (want == kNever || want >= armed_at_) return;  // an earlier one is armed
  armed_at_ = want;
  mech().WakeAt(armed_at_);
}

void JustitiaPolicy::OnCreditNeeded(Nanos now, FlowId flow) {
  last_now_ = std::max(last_now_, now);
  if (flow >= flows_.size() || !flows_[flow].live) return;
  if (ClassOf(tenants_[flows_[flow].tenant]) == TenantClass::kLatency) return;
  Enqueue(flow);
  Accrue(now);
  Distribute();
  ArmTimer();
}

void JustitiaPolicy::OnTimer(Nanos now) {
  last_now_ = std::max(last_now_, now);
  armed_at_ = kNever;
  if (refs_ > 0 && now >= next_ref_at_) {
    RefTick();
    next_ref_at_ += Nanos{config_.ref_period_us} * 1000;
    if (next_ref_at_ <= now) next_ref_at_ = now + Nanos{config_.ref_period_us} * 1000;
  }
  Accrue(now);
  Distribute();
  ArmTimer();
}

// ---------------------------------------------------- reference flows --

Nanos JustitiaPolicy::Target99(const Dest& d) const {
  if (operator_target_ns_ > 0) return operator_target_ns_;
  if (config_.target_us > 0) return static_cast<Nanos>(config_.target_us * 1e3);
  // The latency oracle (§4.3.3): the reference flow's round trip with no
  // background, i.e. the lowest one seen towards this receiver.
  const Nanos oracle = d.min_rtt != kNever ? d.min_rtt : card_.base_rtt_ns;
  return static_cast<Nanos>(std::ceil(oracle * config_.target_factor));
}

void JustitiaPolicy::RefTick() {
  // Pseudocode 1, on every RefPeriod.
  if (latency_weight() == 0) {
    SetSafeUtil(card_.line_rate_bps);
  } else {
    bool measured = false;
    bool over = false;
    for (const Dest& d : dests_) {
      if (!d.ref || d.rtt.count() == 0) continue;
      measured = true;
      if (d.rtt.Quantile(0.99) > Target99(d)) over = true;
    }
    if (over) {
      SetSafeUtil(std::max(safe_util_bps_ / 2, r_min_bps_));
      ++aimd_decreases_;
    } else if (measured) {
      SetSafeUtil(safe_util_bps_ + config_.step_mbps * 1e6);
      ++aimd_increases_;
    }
  }
  for (const Dest& d : dests_) {
    if (d.ref) (void)mech().SendProbe(d.id);  // false: one still out
  }
}

void JustitiaPolicy::OnProbeCompleted(Nanos now, DestId dest, Nanos rtt) {
  last_now_ = std::max(last_now_, now);
  const int32_t i = FindDest(dest);
  if (i == kNone) return;
  Dest& d = dests_[i];
  d.rtt.Add(rtt);
  d.min_rtt = std::min(d.min_rtt, rtt);
}

// ------------------------------------------- receiver-side updates --

void JustitiaPolicy::OnPeerMessage(Nanos now, DestId from, const PeerMessage& m) {
  last_now_ = std::max(last_now_, now);
  if (m.version != 1) return;
  if (m.type == PeerMessage::kSenderHello) {
    // We are the receiver: remember this sender's weights, then tell every
    // sender we know the totals.
    Peer* slot = nullptr;
    for (Peer& p : peers_) {
      if (p.used && p.origin == m.origin) {
        slot = &p;
        break;
      }
      if (!p.used && slot == nullptr) slot = &p;
    }
    if (slot == nullptr) return;  // table full: ignored
    if (slot->used && m.seq <= slot->seq) return;  // stale
    slot->used = true;
    slot->origin = m.origin;
    slot->from = from;
    slot->seq = m.seq;
    for (int c = 0; c < kClasses; ++c) slot->weights[c] = m.weights[c];
    PeerMessage u;
    u.type = PeerMessage::kReceiverUpdate;
    u.origin = host_id_;
    for (const Peer& p : peers_) {
      if (!p.used) continue;
      bool any = false;
      for (int c = 0; c < kClasses; ++c) {
        u.weights[c] += p.weights[c];
        any = any || p.weights[c] > 0;
      }
      if (any) ++u.senders;
    }
    u.seq = ++seq_;
    for (const Peer& p : peers_) {
      if (p.used) (void)mech().SendPeerMessage(p.from, u);
    }
    return;
  }
  if (m.type != PeerMessage::kReceiverUpdate) return;
  // We are a sender: the receiver's totals over all its senders.
  const int32_t i = FindDest(from);
  if (i == kNone) return;
  Dest& d = dests_[i];
  if (d.has_update && d.update_origin == m.origin && m.seq <= d.update_seq) return;
  d.has_update = true;
  d.update_origin = m.origin;
  d.update_seq = m.seq;
  for (int c = 0; c < kClasses; ++c) d.totals[c] = m.weights[c];
  Reevaluate(now);
}

// ------------------------------------------------------------ reports --

void JustitiaPolicy::Report(ReportSink& sink) const {
  sink.Number("safe_util_gbps", safe_util_bps_ / 1e9);
  sink.Number("r_min_gbps", r_min_bps_ / 1e9);
  Nanos est = 0;
  Nanos target = 0;
  for (const Dest& d : dests_) {
    if (!d.ref) continue;
    est = std::max<Nanos>(est, d.rtt.Quantile(0.99));
    const Nanos t = Target99(d);
    target = target == 0 ? t : std::min(target, t);
  }
  sink.Number("estimated_99_us", est / 1e3);
  sink.Number("target_99_us", target / 1e3);
  sink.Number("token_bytes", token_bytes_);
  sink.Number("token_ops", token_ops_);
  sink.Number("tau_ns", tau_ns_);
  sink.Number("tokens_generated", static_cast<double>(tokens_given_));
  sink.Number("latency_weight", latency_weight());
  sink.Number("hungry_weight_local", w_hungry_local_);
  sink.Number("hungry_weight_remote", w_hungry_remote_);
  sink.Number("reference_flows", refs_);
  sink.Number("aimd_decreases", static_cast<double>(aimd_decreases_));
  sink.Number("aimd_increases", static_cast<double>(aimd_increases_));
  JustitiaConfig copy = config_;
  sink.Text("knobs", DescribeKnobs(KnobsOf(copy)));
}

void JustitiaPolicy::ReportTenant(TenantId tenant, ReportSink& sink) const {
  auto it = tenant_index_.find(tenant);
  if (it == tenant_index_.end()) return;
  const Tenant& t = tenants_[it->second];
  sink.Text("class", kClassNames[static_cast<int>(ClassOf(t)) % 3]);
  sink.Number("weight", WeightOf(t));
  sink.Number("tokens_received", static_cast<double>(t.tokens));
  // Justitia applies the class and the weight; a latency tenant's target is
  // the smallest any latency tenant asked for (one Target_99 per receiver,
  // 0: the knob or the oracle); caps and guarantees it does not apply.
  TenantQos effective = t.qos;
  effective.weight = WeightOf(t);
  uint32_t applied = kQosClass | kQosWeight;
  if (ClassOf(t) == TenantClass::kLatency) {
    applied |= kQosLatencyTarget;
    effective.latency_target_ns = operator_target_ns_;
  }
  sink.EffectiveQos(effective, applied);
}

std::unique_ptr<SchedulerPolicy> MakeJustitiaPolicy(
    const CardProfile& card, const std::vector<std::string>& options,
    uint32_t host_id, std::string* error) {
  auto p = std::make_unique<JustitiaPolicy>(card, host_id);
  std::string unused;
  if (!p->Init(options, error != nullptr ? error : &unused)) return nullptr;
  return p;
}

}  // namespace vrdma::policy
