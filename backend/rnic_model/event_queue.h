// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The model's event queue, ordered by (time, sequence). The sequence number
// makes ties deterministic (first scheduled, first run), so a run depends
// only on its inputs and its seed.
//
// Most events are scheduled a fixed or nearly fixed delay after the current
// time by one stream (a host's link, its PUs, the switch): such a stream's
// times rarely go backwards. So the queue keeps up to kLanes FIFO lanes
// (the caller names the lane, e.g. by event kind and host) besides a binary
// heap: an event goes to the tail of its lane when its time is not before
// the lane's last one (the lane stays sorted by (time, sequence)), else to
// the heap. Pop takes the least (time, sequence) of the lane heads and the
// heap's top: exactly the order of a single heap, at O(1) for most events.
// Storage grows by doubling and never shrinks: no allocation per event
// after warm-up.
#ifndef VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_
#define VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_

#include <bit>
#include <cstdint>
#include <vector>

#include "backend/rnic_model/params.h"
#include "backend/rnic_model/ring.h"

namespace vrdma::model {

struct Event {
  Picos time = 0;
  uint64_t seq = 0;
  uint32_t kind = 0;
  uint32_t a = 0;
  uint64_t b = 0;
};

class EventQueue {
 public:
  static constexpr uint32_t kLanes = 64;

  void Push(Picos time, uint32_t kind, uint32_t a, uint64_t b, uint32_t lane) {
    const Event e{time, next_seq_++, kind, a, b};
    ++size_;
    lane &= kLanes - 1;
    const uint64_t bit = uint64_t{1} << lane;
    if (!(nonempty_ & bit)) {
      lanes_[lane].push_back(e);
      lane_last_[lane] = time;
      nonempty_ |= bit;
      return;
    }
    if (time >= lane_last_[lane]) {
      lanes_[lane].push_back(e);
      lane_last_[lane] = time;
      return;
    }
    heap_.push_back(e);
    SiftUp(heap_.size() - 1);
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Removes the least event into *e when its time is at most t.
  bool PopUpTo(Picos t, Event* e) {
    if (size_ == 0) return false;
    const int src = MinSource();
    const Event& m = src < 0 ? heap_.front() : lanes_[src].front();
    if (m.time > t) return false;
    *e = m;
    Remove(src);
    return true;
  }
  Event Pop() {
    const int src = MinSource();
    Event e = src < 0 ? heap_.front() : lanes_[src].front();
    Remove(src);
    return e;
  }

 private:
  static bool Less(const Event& x, const Event& y) {
    return x.time < y.time || (x.time == y.time && x.seq < y.seq);
  }
  // -1: the heap's top; else the lane whose head is the least event.
  int MinSource() {
    int best = -1;
    const Event* m = heap_.empty() ? nullptr : &heap_.front();
    for (uint64_t bits = nonempty_; bits != 0; bits &= bits - 1) {
      const int lane = std::countr_zero(bits);
      const Event& h = lanes_[lane].front();
      if (m == nullptr || Less(h, *m)) {
        m = &h;
        best = lane;
      }
    }
    return best;
  }
  void Remove(int src) {
    --size_;
    if (src >= 0) {
      Ring<Event>& r = lanes_[src];
      r.pop_front();
      if (r.empty()) nonempty_ &= ~(uint64_t{1} << src);
      return;
    }
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(0);
  }
  void SiftUp(size_t i) {
    Event e = heap_[i];
    while (i > 0) {
      size_t p = (i - 1) / 2;
      if (!Less(e, heap_[p])) break;
      heap_[i] = heap_[p];
      i = p;
    }
    heap_[i] = e;
  }
  void SiftDown(size_t i) {
    const size_t n = heap_.size();
    Event e = heap_[i];
    for (;;) {
      size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && Less(heap_[c + 1], heap_[c])) ++c;
      if (!Less(heap_[c], e)) break;
      heap_[i] = heap_[c];
      i = c;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  Ring<Event> lanes_[kLanes];
  Picos lane_last_[kLanes] = {};
  uint64_t nonempty_ = 0;
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_
