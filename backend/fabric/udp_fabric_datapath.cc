// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// UdpFabric's data path: Send into the transmit batch, Flush by sendmmsg,
// Poll by recvmmsg with every check of udp_fabric.h. No allocation, no
// lock, no blocking call.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backend/fabric/udp_fabric.h"

namespace vrdma::fabric {
namespace {

constexpr uint8_t kMagic[4] = {'V', 'R', 'F', 'B'};
constexpr uint8_t kVersion = 1;

void EncodeHeader(const Gid& dgid, uint8_t* p) {
  std::memcpy(p, kMagic, 4);
  p[4] = kVersion;
  p[5] = p[6] = p[7] = 0;
  std::memcpy(p + 8, dgid.data(), 16);
}

bool HeaderOk(const uint8_t* p) {
  return std::memcmp(p, kMagic, 4) == 0 && p[4] == kVersion && p[5] == 0 &&
         p[6] == 0 && p[7] == 0;
}

}  // namespace

void UdpFabric::Send(std::span<const uint8_t> packet, const Gid& dgid,
                     uint64_t now_ns) {
  ++stats_.sent;
  if (packet.empty() || packet.size() > kMaxPacketBytes) {
    ++stats_.dropped_oversize;
    return;
  }
  const Route* r = FindRoute(dgid);
  if (r == nullptr) {
    ++stats_.dropped_no_route;
    return;
  }
  const uint32_t i = num_tx_;
  uint8_t* p = static_cast<uint8_t*>(tx_iov_[i].iov_base);
  EncodeHeader(dgid, p);
  std::memcpy(p + kUdpHeaderBytes, packet.data(), packet.size());
  tx_iov_[i].iov_len = kUdpHeaderBytes + packet.size();
  // The address is copied: a route may change before the batch leaves.
  std::memcpy(&tx_addr_[i], &r->addr.storage, r->addr.len);
  tx_msgs_[i].msg_hdr.msg_namelen = r->addr.len;
  if (num_tx_++ == 0) tx_oldest_ns_ = now_ns;
  if (num_tx_ == kUdpBatch) Flush();
}

void UdpFabric::Flush() {
  uint32_t i = 0;
  while (i < num_tx_) {
    const int n = sendmmsg(fd_, &tx_msgs_[i], num_tx_ - i, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      ++stats_.tx_batches;
      stats_.tx_packets += static_cast<uint32_t>(n);
      i += static_cast<uint32_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
      // The socket's buffer is full: what is left of the batch is lost,
      // as at a NIC whose queue is full. Never wait for room.
      stats_.tx_dropped_busy += num_tx_ - i;
      break;
    }
    // This datagram failed (no route to the host, too big for the path):
    // it is lost, the rest of the batch goes on.
    ++stats_.tx_errors;
    ++i;
  }
  num_tx_ = 0;
}

std::optional<uint64_t> UdpFabric::NextEventNs() const {
  if (num_tx_ == 0) return std::nullopt;
  return tx_oldest_ns_;
}

void UdpFabric::NoteKernelDrops(const msghdr& h) {
  // h as recvmmsg left it: msg_control is the slot's buffer, msg_controllen
  // what the kernel wrote there.
  for (const cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&h), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL &&
        c->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
      uint32_t drops = 0;
      std::memcpy(&drops, CMSG_DATA(c), sizeof(drops));
      // The kernel's counter is 32 bits and only grows: add the change.
      stats_.rx_kernel_drops += drops - kernel_drops_seen_;
      kernel_drops_seen_ = drops;
    }
  }
}

bool UdpFabric::Accept(uint32_t slot, uint32_t len, int msg_flags) {
  if (!KnownSource(rx_addr_[slot])) {
    ++stats_.rx_unknown_source;
    return false;
  }
  if ((msg_flags & MSG_TRUNC) != 0 || len > kUdpMaxDatagram) {
    ++stats_.rx_oversize;
    return false;
  }
  if (len <= kUdpHeaderBytes) {
    ++stats_.rx_short;
    return false;
  }
  const uint8_t* p = static_cast<const uint8_t*>(rx_iov_[slot].iov_base);
  if (!HeaderOk(p)) {
    ++stats_.rx_bad_header;
    return false;
  }
  Gid dgid;
  std::memcpy(dgid.data(), p + 8, 16);
  if (!HasGid(dgid)) {
    ++stats_.rx_unknown_gid;
    return false;
  }
  return true;
}

int UdpFabric::Poll(std::span<Datagram> out, uint64_t now_ns) {
  Flush();
  // The previous Poll's slots are the caller's no longer: all are free.
  const uint32_t slots = options_.rx_packets;
  for (uint32_t s = 0; s < slots; ++s) rx_free_[s] = s;
  uint32_t num_free = slots;
  const uint32_t limit =
      static_cast<uint32_t>(std::min<size_t>(out.size(), slots));
  uint32_t n = 0;
  // Bounded work per Poll, even under a flood of datagrams that are all
  // dropped (their slots are reused): twice the calls a full pool needs.
  const uint32_t max_calls = 2 * ((slots + kUdpBatch - 1) / kUdpBatch);
  std::array<uint32_t, kUdpBatch> batch_slot;
  for (uint32_t call = 0; call < max_calls && n < limit; ++call) {
    const uint32_t want = std::min(kUdpBatch, limit - n);
    for (uint32_t j = 0; j < want; ++j) {
      const uint32_t s = rx_free_[--num_free];
      batch_slot[j] = s;
      msghdr& h = rx_msgs_[j].msg_hdr;
      h.msg_name = &rx_addr_[s];
      h.msg_namelen = sizeof(sockaddr_storage);
      h.msg_iov = &rx_iov_[s];
      h.msg_iovlen = 1;
      h.msg_control = rx_control_[s].data();
      h.msg_controllen = rx_control_[s].size();
      h.msg_flags = 0;
      rx_msgs_[j].msg_len = 0;
    }
    const int got = recvmmsg(fd_, rx_msgs_.data(), want, MSG_DONTWAIT, nullptr);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) {
        num_free += want;  // the slots were not used
        continue;
      }
      if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ++stats_.rx_errors;
      break;
    }
    ++stats_.rx_batches;
    for (uint32_t j = 0; j < static_cast<uint32_t>(got); ++j) {
      const uint32_t s = batch_slot[j];
      const msghdr& h = rx_msgs_[j].msg_hdr;
      if (h.msg_controllen > 0) NoteKernelDrops(h);
      if (Accept(s, rx_msgs_[j].msg_len, h.msg_flags)) {
        out[n++] = Datagram{static_cast<const uint8_t*>(rx_iov_[s].iov_base) +
                                kUdpHeaderBytes,
                            rx_msgs_[j].msg_len - kUdpHeaderBytes, now_ns};
      } else {
        rx_free_[num_free++] = s;  // dropped: its slot serves again
      }
    }
    // Slots taken for this call but not filled go back too.
    for (uint32_t j = static_cast<uint32_t>(got); j < want; ++j) {
      rx_free_[num_free++] = batch_slot[j];
    }
    if (static_cast<uint32_t>(got) < want) break;  // the socket is empty
  }
  stats_.delivered += n;
  return n;
}

}  // namespace vrdma::fabric
