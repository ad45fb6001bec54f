// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// One host of the isolation bench: a vhost-rdma daemon's scheduler stage
// and policy (the same sched::Stage the engine runs) on that host's card of
// the RNIC MODEL, reached through vrdma::Rnic (model::ModelRnic). The
// bench's tenants submit their WRs here as the engine would after decoding
// a guest's ring; the stage reports them back when done.
//
// Everything runs on the model's virtual clock: a host takes a turn (polls
// its CQs, runs the stage) whenever the model makes one of its CQEs
// visible, a timer it armed fires (the stage's next deadline, a retry), or
// a tenant submits work. Figures are model outputs, not hardware ones.
#ifndef VRDMA_BENCH_ISOLATION_MODEL_HOST_H_
#define VRDMA_BENCH_ISOLATION_MODEL_HOST_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "backend/reliable_rnic/inproc_peer_link.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "backend/rnic_model/model_rnic.h"
#include "backend/scheduler/receive_credit.h"
#include "backend/scheduler/stage.h"
#include "policy/scheduler_policy.h"

namespace vrdma::bench {

// The card a policy plans for, from the model's parameters (the figures
// the model's preset is built on, docs/rnic-model.md).
policy::CardProfile CardProfileOf(const model::NicParams& nic,
                                  const model::FabricParams& fabric);

// A model host's reliability layer (docs/reliability.md), if any.
struct HostLayer {
  bool on = false;
  uint64_t packet_lifetime_ns = 0;  // ReceiverParams::packet_lifetime_ns
};

class ModelHost;

// The hosts' shared context: the model, which host must take a turn, and
// the control channel between daemons (peer messages).
class HostSet final : public model::CqeListener {
 public:
  explicit HostSet(model::ModelWorld& world);
  ~HostSet() override;
  model::ModelWorld& world() { return world_; }
  model::Simulator& sim() { return world_.sim(); }
  void Add(ModelHost* host) { hosts_.push_back(host); }
  ModelHost& host(uint32_t id) { return *hosts_[id]; }
  size_t size() const { return hosts_.size(); }
  // The host must take a turn before virtual time moves on.
  void MarkDirty(ModelHost& host);
  // Runs every pending turn; returns true when any ran.
  bool RunTurns();
  void WatchCq(model::CqId cq, ModelHost* host);
  void OnCqeVisible(model::CqId cq) override;
  // Peer messages travel the control channel with a fixed one-way delay.
  static constexpr double kControlDelayNs = 2000;
  void SendPeer(uint32_t from, uint32_t to, const policy::PeerMessage& m);

 private:
  class Delivery;
  model::ModelWorld& world_;
  std::vector<ModelHost*> hosts_;
  std::vector<ModelHost*> dirty_;
  std::vector<ModelHost*> cq_host_;  // by model CQ id
  std::vector<std::unique_ptr<Delivery>> deliveries_;
};

class ModelHost final : public sched::StageOwner, public model::TimerSink {
 public:
  // Told when the stage is done with one of the tenant's WRs.
  class Tenant {
   public:
    virtual ~Tenant() = default;
    virtual void OnWrDone(uint32_t tag, WcStatus status) = 0;
  };

  // layer.on: a ReliableRnic (docs/reliability.md) between the stage and
  // the card: every QP, CQ and WR of this host goes through it (top());
  // JoinLayers connects the hosts' layers.
  ModelHost(HostSet& set, const model::NicParams& nic,
            std::unique_ptr<policy::SchedulerPolicy> policy,
            sched::StageOptions stage_options = {}, HostLayer layer = {});
  ~ModelHost() override;

  uint32_t id() const { return id_; }
  model::ModelRnic& rnic() { return rnic_; }
  // What the stage and the tenants' QPs use: the layer, or the card.
  Rnic& top() { return layer_ ? static_cast<Rnic&>(*layer_) : rnic_; }
  ReliableRnic* layer() { return layer_.get(); }
  // Joins the layers of hosts (each built with reliability_layer) by
  // in-process peer links, one per pair of hosts in pairs (a < b; a
  // layer keeps at most kLayerPeers peers), attaches them (each host's
  // daemon GID) and puts each host's VM GID (gid()) in mode[host]. Every
  // CQ the layers made is watched, and a host with a layer takes a turn at
  // least every kLayerTurnNs (its timers: ACK timer, RTO, CONNECT repeats).
  static void JoinLayers(const std::vector<ModelHost*>& hosts,
                         const std::vector<ReliabilityMode>& mode,
                         const std::set<std::pair<uint32_t, uint32_t>>& pairs);
  // ReliableRnic's peer table (ReliableRnicOptions::max_peers, left at its
  // default): a layer with more peer daemons ignores the others' HELLOs.
  static constexpr uint32_t kLayerPeers = kDefaultMaxPeers;
  static constexpr uint64_t kLayerTurnNs = 2000;
  RnicCq cq() const { return cq_; }
  sched::Stage& stage() { return *stage_; }
  policy::Nanos now_ns() const;

  // The GID this host's card sends from and is reached at (registered on
  // its ModelRnic: UD address handles name it).
  Gid gid() const;

  // A tenant QP sending from this host (already connected, or a UD QP in
  // RTS).
  sched::FlowId AddFlow(policy::TenantId tenant, RnicQp qp, QpType type,
                        uint32_t depth, sched::DestId dest, Tenant* tenant_ctx);
  // A peer QP on this host that receives: the host keeps `count` receives
  // posted on it, reposting one per receive completion (count 0: a guest
  // that never posts any), and, if it advertises (RC), tells the sending
  // QP sender_qpn on host sender_host how many (receive credits,
  // docs/scheduler.md).
  void AddReceiver(RnicQp qp, uint32_t count, bool advertises, uint32_t sender_host,
                   uint32_t sender_qpn);
  // Flow QP qp sends to a receiver that advertises (AddReceiver on its
  // host): under a policy that holds sends, its receive-consuming messages
  // wait for advertised receives, at most hold_ns (sched::CreditHoldNs).
  void CreditSender(RnicQp qp, policy::Nanos hold_ns);
  // The stage's own QP towards dest (probes), send CQ = own_cq().
  RnicCq own_cq() const { return own_cq_; }
  void AddProbePath(sched::DestId dest, RnicQp qp);

  void Turn();
  void DeliverPeer(uint32_t from, const policy::PeerMessage& m);

  // sched::StageOwner
  void OnWrDone(void* owner, uint32_t tag, WcStatus status,
                uint32_t byte_len) override;
  void OnMarkerReached(void*, uint32_t, WcStatus) override {}
  void OnPostRefused(void*, uint32_t, Status) override;
  // Native (piece.credited false): the message goes, whatever the
  // receiver has posted. Credited: only while the receiver advertised a
  // receive for it, or its hold ran out.
  bool PrepareReceive(void*, const sched::ReceivePiece& piece) override;
  bool SendPeerMessage(sched::DestId dest,
                       const policy::PeerMessage& m) override;
  // model::TimerSink: the stage's deadline or a retry.
  void OnTimer(uint64_t cookie) override;

  bool dirty = false;
  uint64_t refused_posts = 0;

 private:
  void ArmWake(model::Picos at);
  void AdvertiseCredits();
  void WakeExpiredHolds(policy::Nanos now);
  void SetUpPreemptionControl();
  static constexpr uint32_t kPcqDepth = 64;

  using Link = reliable::InprocPeerLinkT<ReliableRnic>;
  void WatchCards();
  Gid daemon_gid() const;

  HostSet& set_;
  uint32_t id_;
  model::ModelRnic rnic_;
  std::unique_ptr<ReliableRnic> layer_;
  std::unique_ptr<Link> link_;
  std::unique_ptr<policy::SchedulerPolicy> policy_;
  std::unique_ptr<sched::Stage> stage_;
  RnicCq cq_;
  RnicCq own_cq_;
  struct Receiver {
    RnicQp qp;  // id 0: none
    sched::CreditAdvertiser credits;
    bool advertises = false;
    uint32_t sender_host = 0;
    uint32_t sender_qpn = 0;
  };
  // By QPN (dense: the model's QP ids + 1); id 0 / nullopt: none.
  std::vector<Receiver> receivers_;
  std::vector<std::optional<sched::FlowId>> flows_;
  std::vector<sched::CreditedSender> senders_;  // by the flow's QPN
  std::vector<uint32_t> advertise_;  // receivers whose count moved
  std::vector<uint32_t> held_;       // senders held with a finite hold
  model::Picos wake_armed_ = UINT64_MAX;
  std::array<Completion, 64> poll_{};
};

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_MODEL_HOST_H_
