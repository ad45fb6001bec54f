// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test helper: the real vhost-rdma-daemon binary as a child process (its
// flags as given, its control socket and log in a temp directory), and a
// free UDP port for its fabric or peer sockets. The including test target
// defines VRDMA_DAEMON_BIN (the environment's VRDMA_DAEMON overrides it).
#ifndef VRDMA_VHOST_RDMA_DAEMON_TESTING_DAEMON_PROCESS_H_
#define VRDMA_VHOST_RDMA_DAEMON_TESTING_DAEMON_PROCESS_H_

#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/fabric/udp_fabric.h"
#include "vhost-rdma/daemon/control_client.h"

namespace vrdma::daemon::testing {

// The port of a bound IPv4 address.
inline uint16_t PortOf(const fabric::UdpAddress& a) {
  return ntohs(reinterpret_cast<const sockaddr_in&>(a.storage).sin_port);
}

// The daemon binary as a child process, its output in a temp directory.
class DaemonProcess {
 public:
  explicit DaemonProcess(const std::vector<std::string>& extra) {
    char tmpl[] = "/tmp/vrdma-daemon-XXXXXX";
    dir_ = mkdtemp(tmpl);
    control_ = dir_ + "/control.sock";
    log_ = dir_ + "/daemon.log";
    const char* env = std::getenv("VRDMA_DAEMON");
    const std::string bin = env != nullptr && *env != '\0' ? env : VRDMA_DAEMON_BIN;
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log_.c_str(), "w", stdout);
      (void)f;
      dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<std::string> args = {bin, "--control-socket", control_};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
  }
  ~DaemonProcess() {
    if (pid_ > 0 && exit_status_ < 0) {
      kill(pid_, SIGTERM);
      (void)Wait(std::chrono::seconds(10));
    }
    std::error_code ec;
    if (std::getenv("VRDMA_KEEP_TMP") == nullptr) std::filesystem::remove_all(dir_, ec);
  }

  // Whether the control socket answers within 10 s (false: it exited).
  bool Serving() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
      if (Exited()) return false;
      struct stat st;
      nlohmann::json reply;
      std::string error;
      if (stat(control_.c_str(), &st) == 0 &&
          ControlRequest(control_, {{"cmd", "list-vms"}}, &reply, &error,
                         std::chrono::seconds(2)) &&
          reply.value("ok", false)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The control socket's "stats" reply (null on failure).
  nlohmann::json Stats() {
    nlohmann::json reply;
    std::string error;
    if (!ControlRequest(control_, {{"cmd", "stats"}}, &reply, &error,
                        std::chrono::seconds(5))) {
      ADD_FAILURE() << error;
      return nullptr;
    }
    return reply;
  }
  // Its exit status once it has exited, -1 if it has not within `t`.
  int Wait(std::chrono::seconds t) {
    const auto end = std::chrono::steady_clock::now() + t;
    while (!Exited() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_status_;
  }
  const std::string& dir() const { return dir_; }
  nlohmann::json Request(const nlohmann::json& request) {
    nlohmann::json reply;
    std::string error;
    if (!ControlRequest(control_, request, &reply, &error, std::chrono::seconds(5))) {
      ADD_FAILURE() << error;
      return nullptr;
    }
    return reply;
  }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  bool Exited() {
    if (exit_status_ >= 0) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  std::string dir_, control_, log_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

// A UDP port on 127.0.0.1 that was free a moment ago.
inline uint16_t FreePort() {
  fabric::UdpAddress a;
  EXPECT_TRUE(fabric::ParseUdpAddress("127.0.0.1:0", &a));
  std::string error;
  auto f = fabric::UdpFabric::Open(a, {}, &error);
  return f ? PortOf(f->local_address()) : 0;
}

}  // namespace vrdma::daemon::testing

#endif  // VRDMA_VHOST_RDMA_DAEMON_TESTING_DAEMON_PROCESS_H_
