// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/scheduler/timer_wheel.h"

#include <algorithm>

namespace vrdma::sched {

void TimerWheel::Arm(Entry* e, Nanos expiry) {
  Cancel(e);
  // An instant already served (before cursor_) cannot fire any more: the
  // entry is due at the first one not yet served, and NextExpiry says so
  // (an owner that sleeps until NextExpiry and advances to it must find
  // the entry due, or virtual time stops).
  expiry = std::max(expiry, cursor_);
  e->expiry = expiry;
  e->slot = SlotOf(expiry);
  slots_[e->slot].PushBack(e);
  if (size_++ == 0) {
    earliest_ = expiry;
    earliest_valid_ = true;
  } else if (earliest_valid_) {
    earliest_ = std::min(earliest_, expiry);
  }
}

void TimerWheel::Cancel(Entry* e) {
  if (!e->hook.linked) return;
  if (e->due) {  // collected by a running Advance, not yet fired: drop it
    due_.Remove(e);
    e->due = false;
    return;
  }
  slots_[e->slot].Remove(e);
  --size_;
  if (earliest_valid_ && e->expiry == earliest_) earliest_valid_ = false;
  if (size_ == 0) {
    earliest_ = kNoExpiry;
    earliest_valid_ = true;
  }
}

void TimerWheel::CollectDue(Nanos now) {
  if (now < cursor_ || size_ == 0) {
    cursor_ = std::max(cursor_, now == kNoExpiry ? now : now + 1);
    return;
  }
  const Nanos from_tick = cursor_ / granularity_;
  const Nanos to_tick = now / granularity_;
  const Nanos ticks = std::min<Nanos>(to_tick - from_tick + 1, kSlots);
  for (Nanos i = 0; i < ticks; ++i) {
    Slot& s = slots_[(from_tick + i) % kSlots];
    for (Entry* e = s.front(); e != nullptr;) {
      Entry* next = Slot::next(e);
      if (e->expiry <= now) {
        s.Remove(e);
        --size_;
        if (earliest_valid_ && e->expiry == earliest_) earliest_valid_ = false;
        e->due = true;
        due_.PushBack(e);
      }
      e = next;
    }
  }
  cursor_ = now + 1;
  if (size_ == 0) {
    earliest_ = kNoExpiry;
    earliest_valid_ = true;
  }
}

Nanos TimerWheel::NextExpiry() const {
  if (size_ == 0) return kNoExpiry;
  if (!earliest_valid_) {
    Nanos best = kNoExpiry;
    for (const Slot& s : slots_) {
      for (Entry* e = s.front(); e != nullptr; e = Slot::next(e)) {
        best = std::min(best, e->expiry);
      }
    }
    earliest_ = best;
    earliest_valid_ = true;
  }
  return earliest_;
}

}  // namespace vrdma::sched
