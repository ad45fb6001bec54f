// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A UDP endpoint as UdpFabric and the daemon's flags name it: numeric
// only, "A.B.C.D:PORT" or "[IPV6]:PORT" (no host names: a daemon flag
// must not wait on DNS). Control path.
#ifndef VRDMA_BACKEND_FABRIC_UDP_ADDRESS_H_
#define VRDMA_BACKEND_FABRIC_UDP_ADDRESS_H_

// Not <netinet/in.h>: it clashes with <linux/in.h>, which rdma-core's
// headers bring into the same files as this one (the daemon's main.cc).
#include <sys/socket.h>

#include <string>
#include <string_view>

namespace vrdma::fabric {

struct UdpAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;  // 0: no address

  int family() const { return storage.ss_family; }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  // The same family, address and port (IPv6: and scope id).
  bool SameEndpoint(const sockaddr_storage& other) const;
};

// false (and *error says why) unless text is ADDR:PORT as above, PORT in
// 0..65535 (0: any free port, for listening only).
bool ParseUdpAddress(std::string_view text, UdpAddress* out,
                     std::string* error = nullptr);
std::string UdpAddressToString(const UdpAddress& a);

}  // namespace vrdma::fabric

#endif  // VRDMA_BACKEND_FABRIC_UDP_ADDRESS_H_
