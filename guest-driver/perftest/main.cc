// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-perftest: perftest's write/send/read bandwidth and latency tests on
// the in-process virtio-rdma guest (no VM). Like perftest, run a server
//   vrdma-perftest write_bw --socket /run/vm1.sock
// and a client pointing at it
//   vrdma-perftest write_bw --socket /run/vm2.sock 127.0.0.1
// The client sends its parameters, so the server needs only the test name.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "guest-driver/perftest/context.h"
#include "guest-driver/perftest/options.h"
#include "guest-driver/perftest/runners.h"
#include "guest-driver/perftest/tcp_exchange.h"

namespace vrdma::perftest {
namespace {

int Main(int argc, char** argv) {
  int code = 0;
  auto parsed = ParseOptions(argc, argv, &code);
  if (!parsed) return code;
  Options o = *parsed;
  std::string err;
  TcpChannel ch;
  if (o.is_server()) {
    std::printf("************************************\n* Waiting for client to connect... *\n"
                "************************************\n");
    std::fflush(stdout);
    if (!ch.Accept(o.port)) {
      std::fprintf(stderr, "vrdma-perftest: cannot accept on port %u\n", o.port);
      return 1;
    }
  } else if (!ch.Connect(o.server, o.port)) {
    std::fprintf(stderr, "vrdma-perftest: cannot connect to %s:%u\n", o.server.c_str(), o.port);
    return 1;
  }
  if (!ExchangeParams(ch, &o, &err)) {
    std::fprintf(stderr, "vrdma-perftest: %s\n", err.c_str());
    return 1;
  }
  Context ctx;
  if (!ctx.Setup(o, &err) || !ctx.Connect(ch, &err)) {
    std::fprintf(stderr, "vrdma-perftest: %s\n", err.c_str());
    return 1;
  }
  std::printf(" %s test on the in-process virtio-rdma guest (%s)\n Number of qps : %u  "
              "Transport type : %s  TX depth : %u  Verify : %s\n",
              TestName(o.test), o.is_server() ? "server" : "client", o.num_qps,
              o.uc ? "UC" : "RC", o.tx_depth,
              o.verify ? "ON" : "OFF");
  for (auto& q : ctx.qps) {
    std::printf(" local address: QPN %#06x PSN %#08x RKey %#010x VAddr %#018lx\n", q.local.qpn,
                q.local.psn, q.local.rkey, static_cast<unsigned long>(q.local.addr));
    std::printf(" remote address: QPN %#06x PSN %#08x RKey %#010x VAddr %#018lx\n", q.remote.qpn,
                q.remote.psn, q.remote.rkey, static_cast<unsigned long>(q.remote.addr));
  }
  RunResult r = IsBw(o.test) ? RunBw(ctx, ch) : RunLat(ctx, ch);
  if (!r.ok) {
    std::fprintf(stderr, "vrdma-perftest: %s\n", r.error.c_str());
    return 1;
  }
  if (o.verify) {
    std::printf(" Verify: %s (%lu errors)\n", r.verify_errors == 0 ? "PASSED" : "FAILED",
                static_cast<unsigned long>(r.verify_errors));
  }
  if (!o.out_json.empty()) {
    nlohmann::json j = r.json.is_null() ? nlohmann::json{{"test", TestName(o.test)}} : r.json;
    j["role"] = o.is_server() ? "server" : "client";
    j["num_qps"] = o.num_qps;
    j["tx_depth"] = o.tx_depth;
    j["connection"] = o.uc ? "UC" : "RC";
    j["duration_s"] = o.duration_s;
    if (o.verify) j["verify_errors"] = r.verify_errors;
    std::ofstream f(o.out_json);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "vrdma-perftest: cannot write %s\n", o.out_json.c_str());
      return 1;
    }
  }
  return r.verify_errors == 0 ? 0 : 3;
}

}  // namespace
}  // namespace vrdma::perftest

int main(int argc, char** argv) { return vrdma::perftest::Main(argc, argv); }
