// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Prometheus metrics (--metrics-address; docs/operators.md, "Metrics"):
// the daemon's stats reply (daemon.h) in the text exposition format 0.0.4,
// served at /metrics by civetweb (Debian's libcivetweb). The server's
// threads ask the daemon's own control socket for stats on every scrape,
// like any client, so the control thread owns all state and nothing is
// shared. Control path only.
#ifndef VRDMA_VHOST_RDMA_DAEMON_METRICS_H_
#define VRDMA_VHOST_RDMA_DAEMON_METRICS_H_

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

struct mg_context;

namespace vrdma::daemon {

// A stats reply as Prometheus text: one family per counter or gauge, with
// # HELP and # TYPE, every VM a sample labelled vm="NAME".
std::string StatsToPrometheus(const nlohmann::json& stats);

class MetricsServer {
 public:
  // Listens on `address` (civetweb's listening_ports syntax: "9464",
  // "127.0.0.1:9464", "[::1]:9464"); nullptr when it cannot.
  static std::unique_ptr<MetricsServer> Start(const std::string& address,
                                              const std::string& control_socket);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  const std::string& control_socket() const { return control_socket_; }

 private:
  explicit MetricsServer(std::string control_socket)
      : control_socket_(std::move(control_socket)) {}
  const std::string control_socket_;
  mg_context* ctx_ = nullptr;
};

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_METRICS_H_
