// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// On-NIC caches of the RNIC timing MODEL: QP contexts (QPC, keyed by QP),
// memory protection entries (MPT, keyed by MR), memory translation entries
// (MTT, keyed by (MR, line of 8 page entries)) and prefetched WQEs (keyed
// by QP). Each is a set-associative LRU cache of keys only (the model moves
// no data); a miss costs the PU a DMA read through the PCIe model
// (pcie.h). Deterministic: fixed hash, LRU by a per-cache access clock.
// Nothing allocates after Init.
//
// Also here: memory regions as model objects (MemoryRegion) and the state
// a host's NIC keeps for them (NicMemory: link, caches, statistics).
#ifndef VRDMA_BACKEND_RNIC_MODEL_NIC_CACHE_H_
#define VRDMA_BACKEND_RNIC_MODEL_NIC_CACHE_H_

#include <cstdint>
#include <vector>

#include "backend/rnic_model/params.h"
#include "backend/rnic_model/pcie.h"

namespace vrdma::model {

class SetAssocLru {
 public:
  // entries == 0: disabled (every access hits, nothing is stored).
  void Init(uint32_t entries, uint32_t ways);
  // True on a hit; on a miss the key replaces its set's least recently
  // used entry.
  bool Access(uint64_t key);
  // Removes every key for which pred(key) holds; returns how many.
  template <typename Pred>
  uint32_t InvalidateIf(Pred pred) {
    uint32_t n = 0;
    for (uint64_t& k : keys_) {
      if (k != kEmpty && pred(k)) {
        k = kEmpty;
        ++n;
      }
    }
    return n;
  }
  bool enabled() const { return !keys_.empty(); }
  uint32_t capacity() const { return static_cast<uint32_t>(keys_.size()); }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  uint32_t ways_ = 0;
  uint32_t set_bits_ = 0;
  uint64_t clock_ = 0;
  std::vector<uint64_t> keys_;    // sets x ways
  std::vector<uint64_t> stamps_;  // last access, per slot
};

// The card's context-miss handler: every QPC, MPT and MTT miss (TX and RX)
// is a fill through it, and at most `slots` fills are in flight per card; a
// further miss waits for the earliest slot to free. The PU that missed waits
// for its fill (it is not freed for other QPs), so once fills queue, one
// tenant's misses delay everyone's. Timing is computed at issue, as for the
// PCIe link: a fill takes the slot that frees first (first come, first
// served by issue). Nothing allocates after Init.
class ContextFillUnit {
 public:
  // slots == 0: unbounded (every miss starts at once).
  void Init(uint32_t slots) { free_at_.assign(slots, 0); }
  // A fill that could start at `ready`: when it starts (a slot is free).
  // The caller then gives the slot back with Done(done).
  Picos Start(Picos ready) {
    if (free_at_.empty()) return ready;
    slot_ = 0;
    for (uint32_t i = 1; i < free_at_.size(); ++i) {
      if (free_at_[i] < free_at_[slot_]) slot_ = i;
    }
    return free_at_[slot_] > ready ? free_at_[slot_] : ready;
  }
  // The fill that Start() placed holds its slot until `done`.
  void Done(Picos done) {
    if (!free_at_.empty()) free_at_[slot_] = done;
  }
  uint32_t slots() const { return static_cast<uint32_t>(free_at_.size()); }

 private:
  std::vector<Picos> free_at_;  // per slot: busy until
  uint32_t slot_ = 0;
};

struct CacheCounter {
  uint64_t hits = 0;
  uint64_t misses = 0;
  double miss_rate() const {
    const uint64_t n = hits + misses;
    return n == 0 ? 0.0 : static_cast<double>(misses) / static_cast<double>(n);
  }
  void Count(bool hit) { hit ? ++hits : ++misses; }
};
// SwiftRDMA's signals (§3.2): hits and misses per cache.
struct NicCacheStats {
  CacheCounter qpc, mpt, mtt, wqe;
  uint64_t invalidations = 0;    // entries dropped by MR deregistration
  uint64_t mr_commands = 0;      // MR registrations + deregistrations
  Picos stall_ps = 0;            // PU time spent waiting for cache fills
  uint64_t fills = 0;            // context fills (QPC/MPT/MTT misses)
  Picos fill_wait_ps = 0;        // of which waiting for a free fill slot
  // All lookups of the context caches together (QPC + MPT + MTT).
  CacheCounter contexts() const {
    return CacheCounter{qpc.hits + mpt.hits + mtt.hits, qpc.misses + mpt.misses + mtt.misses};
  }
};

using MrId = uint32_t;
inline constexpr MrId kNoMr = 0;   // the always-hot region of existing callers

struct MemoryRegion {
  uint32_t host = 0;
  uint64_t bytes = 0;
  uint32_t page_shift = 12;
  bool live = false;
};

// What one host's NIC keeps beside its send engine and receive side.
struct NicMemory {
  PcieLink pcie;
  SetAssocLru qpc, mpt, mtt, wqe;
  ContextFillUnit fills;
  NicCacheStats stats;
  std::vector<Picos> pu_busy_until;  // per TX PU: stalled on a translation
  Picos link_wake_at = 0;            // the link sleeps until a payload DMA
  Picos command_free = 0;            // firmware command interface
  uint32_t mtt_line_shift = 3;       // log2(MTT entries per cache line)

  void Init(const NicParams& p);
  // MTT cache key of the line holding page `page` of MR `mr`.
  static uint64_t MttKey(MrId mr, uint64_t line) { return uint64_t{mr} << 36 | line; }
};

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_NIC_CACHE_H_
