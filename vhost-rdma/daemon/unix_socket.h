// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Unix stream socket helpers for the daemon (control socket, per-VM
// vhost-user sockets) and vrdma-ctl.
#ifndef VRDMA_VHOST_RDMA_DAEMON_UNIX_SOCKET_H_
#define VRDMA_VHOST_RDMA_DAEMON_UNIX_SOCKET_H_

#include <string>

#include "backend/base/status.h"

namespace vrdma::daemon {

// Binds and listens on `path`. A stale socket file at `path` is replaced;
// any other existing file is left alone (kBusy). The fd is nonblocking and
// close-on-exec.
Result<int> ListenUnix(const std::string& path);
// Connects to `path` (blocking, close-on-exec).
Result<int> ConnectUnix(const std::string& path);

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_UNIX_SOCKET_H_
