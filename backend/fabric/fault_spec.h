// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The text form of a FaultConfig (docs/reliability.md §7.2), as the
// daemon's --fabric-fault flag and tests give it: comma-separated
// key=value items, each key at most once, in any order.
//
//   loss=P                     random loss probability (0..1)
//   burst=ENTER:LEAVE[:LOSS]   Gilbert-Elliott: p_enter_bad, p_leave_bad,
//                              loss in the bad state (default 1)
//   reorder=P:DELAY            p_reorder, reorder_delay
//   dup=P                      p_dup
//   delay=DELAY[:JITTER]       fixed delay, uniform jitter
//   bottleneck=RATE:BYTES      a queue per destination: its rate, its limit
//
// DELAY: an integer with ns, us, ms or s. RATE: a number with bps, kbps,
// mbps or gbps (decimal). BYTES: an integer, optionally with KiB or MiB.
// P: a decimal in [0, 1]. Example:
//   loss=0.01,reorder=0.01:20us,dup=0.005,delay=10us:5us,bottleneck=10gbps:256KiB
// Control path: allocates only for the error message.
#ifndef VRDMA_BACKEND_FABRIC_FAULT_SPEC_H_
#define VRDMA_BACKEND_FABRIC_FAULT_SPEC_H_

#include <string>
#include <string_view>

#include "backend/base/status.h"
#include "backend/fabric/fault_model.h"

namespace vrdma::fabric {

// kInvalid (and, with error, what was wrong and where) for anything else.
Result<FaultConfig> ParseFaultSpec(std::string_view spec,
                                   std::string* error = nullptr);

}  // namespace vrdma::fabric

#endif  // VRDMA_BACKEND_FABRIC_FAULT_SPEC_H_
