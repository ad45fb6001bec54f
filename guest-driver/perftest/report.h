// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Results in perftest's table format (and as JSON for --out_json).
//   bw:  BW average = all bytes / whole run; BW peak = the best rate over
//        windows of at least 1/20 of the run between progress samples;
//        MB = 2^20 bytes, Gb = 10^9 bits (as perftest).
//   lat: per-iteration samples in microseconds; ping-pong tests report half
//        the round trip, read_lat the whole read (as perftest).
#ifndef VRDMA_GUEST_DRIVER_PERFTEST_REPORT_H_
#define VRDMA_GUEST_DRIVER_PERFTEST_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vrdma::perftest {

struct BwSample {
  uint64_t t_ns;   // since the start of the run
  uint64_t msgs;   // completed messages so far
};

struct BwResult {
  uint64_t bytes = 0;       // message size
  uint64_t iters = 0;       // messages completed
  double bw_peak = 0;       // MB/s or Gb/s
  double bw_avg = 0;
  double msg_rate_mpps = 0;
  bool gbits = false;
};

struct LatResult {
  uint64_t bytes = 0;
  uint64_t iters = 0;
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0;
  double p99 = 0, p999 = 0;
};

BwResult ComputeBw(uint64_t msg_bytes, uint64_t msgs, uint64_t total_ns,
                   const std::vector<BwSample>& samples, bool gbits);
// samples_us is sorted in place.
LatResult ComputeLat(uint64_t msg_bytes, std::vector<double>& samples_us);

void PrintBwHeader(FILE* out, bool gbits);
void PrintBw(FILE* out, const BwResult& r);
void PrintLatHeader(FILE* out);
void PrintLat(FILE* out, const LatResult& r);
void PrintRule(FILE* out);

nlohmann::json ToJson(const std::string& test, const BwResult& r);
nlohmann::json ToJson(const std::string& test, const LatResult& r);

}  // namespace vrdma::perftest

#endif  // VRDMA_GUEST_DRIVER_PERFTEST_REPORT_H_
