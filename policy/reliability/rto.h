// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The retransmission timeout of a chunk (docs/reliability.md §4.4):
// RTO = clamp(srtt + 4 rttvar + ack_timer, 200 us, 20 ms) from an
// RttEstimator (RFC 6298), at least the floor that spurious RTOs raised
// (rto_undo.h), 1 ms before the first sample, doubled at each
// consecutive expiry of the same chunk up to 20 ms. ack_timer is the
// receiver's ACK timer (§4.3): the longest an ACK may be held, which the
// samples exclude (they subtract hold_ns). The retry budget that bounds a
// message's total (§1) is the sender's, not this class's. Pure: no clock.
#ifndef VRDMA_POLICY_RELIABILITY_RTO_H_
#define VRDMA_POLICY_RELIABILITY_RTO_H_

#include <algorithm>
#include <cstdint>

#include "policy/reliability/ack_trigger.h"
#include "policy/reliability/rtt_estimator.h"

namespace vrdma::policy::reliability {

struct RtoParams {
  uint64_t min_ns = 200'000;        // §4.4: clamp(..., 200 us, 20 ms)
  uint64_t max_ns = 20'000'000;     // also the bound of the doubling
  uint64_t initial_ns = 1'000'000;  // before the first sample
  // §4.3's ACK timer: the receiver's, one default for both.
  uint64_t ack_timer_ns = AckTriggerParams{}.timer_ns;
};

class Rto {
 public:
  explicit Rto(const RtoParams& params = {}) : p_(params) {}

  // The RTO of a first transmission, from the estimator's state.
  [[nodiscard]] uint64_t BaseNs(const RttEstimator& rtt) const {
    if (!rtt.has_sample()) return std::min(p_.initial_ns, p_.max_ns);
    const uint64_t rto = rtt.srtt() + 4 * rtt.rttvar() + p_.ack_timer_ns;
    return std::clamp(rto, p_.min_ns, p_.max_ns);
  }

  // The RTO after `expiries` consecutive expiries of the same chunk:
  // base x 2^expiries, at most max_ns.
  [[nodiscard]] uint64_t BackedOffNs(uint64_t base_ns,
                                     uint32_t expiries) const {
    uint64_t rto = std::min(base_ns, p_.max_ns);
    for (uint32_t i = 0; i < expiries && rto < p_.max_ns; ++i) {
      rto = std::min(rto * 2, p_.max_ns);
    }
    return rto;
  }

  // floor_ns: RtoUndo::FloorNs, the least a host's proven stalls allow
  // (at most max_ns).
  [[nodiscard]] uint64_t TimeoutNs(const RttEstimator& rtt, uint32_t expiries,
                                   uint64_t floor_ns = 0) const {
    return BackedOffNs(std::max(BaseNs(rtt), std::min(floor_ns, p_.max_ns)),
                       expiries);
  }

  [[nodiscard]] const RtoParams& params() const { return p_; }

 private:
  RtoParams p_;
};

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_RTO_H_
