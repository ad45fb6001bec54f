// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The six tests, each with a client (active) and server side.
//   write_bw / read_bw: the client posts, the server waits for the end of
//     the run (TCP) and, with --verify, checks what was written into it;
//   send_bw: the server keeps receives posted and checks every message;
//   *_lat: ping-pong (write, send) or one read at a time, one QP.
// Every completion is checked; a failed CQE ends the run with an error.
#ifndef VRDMA_GUEST_DRIVER_PERFTEST_RUNNERS_H_
#define VRDMA_GUEST_DRIVER_PERFTEST_RUNNERS_H_

#include <string>

#include <nlohmann/json.hpp>

#include "guest-driver/perftest/context.h"
#include "guest-driver/perftest/tcp_exchange.h"

namespace vrdma::perftest {

struct RunResult {
  bool ok = false;
  std::string error;
  uint64_t verify_errors = 0;
  nlohmann::json json;  // null when this side reports nothing
};

RunResult RunBw(Context& ctx, TcpChannel& ch);
RunResult RunLat(Context& ctx, TcpChannel& ch);

}  // namespace vrdma::perftest

#endif  // VRDMA_GUEST_DRIVER_PERFTEST_RUNNERS_H_
