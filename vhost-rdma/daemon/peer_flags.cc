// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/peer_flags.h"

#include <netinet/in.h>

#include <cstdio>

#include "vhost-rdma/daemon/vm_request.h"

namespace vrdma::daemon {
namespace {

uint16_t PortOf(const fabric::UdpAddress& a) {
  return a.family() == AF_INET ? reinterpret_cast<const sockaddr_in&>(a.storage).sin_port
                               : reinterpret_cast<const sockaddr_in6&>(a.storage).sin6_port;
}

// Daemon ids as text: JSON numbers above 2^53 lose bits in most readers.
std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A reliability-layer flag in microseconds (< 0: not given): only with
// the layer, within [1, most]; *ns keeps its value when not given.
bool LayerMicroseconds(double us, const char* flag, const char* range, double most,
                       bool layer, uint64_t* ns, std::string* error) {
  if (us < 0) return true;
  if (!layer) {
    *error = std::string(flag) + " is the reliability layer's: give --reliability-layer";
    return false;
  }
  if (!(us >= 1 && us <= most)) {
    *error = std::string(flag) + ": " + range;
    return false;
  }
  *ns = static_cast<uint64_t>(us * 1000);
  return true;
}

}  // namespace

bool ParsePeerFlags(const PeerFlags& flags, bool soft, bool fabric, PeerConfig* out,
                    std::string* error) {
  PeerConfig c;
  std::string why;
  if (!flags.daemon_gid.empty()) {
    if (!flags.reliability_layer) {
      *error = "--daemon-gid is the reliability layer's ACK QP's GID: it needs "
               "--reliability-layer";
      return false;
    }
    if (!ParseGid(flags.daemon_gid, &c.daemon_gid) || c.daemon_gid == Gid{}) {
      *error = "--daemon-gid: '" + flags.daemon_gid +
               "' is not a GID (an IPv6 or IPv4-mapped address, not ::)";
      return false;
    }
  }
  if (flags.reliability_layer) {
    if (!soft) {
      *error = "--reliability-layer runs over --rnic soft only (over a physical RNIC it "
               "needs the layer's control worker, not built yet)";
      return false;
    }
    if (flags.listen.empty()) {
      *error = "--reliability-layer needs --peer-listen (and --peer): the layer agrees on "
               "every connection with the peer daemon over the peer channel";
      return false;
    }
    if (flags.daemon_gid.empty()) {
      *error = "--reliability-layer needs --daemon-gid: the GID the layer's ACK QP sends "
               "from (a GID of the daemon's own, not a VM's)";
      return false;
    }
    if (!fabric) {
      *error = "--reliability-layer needs --fabric-listen: without a fabric the software "
               "RNIC reaches no other daemon";
      return false;
    }
    c.layer = true;
  }
  if (!LayerMicroseconds(flags.target_us, "--reliability-target-us",
                         "1 to 100000 (microseconds above the base RTT)", 100'000,
                         flags.reliability_layer, &c.target_delay_ns, error) ||
      !LayerMicroseconds(flags.base_rtt_us, "--reliability-base-rtt-us",
                         "1 to 100000 (microseconds)", 100'000, flags.reliability_layer,
                         &c.base_rtt_ns, error) ||
      !LayerMicroseconds(flags.packet_lifetime_us, "--reliability-packet-lifetime-us",
                         "1 to 10000000 (microseconds a packet can stay in the fabric)",
                         10'000'000, flags.reliability_layer, &c.packet_lifetime_ns,
                         error)) {
    return false;
  }
  if (flags.listen.empty()) {
    if (!flags.peers.empty()) {
      *error = "--peer needs --peer-listen (this daemon's own peer-channel address)";
      return false;
    }
    *out = c;
    return true;
  }
  c.enabled = true;
  if (!fabric::ParseUdpAddress(flags.listen, &c.listen, &why)) {
    *error = "--peer-listen: " + why;
    return false;
  }
  if (flags.peers.size() > peer::kMaxPeers) {
    *error = "--peer: at most " + std::to_string(peer::kMaxPeers) + " peers";
    return false;
  }
  for (const std::string& text : flags.peers) {
    fabric::UdpAddress a;
    if (!fabric::ParseUdpAddress(text, &a, &why)) {
      *error = "--peer: " + why;
      return false;
    }
    if (PortOf(a) == 0) {
      *error = "--peer " + text + ": port 0 (a peer is a daemon's --peer-listen port)";
      return false;
    }
    if (a.family() != c.listen.family()) {
      *error = "--peer " + text + ": not the address family of --peer-listen " + flags.listen;
      return false;
    }
    for (const fabric::UdpAddress& other : c.peers) {
      if (other.SameEndpoint(a.storage)) {
        *error = "--peer " + text + " is given twice";
        return false;
      }
    }
    c.peers.push_back(a);
  }
  *out = c;
  return true;
}

std::unique_ptr<peer::PeerChannel> OpenPeerChannel(const PeerConfig& config,
                                                   std::string* error) {
  peer::PeerChannelOptions o;
  o.listen = config.listen;
  o.peers = config.peers;
  std::string why;
  auto c = peer::PeerChannel::Open(o, &why);
  if (!c) *error = "--peer-listen: " + why;
  return c;
}

nlohmann::json PeerStatsJson(const peer::PeerChannel& ch) {
  using nlohmann::json;
  const peer::PeerChannelStats& s = ch.stats();
  json peers = json::array();
  for (const peer::PeerInfo& p : ch.Peers()) {
    json e{{"address", fabric::UdpAddressToString(p.address)},
           {"known", p.id != 0},
           {"layer", p.has_layer},
           {"gids", p.gids},
           {"pending", p.pending}};
    if (p.id != 0) e["id"] = Hex(p.id);
    peers.push_back(std::move(e));
  }
  json table = json::array();
  for (const auto& [gid, id] : ch.GidTable()) {
    table.push_back(json{{"gid", GidToString(gid)}, {"peer", Hex(id)}});
  }
  json checks = json::object();
  for (size_t i = 1; i < static_cast<size_t>(peer::PeerCheck::kCount); ++i) {
    if (s.checks.n[i] != 0) checks[peer::PeerCheckName(static_cast<peer::PeerCheck>(i))] = s.checks.n[i];
  }
  uint32_t known = 0;
  for (const peer::PeerInfo& p : ch.Peers()) known += p.id != 0;
  return json{{"listen", fabric::UdpAddressToString(ch.local_address())},
              {"id", Hex(ch.id())},
              {"peers_known", known},
              {"peers", peers},
              {"local_gids", ch.local_gid_count()},
              {"gid_table", table},
              {"sent", s.sent},
              {"resent", s.resent},
              {"acked", s.acked},
              {"gave_up", s.gave_up},
              {"evicted", s.evicted},
              {"dropped", s.gave_up + s.evicted + s.tx_unknown_peer + s.tx_invalid},
              {"tx_errors", s.tx_errors},
              {"received", s.received},
              {"delivered", s.delivered},
              {"acks_sent", s.acks_sent},
              {"acks_received", s.acks_received},
              {"malformed", s.rx_malformed},
              {"malformed_by_check", checks},
              {"unknown_sender", s.rx_unknown_sender},
              {"bad_origin", s.rx_bad_origin},
              {"outside_window", s.rx_outside_window},
              {"duplicates", s.rx_duplicate},
              {"unknown_acks", s.rx_unknown_ack},
              {"skipped", s.skipped},
              {"peer_restarts", s.peer_restarts},
              {"gids_full", s.gids_full},
              {"gids_moved", s.gids_moved},
              {"inbox_full", s.inbox_full},
              {"outbox_full", s.outbox_full}};
}

}  // namespace vrdma::daemon
