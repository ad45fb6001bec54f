// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/model_host.h"

#include <algorithm>
#include <cmath>

#include "backend/rnic_model/simulator.h"
#include "policy/reliability/reliability_constants.h"

namespace vrdma::bench {

using model::Picos;

policy::CardProfile CardProfileOf(const model::NicParams& nic,
                                  const model::FabricParams& fabric) {
  policy::CardProfile c;
  c.line_rate_bps = nic.line_rate_gbps * 1e9;
  // The dispatcher admits one WQE per dispatch_gap (the card's ceiling);
  // a QP is on one PU at a time, a PU spends wqe_cost per WQE.
  c.max_msgs_per_s = 1e12 / static_cast<double>(nic.dispatch_gap_ps);
  c.qp_msgs_per_s = 1e12 / static_cast<double>(nic.wqe_cost_ps);
  c.mtu_bytes = nic.mtu_bytes;
  c.processing_units = nic.num_pus;
  // A small message's round trip on an idle card: doorbell and fetch,
  // processing, two hops each way, the responder, the CQE write.
  const Picos hop = fabric.link_propagation_ps * 2 + fabric.switch_latency_ps;
  const Picos rtt = nic.doorbell_ps + nic.wqe_fetch_ps + nic.wqe_cost_ps +
                    2 * hop + nic.rx_cost_ps + nic.cqe_write_ps +
                    nic.wire_time_ps(16) + nic.wire_time_ps(0);
  c.base_rtt_ns = rtt / model::kPicosPerNano;
  return c;
}

// ------------------------------------------------------------- HostSet --

class HostSet::Delivery final : public model::TimerSink {
 public:
  Delivery(HostSet& set, uint32_t from, uint32_t to,
           const policy::PeerMessage& m)
      : set_(set), from_(from), to_(to), m_(m) {}
  void OnTimer(uint64_t) override {
    done = true;
    set_.host(to_).DeliverPeer(from_, m_);
  }
  bool done = false;

 private:
  HostSet& set_;
  uint32_t from_, to_;
  policy::PeerMessage m_;
};

HostSet::HostSet(model::ModelWorld& world) : world_(world) {}
HostSet::~HostSet() = default;

void HostSet::MarkDirty(ModelHost& host) {
  if (!host.dirty) {
    host.dirty = true;
    dirty_.push_back(&host);
  }
  sim().Stop();
}

bool HostSet::RunTurns() {
  bool any = false;
  for (size_t i = 0; i < dirty_.size(); ++i) {  // turns may mark more
    ModelHost* h = dirty_[i];
    if (!h->dirty) continue;
    h->Turn();
    any = true;
  }
  dirty_.clear();
  return any;
}

void HostSet::WatchCq(model::CqId cq, ModelHost* host) {
  if (cq_host_.size() <= cq) cq_host_.resize(cq + 1, nullptr);
  cq_host_[cq] = host;
}

void HostSet::OnCqeVisible(model::CqId cq) {
  if (cq < cq_host_.size() && cq_host_[cq] != nullptr) MarkDirty(*cq_host_[cq]);
}

void HostSet::SendPeer(uint32_t from, uint32_t to,
                       const policy::PeerMessage& m) {
  std::erase_if(deliveries_, [](const auto& d) { return d->done; });
  deliveries_.push_back(std::make_unique<Delivery>(*this, from, to, m));
  sim().ScheduleTimer(sim().now() + model::NsToPs(kControlDelayNs),
                      deliveries_.back().get(), 0);
}

// ----------------------------------------------------------- ModelHost --

ModelHost::ModelHost(HostSet& set, const model::NicParams& nic,
                     std::unique_ptr<policy::SchedulerPolicy> policy,
                     sched::StageOptions stage_options, HostLayer layer)
    : set_(set),
      id_(static_cast<uint32_t>(set.size())),
      rnic_(set.world(), nic),
      policy_(std::move(policy)) {
  if (layer.on) {
    rnic_.set_progress_quantum(0);  // the bench runs virtual time, not the layer
    ReliableRnicOptions o;
    o.daemon_id = id_ + 1;
    o.token_seed = 1000 + id_;
    o.clock = [this] { return static_cast<uint64_t>(now_ns()); };
    // The operator's fabric base RTT (docs/reliability.md §4.5): this
    // fabric's idle round trip for one unit, as ib_write_lat would show it.
    o.connection.sender.window.fabric_base_rtt_ns =
        static_cast<uint64_t>(model::PsToNs(model::IdleWriteRoundTripPs(
            nic, set.sim().fabric(), policy::reliability::kUnitSize)));
    o.connection.receiver.packet_lifetime_ns = layer.packet_lifetime_ns;
    layer_ = std::make_unique<ReliableRnic>(rnic_, o);
    link_ = std::make_unique<Link>(id_ + 1);
  }
  stage_ = std::make_unique<sched::Stage>(top(), *policy_, *this, stage_options);
  cq_ = *top().CreateCq(1u << 16);
  own_cq_ = *top().CreateCq(1u << 12);
  stage_->SetOwnCq(own_cq_);
  set_.WatchCq(rnic_.model_cq(cq_), this);
  set_.WatchCq(rnic_.model_cq(own_cq_), this);
  set_.Add(this);
  (void)top().AddGid(gid());
  SetUpPreemptionControl();
}

Gid ModelHost::daemon_gid() const {
  Gid g = gid();
  g[2] = 0xda;  // the daemon's own GID (its ACK QP), beside the VMs' gid()
  return g;
}

void ModelHost::WatchCards() {
  for (uint32_t id = 1; id <= rnic_.num_cqs(); ++id) {
    set_.WatchCq(rnic_.model_cq(RnicCq{id}), this);
  }
}

void ModelHost::JoinLayers(const std::vector<ModelHost*>& hosts,
                           const std::vector<ReliabilityMode>& mode,
                           const std::set<std::pair<uint32_t, uint32_t>>& pairs) {
  for (const auto& [a, b] : pairs) Link::Join(*hosts[a]->link_, *hosts[b]->link_);
  for (size_t i = 0; i < hosts.size(); ++i) {
    ModelHost& h = *hosts[i];
    (void)h.layer_->AttachPeerLink(h.link_.get(), h.daemon_gid());
    const Gid vm = h.gid();
    h.link_->AddGid(vm);
    h.layer_->SetMode(std::span(&vm, 1), mode[i]);
    h.WatchCards();  // the layer's ACK and transport CQs
    h.set_.MarkDirty(h);
  }
}

Gid ModelHost::gid() const {
  Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  for (int i = 0; i < 4; ++i) g[12 + i] = static_cast<uint8_t>(id_ >> (24 - 8 * i));
  return g;
}

void ModelHost::SetUpPreemptionControl() {
  // PeRF's preemption control queue on this card (§3.5.1): a managed QP
  // with its own CQ, connected to a sink QP of the same host, and a QP
  // that carries the ENABLEs, connected the same way.
  Rnic& r = top();
  RnicCq pcc = *r.CreateCq(1u << 12);
  QpInit init;
  init.caps.max_send_wr = kPcqDepth;
  init.send_cq = init.recv_cq = pcc;
  init.managed = true;
  Result<RnicQp> managed = r.CreateQp(init);
  if (!managed.ok()) return;  // a layer without managed QPs: no PeRF preemption control
  RnicQp pcq = *managed;
  init.managed = false;
  RnicQp sink = *r.CreateQp(init);
  RnicQp enabler = *r.CreateQp(init);
  RnicQp sink2 = *r.CreateQp(init);
  for (auto [a, b] : {std::pair{pcq, sink}, std::pair{enabler, sink2}}) {
    for (auto [q, peer] : {std::pair{a, b}, std::pair{b, a}}) {
      QpAttr at;
      at.state = QpState::kInit;
      (void)r.ModifyQp(q, at, kQpState);
      at.state = QpState::kRtr;
      at.dest_qpn = peer.qpn;
      (void)r.ModifyQp(q, at, kQpState | kQpDestQpn);
      at.state = QpState::kRts;
      (void)r.ModifyQp(q, at, kQpState);
    }
  }
  (void)stage_->SetPreemptionControl(sched::PreemptionControl{pcc, pcq, kPcqDepth, enabler});
  set_.WatchCq(rnic_.model_cq(pcc), this);
}

ModelHost::~ModelHost() = default;

policy::Nanos ModelHost::now_ns() const {
  return set_.sim().now() / model::kPicosPerNano;
}

sched::FlowId ModelHost::AddFlow(policy::TenantId tenant, RnicQp qp, QpType type,
                                 uint32_t depth, sched::DestId dest,
                                 Tenant* tenant_ctx) {
  sched::FlowSpec spec;
  spec.tenant = tenant;
  spec.owner = tenant_ctx;
  spec.qp = qp;
  spec.type = type;
  spec.send_cq = cq_;
  spec.rnic_depth = sched::HostSqDepth(depth, top().limits().max_qp_wr);
  spec.queue_capacity = depth;
  spec.dest = dest;
  const sched::FlowId flow =
      stage_->AddFlow(sched::Stage::PrepareFlow(spec), now_ns());
  // Both ends are vhost-rdma daemons: split SENDs are put back together.
  stage_->SetReceiverReassembles(flow, true);
  if (flows_.size() <= qp.qpn) flows_.resize(qp.qpn + 1);
  flows_[qp.qpn] = flow;
  if (senders_.size() <= qp.qpn) senders_.resize(qp.qpn + 1);
  return flow;
}

void ModelHost::CreditSender(RnicQp qp, policy::Nanos hold_ns) {
  if (senders_.size() <= qp.qpn) senders_.resize(qp.qpn + 1);
  senders_[qp.qpn].Expect(hold_ns);
}

void ModelHost::AddReceiver(RnicQp qp, uint32_t count, bool advertises, uint32_t sender_host,
                            uint32_t sender_qpn) {
  if (receivers_.size() <= qp.qpn) receivers_.resize(qp.qpn + 1);
  Receiver& rc = receivers_[qp.qpn];
  rc.qp = qp;
  rc.sender_host = sender_host;
  rc.sender_qpn = sender_qpn;
  RecvWr r;
  for (uint32_t i = 0; i < count; ++i) {
    r.wr_id = i;
    (void)top().PostRecv(qp, {&r, 1}, nullptr);
  }
  rc.advertises = advertises;
  if (!advertises) return;
  rc.credits.Posted(count);
  advertise_.push_back(qp.qpn);  // the first count, 0 included
  set_.MarkDirty(*this);
}

bool ModelHost::PrepareReceive(void*, const sched::ReceivePiece& piece) {
  if (!piece.credited || piece.qpn >= senders_.size()) return true;
  sched::CreditedSender& c = senders_[piece.qpn];
  const bool was_blocked = c.blocked();
  if (c.Take(now_ns())) return true;
  // Held until a credit comes (DeliverPeer wakes the flow) or the hold ends.
  if (!was_blocked && c.HoldEndsAt() != policy::kNever) {
    held_.push_back(piece.qpn);
    ArmWake(c.HoldEndsAt() * model::kPicosPerNano);
  }
  return false;
}

void ModelHost::AdvertiseCredits() {
  for (uint32_t qpn : advertise_) {
    Receiver& rc = receivers_[qpn];
    uint32_t posted = 0;
    if (!rc.credits.Due(&posted)) continue;
    set_.SendPeer(id_, rc.sender_host,
                  policy::PeerMessage::ReceiveCredit(id_, rc.sender_qpn, posted));
  }
  advertise_.clear();
}

void ModelHost::WakeExpiredHolds(policy::Nanos now) {
  std::erase_if(held_, [&](uint32_t qpn) {
    const sched::CreditedSender& c = senders_[qpn];
    if (!c.blocked()) return true;
    if (c.HoldEndsAt() > now) return false;
    if (qpn < flows_.size() && flows_[qpn]) stage_->Wake(*flows_[qpn]);
    return true;
  });
}

void ModelHost::AddProbePath(sched::DestId dest, RnicQp qp) {
  stage_->AddProbePath(dest, sched::ProbePath{qp, 0, 0});
}

void ModelHost::Turn() {
  dirty = false;
  const policy::Nanos now = now_ns();
  if (layer_) {
    link_->Deliver(*layer_);
    (void)layer_->Progress();
  }
  int n;
  while ((n = top().PollCq(cq_, poll_)) > 0) {
    for (int i = 0; i < n; ++i) {
      const Completion& c = poll_[i];
      if (c.opcode == WcOpcode::kRecv || c.opcode == WcOpcode::kRecvRdmaWithImm) {
        // The receiving guest posts its buffer again at once.
        if (c.qpn >= receivers_.size() || receivers_[c.qpn].qp.id == 0) continue;
        Receiver& rc = receivers_[c.qpn];
        RecvWr r;
        r.wr_id = c.wr_id;
        if (top().PostRecv(rc.qp, {&r, 1}, nullptr) == 1 && rc.advertises) {
          rc.credits.Posted(1);
          advertise_.push_back(c.qpn);
        }
        continue;
      }
      if (c.qpn < flows_.size() && flows_[c.qpn]) {
        stage_->OnCompletion(*flows_[c.qpn], c, now);
      }
    }
  }
  if (!advertise_.empty()) AdvertiseCredits();
  if (!held_.empty()) WakeExpiredHolds(now);
  // A pass is bounded (kMaxPass pieces): serve until nothing moves.
  for (int i = 0; i < 64 && stage_->Run(now); ++i) {
  }
  if (layer_) {
    // What the stage posted goes out now; the layer's timers need turns.
    (void)layer_->Progress();
    ArmWake(set_.sim().now() + model::NsToPs(kLayerTurnNs));
  }
  if (stage_->has_ready()) {
    // The model's send queue was full (unsignaled WRs free it silently):
    // look again shortly, as a polling data path would.
    ArmWake(set_.sim().now() + model::NsToPs(1000));
  }
  const sched::Nanos deadline = stage_->next_deadline();
  if (deadline != sched::kNoExpiry) ArmWake(deadline * model::kPicosPerNano);
}

void ModelHost::ArmWake(Picos at) {
  const Picos now = set_.sim().now();
  at = std::max(at, now);
  if (wake_armed_ > now && wake_armed_ <= at) return;  // an earlier one is armed
  wake_armed_ = at;
  set_.sim().ScheduleTimer(at, this, at);
}

void ModelHost::OnTimer(uint64_t cookie) {
  if (cookie == wake_armed_) wake_armed_ = UINT64_MAX;
  set_.MarkDirty(*this);
}

void ModelHost::OnWrDone(void* owner, uint32_t tag, WcStatus status,
                         uint32_t) {
  static_cast<Tenant*>(owner)->OnWrDone(tag, status);
}

void ModelHost::OnPostRefused(void*, uint32_t, Status) { ++refused_posts; }

bool ModelHost::SendPeerMessage(sched::DestId dest,
                                const policy::PeerMessage& m) {
  if (dest >= set_.size()) return false;
  set_.SendPeer(id_, dest, m);
  return true;
}

void ModelHost::DeliverPeer(uint32_t from, const policy::PeerMessage& m) {
  if (m.type == policy::PeerMessage::kReceiveCredit) {
    const uint32_t qpn = m.credit_qpn();
    if (qpn >= senders_.size()) return;
    const bool was_blocked = senders_[qpn].blocked();
    senders_[qpn].Advertise(m.credit_posted());
    // Only a flow held for want of credit needs a turn.
    if (!was_blocked || qpn >= flows_.size() || !flows_[qpn]) return;
    stage_->Wake(*flows_[qpn]);
  } else {
    stage_->OnPeerMessage(from, m, now_ns());
  }
  set_.MarkDirty(*this);
}

}  // namespace vrdma::bench
