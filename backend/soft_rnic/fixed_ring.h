// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A bounded FIFO whose storage is allocated once (on the control path) so
// that pushes and pops on the data path never allocate. Used for send and
// receive queues, SRQs, completion queues and free-index lists.
#ifndef VRDMA_BACKEND_SOFT_RNIC_FIXED_RING_H_
#define VRDMA_BACKEND_SOFT_RNIC_FIXED_RING_H_

#include <cstdint>
#include <vector>

namespace vrdma::soft {

template <typename T>
class FixedRing {
 public:
  // Control path: sizes the storage. Drops any content.
  void Init(uint32_t capacity) {
    slots_.assign(capacity, T{});
    head_ = tail_ = 0;
  }

  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t size() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }
  bool full() const { return size() >= capacity(); }

  // Storage position of the next pushed element (for side tables sized like
  // the ring, e.g. inline data buffers).
  uint32_t next_position() const { return tail_ % capacity(); }

  // Returns the slot to fill, or nullptr when full.
  T* Push() {
    if (full()) return nullptr;
    T* slot = &slots_[tail_ % capacity()];
    ++tail_;
    return slot;
  }
  // Oldest element; the ring must not be empty.
  T& front() { return slots_[head_ % capacity()]; }
  const T& front() const { return slots_[head_ % capacity()]; }
  // The i-th element from the oldest (i < size()).
  T& at(uint32_t i) { return slots_[(head_ + i) % capacity()]; }
  void Pop() { ++head_; }
  void Clear() { head_ = tail_ = 0; }

 private:
  std::vector<T> slots_;
  // Free-running counters; size() stays correct across uint32 wrap because
  // the capacity is far below 2^32.
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

}  // namespace vrdma::soft

#endif  // VRDMA_BACKEND_SOFT_RNIC_FIXED_RING_H_
