// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// TwoDaemons.SwitchUnderPerftest (docs/reliability.md §6, §10 step 18):
// both daemons with the reliability layer and 1 % loss on what each sends,
// a VM on each, attached native; vrdma-perftest runs between them for a
// fixed time with --verify while the operator of each VM walks its mode
// native -> uc -> rc -> native with set-reliability, B's operator a moment
// after A's (a switch waits for the peer's VM to ask the same, §2.2). Each
// step is seen in both daemons' stats (the perftest QP in the new mode,
// none switching) before the next, all while perftest still runs; then
// perftest exits 0 with verify PASSED (a completion in error, lost,
// repeated or out of post order fails it: bw_tests.cc), and both layers
// count three switches done and none failed.
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tests/integration/perftest_runner.h"
#include "tests/integration/two_daemon_fixture.h"

namespace vrdma::integration {
namespace {

using nlohmann::json;

constexpr char kLoss[] = "loss=0.01";
constexpr uint64_t kSeedA = 25, kSeedB = 26;

// The VM's entry in a daemon's stats (null if absent).
json VmStats(DaemonHarness& d, const std::string& name) {
  const json st = d.Control({{"cmd", "stats"}});
  for (const json& vm : st.value("vms", json::array())) {
    if (vm.value("name", "") == name) return vm;
  }
  return json();
}

// Waits (up to timeout) until the VM has a QP in `mode` and none switching
// on both daemons; false, with the last entries in *why, on a timeout.
bool WaitMode(DaemonPair& d, const std::string& mode,
              std::chrono::seconds timeout, std::string* why) {
  const std::string key = "qps_" + mode;
  const auto end = std::chrono::steady_clock::now() + timeout;
  json a, b;
  while (std::chrono::steady_clock::now() < end) {
    a = VmStats(d.a(), "vm-server");
    b = VmStats(d.b(), "vm-client");
    auto done = [&](const json& vm) {
      return vm.value(key, 0) > 0 && vm.value("qps_switching", 1) == 0;
    };
    if (done(a) && done(b)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *why = "A: " + a.dump() + "\nB: " + b.dump();
  return false;
}

class SwitchUnderPerftest : public ::testing::TestWithParam<const char*> {};

TEST_P(SwitchUnderPerftest, NoGuestSeesTheModeChange) {
  DaemonPair d;
  d.UsePeers(true);
  std::string err;
  ASSERT_TRUE(
      d.Start({}, &err, FaultArgs(kLoss, kSeedA), FaultArgs(kLoss, kSeedB)))
      << err;
  const std::string server = d.AttachA("vm-server", "native");
  const std::string client = d.AttachB("vm-client", "native");
  ASSERT_FALSE(server.empty() || client.empty());
  ASSERT_TRUE(WaitLayers(d));

  // Long enough for three switches on a loaded 2-core host; the test checks
  // that each one ended while perftest still ran.
  constexpr int kSeconds = 25;
  PerftestCase c{
      GetParam(), {"-D", std::to_string(kSeconds), "-s", "8192"}, ""};
  std::atomic<bool> finished{false};
  PerftestPair r;
  std::thread run([&] {
    r = RunPerftestPair(c, server, client, d.b().dir(), kSeconds + 60);
    finished = true;
  });
  std::string why;
  // perftest's QP is up (native) on both ends.
  const bool up = WaitMode(d, "native", std::chrono::seconds(20), &why);
  EXPECT_TRUE(up) << why;
  std::vector<std::string> done;
  for (const char* mode : {"uc", "rc", "native"}) {
    if (!up || finished) break;
    const json ra = d.a().Control(
        {{"cmd", "set-reliability"}, {"name", "vm-server"}, {"mode", mode}});
    ASSERT_EQ(ra.value("ok", false), true) << ra;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const json rb = d.b().Control(
        {{"cmd", "set-reliability"}, {"name", "vm-client"}, {"mode", mode}});
    ASSERT_EQ(rb.value("ok", false), true) << rb;
    if (!WaitMode(d, mode, std::chrono::seconds(6), &why)) {
      ADD_FAILURE() << "the switch to " << mode << " did not end:\n" << why;
      break;
    }
    EXPECT_FALSE(finished) << "perftest ended before the switch to " << mode
                           << " did";
    done.push_back(mode);
    std::this_thread::sleep_for(
        std::chrono::seconds(1));  // traffic in the new mode
  }
  run.join();
  std::printf("%s", r.client_out.c_str());
  EXPECT_EQ(done, (std::vector<std::string>{"uc", "rc", "native"}));
  EXPECT_EQ(r.client_rc, 0) << "client:\n"
                            << r.client_out << "\nserver:\n"
                            << r.server_out;
  EXPECT_EQ(r.server_rc, 0) << r.server_out;
  EXPECT_NE(r.client_out.find("Verify: PASSED"), std::string::npos)
      << r.client_out;
  // Each layer switched the QP three times, each on both ends, and failed
  // nothing to a guest.
  const json ra = d.a().Control({{"cmd", "stats"}})["reliability"];
  const json rb = d.b().Control({{"cmd", "stats"}})["reliability"];
  for (const json* r : {&ra, &rb}) {
    EXPECT_EQ(r->value("switches_done", 0), 3) << r->dump();
    EXPECT_EQ(r->value("switches_failed", 0), 0) << r->dump();
    EXPECT_EQ(r->value("messages_failed", 0), 0) << r->dump();
    EXPECT_EQ(r->value("rc_failed_to_guest", 0), 0) << r->dump();
    EXPECT_EQ(r->value("switch_bad", 0) + r->value("drained_bad", 0) +
                  r->value("ready_bad", 0),
              0)
        << r->dump();
  }
  std::printf(
      " %s: switches done %d+%d, guest WRs held meanwhile %d+%d; uc: messages "
      "%d, "
      "units resent %d; rc: connects %d+%d\n",
      GetParam(), ra.value("switches_done", 0), rb.value("switches_done", 0),
      ra.value("switch_wrs_held", 0), rb.value("switch_wrs_held", 0),
      ra.value("messages_completed", 0) + rb.value("messages_completed", 0),
      ra.value("retx_sent", 0) + rb.value("retx_sent", 0),
      ra.value("rc_connects", 0), rb.value("rc_connects", 0));
  EXPECT_TRUE(d.a().alive());
  EXPECT_TRUE(d.b().alive());
  d.Stop();
}

INSTANTIATE_TEST_SUITE_P(TwoDaemons, SwitchUnderPerftest,
                         ::testing::Values("send_bw", "write_bw", "read_bw"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

}  // namespace
}  // namespace vrdma::integration
