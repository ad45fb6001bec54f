// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The live switch's data path allocates nothing (docs/reliability.md §6,
// step 17): once SetMode (a control call, which makes the switch's record,
// its hold queue and the new connection) has run on both ends, the
// switch itself (SWITCH, the drain, DRAINED, taking the receives back,
// the reconnect, READY, the held WRs) and the traffic through it run
// under a global operator new that counts.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "backend/reliable_rnic/reliable_switch_test_util.h"

namespace {
std::atomic<long> g_allocs{0};
std::atomic<bool> g_trap{false};  // debugging: abort at the first counted one
}  // namespace

[[gnu::noinline]] void* operator new(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (g_trap.load(std::memory_order_relaxed)) std::abort();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace vrdma::testing {
namespace {

using ReliableSwitchAllocTest = ReliableSwitchTest;

// One switch from `from` to `to` under WRITEs, SENDs and READs both ways;
// allocations counted once both ends' SetMode (control calls) returned.
class ReliableSwitchAllocChain : public ReliableSwitchAllocTest {
 public:
  void Once(ReliabilityMode from, ReliabilityMode to) {
    Setup(from);
    Traffic(30, 200);  // warm up, every kind of WR seen once
    const size_t total = 120;
    got_.reserve(4096);
    got_b_.reserve(4096);
    recv_a_.reserve(4096);
    recv_b_.reserve(4096);
    ab_.ops.reserve(4096);
    ba_.ops.reserve(4096);
    ab_.sends.reserve(4096);
    ba_.sends.reserve(4096);
    ab_.errors.reserve(64);
    ba_.errors.reserve(64);
    {  // the counter counts
      const long c0 = g_allocs.load();
      void* volatile p = ::operator new(16);
      ::operator delete(p);
      ASSERT_EQ(g_allocs.load(), c0 + 1);
    }
    la_->SetMode(std::span(&va_.gid, 1), to);
    lb_->SetMode(std::span(&vb_.gid, 1), to);
    const long before = g_allocs.load();
    g_trap = std::getenv("VRDMA_ALLOC_TRAP") != nullptr;
    for (int i = 0; i < 400000 && !(ab_.done(total) && ba_.done(total)); ++i) {
      TrafficTurn(total);
    }
    const bool switched = Switched(*la_, va_.gid) && Switched(*lb_, vb_.gid);
    const long allocs = g_allocs.load() - before;
    g_trap = false;
    ASSERT_TRUE(ab_.done(total) && ba_.done(total));
    EXPECT_TRUE(switched);
    EXPECT_EQ(la_->counters().switches_done, 1u);
    EXPECT_EQ(allocs, 0);
    ExpectClean();
  }
};

TEST_F(ReliableSwitchAllocChain, NativeToUc) {
  Once(ReliabilityMode::kNative, ReliabilityMode::kUc);
}

TEST_F(ReliableSwitchAllocChain, UcToNative) {
  Once(ReliabilityMode::kUc, ReliabilityMode::kNative);
}

TEST_F(ReliableSwitchAllocChain, NativeToRc) {
  Once(ReliabilityMode::kNative, ReliabilityMode::kRc);
}

TEST_F(ReliableSwitchAllocChain, RcToUc) {
  Once(ReliabilityMode::kRc, ReliabilityMode::kUc);
}

TEST_F(ReliableSwitchAllocChain, UcToRc) {
  Once(ReliabilityMode::kUc, ReliabilityMode::kRc);
}

TEST_F(ReliableSwitchAllocChain, RcToNative) {
  Once(ReliabilityMode::kRc, ReliabilityMode::kNative);
}

}  // namespace
}  // namespace vrdma::testing
