// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A hashed timing wheel (Varghese & Lauck, scheme 6) for the scheduler
// stage's release times and the policy's timer. Entries are embedded in
// their owners (a flow, the stage), so arming, re-arming and cancelling
// never allocate and cost O(1). An entry lives in slot
// (expiry / granularity) % kSlots and fires when Advance passes that slot
// in the revolution of its expiry; Advance visits at most kSlots slots, so
// a long idle gap costs one revolution, not the gap.
//
// Entries fire at Advance(now) for expiry <= now, i.e. up to the caller's
// polling interval late, never early. The earliest expiry is cached, so
// the data path asks for it cheaply after every turn.
#ifndef VRDMA_BACKEND_SCHEDULER_TIMER_WHEEL_H_
#define VRDMA_BACKEND_SCHEDULER_TIMER_WHEEL_H_

#include <array>
#include <cstdint>

#include "backend/base/intrusive_list.h"

namespace vrdma::sched {

using Nanos = uint64_t;  // == policy::Nanos
inline constexpr Nanos kNoExpiry = UINT64_MAX;

class TimerWheel {
 public:
  static constexpr uint32_t kSlots = 512;

  struct Entry {
    Nanos expiry = kNoExpiry;
    uint32_t slot = 0;  // the slot list holding it while armed
    bool due = false;   // on the due list of a running Advance
    ListHook<Entry> hook;
  };

  explicit TimerWheel(Nanos granularity_ns = 256) : granularity_(granularity_ns) {}
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  // Arms (or moves) e to fire at expiry. An expiry at or before an instant
  // already advanced to fires at the first later instant, which NextExpiry
  // then reports.
  void Arm(Entry* e, Nanos expiry);
  void Cancel(Entry* e);
  static bool armed(const Entry* e) { return e->hook.linked && !e->due; }

  // Fires (calls fn(Entry*) for) every entry with expiry <= now. fn may arm
  // or cancel any entry, including the one it was called for.
  template <typename Fn>
  void Advance(Nanos now, Fn&& fn) {
    CollectDue(now);
    while (Entry* e = due_.PopFront()) {
      e->due = false;
      fn(e);
    }
  }

  // The earliest expiry armed, kNoExpiry when none.
  Nanos NextExpiry() const;
  uint32_t size() const { return size_; }

 private:
  using Slot = IntrusiveList<Entry, &Entry::hook>;
  uint32_t SlotOf(Nanos t) const {
    return static_cast<uint32_t>((t / granularity_) % kSlots);
  }
  void CollectDue(Nanos now);

  Nanos granularity_;
  Nanos cursor_ = 0;  // every entry with expiry < cursor_ has fired
  std::array<Slot, kSlots> slots_{};
  Slot due_;
  uint32_t size_ = 0;
  mutable Nanos earliest_ = kNoExpiry;
  mutable bool earliest_valid_ = true;
};

}  // namespace vrdma::sched

#endif  // VRDMA_BACKEND_SCHEDULER_TIMER_WHEEL_H_
