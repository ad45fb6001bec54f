// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A fixed-capacity map from a 32-bit key to a 32-bit value: open addressing,
// linear probing, backward-shift deletion (no tombstones, so lookups stay
// short after churn). Used for the per-VM lookups by RNIC-chosen numbers:
// qpn -> QP handle and lkey -> MR handle. Memory is allocated once; lookups
// on the data path never allocate.
#ifndef VRDMA_BACKEND_ENGINE_KEY_MAP_H_
#define VRDMA_BACKEND_ENGINE_KEY_MAP_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace vrdma::engine {

class KeyMap {
 public:
  // Holds up to max_entries keys; the table is at most half full.
  explicit KeyMap(uint32_t max_entries) : max_entries_(max_entries) {
    uint32_t n = 8;
    while (n < 2ull * max_entries) n <<= 1;
    slots_.resize(n);
    mask_ = n - 1;
  }

  uint32_t size() const { return size_; }

  // false when full or when key is already present.
  bool Insert(uint32_t key, uint32_t value) {
    if (size_ >= max_entries_) return false;
    for (uint32_t i = Hash(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s = {key, value, true};
        ++size_;
        return true;
      }
      if (s.key == key) return false;
    }
  }

  std::optional<uint32_t> Find(uint32_t key) const {
    for (uint32_t i = Hash(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return std::nullopt;
      if (s.key == key) return s.value;
    }
  }

  bool Erase(uint32_t key) {
    uint32_t i = Hash(key);
    for (;; i = (i + 1) & mask_) {
      if (!slots_[i].used) return false;
      if (slots_[i].key == key) break;
    }
    // Backward shift: move later members of the probe run into the hole.
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      uint32_t home = Hash(slots_[j].key);
      // j may move to hole when home is not in (hole, j] cyclically.
      bool in_range =
          hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!in_range) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }

 private:
  struct Slot {
    uint32_t key = 0;
    uint32_t value = 0;
    bool used = false;
  };
  uint32_t Hash(uint32_t key) const {
    // Fibonacci hashing: RNIC keys are often sequential.
    return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }

  std::vector<Slot> slots_;
  uint32_t mask_ = 0;
  uint32_t size_ = 0;
  uint32_t max_entries_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_KEY_MAP_H_
