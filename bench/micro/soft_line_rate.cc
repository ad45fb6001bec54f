// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SoftRnic's line rate (--soft-line-gbps) against what it delivers: 64 KiB
// RDMA WRITEs kept 32 deep on one and on two QPs, on the steady clock, for
// several configured rates and unlimited. The payload ceiling is the line
// times the payload's share of the wire (4096 B packets, 82 bytes of
// overhead each, one ACK per WRITE). Where the CPU cannot copy as fast as
// the line, the CPU is the limit. Figures only (docs/benchmarks.md).
//
//   build/bench/micro/soft_line_rate [seconds per run, default 1]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/soft_rnic/soft_rnic.h"
#include "backend/soft_rnic/testing/write_load.h"

int main(int argc, char** argv) {
  using vrdma::testing::WriteLoad;
  const double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  const uint64_t ns = static_cast<uint64_t>(seconds * 1e9);
  constexpr uint32_t kBytes = 65536;
  const double share =
      double{kBytes} / (vrdma::soft::Wire::WireBytes(kBytes, WriteLoad::kMtu) +
                        vrdma::soft::Wire::kPacketOverheadBytes);
  std::printf("%-10s %-4s %-14s %-14s %-8s %s\n", "line Gb/s", "QPs", "ceiling Gb/s",
              "payload Gb/s", "of it", "per QP");
  for (double line : {1.0, 10.0, 25.0, 100.0, 0.0}) {
    for (int qps : {1, 2}) {
      vrdma::RnicLimits l = vrdma::DefaultSoftRnicLimits();
      l.link_rate_bps = static_cast<uint64_t>(line * 1e9);
      vrdma::SoftRnic rnic(l);
      WriteLoad load(rnic, qps, kBytes);
      if (!load.ok()) {
        std::fprintf(stderr, "soft_line_rate: setup failed\n");
        return 1;
      }
      const std::vector<uint64_t> bytes = load.Run(ns);
      double total = 0;
      for (uint64_t b : bytes) total += b * 8.0 / ns;
      char per_qp[64] = "";
      if (qps == 2) {
        std::snprintf(per_qp, sizeof(per_qp), "%.3f / %.3f", bytes[0] * 8.0 / ns,
                      bytes[1] * 8.0 / ns);
      }
      if (line > 0) {
        std::printf("%-10g %-4d %-14.3f %-14.3f %-8.3f %s\n", line, qps, line * share, total,
                    total / (line * share), per_qp);
      } else {
        std::printf("%-10s %-4d %-14s %-14.3f %-8s %s\n", "unlimited", qps, "-", total, "-",
                    per_qp);
      }
    }
  }
  return 0;
}
