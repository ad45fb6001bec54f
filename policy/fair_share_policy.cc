// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// fair-share: the daemon's own scheduler (docs/fair-share.md).
//
// PeRF and Justitia each see one application and guess the rest; this
// policy sees every VM on the card and decides for all of them at once:
//
//   - Small messages are not delayed. A flow whose mean WR size is below
//     `bulk_bytes` keeps the default controls (the stage's native path),
//     unless its VM has a cap.
//   - Bulk flows share one card-wide budget. While two or more VMs send
//     ("contended"), every bulk flow is gated: it posts one piece of
//     `chunk` bytes per grant, and the policy keeps the pieces the RNIC
//     holds for all bulk flows together within a window of about one and
//     a half bandwidth-delay products. The link stays busy, and a small
//     message finds at most a window's worth of bulk bytes ahead of it on
//     the card, whatever the number of bulk tenants or QPs (PeRF's window
//     is per QP; Justitia halves the rate instead).
//   - Grants go by deficit round robin over VMs, weighted, charging each
//     piece its time on the card's dominant resource: bytes at line rate
//     or one message at the card's message rate, whichever is longer
//     (dominant-resource fairness for one card). A VM's QPs share its
//     turn round robin, so 16 QPs get what one QP gets.
//   - Caps (bytes and messages) are token buckets per VM, charged with what
//     left the card; a capped VM's flows are gated even when it is alone.
//   - A guarantee is a bucket filled at the guaranteed rate and charged
//     with every byte the VM gets: while it holds tokens (the VM got less
//     than its guarantee) the VM is served ahead of the round robin.
//   - Grants are paced on two clocks (the wire, the message engine) that
//     small messages advance first, so bulk pieces reach the card evenly.
//   - A VM's latency target halves the piece until it holds; longer pieces
//     are tried again with a back-off.
//   - At most `atomic_window` atomics per QP are on the card.
//   - Alone on the card a bulk flow is not gated; it is split into
//     `solo_chunk` pieces under a per-flow window of `solo_window_bdp`
//     bandwidth-delay products, so when another VM starts it waits behind
//     at most that window, not behind the whole send queue.
//
// Everything on the data path works on preallocated vectors and intrusive
// index lists; tenants and flows are added on the control path.
#include "policy/fair_share_policy.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "policy/card_pacer.h"
#include "policy/rate_bucket.h"
#include "policy/policy_options.h"

namespace vrdma::policy {
namespace {

struct FairShareParams {
  uint32_t chunk_bytes = 0;             // contended piece; 0: the card's MTU
  // Latency targets (TenantQos::latency_target_ns): every `adapt_samples`
  // completions of a VM with a target, more than `target_miss` of them
  // over it halve the piece (down to `min_chunk_bytes`); `grow_after`
  // such rounds in a row without a miss, and with room to spare, double it
  // back.
  uint32_t min_chunk_bytes = 1024;
  double target_miss = 0.01;
  uint32_t adapt_samples = 200;
  uint32_t grow_after = 4;
  // ... and only when at most `target_miss` of them took more than this
  // share of the target: a piece that only just meets it stays.
  double grow_headroom = 0.8;
  uint32_t solo_chunk_bytes = 64 * 1024;
  double window_bdp = 1.5;              // contended card-wide window
  double solo_window_bdp = 8;           // per flow, uncontended
  uint32_t bulk_bytes = 1024;           // mean WR size of a bulk flow
  // A small flow that has had this many WRs in the stage and on the card
  // at once is a message flow: while the card's message engine is
  // saturated, message flows are gated too, so VMs share messages as they
  // share bytes. Sparse small flows (ping-pongs) never are.
  uint32_t message_flow_wrs = 8;
  // Atomics a QP may have on the card at once, contended or not: the
  // responder serializes them per address on a few units, and a queue
  // there stalls its receive pipeline for every other QP (Husky).
  uint32_t atomic_window = 2;
  double active_us = 500;               // a VM is active this long after a WR
  // A cap's or guarantee's bucket, in time at its rate, after idle and
  // while the VM has work waiting (rate_bucket.h).
  double cap_burst_us = 1000;
  double cap_backlog_us = 50000;
  // Contended grants are paced so that everything on the card, bypassing
  // small messages included, keeps each of its two resources (the wire,
  // the message engine) at most this busy: bulk pieces reach the card
  // evenly instead of in bursts clocked by coalesced completions, and
  // small messages find room.
  double pace = 0.98;
  uint32_t packet_overhead_bytes = 82;  // RoCEv2 headers, FCS, preamble, gap
};

constexpr int32_t kNone = -1;
// Bytes of credit granted with each piece: pieces are the gate, bytes
// never are (the policy budgets bytes itself).
constexpr uint64_t kByteCredit = uint64_t{1} << 31;

class FairSharePolicy final : public SchedulerPolicy {
 public:
  FairSharePolicy(const CardProfile& card, const FairShareParams& p)
      : card_(card), p_(p), pacer_(card, p.pace, p.packet_overhead_bytes) {
    chunk_ = p_.chunk_bytes != 0 ? p_.chunk_bytes : card_.mtu_bytes;
    base_chunk_ = chunk_;
    probe_rounds_ = p_.grow_after;
    const double rtt_s = static_cast<double>(card_.base_rtt_ns) / 1e9;
    const double bdp_bytes = card_.line_rate_bps / 8 * rtt_s;
    window_bytes_ = static_cast<uint64_t>(p_.window_bdp * bdp_bytes) + chunk_;
    window_pieces_ = static_cast<uint32_t>(
        std::max(2.0, std::ceil(p_.window_bdp * card_.max_msgs_per_s * rtt_s)));
    solo_window_bytes_ = static_cast<uint64_t>(
        std::max(p_.solo_window_bdp * bdp_bytes, 2.0 * p_.solo_chunk_bytes));
    active_ns_ = static_cast<Nanos>(p_.active_us * 1e3);
    pacer_.SetSlack(chunk_);
    pacer_.SetHorizon(window_bytes_);
  }

  std::string_view name() const override { return "fair-share"; }
  // A SEND goes only where a receive waits for it (receive credits): a
  // sender cannot stall a receiver's RNIC with RNR NAKs.
  bool HoldsSendsWithoutReceive() const override { return true; }

  // ---------------------------------------------------------- control --
  void OnTenantAdded(TenantId id, const TenantQos& qos) override {
    const uint32_t ti = TenantIndex(id);
    SetRates(ti, qos);
  }
  void OnTenantQosChanged(TenantId id, const TenantQos& qos) override {
    const uint32_t ti = TenantIndex(id);
    const bool was_capped = Capped(tenants_[ti]);
    SetRates(ti, qos);
    if (Capped(tenants_[ti]) != was_capped) {
      for (uint32_t f = 0; f < flows_.size(); ++f) {
        if (flows_[f].live && flows_[f].tenant == ti) Apply(f);
      }
    }
    Distribute(last_now_);
  }
  void OnTenantRemoved(TenantId id) override {
    auto it = tenant_index_.find(id);
    if (it == tenant_index_.end()) return;
    Tenant& t = tenants_[it->second];
    if (t.in_ring) RingRemove(it->second);
    if (t.active) SetActive(it->second, false);
    std::erase(guaranteed_, it->second);
    t = Tenant{};  // the slot stays for the index; a new tenant reuses it
    free_tenants_.push_back(it->second);
    tenant_index_.erase(it);
  }

  void OnFlowAdded(Nanos now, const FlowInfo& info) override {
    if (info.flow >= flows_.size()) flows_.resize(size_t{info.flow} + 1);
    Flow& f = flows_[info.flow];
    f = Flow{};
    f.live = true;
    f.tenant = TenantIndex(info.tenant);
    f.ud = info.qp == QpKind::kUd;
    last_now_ = std::max(last_now_, now);
    Apply(info.flow);
  }

  void OnFlowEnded(Nanos now, FlowId id, FlowEnd how) override {
    if (id >= flows_.size() || !flows_[id].live) return;
    Flow& f = flows_[id];
    last_now_ = std::max(last_now_, now);
    Release(f, f.out_bytes, f.out_pieces);
    SetPosting(f, false);
    if (f.waiting) Unwait(id);
    if (how == FlowEnd::kDestroyed) f = Flow{};
    Distribute(now);
  }

  // ------------------------------------------------------------- data --
  void OnArrival(Nanos now, const WrInfo& wr) override {
    if (wr.flow >= flows_.size() || !flows_[wr.flow].live) return;
    last_now_ = std::max(last_now_, now);
    Flow& f = flows_[wr.flow];
    const double b = static_cast<double>(wr.bytes);
    f.mean_bytes = f.seen ? f.mean_bytes + (b - f.mean_bytes) / 8 : b;
    f.seen = true;
    if (wr.kind == WrKind::kAtomic && !f.atomics) {
      f.atomics = true;
      Apply(wr.flow);
    }
    Tenant& t = tenants_[f.tenant];
    t.last_arrival = now;
    if (!t.active) SetActive(f.tenant, true);  // may reconfigure every flow
    const bool bulk = f.mean_bytes >= p_.bulk_bytes || wr.bytes > base_chunk_;
    if (bulk != f.bulk) {
      f.bulk = bulk;
      Apply(wr.flow);
    }
    if (!f.bulk && !f.deep && !f.ud) {
      const FlowAccount& a = mech().flow_account(wr.flow);
      if (a.queued_wrs + a.outstanding_pieces >= p_.message_flow_wrs) {
        f.deep = true;
        if (msg_contended_) Apply(wr.flow);
      }
    }
    // A small message goes to the card now: it takes its time first. (A
    // bulk UD flow is not scheduled at all: the card shares it natively.)
    if (!f.gated && !f.bulk && contended()) {
      pacer_.Occupy(now, wr.bytes);
      if (pacer_.MessagesSaturated(now)) NoteMessageContention(now);
    }
  }

  void OnCompleted(Nanos now, const WrInfo& wr, Nanos latency, bool) override {
    if (wr.flow >= flows_.size() || !flows_[wr.flow].live) return;
    Tenant& t = tenants_[flows_[wr.flow].tenant];
    if (t.msg_cap.armed()) {
      t.msg_cap.Refill(now, Backlogged(t));
      t.msg_cap.Take(1);
    }
    if (t.qos.latency_target_ns == 0) return;
    ++t.samples;
    if (latency > t.qos.latency_target_ns) {
      ++t.over;
      ++t.target_misses;
    }
    if (latency > p_.grow_headroom * static_cast<double>(t.qos.latency_target_ns)) ++t.near;
    if (t.samples < p_.adapt_samples) return;
    const double allowed = p_.target_miss * t.samples;
    const bool missed = static_cast<double>(t.over) > allowed;
    // Met, but with no room to spare: a longer piece would miss. Stay.
    const bool tight = static_cast<double>(t.near) > allowed;
    t.samples = t.over = t.near = 0;
    if (missed) {
      met_rounds_ = 0;
      // A longer piece tried and missed: wait twice as long before the
      // next try (no oscillation around a target between two sizes).
      if (last_grew_) probe_rounds_ = std::min(probe_rounds_ * 2, kMaxProbeRounds);
      last_grew_ = false;
      if (chunk_ > p_.min_chunk_bytes) SetChunk(std::max(p_.min_chunk_bytes, chunk_ / 2));
    } else if (tight) {
      met_rounds_ = 0;
      last_grew_ = false;  // the piece holds, but only just
    } else if (++met_rounds_ >= probe_rounds_ && chunk_ < base_chunk_) {
      met_rounds_ = 0;
      last_grew_ = true;
      SetChunk(std::min(base_chunk_, chunk_ * 2));
    } else if (met_rounds_ >= p_.grow_after) {
      last_grew_ = false;  // the longer piece held
    }
  }

  void OnRetired(Nanos now, FlowId id, uint64_t bytes, uint32_t pieces) override {
    if (id >= flows_.size() || !flows_[id].live) return;
    last_now_ = std::max(last_now_, now);
    Flow& f = flows_[id];
    Tenant& t = tenants_[f.tenant];
    if (t.byte_cap.armed() || t.guarantee.armed()) {
      const bool backlogged = Backlogged(t);
      for (RateBucket* b : {&t.byte_cap, &t.guarantee}) {
        if (!b->armed()) continue;
        b->Refill(now, backlogged);
        b->Take(static_cast<double>(bytes));
      }
    }
    if (f.posting && mech().flow_account(id).queued_wrs == 0) SetPosting(f, false);
    if (f.out_pieces == 0) return;
    const uint32_t p = std::min(pieces, f.out_pieces);
    // Pieces are exact; a piece's bytes were an estimate at its grant:
    // once none is left, so is none of its bytes.
    const uint64_t b = p == f.out_pieces ? f.out_bytes : std::min(bytes, f.out_bytes);
    Release(f, b, p);
    Distribute(now);
  }

  void OnCreditNeeded(Nanos now, FlowId id) override {
    if (id >= flows_.size() || !flows_[id].live) return;
    last_now_ = std::max(last_now_, now);
    Flow& f = flows_[id];
    SetPosting(f, false);
    if (!f.gated || f.waiting) return;
    Wait(id);
    Distribute(now);
  }

  void OnTimer(Nanos now) override {
    last_now_ = std::max(last_now_, now);
    armed_at_ = kNever;
    if (now >= next_scan_) {
      next_scan_ = kNever;
      for (uint32_t i = 0; i < tenants_.size(); ++i) {
        Tenant& t = tenants_[i];
        if (!t.active) continue;
        if (now - std::min(now, t.last_arrival) < active_ns_ || t.wait_head != kNone) continue;
        // Quiet, but with work in the stage or on the card (a guest waiting
        // for completions posts nothing new): still sending.
        const TenantAccount& a = mech().tenant_account(t.id);
        if (a.queued_wrs == 0 && a.outstanding_pieces == 0) SetActive(i, false);
      }
      if (msg_contended_ && now - std::min(now, msg_seen_) > active_ns_) {
        SetMessageContended(false);
      }
      if (contended()) next_scan_ = now + active_ns_ / 2;
    }
    Distribute(now);
    if (next_scan_ != kNever) Arm(next_scan_);
  }

  // ------------------------------------------------------------ stats --
  void Report(ReportSink& sink) const override {
    sink.Number("contended", contended() ? 1 : 0);
    sink.Number("messages_contended", msg_contended_ ? 1 : 0);
    sink.Number("active_vms", active_tenants_);
    sink.Number("chunk_bytes", chunk_);
    sink.Number("window_bytes", static_cast<double>(window_bytes_));
    sink.Number("window_pieces", window_pieces_);
    sink.Number("inuse_bytes", static_cast<double>(inuse_bytes_));
    sink.Number("inuse_pieces", inuse_pieces_);
    sink.Number("grants", static_cast<double>(grants_));
    sink.Number("chunk_changes", static_cast<double>(chunk_changes_));
  }
  void ReportTenant(TenantId id, ReportSink& sink) const override {
    auto it = tenant_index_.find(id);
    if (it == tenant_index_.end()) return;
    const Tenant& t = tenants_[it->second];
    sink.Number("weight", Weight(t));
    sink.Number("cap_bps", static_cast<double>(t.qos.max_rate_bps));
    sink.Number("active", t.active ? 1 : 0);
    sink.Number("granted_pieces", static_cast<double>(t.granted_pieces));
    sink.Number("granted_bytes", static_cast<double>(t.granted_bytes));
    sink.Number("cap_waits", static_cast<double>(t.cap_waits));
    sink.Number("msg_cap_mps", static_cast<double>(t.qos.max_msgs_per_s) / 1e6);
    sink.Number("guarantee_bps", static_cast<double>(t.qos.min_rate_bps));
    sink.Number("guaranteed_pieces", static_cast<double>(t.guaranteed_pieces));
    sink.Number("latency_target_ns", static_cast<double>(t.qos.latency_target_ns));
    sink.Number("target_misses", static_cast<double>(t.target_misses));
    // Everything but the class is applied as asked (flows are classified
    // by what they post); the daemon admits guarantees only while their sum
    // fits the card (CheckGuarantees).
    TenantQos effective = t.qos;
    effective.weight = Weight(t);
    sink.EffectiveQos(effective, kQosWeight | kQosMaxRate | kQosMaxMsgs | kQosMinRate |
                                     kQosLatencyTarget);
  }

 private:
  struct Tenant {
    TenantId id = 0;
    TenantQos qos;
    bool active = false;
    Nanos last_arrival = 0;
    // Deficit round robin over VMs with flows waiting for a grant.
    bool in_ring = false;
    int32_t ring_next = kNone;
    int32_t ring_prev = kNone;
    bool turn = false;          // its quantum for this round is added
    double deficit_ns = 0;      // card time it may still take this round
    int32_t wait_head = kNone;  // its waiting flows, FIFO
    int32_t wait_tail = kNone;
    // Caps: bytes and messages it may still have retire; guarantee: bytes
    // it is owed (rate_bucket.h).
    RateBucket byte_cap;
    RateBucket msg_cap;
    RateBucket guarantee;
    uint64_t granted_pieces = 0;
    uint64_t guaranteed_pieces = 0;  // granted ahead of the round robin
    uint64_t granted_bytes = 0;
    uint64_t cap_waits = 0;
    // Completions towards its latency target's next judgement.
    uint32_t samples = 0;
    uint32_t over = 0;
    uint32_t near = 0;  // ... over grow_headroom of it
    uint64_t target_misses = 0;
    uint32_t posting = 0;  // flows granted that have not asked again
  };
  struct Flow {
    bool live = false;
    uint32_t tenant = 0;
    bool seen = false;
    double mean_bytes = 0;
    bool ud = false;  // never gated: a datagram is not split nor waited for
    bool atomics = false;  // it has posted an atomic
    bool bulk = false;
    bool gated = false;
    bool deep = false;     // a message flow (message_flow_wrs)
    bool waiting = false;
    bool waiting_small = false;  // counted in msg_waiting_
    bool posting = false;  // granted, has not asked again (it will if it has work)
    int32_t wait_next = kNone;
    uint32_t out_pieces = 0;  // granted, not retired
    uint64_t out_bytes = 0;   // their estimated bytes
  };

  bool contended() const { return active_tenants_ >= 2; }
  static uint32_t Weight(const Tenant& t) { return std::max<uint32_t>(t.qos.weight, 1); }
  static bool Capped(const Tenant& t) { return t.byte_cap.armed() || t.msg_cap.armed(); }
  // It has work waiting in the stage: a bucket keeps what it is owed.
  bool Backlogged(const Tenant& t) { return mech().tenant_account(t.id).queued_wrs != 0; }

  uint32_t TenantIndex(TenantId id) {
    auto it = tenant_index_.find(id);
    if (it != tenant_index_.end()) return it->second;
    uint32_t i;
    if (!free_tenants_.empty()) {
      i = free_tenants_.back();
      free_tenants_.pop_back();
    } else {
      i = static_cast<uint32_t>(tenants_.size());
      tenants_.emplace_back();
    }
    tenants_[i] = Tenant{};
    tenants_[i].id = id;
    tenant_index_.emplace(id, i);
    return i;
  }

  // The controls a flow gets now; configures the stage when they change.
  void Apply(FlowId id) {
    Flow& f = flows_[id];
    const Tenant& t = tenants_[f.tenant];
    FlowControl c;
    if (f.ud) {
      // Default controls: its messages only take their time on the clocks.
    } else if (Capped(t) || (contended() && (f.bulk || (f.deep && msg_contended_)))) {
      c.gated = true;
      c.chunk_bytes = f.bulk ? chunk_ : 0;
    } else if (f.bulk) {
      c.chunk_bytes = p_.solo_chunk_bytes;
      c.window_bytes = solo_window_bytes_;
    }
    if (f.atomics) c.window_wrs = p_.atomic_window;
    f.gated = c.gated;
    if (!f.gated) SetPosting(f, false);
    if (!f.gated && f.waiting) Unwait(id);
    if (!(c == mech().control(id))) mech().Configure(id, c);
  }

  // A latency target asks for shorter pieces (a small message waits behind
  // less), or allows longer ones again. Every gated bulk flow follows.
  void SetChunk(uint32_t bytes) {
    chunk_ = bytes;
    pacer_.SetSlack(chunk_);
    ++chunk_changes_;
    for (uint32_t f = 0; f < flows_.size(); ++f) {
      if (flows_[f].live && flows_[f].gated && flows_[f].bulk) Apply(f);
    }
  }

  // The card's message engine is saturated by what goes on it: message
  // flows are gated from now until nobody has waited for it for active_us.
  void NoteMessageContention(Nanos now) {
    msg_seen_ = now;
    if (!msg_contended_) SetMessageContended(true);
  }
  void SetMessageContended(bool on) {
    msg_contended_ = on;
    for (uint32_t f = 0; f < flows_.size(); ++f) {
      if (flows_[f].live && flows_[f].deep && !flows_[f].bulk) Apply(f);
    }
  }

  void SetActive(uint32_t ti, bool active) {
    const bool was = contended();
    tenants_[ti].active = active;
    active_tenants_ += active ? 1 : -1;
    // Only contention needs watching: one VM's going quiet changes nothing
    // (a second VM's arrival makes it contended, and the scan starts).
    if (contended() && next_scan_ == kNever) {
      next_scan_ = last_now_ + active_ns_ / 2;
      Arm(next_scan_);
    }
    if (contended() != was) {
      msg_contended_ = false;
      if (!contended() && chunk_ != base_chunk_) {
        // Nobody left to protect: latency targets start over next time.
        chunk_ = base_chunk_;
        pacer_.SetSlack(chunk_);
        probe_rounds_ = p_.grow_after;
        met_rounds_ = 0;
        last_grew_ = false;
      }
      for (uint32_t f = 0; f < flows_.size(); ++f) {
        if (flows_[f].live) Apply(f);
      }
    }
  }

  // The VM's buckets follow its QoS; a changed rate starts its bucket over.
  void SetRates(uint32_t ti, const TenantQos& qos) {
    Tenant& t = tenants_[ti];
    const TenantQos old = t.qos;
    t.qos = qos;
    const double burst = p_.cap_burst_us * 1e3, backlog = p_.cap_backlog_us * 1e3;
    const double piece = 2.0 * std::max(base_chunk_, p_.solo_chunk_bytes);
    if (qos.max_rate_bps != old.max_rate_bps) {
      t.byte_cap.Set(static_cast<double>(qos.max_rate_bps) / 8, burst, backlog, piece, last_now_);
    }
    if (qos.max_msgs_per_s != old.max_msgs_per_s) {
      t.msg_cap.Set(static_cast<double>(qos.max_msgs_per_s), burst, backlog, 2, last_now_);
    }
    if (qos.min_rate_bps != old.min_rate_bps) {
      t.guarantee.Set(static_cast<double>(qos.min_rate_bps) / 8, burst, backlog, piece, last_now_);
    }
    std::erase(guaranteed_, ti);
    if (t.guarantee.armed()) guaranteed_.push_back(ti);
  }

  // Whether a capped VM may be granted now; if not, when to look again.
  bool WithinCaps(Tenant& t, Nanos now, Nanos* wake) {
    if (!Capped(t)) return true;
    const bool backlogged = Backlogged(t);
    Nanos at = now;
    for (RateBucket* b : {&t.byte_cap, &t.msg_cap}) {
      if (!b->armed()) continue;
      b->Refill(now, backlogged);
      at = std::max(at, b->PositiveAt(now));
    }
    if (at == now) return true;
    *wake = std::min(*wake, at);
    ++t.cap_waits;
    return false;
  }

  // A VM below its guarantee with work waiting, round robin among such
  // VMs; kNone when there is none.
  int32_t GuaranteeDue(Nanos now, Nanos* wake) {
    const size_t n = guaranteed_.size();
    for (size_t k = 0; k < n; ++k) {
      const uint32_t ti = guaranteed_[(guarantee_next_ + k) % n];
      Tenant& t = tenants_[ti];
      if (t.wait_head == kNone || !WithinCaps(t, now, wake)) continue;
      t.guarantee.Refill(now, true);
      if (!t.guarantee.positive()) {
        *wake = std::min(*wake, t.guarantee.PositiveAt(now));
        continue;
      }
      guarantee_next_ = (guarantee_next_ + k + 1) % n;
      return static_cast<int32_t>(ti);
    }
    return kNone;
  }

  // --- waiting flows and the ring of VMs ---
  void Wait(FlowId id) {
    Flow& f = flows_[id];
    Tenant& t = tenants_[f.tenant];
    f.waiting = true;
    f.waiting_small = !f.bulk;
    msg_waiting_ += f.waiting_small;
    f.wait_next = kNone;
    if (t.wait_tail == kNone) {
      t.wait_head = static_cast<int32_t>(id);
    } else {
      flows_[t.wait_tail].wait_next = static_cast<int32_t>(id);
    }
    t.wait_tail = static_cast<int32_t>(id);
    if (!t.in_ring) RingInsert(f.tenant);
  }
  void Unwait(FlowId id) {  // rare: a flow ends or stops being gated
    Flow& f = flows_[id];
    Tenant& t = tenants_[f.tenant];
    int32_t prev = kNone;
    for (int32_t i = t.wait_head; i != kNone; prev = i, i = flows_[i].wait_next) {
      if (i != static_cast<int32_t>(id)) continue;
      (prev == kNone ? t.wait_head : flows_[prev].wait_next) = f.wait_next;
      if (t.wait_tail == i) t.wait_tail = prev;
      break;
    }
    f.waiting = false;
    msg_waiting_ -= f.waiting_small;
    f.waiting_small = false;
    f.wait_next = kNone;
    if (t.wait_head == kNone && t.in_ring) RingRemove(f.tenant);
  }
  void RingInsert(uint32_t ti) {
    Tenant& t = tenants_[ti];
    t.in_ring = true;
    t.turn = false;
    t.deficit_ns = 0;
    const int32_t i = static_cast<int32_t>(ti);
    if (cursor_ == kNone) {
      t.ring_next = t.ring_prev = i;
      cursor_ = i;
      return;
    }
    // Just behind the cursor: it waits a whole round, as a newcomer should.
    Tenant& c = tenants_[cursor_];
    t.ring_next = cursor_;
    t.ring_prev = c.ring_prev;
    tenants_[c.ring_prev].ring_next = i;
    c.ring_prev = i;
    ++ring_size_;
  }
  void RingRemove(uint32_t ti) {
    Tenant& t = tenants_[ti];
    const int32_t i = static_cast<int32_t>(ti);
    if (t.ring_next == i) {
      cursor_ = kNone;
    } else {
      tenants_[t.ring_prev].ring_next = t.ring_next;
      tenants_[t.ring_next].ring_prev = t.ring_prev;
      if (cursor_ == i) cursor_ = t.ring_next;
      --ring_size_;
    }
    t.in_ring = false;
    t.turn = false;
    t.deficit_ns = 0;
    t.ring_next = t.ring_prev = kNone;
  }
  void Advance() {
    tenants_[cursor_].turn = false;
    cursor_ = tenants_[cursor_].ring_next;
  }

  void SetPosting(Flow& f, bool posting) {
    if (f.posting == posting) return;
    f.posting = posting;
    tenants_[f.tenant].posting += posting ? 1 : -1;
  }

  void Release(Flow& f, uint64_t bytes, uint32_t pieces) {
    f.out_pieces -= pieces;
    f.out_bytes -= bytes;
    inuse_pieces_ -= pieces;
    inuse_bytes_ -= bytes;
  }

  bool WindowHasRoom() const {
    return inuse_pieces_ < window_pieces_ &&
           (inuse_bytes_ == 0 || inuse_bytes_ + chunk_ <= window_bytes_);
  }

  // Grants pieces while the card's budget has room: VMs below their
  // guarantee first, then deficit round robin over the VMs with waiting
  // flows.
  void Distribute(Nanos now) {
    Nanos wake = kNever;
    uint32_t skipped = 0;  // VMs passed in a row (capped out, none asking)
    while (cursor_ != kNone && WindowHasRoom()) {
      const double due = pacer_.DueAt();
      if (due > static_cast<double>(now)) {
        wake = std::min(wake, static_cast<Nanos>(due) + 1);
        // Message flows wait for the card: its messages are still contended.
        if (msg_waiting_ > 0) msg_seen_ = now;
        break;
      }
      if (!guaranteed_.empty()) {
        if (const int32_t g = GuaranteeDue(now, &wake); g != kNone) {
          GrantTurn(static_cast<uint32_t>(g), now, /*guaranteed=*/true);
          continue;
        }
      }
      const uint32_t ti = static_cast<uint32_t>(cursor_);
      Tenant& t = tenants_[ti];
      if (!WithinCaps(t, now, &wake)) {
        if (++skipped > ring_size_) break;
        Advance();
        continue;
      }
      if (t.wait_head == kNone) {
        // Its flows are posting what they were granted and will ask again
        // if they have more: it keeps its place and what is left of its
        // deficit; a VM with no flow posting a grant leaves the ring.
        if (t.posting == 0) {
          RingRemove(ti);
          continue;
        }
        if (++skipped > ring_size_) break;
        Advance();
        continue;
      }
      if (!t.turn) {
        t.turn = true;
        t.deficit_ns += Weight(t) * pacer_.CostNs(std::max(chunk_, card_.mtu_bytes));
      }
      if (!GrantTurn(ti, now, /*guaranteed=*/false)) {
        Advance();
        continue;
      }
      skipped = 0;
    }
    if (wake != kNever) Arm(wake);
  }

  // Grants the first waiting flow of VM ti its pieces for this turn: as
  // many as its deficit (round robin) or what it is owed (guarantee), the
  // flow's queue and the window allow; at least one when it grants at all
  // (a weight-4 VM with one QP takes four per round). false: its deficit
  // does not cover one piece.
  bool GrantTurn(uint32_t ti, Nanos now, bool guaranteed) {
    Tenant& t = tenants_[ti];
    const FlowId id = static_cast<FlowId>(t.wait_head);
    const FlowAccount& a = mech().flow_account(id);
    const bool chunked = mech().control(id).chunk_bytes != 0;
    const uint64_t est =
        chunked ? std::min<uint64_t>(chunk_, std::max<uint64_t>(a.queued_bytes, 1))
                : std::max<uint64_t>(a.queued_bytes / std::max<uint32_t>(a.queued_wrs, 1), 1);
    const double cost = pacer_.CostNs(est);
    // What the turn may take, in pieces of est: the deficit's worth, or
    // the guarantee's tokens' worth.
    const double budget = guaranteed ? t.guarantee.level() : t.deficit_ns;
    const double unit = guaranteed ? static_cast<double>(est) : cost;
    if (!guaranteed && budget < cost) return false;
    const uint64_t queued =
        chunked ? (a.queued_bytes + chunk_ - 1) / chunk_ : uint64_t{a.queued_wrs};
    uint32_t n = 1;
    while (n < queued && budget >= (n + 1) * unit && inuse_pieces_ + n < window_pieces_ &&
           inuse_bytes_ + (n + 1) * est <= window_bytes_) {
      ++n;
    }
    if (guaranteed) {
      t.guaranteed_pieces += n;
    } else {
      t.deficit_ns -= n * cost;
    }
    Flow& f = flows_[id];
    t.wait_head = f.wait_next;
    if (t.wait_head == kNone) t.wait_tail = kNone;
    f.waiting = false;
    msg_waiting_ -= f.waiting_small;
    f.waiting_small = false;
    f.wait_next = kNone;
    SetPosting(f, true);
    f.out_pieces += n;
    f.out_bytes += n * est;
    inuse_pieces_ += n;
    inuse_bytes_ += n * est;
    t.granted_pieces += n;
    t.granted_bytes += n * est;
    grants_ += n;
    pacer_.Occupy(now, est, n);
    mech().Grant(id, mech().credit_bytes(id) < kByteCredit / 2 ? kByteCredit : 0, n);
    return true;
  }

  // One timer: the earliest of what is asked stays armed (WakeAt replaces).
  void Arm(Nanos t) {
    if (armed_at_ != kNever && armed_at_ > last_now_ && armed_at_ <= t) return;
    armed_at_ = t;
    mech().WakeAt(t);
  }

  CardProfile card_;
  FairShareParams p_;
  CardPacer pacer_;
  uint32_t chunk_ = 4096;       // the piece now
  uint32_t base_chunk_ = 4096;  // the piece without latency targets
  uint32_t met_rounds_ = 0;     // latency judgements in a row without a miss
  uint32_t probe_rounds_ = 0;   // ... before a longer piece is tried
  bool last_grew_ = false;      // the last change was a longer piece
  static constexpr uint32_t kMaxProbeRounds = 1024;
  uint64_t chunk_changes_ = 0;
  uint64_t window_bytes_ = 0;
  uint32_t window_pieces_ = 0;
  uint64_t solo_window_bytes_ = 0;
  Nanos active_ns_ = 0;

  std::vector<Tenant> tenants_;
  std::vector<uint32_t> free_tenants_;
  std::unordered_map<TenantId, uint32_t> tenant_index_;
  std::vector<Flow> flows_;  // by FlowId
  std::vector<uint32_t> guaranteed_;  // VMs with a guarantee (control path)
  size_t guarantee_next_ = 0;         // where GuaranteeDue starts
  uint32_t active_tenants_ = 0;
  bool msg_contended_ = false;  // message flows are gated
  Nanos msg_seen_ = 0;          // when the message engine was last saturated
  uint32_t msg_waiting_ = 0;    // small flows waiting for a grant
  int32_t cursor_ = kNone;
  uint32_t ring_size_ = 0;   // VMs in the ring less one (0 with one or none)
  uint32_t inuse_pieces_ = 0;
  uint64_t inuse_bytes_ = 0;
  uint64_t grants_ = 0;
  Nanos next_scan_ = kNever;
  Nanos armed_at_ = kNever;
  Nanos last_now_ = 0;
};

}  // namespace

std::unique_ptr<SchedulerPolicy> MakeFairSharePolicy(
    const CardProfile& card, const std::vector<std::string>& options,
    std::string* error) {
  FairShareParams p;
  const Knob knobs[] = {
      {"chunk_bytes", &p.chunk_bytes, 0, 1u << 30},
      {"min_chunk_bytes", &p.min_chunk_bytes, 256, 1u << 30},
      {"target_miss", &p.target_miss, 0, 1},
      {"adapt_samples", &p.adapt_samples, 1, 1u << 24},
      {"grow_after", &p.grow_after, 1, 1u << 16},
      {"grow_headroom", &p.grow_headroom, 0.1, 1},
      {"solo_chunk_bytes", &p.solo_chunk_bytes, 1024, 1u << 30},
      {"window_bdp", &p.window_bdp, 0.1, 1000},
      {"solo_window_bdp", &p.solo_window_bdp, 0.1, 10000},
      {"bulk_bytes", &p.bulk_bytes, 1, 1u << 30},
      {"message_flow_wrs", &p.message_flow_wrs, 1, 1u << 16},
      {"atomic_window", &p.atomic_window, 1, 1u << 16},
      {"active_us", &p.active_us, 1, 60e6},
      {"cap_burst_us", &p.cap_burst_us, 1, 1e6},
      {"cap_backlog_us", &p.cap_backlog_us, 1, 1e7},
      {"pace", &p.pace, 0.1, 1},
      {"packet_overhead_bytes", &p.packet_overhead_bytes, 0, 4096},
  };
  if (!ApplyKnobs(options, knobs, error)) {
    *error = "fair-share: " + *error;
    return nullptr;
  }
  return std::make_unique<FairSharePolicy>(card, p);
}

}  // namespace vrdma::policy
