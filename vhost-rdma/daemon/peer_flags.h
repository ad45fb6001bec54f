// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The daemon's peer channel and reliability layer (docs/reliability.md
// §3.5, §2; docs/operators.md): --peer-listen ADDR:PORT opens this
// daemon's peer channel (backend/peer_channel/peer_channel.h) on the
// control thread, --peer HOST:PORT (repeatable) names the other daemons;
// --reliability-layer builds ReliableRnic over the software RNIC with the
// channel as its PeerLink, its ACK QP sending from --daemon-gid (a GID of
// the daemon's own, never a VM's).
//
// ParsePeerFlags checks everything without touching a socket (tests);
// OpenPeerChannel binds. Control path, at start-up.
#ifndef VRDMA_VHOST_RDMA_DAEMON_PEER_FLAGS_H_
#define VRDMA_VHOST_RDMA_DAEMON_PEER_FLAGS_H_

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/peer_channel/peer_channel.h"
#include "backend/rnic/rnic.h"

namespace vrdma::daemon {

// The flags as given.
struct PeerFlags {
  std::string listen;               // --peer-listen ("": no peer channel)
  std::vector<std::string> peers;   // --peer, each ADDR:PORT
  std::string daemon_gid;           // --daemon-gid
  bool reliability_layer = false;   // --reliability-layer
  // --reliability-target-us: the congestion window's delay target above
  // the path's base RTT (docs/reliability.md §4.5); < 0: not given.
  double target_us = -1;
  // --reliability-base-rtt-us: the fabric's round trip without queues, at
  // most; a measured base RTT above it is not taken (§4.5); < 0: not given.
  double base_rtt_us = -1;
  // --reliability-packet-lifetime-us: the fabric's bound on how long a
  // packet can stay in it; a message repaired by retransmission is
  // delivered that long after its repair (§4.2, "Late originals"); < 0:
  // not given (no hold).
  double packet_lifetime_us = -1;
};

// The flags checked.
struct PeerConfig {
  bool enabled = false;  // --peer-listen given
  fabric::UdpAddress listen;
  std::vector<fabric::UdpAddress> peers;
  bool layer = false;
  Gid daemon_gid{};
  uint64_t target_delay_ns = 0;  // 0: the layer's (10 us, at most the base RTT)
  uint64_t base_rtt_ns = 0;      // 0: the layer's default (50 us)
  uint64_t packet_lifetime_ns = 0;  // 0: no delivery hold
};

// Every peer flag, with a message naming the flag at fault: a bad or
// repeated address, port 0 in --peer, another address family than
// --peer-listen's, more than peer::kMaxPeers peers, --peer without
// --peer-listen, --daemon-gid without --reliability-layer, and the layer
// without what it needs: --rnic soft (soft), --peer-listen, --daemon-gid,
// --fabric-listen (fabric: its packets reach other daemons only there);
// --reliability-target-us or --reliability-base-rtt-us without the layer,
// or outside 1..100000; --reliability-packet-lifetime-us without it, or
// outside 1..10^7.
bool ParsePeerFlags(const PeerFlags& flags, bool soft, bool fabric, PeerConfig* out,
                    std::string* error);

// Binds config.listen. nullptr and *error (naming --peer-listen) when the
// socket cannot be had.
std::unique_ptr<peer::PeerChannel> OpenPeerChannel(const PeerConfig& config,
                                                   std::string* error);

// stats' "peers" object (docs/operators.md); control thread.
nlohmann::json PeerStatsJson(const peer::PeerChannel& channel);

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_PEER_FLAGS_H_
