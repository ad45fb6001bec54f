// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-perftest as an operator runs it: a server on one VM's socket, a
// client on the other's, for each of the six tests with --verify. Both
// processes must exit 0 and report "Verify: PASSED"; the client prints
// perftest's result table. (Figures are printed, never asserted.)
#include <unistd.h>

#include <ostream>

#include "tests/integration/daemon_harness.h"
#include "tests/integration/perftest_runner.h"

#include <gtest/gtest.h>

namespace vrdma::integration {
namespace {

struct PerftestCase {
  const char* test;
  std::vector<std::string> extra;
  const char* header;  // the table header the client prints
  std::vector<std::string> daemon_args = {};
};

// Readable parameter names in test output (not the struct's bytes).
void PrintTo(const PerftestCase& c, std::ostream* os) { *os << c.test; }

class PerftestRunTest : public ::testing::TestWithParam<PerftestCase> {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(daemon_.Start(&err, GetParam().daemon_args)) << err;
    sock_a_ = daemon_.AttachVm("vm-a", "::ffff:10.0.0.1");
    sock_b_ = daemon_.AttachVm("vm-b", "::ffff:10.0.0.2");
    ASSERT_FALSE(sock_a_.empty() || sock_b_.empty());
  }
  void TearDown() override { daemon_.Stop(); }
  DaemonHarness daemon_;
  std::string sock_a_, sock_b_;
};

TEST_P(PerftestRunTest, ServerAndClientVerify) {
  const PerftestCase& c = GetParam();
  const std::string bin = PerftestPath();
  const std::string port = std::to_string(20000 + getpid() % 20000);
  const std::string json = daemon_.dir() + "/client.json";
  std::vector<std::string> server = {bin, c.test, "--socket", sock_a_, "-p", port};
  std::vector<std::string> client = {bin, c.test, "127.0.0.1", "--socket", sock_b_,
                                     "-p", port, "--verify", "--out_json", json};
  client.insert(client.end(), c.extra.begin(), c.extra.end());
  const std::string sout = daemon_.dir() + "/server.out";
  const std::string cout = daemon_.dir() + "/client.out";
  pid_t s = Spawn(server, sout);
  ASSERT_GT(s, 0);
  pid_t cl = Spawn(client, cout);
  ASSERT_GT(cl, 0);
  const int crc = Wait(cl, 120);
  const int src = Wait(s, 20);
  const std::string so = Slurp(sout), co = Slurp(cout);
  std::printf("%s", co.c_str());
  EXPECT_EQ(crc, 0) << "client:\n" << co << "\nserver:\n" << so;
  EXPECT_EQ(src, 0) << "server:\n" << so;
  EXPECT_NE(co.find("Verify: PASSED"), std::string::npos) << co;
  EXPECT_NE(so.find("Verify: PASSED"), std::string::npos) << so;
  EXPECT_NE(co.find(c.header), std::string::npos) << co;
  const std::string js = Slurp(json);
  EXPECT_NE(js.find("\"verify_errors\": 0"), std::string::npos) << js;
  EXPECT_TRUE(daemon_.alive());
}

const char* kBw = "#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
const char* kGb = "BW peak[Gb/sec]";
const char* kLat = "#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]";

INSTANTIATE_TEST_SUITE_P(
    Tests, PerftestRunTest,
    ::testing::Values(PerftestCase{"write_bw", {"-n", "500", "-s", "8192", "-q", "2"}, kBw},
                      PerftestCase{"send_bw", {"-n", "300", "-s", "4096"}, kBw},
                      PerftestCase{"read_bw", {"-n", "500", "-s", "8192", "--report_gbits"}, kGb},
                      PerftestCase{"write_lat", {"-n", "200", "-s", "64"}, kLat},
                      PerftestCase{"send_lat", {"-n", "200", "-s", "64"}, kLat},
                      PerftestCase{"read_lat", {"-n", "200", "-s", "4096"}, kLat},
                      PerftestCase{"write_bw", {"-D", "1", "-s", "4096"}, kBw},
                      // Unreliable connected QPs.
                      PerftestCase{"write_bw", {"-n", "300", "-s", "4096", "-c", "UC"}, kBw},
                      PerftestCase{"send_lat", {"-n", "200", "-s", "32", "-c", "UC"}, kLat},
                      // Several doorbell virtqueues, QPs spread over them.
                      PerftestCase{"send_bw",
                                   {"-n", "300", "-s", "2048", "-q", "4"},
                                   kBw,
                                   {"--doorbell-queues", "2"}},
                      PerftestCase{"read_bw",
                                   {"-n", "300", "-s", "2048", "-q", "3", "-t", "16"},
                                   kBw,
                                   {"--doorbell-queues", "4"}}),
    [](const ::testing::TestParamInfo<PerftestCase>& i) {
      return std::string(i.param.test) + "_" + std::to_string(i.index);
    });

}  // namespace
}  // namespace vrdma::integration
