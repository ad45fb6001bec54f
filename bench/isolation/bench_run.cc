// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/bench_run.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "bench/isolation/model_host.h"
#include "policy/policy_registry.h"

namespace vrdma::bench {

using model::Picos;

PolicyFactory PassThrough() {
  return PolicyByName("pass-through", {}, nullptr);
}

PolicyFactory PolicyByName(const std::string& name,
                           const std::vector<std::string>& options,
                           std::string* error) {
  std::string err;
  // Checked once here, so a bad knob fails before anything runs.
  if (!policy::MakePolicy(name, policy::CardProfile{}, options, 0, &err)) {
    if (error != nullptr) *error = err;
    return {};
  }
  return [name, options](const policy::CardProfile& card, uint32_t host) {
    std::string unused;
    return policy::MakePolicy(name, card, options, host, &unused);
  };
}

namespace {

constexpr uint64_t kSnapshotCookie = UINT64_MAX;

class Runner final : public model::TimerSink {
 public:
  Runner(const ScenarioSpec& spec, const PolicyFactory& policy)
      : spec_(spec), policy_(policy), world_(spec.fabric, spec.seed), set_(world_) {}

  std::vector<TenantResult> Run(RunStats* stats) {
    model::NicParams nic;
    if (!model::PresetByName(spec_.preset, &nic)) nic = model::ConnectX6RoCE100();
    const policy::CardProfile card = CardProfileOf(nic, spec_.fabric);
    uint32_t hosts = spec_.num_hosts;
    for (const TenantSpec& t : spec_.tenants) {
      hosts = std::max({hosts, t.src_host + 1, t.dst_host + 1});
    }
    for (uint32_t h = 0; h < hosts; ++h) {
      hosts_.push_back(std::make_unique<ModelHost>(set_, nic, policy_(card, h)));
    }
    world_.sim().set_cqe_listener(&set_);
    warm_ = model::NsToPs(spec_.warmup_us * 1e3);
    end_ = model::NsToPs(spec_.duration_us * 1e3);
    tenants_.resize(spec_.tenants.size());
    for (size_t ti = 0; ti < spec_.tenants.size(); ++ti) SetUpTenant(ti);
    SetUpProbePaths();
    world_.sim().ScheduleTimer(warm_, this, kSnapshotCookie);
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const bool reached_end = world_.sim().RunUntil(end_);
      set_.RunTurns();
      if (reached_end) break;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (stats != nullptr) {
      model::Simulator& sim = world_.sim();
      stats->events += sim.events_processed();
      stats->wall_s += std::chrono::duration<double>(t1 - t0).count();
      for (uint32_t h = 0; h < hosts; ++h) {
        stats->tx_packets += sim.host_stats(h).tx_packets;
        stats->retransmits += sim.host_stats(h).retransmitted_packets;
      }
      stats->drops += sim.fabric_stats().drops_overflow + sim.fabric_stats().drops_random;
      stats->pauses += sim.fabric_stats().pause_events;
      stats->ecn_marks += sim.fabric_stats().ecn_marks;
    }
    return Reduce();
  }

  void OnTimer(uint64_t cookie) override {
    if (cookie == kSnapshotCookie) {
      for (auto& q : qps_) q->bytes_at_warmup = WireBytes(*q);
      return;
    }
    QpCtx& q = *qps_[cookie];
    q.refill_pending = false;
    Fill(q);
  }

 private:
  // One tenant QP: the guest side of a perftest-shaped workload.
  struct QpCtx final : ModelHost::Tenant {
    Runner* runner = nullptr;
    uint32_t index = 0;
    uint32_t tenant = 0;
    ModelHost* host = nullptr;
    sched::FlowId flow = sched::kNoFlow;
    RnicQp qp, peer;
    uint32_t outstanding = 0;
    uint32_t seq = 0;
    uint32_t mask = 0;
    bool refill_pending = false;
    uint64_t bytes_at_warmup = 0;
    std::vector<Picos> admit;  // by tag
    void OnWrDone(uint32_t tag, WcStatus status) override {
      runner->OnDone(*this, tag, status);
    }
  };
  struct Tenant {
    uint64_t messages = 0;
    uint64_t bytes = 0;
    std::vector<Picos> mct_ps;
  };

  // Goodput: bytes the responder (or, for READ, the requester) accepted.
  uint64_t WireBytes(const QpCtx& q) const {
    return world_.sim().qp_delivered_bytes(q.qp.qpn - 1);
  }

  uint32_t Depth(const TenantSpec& s) const {
    return s.mode == Mode::kLatency ? 1 : std::max(s.tx_depth, s.batch);
  }

  static void Connect(model::ModelRnic& a, RnicQp qa, model::ModelRnic& b, RnicQp qb) {
    QpAttr at;
    at.state = QpState::kInit;
    (void)a.ModifyQp(qa, at, kQpState);
    (void)b.ModifyQp(qb, at, kQpState);
    at.state = QpState::kRtr;
    at.dest_qpn = qb.qpn;
    (void)a.ModifyQp(qa, at, kQpState | kQpDestQpn);
    at.dest_qpn = qa.qpn;
    (void)b.ModifyQp(qb, at, kQpState | kQpDestQpn);
    at.state = QpState::kRts;
    (void)a.ModifyQp(qa, at, kQpState);
    (void)b.ModifyQp(qb, at, kQpState);
  }

  void SetUpTenant(size_t ti) {
    const TenantSpec& s = spec_.tenants[ti];
    ModelHost& src = *hosts_[s.src_host];
    ModelHost& dst = *hosts_[s.dst_host];
    policy::TenantQos qos;
    qos.weight = s.weight;
    qos.app_class = s.app_class;
    src.stage().AddTenant(static_cast<policy::TenantId>(ti), qos);
    const uint32_t depth = Depth(s) + s.batch;
    for (uint32_t k = 0; k < s.num_qps; ++k) {
      auto q = std::make_unique<QpCtx>();
      q->runner = this;
      q->index = static_cast<uint32_t>(qps_.size());
      q->tenant = static_cast<uint32_t>(ti);
      q->host = &src;
      QpInit init;
      init.type = s.uc ? QpType::kUc : QpType::kRc;
      init.caps.max_send_wr = depth;
      init.send_cq = init.recv_cq = src.cq();
      q->qp = *src.rnic().CreateQp(init);
      init.send_cq = init.recv_cq = dst.cq();
      q->peer = *dst.rnic().CreateQp(init);
      Connect(src.rnic(), q->qp, dst.rnic(), q->peer);
      q->flow = src.AddFlow(static_cast<policy::TenantId>(ti), q->qp, depth,
                            s.dst_host, q.get());
      uint32_t cap = 1;
      while (cap < depth) cap <<= 1;
      q->admit.assign(cap, 0);
      q->mask = cap - 1;
      if (s.op == model::Op::kSend || s.op == model::Op::kSendImm) {
        // Split SENDs take a receive per piece; the guest reposts at once.
        dst.AddReceiver(q->peer, 2 * depth + 64);
      }
      paths_.insert({s.src_host, s.dst_host});
      world_.sim().ScheduleTimer(model::NsToPs(s.start_us * 1e3), this, q->index);
      qps_.push_back(std::move(q));
    }
  }

  // The stage's own QP from each sending host to each host it sends to
  // (reference flows, probes).
  void SetUpProbePaths() {
    for (const auto& [from, to] : paths_) {
      ModelHost& src = *hosts_[from];
      ModelHost& dst = *hosts_[to];
      QpInit init;
      init.caps.max_send_wr = 4;
      init.send_cq = init.recv_cq = src.own_cq();
      RnicQp a = *src.rnic().CreateQp(init);
      init.send_cq = init.recv_cq = dst.cq();
      RnicQp b = *dst.rnic().CreateQp(init);
      Connect(src.rnic(), a, dst.rnic(), b);
      src.AddProbePath(to, a);
    }
  }

  void Fill(QpCtx& q) {
    const TenantSpec& s = spec_.tenants[q.tenant];
    const Picos now = world_.sim().now();
    if (model::PsToNs(now) >= s.stop_us * 1e3) return;
    const uint32_t depth = Depth(s);
    const uint32_t batch = s.mode == Mode::kLatency ? 1 : std::max<uint32_t>(s.batch, 1);
    while (q.outstanding + batch <= depth) {
      uint32_t i = 0;
      for (; i < batch; ++i) {
        SendWr wr;
        wr.opcode = model::WrOpcodeOf(s.op);
        wr.send_flags = kSendSignaled;
        wr.num_sge = 1;
        wr.sge[0].length = s.msg_bytes;
        policy::WrInfo info;
        info.kind = sched::WrKindOf(model::WrOpcodeOf(s.op));
        info.bytes = s.msg_bytes;
        info.signaled = true;
        const uint32_t tag = q.seq & q.mask;
        if (!q.host->stage().Submit(q.flow, wr, tag, info, now / model::kPicosPerNano)) {
          break;  // the stage's FIFO is full: more after a completion
        }
        q.admit[tag] = now;
        ++q.seq;
        ++q.outstanding;
      }
      if (i < batch) break;
    }
    set_.MarkDirty(*q.host);  // one post list for the batch, now
  }

  void OnDone(QpCtx& q, uint32_t tag, WcStatus) {
    Tenant& t = tenants_[q.tenant];
    const TenantSpec& s = spec_.tenants[q.tenant];
    const Picos now = world_.sim().now();
    --q.outstanding;
    const Picos admitted = q.admit[tag & q.mask];
    if (now >= warm_ && now <= end_) {
      ++t.messages;
      t.bytes += s.msg_bytes;
      t.mct_ps.push_back(now - std::min(now, admitted));
    }
    if (s.turnaround_ns > 0) {
      if (!q.refill_pending) {
        q.refill_pending = true;
        world_.sim().ScheduleTimer(now + model::NsToPs(s.turnaround_ns), this, q.index);
      }
    } else {
      Fill(q);
    }
  }

  std::vector<TenantResult> Reduce() {
    std::vector<TenantResult> out;
    std::vector<uint64_t> wire(tenants_.size(), 0);
    for (const auto& q : qps_) wire[q->tenant] += WireBytes(*q) - q->bytes_at_warmup;
    const double window_us = model::PsToNs(end_ - warm_) / 1e3;
    for (size_t ti = 0; ti < tenants_.size(); ++ti) {
      Tenant& t = tenants_[ti];
      TenantResult r;
      r.tenant = spec_.tenants[ti].name;
      r.messages = t.messages;
      r.bytes = t.bytes;
      // Throughput from delivered bytes (a 1 GiB message may not complete
      // inside the window); rate and MCT from completions.
      r.gbps = wire[ti] * 8.0 / (window_us * 1e3);
      r.mmps = t.messages / window_us;
      if (!t.mct_ps.empty()) {
        double sum = 0;
        for (Picos p : t.mct_ps) sum += model::PsToNs(p);
        r.avg_us = sum / t.mct_ps.size() / 1e3;
        auto pct = [&](double f) {
          size_t k = std::min(t.mct_ps.size() - 1, static_cast<size_t>(f * t.mct_ps.size()));
          std::nth_element(t.mct_ps.begin(), t.mct_ps.begin() + k, t.mct_ps.end());
          return model::PsToNs(t.mct_ps[k]) / 1e3;
        };
        r.p50_us = pct(0.50);
        r.p99_us = pct(0.99);
      }
      out.push_back(r);
    }
    return out;
  }

  const ScenarioSpec& spec_;
  const PolicyFactory& policy_;
  model::ModelWorld world_;
  HostSet set_;
  std::vector<std::unique_ptr<ModelHost>> hosts_;
  std::vector<std::unique_ptr<QpCtx>> qps_;
  std::vector<Tenant> tenants_;
  std::set<std::pair<uint32_t, uint32_t>> paths_;
  Picos warm_ = 0, end_ = 0;
};

}  // namespace

std::vector<TenantResult> RunScenario(const ScenarioSpec& spec, const PolicyFactory& policy,
                                      RunStats* stats) {
  Runner r(spec, policy);
  return r.Run(stats);
}

TenantResult RunAlone(const ScenarioSpec& spec, size_t i, const PolicyFactory& policy,
                      RunStats* stats) {
  ScenarioSpec one = spec;
  one.tenants = {spec.tenants[i]};
  return RunScenario(one, policy, stats).front();
}

}  // namespace vrdma::bench
