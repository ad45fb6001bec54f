// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The scenario matrix of PeRF (ATC'24) §2.3/§5 and Justitia (NSDI'22)
// §3/§6, as tenant mixes on the RNIC MODEL. The anomaly tests build the same
// scenarios with shorter durations.
#ifndef VRDMA_BENCH_ISOLATION_SCENARIOS_H_
#define VRDMA_BENCH_ISOLATION_SCENARIOS_H_

#include <string>
#include <vector>

#include "bench/isolation/workload.h"

namespace vrdma::bench {

// Tenant shapes (PeRF §5.1, Justitia §3.1).
TenantSpec LatencyTenant(const std::string& name, model::Op op = model::Op::kWrite);
TenantSpec MessageTenant(const std::string& name, uint32_t qps = 1,
                         model::Op op = model::Op::kWrite);
TenantSpec BandwidthTenant(const std::string& name, uint32_t msg_bytes = 1u << 20,
                           uint32_t qps = 1, model::Op op = model::Op::kWrite);

// Named scenarios; scale = 1.0 is the bench's full length, tests use less.
ScenarioSpec LatencyVsBandwidth(int n_bw, model::Op op = model::Op::kWrite,
                                const std::string& preset = "cx6-100", double scale = 1.0);
ScenarioSpec MessageVsBandwidth(int n_bw, model::Op op = model::Op::kWrite,
                                const std::string& preset = "cx6-100", double scale = 1.0);
ScenarioSpec SingleVsMultiQpBandwidth(int n_qps, const std::string& preset = "cx6-100",
                                      double scale = 1.0);
ScenarioSpec MiBVsGiB(const std::string& preset = "cx6-100", double scale = 1.0);
ScenarioSpec MessageVsMultiQpMessage(int n_qps, double scale = 1.0);
ScenarioSpec LatencyVsMultiQpMessage(int n_qps, double scale = 1.0);
ScenarioSpec LatencyAmongLatency(int n, double scale = 1.0);
ScenarioSpec MessageAmongMessage(int n, double scale = 1.0);
ScenarioSpec LatencyVsMessage(double scale = 1.0);
ScenarioSpec LatencyVsInboundRead(double scale = 1.0);
ScenarioSpec Incast(int senders, double scale = 1.0);
ScenarioSpec Scale(int tenants, double scale = 1.0);
// Justitia §6.4: 8 latency tenants vs 8 bandwidth tenants, 2 each of 1 MB,
// 10 MB, 100 MB and 1 GB messages.
ScenarioSpec MixedCrowd(double scale = 1.0);
// One simulated second of a 100 Gbps card carrying 4 KiB packets (speed).
ScenarioSpec SpeedOneSecond(double scale = 1.0);

// The whole matrix, in run order.
std::vector<ScenarioSpec> AllScenarios();

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_SCENARIOS_H_
