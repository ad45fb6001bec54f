// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The ceiling for large vrdma messages on the software RNIC: it moves an
// RDMA WRITE's payload with one memcpy from the sender's guest RAM to the
// receiver's, so 64 KiB write_bw can at best approach the bandwidth of a
// plain memcpy over the same working set. This copies `size`-byte messages
// from rotating source slots to rotating destination slots, as many slots
// as vrdma-perftest keeps in flight (tx_depth, 128 by default), so caches
// help it exactly as much as they help the perftest run.
//
//   BM_Memcpy/<size>/<slots>: bytes_per_second = memcpy bandwidth.
// bench/micro/run_compare.sh prints 64 KiB write_bw as a fraction of it.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

void BM_Memcpy(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const size_t slots = static_cast<size_t>(state.range(1));
  // Touched once so page faults are not measured.
  std::vector<uint8_t> src(size * slots, 0x5a);
  std::vector<uint8_t> dst(size * slots, 0);
  size_t s = 0;
  for (auto _ : state) {
    std::memcpy(dst.data() + s * size, src.data() + s * size, size);
    benchmark::ClobberMemory();
    if (++s == slots) s = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Memcpy)->Args({64 << 10, 128})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
