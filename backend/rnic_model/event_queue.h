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
// the heap. Pop takes the least (time, sequence) of the lane heads (kept
// in a small heap of lanes) and the big heap's top: exactly the order of
// a single heap, at a few comparisons in L1 for most events.
// Storage grows by doubling and never shrinks: no allocation per event
// after warm-up.
#ifndef VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_
#define VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_

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
    Ring<Event>& r = lanes_[lane];
    if (r.empty()) {
      r.push_back(e);
      lane_last_[lane] = time;
      head_[lane] = Key{time, e.seq};
      LaneHeapInsert(lane);
      return;
    }
    if (time >= lane_last_[lane]) {
      r.push_back(e);
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
    const bool from_lane = LaneFirst();
    const Event& m = from_lane ? lanes_[lane_heap_[0]].front() : heap_.front();
    if (m.time > t) return false;
    *e = m;
    Remove(from_lane);
    return true;
  }
  Event Pop() {
    const bool from_lane = LaneFirst();
    Event e = from_lane ? lanes_[lane_heap_[0]].front() : heap_.front();
    Remove(from_lane);
    return e;
  }

 private:
  struct Key {
    Picos time;
    uint64_t seq;
  };
  static bool Less(const Event& x, const Event& y) {
    return x.time < y.time || (x.time == y.time && x.seq < y.seq);
  }
  static bool Less(const Key& x, const Event& y) {
    return x.time < y.time || (x.time == y.time && x.seq < y.seq);
  }
  // Whether the least event is the head of the first lane of lane_heap_
  // (else the heap's top).
  bool LaneFirst() {
    if (lane_count_ == 0) return false;
    if (heap_.empty()) return true;
    return Less(head_[lane_heap_[0]], heap_.front());
  }
  void Remove(bool from_lane) {
    --size_;
    if (from_lane) {
      const uint32_t lane = lane_heap_[0];
      Ring<Event>& r = lanes_[lane];
      r.pop_front();
      if (r.empty()) {
        lane_heap_[0] = lane_heap_[--lane_count_];
      } else {
        const Event& h = r.front();
        head_[lane] = Key{h.time, h.seq};
      }
      if (lane_count_ > 0) LaneSiftDown(0);
      return;
    }
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(0);
  }
  // A small binary heap of the non-empty lanes, keyed by their heads.
  bool LaneLess(uint32_t x, uint32_t y) const {
    const Key& a = head_[x];
    const Key& b = head_[y];
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  void LaneHeapInsert(uint32_t lane) {
    uint32_t i = lane_count_++;
    while (i > 0) {
      const uint32_t p = (i - 1) / 2;
      if (!LaneLess(lane, lane_heap_[p])) break;
      lane_heap_[i] = lane_heap_[p];
      i = p;
    }
    lane_heap_[i] = static_cast<uint8_t>(lane);
  }
  void LaneSiftDown(uint32_t i) {
    const uint32_t lane = lane_heap_[i];
    for (;;) {
      uint32_t c = 2 * i + 1;
      if (c >= lane_count_) break;
      if (c + 1 < lane_count_ && LaneLess(lane_heap_[c + 1], lane_heap_[c])) ++c;
      if (!LaneLess(lane_heap_[c], lane)) break;
      lane_heap_[i] = lane_heap_[c];
      i = c;
    }
    lane_heap_[i] = static_cast<uint8_t>(lane);
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
  Key head_[kLanes] = {};       // each non-empty lane's head
  uint8_t lane_heap_[kLanes] = {};
  uint32_t lane_count_ = 0;
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_
