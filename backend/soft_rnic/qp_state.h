// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The IB QP state machine as a pure table (IBA 10.3, the same rules as
// ib_modify_qp_is_ok() in Linux drivers/infiniband/core/verbs.c) and the
// IB-encoded timer values. No side effects, so it is tested on its own.
#ifndef VRDMA_BACKEND_SOFT_RNIC_QP_STATE_H_
#define VRDMA_BACKEND_SOFT_RNIC_QP_STATE_H_

#include <cstdint>

#include "backend/base/status.h"
#include "backend/rnic/rnic.h"

namespace vrdma::soft {

// Mask bits that IBV_QP_* defines and that are accepted (as no-ops) where
// the spec allows them, besides the ones in QpAttrMask.
inline constexpr uint32_t kQpCurState = 1u << 1;
inline constexpr uint32_t kQpEnSqdAsyncNotify = 1u << 2;
inline constexpr uint32_t kQpAltPath = 1u << 14;
inline constexpr uint32_t kQpPathMigState = 1u << 18;

// kOk when moving a `type` QP from `cur` to `next` with attribute `mask`
// (kQpState included or not) is legal; kBadState for a transition the spec
// does not have, kInvalid for a missing required or a disallowed attribute.
Status CheckQpTransition(QpType type, QpState cur, QpState next, uint32_t mask);

// Value checks on the attributes named by mask (ranges of the IB encodings).
Status CheckQpAttrValues(const QpAttr& attr, uint32_t mask,
                         uint32_t active_mtu_bytes);

// IB encoded minimum RNR NAK timer (IBA table 45) in nanoseconds.
uint64_t RnrTimerNs(uint8_t encoded);
// Local ACK timeout, 4.096 us * 2^timeout; 0 means "wait forever".
uint64_t AckTimeoutNs(uint8_t timeout);

inline constexpr uint8_t kInfiniteRnrRetry = 7;

// A QP in these states accepts incoming messages (IBA 10.3: from RTR on,
// until ERR).
inline bool Receiving(QpState s) {
  return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd ||
         s == QpState::kSqe;
}

}  // namespace vrdma::soft

#endif  // VRDMA_BACKEND_SOFT_RNIC_QP_STATE_H_
