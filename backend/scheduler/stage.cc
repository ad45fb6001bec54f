// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The stage's control side: flows and tenants come and go, the policy's
// mechanisms (controls, credit, release times, its timer), probes and peer
// messages. The data path (submit, serve, complete) is stage_datapath.cc.
#include <algorithm>
#include <bit>

#include "backend/scheduler/stage.h"

namespace vrdma::sched {
namespace {

constexpr uint64_t kProbeCookie = uint64_t{2} << 62;
constexpr uint64_t kPcqCookie = uint64_t{3} << 62;
constexpr uint32_t kProbeBytes = 10;
const uint8_t kProbePayload[kProbeBytes] = {'v', 'r', 'd', 'm', 'a',
                                            'p', 'r', 'o', 'b', 'e'};

policy::QpKind KindOf(QpType t) {
  switch (t) {
    case QpType::kUc:
      return policy::QpKind::kUc;
    case QpType::kUd:
      return policy::QpKind::kUd;
    default:
      return policy::QpKind::kRc;
  }
}

}  // namespace

Stage::Stage(Rnic& rnic, policy::SchedulerPolicy& policy, StageOwner& owner,
             StageOptions options)
    : rnic_(rnic),
      policy_(policy),
      owner_(owner),
      options_(options),
      cross_channel_(rnic.limits().cross_channel),
      holds_sends_(policy.HoldsSendsWithoutReceive()),
      timers_(options.timer_granularity_ns) {
  flows_.reserve(std::min<uint32_t>(options_.max_flows, 4096));
  policy_.Bind(*this);
}

Stage::~Stage() = default;

std::unique_ptr<FlowStorage> Stage::PrepareFlow(const FlowSpec& spec) {
  auto f = std::make_unique<FlowStorage>();
  f->spec = spec;
  const uint32_t cap = std::max<uint32_t>(spec.queue_capacity, 1);
  f->wrs.resize(cap);
  f->entries.resize(cap);
  f->inline_arena.resize(size_t{cap} * spec.max_inline);
  const uint32_t n = RecordCapacity(spec);
  f->records.resize(n);
  f->rec_mask = n - 1;
  f->release_timer.flow = f.get();
  return f;
}

uint32_t Stage::RecordCapacity(const FlowSpec& spec) {
  return std::bit_ceil(std::max<uint32_t>(2 * std::max(spec.rnic_depth, 1u), 8));
}

StageTenant* Stage::FindTenant(TenantId tenant) {
  for (auto& t : tenants_) {
    if (t->id == tenant && !t->removed) return t.get();
  }
  return nullptr;
}

void Stage::AddTenant(TenantId tenant, const policy::TenantQos& qos) {
  if (FindTenant(tenant) != nullptr) return SetTenantQos(tenant, qos);
  auto t = std::make_unique<StageTenant>();
  t->id = tenant;
  t->qos = qos;
  tenants_.push_back(std::move(t));
  policy_.OnTenantAdded(tenant, qos);
}

void Stage::SetTenantQos(TenantId tenant, const policy::TenantQos& qos) {
  StageTenant* t = FindTenant(tenant);
  if (t == nullptr) return;
  t->qos = qos;
  policy_.OnTenantQosChanged(tenant, qos);
}

void Stage::RemoveTenant(TenantId tenant) {
  StageTenant* t = FindTenant(tenant);
  if (t == nullptr) return;
  policy_.OnTenantRemoved(tenant);
  t->removed = true;
  if (t->flows == 0) {
    std::erase_if(tenants_, [t](const auto& p) { return p.get() == t; });
  }
}

FlowId Stage::AddFlow(std::unique_ptr<FlowStorage> storage, Nanos now) {
  now_ = std::max(now_, now);
  FlowId id = kNoFlow;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else if (flows_.size() < options_.max_flows) {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  } else {
    return kNoFlow;
  }
  FlowStorage& f = *storage;
  f.id = id;
  f.tenant = FindTenant(f.spec.tenant);
  if (f.tenant == nullptr) {
    AddTenant(f.spec.tenant, policy::TenantQos{});
    f.tenant = FindTenant(f.spec.tenant);
  }
  ++f.tenant->flows;
  f.tenant->live.PushBack(&f);
  flows_[id] = std::move(storage);
  policy::FlowInfo info;
  info.flow = id;
  info.tenant = f.spec.tenant;
  info.qp = KindOf(f.spec.type);
  info.dest = f.spec.dest;
  info.rnic_depth = f.spec.rnic_depth;
  policy_.OnFlowAdded(now_, info);
  return id;
}

std::unique_ptr<FlowStorage> Stage::RemoveFlow(FlowId id, Nanos now) {
  if (Get(id) == nullptr) return nullptr;
  EndFlowWork(id, policy::FlowEnd::kDestroyed, now);
  std::unique_ptr<FlowStorage> f = std::move(flows_[id]);
  timers_.Cancel(&f->release_timer);
  StageTenant* t = f->tenant;
  t->live.Remove(f.get());
  AddAccount(f->account, &t->retired);
  if (--t->flows == 0 && t->removed) {
    std::erase_if(tenants_, [t](const auto& p) { return p.get() == t; });
  }
  f->tenant = nullptr;
  free_ids_.push_back(id);
  return f;
}

void Stage::SetReceiverReassembles(FlowId flow, bool yes) {
  if (FlowStorage* f = Get(flow)) f->reassembles = yes;
}

uint32_t Stage::queued_wrs(FlowId flow) const {
  const FlowStorage* f = Get(flow);
  return f ? f->q_count : 0;
}

uint32_t Stage::signal_period(FlowId flow) const {
  const FlowStorage* f = Get(flow);
  return f ? f->signal_period : 1;
}

void Stage::AddProbePath(DestId dest, const ProbePath& path) {
  if (dest >= probes_.size()) probes_.resize(size_t{dest} + 1);
  probes_[dest].live = true;
  probes_[dest].outstanding = false;
  probes_[dest].path = path;
}

// ------------------------------------------------------------ mechanisms --

void Stage::Configure(FlowId flow, const policy::FlowControl& control) {
  FlowStorage* f = Get(flow);
  if (f == nullptr) return;
  // Gated anew, or no longer: whatever the flow asked for before was asked
  // of the old gating, which the policy has forgotten (fair-share drops a
  // flow from its wait list when it stops gating it). It must ask again the
  // next time it runs out of credit, or it waits for a grant that never
  // comes (b1m_vs_b1g@cx4-25: the 1 GiB tenant starved after contention
  // ended and began again).
  if (control.gated != f->control.gated) f->credit_asked = false;
  f->control = control;
  if (!cross_channel_) f->control.interrupt_waits = 0;
  if (!rnic_pause()) f->control.pause_on_rnic = false;
  const bool pause = f->control.held && f->control.pause_on_rnic;
  if (pause && f->rnic_ticket == 0) {
    // PAUSE on the RNIC: the flow's next post is a WAIT for the next
    // ticket's pcc completion; its work queues behind it in the RNIC.
    f->rnic_ticket = ++tickets_issued_;
    f->wait_pending = true;
  } else if (!pause && f->rnic_ticket != 0) {
    ReleaseTicket(f->rnic_ticket);  // RESUME (and every older pause)
    f->rnic_ticket = 0;
    f->wait_pending = false;
  }
  f->native = f->control == policy::FlowControl{} && f->rnic_ticket == 0;
  MakeReady(*f);
}

Status Stage::SetPreemptionControl(const PreemptionControl& pc) {
  if (!cross_channel_ || pc.pcq_depth == 0) return Status::kUnsupported;
  pc_ = pc;
  StockPcq();
  return Status::kOk;
}

void Stage::StockPcq() {
  // Every pcq WRITE is signaled: completed = pcc completions produced.
  const uint64_t produced = rnic_.CqProduced(pc_.pcc);
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;  // zero bytes: no key, no memory
  w.send_flags = kSendSignaled;
  w.wr_id = kPcqCookie;
  Status err = Status::kOk;
  while (pcq_posted_ - produced < pc_.pcq_depth &&
         rnic_.PostSend(pc_.pcq, std::span<const SendWr>(&w, 1), &err) == 1) {
    ++pcq_posted_;
  }
}

void Stage::ReleaseTicket(uint64_t ticket) {
  released_upto_ = std::max(released_upto_, ticket);
  StockPcq();
  SendWr e;
  e.opcode = WrOpcode::kEnable;
  e.enable_qp = pc_.pcq;
  e.enable_count = 1;
  Status err = Status::kOk;
  while (enables_issued_ < ticket && enables_issued_ < pcq_posted_ &&
         rnic_.PostSend(pc_.enabler, std::span<const SendWr>(&e, 1), &err) ==
             1) {
    ++enables_issued_;
  }
}

const policy::FlowControl& Stage::control(FlowId flow) const {
  const FlowStorage* f = Get(flow);
  return f ? f->control : no_control_;
}

void Stage::Grant(FlowId flow, uint64_t bytes, uint32_t pieces) {
  FlowStorage* f = Get(flow);
  if (f == nullptr) return;
  f->credit_bytes += static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX / 2));
  f->credit_pieces += pieces;
  f->credit_asked = false;
  MakeReady(*f);
}

uint64_t Stage::credit_bytes(FlowId flow) const {
  const FlowStorage* f = Get(flow);
  return f && f->credit_bytes > 0 ? static_cast<uint64_t>(f->credit_bytes) : 0;
}

void Stage::ReleaseAt(FlowId flow, Nanos t) {
  FlowStorage* f = Get(flow);
  if (f == nullptr) return;
  f->release_at = t;
  if (t > now_) {
    timers_.Arm(&f->release_timer, t);
  } else {
    timers_.Cancel(&f->release_timer);
    MakeReady(*f);
  }
}

void Stage::WakeAt(Nanos t) { timers_.Arm(&policy_timer_, t); }

void Stage::FireTimer(TimerWheel::Entry* e) {
  if (e == &policy_timer_) {
    policy_.OnTimer(now_);
    return;
  }
  MakeReady(*static_cast<FlowTimer*>(e)->flow);
}

bool Stage::SendProbe(DestId dest) {
  if (dest >= probes_.size() || !probes_[dest].live) {
    // Once per destination: the owner builds the path or says it cannot.
    if (dest < probes_.size() && probes_[dest].refused) return false;
    if (dest >= probes_.size()) probes_.resize(size_t{dest} + 1);
    if (!owner_.OpenProbePath(dest) || !probes_[dest].live) {
      probes_[dest].refused = true;
      return false;
    }
  }
  if (!has_own_cq_ || probes_[dest].outstanding) return false;
  Probe& p = probes_[dest];
  SendWr wr;
  wr.wr_id = kProbeCookie | dest;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSendSignaled | kSendInline;
  wr.inline_len = kProbeBytes;
  wr.inline_data = kProbePayload;
  wr.remote_addr = p.path.remote_addr;
  wr.rkey = p.path.rkey;
  Status err = Status::kOk;
  if (rnic_.PostSend(p.path.qp, std::span<const SendWr>(&wr, 1), &err) != 1) {
    return false;
  }
  p.outstanding = true;
  p.sent_at = now_;
  ++probes_outstanding_;
  return true;
}

void Stage::PollOwnCq() {
  if (pc_.pcq_depth > 0) {
    // The control queue's completions only count (CqProduced): drop them,
    // stock pcq again, and finish releases that found it empty.
    while (rnic_.PollCq(pc_.pcc, own_poll_) > 0) {
    }
    StockPcq();
    if (enables_issued_ < released_upto_) ReleaseTicket(released_upto_);
  }
  if (!has_own_cq_ || probes_outstanding_ == 0) return;
  const int n = rnic_.PollCq(own_cq_, own_poll_);
  for (int i = 0; i < n; ++i) {
    const Completion& c = own_poll_[i];
    if ((c.wr_id >> 62) != 2) continue;
    const DestId dest = static_cast<DestId>(c.wr_id & 0xffffffffu);
    if (dest >= probes_.size() || !probes_[dest].outstanding) continue;
    Probe& p = probes_[dest];
    p.outstanding = false;
    --probes_outstanding_;
    if (c.status == WcStatus::kSuccess) {
      policy_.OnProbeCompleted(now_, dest, now_ - std::min(now_, p.sent_at));
    }
  }
}

bool Stage::SendPeerMessage(DestId dest, const policy::PeerMessage& m) {
  return owner_.SendPeerMessage(dest, m);
}

void Stage::OnPeerMessage(DestId from, const policy::PeerMessage& m,
                          Nanos now) {
  now_ = std::max(now_, now);
  policy_.OnPeerMessage(now_, from, m);
}

const policy::FlowAccount& Stage::flow_account(FlowId flow) const {
  const FlowStorage* f = Get(flow);
  return f ? f->account : no_flow_;
}

const policy::TenantAccount& Stage::tenant_account(TenantId tenant) const {
  for (const auto& t : tenants_) {
    if (t->id != tenant || t->removed) continue;
    policy::TenantAccount& sum = t->sum;
    sum = policy::TenantAccount{};
    AddAccount(t->retired, &sum);
    // Removed flows' live figures (queued, outstanding) are zero by then.
    for (FlowStorage* f = t->live.front(); f != nullptr;
         f = decltype(t->live)::next(f)) {
      AddAccount(f->account, &sum);
    }
    sum.flows = t->flows;
    return sum;
  }
  no_tenant_ = policy::TenantAccount{};
  return no_tenant_;
}

void Stage::AddAccount(const policy::FlowAccount& a, policy::FlowAccount* to) {
  to->wrs_arrived += a.wrs_arrived;
  to->bytes_arrived += a.bytes_arrived;
  to->wrs_completed += a.wrs_completed;
  to->bytes_completed += a.bytes_completed;
  to->pieces_posted += a.pieces_posted;
  to->bytes_posted += a.bytes_posted;
  to->queued_wrs += a.queued_wrs;
  to->queued_bytes += a.queued_bytes;
  to->outstanding_pieces += a.outstanding_pieces;
  to->outstanding_bytes += a.outstanding_bytes;
  to->held_ns += a.held_ns;
  to->bytes_paced += a.bytes_paced;
  to->wrs_split += a.wrs_split;
  to->latency_sum_ns += a.latency_sum_ns;
  to->latency_max_ns = std::max(to->latency_max_ns, a.latency_max_ns);
  for (int i = 0; i < policy::kLatencyBuckets; ++i) to->latency_hist[i] += a.latency_hist[i];
}

}  // namespace vrdma::sched
