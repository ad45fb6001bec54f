// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/bench_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <unistd.h>

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

// The pairs of hosts whose layers talk (a tenant between them), a < b.
std::set<std::pair<uint32_t, uint32_t>> LayerPairs(const ScenarioSpec& spec) {
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const TenantSpec& t : spec.tenants) {
    if (t.src_host != t.dst_host) {
      pairs.insert({std::min(t.src_host, t.dst_host), std::max(t.src_host, t.dst_host)});
    }
  }
  return pairs;
}

}  // namespace

std::string CheckRunnable(const ScenarioSpec& spec) {
  std::string out;
  if (!spec.tenants.empty() && spec.tenants.front().reliability) {
    std::map<uint32_t, uint32_t> peers;
    for (const auto& [a, b] : LayerPairs(spec)) {
      ++peers[a];
      ++peers[b];
    }
    for (const auto& [host, n] : peers) {
      if (n > ModelHost::kLayerPeers) {
        out += fmt::format("{}: {}: host {} would have {} peer daemons; a ReliableRnic keeps "
                           "{} (its peer table)\n",
                           spec.source, spec.name, host, n, ModelHost::kLayerPeers);
        break;
      }
    }
  }
  for (size_t i = 0; i < spec.tenants.size(); ++i) {
    const TenantSpec& t = spec.tenants[i];
    const std::string at = fmt::format(
        "{}{}: {}", t.source.empty() ? spec.source : t.source,
        (t.source.empty() && spec.source.empty()) ? spec.name : ": " + spec.name,
        t.path.empty() ? fmt::format("tenants[{}]", i) : t.path);
    auto refuse = [&](const std::string& what) {
      out += fmt::format("{}{} is not supported by the RNIC model yet\n", at, what);
    };
    if (t.mrs.count > 0) refuse(".mrs: registering memory regions");
    if (t.reliability) {
      // The layer carries every opcode over SoftRnic (steps 11-12); the
      // bench drives it with WRITEs only so far.
      if (t.transport != Transport::kRc) refuse(".reliability: a layer under a non-rc QP");
      for (const OpShare& o : t.ops) {
        if (o.op != OpKind::kWrite) refuse(".reliability: ops other than write through the layer");
      }
    }
    if (t.reliability.has_value() != spec.tenants.front().reliability.has_value()) {
      refuse(".reliability: set on some tenants only (the layer runs on every host or none)");
    }
    if (t.inline_data) refuse(".inline: inline data");
    // The file allows a UD message of one 4096-byte MTU; the card's may be
    // smaller.
    model::NicParams nic;
    if (!model::PresetByName(spec.preset, &nic)) nic = model::ConnectX6RoCE100();
    for (const TenantSpec& u : spec.tenants) {
      const bool shares = u.src_host == t.src_host || u.src_host == t.dst_host ||
                          u.dst_host == t.src_host || u.dst_host == t.dst_host;
      if (shares && u.reliability && t.reliability && *u.reliability != *t.reliability) {
        refuse(".reliability: two modes on one host (a host's VMs share one GID here)");
        break;
      }
    }
    for (const SizeShare& z : t.sizes) {
      if (t.transport == Transport::kUd && z.bytes > nic.mtu_bytes) {
        out += fmt::format("{}.size: a ud message of {} bytes is over the MTU of card {} ({})\n",
                           at, z.bytes, spec.preset, nic.mtu_bytes);
      }
    }
  }
  if (!out.empty()) out.pop_back();
  return out;
}

std::string AloneKey(const ScenarioSpec& s, const TenantSpec& t) {
  // Everything the runner reads for a tenant alone under pass-through
  // (weight and class only matter to other policies).
  std::string key = fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", s.preset, s.num_hosts, s.duration_us,
      s.warmup_us, s.seed, s.fabric.link_propagation_ps, s.fabric.switch_latency_ps,
      s.fabric.switch_buffer_bytes, s.fabric.ecn_threshold_bytes, s.fabric.random_loss,
      s.fabric.lossless, s.fabric.pfc_xoff_bytes, s.fabric.pfc_xon_bytes, t.batch,
      static_cast<int>(t.transport), t.processes);
  key += fmt::format("|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", t.qps_per_process,
                     static_cast<int>(t.mode), t.tx_depth, t.rate_mps, t.start_us, t.stop_us,
                     t.turnaround_ns, t.src_host, t.dst_host, t.inline_data, t.mrs.count);
  if (s.adaptive_signaling) key += "|tpl";
  key += fmt::format("|r{}|{}|{}|{}|{}", t.recv_depth ? static_cast<int64_t>(*t.recv_depth) : -1,
                     t.rnr_retry ? *t.rnr_retry : -1, t.retry_cnt ? *t.retry_cnt : -1,
                     t.rnr_timer ? *t.rnr_timer : -1, t.timeout ? *t.timeout : -1);
  for (const OpShare& o : t.ops) key += fmt::format("|o{}:{}", static_cast<int>(o.op), o.weight);
  for (const SizeShare& z : t.sizes) key += fmt::format("|s{}:{}", z.bytes, z.weight);
  if (t.reliability) key += fmt::format("|rel{}", static_cast<int>(*t.reliability));
  return key;
}

ScenarioSpec AloneSpec(const ScenarioSpec& spec, size_t i) {
  ScenarioSpec one = spec;
  one.tenants = {spec.tenants[i]};
  if (one.tenants[0].reliability) {
    // docs/reliability.md §9: a layer tenant's reference is native RC on
    // the lossless fabric.
    one.tenants[0].reliability = Reliability::kNative;
    one.fabric.random_loss = 0;
    one.fabric.lossless = true;
  }
  return one;
}

void ScaleDuration(ScenarioSpec* spec, double scale) {
  spec->duration_us *= scale;
  spec->warmup_us *= scale;
}

namespace {

constexpr uint64_t kSnapshotCookie = UINT64_MAX;
constexpr uint64_t kArrivalCookie = 1ull << 40;  // | process index
// Open loop: messages one process keeps waiting before it drops arrivals.
constexpr size_t kMaxBacklog = 1u << 20;

model::Op ModelOp(OpKind op) {
  switch (op) {
    case OpKind::kWriteImm: return model::Op::kWriteImm;
    case OpKind::kSend: return model::Op::kSend;
    case OpKind::kSendImm: return model::Op::kSendImm;
    case OpKind::kRead: return model::Op::kRead;
    case OpKind::kCas: return model::Op::kCas;
    case OpKind::kFaa: return model::Op::kFaa;
    case OpKind::kWrite: break;
  }
  return model::Op::kWrite;
}

QpType QpTypeOf(Transport t) {
  switch (t) {
    case Transport::kUc: return QpType::kUc;
    case Transport::kUd: return QpType::kUd;
    case Transport::kRc: break;
  }
  return QpType::kRc;
}

// Each tenant's atomics go to one 8-byte word of its own at its peer (all
// its QPs share it, like a counter): a tenant's atomics serialise on one
// atomic unit of that card (NicParams::num_atomic_units).
uint64_t AtomicAddress(size_t tenant) { return 0x10000 * (uint64_t{tenant} + 1); }

// splitmix64: the draws of op and size mixes, reproducible from the seed.
uint64_t NextRandom(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename Share>
size_t Pick(const std::vector<Share>& shares, uint64_t* state) {
  if (shares.size() == 1) return 0;  // no draw: the same as a single value
  uint64_t total = 0;
  for (const Share& s : shares) total += s.weight;
  uint64_t r = NextRandom(state) % total;
  for (size_t i = 0; i < shares.size(); ++i) {
    if (r < shares[i].weight) return i;
    r -= shares[i].weight;
  }
  return shares.size() - 1;
}

// The process's resident set (Linux /proc/self/statm); 0 elsewhere.
uint64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

class Runner final : public model::TimerSink {
 public:
  Runner(const ScenarioSpec& spec, const PolicyFactory& policy)
      : spec_(spec), policy_(policy), world_(spec.fabric, spec.seed), set_(world_) {}

  std::vector<TenantResult> Run(RunStats* stats) {
    const uint64_t rss0 = ResidentBytes();
    model::NicParams nic;
    if (!model::PresetByName(spec_.preset, &nic)) nic = model::ConnectX6RoCE100();
    const policy::CardProfile card = CardProfileOf(nic, spec_.fabric);
    uint32_t hosts = spec_.num_hosts;
    for (const TenantSpec& t : spec_.tenants) {
      hosts = std::max({hosts, t.src_host + 1, t.dst_host + 1});
    }
    const bool layer = !spec_.tenants.empty() && spec_.tenants.front().reliability.has_value();
    for (uint32_t h = 0; h < hosts; ++h) {
      hosts_.push_back(std::make_unique<ModelHost>(
          set_, nic, policy_(card, h),
          sched::StageOptions{.adaptive_signaling = spec_.adaptive_signaling},
          HostLayer{.on = layer,
                           .packet_lifetime_ns =
                               static_cast<uint64_t>(spec_.packet_lifetime_us * 1000)}));
    }
    if (layer) {
      std::vector<ReliabilityMode> mode(hosts, ReliabilityMode::kNative);
      for (const TenantSpec& t : spec_.tenants) {
        if (*t.reliability != Reliability::kUc) continue;
        mode[t.src_host] = mode[t.dst_host] = ReliabilityMode::kUc;
      }
      std::vector<ModelHost*> all;
      for (auto& h : hosts_) all.push_back(h.get());
      ModelHost::JoinLayers(all, mode, LayerPairs(spec_));
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
        stats->rnic_signals += hosts_[h]->stage().rnic_signals();
        stats->guest_wrs += hosts_[h]->stage().wrs_done();
        stats->tx_packets += sim.host_stats(h).tx_packets;
        stats->retransmits += sim.host_stats(h).retransmitted_packets;
        stats->drops += sim.host_stats(h).rx_buffer_drops;  // lossy NIC RX buffers
        if (const ReliableRnic* l = hosts_[h]->layer()) {
          const reliable::ReliabilityCounters& c = l->counters();
          stats->layer_connects_uc += c.connects_uc;
          stats->layer_chunks_sent += c.chunks_sent;
          stats->layer_retx_sent += c.retx_sent;
          stats->layer_lost_rack += c.lost_rack;
          stats->layer_lost_rto += c.lost_rto;
          stats->layer_cwnd_resets += c.cwnd_resets;
          stats->layer_acks_sent += c.acks_sent;
          stats->layer_peer_unmatched += c.peer_unmatched;
          stats->layer_messages_failed += c.messages_failed;
        }
      }
      stats->drops += sim.fabric_stats().drops_overflow + sim.fabric_stats().drops_random;
      stats->drops_after_warmup += Drops() - drops_at_warmup_;
      stats->max_port_bytes = std::max(stats->max_port_bytes, sim.fabric_stats().max_port_bytes);
      stats->pauses += sim.fabric_stats().pause_events;
      stats->ecn_marks += sim.fabric_stats().ecn_marks;
      const uint64_t rss1 = ResidentBytes();
      stats->model_qps = std::max<uint64_t>(stats->model_qps, sim.num_qps());
      stats->qp_state_bytes = std::max(stats->qp_state_bytes, sim.qp_state_bytes());
      stats->rss_growth_bytes = std::max(stats->rss_growth_bytes, rss1 - std::min(rss0, rss1));
    }
    return Reduce();
  }

  void OnTimer(uint64_t cookie) override {
    if (cookie == kSnapshotCookie) {
      for (auto& q : qps_) q->bytes_at_warmup = WireBytes(*q);
      drops_at_warmup_ = Drops();
      return;
    }
    if (cookie & kArrivalCookie) {
      Arrive(procs_[cookie & ~kArrivalCookie]);
      return;
    }
    Proc& p = procs_[cookie];
    p.refill_pending = false;
    Fill(p);
  }

 private:
  // One tenant QP: the guest side of a perftest-shaped workload.
  struct QpCtx final : ModelHost::Tenant {
    Runner* runner = nullptr;
    uint32_t index = 0;
    uint32_t tenant = 0;
    uint32_t proc = 0;
    ModelHost* host = nullptr;
    sched::FlowId flow = sched::kNoFlow;
    RnicQp qp, peer;
    RnicAh ah;                    // UD: towards peer's card
    // Through a layer: the tenant's registered source and target.
    uint32_t lkey = 0, rkey = 0;
    uint64_t laddr = 0, raddr = 0;
    uint32_t outstanding = 0;
    bool failed = false;          // a WR completed in error: the QP is dead
    uint32_t seq = 0;
    uint32_t mask = 0;
    uint64_t bytes_at_warmup = 0;
    uint64_t rng = 0;
    std::optional<std::pair<OpKind, uint32_t>> drawn;  // refused by the stage
    std::vector<Picos> admit;     // by tag
    std::vector<uint32_t> bytes;  // by tag
    void OnWrDone(uint32_t tag, WcStatus status) override {
      runner->OnDone(*this, tag, status);
    }
  };
  // One posting loop (a guest process): its QPs, its refill, its arrivals.
  struct Proc {
    uint32_t tenant = 0;
    std::vector<QpCtx*> qps;
    bool refill_pending = false;
    size_t next_qp = 0;           // open loop: round robin
    std::deque<Picos> backlog;    // open loop: arrival times not yet posted
    uint64_t ticks = 0;
    uint64_t dropped = 0;
  };
  struct Tenant {
    uint64_t messages = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    // Message completion times, in completion order: 4 bytes each while
    // every one fits (< 4.29 ms), else all in 8 bytes (a one-second run of
    // a 100 Mmps tenant keeps ~90 M of them).
    std::vector<uint32_t> mct32;
    std::vector<Picos> mct_ps;
    bool wide = false;
    void AddMct(Picos v) {
      if (!wide && v <= UINT32_MAX) {
        mct32.push_back(static_cast<uint32_t>(v));
        return;
      }
      if (!wide) {
        wide = true;
        mct_ps.assign(mct32.begin(), mct32.end());
        std::vector<uint32_t>().swap(mct32);
      }
      mct_ps.push_back(v);
    }
  };

  // Every packet dropped so far: switch ports (overflow, random) and
  // lossy NIC RX buffers.
  uint64_t Drops() const {
    const model::Simulator& sim = world_.sim();
    uint64_t d = sim.fabric_stats().drops_overflow + sim.fabric_stats().drops_random;
    for (uint32_t h = 0; h < hosts_.size(); ++h) d += sim.host_stats(h).rx_buffer_drops;
    return d;
  }

  // Goodput: bytes the responder (or, for READ, the requester) accepted.
  uint64_t WireBytes(const QpCtx& q) const {
    return world_.sim().qp_delivered_bytes(model::ModelRnic::SimQp(q.qp.qpn));
  }

  static uint32_t Depth(const TenantSpec& s) {
    return s.mode == Mode::kLatency ? 1 : std::max(s.tx_depth, s.batch);
  }
  static uint32_t Batch(const TenantSpec& s) {
    return s.mode == Mode::kLatency ? 1 : std::max<uint32_t>(s.batch, 1);
  }
  bool Stopped(const TenantSpec& s) const {
    return model::PsToNs(world_.sim().now()) >= s.stop_us * 1e3;
  }

  static void Connect(Rnic& a, RnicQp qa, Rnic& b, RnicQp qb) {
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

  // A UD QP has no peer: straight to RTS.
  // Through a ReliableRnic: what it frames by (GIDs, access, MTU, the
  // retry attributes it carries in CONNECT), as reliable_uc_test does.
  static void ConnectLayer(Rnic& a, RnicQp qa, const Gid& ga, Rnic& b, RnicQp qb,
                           const Gid& gb, const TenantSpec& s, uint32_t mtu) {
    for (auto [r, q] : {std::pair<Rnic*, RnicQp>{&a, qa}, std::pair<Rnic*, RnicQp>{&b, qb}}) {
      QpAttr at;
      at.state = QpState::kInit;
      at.access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
      (void)r->ModifyQp(q, at, kQpState | kQpAccessFlags);
    }
    for (auto [r, q, self, peer, dest] :
         {std::tuple<Rnic*, RnicQp, Gid, Gid, uint32_t>{&a, qa, ga, gb, qb.qpn},
          std::tuple<Rnic*, RnicQp, Gid, Gid, uint32_t>{&b, qb, gb, ga, qa.qpn}}) {
      QpAttr at;
      at.state = QpState::kRtr;
      at.av.sgid = self;
      at.av.dgid = peer;
      at.path_mtu_bytes = mtu;
      at.dest_qpn = dest;
      at.max_dest_rd_atomic = 4;
      at.min_rnr_timer = s.rnr_timer.value_or(1);
      (void)r->ModifyQp(q, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                   kQpMaxDestRdAtomic | kQpMinRnrTimer);
    }
    for (auto [r, q] : {std::pair<Rnic*, RnicQp>{&a, qa}, std::pair<Rnic*, RnicQp>{&b, qb}}) {
      QpAttr at;
      at.state = QpState::kRts;
      at.timeout = s.timeout.value_or(14);  // perftest's default: 67 ms
      at.retry_cnt = s.retry_cnt.value_or(7);
      at.rnr_retry = s.rnr_retry.value_or(7);
      at.max_rd_atomic = 4;
      (void)r->ModifyQp(q, at, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                   kQpMaxQpRdAtomic);
    }
  }

  static void BringUpUd(Rnic& r, RnicQp q) {
    QpAttr at;
    for (QpState st : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
      at.state = st;
      (void)r.ModifyQp(q, at, kQpState);
    }
  }

  // The tenant's RC retry attributes, when it sets any, on one end.
  static void SetRetry(Rnic& r, RnicQp q, const TenantSpec& s) {
    Result<QpAttr> at = r.QueryQp(q);
    if (!at.ok()) return;
    at->retry_cnt = s.retry_cnt.value_or(7);
    at->rnr_retry = s.rnr_retry.value_or(7);
    at->min_rnr_timer = s.rnr_timer.value_or(1);  // the model's default, 10 us
    uint32_t mask = kQpRetryCnt | kQpRnrRetry | kQpMinRnrTimer;
    if (s.timeout) {  // unset: the card's rto
      at->timeout = *s.timeout;
      mask |= kQpTimeout;
    }
    (void)r.ModifyQp(q, *at, mask);
  }

  void SetUpTenant(size_t ti) {
    const TenantSpec& s = spec_.tenants[ti];
    ModelHost& src = *hosts_[s.src_host];
    ModelHost& dst = *hosts_[s.dst_host];
    policy::TenantQos qos;
    qos.weight = s.weight;
    qos.app_class = s.app_class;
    qos.max_rate_bps = static_cast<uint64_t>(s.max_gbps * 1e9);
    qos.max_msgs_per_s = static_cast<uint64_t>(s.max_mmps * 1e6);
    qos.min_rate_bps = static_cast<uint64_t>(s.min_gbps * 1e9);
    qos.latency_target_ns = static_cast<policy::Nanos>(s.latency_target_us * 1e3);
    src.stage().AddTenant(static_cast<policy::TenantId>(ti), qos);
    const uint32_t depth = Depth(s) + s.batch;
    bool receives = false;
    // SENDs (split ones take a receive per piece) and WRITE with immediate
    // consume receives; the guest reposts at once.
    for (const OpShare& o : s.ops) receives = receives || ConsumesReceive(o.op);
    const bool ud = s.transport == Transport::kUd;
    // Through a layer the tenant's WRITEs name real memory: the layer
    // checks a retransmitted unit's rkey and copies it into place.
    RnicPd pd_src{1}, pd_dst{1};
    RnicMr mr_src{}, mr_dst{};
    uint64_t iova_src = 0, iova_dst = 0;
    if (s.reliability) {
      uint64_t most = 1;
      for (const SizeShare& z : s.sizes) most = std::max<uint64_t>(most, z.bytes);
      pd_src = *src.top().AllocPd();
      pd_dst = *dst.top().AllocPd();
      iova_src = (uint64_t{ti} + 1) << 36;
      iova_dst = iova_src | (uint64_t{1} << 35);
      memory_.push_back(std::make_unique<uint8_t[]>(most));
      mr_src = *src.top().RegMr(pd_src, memory_.back().get(), most, iova_src,
                                kAccessLocalWrite);
      memory_.push_back(std::make_unique<uint8_t[]>(most));
      mr_dst = *dst.top().RegMr(pd_dst, memory_.back().get(), most, iova_dst,
                                kAccessLocalWrite | kAccessRemoteWrite);
    }
    for (uint32_t p = 0; p < s.processes; ++p) {
      const uint32_t proc = static_cast<uint32_t>(procs_.size());
      procs_.emplace_back();
      procs_.back().tenant = static_cast<uint32_t>(ti);
      for (uint32_t k = 0; k < s.qps_per_process; ++k) {
        auto q = std::make_unique<QpCtx>();
        q->runner = this;
        q->index = static_cast<uint32_t>(qps_.size());
        q->tenant = static_cast<uint32_t>(ti);
        q->proc = proc;
        q->host = &src;
        q->rng = spec_.seed * 0x9E3779B97F4A7C15ull + q->index;
        QpInit init;
        init.type = QpTypeOf(s.transport);
        // As the engine sizes a guest QP's host QP.
        init.caps.max_send_wr = sched::HostSqDepth(depth, src.top().limits().max_qp_wr);
        init.send_cq = init.recv_cq = src.cq();
        if (s.reliability) {
          init.caps.max_recv_wr = 64;
          init.caps.max_send_sge = init.caps.max_recv_sge = 1;
          init.caps.type = QpType::kRc;
          init.pd = pd_src;
        }
        q->qp = *src.top().CreateQp(init);
        init.send_cq = init.recv_cq = dst.cq();
        if (s.reliability) init.pd = pd_dst;
        q->peer = *dst.top().CreateQp(init);
        if (ud) {
          BringUpUd(src.top(), q->qp);
          BringUpUd(dst.top(), q->peer);
          AddressVector av;
          av.sgid = src.gid();
          av.dgid = dst.gid();
          q->ah = *src.top().CreateAh(RnicPd{1}, av);
        } else if (s.reliability) {
          ConnectLayer(src.top(), q->qp, src.gid(), dst.top(), q->peer, dst.gid(), s,
                       src.rnic().limits().active_mtu_bytes);
          q->lkey = mr_src.lkey;
          q->laddr = iova_src;
          q->rkey = mr_dst.rkey;
          q->raddr = iova_dst;
        } else {
          Connect(src.top(), q->qp, dst.top(), q->peer);
        }
        if (!s.reliability && (s.rnr_retry || s.retry_cnt || s.rnr_timer || s.timeout)) {
          SetRetry(src.top(), q->qp, s);
          SetRetry(dst.top(), q->peer, s);
        }
        q->flow = src.AddFlow(static_cast<policy::TenantId>(ti), q->qp, init.type, depth,
                              s.dst_host, q.get());
        uint32_t cap = 1;
        while (cap < depth) cap <<= 1;
        q->admit.assign(cap, 0);
        q->bytes.assign(cap, 0);
        q->mask = cap - 1;
        // RC receivers advertise their receives (UC and UD drop what finds
        // none: no RNR to avoid).
        const bool credited = s.transport == Transport::kRc;
        if (receives) {
          dst.AddReceiver(q->peer, s.recv_depth.value_or(2 * depth + 64), credited, s.src_host,
                          q->qp.qpn);
        }
        if (receives && credited) {
          // A held SEND waits as long as the sender's RNR retries would.
          src.CreditSender(q->qp, sched::CreditHoldNs(
                                       s.rnr_retry.value_or(7),
                                       model::Simulator::RnrTimerPs(s.rnr_timer.value_or(1)) /
                                           model::kPicosPerNano));
        }
        paths_.insert({s.src_host, s.dst_host});
        procs_[proc].qps.push_back(q.get());
        qps_.push_back(std::move(q));
      }
      const uint64_t cookie = s.rate_mps > 0 ? (kArrivalCookie | proc) : proc;
      world_.sim().ScheduleTimer(model::NsToPs(s.start_us * 1e3), this, cookie);
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
      RnicQp a = *src.top().CreateQp(init);
      init.send_cq = init.recv_cq = dst.cq();
      RnicQp b = *dst.top().CreateQp(init);
      Connect(src.top(), a, dst.top(), b);
      src.AddProbePath(to, a);
    }
  }

  // Hands one WR to the stage; false when its FIFO is full.
  bool Submit(QpCtx& q, const TenantSpec& s, Picos now, Picos admitted) {
    if (!q.drawn) {
      const OpKind op = s.ops[Pick(s.ops, &q.rng)].op;
      q.drawn.emplace(op, s.sizes[Pick(s.sizes, &q.rng)].bytes);
    }
    const OpKind op = q.drawn->first;
    const uint32_t bytes = IsAtomic(op) ? 8 : q.drawn->second;
    SendWr wr;
    wr.opcode = model::WrOpcodeOf(ModelOp(op));
    wr.send_flags = kSendSignaled;
    wr.num_sge = 1;
    wr.sge[0].length = bytes;
    if (IsAtomic(op)) wr.remote_addr = AtomicAddress(q.tenant);
    if (q.lkey != 0) {
      wr.sge[0].addr = q.laddr;
      wr.sge[0].lkey = q.lkey;
      wr.remote_addr = q.raddr;
      wr.rkey = q.rkey;
    }
    if (q.ah.id != 0) {
      wr.ah = q.ah;
      wr.remote_qpn = q.peer.qpn;
    }
    policy::WrInfo info;
    info.kind = sched::WrKindOf(wr.opcode);
    info.bytes = bytes;
    info.signaled = true;
    const uint32_t tag = q.seq & q.mask;
    if (!q.host->stage().Submit(q.flow, wr, tag, info, now / model::kPicosPerNano)) {
      return false;  // the stage's FIFO is full: more after a completion
    }
    q.drawn.reset();
    q.admit[tag] = admitted;
    q.bytes[tag] = bytes;
    ++q.seq;
    ++q.outstanding;
    return true;
  }

  // Closed loop: keep the QP's depth in flight, in batches.
  void FillQp(QpCtx& q) {
    const TenantSpec& s = spec_.tenants[q.tenant];
    if (Stopped(s) || q.failed) return;
    const Picos now = world_.sim().now();
    const uint32_t depth = Depth(s);
    const uint32_t batch = Batch(s);
    while (q.outstanding + batch <= depth) {
      uint32_t i = 0;
      for (; i < batch && Submit(q, s, now, now); ++i) {
      }
      if (i < batch) break;
    }
    set_.MarkDirty(*q.host);  // one post list for the batch, now
  }

  // Open loop: post waiting arrivals, a batch at a time, round robin over
  // the process's QPs that have room for it.
  void PostBacklog(Proc& p) {
    const TenantSpec& s = spec_.tenants[p.tenant];
    if (Stopped(s)) return;
    const Picos now = world_.sim().now();
    const uint32_t depth = Depth(s);
    while (!p.backlog.empty()) {
      const uint32_t batch = std::min<uint32_t>(Batch(s), static_cast<uint32_t>(p.backlog.size()));
      QpCtx* q = nullptr;
      for (size_t k = 0; k < p.qps.size() && q == nullptr; ++k) {
        QpCtx* c = p.qps[(p.next_qp + k) % p.qps.size()];
        if (!c->failed && c->outstanding + batch <= depth) q = c;
      }
      if (q == nullptr) break;
      p.next_qp = (std::find(p.qps.begin(), p.qps.end(), q) - p.qps.begin() + 1) % p.qps.size();
      uint32_t i = 0;
      for (; i < batch && Submit(*q, s, now, p.backlog.front()); ++i) p.backlog.pop_front();
      set_.MarkDirty(*q->host);
      if (i < batch) break;
    }
  }

  void Arrive(Proc& p) {
    const TenantSpec& s = spec_.tenants[p.tenant];
    if (Stopped(s)) return;
    const Picos now = world_.sim().now();
    for (uint32_t i = 0; i < Batch(s); ++i) {
      if (p.backlog.size() < kMaxBacklog) {
        p.backlog.push_back(now);
      } else {
        ++p.dropped;
      }
    }
    // The k-th batch arrives at start + k * batch / rate (no drift).
    ++p.ticks;
    const double next_ns = s.start_us * 1e3 + p.ticks * Batch(s) * 1e9 / s.rate_mps;
    world_.sim().ScheduleTimer(model::NsToPs(next_ns), this,
                               kArrivalCookie | static_cast<uint64_t>(&p - procs_.data()));
    PostBacklog(p);
  }

  void Fill(Proc& p) {
    if (spec_.tenants[p.tenant].rate_mps > 0) {
      PostBacklog(p);
      return;
    }
    for (QpCtx* q : p.qps) FillQp(*q);
  }

  void OnDone(QpCtx& q, uint32_t tag, WcStatus status) {
    Tenant& t = tenants_[q.tenant];
    const TenantSpec& s = spec_.tenants[q.tenant];
    const Picos now = world_.sim().now();
    --q.outstanding;
    if (status != WcStatus::kSuccess) {
      // The QP is in error (retries ran out) and flushes the rest: its
      // guest stops posting on it.
      ++t.errors;
      q.failed = true;
      return;
    }
    const Picos admitted = q.admit[tag & q.mask];
    if (now >= warm_ && now <= end_) {
      ++t.messages;
      t.bytes += q.bytes[tag & q.mask];
      t.AddMct(now - std::min(now, admitted));
    }
    Proc& p = procs_[q.proc];
    if (s.turnaround_ns > 0) {
      if (!p.refill_pending) {
        p.refill_pending = true;
        world_.sim().ScheduleTimer(now + model::NsToPs(s.turnaround_ns), this, q.proc);
      }
    } else if (s.rate_mps > 0) {
      PostBacklog(p);
    } else {
      FillQp(q);
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
      r.errors = t.errors;
      // Throughput from delivered bytes (a 1 GiB message may not complete
      // inside the window); rate and MCT from completions.
      r.gbps = wire[ti] * 8.0 / (window_us * 1e3);
      // Through a layer: goodput, the guest payload completed (a uc
      // tenant's bytes travel on the layer's QPs, docs/reliability.md §9).
      if (spec_.tenants[ti].reliability) r.gbps = t.bytes * 8.0 / (window_us * 1e3);
      r.mmps = t.messages / window_us;
      auto figures = [&r](auto& mct) {
        if (mct.empty()) return;
        double sum = 0;
        for (Picos p : mct) sum += model::PsToNs(p);
        r.avg_us = sum / mct.size() / 1e3;
        auto pct = [&](double f) {
          size_t k = std::min(mct.size() - 1, static_cast<size_t>(f * mct.size()));
          std::nth_element(mct.begin(), mct.begin() + k, mct.end());
          return model::PsToNs(mct[k]) / 1e3;
        };
        r.p50_us = pct(0.50);
        r.p99_us = pct(0.99);
      };
      if (t.wide) {
        figures(t.mct_ps);
      } else {
        figures(t.mct32);
      }
      out.push_back(r);
    }
    for (const Proc& p : procs_) out[p.tenant].dropped += p.dropped;
    return out;
  }

  const ScenarioSpec& spec_;
  const PolicyFactory& policy_;
  model::ModelWorld world_;
  HostSet set_;
  std::vector<std::unique_ptr<ModelHost>> hosts_;
  std::vector<std::unique_ptr<QpCtx>> qps_;
  std::vector<Proc> procs_;
  std::vector<Tenant> tenants_;
  std::set<std::pair<uint32_t, uint32_t>> paths_;
  std::vector<std::unique_ptr<uint8_t[]>> memory_;  // layer tenants' MRs
  Picos warm_ = 0, end_ = 0;
  uint64_t drops_at_warmup_ = 0;
};

}  // namespace

std::vector<TenantResult> RunScenario(const ScenarioSpec& spec, const PolicyFactory& policy,
                                      RunStats* stats) {
  const std::string refused = CheckRunnable(spec);
  if (!refused.empty()) {
    std::fprintf(stderr, "%s\n", refused.c_str());
    std::abort();  // callers check first: nothing runs half-configured
  }
  Runner r(spec, policy);
  return r.Run(stats);
}

TenantResult RunAlone(const ScenarioSpec& spec, size_t i, const PolicyFactory& policy,
                      RunStats* stats) {
  return RunScenario(AloneSpec(spec, i), policy, stats).front();
}

}  // namespace vrdma::bench
