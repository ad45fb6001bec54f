// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/perftest/report.h"

#include <gtest/gtest.h>

#include "guest-driver/perftest/options.h"
#include "guest-driver/perftest/pattern.h"

namespace vrdma::perftest {
namespace {

TEST(ReportTest, BandwidthAverageAndPeak) {
  // 1000 messages of 1 MiB in 1 s: 1000 MB/s average; a window of 100
  // messages in 50 ms: 2000 MB/s peak. A burst of 100 completions within
  // 1 us is shorter than 1/20 of the run and does not count as a peak.
  std::vector<BwSample> s = {{0, 0},           {50'000'000, 100},  {500'000'000, 500},
                             {500'001'000, 600}, {1'000'000'000, 1000}};
  BwResult r = ComputeBw(1 << 20, 1000, 1'000'000'000, s, false);
  EXPECT_NEAR(r.bw_avg, 1000.0, 1e-6);
  EXPECT_NEAR(r.bw_peak, 2000.0, 1e-6);
  EXPECT_NEAR(r.msg_rate_mpps, 0.001, 1e-12);
  BwResult g = ComputeBw(125'000'000, 8, 1'000'000'000, {}, true);
  EXPECT_NEAR(g.bw_avg, 8.0, 1e-9);  // 1e9 bytes/s = 8 Gb/s
}

TEST(ReportTest, LatencyStatistics) {
  std::vector<double> s;
  for (int i = 1000; i >= 1; --i) s.push_back(i);  // 1..1000 us, unsorted
  LatResult r = ComputeLat(2, s);
  EXPECT_EQ(r.iters, 1000u);
  EXPECT_EQ(r.t_min, 1);
  EXPECT_EQ(r.t_max, 1000);
  EXPECT_EQ(r.t_typical, 501);
  EXPECT_NEAR(r.t_avg, 500.5, 1e-9);
  EXPECT_EQ(r.p99, 990);
  EXPECT_EQ(r.p999, 999);
  EXPECT_NEAR(r.t_stdev, 288.6749, 1e-3);
}

TEST(PatternTest, DetectsCorruptionAndStaleIterations) {
  std::vector<uint8_t> buf(1001);
  FillPattern(buf.data(), buf.size(), 3, 42);
  EXPECT_EQ(CheckPattern(buf.data(), buf.size(), 3, 42), buf.size());
  EXPECT_EQ(CheckPattern(buf.data(), buf.size(), 3, 41), 0u);  // stale message
  EXPECT_EQ(CheckPattern(buf.data(), buf.size(), 4, 42), 0u);  // other QP's
  buf[1000] ^= 1;  // the odd tail byte
  EXPECT_EQ(CheckPattern(buf.data(), buf.size(), 3, 42), 1000u);
  buf[1000] ^= 1;
  buf[517] ^= 0x80;
  EXPECT_EQ(CheckPattern(buf.data(), buf.size(), 3, 42), 517u);
  for (uint64_t i = 0; i < 600; ++i) {
    EXPECT_NE(SeqByte(i), 0);
    EXPECT_NE(SeqByte(i), SeqByte(i + 1));
  }
}

TEST(OptionsTest, ParsesPerftestStyleCommandLines) {
  const char* argv[] = {"vrdma-perftest", "write_bw", "127.0.0.1", "--socket", "/tmp/x",
                        "-s", "4096", "-n", "10", "-q", "2", "--verify", "--report_gbits"};
  int code = 0;
  auto o = ParseOptions(13, const_cast<char**>(argv), &code);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->test, TestKind::kWriteBw);
  EXPECT_EQ(o->server, "127.0.0.1");
  EXPECT_FALSE(o->is_server());
  EXPECT_EQ(o->size, 4096u);
  EXPECT_EQ(o->iters, 10u);
  EXPECT_EQ(o->num_qps, 2u);
  EXPECT_TRUE(o->verify);
  EXPECT_TRUE(o->report_gbits);

  const char* argv2[] = {"vrdma-perftest", "--test", "ib_send_lat", "--daemon-socket", "/tmp/y"};
  o = ParseOptions(5, const_cast<char**>(argv2), &code);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->test, TestKind::kSendLat);
  EXPECT_TRUE(o->is_server());
  EXPECT_EQ(o->size, 2u);      // perftest's latency defaults
  EXPECT_EQ(o->iters, 1000u);
  EXPECT_EQ(o->socket, "/tmp/y");
  EXPECT_EQ(o->spins_before_yield, guest::SpinWait::kDefaultSpinsBeforeYield);

  const char* argv6[] = {"vrdma-perftest", "read_lat", "--socket", "/tmp/r",
                         "--spins-before-yield", "64"};
  o = ParseOptions(6, const_cast<char**>(argv6), &code);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->spins_before_yield, 64u);

  const char* argv4[] = {"vrdma-perftest", "write_lat", "-c", "UC", "--socket", "/tmp/u"};
  o = ParseOptions(6, const_cast<char**>(argv4), &code);
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->uc);
  const char* argv5[] = {"vrdma-perftest", "read_bw", "-c", "UC", "--socket", "/tmp/u"};
  EXPECT_FALSE(ParseOptions(6, const_cast<char**>(argv5), &code));  // no READ on UC

  const char* argv3[] = {"vrdma-perftest", "bogus_bw", "--socket", "/tmp/z"};
  EXPECT_FALSE(ParseOptions(4, const_cast<char**>(argv3), &code));
  EXPECT_NE(code, 0);
}

}  // namespace
}  // namespace vrdma::perftest
