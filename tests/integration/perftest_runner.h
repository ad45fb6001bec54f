// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-perftest as a child process of a test, and write_bw traffic from
// several guests at once through one real daemon, measured two ways: by
// each vrdma-perftest (its BW average over its whole run) and by the
// daemon (the bytes of each client VM's WRITEs the scheduler stage saw
// complete, from `stats`, over a window in which every guest runs).
#ifndef VRDMA_TESTS_INTEGRATION_PERFTEST_RUNNER_H_
#define VRDMA_TESTS_INTEGRATION_PERFTEST_RUNNER_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tests/integration/daemon_harness.h"

namespace vrdma::integration {

// Runs args[0] with its output to the file `out`; the child's pid.
pid_t Spawn(const std::vector<std::string>& args, const std::string& out);
// Waits up to timeout_s; kills on timeout. The exit code (-1: killed).
int Wait(pid_t pid, int timeout_s);
std::string Slurp(const std::string& path);
// The vrdma-perftest binary ($VRDMA_PERFTEST or the one CMake built).
std::string PerftestPath();

// One vrdma-perftest run as perftest_test.cc (one daemon) and
// two_daemon_test.cc (two) run it: a server with `--socket server`, a
// client with `--socket client --verify --out_json` plus `extra`, on a
// daemon started with `daemon_args` (both daemons, across two).
struct PerftestCase {
  const char* test;
  std::vector<std::string> extra;
  const char* header;  // the table header the client prints
  std::vector<std::string> daemon_args = {};
};
// Readable parameter names in gtest output (not the struct's bytes).
void PrintTo(const PerftestCase& c, std::ostream* os);
// The set every perftest integration test runs: the six tests (bw and lat
// of write, send, read) on RC, -D, UC, several QPs and doorbell queues.
const std::vector<PerftestCase>& StandardPerftestCases();
// The value of flag `name` in c.extra (e.g. "-n"), or `fallback`.
uint64_t CaseFlag(const PerftestCase& c, const char* name, uint64_t fallback);
bool CaseIsUc(const PerftestCase& c);

// What one run left behind.
struct PerftestPair {
  int server_rc = -1, client_rc = -1;  // exit codes (-1: killed)
  std::string server_out, client_out, json;
};
// Starts the server, then the client; waits up to timeout_s for the client
// (then 20 s for the server), killing what is left. Output files go to dir.
PerftestPair RunPerftestPair(const PerftestCase& c, const std::string& server_socket,
                             const std::string& client_socket, const std::string& dir,
                             int timeout_s);
// A TCP port for the parameter exchange, apart from other test processes'.
std::string PerftestPort();

// One guest's write_bw: a client on VM `name` writing to a server on VM
// `server`, both attached to the daemon already.
struct BwGuest {
  std::string name;     // the client VM: its QoS shapes the traffic
  std::string server;   // the server VM
  std::string client_socket, server_socket;
};

class WriteBwTraffic {
 public:
  explicit WriteBwTraffic(DaemonHarness& daemon) : daemon_(daemon) {}
  ~WriteBwTraffic();  // kills what still runs
  WriteBwTraffic(const WriteBwTraffic&) = delete;
  WriteBwTraffic& operator=(const WriteBwTraffic&) = delete;

  // Starts every guest's server and client (`vrdma-perftest write_bw -D
  // seconds -s msg_bytes --report_gbits`, plus `extra`), then waits until
  // the daemon has seen every client VM's WRITEs complete, so the runs
  // overlap from the return on. false (with *err) when one did not start.
  bool Start(const std::vector<BwGuest>& guests, int seconds, uint64_t msg_bytes,
             const std::vector<std::string>& extra, std::string* err);
  // Each guest's payload rate in Gb/s over the next `window`, from the
  // daemon's accounting (stats' scheduler.bytes_completed of its client VM,
  // over the interval of the daemon's snapshots, sampled_at_ns). nullopt
  // with *err when the daemon's stats lack a client VM, or when a client's
  // run ended before the window did (its rate would read low): give the
  // runs more seconds.
  std::optional<std::vector<double>> MeasureGbps(std::chrono::milliseconds window,
                                                 std::string* err);
  // Waits for every run to end; each guest's Gb/s as its vrdma-perftest
  // reported it (BW average, whole run), or nullopt with *err when one
  // failed or timed out.
  std::optional<std::vector<double>> Finish(std::string* err);

 private:
  struct Run {
    BwGuest guest;
    pid_t server = -1, client = -1;
    std::string server_out, client_out, json;
  };
  // A client VM's bytes completed, and when the daemon counted them.
  struct Sample {
    uint64_t bytes = 0;
    uint64_t at_ns = 0;
  };
  // One per run, or nullopt with *err when the stats lack one.
  std::optional<std::vector<Sample>> Samples(std::string* err);
  // The client still runs (not reaped: Finish waits for it).
  static bool Running(const Run& r);

  DaemonHarness& daemon_;
  std::vector<Run> runs_;
  int seconds_ = 0;
};

}  // namespace vrdma::integration

#endif  // VRDMA_TESTS_INTEGRATION_PERFTEST_RUNNER_H_
