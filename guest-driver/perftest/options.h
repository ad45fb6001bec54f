// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-perftest's command line: perftest's test names and main flags.
#ifndef VRDMA_GUEST_DRIVER_PERFTEST_OPTIONS_H_
#define VRDMA_GUEST_DRIVER_PERFTEST_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "guest-driver/lib/spin_wait.h"

namespace vrdma::perftest {

enum class TestKind : uint8_t { kWriteBw, kWriteLat, kSendBw, kSendLat, kReadBw, kReadLat };

const char* TestName(TestKind k);
std::optional<TestKind> ParseTestName(const std::string& name);
inline bool IsBw(TestKind k) {
  return k == TestKind::kWriteBw || k == TestKind::kSendBw || k == TestKind::kReadBw;
}

struct Options {
  TestKind test = TestKind::kWriteBw;
  std::string server;            // empty: run as the server
  uint16_t port = 18515;
  std::string socket;            // the VM's vhost-user socket
  uint64_t size = 0;             // 0: perftest's default for the test
  uint64_t iters = 0;            // 0: perftest's default for the test
  uint32_t num_qps = 1;
  uint32_t duration_s = 0;       // 0: run `iters` iterations
  uint32_t tx_depth = 128;
  bool uc = false;               // -c UC (default RC)
  bool report_gbits = false;
  bool verify = false;
  std::string out_json;
  uint64_t ram_mb = 0;           // 0: sized from the test
  // Empty polls (a pause each) before a waiting side yields its core
  // (guest::SpinWait). The default suits three busy pollers on two cores
  // (write_lat, send_lat); with two (read_lat, bw), every yield is a system
  // call with nobody to run, on the critical path of a latency test.
  uint32_t spins_before_yield = guest::SpinWait::kDefaultSpinsBeforeYield;

  bool is_server() const { return server.empty(); }
};

// Parses argv (CLI11). Returns nullopt after printing help or an error;
// *exit_code is what main should return then.
std::optional<Options> ParseOptions(int argc, char** argv, int* exit_code);

// Fills defaults that depend on the test (perftest: 64 KiB x 5000 for bw,
// 2 B x 1000 for lat).
void ApplyDefaults(Options* o);

}  // namespace vrdma::perftest

#endif  // VRDMA_GUEST_DRIVER_PERFTEST_OPTIONS_H_
