// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// When the receiver of one direction of a virtual QP sends an ACK
// (docs/reliability.md §4.3, B §3.4.2): at once after an arrival when 32
// chunks or 64 data packets (max(1, ceil(bytes / path MTU)) per arrival)
// are unacknowledged, the arrival carries H, is out of order (not the next
// expected piece, or a duplicate), or brings a NAK or a message waiting for
// a guest receive; else when the oldest unacknowledged arrival is 32 us
// old (DeadlineNs for the caller's timer). "Next expected" follows the
// furthest piece seen: (mid, off + units), or (mid + 1, 0) after an L
// piece; MIDs compare modulo 2^32. The caller calls OnAckSent once its ACKs
// cover every pending arrival. Arrivals dropped unacknowledged (§3.6) are
// not passed here. Pure: times are parameters (ns), nothing allocated.
#ifndef VRDMA_POLICY_RELIABILITY_ACK_TRIGGER_H_
#define VRDMA_POLICY_RELIABILITY_ACK_TRIGGER_H_

#include <algorithm>
#include <cstdint>
#include <optional>

namespace vrdma::policy::reliability {

struct AckTriggerParams {
  uint32_t max_chunks = 32;    // chunks not yet acknowledged
  uint32_t max_packets = 64;   // data packets not yet acknowledged
  uint64_t timer_ns = 32'000;  // since the oldest unacknowledged arrival
};

// Which row of §4.3's table fired (the first that holds, in its order).
enum class AckReason : uint8_t {
  kNone,
  kChunks,
  kPackets,
  kHint,
  kOutOfOrder,
  kTimer,
  kNakOrWaiting,
};

// One chunk (WRITE_WITH_IMM) or SEND piece that the receiver accepted.
struct Arrival {
  uint32_t mid = 0;             // full MID
  uint32_t off_units = 0;       // its first unit
  uint32_t units = 0;           // units it covers (0: zero-length)
  uint64_t wire_bytes = 0;      // what the lower QP carried (its byte_len)
  bool last = false;            // L
  bool hint = false;            // H
  bool duplicate = false;       // nothing new in it (§3.4)
  bool nak_or_waiting = false;  // it made a NAK, or its message waits
};

class AckTrigger {
 public:
  // path_mtu: the data QP's path MTU in bytes; first_mid: the first MID
  // the peer sends (from CONNECT).
  AckTrigger(uint32_t path_mtu, uint32_t first_mid,
             const AckTriggerParams& params = {})
      : p_(params),
        mtu_(std::max<uint32_t>(path_mtu, 1)),
        expect_mid_(first_mid) {}

  [[nodiscard]] AckReason OnArrival(uint64_t now_ns, const Arrival& a) {
    if (chunks_ == 0) oldest_ns_ = now_ns;
    ++chunks_;
    packets_ += std::max<uint64_t>(1, (a.wire_bytes + mtu_ - 1) / mtu_);
    const bool in_order = Advance(a) && !a.duplicate;
    if (chunks_ >= p_.max_chunks) return AckReason::kChunks;
    if (packets_ >= p_.max_packets) return AckReason::kPackets;
    if (a.hint) return AckReason::kHint;
    if (!in_order) return AckReason::kOutOfOrder;
    if (TimerDue(now_ns)) return AckReason::kTimer;
    if (a.nak_or_waiting) return AckReason::kNakOrWaiting;
    return AckReason::kNone;
  }

  // The timer row, for the caller's timer at DeadlineNs.
  [[nodiscard]] AckReason OnTimer(uint64_t now_ns) const {
    return TimerDue(now_ns) ? AckReason::kTimer : AckReason::kNone;
  }
  // When the timer row will hold; nullopt with nothing pending.
  [[nodiscard]] std::optional<uint64_t> DeadlineNs() const {
    if (chunks_ == 0) return std::nullopt;
    return oldest_ns_ + p_.timer_ns;
  }

  // The ACKs sent cover every pending arrival.
  void OnAckSent() {
    chunks_ = 0;
    packets_ = 0;
  }

  [[nodiscard]] uint32_t pending_chunks() const { return chunks_; }
  [[nodiscard]] uint64_t pending_packets() const { return packets_; }

 private:
  bool TimerDue(uint64_t now_ns) const {
    return chunks_ > 0 && now_ns >= oldest_ns_ + p_.timer_ns;
  }
  // Whether a is the next expected piece; moves the expectation past it
  // when a is at or beyond it.
  bool Advance(const Arrival& a) {
    const int32_t d = static_cast<int32_t>(a.mid - expect_mid_);
    const bool at = d == 0 && a.off_units == expect_off_;
    const bool beyond = d > 0 || (d == 0 && a.off_units > expect_off_);
    if (at || beyond) {
      if (a.last) {
        expect_mid_ = a.mid + 1;
        expect_off_ = 0;
      } else {
        expect_mid_ = a.mid;
        expect_off_ = a.off_units + a.units;
      }
    }
    return at;
  }

  AckTriggerParams p_;
  uint32_t mtu_;
  uint32_t chunks_ = 0;
  uint64_t packets_ = 0;
  uint64_t oldest_ns_ = 0;
  uint32_t expect_mid_;
  uint32_t expect_off_ = 0;
};

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_ACK_TRIGGER_H_
