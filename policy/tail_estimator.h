// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A sliding-window tail estimator for Justitia's reference flows (NSDI'22
// §4.3.2: the 99th percentile over the most recent RefCount = 10,000 round
// trips). The window is a fixed ring of samples; a log-scale histogram
// (32 bins per octave, about 3% resolution; exact below 32 ns) is kept in
// step with it, so adding a sample is O(1), an old sample leaving the window
// is O(1), and a quantile walks the histogram down from its highest
// non-empty bin (a tail quantile touches a few bins). Storage is sized once
// (Reset, a control event); Add and Quantile never allocate.
#ifndef VRDMA_POLICY_TAIL_ESTIMATOR_H_
#define VRDMA_POLICY_TAIL_ESTIMATOR_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace vrdma::policy {

class TailEstimator {
 public:
  static constexpr uint32_t kSubBits = 5;                 // 32 bins per octave
  static constexpr uint32_t kSub = 1u << kSubBits;
  static constexpr uint32_t kBins = kSub + (32 - kSubBits) * kSub;

  // Allocates the window (control path). Forgets every sample.
  void Reset(uint32_t window) {
    samples_.assign(std::max<uint32_t>(window, 1), 0);
    bins_.fill(0);
    head_ = 0;
    count_ = 0;
    top_ = 0;
  }
  // Forgets every sample, keeping the storage (no allocation).
  void Clear() {
    bins_.fill(0);
    head_ = 0;
    count_ = 0;
    top_ = 0;
  }
  [[nodiscard]] bool ready() const { return !samples_.empty(); }
  [[nodiscard]] uint32_t count() const { return count_; }
  [[nodiscard]] uint32_t window() const {
    return static_cast<uint32_t>(samples_.size());
  }

  // One sample (ns); the oldest leaves once the window is full.
  void Add(uint64_t value) {
    if (samples_.empty()) return;
    const uint32_t v = static_cast<uint32_t>(std::min<uint64_t>(value, UINT32_MAX));
    const uint32_t cap = window();
    if (count_ == cap) {
      const uint32_t old = Bin(samples_[head_]);
      --bins_[old];
      if (old == top_) {
        while (top_ > 0 && bins_[top_] == 0) --top_;
      }
    } else {
      ++count_;
    }
    samples_[head_] = v;
    head_ = head_ + 1 == cap ? 0 : head_ + 1;
    const uint32_t b = Bin(v);
    ++bins_[b];
    top_ = std::max(top_, b);
  }

  // The q-quantile (0 < q <= 1) of the window: the value of rank
  // ceil(q * count), to the bin's resolution (its midpoint). 0 when empty.
  [[nodiscard]] uint64_t Quantile(double q) const {
    if (count_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(std::ceil(q * count_));
    rank = std::clamp<uint64_t>(rank, 1, count_);
    const uint64_t above = count_ - rank;  // samples ranked above it
    uint64_t seen = 0;
    for (uint32_t b = top_ + 1; b-- > 0;) {
      seen += bins_[b];
      if (seen > above) return Representative(b);
    }
    return Representative(0);
  }

  // Bin of a value: exact below kSub, then kSub bins per octave.
  [[nodiscard]] static uint32_t Bin(uint32_t v) {
    if (v < kSub) return v;
    const uint32_t e = 31 - static_cast<uint32_t>(std::countl_zero(v));  // >= kSubBits
    const uint32_t shift = e - kSubBits;
    return kSub + shift * kSub + ((v >> shift) & (kSub - 1));
  }
  [[nodiscard]] static uint64_t Representative(uint32_t b) {
    if (b < kSub) return b;
    const uint32_t shift = (b - kSub) / kSub;
    const uint64_t lower = static_cast<uint64_t>(kSub + (b - kSub) % kSub) << shift;
    return lower + ((uint64_t{1} << shift) >> 1);
  }

 private:
  std::vector<uint32_t> samples_;  // the ring (RefCount)
  std::array<uint32_t, kBins> bins_{};
  uint32_t head_ = 0;   // next slot to write (the oldest once full)
  uint32_t count_ = 0;
  uint32_t top_ = 0;    // highest bin that may be non-empty
};

}  // namespace vrdma::policy

#endif  // VRDMA_POLICY_TAIL_ESTIMATOR_H_
