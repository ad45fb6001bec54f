// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-perftest as an operator runs it: a server on one VM's socket, a
// client on the other's, for each of the six tests with --verify
// (StandardPerftestCases; two_daemon_test.cc runs the same across two
// daemons). Both processes must exit 0 and report "Verify: PASSED"; the
// client prints perftest's result table. (Figures are printed, never asserted.)

#include "tests/integration/daemon_harness.h"
#include "tests/integration/perftest_runner.h"

#include <gtest/gtest.h>

namespace vrdma::integration {
namespace {

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
  const PerftestPair r = RunPerftestPair(c, sock_a_, sock_b_, daemon_.dir(), 120);
  std::printf("%s", r.client_out.c_str());
  EXPECT_EQ(r.client_rc, 0) << "client:\n" << r.client_out << "\nserver:\n" << r.server_out;
  EXPECT_EQ(r.server_rc, 0) << "server:\n" << r.server_out;
  EXPECT_NE(r.client_out.find("Verify: PASSED"), std::string::npos) << r.client_out;
  EXPECT_NE(r.server_out.find("Verify: PASSED"), std::string::npos) << r.server_out;
  EXPECT_NE(r.client_out.find(c.header), std::string::npos) << r.client_out;
  EXPECT_NE(r.json.find("\"verify_errors\": 0"), std::string::npos) << r.json;
  EXPECT_TRUE(daemon_.alive());
}

INSTANTIATE_TEST_SUITE_P(Tests, PerftestRunTest, ::testing::ValuesIn(StandardPerftestCases()),
                         [](const ::testing::TestParamInfo<PerftestCase>& i) {
                           return std::string(i.param.test) + "_" + std::to_string(i.index);
                         });

}  // namespace
}  // namespace vrdma::integration
