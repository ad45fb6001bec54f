// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Microarchitecture anomalies of the RNIC timing MODEL at Simulator level:
// QP-context thrash, MTT/MPT pressure, a PCIe-inefficient attacker. Each
// test prints the model's figure beside the paper's. MODEL figures, not
// hardware measurements.
#include <cstdio>
#include <random>
#include <vector>

#include "backend/rnic_model/simulator.h"
#include "gtest/gtest.h"

namespace vrdma::model {
namespace {

// A tenant on host 0 writing to host 1.
struct TenantSpec {
  uint32_t bytes = 65536;
  uint32_t qps = 1;
  uint32_t depth = 8;          // closed loop: WRs outstanding per QP
  Picos gap = 0;               // > 0: open loop, one WR every gap, QPs round robin
  uint64_t mr_bytes = 0;       // > 0: own MRs of this size at both ends
  uint32_t page_bytes = 4096;
  uint32_t mrs = 1;            // MRs per end; each WR picks one at random
  bool random_offsets = false; // else offset 0 (+ misalign)
  uint64_t misalign = 0;
};

struct TenantResult {
  double gbps = 0;
  double mct_us = 0;           // mean post-to-completion time
  uint64_t done = 0;
};

class Mix : public CompletionSink, public TimerSink {
 public:
  Mix(const NicParams& p, const std::vector<TenantSpec>& specs) : sim_(FabricParams{}, 1) {
    a_ = sim_.AddHost(p);
    b_ = sim_.AddHost(p);
    sim_.set_completion_sink(this);
    tenants_.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      T& t = tenants_[i];
      t.spec = specs[i];
      QpConfig c;
      c.send_cq = sim_.CreateCq(a_);
      c.recv_cq = c.send_cq;
      c.sq_depth = std::max<uint32_t>(t.spec.depth, 1) + 1;
      QpConfig d = c;
      d.send_cq = sim_.CreateCq(b_);
      d.recv_cq = d.send_cq;
      for (uint32_t q = 0; q < t.spec.qps; ++q) {
        const QpId x = sim_.CreateQp(a_, c), y = sim_.CreateQp(b_, d);
        sim_.Connect(x, y);
        t.qps.push_back(x);
        if (qp_tenant_.size() <= x) qp_tenant_.resize(x + 1, -1);
        qp_tenant_[x] = static_cast<int>(i);
      }
      for (uint32_t m = 0; m < t.spec.mrs && t.spec.mr_bytes > 0; ++m) {
        t.lmrs.push_back(sim_.RegisterMr(a_, t.spec.mr_bytes, t.spec.page_bytes));
        t.rmrs.push_back(sim_.RegisterMr(b_, t.spec.mr_bytes, t.spec.page_bytes));
      }
    }
  }

  void Go(Picos warmup, Picos duration) {
    for (size_t i = 0; i < tenants_.size(); ++i) {
      T& t = tenants_[i];
      if (t.spec.gap > 0) {
        sim_.ScheduleTimer(0, this, i);
      } else {
        for (QpId q : t.qps) {
          for (uint32_t k = 0; k < t.spec.depth; ++k) Post(t, q);
        }
      }
    }
    sim_.RunUntil(warmup);
    for (T& t : tenants_) {
      t.bytes0 = Delivered(t);
      t.done = 0;
      t.mct = 0;
    }
    warm_ = true;
    sim_.RunUntil(warmup + duration);
    for (T& t : tenants_) {
      t.result.gbps = static_cast<double>(Delivered(t) - t.bytes0) * 8 / PsToNs(duration);
      t.result.done = t.done;
      t.result.mct_us = t.done ? PsToNs(t.mct) / 1e3 / static_cast<double>(t.done) : 0;
    }
  }

  const TenantResult& result(size_t i) const { return tenants_[i].result; }
  const Simulator& sim() const { return sim_; }
  HostId a() const { return a_; }
  HostId b() const { return b_; }

  void OnCqe(const Cqe& c) override {
    if (c.recv || c.qp >= qp_tenant_.size() || qp_tenant_[c.qp] < 0) return;
    T& t = tenants_[qp_tenant_[c.qp]];
    if (warm_) {
      ++t.done;
      t.mct += c.time - c.post_time;
    }
    if (t.spec.gap == 0) Post(t, c.qp);
  }
  void OnTimer(uint64_t i) override {
    T& t = tenants_[i];
    const QpId q = t.qps[t.next++ % t.qps.size()];
    if (sim_.sq_room(q) > 0) Post(t, q);
    sim_.ScheduleTimer(sim_.now() + t.spec.gap, this, i);
  }

 private:
  struct T {
    TenantSpec spec;
    std::vector<QpId> qps;
    std::vector<MrId> lmrs, rmrs;
    uint64_t next = 0, bytes0 = 0, done = 0;
    Picos mct = 0;
    TenantResult result;
  };
  uint64_t Delivered(const T& t) const {
    uint64_t n = 0;
    for (QpId q : t.qps) n += sim_.qp_delivered_bytes(q);
    return n;
  }
  void Post(T& t, QpId q) {
    Wr w;
    w.op = Op::kWrite;
    w.bytes = t.spec.bytes;
    if (!t.lmrs.empty()) {
      const size_t m = rng_() % t.lmrs.size();
      w.local_mr = t.lmrs[m];
      w.remote_mr = t.rmrs[m];
    }
    if (t.spec.random_offsets && t.spec.mr_bytes > t.spec.bytes) {
      const uint64_t slots = (t.spec.mr_bytes - t.spec.bytes) / 4096;
      w.local_offset = (rng_() % slots) * 4096;
      w.remote_offset = (rng_() % slots) * 4096;
    }
    w.local_offset += t.spec.misalign;
    w.remote_offset += t.spec.misalign;
    sim_.PostSend(q, {&w, 1});
  }

  Simulator sim_;
  HostId a_ = 0, b_ = 0;
  std::vector<T> tenants_;
  std::vector<int> qp_tenant_;
  std::mt19937_64 rng_{11};
  bool warm_ = false;
};

constexpr Picos kWarm = NsToPs(100e3);
constexpr Picos kRun = NsToPs(1000e3);

// ---------------------------------------------------------------------------
// QP-context thrash: a victim WRITE tenant next to an attacker posting small
// WRITEs round robin over many QPs, at the same offered rate (4 Mmps) with
// 256 QPs (fits the QPC and WQE caches) and with 8192 (does not). The victim
// writes to random pages of its own 192 MiB MR, as Husky's victims write to
// their MRs: its MTT misses go through the card's miss handler with the
// attacker's QPC misses. (A victim that never misses only shares the link
// and PCIe with the attacker; with the bounded miss handler its figure then
// moves by a few % either way with the attacker's timing, no anomaly.)
TEST(PcieCacheAnomaly, QpContextThrashSlowsAWriteVictim) {
  const NicParams p = ConnectX5RoCE100();
  TenantSpec victim;
  victim.bytes = 16384;
  victim.depth = 4;
  victim.mr_bytes = 192u << 20;
  victim.random_offsets = true;
  auto run = [&](uint32_t attacker_qps, double* qpc_miss, double* wait_ns) {
    TenantSpec attacker;
    attacker.bytes = 64;
    attacker.qps = attacker_qps;
    attacker.depth = 1;
    attacker.gap = NsToPs(250);
    Mix r(p, attacker_qps == 0 ? std::vector<TenantSpec>{victim}
                               : std::vector<TenantSpec>{victim, attacker});
    r.Go(kWarm, kRun);
    *qpc_miss = r.sim().cache_stats(r.a()).qpc.miss_rate();
    const NicCacheStats& rx = r.sim().cache_stats(r.b());
    *wait_ns = rx.fills ? PsToNs(rx.fill_wait_ps) / static_cast<double>(rx.fills) : 0;
    return r.result(0);
  };
  double q0, w0, q1, w1, q2, w2;
  const TenantResult alone = run(0, &q0, &w0);
  const TenantResult fits = run(256, &q1, &w1);
  const TenantResult thrash = run(8192, &q2, &w2);
  std::printf(
      "QPC thrash (cx5-100 model): victim 16 KiB WRITE alone %.1f Gbps / %.2f us; "
      "next to 4 Mmps over 256 QPs %.1f Gbps / %.2f us (QPC miss %.1f %%, receiver's fills "
      "wait %.0f ns); over 8192 QPs %.1f Gbps / %.2f us (QPC miss %.1f %%, fills wait %.0f ns). "
      "Paper: Husky/SwiftRDMA §3.2 report degradation from QPC misses, no figure for this mix; "
      "SwiftRDMA warns at >= 30 %% QPC misses with > 512 QPs\n",
      alone.gbps, alone.mct_us, fits.gbps, fits.mct_us, 100 * q1, w1, thrash.gbps,
      thrash.mct_us, 100 * q2, w2);
  // The victim's own context stays hot under LRU (it is used every few us);
  // the attacker's QPC misses reach it through the miss handler they share
  // with the victim's MTT misses (x0.91 with 4 fill slots, x0.97 unbounded).
  EXPECT_LT(q1, 0.05);
  EXPECT_GT(q2, 0.30);
  EXPECT_GT(w2, w1 + 50) << "the attacker's misses queue in the miss handler";
  EXPECT_LT(thrash.gbps, 0.95 * fits.gbps);
  EXPECT_GT(thrash.mct_us, fits.mct_us);
}

// ---------------------------------------------------------------------------
// MTT/MPT pressure. SwiftRDMA §3.2 (quoting Husky, NSDI'23): a workload's
// throughput falls from 96.6 to 48 Gbps (x0.50) as the NIC cache miss rate
// rises from 17.2 % to 49.1 %. Model: a single-QP victim writing 4 KiB
// messages to random pages of its 192 MiB MR (which the MTT cache, 256 MiB
// of 4 KiB pages, holds), next to an attacker posting 64 B non-inline
// WRITEs at 4 Mmps: to random pages of one 1 GiB MR (4 KiB pages), to
// random MRs among 4096, or (the control) to an always-hot region. Same
// wire load in all three; only the caches differ.
TEST(PcieCacheAnomaly, MttPressureSlowsAVictimAsMissesRise) {
  NicParams p = ConnectX5RoCE100();
  p.pcie.inline_threshold_bytes = 0;   // the attacker's 64 B go by DMA
  TenantSpec victim;
  victim.bytes = 4096;
  victim.depth = 16;
  victim.mr_bytes = 192u << 20;
  victim.random_offsets = true;
  TenantSpec control;
  control.bytes = 64;
  control.qps = 64;
  control.depth = 4;
  control.gap = NsToPs(250);
  TenantSpec big = control;            // one 1 GiB MR, random pages
  big.mr_bytes = 1u << 30;
  big.random_offsets = true;
  TenantSpec many = big;               // 4096 MRs of 1 MiB
  many.mr_bytes = 1u << 20;
  many.mrs = 4096;
  auto run = [&](const std::vector<TenantSpec>& mix, double* miss, double* wait_ns) {
    Mix r(p, mix);
    r.Go(NsToPs(3000e3), kRun);        // warm the victim's MR first
    const NicCacheStats& st = r.sim().cache_stats(r.a());
    *miss = st.contexts().miss_rate();
    const NicCacheStats& rx = r.sim().cache_stats(r.b());
    *wait_ns = rx.fills ? PsToNs(rx.fill_wait_ps) / static_cast<double>(rx.fills) : 0;
    return r.result(0);
  };
  double m0, m1, m2, m3, w0, w1, w2, w3;
  const TenantResult alone = run({victim}, &m0, &w0);
  const TenantResult vs_hot = run({victim, control}, &m1, &w1);
  const TenantResult vs_big = run({victim, big}, &m2, &w2);
  const TenantResult vs_many = run({victim, many}, &m3, &w3);
  std::printf(
      "MTT/MPT pressure (cx5-100 model, %u fill slots): 1-QP 4 KiB victim alone %.1f Gbps "
      "(sender's context miss rate %.1f %%, receiver's fills wait %.0f ns); next to a 4 Mmps "
      "attacker on a hot region %.1f Gbps (%.1f %%, %.0f ns), on random pages of a 1 GiB MR "
      "%.1f Gbps (%.1f %%, %.0f ns), on 4096 MRs %.1f Gbps (%.1f %%, %.0f ns): x%.2f of alone. "
      "Paper (SwiftRDMA §3.2 quoting Husky): 96.6 -> 48 Gbps (x0.50) as misses go 17.2 -> "
      "49.1 %%\n",
      p.cache.fill_slots, alone.gbps, 100 * m0, w0, vs_hot.gbps, 100 * m1, w1, vs_big.gbps,
      100 * m2, w2, vs_many.gbps, 100 * m3, w3, vs_many.gbps / alone.gbps);
  // Every miss is a fill through the card's miss handler (4 in flight on
  // cx5): the attacker on 4096 MRs misses MPT and MTT on both cards (~8 M
  // fills/s), which keeps the receiver's handler ~90 % busy; the victim's
  // misses there queue behind the attacker's (~1.6 us) and its 16 x 4 KiB
  // window no longer covers the round trip. The paper's x0.50 at the
  // highest miss rate, +-0.10 (Husky's pair is one measurement; the model's
  // miss rate there is 38 %, not 49 %). On the 1 GiB MR (one fill per side
  // per WRITE) the handler is half busy: a mild fall.
  EXPECT_GT(m2, m1 + 0.10);
  EXPECT_GT(m3, m2);
  EXPECT_GT(w3, w1 + 500) << "the victim's misses wait for the attacker's fills";
  EXPECT_LT(vs_big.gbps, 0.92 * vs_hot.gbps);
  EXPECT_GT(vs_big.gbps, vs_many.gbps);
  EXPECT_GE(vs_many.gbps / alone.gbps, 0.40);
  EXPECT_LE(vs_many.gbps / alone.gbps, 0.60);
}

// ---------------------------------------------------------------------------
// A PCIe-inefficient attacker: 257 B (or misaligned 256 B) WRITEs cost one
// more completion TLP each (and, at the responder, one more write TLP) than
// aligned 256 B ones. Husky: no published figure found for this; the model's
// reasoning: on a x16 link the wire (82 B per packet) saturates before PCIe
// (20-24 B per TLP), so the extra TLPs cost the victim little; on a link
// narrower than the wire (Gen3 x8 under 100 GbE) PCIe is the bottleneck and
// every extra header byte is taken from the victim.
TEST(PcieCacheAnomaly, PcieInefficientAttackerTakesPcieBandwidth) {
  auto run = [](uint32_t lanes, uint32_t bytes, uint64_t misalign, double* attacker_mmps) {
    NicParams p = ConnectX5RoCE100();
    p.pcie.lanes = lanes;
    p.pcie.inline_threshold_bytes = 0;
    TenantSpec victim;
    victim.bytes = 65536;
    victim.depth = 4;
    TenantSpec attacker;
    attacker.bytes = bytes;
    attacker.misalign = misalign;
    attacker.qps = 16;
    attacker.depth = 8;
    Mix r(p, {victim, attacker});
    r.Go(kWarm, kRun);
    const PcieStats& st = r.sim().pcie_stats(r.a());
    const uint64_t msgs = r.result(1).done;
    *attacker_mmps = static_cast<double>(msgs) / PsToNs(kRun) * 1e3;
    std::printf("  x%u, attacker %u B%s: victim %.1f Gbps, attacker %.2f Mmps; PCIe down "
                "%.1f Gbps of %.1f\n",
                lanes, bytes, misalign ? " misaligned" : "", r.result(0).gbps,
                static_cast<double>(msgs) / PsToNs(kRun) * 1e3,
                static_cast<double>(st.down.bytes) * 8 / PsToNs(kWarm + kRun),
                PcieLink(p.pcie, 0, 0, 0).gbps());
    return r.result(0);
  };
  std::printf("PCIe-inefficient attacker (cx5-100 model; paper: none found):\n");
  double a16, a16b, a8, a8b, a8m;
  const TenantResult x16_256 = run(16, 256, 0, &a16);
  const TenantResult x16_257 = run(16, 257, 0, &a16b);
  const TenantResult x8_256 = run(8, 256, 0, &a8);
  const TenantResult x8_257 = run(8, 257, 0, &a8b);
  const TenantResult x8_mis = run(8, 256, 32, &a8m);
  // x16: the wire is the bottleneck; one byte more changes nothing.
  EXPECT_NEAR(x16_257.gbps, x16_256.gbps, 0.02 * x16_256.gbps);
  // x8: PCIe is. The model's FCFS link charges the extra TLPs mostly to the
  // closed-loop attacker itself (its rate falls); the victim keeps its
  // share within a few percent: the model does NOT show a victim loss here.
  EXPECT_LT(x8_256.gbps, 0.6 * x16_256.gbps);
  EXPECT_LT(a8b, 0.97 * a8);
  EXPECT_LT(a8m, 0.97 * a8);
  EXPECT_NEAR(x8_257.gbps, x8_256.gbps, 0.03 * x8_256.gbps);
  EXPECT_NEAR(x8_mis.gbps, x8_256.gbps, 0.03 * x8_256.gbps);
  (void)a16;
  (void)a16b;
}

}  // namespace
}  // namespace vrdma::model
