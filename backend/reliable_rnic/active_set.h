// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ActiveSet: the slots of the framed connections that have work
// (docs/reliability.md §2.1, "Turns"). ProgressUc pumps only these, so a
// turn costs the connections with something to do now, not every framed
// QP of the daemon (an idle one cost every turn ~40 ns at 1 + 255 QPs,
// bench/micro/reliable_cost). A slot is added, due now, when something
// gives its connection work (Connection::Wake); a pump says when its
// connection is next due: now (next turn), at a time (it sleeps: only its
// timers are pending), or never (it leaves the set). The slots due now
// are a list in the order they became due; the sleepers a min-heap by due
// time (a wake moves one to the list at once and leaves its entry to be
// dropped later), so a turn costs the slots due by then and one
// comparison, however many sleep (eight busy QPs waiting for ACKs were walked and
// kept again at every turn: 5 in 100 of the layer's instructions). Fixed
// capacity (Resize, a control call): no allocation, no lock; a slot is in
// the set at most once.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_

#include <cstdint>
#include <span>
#include <vector>

namespace vrdma::reliable {

class ActiveSet {
 public:
  // A pump's answer: nothing pending, the slot leaves the set.
  static constexpr uint64_t kIdle = UINT64_MAX;

  // Control path: room for slots [0, slots), the set empty.
  void Resize(uint32_t slots) {
    in_.assign(slots, kOut);
    key_.assign(slots, 0);
    at_.assign(slots, kNoEntry);
    asleep_ = 0;
    list_.clear();
    list_.reserve(slots);
    taken_.clear();
    taken_.reserve(slots);
    heap_.clear();
    heap_.reserve(slots);
  }

  // Adds slot, due now (a sleeping slot is woken; a slot out of range is
  // ignored).
  void Add(uint32_t slot) { Keep(slot, 0); }
  // Adds slot, due at `at` or at once if it was due earlier: work that
  // only a timer will take up (an ACK that left nothing to send).
  void AddAt(uint32_t slot, uint64_t at) { Keep(slot, at); }

  bool contains(uint32_t slot) const {
    return slot < in_.size() && in_[slot] != kOut;
  }
  // When a slot in the set is due (0: now).
  uint64_t due(uint32_t slot) const {
    return in_[slot] == kAsleep ? key_[slot] : 0;
  }
  uint32_t size() const {
    return static_cast<uint32_t>(list_.size()) + asleep_;
  }

  // One turn at now (docs/reliability.md §2.1 "Turns"): pump(slot) -> when
  // it is next due, for every slot in the set due by now; a slot not due
  // stays as it is. With `sweep`, first every slot exists(slot) names (the
  // first `live` of them): one outside the set that pump finds with
  // anything pending is a missed wake (*missed_wakes, and added); one
  // asleep is pumped early by early(slot, &due), which says whether that
  // did anything: work a sleeper had before its time is a missed
  // deadline (*missed_deadlines). True when it pumped a slot (what the
  // pump posted is the lower RNIC's to carry at its next progress) or a
  // slot is due at once; the sleepers are next_due()'s: the data path may
  // sleep until then.
  template <typename Exists, typename Pump, typename Early>
  bool Turn(uint64_t now, bool sweep, uint32_t live, Exists exists, Pump pump,
            Early early, uint64_t* missed_wakes, uint64_t* missed_deadlines) {
    if (sweep) {
      uint32_t seen = 0;
      for (uint32_t slot = 0; slot < in_.size() && seen < live; ++slot) {
        if (!exists(slot)) continue;
        ++seen;
        if (in_[slot] == kOut) {
          const uint64_t d = pump(slot);
          if (d != kIdle) {
            ++*missed_wakes;
            Keep(slot, d);
          }
        } else if (in_[slot] == kAsleep && key_[slot] > now) {
          const uint64_t before = key_[slot];
          uint64_t d = kIdle;
          if (early(slot, &d)) ++*missed_deadlines;
          // Woken or brought forward meanwhile: as that left it; else as
          // the early pump said.
          if (in_[slot] == kAsleep && key_[slot] == before) {
            in_[slot] = kOut;
            --asleep_;
            if (d != kIdle) Keep(slot, d);
          }
        }
      }
    }
    // The sleepers due by now join this turn's list; a woken one's entry
    // (it was due at once meanwhile) is dropped.
    while (!heap_.empty() && key_[heap_[0]] <= now) {
      const uint32_t slot = heap_[0];
      PopHeap();
      if (in_[slot] != kAsleep) continue;
      --asleep_;
      in_[slot] = kDue;
      list_.push_back(slot);
    }
    bool pumped = false;
    for (uint32_t slot : Take()) {
      if (!exists(slot)) continue;
      pumped = true;
      const uint64_t d = pump(slot);
      if (d != kIdle) Keep(slot, d);
    }
    return pumped || !list_.empty();
  }

  // When the earliest sleeper is due (kIdle: none). A lower bound: a
  // woken sleeper's entry may still be first, which costs an early turn.
  uint64_t next_due() const {
    return asleep_ == 0 ? kIdle : key_[heap_[0]];
  }

  // The slots due now, in the order they became due; they leave the set,
  // so what the caller adds while it walks them is the next turn's (the
  // sleepers stay). Valid until the next Take.
  std::span<const uint32_t> Take() {
    taken_.swap(list_);
    list_.clear();
    for (uint32_t s : taken_) in_[s] = kOut;
    return taken_;
  }

 private:
  enum : uint8_t { kOut, kDue, kAsleep };
  static constexpr uint32_t kNoEntry = UINT32_MAX;

  // In the set, due at the earlier of `at` and what it had (0: now). A
  // wake leaves the sleeper's heap entry behind (dropped when it comes up,
  // or taken again if the slot sleeps first): O(1), as most wakes are.
  void Keep(uint32_t slot, uint64_t at) {
    if (slot >= in_.size() || in_[slot] == kDue) return;  // nothing earlier
    if (in_[slot] == kAsleep) {
      if (at >= key_[slot]) return;
      --asleep_;
    }
    if (at == 0) {
      in_[slot] = kDue;
      list_.push_back(slot);
      return;
    }
    in_[slot] = kAsleep;
    ++asleep_;
    const uint64_t old = key_[slot];
    key_[slot] = at;
    if (at_[slot] == kNoEntry) {
      at_[slot] = static_cast<uint32_t>(heap_.size());
      heap_.push_back(slot);
      SiftUp(at_[slot]);
    } else if (at < old) {
      SiftUp(at_[slot]);
    } else {
      SiftDown(at_[slot]);
    }
  }

  void PopHeap() {
    at_[heap_[0]] = kNoEntry;
    const uint32_t last = heap_.back();
    heap_.pop_back();
    if (heap_.empty()) return;
    heap_[0] = last;
    at_[last] = 0;
    SiftDown(0);
  }
  void SiftUp(uint32_t i) {
    const uint32_t slot = heap_[i];
    while (i > 0) {
      const uint32_t parent = (i - 1) / 2;
      if (key_[heap_[parent]] <= key_[slot]) break;
      Place(i, heap_[parent]);
      i = parent;
    }
    Place(i, slot);
  }
  void SiftDown(uint32_t i) {
    const uint32_t slot = heap_[i];
    const uint32_t n = static_cast<uint32_t>(heap_.size());
    for (;;) {
      uint32_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && key_[heap_[child + 1]] < key_[heap_[child]]) ++child;
      if (key_[slot] <= key_[heap_[child]]) break;
      Place(i, heap_[child]);
      i = child;
    }
    Place(i, slot);
  }
  void Place(uint32_t i, uint32_t slot) {
    heap_[i] = slot;
    at_[slot] = i;
  }

  std::vector<uint8_t> in_;     // kOut, kDue (in list_) or kAsleep
  std::vector<uint32_t> list_;  // due now
  std::vector<uint32_t> taken_;
  uint32_t asleep_ = 0;
  // A min-heap of slots by key_: each sleeper's due time, and the entries
  // that woken slots left (at most one per slot: at_ its index, kNoEntry).
  std::vector<uint32_t> heap_;
  std::vector<uint64_t> key_;
  std::vector<uint32_t> at_;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_
