// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/ctl_view.h"

#include <string>

#include "gtest/gtest.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

const json kStats = json::parse(R"({"ok":true,"policy":{"name":"fair-share"},"vms":[
  {"name":"tenant-a","connected":true,"qps":2,"mrs":1,"pinned_bytes":1048576,
   "qos":{"weight":2,"class":"bandwidth","max_rate_bps":2000000000},
   "effective_qos":{"max_rate_bps":2000000000},
   "qos_change":{"source":"libvirt","ok":false,"error":"qos.weight: must be >= 1",
                 "asked":{"weight":0},"unix_ms":1795639875300},
   "qos_rejections":1,"scheduler":{"bytes_posted":5000000000,"bytes_completed":4000000000}}]})");

TEST(CtlView, VmsTable) {
  const std::string t = VmsTable(kStats);
  EXPECT_NE(t.find("NAME"), std::string::npos) << t;
  EXPECT_NE(t.find("tenant-a  yes"), std::string::npos) << t;
  EXPECT_NE(t.find("2Gb/s"), std::string::npos) << t;
  EXPECT_NE(t.find("5GB"), std::string::npos) << t;
}

TEST(CtlView, QosShowsAskedInForceAndTheRefusal) {
  const std::string t = QosText(FindVmStats(kStats, "tenant-a"), "fair-share");
  EXPECT_NE(t.find("max_rate_bps  2000000000  2000000000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("weight        2           -\n"), std::string::npos) << t;
  EXPECT_NE(t.find("from libvirt: REFUSED, qos.weight: must be >= 1"), std::string::npos) << t;
  EXPECT_NE(t.find("refused so far: 1"), std::string::npos) << t;
}

TEST(CtlView, StatsFlattened) {
  const std::string t = VmStatsText(FindVmStats(kStats, "tenant-a"));
  EXPECT_NE(t.find("scheduler.bytes_posted"), std::string::npos) << t;
  EXPECT_TRUE(FindVmStats(kStats, "nobody").is_null());
}

TEST(CtlView, TopRatesBetweenTwoSamples) {
  json prev = kStats;
  json cur = kStats;
  json& s0 = prev["vms"][0]["scheduler"];
  s0 = {{"wrs_completed", 100}, {"bytes_completed", 0}, {"latency_avg_ns", 10000},
        {"held_ns", 0}, {"bytes_paced", 0}, {"latency_hist", {0, 0, 100, 0, 0}}};
  json& s1 = cur["vms"][0]["scheduler"];
  // 2 s later: 300 more WRs of 250 us each, 500 MB, held 1 s, 100 MB paced.
  s1 = {{"wrs_completed", 400},     {"bytes_completed", 500000000}, {"latency_avg_ns", 190000},
        {"held_ns", 1000000000}, {"bytes_paced", 100000000},    {"queued_wrs", 7},
        // The interval: 200 WRs below 4 us (bucket 2), 96 below 8 us, 4 beyond.
        {"latency_hist", {0, 0, 300, 96, 4}}};
  const json r = TopRates(prev, cur, 2.0)["vms"][0];
  EXPECT_DOUBLE_EQ(r["wrs_per_s"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(r["gbps"].get<double>(), 2.0);
  EXPECT_NEAR(r["latency_avg_us"].get<double>(), 250, 1e-9);
  EXPECT_DOUBLE_EQ(r["held_fraction"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r["paced_gbps"].get<double>(), 0.4);
  EXPECT_EQ(r["queued_wrs"], 7);
  EXPECT_EQ(r["latency_p50_le_us"], 4.0);  // 200 of 300 below 4 us
  EXPECT_EQ(r["latency_p99_le_us"], "inf");  // 296 of 300 below 8 us: p99 beyond
  EXPECT_TRUE(TopRates(prev, prev, 1.0)["vms"][0]["latency_p50_le_us"].is_null());
  const std::string t = TopTable(TopRates(prev, cur, 2.0));
  EXPECT_NE(t.find("50%"), std::string::npos) << t;
  EXPECT_NE(t.find("2.000"), std::string::npos) << t;
}

}  // namespace
}  // namespace vrdma::daemon
