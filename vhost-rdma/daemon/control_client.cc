// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/control_client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "vhost-rdma/daemon/unix_socket.h"

namespace vrdma::daemon {

bool ControlRequest(const std::string& socket_path, const nlohmann::json& request,
                    nlohmann::json* reply, std::string* error,
                    std::chrono::milliseconds timeout) {
  auto fd = ConnectUnix(socket_path);
  if (!fd.ok()) {
    *error = "cannot connect to " + socket_path;
    return false;
  }
  const auto ms = timeout.count();
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const std::string line = request.dump() + "\n";
  if (send(*fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    close(*fd);
    *error = "send to " + socket_path + " failed";
    return false;
  }
  std::string in;
  char buf[4096];
  while (in.find('\n') == std::string::npos) {
    ssize_t n = recv(*fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  close(*fd);
  *reply = nlohmann::json::parse(in.substr(0, in.find('\n')), nullptr, false);
  if (reply->is_discarded()) {
    *error = "no valid reply from " + socket_path;
    return false;
  }
  return true;
}

}  // namespace vrdma::daemon
