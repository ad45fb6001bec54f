// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/perftest/options.h"

#include <CLI/CLI.hpp>

#include <iostream>

namespace vrdma::perftest {

const char* TestName(TestKind k) {
  switch (k) {
    case TestKind::kWriteBw: return "write_bw";
    case TestKind::kWriteLat: return "write_lat";
    case TestKind::kSendBw: return "send_bw";
    case TestKind::kSendLat: return "send_lat";
    case TestKind::kReadBw: return "read_bw";
    case TestKind::kReadLat: return "read_lat";
  }
  return "?";
}

std::optional<TestKind> ParseTestName(const std::string& name) {
  std::string n = name;
  if (n.rfind("ib_", 0) == 0) n = n.substr(3);  // accept ib_write_bw too
  for (TestKind k : {TestKind::kWriteBw, TestKind::kWriteLat, TestKind::kSendBw,
                     TestKind::kSendLat, TestKind::kReadBw, TestKind::kReadLat}) {
    if (n == TestName(k)) return k;
  }
  return std::nullopt;
}

std::optional<Options> ParseOptions(int argc, char** argv, int* exit_code) {
  CLI::App app{"vrdma-perftest: perftest's bandwidth and latency tests on the "
               "in-process virtio-rdma guest"};
  Options o;
  std::string pos1, pos2, test_opt;
  app.add_option("test", pos1, "write_bw|write_lat|send_bw|send_lat|read_bw|read_lat");
  app.add_option("server", pos2, "server address (client mode); absent: server mode");
  app.add_option("--test", test_opt, "the test (instead of the first positional argument)");
  app.add_option("-p,--port", o.port, "TCP port of the parameter exchange");
  app.add_option("--socket,--daemon-socket", o.socket,
                 "the VM's vhost-user socket (the daemon listens on it)")
      ->required();
  app.add_option("-s,--size", o.size, "message size in bytes");
  app.add_option("-n,--iters", o.iters, "iterations (per QP)");
  app.add_option("-q,--qp", o.num_qps, "number of QPs (bw tests)")->check(CLI::Range(1, 64));
  app.add_option("-D,--duration", o.duration_s, "run for this many seconds instead of -n");
  app.add_option("-t,--tx-depth", o.tx_depth, "work requests in flight per QP")
      ->check(CLI::Range(1, 1023));
  std::string conn = "RC";
  app.add_option("-c,--connection", conn, "connection type: RC or UC")
      ->check(CLI::IsMember({"RC", "UC"}));
  app.add_flag("--report_gbits", o.report_gbits, "report Gb/s instead of MB/s");
  app.add_flag("--verify", o.verify, "check every payload against its pattern");
  app.add_option("--spins-before-yield", o.spins_before_yield,
                 "empty polls before a waiting side yields its core");
  app.add_option("--out_json", o.out_json, "also write the results as JSON to FILE");
  app.add_option("--ram-mb", o.ram_mb, "guest RAM in MiB (default: sized from the test)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return std::nullopt;
  }
  std::string test = pos1;
  if (!test_opt.empty()) {
    test = test_opt;
    pos2 = pos1.empty() ? pos2 : pos1;  // then the only positional is the server
  }
  auto kind = ParseTestName(test);
  if (!kind) {
    std::cerr << "unknown or missing test '" << test << "'\n" << app.help();
    *exit_code = 2;
    return std::nullopt;
  }
  o.test = *kind;
  o.server = pos2;
  o.uc = conn == "UC";
  // UC has no RDMA READ; and no RNR flow control, so a send_bw receiver
  // that falls behind would lose messages this tool counts on.
  if (o.uc && (o.test == TestKind::kReadBw || o.test == TestKind::kReadLat ||
               o.test == TestKind::kSendBw)) {
    std::cerr << TestName(o.test) << " is not supported on UC\n";
    *exit_code = 2;
    return std::nullopt;
  }
  ApplyDefaults(&o);
  return o;
}

void ApplyDefaults(Options* o) {
  if (o->size == 0) o->size = IsBw(o->test) ? 65536 : 2;
  if (o->iters == 0) o->iters = IsBw(o->test) ? 5000 : 1000;
  if (!IsBw(o->test)) o->num_qps = 1;  // like perftest: latency uses one QP
}

}  // namespace vrdma::perftest
