// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The daemon's fabric (docs/reliability.md §7.2, docs/operators.md): with
// --fabric-listen ADDR:PORT its software RNIC sends packets for GIDs it
// does not have through a UdpFabric on that address (without it: loopback
// only, as always); --fabric-fault SPEC puts a FaultyFabric in front
// (ParseFaultSpec's syntax), seeded by --fabric-fault-seed;
// --fabric-route GID=ADDR:PORT (repeatable) says which daemon has a GID:
// the static form of what the peer channel's GIDS messages will do
// (§3.5), so that two daemons can be pointed at each other before it
// exists.
//
// ParseFabricFlags checks everything without touching a socket (tests);
// OpenFabric binds and wires. Control path, at start-up.
#ifndef VRDMA_VHOST_RDMA_DAEMON_FABRIC_FLAGS_H_
#define VRDMA_VHOST_RDMA_DAEMON_FABRIC_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/fabric/fault_model.h"
#include "backend/fabric/faulty_fabric.h"
#include "backend/fabric/udp_fabric.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma::daemon {

// The flags as given.
struct FabricFlags {
  std::string listen;               // --fabric-listen ("": no fabric)
  std::string fault;                // --fabric-fault ("": none)
  uint64_t fault_seed = 1;          // --fabric-fault-seed
  std::vector<std::string> routes;  // --fabric-route, each GID=ADDR:PORT
};

struct FabricRoute {
  Gid gid{};
  fabric::UdpAddress to;
};

// The flags checked.
struct FabricConfig {
  bool enabled = false;  // --fabric-listen given
  fabric::UdpAddress listen;
  bool faulty = false;   // --fabric-fault given
  fabric::FaultConfig faults;
  uint64_t fault_seed = 1;
  std::vector<FabricRoute> routes;
};

// One --fabric-route value: a GID (IPv6 text, as attach-vm's gids), '=',
// a UDP address (fabric::ParseUdpAddress), port not 0.
bool ParseFabricRoute(std::string_view text, FabricRoute* out, std::string* error);

// Every fabric flag, with a message that names the flag at fault: a bad
// address, a bad spec (ParseFaultSpec's reason), a bad or repeated route,
// a route of another address family than the listening one, and
// --fabric-fault or --fabric-route without --fabric-listen.
bool ParseFabricFlags(const FabricFlags& flags, FabricConfig* out, std::string* error);

// The fabric a SoftRnic is given: the socket, and the fault injector in
// front of it when asked for. It must outlive the SoftRnic.
struct DaemonFabric {
  std::unique_ptr<fabric::UdpFabric> udp;
  std::unique_ptr<fabric::FaultyFabric> faulty;
  fabric::Fabric* port() const {
    return faulty ? static_cast<fabric::Fabric*>(faulty.get()) : udp.get();
  }
};

// The socket's receive buffer the daemon asks for: a burst of an unpaced
// software RNIC between two data-path turns (granted in full with
// CAP_NET_ADMIN, else up to net.core.rmem_max; the log says which).
inline constexpr int kFabricSocketBufferBytes = 4 << 20;

// Binds config.listen, sets the routes, adds the faults. nullptr and
// *error (naming --fabric-listen) when the socket cannot be had.
std::unique_ptr<DaemonFabric> OpenFabric(const FabricConfig& config, std::string* error);

// The fabric's counters at one moment, copied on the data-path thread
// (which alone writes them) for the control thread's stats.
struct FabricSnapshot {
  fabric::UdpAddress listen;
  uint32_t routes = 0;
  fabric::UdpFabricStats udp;
  bool faulty = false;
  fabric::FaultStats faults;
  fabric::FaultyFabricStats held;
  bool has_net = false;  // the software RNIC's packet counters below
  SoftNetStats net;
};
// Copies them; call on the data-path thread. rnic: the SoftRnic on f, or
// nullptr.
FabricSnapshot SnapshotFabric(const DaemonFabric& f, const SoftRnic* rnic);
// stats' "fabric" object (docs/operators.md).
nlohmann::json FabricStatsJson(const FabricSnapshot& s);

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_FABRIC_FLAGS_H_
