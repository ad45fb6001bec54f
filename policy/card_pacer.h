// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The card's time as fair-share paces it (docs/fair-share.md): two clocks,
// the wire and the message engine, that every message the policy lets on
// the card advances by its time on each (a message bypassing the stage
// too), each kept at most `pace` busy. A grant is due when both clocks
// have come within `slack` of now. The clocks run at most `horizon` ahead
// of now: more than that is load the policy's window holds back anyway (a
// bulk burst before contention began). Pure arithmetic, no allocation.
#ifndef VRDMA_POLICY_CARD_PACER_H_
#define VRDMA_POLICY_CARD_PACER_H_

#include <algorithm>
#include <cstdint>

#include "policy/scheduler_policy.h"

namespace vrdma::policy {

class CardPacer {
 public:
  CardPacer(const CardProfile& card, double pace, uint32_t packet_overhead_bytes)
      : mtu_(card.mtu_bytes),
        overhead_(packet_overhead_bytes),
        pace_(pace),
        ns_per_byte_(8e9 / card.line_rate_bps),
        ns_per_msg_(1e9 / card.max_msgs_per_s) {}

  // A message's time on the wire: payload and each packet's headers.
  double WireNs(uint64_t bytes) const {
    const uint64_t packets = std::max<uint64_t>(1, (bytes + mtu_ - 1) / mtu_);
    return static_cast<double>(bytes + packets * overhead_) * ns_per_byte_;
  }
  // Its time on the card's dominant resource: the wire, or the message
  // engine at the card's message rate.
  double CostNs(uint64_t bytes) const { return std::max(WireNs(bytes), ns_per_msg_); }

  // A grant may come `slack_bytes`' wire time early; the clocks run at
  // most `horizon_bytes`' wire time ahead.
  void SetSlack(uint64_t slack_bytes) { slack_ns_ = WireNs(slack_bytes) / pace_; }
  void SetHorizon(uint64_t horizon_bytes) { horizon_ns_ = WireNs(horizon_bytes) / pace_; }

  // `count` messages of `bytes` each go on the card now.
  void Occupy(Nanos now, uint64_t bytes, uint32_t count = 1) {
    const double t = static_cast<double>(now);
    wire_at_ = std::min(std::max(wire_at_, t) + count * WireNs(bytes) / pace_, t + horizon_ns_);
    msg_at_ = std::min(std::max(msg_at_, t) + count * ns_per_msg_ / pace_, t + horizon_ns_);
  }
  // How far the message engine's clock runs ahead of now: at the horizon
  // when what goes on the card asks for more messages than it does.
  bool MessagesSaturated(Nanos now) const {
    return msg_at_ - static_cast<double>(now) >= 0.75 * horizon_ns_;
  }
  // When the next grant is due (may be in the past).
  double DueAt() const { return std::max(wire_at_, msg_at_) - slack_ns_; }

 private:
  uint32_t mtu_;
  uint32_t overhead_;
  double pace_;
  double ns_per_byte_;
  double ns_per_msg_;
  double slack_ns_ = 0;
  double horizon_ns_ = 0;
  double wire_at_ = 0;  // when the wire is free of what the policy let on
  double msg_at_ = 0;   // when the message engine is
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_CARD_PACER_H_
