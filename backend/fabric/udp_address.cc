// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ParseUdpAddress: the port after the last ':', brackets around IPv6,
// inet_pton for the address.
#include "backend/fabric/udp_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace vrdma::fabric {

bool UdpAddress::SameEndpoint(const sockaddr_storage& o) const {
  if (o.ss_family != storage.ss_family) return false;
  if (o.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(storage);
    const auto& b = reinterpret_cast<const sockaddr_in&>(o);
    return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
  }
  if (o.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(storage);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(o);
    return a.sin6_port == b.sin6_port && a.sin6_scope_id == b.sin6_scope_id &&
           std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

bool ParseUdpAddress(std::string_view text, UdpAddress* out, std::string* error) {
  auto fail = [&](const char* why) {
    if (error != nullptr) *error = std::string(why) + " in '" + std::string(text) + "'";
    return false;
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return fail("no ':PORT'");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() ||
      end != port_text.data() + port_text.size() || port > 65535) {
    return fail("a port that is not a number in 0..65535");
  }
  UdpAddress a;
  const bool v6 = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (v6) host = host.substr(1, host.size() - 2);
  const std::string h(host);  // inet_pton wants a terminated string
  if (v6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (inet_pton(AF_INET6, h.c_str(), &s->sin6_addr) != 1) {
      return fail("not a numeric IPv6 address in brackets");
    }
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(static_cast<uint16_t>(port));
    a.len = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    if (inet_pton(AF_INET, h.c_str(), &s->sin_addr) != 1) {
      return fail("not a numeric IPv4 address (IPv6: [ADDR]:PORT)");
    }
    s->sin_family = AF_INET;
    s->sin_port = htons(static_cast<uint16_t>(port));
    a.len = sizeof(sockaddr_in);
  }
  *out = a;
  return true;
}

std::string UdpAddressToString(const UdpAddress& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.family() == AF_INET) {
    const auto& s = reinterpret_cast<const sockaddr_in&>(a.storage);
    inet_ntop(AF_INET, &s.sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(s.sin_port));
  }
  if (a.family() == AF_INET6) {
    const auto& s = reinterpret_cast<const sockaddr_in6&>(a.storage);
    inet_ntop(AF_INET6, &s.sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(s.sin6_port));
  }
  return "(none)";
}

}  // namespace vrdma::fabric
