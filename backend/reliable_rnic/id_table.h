// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// IdTable<T>: the layer's record of each lower object it must find again
// (docs/reliability.md §2.1), keyed by the lower RNIC's id, which the
// layer hands to the engine unchanged. Fixed capacity, chosen at
// construction: Insert and Erase never allocate.
//
// Threads: one writer at a time (Insert, Erase: the control calls, which
// rnic.h never runs two at once) and any number of readers (Find: the data
// calls, on the data-path thread, beside the writer when the lower RNIC's
// control_beside_data_path() is true). No lock: the index is open
// addressing over 64-bit atomic entries (id << 32 | slot + 1), written with
// release and read with acquire, so a reader sees a record whole once it
// sees its entry. Erase leaves a tombstone, which a reader passes over,
// then empties every tombstone of that run (the entries between two empty
// ones) that no live key's probe path crosses (no live key lies after it
// in the run with its home at or before it): no live entry ever moves and
// no entry on a live key's path empties, so a reader looking for a live
// key finds it whatever the writer does meanwhile. rnic.h's rule that an
// object is neither created nor destroyed while the data path reaches it
// covers the record itself.
//
// Cost: a live key lies where its Insert found the first entry that was
// not live (tombstones are reused), in an index at most half live, so a
// hit takes a few probes; a miss ends at the end of its run, which only
// live keys' paths keep long. Erase walks the run it erased in.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_ID_TABLE_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_ID_TABLE_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace vrdma::reliable {

template <typename T>
class IdTable {
 public:
  static constexpr uint64_t kNotFound = ~uint64_t{0};

  // Room for capacity records; the index has at least twice as many
  // entries (a power of two), so a probe ends at an empty one soon.
  explicit IdTable(uint32_t capacity)
      : records_(capacity),
        index_size_(std::bit_ceil(std::max<uint64_t>(2ull * capacity, 8))),
        index_(std::make_unique<std::atomic<uint64_t>[]>(index_size_)) {
    free_.reserve(capacity);
    for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
    for (uint64_t i = 0; i < index_size_; ++i)
      index_[i].store(kEmpty, std::memory_order_relaxed);
  }
  IdTable(const IdTable&) = delete;
  IdTable& operator=(const IdTable&) = delete;

  uint32_t capacity() const { return static_cast<uint32_t>(records_.size()); }
  uint32_t live() const {
    return capacity() - static_cast<uint32_t>(free_.size());
  }

  // Writer. The record of id, holding value; nullptr (value dropped) when
  // the table is full or id is there already.
  T* Insert(uint32_t id, T value) {
    if (free_.empty() || Find(id) != nullptr) return nullptr;
    const uint32_t slot = free_.back();
    free_.pop_back();
    records_[slot] = std::move(value);
    for (uint64_t i = Home(id);; i = (i + 1) & Mask()) {
      const uint64_t e = index_[i].load(std::memory_order_relaxed);
      if (e == kEmpty || e == kTombstone) {
        index_[i].store(Entry(id, slot), std::memory_order_release);
        return &records_[slot];
      }
    }
  }

  // Writer. False when id is not there. The record is reset (T{}) after
  // it left the index: what it owns is freed here unless moved out before.
  bool Erase(uint32_t id) {
    const uint64_t i = Locate(id);
    if (i == kNotFound) return false;
    const uint32_t slot = Slot(index_[i].load(std::memory_order_relaxed));
    index_[i].store(kTombstone, std::memory_order_release);
    records_[slot] = T{};
    free_.push_back(slot);
    SweepRun(i);
    return true;
  }

  // Any thread. The record of id, or nullptr.
  T* Find(uint32_t id) {
    const uint64_t i = Locate(id);
    return i == kNotFound
               ? nullptr
               : &records_[Slot(index_[i].load(std::memory_order_acquire))];
  }
  const T* Find(uint32_t id) const {
    return const_cast<IdTable*>(this)->Find(id);
  }

  // Writer's thread (a control call): f(id, record) for every live record.
  template <typename F>
  void ForEach(F&& f) {
    for (uint64_t i = 0; i < index_size_; ++i) {
      const uint64_t e = index_[i].load(std::memory_order_relaxed);
      if (e != kEmpty && e != kTombstone) f(records_[Slot(e)]);
    }
  }
  template <typename F>
  void ForEach(F&& f) const {
    for (uint64_t i = 0; i < index_size_; ++i) {
      const uint64_t e = index_[i].load(std::memory_order_relaxed);
      if (e != kEmpty && e != kTombstone) f(records_[Slot(e)]);
    }
  }

  // Tests: the index's size, its tombstones, and how many entries past its
  // home a live id lies (0: at its home; kNotFound: not there).
  uint64_t index_size() const { return index_size_; }
  uint64_t Distance(uint32_t id) const {
    const uint64_t i = Locate(id);
    return i == kNotFound ? kNotFound : (i - Home(id)) & Mask();
  }
  uint64_t tombstones() const {
    uint64_t n = 0;
    for (uint64_t i = 0; i < index_size_; ++i)
      n += index_[i].load() == kTombstone;
    return n;
  }

 private:
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTombstone = ~uint64_t{0};

  static uint64_t Entry(uint32_t id, uint32_t slot) {
    return uint64_t{id} << 32 | (uint64_t{slot} + 1);
  }
  static uint32_t Slot(uint64_t entry) {
    return static_cast<uint32_t>(entry) - 1;
  }
  uint64_t Mask() const { return index_size_ - 1; }
  uint64_t Home(uint32_t id) const {
    // Fibonacci hashing: lower ids are often small and consecutive.
    return (uint64_t{id} * 0x9e3779b97f4a7c15ull >> 32) & Mask();
  }
  // Writer. Empties the tombstones of the run around entry i that no live
  // key's probe path crosses.
  void SweepRun(uint64_t i) {
    const auto at = [&](uint64_t j) {
      return index_[j & Mask()].load(std::memory_order_relaxed);
    };
    uint64_t end = i;  // the run's first empty entry after i
    while (at(end) != kEmpty) {
      if (++end - i == index_size_) return;  // no empty entry: leave it
    }
    uint64_t start = i;  // its first entry
    while (at(start - 1) != kEmpty) --start;
    // From the end back: the least home (as an offset into the run) of the
    // live keys after the entry at hand.
    uint64_t least_home = ~uint64_t{0};
    for (uint64_t j = end; j-- != start;) {
      const uint64_t e = at(j);
      if (e == kTombstone) {
        if (least_home > j - start) {
          index_[j & Mask()].store(kEmpty, std::memory_order_release);
        }
      } else {
        const uint64_t home =
            (Home(static_cast<uint32_t>(e >> 32)) - start) & Mask();
        least_home = std::min(least_home, home);
      }
    }
  }

  uint64_t Locate(uint32_t id) const {
    uint64_t i = Home(id);
    for (uint64_t n = 0; n < index_size_; ++n, i = (i + 1) & Mask()) {
      const uint64_t e = index_[i].load(std::memory_order_acquire);
      if (e == kEmpty) return kNotFound;
      if (e != kTombstone && static_cast<uint32_t>(e >> 32) == id) return i;
    }
    return kNotFound;
  }

  std::vector<T> records_;
  std::vector<uint32_t> free_;  // writer only
  const uint64_t index_size_;
  std::unique_ptr<std::atomic<uint64_t>[]> index_;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_ID_TABLE_H_
