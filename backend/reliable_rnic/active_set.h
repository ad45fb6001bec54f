// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ActiveSet: the slots of the framed connections that have work
// (docs/reliability.md §2.1, "Turns"). ProgressUc pumps only these, so a
// turn costs the connections with something to do now, not every framed
// QP of the daemon (an idle one cost every turn ~40 ns at 1 + 255 QPs,
// bench/micro/reliable_cost). A slot is added, due now, when something
// gives its connection work (Connection::Wake); a pump says when its
// connection is next due: now (next turn), at a time (it sleeps: only its
// timers are pending, and a turn before then costs it one comparison), or
// never (it leaves the set). Fixed capacity (Resize, a control call): no
// allocation, no lock; a slot is in the set at most once.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_

#include <algorithm>
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
    in_.assign(slots, 0);
    due_.assign(slots, 0);
    list_.clear();
    list_.reserve(slots);
    taken_.clear();
    taken_.reserve(slots);
  }

  // Adds slot, due now (a sleeping slot is woken; a slot out of range is
  // ignored).
  void Add(uint32_t slot) { Keep(slot, 0); }
  // Adds slot, due at `at` or at once if it was due earlier: work that
  // only a timer will take up (an ACK that left nothing to send).
  void AddAt(uint32_t slot, uint64_t at) { Keep(slot, at); }

  bool contains(uint32_t slot) const {
    return slot < in_.size() && in_[slot] != 0;
  }
  // When a slot in the set is due (0: now).
  uint64_t due(uint32_t slot) const { return due_[slot]; }
  uint32_t size() const { return static_cast<uint32_t>(list_.size()); }

  // One turn at now (docs/reliability.md §2.1 "Turns"): pump(slot) -> when
  // it is next due, for every slot in the set due by now; a slot not due
  // stays as it is. With `sweep`, first every slot exists(slot) names (the
  // first `live` of them): one outside the set that pump finds with
  // anything pending is a missed wake (*missed_wakes, and added); one
  // asleep is pumped early by early(slot, &due), which says whether that
  // did anything: work a sleeper had before its time is a missed
  // deadline (*missed_deadlines). True while the set is not empty.
  template <typename Exists, typename Pump, typename Early>
  bool Turn(uint64_t now, bool sweep, uint32_t live, Exists exists, Pump pump,
            Early early, uint64_t* missed_wakes, uint64_t* missed_deadlines) {
    if (sweep) {
      uint32_t seen = 0;
      for (uint32_t slot = 0; slot < in_.size() && seen < live; ++slot) {
        if (!exists(slot)) continue;
        ++seen;
        if (!contains(slot)) {
          const uint64_t d = pump(slot);
          if (d != kIdle) {
            ++*missed_wakes;
            Keep(slot, d);
          }
        } else if (due_[slot] > now) {
          const uint64_t before = due_[slot];
          uint64_t d = kIdle;
          if (early(slot, &d)) ++*missed_deadlines;
          // Woken meanwhile (Add): due now; else as the early pump said.
          if (due_[slot] == before) due_[slot] = d;
        }
      }
    }
    for (uint32_t slot : Take()) {
      if (!exists(slot)) continue;
      const uint64_t d = due_[slot] > now ? due_[slot] : pump(slot);
      if (d != kIdle) Keep(slot, d);
    }
    return !list_.empty();
  }

  // The slots in the set, in the order added; the set is empty afterwards,
  // so what the caller adds while it walks them is the next turn's. Valid
  // until the next Take.
  std::span<const uint32_t> Take() {
    taken_.swap(list_);
    list_.clear();
    for (uint32_t s : taken_) in_[s] = 0;
    return taken_;
  }

 private:
  // In the set, due at the earlier of `at` and what it had.
  void Keep(uint32_t slot, uint64_t at) {
    if (slot >= in_.size()) return;
    if (in_[slot] != 0) {
      due_[slot] = std::min(due_[slot], at);
      return;
    }
    in_[slot] = 1;
    due_[slot] = at;
    list_.push_back(slot);
  }

  std::vector<uint8_t> in_;
  std::vector<uint64_t> due_;  // of a slot in the set
  std::vector<uint32_t> list_;
  std::vector<uint32_t> taken_;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_
