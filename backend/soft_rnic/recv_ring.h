// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Storage of a receive queue (a QP's RQ or an SRQ): per entry its wr_id
// and SGE count, and its SGEs in a pool of max_sge per entry. An entry
// costs 16 + 16 * max_sge bytes instead of a whole RecvWr (528 bytes, room
// for kMaxSge SGEs), and receive queues are the deepest queues a VM asks
// for. Sized at creation; nothing allocates on the data path.
#ifndef VRDMA_BACKEND_SOFT_RNIC_RECV_RING_H_
#define VRDMA_BACKEND_SOFT_RNIC_RECV_RING_H_

#include <cstdint>
#include <span>
#include <vector>

#include "backend/rnic/rnic.h"

namespace vrdma::soft {

// A posted receive, as the responder reads it (valid until it is popped).
struct RecvEntry {
  uint64_t wr_id = 0;
  std::span<const Sge> sge;
};

class RecvRing {
 public:
  // Control path: sizes the storage. Drops any content.
  void Init(uint32_t capacity, uint32_t max_sge) {
    heads_.assign(capacity, Head{});
    sges_.assign(size_t{capacity} * max_sge, Sge{});
    max_sge_ = max_sge;
    head_ = tail_ = 0;
  }
  // Host bytes of a ring of this shape (what Init allocates).
  static uint64_t BytesFor(uint32_t capacity, uint32_t max_sge) {
    return uint64_t{capacity} * (sizeof(Head) + uint64_t{max_sge} * sizeof(Sge));
  }

  uint32_t capacity() const { return static_cast<uint32_t>(heads_.size()); }
  uint32_t size() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }
  bool full() const { return size() >= capacity(); }

  // False when full. The caller has checked wr.num_sge <= max_sge.
  bool Push(const RecvWr& wr) {
    if (full()) return false;
    const uint32_t pos = tail_ % capacity();
    heads_[pos] = Head{wr.wr_id, wr.num_sge};
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
      sges_[size_t{pos} * max_sge_ + i] = wr.sge[i];
    }
    ++tail_;
    return true;
  }
  // Oldest entry; the ring must not be empty.
  RecvEntry front() const {
    const uint32_t pos = head_ % capacity();
    const Head& h = heads_[pos];
    return RecvEntry{h.wr_id, std::span<const Sge>(sges_.data() + size_t{pos} * max_sge_,
                                                   h.num_sge)};
  }
  void Pop() { ++head_; }
  void Clear() { head_ = tail_ = 0; }

 private:
  struct Head {
    uint64_t wr_id = 0;
    uint32_t num_sge = 0;
  };
  std::vector<Head> heads_;
  std::vector<Sge> sges_;
  uint32_t max_sge_ = 0;
  // Free-running counters, as in FixedRing.
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

}  // namespace vrdma::soft

#endif  // VRDMA_BACKEND_SOFT_RNIC_RECV_RING_H_
