// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The fabric flags: parsed and checked in ParseFabricFlags, then the
// socket, routes and faults in OpenFabric.
#include "vhost-rdma/daemon/fabric_flags.h"

#include <netinet/in.h>

#include <algorithm>

#include "backend/fabric/fault_spec.h"
#include "vhost-rdma/daemon/vm_request.h"

namespace vrdma::daemon {

bool ParseFabricRoute(std::string_view text, FabricRoute* out, std::string* error) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    *error = "'" + std::string(text) + "' is not GID=ADDR:PORT";
    return false;
  }
  FabricRoute r;
  const std::string gid_text(text.substr(0, eq));
  if (!ParseGid(gid_text, &r.gid) || r.gid == Gid{}) {
    *error = "'" + gid_text + "' is not a GID (an IPv6 or IPv4-mapped address, not ::)";
    return false;
  }
  std::string why;
  if (!fabric::ParseUdpAddress(text.substr(eq + 1), &r.to, &why)) {
    *error = why;
    return false;
  }
  const uint16_t port =
      r.to.family() == AF_INET
          ? reinterpret_cast<const sockaddr_in&>(r.to.storage).sin_port
          : reinterpret_cast<const sockaddr_in6&>(r.to.storage).sin6_port;
  if (port == 0) {
    *error = "port 0 in '" + std::string(text) + "': a route names a daemon's port";
    return false;
  }
  *out = r;
  return true;
}

bool ParseFabricFlags(const FabricFlags& flags, FabricConfig* out, std::string* error) {
  FabricConfig c;
  c.fault_seed = flags.fault_seed;
  std::string why;
  if (flags.listen.empty()) {
    if (!flags.fault.empty() || !flags.routes.empty()) {
      *error = std::string(flags.fault.empty() ? "--fabric-route" : "--fabric-fault") +
               " needs --fabric-listen (without it the RNIC has no fabric)";
      return false;
    }
    *out = c;
    return true;
  }
  c.enabled = true;
  if (!fabric::ParseUdpAddress(flags.listen, &c.listen, &why)) {
    *error = "--fabric-listen: " + why;
    return false;
  }
  if (!flags.fault.empty()) {
    auto faults = fabric::ParseFaultSpec(flags.fault, &why);
    if (!faults.ok()) {
      *error = "--fabric-fault: " + why + " (docs/reliability.md §7.2 gives the syntax)";
      return false;
    }
    c.faulty = true;
    c.faults = *faults;
  }
  for (const std::string& text : flags.routes) {
    FabricRoute r;
    if (!ParseFabricRoute(text, &r, &why)) {
      *error = "--fabric-route: " + why;
      return false;
    }
    if (r.to.family() != c.listen.family()) {
      *error = "--fabric-route " + text + ": not the address family of --fabric-listen " +
               flags.listen;
      return false;
    }
    for (const FabricRoute& other : c.routes) {
      if (other.gid == r.gid) {
        *error = "--fabric-route: GID " + GidToString(r.gid) + " is routed twice";
        return false;
      }
    }
    c.routes.push_back(r);
  }
  *out = c;
  return true;
}

std::unique_ptr<DaemonFabric> OpenFabric(const FabricConfig& config, std::string* error) {
  fabric::UdpFabricOptions options;
  options.rcvbuf_bytes = kFabricSocketBufferBytes;
  options.sndbuf_bytes = kFabricSocketBufferBytes;
  options.max_routes = std::max<uint32_t>(options.max_routes,
                                          static_cast<uint32_t>(config.routes.size()));
  auto f = std::make_unique<DaemonFabric>();
  std::string why;
  f->udp = fabric::UdpFabric::Open(config.listen, options, &why);
  if (!f->udp) {
    *error = "--fabric-listen: " + why;
    return nullptr;
  }
  for (const FabricRoute& r : config.routes) {
    if (f->udp->SetRoute(r.gid, r.to) != Status::kOk) {
      *error = "--fabric-route " + GidToString(r.gid) + ": refused by the fabric";
      return nullptr;
    }
  }
  if (config.faulty) {
    f->faulty = std::make_unique<fabric::FaultyFabric>(f->udp.get(), config.faults,
                                                       config.fault_seed);
  }
  return f;
}

FabricSnapshot SnapshotFabric(const DaemonFabric& f, const SoftRnic* rnic) {
  FabricSnapshot s;
  s.listen = f.udp->local_address();
  s.routes = f.udp->num_routes();
  s.udp = f.udp->stats();
  if (f.faulty) {
    s.faulty = true;
    s.faults = f.faulty->fault_stats();
    s.held = f.faulty->stats();
  }
  if (rnic != nullptr) {
    s.has_net = true;
    s.net = rnic->net_stats();
  }
  return s;
}

nlohmann::json FabricStatsJson(const FabricSnapshot& s) {
  const fabric::UdpFabricStats& u = s.udp;
  nlohmann::json j{
      {"listen", fabric::UdpAddressToString(s.listen)},
      {"routes", s.routes},
      {"udp",
       {{"sent", u.sent},
        {"tx_packets", u.tx_packets},
        {"tx_batches", u.tx_batches},
        {"dropped_oversize", u.dropped_oversize},
        {"dropped_no_route", u.dropped_no_route},
        {"tx_dropped_busy", u.tx_dropped_busy},
        {"tx_errors", u.tx_errors},
        {"delivered", u.delivered},
        {"rx_batches", u.rx_batches},
        {"rx_unknown_source", u.rx_unknown_source},
        {"rx_oversize", u.rx_oversize},
        {"rx_short", u.rx_short},
        {"rx_bad_header", u.rx_bad_header},
        {"rx_unknown_gid", u.rx_unknown_gid},
        {"rx_errors", u.rx_errors},
        {"rx_kernel_drops", u.rx_kernel_drops}}}};
  if (s.faulty) {
    const fabric::FaultStats& f = s.faults;
    j["faults"] = {{"packets", f.packets},
                   {"lost_random", f.lost_random},
                   {"lost_burst", f.lost_burst},
                   {"bottleneck_drops", f.bottleneck_drops},
                   {"reordered", f.reordered},
                   {"duplicated", f.duplicated},
                   {"delayed", f.delayed},
                   {"hold_full", s.held.hold_full}};
  }
  if (s.has_net) {
    const SoftNetStats& n = s.net;
    // By NetDrop's number (backend/soft_rnic/soft_rnic.h names them).
    nlohmann::json dropped = nlohmann::json::array();
    for (uint64_t d : n.dropped) dropped.push_back(d);
    j["packets"] = {{"tx_packets", n.tx_packets},
                    {"rx_packets", n.rx_packets},
                    {"uc_messages_dropped", n.uc_messages_dropped},
                    {"retransmitted", n.retransmitted},
                    {"timeouts", n.timeouts},
                    {"acks_sent", n.acks_sent},
                    {"naks_sent", n.naks_sent},
                    {"duplicates", n.duplicates},
                    {"dropped", dropped},
                    {"dropped_total", n.total_drops()}};
  }
  return j;
}

}  // namespace vrdma::daemon
