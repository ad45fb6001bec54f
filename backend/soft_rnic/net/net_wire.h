// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The line rate on the fabric path (docs/reliability.md §7.1): with
// RnicLimits::link_rate_bps set, every packet a SoftRnic puts on its
// fabric port (requests, ACKs and NAKs, READ responses) takes its
// serialization time on the port's wire (wire.h: payload plus RoCE's
// per-packet overhead), one after another, and leaves when its last bit is
// out: that departure is the time the fabric is given, so the receiving
// host sees it no earlier. Without a line rate a packet leaves when ready.
#ifndef VRDMA_BACKEND_SOFT_RNIC_NET_NET_WIRE_H_
#define VRDMA_BACKEND_SOFT_RNIC_NET_NET_WIRE_H_

#include <cstdint>

#include "backend/soft_rnic/wire.h"

namespace vrdma::soft::net {

// Charges one packet of payload bytes, ready at ready_ns, to wire; returns
// when it leaves the port.
inline uint64_t DepartPacket(Wire& wire, uint64_t ready_ns, uint32_t payload) {
  if (!wire.limited()) return ready_ns;
  wire.Send(ready_ns, uint64_t{payload} + Wire::kPacketOverheadBytes);
  return wire.free_at();
}

}  // namespace vrdma::soft::net

#endif  // VRDMA_BACKEND_SOFT_RNIC_NET_NET_WIRE_H_
