// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// UnitRanges: the units of one message received so far, as at most
// kMaxRanges sorted, disjoint, non-touching ranges (docs/reliability.md
// §4.2). The receiver keeps one per message record; the requester of a
// READ one per READ in flight (its READ_RESP units, step 13). A unit that
// would need one range more is refused (the caller drops it unacknowledged
// as rx_ranges_full: it is sent again once the holes before it are filled).
// Fixed size, no allocation.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_UNIT_RANGES_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_UNIT_RANGES_H_

#include <algorithm>
#include <array>
#include <cstdint>

namespace vrdma::reliable {

struct UnitRange {
  uint32_t begin = 0, end = 0;  // units [begin, end)
};

class UnitRanges {
 public:
  static constexpr uint32_t kMaxRanges = 16;

  void Clear() { n_ = 0; }
  uint32_t size() const { return n_; }
  const UnitRange& operator[](uint32_t i) const { return r_[i]; }  // i < size()

  // True when every unit of u was received already.
  bool Covered(UnitRange u) const {
    for (uint32_t i = 0; i < n_; ++i) {
      if (r_[i].begin <= u.begin && u.end <= r_[i].end) return true;
    }
    return false;
  }
  // True when the units received are exactly [0, units).
  bool Exactly(uint32_t units) const {
    return n_ == 1 && r_[0].begin == 0 && r_[0].end == units;
  }
  // Inserts u, merging it with every range it overlaps or touches; false
  // (nothing changed) when that would need more than max_ranges ranges.
  bool Insert(UnitRange u, uint32_t max_ranges = kMaxRanges) {
    // In order (the common case): u starts in or at the end of the last
    // range, which the ranges before it do not touch.
    if (n_ > 0 && u.begin >= r_[n_ - 1].begin && u.begin <= r_[n_ - 1].end) {
      r_[n_ - 1].end = std::max(r_[n_ - 1].end, u.end);
      return true;
    }
    if (n_ == 0 && max_ranges > 0) {
      r_[0] = u;
      n_ = 1;
      return true;
    }
    std::array<UnitRange, kMaxRanges + 1> out;
    uint32_t n = 0;
    bool placed = false;
    for (uint32_t i = 0; i < n_; ++i) {
      const UnitRange& x = r_[i];
      if (x.end < u.begin) {
        out[n++] = x;
      } else if (u.end < x.begin) {
        if (!placed) {
          out[n++] = u;
          placed = true;
        }
        out[n++] = x;
      } else {
        u.begin = std::min(u.begin, x.begin);
        u.end = std::max(u.end, x.end);
      }
    }
    if (!placed) out[n++] = u;
    if (n > std::min(max_ranges, kMaxRanges)) return false;
    std::copy_n(out.begin(), n, r_.begin());
    n_ = n;
    return true;
  }

 private:
  uint32_t n_ = 0;
  std::array<UnitRange, kMaxRanges> r_{};
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_UNIT_RANGES_H_
