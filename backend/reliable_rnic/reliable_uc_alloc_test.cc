// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// uc mode's data path allocates nothing (docs/reliability.md §2.1): once
// two layers are connected, WRITEs posted, chunked, lost, sent again,
// acknowledged, delivered and completed run under a global operator new
// that counts (and, step 12, SENDs, SEND_WITH_IMMs and WRITE_WITH_IMMs
// into receives posted meanwhile). The lower SoftRnics and the fabrics
// allocate nothing on their data paths either, so every allocation would
// be the layer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace {
std::atomic<long> g_allocs{0};
}  // namespace

// None inlined: GCC would pair std::free with the malloc it sees and warn
// (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace vrdma::testing {
namespace {

using ReliableUcAllocTest = ReliableUcTest;

TEST_F(ReliableUcAllocTest, SteadyStateDataPathDoesNotAllocate) {
  const fabric::FaultConfig f = Faults(0.02, 0.01, 0.01);
  Build(f, f, 3);
  Connect();
  // Warm-up: the first WRITEs, losses and ACKs.
  PostAndVerify(MixedPlan(20, 5), 400000);
  const std::vector<Planned> plan = MixedPlan(40, 6);
  std::vector<SendWr> wrs;
  for (const Planned& p : plan)
    wrs.push_back(Write(p.wr_id, p.src, p.dst, p.len));
  got_.reserve(got_.size() + plan.size() + 64);
  got_b_.reserve(64);
  const size_t want = got_.size() + plan.size();
  const uint64_t retx_before = la_->counters().retx_sent;

  {  // the counter counts
    const long c0 = g_allocs.load();
    void* volatile p = ::operator new(16);
    ::operator delete(p);
    ASSERT_EQ(g_allocs.load(), c0 + 1);
  }
  const long before = g_allocs.load();
  Status st = Status::kOk;
  const int posted = la_->PostSend(qa_, wrs, &st);
  for (int i = 0; i < 800000 && got_.size() < want; ++i) Turn();
  const long allocs = g_allocs.load() - before;

  EXPECT_EQ(posted, static_cast<int>(plan.size()));
  ASSERT_EQ(got_.size(), want);
  EXPECT_EQ(allocs, 0);
  EXPECT_GT(la_->counters().retx_sent, retx_before);  // losses were repaired
  for (size_t i = 0; i < plan.size(); ++i) {
    const Completion& c = got_[want - plan.size() + i];
    EXPECT_EQ(c.wr_id, plan[i].wr_id);
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(0, std::memcmp(&vb_.buf[plan[i].dst], &va_.buf[plan[i].src],
                             plan[i].len));
  }
}

// Step 12: SENDs, SEND_WITH_IMMs and WRITE_WITH_IMMs, receives posted
// while they run (some units wait for theirs in bounce buffers), losses
// repaired: no allocation either.
TEST_F(ReliableUcAllocTest, SendsAndReceivesDoNotAllocate) {
  const fabric::FaultConfig f = Faults(0.02, 0.01, 0.01);
  Build(f, f, 4);
  Connect();
  constexpr int kN = 60;
  constexpr uint32_t kSizes[] = {0, 1, 100, 4096, 4097, 9000, 30000};
  auto plan = [&](int base) {
    std::vector<SendWr> wrs;
    for (int i = 0; i < kN; ++i) {
      const uint32_t len = kSizes[(base + i) % std::size(kSizes)];
      SendWr w;
      if (i % 4 == 3) {
        w = Write(base + i, i * 11, (1 << 20) + i * 32768, len);
        w.opcode = WrOpcode::kRdmaWriteWithImm;
        w.imm_data = 7 + i;
      } else {
        w = Send(base + i, i * 11, len,
                 i % 2 ? std::optional<uint32_t>(i) : std::nullopt);
      }
      wrs.push_back(w);
    }
    return wrs;
  };
  auto recvs = [&](int base) {
    std::vector<RecvWr> rs(kN);
    for (int i = 0; i < kN; ++i) {
      rs[i].wr_id = base + i;
      rs[i].num_sge = 2;
      rs[i].sge[0] = Sge{vb_.at(i * 32768), 16384, vb_.mr.lkey};
      rs[i].sge[1] = Sge{vb_.at(i * 32768 + 16384), 16384, vb_.mr.lkey};
    }
    return rs;
  };
  auto run = [&](const std::vector<SendWr>& wrs,
                 const std::vector<RecvWr>& rs) {
    const size_t want_s = got_.size() + wrs.size();
    const size_t want_r = recv_b_.size() + rs.size();
    Status st = Status::kOk;
    EXPECT_EQ(la_->PostSend(qa_, wrs, &st), static_cast<int>(wrs.size()));
    // The receives come late, in two halves: units wait for them.
    for (int i = 0; i < 200; ++i) Turn();
    EXPECT_EQ(lb_->PostRecv(qb_, std::span(rs).first(kN / 2), &st), kN / 2);
    for (int i = 0; i < 200; ++i) Turn();
    EXPECT_EQ(lb_->PostRecv(qb_, std::span(rs).subspan(kN / 2), &st), kN / 2);
    for (int i = 0;
         i < 800000 && (got_.size() < want_s || recv_b_.size() < want_r); ++i) {
      Turn();
    }
    EXPECT_EQ(got_.size(), want_s);
    EXPECT_EQ(recv_b_.size(), want_r);
  };
  got_.reserve(4 * kN + 64);
  recv_b_.reserve(4 * kN + 64);
  got_b_.reserve(64);
  run(plan(0), recvs(1000));  // warm-up
  const std::vector<SendWr> wrs = plan(100);
  const std::vector<RecvWr> rs = recvs(2000);
  const size_t s0 = got_.size(), r0 = recv_b_.size();
  const uint64_t waits = lb_->counters().rnr_waits;
  const long before = g_allocs.load();
  run(wrs, rs);
  const long allocs = g_allocs.load() - before;
  EXPECT_EQ(allocs, 0);
  EXPECT_GT(lb_->counters().rnr_waits, waits);
  EXPECT_GT(la_->counters().retx_sent, 0u);
  ASSERT_EQ(got_.size(), s0 + kN);
  ASSERT_EQ(recv_b_.size(), r0 + kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got_[s0 + i].status, WcStatus::kSuccess) << i;
    const Completion& r = recv_b_[r0 + i];
    EXPECT_EQ(r.wr_id, 2000u + i);
    EXPECT_EQ(r.status, WcStatus::kSuccess) << i;
    EXPECT_EQ(r.byte_len, wrs[i].total_length()) << i;
    if (wrs[i].opcode == WrOpcode::kSend) {
      EXPECT_EQ(0,
                std::memcmp(&vb_.buf[i * 32768], &va_.buf[i * 11], r.byte_len))
          << i;
    }
  }
}

// Step 13: READs (requests, responses both ways' losses repaired, the
// responder's records), WRITEs and FETCH_ADDs on the lower RC QP, mixed:
// no allocation either.
TEST_F(ReliableUcAllocTest, ReadsAndAtomicsDoNotAllocate) {
  const fabric::FaultConfig f = Faults(0.02, 0.01, 0.01);
  Build(f, f, 5);
  QpConf c;
  c.timeout = 10;  // the RC QP's timer for the atomics: 4.2 ms
  Connect(c);
  constexpr int kN = 40;
  constexpr uint32_t kSizes[] = {0, 1, 4095, 4097, 30000, 65536};
  auto plan = [&](int base) {
    std::vector<SendWr> wrs;
    for (int i = 0; i < kN; ++i) {
      const uint32_t len = kSizes[(base + i) % std::size(kSizes)];
      SendWr w = Write(base + i, i * 11, (1 << 20) + i * 65536, len);
      if (i % 5 == 4) {
        w.opcode = WrOpcode::kAtomicFetchAdd;
        w.num_sge = 1;
        w.sge[0] = Sge{va_.at((4 << 20) + i * 8), 8, va_.mr.lkey};
        w.remote_addr = vb_.at(64);
        w.compare_add = 1;
      } else if (i % 2 == 1) {
        w.opcode = WrOpcode::kRdmaRead;
        w.sge[0] = Sge{va_.at((5 << 20) + i * 65536), len, va_.mr.lkey};
        w.remote_addr = vb_.at((1 << 20) + (i - 1) * 65536);
      }
      wrs.push_back(w);
    }
    return wrs;
  };
  auto run = [&](const std::vector<SendWr>& wrs) {
    const size_t want = got_.size() + wrs.size();
    Status st = Status::kOk;
    EXPECT_EQ(la_->PostSend(qa_, wrs, &st), static_cast<int>(wrs.size()))
        << StatusName(st);
    for (int i = 0; i < 2000000 && got_.size() < want; ++i) Turn();
    EXPECT_EQ(got_.size(), want);
  };
  got_.reserve(2 * kN + 64);
  got_b_.reserve(64);
  run(plan(0));  // warm-up
  const std::vector<SendWr> wrs = plan(100);
  const size_t s0 = got_.size();
  const uint64_t resent = lb_->counters().read_units_resent;
  const long before = g_allocs.load();
  run(wrs);
  const long allocs = g_allocs.load() - before;
  EXPECT_EQ(allocs, 0);
  EXPECT_GT(lb_->counters().read_units_resent, resent);  // losses repaired
  ASSERT_EQ(got_.size(), s0 + kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got_[s0 + i].wr_id, wrs[i].wr_id) << i;
    EXPECT_EQ(got_[s0 + i].status, WcStatus::kSuccess) << i;
    if (wrs[i].opcode == WrOpcode::kRdmaRead &&
        wrs[i - 1].opcode == WrOpcode::kRdmaWrite) {  // the WRITE before it
      const uint32_t n =
          std::min(wrs[i].sge[0].length, wrs[i - 1].sge[0].length);
      EXPECT_EQ(0, std::memcmp(&va_.buf[(5 << 20) + i * 65536],
                               &va_.buf[(i - 1) * 11], n))
          << i;
    }
  }
  uint64_t v;
  std::memcpy(&v, &vb_.buf[64], 8);
  EXPECT_EQ(v, 2u * (kN / 5));  // every FETCH_ADD once
}

// Step 16: rc mode's data path, a takeover included: the copies, the
// completions reported through the rings, RECOVER / RECOVERED, the
// resubmission on the backup and the failed pair's reset (control calls
// on SoftRnic, inline) allocate nothing.
TEST_F(ReliableUcAllocTest, RcTakeoverDoesNotAllocate) {
  Build();
  QpConf c;
  c.timeout = 8;
  RcConnect(c);
  PostAndVerify(MixedPlan(10, 5), 20000);  // warm-up
  bool blackholed = false;
  const uint32_t to_a = qa_.qpn, to_b = qb_.qpn;
  tap_a_->match = [&](std::span<const uint8_t> p, const Gid&) {
    return blackholed && HeaderOf(p).dest_qpn == to_b;
  };
  tap_b_->match = [&](std::span<const uint8_t> p, const Gid&) {
    return blackholed && HeaderOf(p).dest_qpn == to_a;
  };
  const std::vector<Planned> plan = MixedPlan(30, 6);
  std::vector<SendWr> wrs;
  for (const Planned& p : plan) wrs.push_back(Write(p.wr_id, p.src, p.dst, p.len));
  got_.reserve(got_.size() + plan.size() + 64);
  got_b_.reserve(64);
  recv_a_.reserve(64);
  recv_b_.reserve(64);
  const size_t want = got_.size() + plan.size();

  const long before = g_allocs.load();
  Status st = Status::kOk;
  const int posted = la_->PostSend(qa_, wrs, &st);
  Run(3);
  blackholed = true;
  for (int i = 0; i < 20000 && got_.size() < want; ++i) Turn();
  Run(1000);  // the failed pair's reset
  const long allocs = g_allocs.load() - before;

  EXPECT_EQ(posted, static_cast<int>(plan.size()));
  ASSERT_EQ(got_.size(), want);
  EXPECT_EQ(allocs, 0);
  EXPECT_EQ(la_->counters().rc_takeovers, 1u);
  EXPECT_EQ(la_->counters().rc_resets, 1u);
  for (size_t i = 0; i < plan.size(); ++i) {
    const Completion& k = got_[want - plan.size() + i];
    EXPECT_EQ(k.wr_id, plan[i].wr_id);
    EXPECT_EQ(k.status, WcStatus::kSuccess);
    EXPECT_EQ(0, std::memcmp(&vb_.buf[plan[i].dst], &va_.buf[plan[i].src],
                             plan[i].len));
  }
}

}  // namespace
}  // namespace vrdma::testing
