// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "tests/integration/perftest_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#ifndef VRDMA_PERFTEST_PATH
#define VRDMA_PERFTEST_PATH "vrdma-perftest"
#endif

namespace vrdma::integration {

pid_t Spawn(const std::vector<std::string>& args, const std::string& out) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  FILE* f = std::freopen(out.c_str(), "w", stdout);
  (void)f;
  dup2(STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

int Wait(pid_t pid, int timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string PerftestPath() { return BinaryPath("VRDMA_PERFTEST", VRDMA_PERFTEST_PATH); }

namespace {
const char* kBw = "#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
const char* kGb = "BW peak[Gb/sec]";
const char* kLat = "#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]";
}  // namespace

void PrintTo(const PerftestCase& c, std::ostream* os) { *os << c.test; }

const std::vector<PerftestCase>& StandardPerftestCases() {
  static const std::vector<PerftestCase> cases = {
      {"write_bw", {"-n", "500", "-s", "8192", "-q", "2"}, kBw},
      {"send_bw", {"-n", "300", "-s", "4096"}, kBw},
      {"read_bw", {"-n", "500", "-s", "8192", "--report_gbits"}, kGb},
      {"write_lat", {"-n", "200", "-s", "64"}, kLat},
      {"send_lat", {"-n", "200", "-s", "64"}, kLat},
      {"read_lat", {"-n", "200", "-s", "4096"}, kLat},
      {"write_bw", {"-D", "1", "-s", "4096"}, kBw},
      // Unreliable connected QPs.
      {"write_bw", {"-n", "300", "-s", "4096", "-c", "UC"}, kBw},
      {"send_lat", {"-n", "200", "-s", "32", "-c", "UC"}, kLat},
      // Several doorbell virtqueues, QPs spread over them.
      {"send_bw", {"-n", "300", "-s", "2048", "-q", "4"}, kBw, {"--doorbell-queues", "2"}},
      {"read_bw", {"-n", "300", "-s", "2048", "-q", "3", "-t", "16"}, kBw,
       {"--doorbell-queues", "4"}},
  };
  return cases;
}

uint64_t CaseFlag(const PerftestCase& c, const char* name, uint64_t fallback) {
  for (size_t i = 0; i + 1 < c.extra.size(); ++i) {
    if (c.extra[i] == name) return std::stoull(c.extra[i + 1]);
  }
  return fallback;
}

bool CaseIsUc(const PerftestCase& c) {
  for (size_t i = 0; i + 1 < c.extra.size(); ++i) {
    if (c.extra[i] == "-c" && c.extra[i + 1] == "UC") return true;
  }
  return false;
}

std::string PerftestPort() { return std::to_string(20000 + getpid() % 20000); }

PerftestPair RunPerftestPair(const PerftestCase& c, const std::string& server_socket,
                             const std::string& client_socket, const std::string& dir,
                             int timeout_s) {
  const std::string bin = PerftestPath();
  const std::string port = PerftestPort();
  const std::string json = dir + "/client.json";
  std::vector<std::string> server = {bin, c.test, "--socket", server_socket, "-p", port};
  std::vector<std::string> client = {bin, c.test, "127.0.0.1", "--socket", client_socket,
                                     "-p", port, "--verify", "--out_json", json};
  client.insert(client.end(), c.extra.begin(), c.extra.end());
  const std::string sout = dir + "/server.out";
  const std::string cout = dir + "/client.out";
  PerftestPair r;
  const pid_t s = Spawn(server, sout);
  const pid_t cl = s > 0 ? Spawn(client, cout) : -1;
  if (cl > 0) r.client_rc = Wait(cl, timeout_s);
  if (s > 0) r.server_rc = Wait(s, 20);
  r.server_out = Slurp(sout);
  r.client_out = Slurp(cout);
  r.json = Slurp(json);
  return r;
}

WriteBwTraffic::~WriteBwTraffic() {
  for (Run& r : runs_) {
    for (pid_t p : {r.client, r.server}) {
      if (p > 0) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    }
  }
}

bool WriteBwTraffic::Start(const std::vector<BwGuest>& guests, int seconds, uint64_t msg_bytes,
                           const std::vector<std::string>& extra, std::string* err) {
  seconds_ = seconds;
  const std::string bin = PerftestPath();
  const std::string dir = daemon_.dir();
  for (size_t i = 0; i < guests.size(); ++i) {
    Run r;
    r.guest = guests[i];
    // A port per guest, apart from other test processes' (pid).
    const std::string port = std::to_string(20000 + (getpid() % 10000) * 4 + i);
    r.server_out = dir + "/" + r.guest.server + ".out";
    r.client_out = dir + "/" + r.guest.name + ".out";
    r.json = dir + "/" + r.guest.name + ".json";
    r.server = Spawn({bin, "write_bw", "--socket", r.guest.server_socket, "-p", port},
                     r.server_out);
    std::vector<std::string> client = {bin, "write_bw", "127.0.0.1",
                                       "--socket", r.guest.client_socket,
                                       "-p", port,
                                       "-D", std::to_string(seconds),
                                       "-s", std::to_string(msg_bytes),
                                       "--report_gbits", "--out_json", r.json};
    client.insert(client.end(), extra.begin(), extra.end());
    r.client = Spawn(client, r.client_out);
    runs_.push_back(std::move(r));
    if (runs_.back().server <= 0 || runs_.back().client <= 0) return *err = "fork failed", false;
  }
  // Every client has WRITEs completing: from here on all of them run.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    const std::optional<std::vector<Sample>> samples = Samples(err);
    if (!samples) return false;
    if (std::all_of(samples->begin(), samples->end(), [](const Sample& s) { return s.bytes > 0; })) {
      return true;
    }
    for (const Run& r : runs_) {
      if (waitpid(r.client, nullptr, WNOHANG) != 0) {
        return *err = r.guest.name + ": vrdma-perftest ended early:\n" + Slurp(r.client_out),
               false;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return *err = "the guests' WRITEs never all completed", false;
}

std::optional<std::vector<WriteBwTraffic::Sample>> WriteBwTraffic::Samples(std::string* err) {
  const nlohmann::json stats = daemon_.Control({{"cmd", "stats"}});
  if (!stats.value("ok", false)) return *err = "stats failed: " + stats.dump(), std::nullopt;
  std::vector<Sample> out;
  for (const Run& r : runs_) {
    const auto vm = std::find_if(stats["vms"].begin(), stats["vms"].end(), [&](const auto& v) {
      return v.value("name", "") == r.guest.name;
    });
    if (vm == stats["vms"].end()) return *err = "stats lack " + r.guest.name, std::nullopt;
    out.push_back({(*vm)["scheduler"].value("bytes_completed", uint64_t{0}),
                   vm->value("sampled_at_ns", uint64_t{0})});
  }
  return out;
}

bool WriteBwTraffic::Running(const Run& r) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(r.client), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

std::optional<std::vector<double>> WriteBwTraffic::MeasureGbps(std::chrono::milliseconds window,
                                                               std::string* err) {
  // Each VM's rate over the interval between the daemon's own snapshots of
  // its counters (stats' sampled_at_ns), not over the harness's wall time:
  // a stats round trip on a loaded machine takes tens of ms, which would
  // read as a shortfall of a few percent.
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<std::vector<Sample>> s0 = Samples(err);
  if (!s0) return std::nullopt;
  std::this_thread::sleep_until(t0 + window);
  const std::optional<std::vector<Sample>> s1 = Samples(err);
  if (!s1) return std::nullopt;
  std::vector<double> gbps;
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (!Running(runs_[i])) {
      return *err = runs_[i].guest.name + "'s run ended inside the window: give it more seconds",
             std::nullopt;
    }
    const double ns = static_cast<double>((*s1)[i].at_ns - (*s0)[i].at_ns);
    gbps.push_back(ns > 0 ? static_cast<double>((*s1)[i].bytes - (*s0)[i].bytes) * 8 / ns : 0);
  }
  return gbps;
}

std::optional<std::vector<double>> WriteBwTraffic::Finish(std::string* err) {
  std::vector<double> gbps;
  bool ok = true;
  for (Run& r : runs_) {
    const int crc = Wait(r.client, seconds_ + 60);
    const int src = Wait(r.server, 20);
    r.client = r.server = -1;
    if (crc != 0 || src != 0) {
      *err += r.guest.name + ": client exit " + std::to_string(crc) + ", server exit " +
              std::to_string(src) + "\nclient:\n" + Slurp(r.client_out) + "\nserver:\n" +
              Slurp(r.server_out) + "\n";
      ok = false;
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(Slurp(r.json), nullptr, false);
    if (j.is_discarded() || !j.contains("results")) {
      *err += r.guest.name + ": no JSON result\n";
      ok = false;
      continue;
    }
    gbps.push_back(j["results"].value("BW_average", 0.0));
  }
  if (!ok) return std::nullopt;
  return gbps;
}

}  // namespace vrdma::integration
