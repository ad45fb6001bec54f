// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// InprocFabric: several simulated hosts in one process (docs/reliability.md
// §7.2), one port each. A port's AddGid fills the fabric's GID -> port
// table; Send copies the packet into the destination port's queue, stamped
// with its arrival time (the send time plus a fixed latency); that port's
// Poll returns the packets whose time has come, in the order they were
// queued. No faults of its own: a full queue drops (tail drop) and counts.
// Wrap a port in a FaultyFabric for losses, reordering, delay and a
// bottleneck.
//
// Storage: per port a ring of queue_packets slots of kMaxPacketBytes,
// allocated by AddPort; the route table is sized at construction. Send and
// Poll never allocate. Single-threaded: one thread drives every port of an
// InprocFabric (unit tests, each simulated host's data path in turn).
#ifndef VRDMA_BACKEND_FABRIC_INPROC_FABRIC_H_
#define VRDMA_BACKEND_FABRIC_INPROC_FABRIC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/fabric/fabric.h"

namespace vrdma::fabric {

struct InprocFabricOptions {
  uint32_t queue_packets = 1024;  // per port: packets sent to it, not yet polled
  uint64_t latency_ns = 0;        // from Send to deliverable
  uint32_t max_gids = 256;        // routes, all ports together
};

// A port's counters. Sent and dropped-before-queueing count at the
// sender's port, queue-full drops and deliveries at the receiver's.
struct InprocPortStats {
  uint64_t sent = 0;              // packets Send took (every outcome)
  uint64_t dropped_oversize = 0;  // longer than kMaxPacketBytes (or empty)
  uint64_t dropped_no_route = 0;  // no port has the dgid
  uint64_t dropped_queue_full = 0;  // for this port, its queue was full
  uint64_t delivered = 0;         // returned by this port's Poll
};

class InprocFabric {
 public:
  explicit InprocFabric(InprocFabricOptions options = {});
  ~InprocFabric();
  InprocFabric(const InprocFabric&) = delete;
  InprocFabric& operator=(const InprocFabric&) = delete;

  // A new port (control path: allocates its queue). The fabric owns it;
  // it lives as long as the fabric.
  Fabric* AddPort();

  // Counters of a port this fabric made.
  const InprocPortStats& stats(const Fabric* port) const;

 private:
  class Port;
  struct Route {
    Gid gid{};
    Port* port = nullptr;
  };
  Port* Lookup(const Gid& gid) const;

  InprocFabricOptions options_;
  std::vector<std::unique_ptr<Port>> ports_;
  std::vector<Route> routes_;  // capacity max_gids, num_routes_ used
  uint32_t num_routes_ = 0;
};

}  // namespace vrdma::fabric

#endif  // VRDMA_BACKEND_FABRIC_INPROC_FABRIC_H_
