// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The congestion window of one direction of a virtual QP, in bytes: the
// delay-based AIMD after Swift of docs/reliability.md §4.5.
//   target = base + queue, base = min(base_rtt, fabric_base_rtt): the
//   measured base counts only up to the fabric's own RTT without queues
//   (the operator's, from the topology, as Swift's and Bifröst's base
//   are), so a queue that never drains (an incast that starts at once)
//   cannot raise the target; queue = the operator's target_delay_ns, else
//   min(10 us, base x max_decrease / (1 - max_decrease)): at most one base
//   RTT at the default 0.5 (QueueAllowanceNs: the least standing queue
//   that keeps the bottleneck busy through the largest decrease; more only
//   adds delay);
//   an ACK with a sample below target: cwnd += 4096 x acked / max(cwnd,
//   4096) (one unit per round trip; under one unit, one unit per unit
//   acked, Swift's rule for a window under one packet);
//   a sample at or above target, at most once per srtt: cwnd *= max(1 -
//   0.8 x (rtt - target) / rtt, 0.5);
//   a loss: cwnd = min_cwnd if the newest sample was at or above its target
//   (congestive), or at the second RTO without an ACK between; else the
//   window is left as it is (random loss);
//   cwnd within [min_cwnd (one unit), max_cwnd], initial 64 KiB; under one
//   unit (a smaller min_cwnd),
//   transmissions are paced: after one of b bytes the next leaves
//   srtt x b / cwnd later (PacingIntervalNs), so a 64-byte message is not
//   held as long as a whole unit.
// Pure: times are parameters (ns), nothing allocated.
#ifndef VRDMA_POLICY_RELIABILITY_SWIFT_WINDOW_H_
#define VRDMA_POLICY_RELIABILITY_SWIFT_WINDOW_H_

#include <algorithm>
#include <cstdint>
#include <optional>

#include "policy/reliability/reliability_constants.h"

namespace vrdma::policy::reliability {

struct SwiftWindowParams {
  // The queueing part of the target (ns): the operator's
  // (--reliability-target-us), or 0: default_target_delay_ns, at most
  // QueueAllowanceNs (one base RTT at max_decrease 0.5), so a fabric
  // faster than that does not queue more than a decrease needs.
  uint64_t target_delay_ns = 0;
  uint64_t default_target_delay_ns = 10'000;
  // The fabric's RTT without queues, at most (Bifröst's is 50 us); a
  // measured base above it is not taken. 0: the measured base alone.
  uint64_t fabric_base_rtt_ns = 50'000;
  double additive_increase = kUnitSize;  // bytes per round trip
  double beta = 0.8;                     // multiplicative decrease gain
  double max_decrease = 0.5;             // the factor is at least 1 - this
  // One unit (Bifröst's least chunk): a window below it is paced at srtt x
  // bytes / cwnd, and where the RTT is mostly host delay (a daemon on a
  // loaded host) the window sits at its minimum, so a 512-byte minimum
  // sent a unit every 8 srtt. Smaller minimums serve incasts wider than
  // buffer / unit senders (Swift's 0.001 packets).
  uint64_t min_cwnd = kUnitSize;
  uint64_t max_cwnd = uint64_t{4} << 20;       // 4 MiB
  uint64_t initial_cwnd = uint64_t{64} << 10;  // 64 KiB
};

class SwiftWindow {
 public:
  // max_decrease is clamped to this for QueueAllowanceNs (1 would need an
  // unbounded queue).
  static constexpr double kMaxDecreaseForQueue = 0.9;

  explicit SwiftWindow(const SwiftWindowParams& params = {})
      : p_(params),
        cwnd_(static_cast<double>(std::clamp(
            params.initial_cwnd, params.min_cwnd, params.max_cwnd))) {}

  // The delay target for a base RTT (§4.5); ChunkSize scales by it too.
  [[nodiscard]] uint64_t TargetNs(uint64_t base_rtt_ns) const {
    const uint64_t base = p_.fabric_base_rtt_ns == 0
                              ? base_rtt_ns
                              : std::min(base_rtt_ns, p_.fabric_base_rtt_ns);
    return base +
           (p_.target_delay_ns != 0
                ? p_.target_delay_ns
                : std::min(p_.default_target_delay_ns, QueueAllowanceNs(base)));
  }

  // The least queue (ns) above `base` that keeps the bottleneck busy
  // through the largest decrease, and so the most worth allowing when the
  // operator gave no target: a delay-based window settles where the queue
  // meets the target, so more only adds delay. In flight are base + queue
  // worth of bytes; a decrease by the factor f leaves f x (base + queue),
  // which still fills the base round trip when queue >= base x (1 - f) /
  // f; the smallest f is 1 - max_decrease (the rule behind one BDP of
  // buffer for a single halving AIMD flow).
  [[nodiscard]] uint64_t QueueAllowanceNs(uint64_t base_ns) const {
    const double d = std::clamp(p_.max_decrease, 0.0, kMaxDecreaseForQueue);
    return static_cast<uint64_t>(static_cast<double>(base_ns) * d / (1.0 - d));
  }

  // An ACK at now_ns for acked_bytes. rtt_ns: its RTT sample, nullopt when
  // it carried none (the window then stays; only the RTO count restarts).
  // srtt_ns, base_rtt_ns: the RttEstimator's, the sample included.
  void OnAck(uint64_t now_ns, uint64_t acked_bytes,
             std::optional<uint64_t> rtt_ns, uint64_t srtt_ns,
             uint64_t base_rtt_ns) {
    rtos_without_ack_ = 0;
    if (!rtt_ns) return;
    const uint64_t rtt = *rtt_ns;
    const uint64_t target = TargetNs(base_rtt_ns);
    newest_rtt_ = rtt;
    newest_target_ = target;
    if (rtt < target) {
      cwnd_ += p_.additive_increase * static_cast<double>(acked_bytes) /
               std::max(cwnd_, static_cast<double>(kUnitSize));
    } else if (rtt > 0 && CanDecrease(now_ns, srtt_ns)) {
      const double f = 1.0 - p_.beta * static_cast<double>(rtt - target) /
                                 static_cast<double>(rtt);
      cwnd_ *= std::max(f, 1.0 - p_.max_decrease);
      Decreased(now_ns);
    }
    Clamp();
  }

  // A chunk found lost by the loss detector (reordering ruled out). True
  // when the loss was congestive and the window went to its minimum.
  bool OnLoss(uint64_t now_ns) { return Loss(now_ns, false); }

  // A chunk's RTO expired (a loss too). True when the window went to its
  // minimum: a congestive loss, or the second RTO without an ACK between.
  bool OnRto(uint64_t now_ns) {
    ++rtos_without_ack_;
    return Loss(now_ns, rtos_without_ack_ >= 2);
  }

  // A spurious RTO's reaction undone (rto_undo.h): the window as it was
  // before, if larger.
  void Undo(uint64_t cwnd) {
    cwnd_ = std::max(cwnd_, static_cast<double>(cwnd));
    Clamp();
  }

  // Bytes; whole bytes of the window.
  [[nodiscard]] uint64_t cwnd() const { return static_cast<uint64_t>(cwnd_); }

  // The time after a transmission of `bytes` before the next while cwnd <
  // one unit, else 0 (the window clocks the data). 0 too while there is no
  // srtt. A zero-length transmission counts as one byte.
  [[nodiscard]] uint64_t PacingIntervalNs(uint64_t srtt_ns,
                                          uint64_t bytes) const {
    if (cwnd_ >= static_cast<double>(kUnitSize)) return 0;
    return static_cast<uint64_t>(static_cast<double>(srtt_ns) *
                                 static_cast<double>(std::max<uint64_t>(bytes, 1)) /
                                 cwnd_);
  }

  [[nodiscard]] const SwiftWindowParams& params() const { return p_; }

 private:
  bool CanDecrease(uint64_t now_ns, uint64_t srtt_ns) const {
    return !decreased_ || now_ns >= last_decrease_ns_ + srtt_ns;
  }
  void Decreased(uint64_t now_ns) {
    decreased_ = true;
    last_decrease_ns_ = now_ns;
  }
  bool Loss(uint64_t now_ns, bool two_rtos) {
    const bool delayed = newest_rtt_ && *newest_rtt_ >= newest_target_;
    if (!delayed && !two_rtos) return false;
    cwnd_ = static_cast<double>(p_.min_cwnd);
    Decreased(now_ns);  // a reset counts as this round trip's decrease
    return true;
  }
  void Clamp() {
    cwnd_ = std::clamp(cwnd_, static_cast<double>(p_.min_cwnd),
                       static_cast<double>(p_.max_cwnd));
  }

  SwiftWindowParams p_;
  double cwnd_;
  std::optional<uint64_t> newest_rtt_;
  uint64_t newest_target_ = 0;
  bool decreased_ = false;
  uint64_t last_decrease_ns_ = 0;
  uint32_t rtos_without_ack_ = 0;
};

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_SWIFT_WINDOW_H_
