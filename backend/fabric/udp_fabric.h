// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// UdpFabric: one daemon's port on a real network (docs/reliability.md
// §7.2): one non-blocking UDP socket bound to --fabric-listen, packets to
// a GID sent to the UDP address its route names (SetRoute: the daemon's
// --fabric-route now, the peer channel's GIDS later), packets arriving on
// the socket returned by Poll.
//
// On the wire each datagram is a 24-byte fabric header, then the packet:
//   0  magic "VRFB"   4  version (1)   5  three reserved bytes (0)
//   8  dgid (16 bytes, the GID the sender routed it by)
// A datagram is at most kUdpHeaderBytes + kMaxPacketBytes bytes (4376: a
// network between daemons needs an MTU of 4404, or IP fragments it).
//
// Untrusted input: every datagram is checked in this order, and the first
// check it fails drops it and counts one counter (UdpFabricStats):
//   its source address and port are no route's        rx_unknown_source
//   longer than a header and kMaxPacketBytes           rx_oversize
//   not longer than the header (an empty packet)       rx_short
//   magic, version or reserved bytes                   rx_bad_header
//   dgid is not a GID of this port (AddGid)            rx_unknown_gid
// The source check keeps out strangers, not liars: UDP source addresses
// can be forged by anyone on the network, so everything past the fabric
// (SoftRnic's packet checks) still treats the packet as hostile.
//
// Batches: Send copies the packet into the next of 32 transmit slots and
// hands a full batch to sendmmsg; Poll (and Flush) send what is queued
// first, so a packet waits at most until its port's next Poll, and
// NextEventNs is due while any wait (the RNIC keeps polling). Poll reads
// with recvmmsg, 32 at a time, into a pool of rx_packets slots lent to the
// caller until the next Poll.
//
// Times: a packet leaves at the next flush whatever now_ns Send was
// given. With a line rate SoftRnic passes each packet's departure from its
// wire (net_wire.h), possibly ahead of the present; this fabric does not
// hold packets until then (it would need a queue as deep as a message), so
// the receiving daemon may see a message's packets up to that message's
// serialization time early. The rate between messages is still the line's
// (a QP waits for the wire before its next message). A FaultyFabric
// bottleneck in front (--fabric-fault bottleneck=...) paces each packet.
//
// Never blocks: the socket is non-blocking; a batch the kernel refuses
// with EAGAIN or ENOBUFS (its send buffer full) is dropped and counted
// (tx_dropped_busy), as a NIC's full queue drops; an empty socket is
// nothing to do. Datagrams the kernel dropped because this socket's
// receive buffer was full (the data path fell behind) are counted too
// (rx_kernel_drops, SO_RXQ_OVFL), as of the last datagram received.
//
// Threads and memory: one thread calls Send, Poll, Flush, AddGid,
// RemoveGid, SetRoute and RemoveRoute (the daemon's data path; routes from
// flags are set before it starts). Every buffer is allocated by Open;
// nothing on the data path allocates. Counters are read on that thread.
#ifndef VRDMA_BACKEND_FABRIC_UDP_FABRIC_H_
#define VRDMA_BACKEND_FABRIC_UDP_FABRIC_H_

#include <sys/socket.h>  // mmsghdr (_GNU_SOURCE)
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/fabric/fabric.h"
#include "backend/fabric/udp_address.h"

namespace vrdma::fabric {

inline constexpr uint32_t kUdpHeaderBytes = 24;
inline constexpr uint32_t kUdpMaxDatagram = kUdpHeaderBytes + kMaxPacketBytes;
inline constexpr uint32_t kUdpBatch = 32;  // packets per sendmmsg/recvmmsg

struct UdpFabricOptions {
  uint32_t rx_packets = 256;  // receive slots: at most this many per Poll
  uint32_t max_gids = 1024;   // this port's GIDs (AddGid): SoftRnic's 1024
  uint32_t max_routes = 1024;  // GID -> address routes
  // The socket's buffers (SO_RCVBUF, SO_SNDBUF; 0: the kernel's
  // defaults, ~208 KiB). The receive buffer must hold what arrives between
  // two Polls: an unpaced SoftRnic sends up to 32 messages a turn per QP,
  // megabytes. Above net.core.rmem_max only with CAP_NET_ADMIN.
  int rcvbuf_bytes = 0;
  int sndbuf_bytes = 0;
};

struct UdpFabricStats {
  // Sending.
  uint64_t sent = 0;              // packets Send took (every outcome)
  uint64_t tx_packets = 0;        // datagrams the kernel accepted
  uint64_t tx_batches = 0;        // sendmmsg calls that sent something
  uint64_t dropped_oversize = 0;  // longer than kMaxPacketBytes, or empty
  uint64_t dropped_no_route = 0;  // no route for the dgid
  uint64_t tx_dropped_busy = 0;   // EAGAIN/ENOBUFS: the socket's buffer full
  uint64_t tx_errors = 0;         // any other send error (per datagram)
  // Receiving.
  uint64_t delivered = 0;         // returned by Poll
  uint64_t rx_batches = 0;        // recvmmsg calls that returned something
  uint64_t rx_unknown_source = 0;
  uint64_t rx_oversize = 0;
  uint64_t rx_short = 0;
  uint64_t rx_bad_header = 0;
  uint64_t rx_unknown_gid = 0;
  uint64_t rx_errors = 0;         // recvmmsg failed (not EAGAIN)
  uint64_t rx_kernel_drops = 0;   // the socket's receive buffer was full
  uint64_t rx_dropped() const {
    return rx_unknown_source + rx_oversize + rx_short + rx_bad_header +
           rx_unknown_gid;
  }
};

class UdpFabric final : public Fabric {
 public:
  // Binds a UDP socket to listen (port 0: a free one, see local_address).
  // nullptr and *error on failure.
  static std::unique_ptr<UdpFabric> Open(const UdpAddress& listen,
                                         const UdpFabricOptions& options,
                                         std::string* error);
  ~UdpFabric() override;
  UdpFabric(const UdpFabric&) = delete;
  UdpFabric& operator=(const UdpFabric&) = delete;

  // The socket (readable when datagrams wait: a data-path loop watches it
  // to wake) and the address it is bound to.
  int fd() const { return fd_; }
  const UdpAddress& local_address() const { return local_; }
  // The receive buffer the kernel granted (it doubles what was asked, and
  // caps it without privileges); -1 on error.
  int rcvbuf_bytes() const;

  // Packets to gid go to `to` from now on (a route for gid is replaced).
  // kInvalid: the zero GID, or an address of another family than the
  // socket's; kNoResource: the table is full.
  Status SetRoute(const Gid& gid, const UdpAddress& to);
  // kBadHandle when there is no route for gid.
  Status RemoveRoute(const Gid& gid);
  uint32_t num_routes() const { return num_routes_; }

  // Fabric. AddGid: kInvalid (zero GID), kBusy (already this port's),
  // kNoResource (max_gids).
  Status AddGid(const Gid& gid) override;
  Status RemoveGid(const Gid& gid) override;
  void Send(std::span<const uint8_t> packet, const Gid& dgid,
            uint64_t now_ns) override;
  int Poll(std::span<Datagram> out, uint64_t now_ns) override;
  // The oldest queued packet's send time while any is queued (the port
  // wants a Poll or Flush), else nullopt: arrivals are announced by fd().
  std::optional<uint64_t> NextEventNs() const override;

  // Hands the queued packets to the kernel now.
  void Flush();
  uint32_t queued() const { return num_tx_; }

  const UdpFabricStats& stats() const { return stats_; }

 private:
  struct Route {
    Gid gid{};
    UdpAddress addr;
  };
  UdpFabric(int fd, const UdpAddress& local, const UdpFabricOptions& options);

  const Route* FindRoute(const Gid& gid) const;
  bool KnownSource(const sockaddr_storage& from) const;
  bool HasGid(const Gid& gid) const;
  // The first check of the table above that the datagram in rx slot `slot`
  // (len bytes, recvmmsg's msg_flags) fails, counted; true if none.
  bool Accept(uint32_t slot, uint32_t len, int msg_flags);
  // Reads SO_RXQ_OVFL's drop count from a received message's control data.
  void NoteKernelDrops(const msghdr& h);

  int fd_;
  UdpAddress local_;
  UdpFabricOptions options_;
  std::vector<Gid> gids_;  // capacity max_gids, num_gids_ used
  uint32_t num_gids_ = 0;
  std::vector<Route> routes_;  // capacity max_routes, num_routes_ used
  uint32_t num_routes_ = 0;

  // Transmit: one batch.
  std::vector<uint8_t> tx_buf_;  // kUdpBatch x kUdpMaxDatagram
  std::vector<sockaddr_storage> tx_addr_;
  std::vector<iovec> tx_iov_;
  std::vector<mmsghdr> tx_msgs_;
  uint32_t num_tx_ = 0;
  uint64_t tx_oldest_ns_ = 0;

  // Receive: rx_packets slots; a free stack of slot numbers.
  std::vector<uint8_t> rx_buf_;  // rx_packets x kUdpMaxDatagram
  std::vector<sockaddr_storage> rx_addr_;
  std::vector<std::array<uint8_t, 64>> rx_control_;  // SO_RXQ_OVFL cmsg
  std::vector<iovec> rx_iov_;
  std::vector<mmsghdr> rx_msgs_;  // kUdpBatch, filled per call
  std::vector<uint32_t> rx_free_;
  uint32_t kernel_drops_seen_ = 0;  // the socket's 32-bit counter, last value

  UdpFabricStats stats_;
};

}  // namespace vrdma::fabric

#endif  // VRDMA_BACKEND_FABRIC_UDP_FABRIC_H_
