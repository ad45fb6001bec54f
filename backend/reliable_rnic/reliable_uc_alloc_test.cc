// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// uc mode's data path allocates nothing (docs/reliability.md §2.1): once
// two layers are connected, WRITEs posted, chunked, lost, sent again,
// acknowledged, delivered and completed run under a global operator new
// that counts. The lower SoftRnics and the fabrics allocate nothing on
// their data paths either, so every allocation would be the layer's.
#include <gtest/gtest.h>

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
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace vrdma::testing {
namespace {

using ReliableUcAllocTest = ReliableUcTest;

TEST_F(ReliableUcAllocTest, SteadyStateDataPathDoesNotAllocate) {
  fabric::FaultConfig f;
  f.loss = 0.02;
  f.p_reorder = 0.01;
  f.reorder_delay_ns = 20'000;
  f.p_dup = 0.01;
  Build(f, f, 3);
  Connect();
  // Warm-up: the first WRITEs, losses and ACKs.
  PostAndVerify(MixedPlan(20, 5), 400000);
  const std::vector<Planned> plan = MixedPlan(40, 6);
  std::vector<SendWr> wrs;
  for (const Planned& p : plan) wrs.push_back(Write(p.wr_id, p.src, p.dst, p.len));
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

}  // namespace
}  // namespace vrdma::testing
