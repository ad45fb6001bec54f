// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// CompletionRing: the synthesized half of a virtual CQ (docs/reliability.md
// §2.1). A virtual CQ is its lower CQ plus this ring of the completions the
// layer makes itself (for the WRs of framed QPs, steps 11-17), which
// PollCq returns before the lower CQ's. Empty while every QP is native.
//
// Fixed capacity (a power of two), allocated when the ring is made (on the
// control thread: ReliableRnic::PrepareCq); Push and Pop never allocate.
// A Push into a full ring is refused and changes nothing: the producer
// keeps the completion (its message record holds it) and pushes it again
// after the engine polled. Producer and consumer are the data-path thread.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_COMPLETION_RING_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_COMPLETION_RING_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>

#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

class CompletionRing {
 public:
  // capacity: rounded up to a power of two, at least 1.
  explicit CompletionRing(uint32_t capacity)
      : capacity_(std::bit_ceil(std::max<uint32_t>(capacity, 1))),
        slots_(std::make_unique<Completion[]>(capacity_)) {}
  CompletionRing(const CompletionRing&) = delete;
  CompletionRing& operator=(const CompletionRing&) = delete;

  static uint64_t BytesFor(uint32_t capacity) {
    return sizeof(CompletionRing) +
           uint64_t{std::bit_ceil(std::max<uint32_t>(capacity, 1))} *
               sizeof(Completion);
  }

  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return static_cast<uint32_t>(tail_ - head_); }
  bool empty() const { return tail_ == head_; }
  // Completions pushed since the ring was made.
  uint64_t produced() const { return tail_; }

  // Appends c; false (nothing changed) when the ring is full.
  [[nodiscard]] bool Push(const Completion& c) {
    if (size() == capacity_) return false;
    slots_[tail_ & (capacity_ - 1)] = c;
    ++tail_;
    return true;
  }

  // Moves up to out.size() completions, oldest first, into out; returns
  // how many.
  int Pop(std::span<Completion> out) {
    const uint32_t n = std::min<uint64_t>(size(), out.size());
    for (uint32_t i = 0; i < n; ++i)
      out[i] = slots_[(head_ + i) & (capacity_ - 1)];
    head_ += n;
    return static_cast<int>(n);
  }

  // ReliableRnic's hand-over of dropped rings to the control thread.
  CompletionRing* next_dead = nullptr;

 private:
  const uint32_t capacity_;
  std::unique_ptr<Completion[]> slots_;
  uint64_t head_ = 0;  // 64-bit counters: they never wrap
  uint64_t tail_ = 0;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_COMPLETION_RING_H_
