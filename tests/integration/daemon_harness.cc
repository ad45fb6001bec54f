// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "tests/integration/daemon_harness.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#ifndef VRDMA_DAEMON_PATH
#define VRDMA_DAEMON_PATH "vhost-rdma-daemon"
#endif

namespace vrdma::integration {

std::string BinaryPath(const char* env, const char* fallback) {
  const char* v = std::getenv(env);
  return (v != nullptr && *v != '\0') ? v : fallback;
}

DaemonHarness::~DaemonHarness() { Stop(); }

bool DaemonHarness::Start(std::string* err, const std::vector<std::string>& extra_args) {
  char tmpl[] = "/tmp/vrdma-it-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return *err = "mkdtemp failed", false;
  dir_ = tmpl;
  control_ = dir_ + "/control.sock";
  const std::string bin = BinaryPath("VRDMA_DAEMON", VRDMA_DAEMON_PATH);
  const std::string log = dir_ + "/daemon.log";
  pid_ = fork();
  if (pid_ < 0) return *err = "fork failed", false;
  if (pid_ == 0) {
    // Child: the daemon, its output in the temp dir for post-mortems.
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    (void)f;
    dup2(STDOUT_FILENO, STDERR_FILENO);
    std::vector<std::string> args = {bin, "--control-socket", control_, "--log-level", "info"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (!alive()) return *err = "daemon " + bin + " exited at start (see " + log + ")", false;
    struct stat st;
    if (stat(control_.c_str(), &st) == 0) {
      auto r = Control({{"cmd", "list-vms"}});
      if (r.value("ok", false)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return *err = "daemon control socket never answered", false;
}

bool DaemonHarness::alive() {
  if (pid_ <= 0) return false;
  int status;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

void DaemonHarness::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status;
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, &status, WNOHANG) != 0) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }
  if (!dir_.empty() && std::getenv("VRDMA_KEEP_TMP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  dir_.clear();
}

nlohmann::json DaemonHarness::Control(const nlohmann::json& request) {
  auto fail = [](const std::string& e) { return nlohmann::json{{"ok", false}, {"error", e}}; };
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail("socket");
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, control_.c_str(), sizeof(a.sun_path) - 1);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return fail("connect");
  }
  const std::string line = request.dump() + "\n";
  if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    close(fd);
    return fail("send");
  }
  std::string reply;
  char c;
  while (recv(fd, &c, 1, 0) == 1 && c != '\n') reply.push_back(c);
  close(fd);
  auto j = nlohmann::json::parse(reply, nullptr, false);
  return j.is_discarded() ? fail("bad reply: " + reply) : j;
}

std::string DaemonHarness::AttachVm(const std::string& name, const std::string& gid,
                                    const nlohmann::json& quotas, const nlohmann::json& qos) {
  const std::string sock = dir_ + "/" + name + ".sock";
  nlohmann::json req{{"cmd", "attach-vm"}, {"name", name}, {"socket", sock}, {"gids", {gid}}};
  if (!quotas.is_null()) req["quotas"] = quotas;
  if (!qos.is_null()) req["qos"] = qos;
  auto r = Control(req);
  return r.value("ok", false) ? sock : "";
}

nlohmann::json DaemonHarness::VmStats(const std::string& name) {
  auto r = Control({{"cmd", "stats"}});
  if (!r.value("ok", false)) return nullptr;
  for (const auto& vm : r["vms"]) {
    if (vm.value("name", "") == name) return vm;
  }
  return nullptr;
}

}  // namespace vrdma::integration
