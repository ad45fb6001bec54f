// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/metrics.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

// A stats reply as the daemon writes it (daemon.cc, Stats), two VMs.
json SampleStats() {
  json sched{{"flows", 1},           {"wrs_arrived", 10},     {"bytes_arrived", 655360},
             {"wrs_completed", 9},   {"bytes_completed", 589824}, {"pieces_posted", 12},
             {"bytes_posted", 655360}, {"queued_wrs", 1},     {"queued_bytes", 65536},
             {"outstanding_pieces", 2}, {"outstanding_bytes", 8192}, {"held_ns", 1500000000},
             {"bytes_paced", 4096},  {"wrs_split", 3},        {"latency_avg_ns", 20000},
             {"latency_max_ns", 90000}, {"latency_sum_ns", 180000},
             // 2 WRs below 1 us, 3 in [16, 32) us, 4 in [64, 128) us.
             {"latency_hist", {2, 0, 0, 0, 0, 3, 0, 4, 0}}};
  json a{{"name", "tenant-a"},
         {"connected", true},
         {"qps", 2},
         {"mrs", 1},
         {"pinned_bytes", 1 << 20},
         {"wqes_posted", 10},
         {"cqes_written", 12},
         {"cqes_by_status", {{"success", 9}, {"wr_flushed_error", 3}}},
         {"control_ns", 2500},
         {"qos_rejections", 1},
         {"qos", {{"weight", 2}, {"class", "bandwidth"}, {"max_rate_bps", 2000000000}}},
         {"effective_qos", {{"max_rate_bps", 2000000000}}},
         {"policy", {{"active_flows", 1}, {"state", "gated"}, {"latency_target_ns", 50000}}},
         {"scheduler", sched}};
  json b = a;
  b["name"] = "tenant-\"b\"";  // escaped in a label
  b["connected"] = false;
  // The reliability layer's counters (stats, with --reliability-layer):
  // tenant-a's only here.
  a["reliability_counters"] = {{"chunks_sent", 40},   {"retx_sent", 3},
                               {"lost_rack", 2},      {"lost_rto", 1},
                               {"cwnd_resets", 1},    {"acks_sent", 7},
                               {"acks_received", 11}, {"messages_completed", 5},
                               {"messages_failed", 1}, {"rc_takeovers", 0},
                               {"switches_done", 2}, {"switches_failed", 0},
                               {"rto_undone", 4},    {"late_writes", 6},
                               {"delivery_holds", 9}};
  a["qps_uc"] = 1;
  a["qps_switching"] = 1;
  // ... and daemon-wide, with the §3.6 checks.
  json layer = a["reliability_counters"];
  layer["chunks_sent"] = 52;
  layer["wire"] = {{"ack_stale_token", 4}, {"rx_wrong_qp", 0}};
  return json{{"ok", true},
              {"policy", {{"name", "fair-share"}, {"active_vms", 2}}},
              {"vms", {a, b}},
              {"reliability", layer}};
}

TEST(Metrics, StatsBecomePrometheusText) {
  const std::string text = StatsToPrometheus(SampleStats());
  auto has = [&text](const std::string& s) { return text.find(s) != std::string::npos; };
  EXPECT_TRUE(has("# TYPE vrdma_vm_wrs_completed_total counter\n")) << text;
  EXPECT_TRUE(has("vrdma_vm_wrs_completed_total{vm=\"tenant-a\"} 9\n"));
  EXPECT_TRUE(has("vrdma_vm_connected{vm=\"tenant-a\"} 1\n"));
  EXPECT_TRUE(has("vrdma_vm_connected{vm=\"tenant-\\\"b\\\"\"} 0\n"));
  EXPECT_TRUE(has("vrdma_vm_held_seconds_total{vm=\"tenant-a\"} 1.5\n"));
  EXPECT_TRUE(has("vrdma_vm_completion_latency_avg_seconds{vm=\"tenant-a\"} 2e-05\n"));
  EXPECT_TRUE(has("vrdma_vm_qos{vm=\"tenant-a\",field=\"max_rate_bps\"} 2000000000\n"));
  EXPECT_TRUE(has("vrdma_vm_qos_effective{vm=\"tenant-a\",field=\"max_rate_bps\"}") ||
              has("vrdma_vm_effective_qos{vm=\"tenant-a\",field=\"max_rate_bps\"}"));
  EXPECT_TRUE(has("vrdma_vm_policy_active_flows{vm=\"tenant-a\",policy=\"fair-share\"} 1\n"));
  EXPECT_TRUE(has("vrdma_policy_info{policy=\"fair-share\"} 1\n"));
  // Report keys in ns are seconds, as Prometheus wants.
  EXPECT_TRUE(has("vrdma_vm_policy_latency_target_seconds{vm=\"tenant-a\",policy=\"fair-share\"} "
                  "5e-05\n")) << text;
  EXPECT_TRUE(has("vrdma_vms 2\n"));
  // Completions by status: one family, a sample per VM and status.
  EXPECT_TRUE(has("# TYPE vrdma_vm_completions_total counter\n"));
  EXPECT_TRUE(has("vrdma_vm_completions_total{vm=\"tenant-a\",status=\"success\"} 9\n"));
  EXPECT_TRUE(has("vrdma_vm_completions_total{vm=\"tenant-a\",status=\"wr_flushed_error\"} 3\n"));
  EXPECT_EQ(text.find("# TYPE vrdma_vm_completions_total"),
            text.rfind("# TYPE vrdma_vm_completions_total"));
  EXPECT_FALSE(has("gated"));  // texts are not samples
  // The histogram: cumulative buckets in seconds, +Inf = count.
  EXPECT_TRUE(has("# TYPE vrdma_vm_completion_latency_seconds histogram\n"));
  EXPECT_TRUE(has("vrdma_vm_completion_latency_seconds_bucket{vm=\"tenant-a\",le=\"1e-06\"} 2\n"))
      << text;
  EXPECT_TRUE(has("vrdma_vm_completion_latency_seconds_bucket{vm=\"tenant-a\",le=\"3.2e-05\"} 5\n"));
  EXPECT_TRUE(has("vrdma_vm_completion_latency_seconds_bucket{vm=\"tenant-a\",le=\"+Inf\"} 9\n"));
  EXPECT_TRUE(has("vrdma_vm_completion_latency_seconds_count{vm=\"tenant-a\"} 9\n"));
  EXPECT_TRUE(has("vrdma_vm_completion_latency_seconds_sum{vm=\"tenant-a\"} 0.00018\n"));
  // Every family once.
  EXPECT_EQ(text.find("# TYPE vrdma_vm_qps "), text.rfind("# TYPE vrdma_vm_qps "));
}

TEST(Metrics, ReliabilityCountersPerVm) {
  const std::string text = StatsToPrometheus(SampleStats());
  auto has = [&text](const std::string& s) { return text.find(s) != std::string::npos; };
  EXPECT_TRUE(has("# TYPE vrdma_vm_reliability_chunks_sent_total counter\n")) << text;
  EXPECT_TRUE(has("vrdma_vm_reliability_chunks_sent_total{vm=\"tenant-a\"} 40\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_units_resent_total{vm=\"tenant-a\"} 3\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_lost_rack_total{vm=\"tenant-a\"} 2\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_lost_rto_total{vm=\"tenant-a\"} 1\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_rto_undone_total{vm=\"tenant-a\"} 4\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_late_writes_total{vm=\"tenant-a\"} 6\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_delivery_holds_total{vm=\"tenant-a\"} 9\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_window_resets_total{vm=\"tenant-a\"} 1\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_acks_sent_total{vm=\"tenant-a\"} 7\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_acks_received_total{vm=\"tenant-a\"} 11\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_messages_completed_total{vm=\"tenant-a\"} 5\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_messages_failed_total{vm=\"tenant-a\"} 1\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_rc_takeovers_total{vm=\"tenant-a\"} 0\n"));
  EXPECT_TRUE(has("vrdma_vm_reliability_switches_total{vm=\"tenant-a\"} 2\n"));
  EXPECT_TRUE(has("# TYPE vrdma_vm_qps_uc gauge\n"));
  EXPECT_TRUE(has("vrdma_vm_qps_uc{vm=\"tenant-a\"} 1\n"));
  EXPECT_TRUE(has("vrdma_vm_qps_switching{vm=\"tenant-a\"} 1\n"));
  // The VM without the object has no sample.
  EXPECT_FALSE(has("vrdma_vm_reliability_chunks_sent_total{vm=\"tenant-\\\"b"));
  // Without the layer (no object anywhere), no family.
  json stats = SampleStats();
  for (json& vm : stats["vms"]) vm.erase("reliability_counters");
  EXPECT_EQ(StatsToPrometheus(stats).find("vrdma_vm_reliability_"), std::string::npos);
}

TEST(Metrics, ReliabilityCountersDaemonWide) {
  const std::string text = StatsToPrometheus(SampleStats());
  auto has = [&text](const std::string& s) { return text.find(s) != std::string::npos; };
  // The per-VM families' names without "vm_", one sample without labels.
  EXPECT_TRUE(has("# TYPE vrdma_reliability_chunks_sent_total counter\n")) << text;
  EXPECT_TRUE(has("vrdma_reliability_chunks_sent_total 52\n"));
  EXPECT_TRUE(has("vrdma_reliability_units_resent_total 3\n"));
  EXPECT_TRUE(has("vrdma_reliability_rc_takeovers_total 0\n"));
  EXPECT_TRUE(has("vrdma_reliability_switches_total 2\n"));
  EXPECT_FALSE(has("vrdma_qps_uc"));  // gauges of VMs only
  EXPECT_TRUE(has("vrdma_reliability_wire_checks_total{check=\"ack_stale_token\"} 4\n"));
  EXPECT_TRUE(has("vrdma_reliability_wire_checks_total{check=\"rx_wrong_qp\"} 0\n"));
  json stats = SampleStats();
  stats.erase("reliability");
  EXPECT_EQ(StatsToPrometheus(stats).find("vrdma_reliability_"), std::string::npos);
}

// Debian's promtool (package prometheus) accepts the text, lint included.
TEST(Metrics, PromtoolAcceptsIt) {
  if (access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/promtool";
  const std::string path = "/tmp/vrdma-metrics-test-" + std::to_string(getpid()) + ".prom";
  std::ofstream(path) << StatsToPrometheus(SampleStats());
  const std::string cmd = "/usr/bin/promtool check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  const int rc = pclose(p);
  unlink(path.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << out;
}

}  // namespace
}  // namespace vrdma::daemon
