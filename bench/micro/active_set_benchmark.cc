// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What a turn of the reliability layer's ActiveSet costs beside connections
// asleep on their timers (docs/reliability.md §2.1 "Turns"): one slot busy
// (pumped and kept due at every turn, as a QP in a ping-pong) and
// `sleepers` slots due far later (QPs with WRs in flight, waiting for ACKs
// or an RTO), plus the wakes such a sleeper gets (an ACK, due at once, then
// asleep again), one per turn in the ".../woken" runs. The pump itself is
// a counter: the figure is the set's own CPU per turn.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "backend/reliable_rnic/active_set.h"

namespace vrdma::bench {
namespace {

using reliable::ActiveSet;

void BM_TurnBesideSleepers(benchmark::State& state) {
  const uint32_t sleepers = static_cast<uint32_t>(state.range(0));
  const bool woken = state.range(1) != 0;
  ActiveSet set;
  set.Resize(sleepers + 1);
  constexpr uint64_t kFar = uint64_t{1} << 50;
  for (uint32_t s = 1; s <= sleepers; ++s) set.AddAt(s, kFar + s);
  uint64_t now = 1, pumps = 0, missed = 0, deadlines = 0;
  uint32_t next_woken = 1;
  auto exists = [](uint32_t) { return true; };
  auto pump = [&](uint32_t s) -> uint64_t {
    ++pumps;
    return s == 0 ? 0 : kFar + now;  // the busy slot due again; a woken one asleep
  };
  auto never = [](uint32_t, uint64_t*) { return false; };
  set.Add(0);
  for (auto _ : state) {
    if (woken && sleepers > 0) {
      set.Add(next_woken);
      next_woken = next_woken % sleepers + 1;
    }
    benchmark::DoNotOptimize(
        set.Turn(++now, false, sleepers + 1, exists, pump, never, &missed,
                 &deadlines));
  }
  state.counters["pumps/turn"] =
      static_cast<double>(pumps) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_TurnBesideSleepers)
    ->ArgNames({"sleepers", "woken"})
    ->ArgsProduct({{0, 8, 255, 4095}, {0, 1}});

}  // namespace
}  // namespace vrdma::bench

BENCHMARK_MAIN();
