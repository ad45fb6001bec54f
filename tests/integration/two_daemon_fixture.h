// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Two real vhost-rdma-daemon processes, each its own host, pointed at each
// other over UdpFabric on 127.0.0.1 (docs/reliability.md §7.3): daemon A
// has the GID kGidA and a route to B's socket for kGidB, B the reverse
// (--fabric-listen, --fabric-route: the peer channel tells daemons which
// peer has a GID, not its fabric address, so the routes stay). Faults
// (--fabric-fault) apply to what each daemon sends. FabricCounters reads a
// daemon's `stats` "fabric" object, so a test can show its traffic crossed
// the fabric. With UsePeers, each daemon also gets --peer-listen and the
// other as --peer (the peer channel, §3.5), and with the layer
// --reliability-layer, its own daemon GID (kDaemonGidA/B) and a fabric
// route to the other's; AttachA/B then take a VM's reliability mode.
#ifndef VRDMA_TESTS_INTEGRATION_TWO_DAEMON_FIXTURE_H_
#define VRDMA_TESTS_INTEGRATION_TWO_DAEMON_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/daemon_harness.h"
#include "tests/integration/two_vm_fixture.h"

namespace vrdma::integration {

inline constexpr char kGidA[] = "::ffff:10.0.0.1";
inline constexpr char kGidB[] = "::ffff:10.0.0.2";
// The daemons' own GIDs (--daemon-gid: the layer's ACK QPs).
inline constexpr char kDaemonGidA[] = "::ffff:10.9.0.1";
inline constexpr char kDaemonGidB[] = "::ffff:10.9.0.2";

// A UDP port on 127.0.0.1 that was free a moment ago (0 on failure).
uint16_t FreeUdpPort();

// --fabric-fault SPEC --fabric-fault-seed SEED, for DaemonPair::Start.
std::vector<std::string> FaultArgs(const std::string& spec, uint64_t seed);

// One daemon's fabric counters from `stats` (0 where absent: no faults).
struct FabricCounters {
  uint64_t tx_packets = 0;    // packets its SoftRnic sent to the fabric
  uint64_t rx_packets = 0;    // packets its SoftRnic took from the fabric
  uint64_t udp_sent = 0;      // datagrams its socket sent
  uint64_t udp_delivered = 0; // datagrams its socket accepted
  uint64_t lost = 0;          // its FaultyFabric's random + burst losses
  uint64_t retransmitted = 0; // RC request packets sent again
  uint64_t timeouts = 0;
  uint64_t naks_sent = 0;
  uint64_t uc_messages_dropped = 0;
  uint64_t rx_unknown_source = 0;
  uint64_t rx_kernel_drops = 0;
  uint64_t tx_dropped_busy = 0;
  nlohmann::json raw;         // the whole "fabric" object, for messages
};

class DaemonPair {
 public:
  // Before Start: run the peer channel between A and B, and with `layer`
  // the reliability layer on both.
  void UsePeers(bool layer) {
    peers_ = true;
    layer_ = layer;
  }

  // Picks two free ports and starts A and B, each routed to the other,
  // with `extra` flags on both (--doorbell-queues, ...) and extra_a /
  // extra_b on one (faults with a seed each). false and *err on failure.
  bool Start(const std::vector<std::string>& extra, std::string* err,
             const std::vector<std::string>& extra_a = {},
             const std::vector<std::string>& extra_b = {});
  void Stop();

  // attach-vm of `name` with kGidA on A / kGidB on B: its socket or "".
  // reliability: attach-vm's field ("": not given).
  std::string AttachA(const std::string& name, const std::string& reliability = "") {
    return Attach(a_, name, kGidA, reliability);
  }
  std::string AttachB(const std::string& name, const std::string& reliability = "") {
    return Attach(b_, name, kGidB, reliability);
  }

  DaemonHarness& a() { return a_; }
  DaemonHarness& b() { return b_; }
  const std::string& listen_a() const { return listen_a_; }
  const std::string& listen_b() const { return listen_b_; }
  const std::string& peer_listen_a() const { return peer_a_; }
  const std::string& peer_listen_b() const { return peer_b_; }

  // The counters of one daemon; ADD_FAILUREs when its stats have no fabric.
  static FabricCounters Counters(DaemonHarness& d);
  // A daemon's `stats` "peers" object (null, with an ADD_FAILURE, when
  // it has none).
  static nlohmann::json Peers(DaemonHarness& d);

 private:
  static std::string Attach(DaemonHarness& d, const std::string& name, const char* gid,
                            const std::string& reliability);

  DaemonHarness a_, b_;
  std::string listen_a_, listen_b_, peer_a_, peer_b_;
  bool peers_ = false, layer_ = false;
};

// Whether a `stats` "peers" object lists gid in its GID table.
bool HasGid(const nlohmann::json& peers, const char* gid);
// Polls both daemons' "peers" until done(a, b) holds (10 s at most).
bool WaitPeers(DaemonPair& d,
               const std::function<bool(const nlohmann::json&, const nlohmann::json&)>& done,
               nlohmann::json* pa, nlohmann::json* pb);
// Both layers know each other (each has the other's HELLO and VM GIDs),
// so QPs brought up now are framed. ADD_FAILUREs on a timeout.
bool WaitLayers(DaemonPair& d);

// A gtest fixture: a DaemonPair with a VM on each, driven by in-process
// guests (a_ on daemon A, b_ on daemon B); DaemonArgs() adds flags to both.
class TwoDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  virtual std::vector<std::string> DaemonArgs() const { return {}; }

  DaemonPair daemons_;
  Guest a_, b_;
};

}  // namespace vrdma::integration

#endif  // VRDMA_TESTS_INTEGRATION_TWO_DAEMON_FIXTURE_H_
