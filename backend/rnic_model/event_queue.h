// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The model's event queue: a binary min-heap on (time, sequence). The
// sequence number makes ties deterministic (first scheduled, first run), so
// a run depends only on its inputs and its seed.
#ifndef VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_
#define VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_

#include <cstdint>
#include <vector>

#include "backend/rnic_model/params.h"

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
  void Push(Picos time, uint32_t kind, uint32_t a, uint64_t b) {
    heap_.push_back(Event{time, next_seq_++, kind, a, b});
    SiftUp(heap_.size() - 1);
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  Event Pop() {
    Event e = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(0);
    return e;
  }

 private:
  static bool Less(const Event& x, const Event& y) {
    return x.time < y.time || (x.time == y.time && x.seq < y.seq);
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
  uint64_t next_seq_ = 0;
};

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_EVENT_QUEUE_H_
