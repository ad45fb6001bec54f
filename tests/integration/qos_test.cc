// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Per-VM QoS through the real daemon on the software RNIC with a line rate
// (--soft-line-gbps): two guests each run `vrdma-perftest write_bw` (VM
// vm-a to vm-a-peer, vm-b to vm-b-peer) at once, and the operator changes
// their QoS with set-qos while they run. Rates are measured by the daemon
// over a window in which both run (stats' per-VM bytes completed) and by
// vrdma-perftest itself; both are printed.
//
// The cap and weight tests need a policy that applies caps and weights
// (issue 12's central scheduler, "fair-share"); they are DISABLED_ until it
// exists and are enabled with it. The others run with today's policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/daemon_harness.h"
#include "tests/integration/perftest_runner.h"

namespace vrdma::integration {
namespace {

using namespace std::chrono_literals;

// The software RNIC's line rate: well below what two write_bw guests and
// the daemon move on 2 shared cores without one, so the wire, not the CPU,
// is what the guests share.
constexpr double kLineGbps = 4.0;
constexpr uint64_t kMsgBytes = 65536;
// What of the line a 64 KiB WRITE's payload gets: vrdma-perftest's 1024 B
// path MTU makes 64 packets of 82 bytes' overhead each, plus the ACK.
constexpr double kPayloadShare = 65536.0 / (65536 + 65 * 82);

std::string Gbps(double g) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g", g);
  return b;
}

// A daemon on a policy (the parameter) and a line rate, with the guests'
// four VMs attached.
class SoftLineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(daemon_.Start(&err, {"--policy", GetParam(), "--soft-line-gbps", Gbps(kLineGbps)}))
        << err;
    const char* names[] = {"vm-a", "vm-a-peer", "vm-b", "vm-b-peer"};
    for (int i = 0; i < 4; ++i) {
      sockets_[i] = daemon_.AttachVm(names[i], "::ffff:10.0.0." + std::to_string(i + 1));
      ASSERT_FALSE(sockets_[i].empty()) << names[i];
    }
    guests_ = {{"vm-a", "vm-a-peer", sockets_[0], sockets_[1]},
               {"vm-b", "vm-b-peer", sockets_[2], sockets_[3]}};
  }
  void TearDown() override { daemon_.Stop(); }

  nlohmann::json SetQos(const std::string& vm, const nlohmann::json& qos) {
    return daemon_.Control({{"cmd", "set-qos"}, {"name", vm}, {"qos", qos}});
  }
  static void Print(const char* what, const std::vector<double>& g) {
    std::printf("%-34s vm-a %.3f Gb/s, vm-b %.3f Gb/s, together %.3f of a %.1f Gb/s line\n",
                what, g[0], g[1], g[0] + g[1], kLineGbps);
  }

  DaemonHarness daemon_;
  std::string sockets_[4];
  std::vector<BwGuest> guests_;
};

// Today's policies: the wire is shared, never exceeded, and the harness
// measures it (each guest gets a real share, together about the line).
using LineShareTest = SoftLineTest;

TEST_P(LineShareTest, TwoGuestsTogetherStayWithinTheLine) {
  WriteBwTraffic traffic(daemon_);
  std::string err;
  ASSERT_TRUE(traffic.Start(guests_, 6, kMsgBytes, {}, &err)) << err;
  std::this_thread::sleep_for(500ms);
  const std::optional<std::vector<double>> window = traffic.MeasureGbps(3000ms, &err);
  ASSERT_TRUE(window.has_value()) << err;
  const std::vector<double>& g = *window;
  const std::optional<std::vector<double>> perftest = traffic.Finish(&err);
  ASSERT_TRUE(perftest.has_value()) << err;
  Print("daemon, a 3 s window of both:", g);
  Print("vrdma-perftest, each whole run:", *perftest);
  const double sum = g[0] + g[1];
  const double line_payload = kLineGbps * kPayloadShare;
  // A WRITE completes as it starts on the wire (whole), and the window's
  // edges are a stats round trip: a little over is measurement.
  EXPECT_LE(sum, line_payload * 1.02) << "the guests together exceed the line";
  EXPECT_GE(sum, line_payload * 0.80) << "the line, not the CPU, should be the limit";
  for (double x : g) EXPECT_GE(x, 0.2 * sum) << "each guest gets a share";
}

INSTANTIATE_TEST_SUITE_P(PassThrough, LineShareTest, ::testing::Values("pass-through"));

// QoS applied by the policy under test. Not in a sanitized build: its
// daemon is CPU-bound below the line (1.9 of 4 Gb/s under fair-share's
// per-piece work), so what the guests share is the CPU, not the line.
class QosRateTest : public SoftLineTest {
 protected:
  void SetUp() override {
#ifdef VRDMA_SANITIZED
    GTEST_SKIP() << "rates through a sanitized daemon measure its CPU, not the line";
#endif
    SoftLineTest::SetUp();
  }
};

// A cap set live brings the guest's rate within 5% of it within a second;
// the other guest may take the rest of the line. (It once read 0.95-0.99 of
// the cap: the harness divided by its own wall time, tens of ms of stats
// round trips longer than the daemon's interval; and a 1 ms bucket lost
// what a descheduled data-path thread held back. Rates now come from the
// daemon's sampled_at_ns, and the bucket keeps what a backlogged VM is owed:
// policy/rate_bucket.h.)
TEST_P(QosRateTest, CapBringsTheRateToItWithinASecond) {
  WriteBwTraffic traffic(daemon_);
  std::string err;
  ASSERT_TRUE(traffic.Start(guests_, 6, kMsgBytes, {}, &err)) << err;
  const std::optional<std::vector<double>> before = traffic.MeasureGbps(1000ms, &err);
  ASSERT_TRUE(before.has_value()) << err;
  Print("before the cap:", *before);
  const double cap_gbps = kLineGbps / 4;
  const auto set = SetQos("vm-a", {{"max_rate_bps", static_cast<uint64_t>(cap_gbps * 1e9)}});
  ASSERT_EQ(set["ok"], true) << set.dump();
  std::this_thread::sleep_for(1000ms);
  const std::optional<std::vector<double>> window = traffic.MeasureGbps(2000ms, &err);
  ASSERT_TRUE(window.has_value()) << err;
  const std::vector<double>& g = *window;
  Print("a second after the cap, for 2 s:", g);
  ASSERT_TRUE(traffic.Finish(&err).has_value()) << err;
  EXPECT_NEAR(g[0], cap_gbps, 0.05 * cap_gbps);
  EXPECT_GT(g[1], 0.5 * (kLineGbps * kPayloadShare - cap_gbps)) << "work conserving";
}

// Waits for the policy of issue 12 ("fair-share"): weights 1:3 split the
// line a quarter to three quarters, each within 5% of its share.
TEST_P(QosRateTest, WeightsOneToThreeSplitTheLine) {
  ASSERT_EQ(SetQos("vm-a", {{"weight", 1}})["ok"], true);
  ASSERT_EQ(SetQos("vm-b", {{"weight", 3}})["ok"], true);
  WriteBwTraffic traffic(daemon_);
  std::string err;
  ASSERT_TRUE(traffic.Start(guests_, 6, kMsgBytes, {}, &err)) << err;
  std::this_thread::sleep_for(500ms);
  const std::optional<std::vector<double>> window = traffic.MeasureGbps(3000ms, &err);
  ASSERT_TRUE(window.has_value()) << err;
  const std::vector<double>& g = *window;
  Print("weights 1:3, a 3 s window:", g);
  ASSERT_TRUE(traffic.Finish(&err).has_value()) << err;
  const double sum = g[0] + g[1];
  EXPECT_NEAR(g[0], 0.25 * sum, 0.05 * 0.25 * sum);
  EXPECT_NEAR(g[1], 0.75 * sum, 0.05 * 0.75 * sum);
  // As much of the line as pass-through gets here (LineShareTest): the
  // split must not waste it.
  EXPECT_GE(sum, 0.8 * kLineGbps * kPayloadShare);
}

INSTANTIATE_TEST_SUITE_P(FairShare, QosRateTest, ::testing::Values("fair-share"));

// A set-qos under traffic is in force when the reply comes (the policy
// shows it in stats at once) and disturbs nothing: every change is
// answered quickly, both guests' runs verify and keep their rate.
// Justitia applies the weight, so stats' effective_qos shows it.
using LiveQosTest = SoftLineTest;

TEST_P(LiveQosTest, SetQosUnderTrafficIsInForceAtTheReply) {
  WriteBwTraffic traffic(daemon_);
  std::string err;
  // 12 s: a second before, 40 changes (1.5 s, 4-5 s in a sanitized build
  // beside a busy CPU), a second after, all inside the runs.
  ASSERT_TRUE(traffic.Start(guests_, 12, kMsgBytes, {"--verify"}, &err)) << err;
  const std::optional<std::vector<double>> before = traffic.MeasureGbps(1000ms, &err);
  ASSERT_TRUE(before.has_value()) << err;
  std::vector<double> ms;
  for (uint32_t i = 0; i < 40; ++i) {
    const uint32_t weight = 1 + i % 5;
    const auto t0 = std::chrono::steady_clock::now();
    const nlohmann::json r = SetQos("vm-a", {{"weight", weight}});
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_EQ(r["ok"], true) << r.dump();
    const nlohmann::json vm = daemon_.VmStats("vm-a");
    ASSERT_EQ(vm["effective_qos"].value("weight", 0u), weight) << vm.dump();
    std::this_thread::sleep_for(25ms);
  }
  const std::optional<std::vector<double>> during = traffic.MeasureGbps(1000ms, &err);
  ASSERT_TRUE(during.has_value()) << err;
  const std::optional<std::vector<double>> perftest = traffic.Finish(&err);
  ASSERT_TRUE(perftest.has_value()) << err;
  std::sort(ms.begin(), ms.end());
  std::printf("set-qos under traffic, request to reply: p50 %.2f ms, max %.2f ms\n",
              ms[ms.size() / 2], ms.back());
  Print("before the changes:", *before);
  Print("after 40 changes:", *during);
  EXPECT_LT(ms[ms.size() / 2], 10.0) << "the policy has it within 10 ms";
  EXPECT_GT((*during)[0] + (*during)[1], 0.8 * ((*before)[0] + (*before)[1]))
      << "traffic undisturbed";
}

INSTANTIATE_TEST_SUITE_P(Justitia, LiveQosTest, ::testing::Values("justitia"));

}  // namespace
}  // namespace vrdma::integration
