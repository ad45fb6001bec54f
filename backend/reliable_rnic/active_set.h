// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ActiveSet: the slots of the framed connections that have work
// (docs/reliability.md §2.1, "Turns"). ProgressUc pumps only these, so a
// turn costs the connections with something queued, in flight or timed,
// not every framed QP of the daemon (an idle one cost every turn ~40 ns
// at 1 + 255 QPs, bench/micro/reliable_cost). A slot is added when
// something gives its connection work (Connection::Wake) and by the
// pump that found it still busy; Take hands the turn its slots and
// empties the set. Fixed capacity (Resize, a control call): no
// allocation, no lock; a slot is in the set at most once.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_

#include <cstdint>
#include <span>
#include <vector>

namespace vrdma::reliable {

class ActiveSet {
 public:
  // Control path: room for slots [0, slots), the set empty.
  void Resize(uint32_t slots) {
    in_.assign(slots, 0);
    list_.clear();
    list_.reserve(slots);
    taken_.clear();
    taken_.reserve(slots);
  }

  // Adds slot (once; a slot out of range is ignored).
  void Add(uint32_t slot) {
    if (slot >= in_.size() || in_[slot] != 0) return;
    in_[slot] = 1;
    list_.push_back(slot);
  }

  bool contains(uint32_t slot) const {
    return slot < in_.size() && in_[slot] != 0;
  }
  uint32_t size() const { return static_cast<uint32_t>(list_.size()); }

  // One turn (docs/reliability.md §2.1 "Turns"): pump(slot) for every
  // slot in the set, which stays in it while pump says it has work. With
  // `sweep`, first every slot exists(slot) names (the first `live` of
  // them) that is not in the set: one found with work is a missed wake,
  // counted in *missed and added. True while any slot has work.
  template <typename Exists, typename Pump>
  bool Turn(bool sweep, uint32_t live, Exists exists, Pump pump,
            uint64_t* missed) {
    bool busy = false;
    if (sweep) {
      uint32_t seen = 0;
      for (uint32_t slot = 0; slot < in_.size() && seen < live; ++slot) {
        if (!exists(slot)) continue;
        ++seen;
        if (!contains(slot) && pump(slot)) {
          ++*missed;
          Add(slot);
          busy = true;
        }
      }
    }
    for (uint32_t slot : Take()) {
      if (exists(slot) && pump(slot)) {
        Add(slot);
        busy = true;
      }
    }
    return busy;
  }

  // The slots added since the last Take, in the order added; the set is
  // empty afterwards, so what the caller adds while it walks them is the
  // next turn's. Valid until the next Take.
  std::span<const uint32_t> Take() {
    taken_.swap(list_);
    list_.clear();
    for (uint32_t s : taken_) in_[s] = 0;
    return taken_;
  }

 private:
  std::vector<uint8_t> in_;
  std::vector<uint32_t> list_;
  std::vector<uint32_t> taken_;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_ACTIVE_SET_H_
