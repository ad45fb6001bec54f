// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// UdpFabric's control path: the socket, its buffers, the GID and route
// tables. The data path (Send, Flush, Poll) is udp_fabric_datapath.cc.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend/fabric/udp_fabric.h"

namespace vrdma::fabric {

std::unique_ptr<UdpFabric> UdpFabric::Open(const UdpAddress& listen,
                                           const UdpFabricOptions& options,
                                           std::string* error) {
  auto fail = [&](const std::string& what) -> std::unique_ptr<UdpFabric> {
    if (error != nullptr) *error = what;
    return nullptr;
  };
  if (listen.len == 0) return fail("no address to listen on");
  if (options.rx_packets == 0 || options.max_gids == 0 || options.max_routes == 0) {
    return fail("rx_packets, max_gids and max_routes must be at least 1");
  }
  const int fd = socket(listen.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(std::string("socket: ") + std::strerror(errno));
  auto close_fail = [&](const std::string& what) {
    const int e = errno;
    close(fd);
    return fail(what + ": " + std::strerror(e));
  };
  const int one = 1;
  // The kernel's drop count rides on every datagram received after a drop.
  if (setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)) != 0) {
    return close_fail("SO_RXQ_OVFL");
  }
  // Beyond net.core.[rw]mem_max only with CAP_NET_ADMIN (the *FORCE
  // options); without it the kernel caps the plain ones silently.
  if (options.rcvbuf_bytes > 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &options.rcvbuf_bytes, sizeof(int)) != 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &options.rcvbuf_bytes, sizeof(int)) != 0) {
    return close_fail("SO_RCVBUF");
  }
  if (options.sndbuf_bytes > 0 &&
      setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &options.sndbuf_bytes, sizeof(int)) != 0 &&
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options.sndbuf_bytes, sizeof(int)) != 0) {
    return close_fail("SO_SNDBUF");
  }
  if (bind(fd, listen.sa(), listen.len) != 0) {
    return close_fail("bind " + UdpAddressToString(listen));
  }
  UdpAddress local;
  local.len = sizeof(local.storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local.storage), &local.len) != 0) {
    return close_fail("getsockname");
  }
  return std::unique_ptr<UdpFabric>(new UdpFabric(fd, local, options));
}

UdpFabric::UdpFabric(int fd, const UdpAddress& local, const UdpFabricOptions& options)
    : fd_(fd),
      local_(local),
      options_(options),
      gids_(options.max_gids),
      routes_(options.max_routes),
      tx_buf_(size_t{kUdpBatch} * kUdpMaxDatagram),
      tx_addr_(kUdpBatch),
      tx_iov_(kUdpBatch),
      tx_msgs_(kUdpBatch),
      rx_buf_(size_t{options.rx_packets} * kUdpMaxDatagram),
      rx_addr_(options.rx_packets),
      rx_control_(options.rx_packets),
      rx_iov_(options.rx_packets),
      rx_msgs_(kUdpBatch),
      rx_free_(options.rx_packets) {
  // Fixed wiring: transmit slot i is always tx_msgs_[i]; receive slot s
  // always uses rx_iov_[s], rx_addr_[s] and rx_control_[s].
  for (uint32_t i = 0; i < kUdpBatch; ++i) {
    tx_iov_[i].iov_base = &tx_buf_[size_t{i} * kUdpMaxDatagram];
    tx_msgs_[i] = mmsghdr{};
    tx_msgs_[i].msg_hdr.msg_name = &tx_addr_[i];
    tx_msgs_[i].msg_hdr.msg_iov = &tx_iov_[i];
    tx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  for (uint32_t s = 0; s < options.rx_packets; ++s) {
    rx_iov_[s].iov_base = &rx_buf_[size_t{s} * kUdpMaxDatagram];
    rx_iov_[s].iov_len = kUdpMaxDatagram;
  }
}

UdpFabric::~UdpFabric() {
  Flush();
  close(fd_);
}

int UdpFabric::rcvbuf_bytes() const {
  int v = 0;
  socklen_t len = sizeof(v);
  return getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 ? v : -1;
}

Status UdpFabric::SetRoute(const Gid& gid, const UdpAddress& to) {
  if (gid == Gid{} || to.len == 0 || to.family() != local_.family()) {
    return Status::kInvalid;
  }
  for (uint32_t i = 0; i < num_routes_; ++i) {
    if (routes_[i].gid == gid) {
      routes_[i].addr = to;
      return Status::kOk;
    }
  }
  if (num_routes_ == routes_.size()) return Status::kNoResource;
  routes_[num_routes_++] = Route{gid, to};
  return Status::kOk;
}

Status UdpFabric::RemoveRoute(const Gid& gid) {
  for (uint32_t i = 0; i < num_routes_; ++i) {
    if (routes_[i].gid == gid) {
      routes_[i] = routes_[--num_routes_];
      return Status::kOk;
    }
  }
  return Status::kBadHandle;
}

Status UdpFabric::AddGid(const Gid& gid) {
  if (gid == Gid{}) return Status::kInvalid;
  if (HasGid(gid)) return Status::kBusy;
  if (num_gids_ == gids_.size()) return Status::kNoResource;
  gids_[num_gids_++] = gid;
  return Status::kOk;
}

Status UdpFabric::RemoveGid(const Gid& gid) {
  for (uint32_t i = 0; i < num_gids_; ++i) {
    if (gids_[i] == gid) {
      gids_[i] = gids_[--num_gids_];
      return Status::kOk;
    }
  }
  return Status::kBadHandle;
}

// Linear scans: a daemon has tens of peers' GIDs, not thousands; a table
// that grows past that wants a hash (step 9 decides with the peer channel).
const UdpFabric::Route* UdpFabric::FindRoute(const Gid& gid) const {
  for (uint32_t i = 0; i < num_routes_; ++i) {
    if (routes_[i].gid == gid) return &routes_[i];
  }
  return nullptr;
}

bool UdpFabric::KnownSource(const sockaddr_storage& from) const {
  for (uint32_t i = 0; i < num_routes_; ++i) {
    if (routes_[i].addr.SameEndpoint(from)) return true;
  }
  return false;
}

bool UdpFabric::HasGid(const Gid& gid) const {
  for (uint32_t i = 0; i < num_gids_; ++i) {
    if (gids_[i] == gid) return true;
  }
  return false;
}

}  // namespace vrdma::fabric
