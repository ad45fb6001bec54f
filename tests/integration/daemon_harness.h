// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Runs a real vhost-rdma-daemon for a test: a private temp directory, the
// daemon as a child process on a control socket there, VMs attached through
// the JSON control protocol, and teardown that kills it. The daemon binary
// comes from $VRDMA_DAEMON or the path CMake compiled in.
#ifndef VRDMA_TESTS_INTEGRATION_DAEMON_HARNESS_H_
#define VRDMA_TESTS_INTEGRATION_DAEMON_HARNESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vrdma::integration {

class DaemonHarness {
 public:
  DaemonHarness() = default;
  ~DaemonHarness();

  // Starts the daemon and waits for its control socket. false + *err on
  // failure.
  bool Start(std::string* err, const std::vector<std::string>& extra_args = {});
  void Stop();
  bool alive();
  pid_t pid() const { return pid_; }

  // One request on a fresh control connection; the reply (or
  // {"ok":false,"error":...} when the socket fails).
  nlohmann::json Control(const nlohmann::json& request);
  // attach-vm with one GID (and "quotas" and "qos" objects when not null);
  // returns the VM's vhost-user socket path or "".
  std::string AttachVm(const std::string& name, const std::string& gid,
                       const nlohmann::json& quotas = nullptr,
                       const nlohmann::json& qos = nullptr);
  // The "stats" entry of VM `name` (null when absent).
  nlohmann::json VmStats(const std::string& name);

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string control_;
  pid_t pid_ = -1;
};

// Path of a binary: the environment variable if set, else the default.
std::string BinaryPath(const char* env, const char* fallback);

}  // namespace vrdma::integration

#endif  // VRDMA_TESTS_INTEGRATION_DAEMON_HARNESS_H_
