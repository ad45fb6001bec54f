// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A packet fabric as one host's port sees it (docs/reliability.md §7.2): it
// carries opaque packets of at most kMaxPacketBytes to the port that
// registered the destination GID. SoftRnic sends its packets through one
// when it has one (§7.1); InprocFabric joins several in one process,
// FaultyFabric loses, reorders, duplicates and delays them.
//
// Time is always a parameter (ns on the caller's clock): a fabric never
// reads a clock, so a run is deterministic given its inputs and times.
//
// Send and Poll are data-path calls: they never allocate (every queue and
// pool is sized at construction) and take no lock; one thread at a time
// calls a port (in-process fabrics: one thread for the whole fabric).
// What a full queue cannot take is dropped and counted, as a switch does.
#ifndef VRDMA_BACKEND_FABRIC_FABRIC_H_
#define VRDMA_BACKEND_FABRIC_FABRIC_H_

#include <cstdint>
#include <optional>
#include <span>

#include "backend/base/status.h"
#include "backend/rnic/rnic.h"

namespace vrdma::fabric {

// The largest packet a fabric carries: a 4096-byte MTU and room for the
// headers of SoftRnic's packets (backend/soft_rnic/net/packet.h).
inline constexpr uint32_t kMaxPacketBytes = 4096 + 256;

// A packet Poll returned: its bytes stay valid until the next Poll of the
// same port (they live in the fabric's queue slot until then).
struct Datagram {
  const uint8_t* data = nullptr;
  uint32_t len = 0;
  uint64_t arrival_ns = 0;  // when the fabric made it deliverable
  std::span<const uint8_t> bytes() const { return {data, len}; }
};

class Fabric {
 public:
  virtual ~Fabric() = default;

  // Packets to gid are delivered to this port from now on. kBusy: another
  // port (or this one) has it; kNoResource: the route table is full.
  virtual Status AddGid(const Gid& gid) = 0;
  // kBadHandle when this port does not have gid.
  virtual Status RemoveGid(const Gid& gid) = 0;

  // Sends a copy of packet towards the port that has dgid, leaving this
  // port at now_ns. Never fails visibly: a packet the fabric cannot carry
  // (too long, no route, a full queue, a fault) is dropped and counted by
  // the fabric, as on a network.
  virtual void Send(std::span<const uint8_t> packet, const Gid& dgid,
                    uint64_t now_ns) = 0;

  // Fills out with packets for this port's GIDs that have arrived by
  // now_ns, oldest first; returns how many. Releases the slots of the
  // previous Poll's packets.
  virtual int Poll(std::span<Datagram> out, uint64_t now_ns) = 0;

  // The earliest time at which a Poll of this port may return a packet, or
  // a packet this port holds moves on (nullopt: nothing in flight here).
  // A caller must keep calling Poll (and, for a port that holds packets on
  // their way out, Send or Poll) until then: its RNIC is not idle.
  virtual std::optional<uint64_t> NextEventNs() const = 0;
};

}  // namespace vrdma::fabric

#endif  // VRDMA_BACKEND_FABRIC_FABRIC_H_
