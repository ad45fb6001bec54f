// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Unit tests of the PCIe link model (pcie.h), the on-NIC caches
// (nic_cache.h) and memory regions in the simulator. All figures are MODEL
// figures.
#include <cstdio>
#include <random>
#include <vector>

#include "backend/rnic_model/nic_cache.h"
#include "backend/rnic_model/pcie.h"
#include "backend/rnic_model/simulator.h"
#include "gtest/gtest.h"

namespace vrdma::model {
namespace {

PcieLink Gen3x16() {
  NicParams p = ConnectX5RoCE100();
  return PcieLink(p.pcie, p.doorbell_ps, p.wqe_fetch_ps, p.cqe_write_ps);
}

TEST(Pcie, TlpCountsFollowMpsMrrsCompletionSizeAndAlignment) {
  EXPECT_EQ(TlpCount(0, 256, 256), 1u);
  EXPECT_EQ(TlpCount(0, 257, 256), 2u);     // one byte more: one TLP more
  EXPECT_EQ(TlpCount(64, 256, 256), 2u);    // unaligned: crosses a boundary
  EXPECT_EQ(TlpCount(0, 128, 64), 2u);      // RCB-sized completions
  EXPECT_EQ(TlpCount(0, 129, 64), 3u);
  EXPECT_EQ(TlpCount(0, 4096, 512), 8u);    // MRRS 512
  EXPECT_EQ(TlpCount(0, 0, 256), 1u);
  EXPECT_EQ(TlpCountShift(64, 256, 8), 2u);

  PcieLink l = Gen3x16();
  l.Write(0, 0, 256);
  EXPECT_EQ(l.stats().up.tlps, 1u);
  EXPECT_EQ(l.stats().up.bytes, 256u + 24u);
  l.Write(0, 0, 257);
  EXPECT_EQ(l.stats().up.tlps, 3u);
  EXPECT_EQ(l.stats().up.bytes, 256u + 24u + 257u + 2 * 24u);
  l.Read(0, 0, 4096);                        // 8 requests up, 16 completions down
  EXPECT_EQ(l.stats().up.tlps, 3u + 8u);
  EXPECT_EQ(l.stats().down.tlps, 16u);
  EXPECT_EQ(l.stats().down.bytes, 4096u + 16u * 20u);
}

TEST(Pcie, RoundTripLatencyAndBandwidthPerGeneration) {
  PcieLink l = Gen3x16();
  // Gen3 x16: 8 GT/s x 16 x 128/130 x 0.902 = 113.7 Gb/s at TLP level.
  EXPECT_NEAR(l.gbps(), 113.7, 0.2);
  const NicParams p = ConnectX5RoCE100();
  const Picos one = l.Read(0, 0, 64);
  EXPECT_GE(one, p.wqe_fetch_ps);
  EXPECT_LT(one, p.wqe_fetch_ps + NsToPs(20));
  // 1000 back-to-back 4 KiB reads: bandwidth-bound on the completions.
  PcieLink m = Gen3x16();
  Picos last = 0;
  for (int i = 0; i < 1000; ++i) last = m.Read(0, uint64_t(i) * 4096, 4096);
  const double gbps = 1000.0 * 4096 * 8 / PsToNs(last - p.wqe_fetch_ps);
  EXPECT_NEAR(gbps, 113.7 * 4096 / (4096 + 16 * 20), 1.0);
  NicParams c7 = ConnectX7RoCE400();
  EXPECT_NEAR(PcieLink(c7.pcie, 0, 0, 0).gbps(), 4 * 113.7, 1.0);  // Gen5
}

TEST(Pcie, TagsBoundOutstandingReads) {
  NicParams p = ConnectX5RoCE100();
  p.pcie.read_tags = 4;
  PcieLink l(p.pcie, p.doorbell_ps, p.wqe_fetch_ps, p.cqe_write_ps);
  Picos last = 0;
  for (int i = 0; i < 400; ++i) last = l.Read(0, uint64_t(i) * 64, 64);
  EXPECT_GT(l.stats().tag_waits, 0u);
  // 4 reads per round trip.
  EXPECT_NEAR(PsToNs(last), 100.0 * PsToNs(p.wqe_fetch_ps), 0.1 * 100 * PsToNs(p.wqe_fetch_ps));
}

TEST(NicCache, SetAssociativeLruEvictsTheLeastRecentlyUsed) {
  SetAssocLru c;
  c.Init(4, 4);  // one set of 4
  for (uint64_t k = 1; k <= 4; ++k) EXPECT_FALSE(c.Access(k));
  EXPECT_TRUE(c.Access(1));       // 1 is now the most recent
  EXPECT_FALSE(c.Access(5));      // evicts 2
  EXPECT_TRUE(c.Access(1));
  EXPECT_FALSE(c.Access(2));
  EXPECT_EQ(c.InvalidateIf([](uint64_t k) { return k == 1; }), 1u);
  EXPECT_FALSE(c.Access(1));
  SetAssocLru off;
  off.Init(0, 8);
  EXPECT_TRUE(off.Access(42));    // disabled: always hit
}

class Collect : public CompletionSink {
 public:
  void OnCqe(const Cqe& c) override { cqes.push_back(c); }
  std::vector<Cqe> cqes;
};

struct Two {
  Simulator sim;
  HostId a, b;
  QpId qa, qb;
  Collect sink;
  explicit Two(const NicParams& p) : sim(FabricParams{}, 1) {
    a = sim.AddHost(p);
    b = sim.AddHost(p);
    QpConfig c;
    c.send_cq = sim.CreateCq(a);
    c.recv_cq = c.send_cq;
    c.sq_depth = 1024;
    qa = sim.CreateQp(a, c);
    c.send_cq = sim.CreateCq(b);
    c.recv_cq = c.send_cq;
    qb = sim.CreateQp(b, c);
    sim.Connect(qa, qb);
    sim.set_completion_sink(&sink);
  }
};

TEST(Simulator, ExistingCallersUseTheHotRegion) {
  Two t(ConnectX6RoCE100());
  Wr w;
  w.bytes = 1 << 20;
  ASSERT_EQ(t.sim.PostSend(t.qa, {&w, 1}), 1);
  t.sim.RunUntil(NsToPs(200e3));
  ASSERT_EQ(t.sink.cqes.size(), 1u);
  const NicCacheStats& s = t.sim.cache_stats(t.a);
  EXPECT_EQ(s.mpt.hits + s.mpt.misses + s.mtt.hits + s.mtt.misses, 0u);
  // 256 payload reads of 4 KiB (8 requests each), the WQE, the doorbell
  // and the QP context's first (cold) miss.
  EXPECT_EQ(t.sim.pcie_stats(t.a).down.payload_bytes, (1u << 20) + 64u + 8u + 256u);
  EXPECT_EQ(t.sim.cache_stats(t.a).qpc.misses, 1u);
  EXPECT_GE(t.sim.pcie_stats(t.a).up.tlps, 256u * 8u);
  EXPECT_EQ(t.sim.pcie_stats(t.b).up.payload_bytes, (1u << 20) + 0u);  // no recv CQE
}

TEST(Simulator, InlineSmallWritesSkipThePayloadRead) {
  Two t(ConnectX6RoCE100());
  Wr w;
  w.bytes = 16;  // <= 220: inline (perftest's default)
  t.sim.PostSend(t.qa, {&w, 1});
  t.sim.RunUntil(NsToPs(20e3));
  EXPECT_EQ(t.sim.pcie_stats(t.a).reads, 2u);  // the WQE fetch, the cold QPC
  Two u(ConnectX6RoCE100());
  w.bytes = 257;
  u.sim.PostSend(u.qa, {&w, 1});
  u.sim.RunUntil(NsToPs(20e3));
  EXPECT_EQ(u.sim.pcie_stats(u.a).reads, 3u);  // WQE, QPC, payload
  // Doorbell, WQE, QPC, and the payload in two completions (MPS 256).
  EXPECT_EQ(u.sim.pcie_stats(u.a).down.tlps, 1u + 1u + 1u + 2u);
}

TEST(Simulator, MrDeregistrationInvalidatesAndTakesTheCommandInterface) {
  NicParams p = ConnectX6RoCE100();
  Two t(p);
  const MrId mr = t.sim.RegisterMr(t.a, 1 << 20);
  const MrId rmr = t.sim.RegisterMr(t.b, 1 << 20);
  EXPECT_EQ(t.sim.command_free(t.a), p.cache.mr_command_ps);
  Wr w;
  w.bytes = 64 << 10;
  w.local_mr = mr;
  w.remote_mr = rmr;
  t.sim.PostSend(t.qa, {&w, 1});
  t.sim.RunUntil(NsToPs(50e3));
  const uint64_t misses = t.sim.cache_stats(t.a).mtt.misses;
  EXPECT_EQ(misses, 2u);  // 16 pages = 2 lines of 8 entries
  t.sim.PostSend(t.qa, {&w, 1});
  t.sim.RunUntil(NsToPs(100e3));
  EXPECT_EQ(t.sim.cache_stats(t.a).mtt.misses, misses);  // warm
  EXPECT_TRUE(t.sim.DeregisterMr(mr));
  EXPECT_FALSE(t.sim.DeregisterMr(mr));
  EXPECT_GE(t.sim.cache_stats(t.a).invalidations, 3u);   // MPT + 2 MTT lines
  EXPECT_EQ(t.sim.cache_stats(t.a).mr_commands, 2u);
  EXPECT_GE(t.sim.command_free(t.a), t.sim.now() + p.cache.mr_command_ps);
  w.local_mr = t.sim.RegisterMr(t.a, 1 << 20);
  t.sim.PostSend(t.qa, {&w, 1});
  t.sim.RunUntil(NsToPs(150e3));
  EXPECT_EQ(t.sim.cache_stats(t.a).mtt.misses, misses + 2u);  // cold again
  EXPECT_EQ(t.sink.cqes.size(), 3u);
}

// Random 4 KiB WRITEs over a 1 GiB MR: huge pages need far fewer entries.
double MttMissRate(uint32_t page_bytes) {
  Two t(ConnectX6RoCE100());
  const MrId l = t.sim.RegisterMr(t.a, 1ull << 30, page_bytes);
  const MrId r = t.sim.RegisterMr(t.b, 1ull << 30, page_bytes);
  std::mt19937_64 rng(7);
  std::vector<Wr> wrs(2000);
  for (Wr& w : wrs) {
    w.bytes = 4096;
    w.signaled = false;
    w.local_mr = l;
    w.remote_mr = r;
    w.local_offset = (rng() % (1u << 18)) * 4096;
    w.remote_offset = (rng() % (1u << 18)) * 4096;
  }
  t.sim.PostSend(t.qa, wrs);
  t.sim.RunUntil(NsToPs(1e6));
  return t.sim.cache_stats(t.a).mtt.miss_rate();
}

TEST(Simulator, HugePagesCutMttMisses) {
  const double small = MttMissRate(4096), huge = MttMissRate(2u << 20);
  std::printf("MTT miss rate, random 4 KiB over 1 GiB: 4 KiB pages %.1f %%, 2 MiB pages %.1f %%\n",
              100 * small, 100 * huge);
  EXPECT_GT(small, 0.9);    // 2000 random lines of 32 Ki: cold
  EXPECT_LT(huge, 0.1);     // 512 entries = 64 lines: cold misses only
}

TEST(Simulator, DeterministicWithCachesAndPcie) {
  auto run = [] {
    Two t(ConnectX5RoCE100());
    const MrId l = t.sim.RegisterMr(t.a, 1ull << 30);
    std::mt19937_64 rng(3);
    std::vector<Wr> wrs(500);
    for (Wr& w : wrs) {
      w.bytes = 300 + rng() % 5000;
      w.local_mr = l;
      w.local_offset = rng() % (1u << 29);
    }
    t.sim.PostSend(t.qa, wrs);
    t.sim.RunUntil(NsToPs(2e5));
    return std::make_pair(t.sink.cqes.back().time, t.sim.pcie_stats(t.a).down.bytes);
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace vrdma::model
