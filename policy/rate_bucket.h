// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A token bucket for a per-VM rate (a cap in bytes or messages, or a
// guarantee in bytes), filled at `rate` units per ns and charged with what
// actually left the card, so it is exact over time.
//
// Two depths. After the VM was idle, the bucket holds at most `burst_ns` at
// the rate: a VM that sent nothing for a while does not burst past its
// rate. While the VM had work waiting in the stage, it holds up to
// `backlog_ns` at the rate: the daemon, not the VM, was late (its data-path
// thread descheduled, a timer fired late), and the VM catches up on what it
// was owed instead of losing it. On a loaded 2-core host a 1 ms bucket lost
// up to 45 % of a 1 Gb/s cap that way.
//
// The level may go negative (what was charged beyond the tokens), down to
// minus the backlog depth, so an over-served VM is not owed forever.
#ifndef VRDMA_POLICY_RATE_BUCKET_H_
#define VRDMA_POLICY_RATE_BUCKET_H_

#include <algorithm>
#include <cstdint>

#include "policy/scheduler_policy.h"

namespace vrdma::policy {

class RateBucket {
 public:
  // rate_per_s: units (bytes, messages) per second; 0 disarms the bucket.
  // min_depth: the least a bucket holds (a piece must fit).
  void Set(double rate_per_s, double burst_ns, double backlog_ns, double min_depth, Nanos now) {
    rate_ = rate_per_s / 1e9;
    burst_ = std::max(rate_ * burst_ns, min_depth);
    backlog_ = std::max(rate_ * backlog_ns, burst_);
    level_ = 0;
    at_ = now;
  }
  bool armed() const { return rate_ > 0; }

  // Adds what the time since the last refill earned. backlogged: the VM had
  // work waiting in the stage over that time.
  void Refill(Nanos now, bool backlogged) {
    if (now <= at_) return;
    const double cap = backlogged ? backlog_ : burst_;
    if (level_ < cap) level_ = std::min(cap, level_ + rate_ * static_cast<double>(now - at_));
    at_ = now;
  }
  void Take(double units) { level_ = std::max(level_ - units, -backlog_); }

  bool positive() const { return level_ > 0; }
  double level() const { return level_; }
  // When the level will be positive again (now if it is).
  Nanos PositiveAt(Nanos now) const {
    if (level_ > 0) return now;
    return now + static_cast<Nanos>(-level_ / rate_) + 1;
  }

 private:
  double rate_ = 0;     // units per ns
  double burst_ = 0;    // depth after idle
  double backlog_ = 0;  // depth while backlogged
  double level_ = 0;
  Nanos at_ = 0;
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_RATE_BUCKET_H_
