// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A VM's share of the shared control thread over time: a token bucket of
// control-thread nanoseconds. Time slices (DrainControlQueue) bound one
// turn; this bounds the sum, so a VM that keeps its control queue full of
// expensive commands (REG_MR of scattered pages, QPs created and destroyed
// in a loop) gets `share` of the thread and waits for the rest, while the
// other VMs' commands keep their latency (docs/security.md). Pure logic:
// the caller passes the time and arms its own timer.
#ifndef VRDMA_DEVICE_CONTROL_QUOTA_H_
#define VRDMA_DEVICE_CONTROL_QUOTA_H_

#include <algorithm>
#include <cstdint>

namespace vrdma::device {

class ControlQuota {
 public:
  // share: the fraction of one control thread the VM may use over time,
  // (0, 1]; burst_ns: what it may use at once after a quiet period.
  ControlQuota(double share, uint64_t burst_ns)
      : share_(share), burst_(static_cast<double>(burst_ns)), tokens_(burst_) {}

  // Whether the VM may run control commands at now_ns; when not, *wait_ns
  // is how long until it may.
  bool Allowed(uint64_t now_ns, uint64_t* wait_ns) {
    Refill(now_ns);
    if (tokens_ > 0) return true;
    *wait_ns = static_cast<uint64_t>(-tokens_ / share_) + 1;
    return false;
  }
  // Control-thread time the VM's commands just took.
  void Charge(uint64_t busy_ns) { tokens_ -= static_cast<double>(busy_ns); }

 private:
  void Refill(uint64_t now_ns) {
    if (at_ != 0 && now_ns > at_) {
      tokens_ = std::min(burst_, tokens_ + share_ * static_cast<double>(now_ns - at_));
    }
    at_ = std::max(at_, now_ns);
  }

  double share_;
  double burst_;
  double tokens_;
  uint64_t at_ = 0;
};

}  // namespace vrdma::device

#endif  // VRDMA_DEVICE_CONTROL_QUOTA_H_
