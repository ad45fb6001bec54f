// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A FIFO on a power-of-two vector that grows by doubling and never shrinks:
// after warm-up the model's queues stop allocating.
#ifndef VRDMA_BACKEND_RNIC_MODEL_RING_H_
#define VRDMA_BACKEND_RNIC_MODEL_RING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vrdma::model {

template <typename T>
class Ring {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  size_t capacity() const { return buf_.size(); }
  T& front() { return buf_[head_ & mask_]; }
  T& at(size_t i) { return buf_[(head_ + i) & mask_]; }
  void push_back(const T& v) {
    if (size() == buf_.size()) Grow();
    buf_[tail_ & mask_] = v;
    ++tail_;
  }
  T pop_front() { return buf_[(head_++) & mask_]; }
  // Moves element i to the front; the ones before it move back by one.
  void move_to_front(size_t i) {
    T v = at(i);
    for (size_t j = i; j > 0; --j) at(j) = at(j - 1);
    at(0) = v;
  }
  void clear() { head_ = tail_ = 0; }

 private:
  [[gnu::noinline]] void Grow() {
    size_t n = buf_.empty() ? 16 : buf_.size() * 2;
    std::vector<T> nb(n);
    for (size_t i = 0; i < size(); ++i) nb[i] = buf_[(head_ + i) & mask_];
    tail_ = size();
    head_ = 0;
    buf_.swap(nb);
    mask_ = n - 1;
  }
  std::vector<T> buf_;
  size_t mask_ = 0;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_RING_H_
