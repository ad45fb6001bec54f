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

}  // namespace vrdma::daemon
