// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/engine_stage_run.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>

#include "backend/engine/objects.h"
#include "backend/engine/scheduler_stage.h"
#include "backend/rnic_model/model_rnic.h"

namespace vrdma::bench {

namespace {

using model::Picos;

struct Flow {
  engine::QpObj qp;
  RnicQp peer;
  uint32_t tenant = 0;
  uint32_t outstanding = 0;
  uint32_t seq = 0;
  std::vector<Picos> admit;  // by seq & mask
  uint32_t mask = 0;
  uint64_t bytes_at_warmup = 0;
};

class Resolver : public engine::SchedulerStage::Sink {
 public:
  explicit Resolver(std::deque<Flow>& flows) : flows_(flows) {}
  engine::QpObj* ResolveFlow(policy::TenantId, policy::FlowId flow) override {
    return flow < flows_.size() ? &flows_[flow].qp : nullptr;
  }
  void OnQueuedPostFailed(engine::QpObj&, uint32_t, Status) override { ++failed; }
  uint64_t failed = 0;

 private:
  std::deque<Flow>& flows_;
};

policy::WrKind Kind(model::Op op) {
  return op == model::Op::kRead ? policy::WrKind::kRead
         : op == model::Op::kSend ? policy::WrKind::kSend
                                  : policy::WrKind::kWrite;
}

WrOpcode Opcode(model::Op op) {
  return op == model::Op::kRead ? WrOpcode::kRdmaRead
         : op == model::Op::kSend ? WrOpcode::kSend
                                  : WrOpcode::kRdmaWrite;
}

}  // namespace

std::vector<TenantResult> RunScenarioEngineStage(const ScenarioSpec& spec,
                                                 const PolicyFactory& policy_factory,
                                                 double quantum_ns, RunStats* stats) {
  if (spec.tenants.empty()) return {};
  const uint32_t src = spec.tenants[0].src_host;
  uint32_t hosts = spec.num_hosts;
  for (const TenantSpec& t : spec.tenants) {
    if (t.src_host != src) return {};
    hosts = std::max({hosts, t.src_host + 1, t.dst_host + 1});
  }
  model::NicParams nic;
  if (!model::PresetByName(spec.preset, &nic)) nic = model::ConnectX6RoCE100();
  model::ModelWorld world(spec.fabric, spec.seed);
  std::vector<std::unique_ptr<model::ModelRnic>> cards;
  std::vector<RnicCq> cqs;
  for (uint32_t h = 0; h < hosts; ++h) {
    cards.push_back(std::make_unique<model::ModelRnic>(world, nic));
    cards.back()->set_progress_quantum(model::NsToPs(quantum_ns));
    cqs.push_back(*cards.back()->CreateCq(1u << 16));
  }
  std::unique_ptr<policy::SchedulerPolicy> pol = policy_factory();
  std::deque<Flow> flows;
  Resolver resolver(flows);
  engine::SchedulerStage stage(*cards[src], *pol, resolver);

  auto connect = [&](model::ModelRnic& a, RnicQp qa, model::ModelRnic& b, RnicQp qb) {
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
  };

  for (size_t ti = 0; ti < spec.tenants.size(); ++ti) {
    const TenantSpec& s = spec.tenants[ti];
    pol->OnTenantAdded(static_cast<policy::TenantId>(ti), policy::TenantQos{});
    const uint32_t depth = s.mode == Mode::kLatency ? 1 : std::max(s.tx_depth, s.batch);
    for (uint32_t k = 0; k < s.num_qps; ++k) {
      Flow& f = flows.emplace_back();
      f.tenant = static_cast<uint32_t>(ti);
      QpInit init;
      init.type = s.uc ? QpType::kUc : QpType::kRc;
      init.caps.max_send_wr = depth + s.batch;
      init.send_cq = cqs[src];
      init.recv_cq = cqs[src];
      f.qp.rnic = *cards[src]->CreateQp(init);
      init.send_cq = cqs[s.dst_host];
      init.recv_cq = cqs[s.dst_host];
      f.peer = *cards[s.dst_host]->CreateQp(init);
      connect(*cards[src], f.qp.rnic, *cards[s.dst_host], f.peer);
      f.qp.flow.entries.resize(engine::SchedulerStage::kFlowCapacity);
      uint32_t cap = 1;
      while (cap < depth + s.batch + engine::SchedulerStage::kFlowCapacity) cap <<= 1;
      f.admit.assign(cap, 0);
      f.mask = cap - 1;
      if (s.op == model::Op::kSend) {
        for (uint32_t r = 0; r < depth + s.batch + 8; ++r) {
          RecvWr rw;
          rw.wr_id = 1ull << 63;
          (void)cards[s.dst_host]->PostRecv(f.peer, {&rw, 1}, nullptr);
        }
      }
    }
  }

  model::Simulator& sim = world.sim();
  const Picos warm = model::NsToPs(spec.warmup_us * 1e3);
  const Picos end = model::NsToPs(spec.duration_us * 1e3);
  std::vector<uint64_t> msgs(spec.tenants.size(), 0);
  std::vector<std::vector<Picos>> mct(spec.tenants.size());
  bool snap = false;

  auto fill = [&](uint32_t fi) {
    Flow& f = flows[fi];
    const TenantSpec& s = spec.tenants[f.tenant];
    if (model::PsToNs(sim.now()) < s.start_us * 1e3 || model::PsToNs(sim.now()) >= s.stop_us * 1e3) {
      return;
    }
    const uint32_t depth = s.mode == Mode::kLatency ? 1 : std::max(s.tx_depth, s.batch);
    const uint32_t batch = s.mode == Mode::kLatency ? 1 : std::max<uint32_t>(s.batch, 1);
    while (f.outstanding + batch <= depth) {
      for (uint32_t i = 0; i < batch; ++i) {
        SendWr wr;
        const uint32_t seq = f.seq;
        wr.wr_id = (static_cast<uint64_t>(fi) << 32) | seq;
        wr.opcode = Opcode(s.op);
        wr.send_flags = kSendSignaled;
        wr.num_sge = 1;
        wr.sge[0].length = s.msg_bytes;
        policy::WrInfo info;
        info.tenant = f.tenant;
        info.flow = fi;
        info.kind = Kind(s.op);
        info.bytes = s.msg_bytes;
        info.signaled = true;
        const Status st = stage.Submit(f.qp, wr, info, seq & f.mask,
                                       sim.now() / model::kPicosPerNano);
        if (st != Status::kOk) return;  // FIFO full: retry on the next turn
        f.admit[seq & f.mask] = sim.now();
        ++f.seq;
        ++f.outstanding;
      }
    }
  };

  const auto t0 = std::chrono::steady_clock::now();
  Completion wc[64];
  while (sim.now() < end) {
    for (uint32_t fi = 0; fi < flows.size(); ++fi) fill(fi);
    stage.Drain(sim.now() / model::kPicosPerNano);
    cards[src]->Progress();
    if (!snap && sim.now() >= warm) {
      snap = true;
      for (Flow& f : flows) f.bytes_at_warmup = sim.qp_delivered_bytes(f.qp.rnic.qpn - 1);
    }
    for (uint32_t h = 0; h < hosts; ++h) {
      int n;
      while ((n = cards[h]->PollCq(cqs[h], wc)) > 0) {
        for (int i = 0; i < n; ++i) {
          if (wc[i].wr_id >> 63) {  // a receive: repost it
            RecvWr rw;
            rw.wr_id = wc[i].wr_id;
            for (Flow& f : flows) {
              if (f.peer.qpn == wc[i].qpn) {
                (void)cards[h]->PostRecv(f.peer, {&rw, 1}, nullptr);
                break;
              }
            }
            continue;
          }
          const uint32_t fi = static_cast<uint32_t>(wc[i].wr_id >> 32);
          const uint32_t seq = static_cast<uint32_t>(wc[i].wr_id);
          Flow& f = flows[fi];
          --f.outstanding;
          const Picos done = wc[i].timestamp_ns * model::kPicosPerNano;
          const Picos admitted = f.admit[seq & f.mask];
          const TenantSpec& s = spec.tenants[f.tenant];
          if (done >= warm && done <= end) {
            ++msgs[f.tenant];
            mct[f.tenant].push_back(done - std::min(done, admitted));
          }
          policy::WrInfo info;
          info.tenant = f.tenant;
          info.flow = fi;
          info.kind = Kind(s.op);
          info.bytes = s.msg_bytes;
          info.signaled = true;
          pol->OnCompleted(wc[i].timestamp_ns, info, (done - std::min(done, admitted)) / 1000);
        }
      }
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (stats != nullptr) {
    stats->events += sim.events_processed();
    stats->wall_s += std::chrono::duration<double>(t1 - t0).count();
  }

  std::vector<uint64_t> wire(spec.tenants.size(), 0);
  for (Flow& f : flows) wire[f.tenant] += sim.qp_delivered_bytes(f.qp.rnic.qpn - 1) - f.bytes_at_warmup;
  const double window_us = model::PsToNs(end - warm) / 1e3;
  std::vector<TenantResult> out;
  for (size_t ti = 0; ti < spec.tenants.size(); ++ti) {
    TenantResult r;
    r.tenant = spec.tenants[ti].name;
    r.messages = msgs[ti];
    r.gbps = wire[ti] * 8.0 / (window_us * 1e3);
    r.mmps = msgs[ti] / window_us;
    auto& v = mct[ti];
    if (!v.empty()) {
      double sum = 0;
      for (Picos p : v) sum += model::PsToNs(p);
      r.avg_us = sum / v.size() / 1e3;
      auto pct = [&](double q) {
        size_t k = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
        std::nth_element(v.begin(), v.begin() + k, v.end());
        return model::PsToNs(v[k]) / 1e3;
      };
      r.p50_us = pct(0.5);
      r.p99_us = pct(0.99);
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace vrdma::bench
