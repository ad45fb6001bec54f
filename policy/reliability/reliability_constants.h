// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Wire constants of issue 15's software reliability (docs/reliability.md,
// terms and §3.1): not daemon flags, both daemons must agree on them.
#ifndef VRDMA_POLICY_RELIABILITY_RELIABILITY_CONSTANTS_H_
#define VRDMA_POLICY_RELIABILITY_RELIABILITY_CONSTANTS_H_

#include <cstdint>

namespace vrdma::policy::reliability {

// UNIT_SIZE: the granularity of chunk boundaries and of retransmissions.
inline constexpr uint64_t kUnitSize = 4096;
// A MID covers at most 2^16 units (the 16-bit OFF of the immediate, §3.1).
inline constexpr uint64_t kUnitsPerMid = uint64_t{1} << 16;
inline constexpr uint64_t kMidBytes = kUnitsPerMid * kUnitSize;  // 256 MiB

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_RELIABILITY_CONSTANTS_H_
