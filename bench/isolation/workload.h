// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Tenants and scenarios of the isolation bench. A tenant is one VM running a
// perftest-shaped workload against the RNIC MODEL; all figures produced
// from these are model outputs, not hardware measurements. Scenarios come
// from YAML files (bench/isolation/scenarios/, docs/isolation-scenarios.md);
// some fields are parsed and checked but not run by the model yet
// (CheckRunnable in bench_run.h says which).
#ifndef VRDMA_BENCH_ISOLATION_WORKLOAD_H_
#define VRDMA_BENCH_ISOLATION_WORKLOAD_H_

#include <cstdint>
#include <optional>
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

// What a tenant posts. Atomics carry 8 bytes whatever the message size.
enum class OpKind : uint8_t { kWrite, kWriteImm, kSend, kSendImm, kRead, kCas, kFaa };
enum class Transport : uint8_t { kRc, kUc, kUd };

// Whether the op consumes a receive at its destination (the receiving
// guest must have posted one).
constexpr bool ConsumesReceive(OpKind op) {
  return op == OpKind::kSend || op == OpKind::kSendImm || op == OpKind::kWriteImm;
}
constexpr bool IsAtomic(OpKind op) { return op == OpKind::kCas || op == OpKind::kFaa; }

struct OpShare {
  OpKind op = OpKind::kWrite;
  uint32_t weight = 1;
};
struct SizeShare {
  uint32_t bytes = 16;
  uint32_t weight = 1;
};

// Memory regions the tenant registers (count 0: none declared).
struct MrSpec {
  uint32_t count = 0;
  uint64_t bytes = 0;
  uint64_t page_bytes = 4096;
};

// A tenant's reliability (docs/reliability.md §2.2): with the field set,
// both ends of its QPs run through a ReliableRnic on their host's card,
// in native (pass-through, the RNIC's own RC) or uc (the layer's software
// reliability over UC) mode.
enum class Reliability : uint8_t { kNative, kUc };

struct TenantSpec {
  std::string name;
  // Unset: the tenant's QPs are the card's own, no layer.
  std::optional<Reliability> reliability;
  // Drawn per WR by weight; one entry: always that op (no draw).
  std::vector<OpShare> ops = {OpShare{}};
  std::vector<SizeShare> sizes = {SizeShare{}};
  uint32_t batch = 1;                 // WRs per post list (one doorbell)
  Transport transport = Transport::kRc;
  // Independent posting loops, each with qps_per_process QPs.
  uint32_t processes = 1;
  uint32_t qps_per_process = 1;
  Mode mode = Mode::kBandwidth;
  uint32_t tx_depth = 128;            // per QP, in bandwidth mode
  // Open loop: messages per second of each process (0: closed loop).
  double rate_mps = 0;
  bool inline_data = false;
  MrSpec mrs;
  double start_us = 0;
  double stop_us = 1e18;              // stops posting new work
  uint32_t src_host = 0;
  uint32_t dst_host = 1;
  // Receives the peer guest keeps posted on each receiving QP (SEND,
  // SEND_IMM and WRITE_IMM consume them; it reposts one per completion).
  // Unset: 2 * (depth + batch) + 64, never short. 0: it never posts any (an
  // RC sender then meets RNR NAKs for ever, or until rnr_retry runs out; UC
  // and UD SENDs are dropped).
  std::optional<uint32_t> recv_depth;
  // RC retry attributes, IB-encoded, on both ends (rnr_timer is the one the
  // receiver asks senders to wait; timeout the local ACK timeout, 4.096 us *
  // 2^timeout, 0 = none). Unset: the model's QP defaults (7 = retry for
  // ever, 7, rnr_timer 1 = 10 us, the card's rto).
  std::optional<uint8_t> rnr_retry, retry_cnt, rnr_timer, timeout;
  // Host CPU time from seeing a completion to posting again (poll + post).
  double turnaround_ns = 100;
  // The VM's QoS as its operator would set it (Justitia reads the class).
  policy::TenantClass app_class = policy::TenantClass::kBandwidth;
  uint32_t weight = 1;
  double max_gbps = 0;  // a rate cap (TenantQos::max_rate_bps); 0: none
  double max_mmps = 0;  // a message cap, M msgs/s (TenantQos::max_msgs_per_s); 0: none
  double min_gbps = 0;  // a guarantee (TenantQos::min_rate_bps); 0: none
  double latency_target_us = 0;  // TenantQos::latency_target_ns; 0: none
  // Where it was declared: "file:line" and "tenants[k]" (for messages).
  std::string source;
  std::string path;

  uint32_t num_qps() const { return processes * qps_per_process; }
};

enum class Metric : uint8_t { kGbps, kMmps, kAvgUs, kP50Us, kP99Us };
enum class RatioKind : uint8_t {
  kNone,            // the tenant's figure in the mix
  kWithOverAlone,   // in the mix / alone
  kAloneOverWith,   // alone / in the mix
};

// A pass rule on a victim tenant (docs/isolation-scenarios.md).
struct ExpectRule {
  std::string tenant;              // as written
  std::vector<size_t> tenants;     // indexes it names in ScenarioSpec::tenants
  Metric metric = Metric::kP99Us;
  RatioKind ratio = RatioKind::kNone;
  std::optional<double> le, ge;
  std::vector<std::string> policies;  // empty: every policy
  std::string source;                 // "file:line"
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
  // Every host's stage signals adaptively (sched::StageOptions).
  bool adaptive_signaling = false;
  // With the reliability layer: its receivers hold a repaired message's
  // delivery this long (docs/reliability.md §4.2, "Late originals"); 0:
  // no hold.
  double packet_lifetime_us = 0;
  // false: `--all` over the built-in directory skips the scenario (it runs
  // by --scenario NAME or --scenario-file), so the default run's results
  // stay as they were.
  bool in_all = true;
  model::FabricParams fabric;
  std::vector<TenantSpec> tenants;
  std::vector<ExpectRule> expect;
  std::string source;                 // "file:line"
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
  // Open loop: arrivals dropped because a process already had
  // kMaxBacklog messages waiting to be posted.
  uint64_t dropped = 0;
  // WRs that completed in error (a QP ran out of retries: the failing WR
  // and the flushed rest); not in messages, bytes or MCT. The QP's guest
  // posts nothing more on it.
  uint64_t errors = 0;
};

struct RunStats {
  uint64_t events = 0;
  double wall_s = 0;
  uint64_t tx_packets = 0;
  uint64_t drops = 0;
  uint64_t pauses = 0;
  uint64_t ecn_marks = 0;
  uint64_t retransmits = 0;
  // Memory of a run (the largest of the runs summed here): the model's
  // QPs (tenant QPs, their peers, the stages' own), the model's accounted
  // per-QP state (Simulator::qp_state_bytes), and how much the process's
  // resident set grew from before the set-up to the end of the run (model,
  // stages, the bench's per-message records; memory freed by an earlier
  // run and reused does not count).
  uint64_t model_qps = 0;
  uint64_t qp_state_bytes = 0;
  uint64_t rss_growth_bytes = 0;
  // CQEs the stages asked the cards for, and guest WRs they reported done.
  uint64_t rnic_signals = 0;
  uint64_t guest_wrs = 0;
  // The reliability layers' counters summed over the hosts
  // (reliable::ReliabilityCounters; 0 without tenants' `reliability`).
  uint64_t layer_connects_uc = 0;
  uint64_t layer_chunks_sent = 0;
  uint64_t layer_retx_sent = 0;
  uint64_t layer_lost_rack = 0;
  uint64_t layer_lost_rto = 0;
  uint64_t layer_cwnd_resets = 0;
  uint64_t layer_acks_sent = 0;
  uint64_t layer_peer_unmatched = 0;
  uint64_t layer_messages_failed = 0;
  // Drops (as `drops`) after the warm-up (reliability.md §9 row 3 asks
  // for none after the first round trips).
  uint64_t drops_after_warmup = 0;
  uint64_t max_port_bytes = 0;  // the deepest switch port queue of the run
};

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_ISOLATION_WORKLOAD_H_
