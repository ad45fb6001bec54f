// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The round-trip estimate of one direction of a virtual QP
// (docs/reliability.md §4.4, §4.5). RttSampleNs turns the times of one
// transmission and its ACK into a sample (B §3.4.3, Eq. 1), refusing a
// peer's hold time longer than the measured round trip (§3.6,
// `ack_bad_sample`). RttEstimator keeps srtt and rttvar as RFC 6298 (gains
// 1/8 and 1/4, first sample: srtt = R, rttvar = R / 2), the newest sample,
// and base_rtt, the least sample of the last `base_rtt_window_ns` (10 s),
// kept in kBaseRttBuckets fixed buckets, so it is the least of the last
// 9 to 10 s. Pure: times are parameters (ns), nothing allocated.
#ifndef VRDMA_POLICY_RELIABILITY_RTT_ESTIMATOR_H_
#define VRDMA_POLICY_RELIABILITY_RTT_ESTIMATOR_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

namespace vrdma::policy::reliability {

struct RttEstimatorParams {
  uint64_t base_rtt_window_ns = 10'000'000'000;  // §4.5: the last 10 s
};

// RTT = (T4 - T1) - hold (§4.4). t1_ns: the sender's clock at the post of
// the transmission; t4_ns: at the poll of its ACK; hold_ns: the receiver's
// T3' - T2 from the ACK. nullopt when the peer's hold exceeds the measured
// round trip (or the clock went back): no sample is taken.
[[nodiscard]] inline std::optional<uint64_t> RttSampleNs(uint64_t t1_ns,
                                                         uint64_t t4_ns,
                                                         uint64_t hold_ns) {
  if (t4_ns < t1_ns || hold_ns > t4_ns - t1_ns) return std::nullopt;
  return t4_ns - t1_ns - hold_ns;
}

class RttEstimator {
 public:
  static constexpr uint32_t kBaseRttBuckets = 10;

  explicit RttEstimator(const RttEstimatorParams& params = {})
      : bucket_ns_(std::max<uint64_t>(
            params.base_rtt_window_ns / kBaseRttBuckets, 1)) {}

  // One sample (ns) taken at now_ns.
  void AddSample(uint64_t now_ns, uint64_t rtt_ns) {
    if (!has_sample_) {
      srtt_x8_ = rtt_ns * 8;
      rttvar_x4_ = rtt_ns * 2;  // rttvar = R / 2
      has_sample_ = true;
    } else {
      // RFC 6298 §2.3: rttvar first, with the old srtt.
      const uint64_t s = srtt();
      const uint64_t err = rtt_ns > s ? rtt_ns - s : s - rtt_ns;
      rttvar_x4_ = rttvar_x4_ - rttvar_x4_ / 4 + err;
      srtt_x8_ = srtt_x8_ - srtt_x8_ / 8 + rtt_ns;
    }
    latest_ = rtt_ns;
    const uint64_t epoch = EpochOf(now_ns);
    Bucket& b = buckets_[epoch % kBaseRttBuckets];
    if (!b.used || b.epoch != epoch) {
      b = Bucket{epoch, rtt_ns, true};
    } else {
      b.min_ns = std::min(b.min_ns, rtt_ns);
    }
    // The window's least as base_rtt left it: this sample is in it.
    if (least_state_ == LeastState::kLeast) {
      least_ = std::min(least_, rtt_ns);
    } else if (least_state_ == LeastState::kNone) {
      least_ = rtt_ns;  // now the window's one bucket
      least_state_ = LeastState::kLeast;
    }
  }

  [[nodiscard]] bool has_sample() const { return has_sample_; }
  // 0 before the first sample.
  [[nodiscard]] uint64_t srtt() const { return srtt_x8_ / 8; }
  [[nodiscard]] uint64_t rttvar() const { return rttvar_x4_ / 4; }
  [[nodiscard]] uint64_t latest() const { return latest_; }

  // The least sample of the buckets within the window ending at now_ns;
  // the newest sample when none is that recent; 0 before the first.
  // Computed once per bucket period and kept up to date by AddSample (the
  // data path asks at every turn; a 64-bit division and ten buckets each
  // time showed in its profile).
  [[nodiscard]] uint64_t base_rtt(uint64_t now_ns) const {
    const uint64_t epoch = EpochOf(now_ns);
    if (least_state_ == LeastState::kLeast) return least_;
    if (least_state_ == LeastState::kNone) return latest_;
    std::optional<uint64_t> least;
    for (const Bucket& b : buckets_) {
      if (!b.used || b.epoch > epoch || epoch - b.epoch >= kBaseRttBuckets) {
        continue;
      }
      least = std::min(least.value_or(b.min_ns), b.min_ns);
    }
    least_state_ = least ? LeastState::kLeast : LeastState::kNone;
    least_ = least.value_or(0);
    return least.value_or(latest_);
  }

 private:
  // kUnknown: to be computed for epoch_; kNone: no bucket in the window
  // ending at epoch_; kLeast: least_ is the window's least sample.
  enum class LeastState : uint8_t { kUnknown, kNone, kLeast };

  // now_ns's bucket period, divided only when now_ns leaves the last one;
  // a new period (or a clock that went back) forgets the cached least.
  uint64_t EpochOf(uint64_t now_ns) const {
    if (now_ns - epoch_start_ns_ >= bucket_ns_) {  // unsigned: also before
      epoch_ = now_ns / bucket_ns_;
      epoch_start_ns_ = epoch_ * bucket_ns_;
      least_state_ = LeastState::kUnknown;
    }
    return epoch_;
  }

  struct Bucket {
    uint64_t epoch = 0;
    uint64_t min_ns = 0;
    bool used = false;
  };

  // What every sample and base_rtt read use, in one cache line; the
  // buckets (a sample touches one) after it.
  uint64_t bucket_ns_;
  uint64_t srtt_x8_ = 0;    // srtt in 1/8 ns
  uint64_t rttvar_x4_ = 0;  // rttvar in 1/4 ns
  uint64_t latest_ = 0;
  // The cache of base_rtt (mutable: a const query memoizes it).
  mutable uint64_t epoch_ = 0;
  mutable uint64_t epoch_start_ns_ = 0;
  mutable uint64_t least_ = 0;
  mutable LeastState least_state_ = LeastState::kUnknown;
  bool has_sample_ = false;
  std::array<Bucket, kBaseRttBuckets> buckets_{};
};

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_RTT_ESTIMATOR_H_
