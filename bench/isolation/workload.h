// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Tenants and scenarios of the isolation bench. A tenant is one VM running a
// perftest-shaped workload against the RNIC MODEL; all figures produced
// from these are model outputs, not hardware measurements.
#ifndef VRDMA_BENCH_ISOLATION_WORKLOAD_H_
#define VRDMA_BENCH_ISOLATION_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "backend/rnic_model/params.h"
#include "backend/rnic_model/simulator.h"
#include "policy/scheduler_policy.h"

namespace vrdma::bench {

enum class Mode : uint8_t {
  kLatency,    // one message in flight (perftest *_lat shaped)
  kBandwidth,  // keep tx_depth in flight, posted in batches (*_bw shaped)
};

struct TenantSpec {
  std::string name;
  model::Op op = model::Op::kWrite;   // kWrite, kSend or kRead
  uint32_t msg_bytes = 16;
  uint32_t batch = 1;                 // WRs per post list (one doorbell)
  uint32_t num_qps = 1;
  Mode mode = Mode::kBandwidth;
  uint32_t tx_depth = 128;            // per QP, in bandwidth mode
  double start_us = 0;
  double stop_us = 1e18;              // stops posting new work
  uint32_t src_host = 0;
  uint32_t dst_host = 1;
  // Host CPU time from seeing a completion to posting again (poll + post).
  double turnaround_ns = 100;
  bool uc = false;                    // UC instead of RC (WRITE/SEND only)
  // The VM's QoS as its operator would set it (Justitia reads the class).
  policy::TenantClass app_class = policy::TenantClass::kBandwidth;
  uint32_t weight = 1;
};

struct ScenarioSpec {
  std::string name;
  std::string group;                  // figure the scenario belongs to
  std::string paper;                  // what the papers report, for the table
  std::string preset = "cx6-100";
  uint32_t num_hosts = 2;
  double duration_us = 20000;
  double warmup_us = 2000;            // excluded from the statistics
  uint64_t seed = 1;
  model::FabricParams fabric;
  std::vector<TenantSpec> tenants;
};

struct TenantResult {
  std::string tenant;
  uint64_t messages = 0;
  uint64_t bytes = 0;
  double gbps = 0;
  double mmps = 0;
  double avg_us = 0;
  double p50_us = 0;
  double p99_us = 0;
};

struct RunStats {
  uint64_t events = 0;
  double wall_s = 0;
  uint64_t tx_packets = 0;
  uint64_t drops = 0;
  uint64_t pauses = 0;
  uint64_t ecn_marks = 0;
  uint64_t retransmits = 0;
};

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_WORKLOAD_H_
