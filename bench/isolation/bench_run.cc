// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/bench_run.h"

#include <algorithm>
#include <chrono>

#include "bench/isolation/model_stage.h"
#include "policy/pass_through_policy.h"

namespace vrdma::bench {

using model::Picos;

PolicyFactory PassThrough() {
  return [] { return std::make_unique<policy::PassThroughPolicy>(); };
}

PolicyFactory PolicyByName(const std::string& name) {
  if (name == "pass-through") return PassThrough();
  return {};
}

namespace {

constexpr uint64_t kRecvTag = 1ull << 63;

class Runner : public model::CompletionSink, public model::TimerSink {
 public:
  Runner(const ScenarioSpec& spec, policy::SchedulerPolicy& pol)
      : spec_(spec), sim_(spec.fabric, spec.seed), policy_(pol), stage_(sim_, pol) {}

  std::vector<TenantResult> Run(RunStats* stats) {
    model::NicParams nic;
    if (!model::PresetByName(spec_.preset, &nic)) nic = model::ConnectX6RoCE100();
    uint32_t hosts = spec_.num_hosts;
    for (const TenantSpec& t : spec_.tenants) {
      hosts = std::max({hosts, t.src_host + 1, t.dst_host + 1});
    }
    for (uint32_t h = 0; h < hosts; ++h) {
      sim_.AddHost(nic);
      cqs_.push_back(sim_.CreateCq(h));
    }
    sim_.set_completion_sink(this);
    warm_ = model::NsToPs(spec_.warmup_us * 1e3);
    end_ = model::NsToPs(spec_.duration_us * 1e3);
    tenants_.resize(spec_.tenants.size());
    for (size_t ti = 0; ti < spec_.tenants.size(); ++ti) SetUpTenant(ti);
    sim_.ScheduleTimer(warm_, this, kSnapshotCookie);
    const auto t0 = std::chrono::steady_clock::now();
    sim_.RunUntil(end_);
    const auto t1 = std::chrono::steady_clock::now();
    if (stats != nullptr) {
      stats->events += sim_.events_processed();
      stats->wall_s += std::chrono::duration<double>(t1 - t0).count();
      for (uint32_t h = 0; h < hosts; ++h) {
        stats->tx_packets += sim_.host_stats(h).tx_packets;
        stats->retransmits += sim_.host_stats(h).retransmitted_packets;
      }
      stats->drops += sim_.fabric_stats().drops_overflow + sim_.fabric_stats().drops_random;
      stats->pauses += sim_.fabric_stats().pause_events;
      stats->ecn_marks += sim_.fabric_stats().ecn_marks;
    }
    return Reduce();
  }

  void OnCqe(const model::Cqe& c) override {
    if (c.wr_id & kRecvTag) {
      sim_.PostRecv(c.qp, c.wr_id);  // keep the receiver's queue full
      return;
    }
    const uint32_t qi = static_cast<uint32_t>(c.wr_id >> 32);
    const uint32_t seq = static_cast<uint32_t>(c.wr_id);
    QpCtx& q = qps_[qi];
    Tenant& t = tenants_[q.tenant];
    const TenantSpec& s = spec_.tenants[q.tenant];
    --q.outstanding;
    const Picos admitted = q.admit[seq & q.mask];
    if (c.time >= warm_ && c.time <= end_) {
      ++t.messages;
      t.bytes += s.msg_bytes;
      t.mct_ps.push_back(c.time - admitted);
    }
    model::Wr wr;
    wr.op = s.op;
    wr.bytes = s.msg_bytes;
    wr.signaled = true;
    stage_.OnCompleted(q.flow, wr, admitted);
    if (s.turnaround_ns > 0) {
      if (!q.refill_pending) {
        q.refill_pending = true;
        sim_.ScheduleTimer(sim_.now() + model::NsToPs(s.turnaround_ns), this, qi);
      }
    } else {
      Fill(qi);
    }
  }

  void OnTimer(uint64_t cookie) override {
    if (cookie == kSnapshotCookie) {
      for (QpCtx& q : qps_) q.bytes_at_warmup = WireBytes(q);
      return;
    }
    QpCtx& q = qps_[cookie];
    q.refill_pending = false;
    Fill(static_cast<uint32_t>(cookie));
  }

 private:
  struct QpCtx {
    uint32_t tenant = 0;
    model::QpId qp = 0, peer = 0;
    policy::FlowId flow = 0;
    uint32_t outstanding = 0;
    uint32_t seq = 0;
    uint32_t mask = 0;
    bool refill_pending = false;
    uint64_t bytes_at_warmup = 0;
    std::vector<Picos> admit;
  };
  struct Tenant {
    uint64_t messages = 0;
    uint64_t bytes = 0;
    std::vector<Picos> mct_ps;
  };

  static constexpr uint64_t kSnapshotCookie = UINT64_MAX;

  // Goodput: bytes the responder (or, for READ, the requester) accepted.
  uint64_t WireBytes(const QpCtx& q) const { return sim_.qp_delivered_bytes(q.qp); }

  uint32_t Depth(const TenantSpec& s) const {
    return s.mode == Mode::kLatency ? 1 : std::max(s.tx_depth, s.batch);
  }

  void SetUpTenant(size_t ti) {
    const TenantSpec& s = spec_.tenants[ti];
    policy_.OnTenantAdded(static_cast<policy::TenantId>(ti), policy::TenantQos{});
    const uint32_t depth = Depth(s);
    for (uint32_t k = 0; k < s.num_qps; ++k) {
      model::QpConfig c;
      c.transport = s.uc ? model::Transport::kUc : model::Transport::kRc;
      c.sq_depth = depth + s.batch;
      c.send_cq = cqs_[s.src_host];
      c.recv_cq = cqs_[s.src_host];
      QpCtx q;
      q.tenant = static_cast<uint32_t>(ti);
      q.qp = sim_.CreateQp(s.src_host, c);
      c.send_cq = cqs_[s.dst_host];
      c.recv_cq = cqs_[s.dst_host];
      q.peer = sim_.CreateQp(s.dst_host, c);
      sim_.Connect(q.qp, q.peer);
      q.flow = stage_.AddFlow(static_cast<policy::TenantId>(ti), q.qp);
      uint32_t cap = 1;
      while (cap < depth + s.batch) cap <<= 1;
      q.admit.assign(cap, 0);
      q.mask = cap - 1;
      if (s.op == model::Op::kSend || s.op == model::Op::kSendImm) {
        for (uint32_t r = 0; r < depth + s.batch + 8; ++r) sim_.PostRecv(q.peer, kRecvTag | r);
      }
      const uint32_t qi = static_cast<uint32_t>(qps_.size());
      qps_.push_back(std::move(q));
      sim_.ScheduleTimer(model::NsToPs(s.start_us * 1e3), this, qi);
    }
  }

  void Fill(uint32_t qi) {
    QpCtx& q = qps_[qi];
    const TenantSpec& s = spec_.tenants[q.tenant];
    if (model::PsToNs(sim_.now()) >= s.stop_us * 1e3) return;
    const uint32_t depth = Depth(s);
    const uint32_t batch = s.mode == Mode::kLatency ? 1 : std::max<uint32_t>(s.batch, 1);
    while (q.outstanding + batch <= depth) {
      wrs_.clear();
      for (uint32_t i = 0; i < batch; ++i) {
        model::Wr wr;
        wr.op = s.op;
        wr.bytes = s.msg_bytes;
        wr.signaled = true;
        const uint32_t seq = q.seq++;
        wr.wr_id = (static_cast<uint64_t>(qi) << 32) | seq;
        q.admit[seq & q.mask] = sim_.now();
        wrs_.push_back(wr);
      }
      q.outstanding += batch;
      stage_.Submit(q.flow, wrs_);
    }
  }

  std::vector<TenantResult> Reduce() {
    std::vector<TenantResult> out;
    std::vector<uint64_t> wire(tenants_.size(), 0);
    for (const QpCtx& q : qps_) wire[q.tenant] += WireBytes(q) - q.bytes_at_warmup;
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
  model::Simulator sim_;
  policy::SchedulerPolicy& policy_;
  ModelStage stage_;
  std::vector<model::CqId> cqs_;
  std::vector<QpCtx> qps_;
  std::vector<Tenant> tenants_;
  std::vector<model::Wr> wrs_;
  Picos warm_ = 0, end_ = 0;
};

}  // namespace

std::vector<TenantResult> RunScenario(const ScenarioSpec& spec, const PolicyFactory& policy,
                                      RunStats* stats) {
  std::unique_ptr<policy::SchedulerPolicy> p = policy();
  Runner r(spec, *p);
  return r.Run(stats);
}

TenantResult RunAlone(const ScenarioSpec& spec, size_t i, const PolicyFactory& policy,
                      RunStats* stats) {
  ScenarioSpec one = spec;
  one.tenants = {spec.tenants[i]};
  return RunScenario(one, policy, stats).front();
}

}  // namespace vrdma::bench
