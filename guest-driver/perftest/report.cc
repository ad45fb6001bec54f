// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/perftest/report.h"

#include <algorithm>
#include <cmath>

namespace vrdma::perftest {
namespace {

double Rate(double bytes, double ns, bool gbits) {
  if (ns <= 0) return 0;
  const double per_s = bytes * 1e9 / ns;
  return gbits ? per_s * 8 / 1e9 : per_s / (1 << 20);
}

// Nearest-rank percentile of sorted samples.
double Percentile(const std::vector<double>& s, double p) {
  if (s.empty()) return 0;
  // The epsilon keeps 99.9% of 1000 at rank 999 despite rounding.
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * s.size() - 1e-9));
  if (rank == 0) rank = 1;
  return s[std::min(rank, s.size()) - 1];
}

}  // namespace

BwResult ComputeBw(uint64_t msg_bytes, uint64_t msgs, uint64_t total_ns,
                   const std::vector<BwSample>& samples, bool gbits) {
  BwResult r;
  r.bytes = msg_bytes;
  r.iters = msgs;
  r.gbits = gbits;
  r.bw_avg = Rate(static_cast<double>(msg_bytes) * msgs, static_cast<double>(total_ns), gbits);
  r.msg_rate_mpps = total_ns > 0 ? msgs * 1e3 / static_cast<double>(total_ns) : 0;
  // Completions arrive in bursts (a batch of ACKs, a replenished receive
  // queue), so short windows measure bursts, not bandwidth: every window
  // lasts at least 1/20 of the run.
  const uint64_t min_window = total_ns / 20;
  double peak = r.bw_avg;
  size_t j = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (j <= i) j = i + 1;
    while (j < samples.size() && samples[j].t_ns - samples[i].t_ns < min_window) ++j;
    if (j >= samples.size()) break;
    const uint64_t dt = samples[j].t_ns - samples[i].t_ns;
    const uint64_t dm = samples[j].msgs - samples[i].msgs;
    if (dt == 0 || dm == 0) continue;
    peak = std::max(peak, Rate(static_cast<double>(msg_bytes) * dm, static_cast<double>(dt), gbits));
  }
  r.bw_peak = peak;
  return r;
}

LatResult ComputeLat(uint64_t msg_bytes, std::vector<double>& s) {
  LatResult r;
  r.bytes = msg_bytes;
  r.iters = s.size();
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  r.t_min = s.front();
  r.t_max = s.back();
  r.t_typical = s[s.size() / 2];
  double sum = 0;
  for (double v : s) sum += v;
  r.t_avg = sum / s.size();
  double var = 0;
  for (double v : s) var += (v - r.t_avg) * (v - r.t_avg);
  r.t_stdev = std::sqrt(var / s.size());
  r.p99 = Percentile(s, 99.0);
  r.p999 = Percentile(s, 99.9);
  return r;
}

void PrintRule(FILE* out) {
  std::fprintf(out, "---------------------------------------------------------------------------------------\n");
}

void PrintBwHeader(FILE* out, bool gbits) {
  PrintRule(out);
  if (gbits) {
    std::fprintf(out, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n");
  } else {
    std::fprintf(out, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
  }
}

void PrintBw(FILE* out, const BwResult& r) {
  std::fprintf(out, " %-7lu    %-10lu       %-7.2f            %-7.2f\t\t   %-7.6f\n",
               static_cast<unsigned long>(r.bytes), static_cast<unsigned long>(r.iters),
               r.bw_peak, r.bw_avg, r.msg_rate_mpps);
  PrintRule(out);
}

void PrintLatHeader(FILE* out) {
  PrintRule(out);
  std::fprintf(out, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                    "t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec] \n");
}

void PrintLat(FILE* out, const LatResult& r) {
  std::fprintf(out, " %-7lu %-10lu     %-7.2f        %-7.2f      %-7.2f            %-7.2f        "
                    "%-7.2f\t\t%-7.2f   \t\t%-7.2f\t\n",
               static_cast<unsigned long>(r.bytes), static_cast<unsigned long>(r.iters), r.t_min,
               r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
  PrintRule(out);
}

nlohmann::json ToJson(const std::string& test, const BwResult& r) {
  const char* unit = r.gbits ? "Gb/sec" : "MB/sec";
  return {{"test", test},
          {"results",
           {{"MsgSize", r.bytes},
            {"n_iterations", r.iters},
            {"BW_peak", r.bw_peak},
            {"BW_average", r.bw_avg},
            {"BW_unit", unit},
            {"MsgRate", r.msg_rate_mpps}}}};
}

nlohmann::json ToJson(const std::string& test, const LatResult& r) {
  return {{"test", test},
          {"results",
           {{"MsgSize", r.bytes},
            {"n_iterations", r.iters},
            {"t_min", r.t_min},
            {"t_max", r.t_max},
            {"t_typical", r.t_typical},
            {"t_avg", r.t_avg},
            {"t_stdev", r.t_stdev},
            {"percentile_99", r.p99},
            {"percentile_99_9", r.p999},
            {"unit", "usec"}}}};
}

}  // namespace vrdma::perftest
