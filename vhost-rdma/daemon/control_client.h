// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A client of the daemon's JSON control socket (daemon.h): one request, one
// reply, over a fresh connection. vrdma-ctl, its libvirt hook and the
// daemon's own libvirt watcher all talk to the daemon this way, so every
// operator input takes the same path. Control path only.
#ifndef VRDMA_VHOST_RDMA_DAEMON_CONTROL_CLIENT_H_
#define VRDMA_VHOST_RDMA_DAEMON_CONTROL_CLIENT_H_

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace vrdma::daemon {

// Sends `request` and returns the daemon's reply. False with *error (cannot
// connect, send failed, no reply within `timeout`, reply not JSON).
bool ControlRequest(const std::string& socket_path, const nlohmann::json& request,
                    nlohmann::json* reply, std::string* error,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_CONTROL_CLIENT_H_
