// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Access to one librxe ring (struct rxe_queue_buf) in a guest page view.
//
// Layout (rdma/rdma_user_rxe.h): producer_index at byte 128, consumer_index
// at byte 256, elements from byte 384 (VIRTIO_RDMA_RING_HDR_SIZE). Indices
// are stored masked, in [0, index_mask]; one slot stays empty, so the ring
// is empty when producer == consumer and full when producer + 1 == consumer.
//
// Memory ordering (the same as librxe's):
//   - the side that produces writes the element, then stores its index with
//     release; the consumer loads that index with acquire before reading
//     elements;
//   - the consumer stores its index with release after it has finished
//     with the slot (copied a WQE, or the RNIC no longer writes a receive
//     buffer), so the producer may reuse it.
//
// The geometry comes from the create request only, never from the
// guest-writable header (log2_elem_size, index_mask). Indices written by the
// guest are checked: a value above index_mask is a ring error, reported to
// the caller, never used.
#ifndef VRDMA_BACKEND_ENGINE_GUEST_RING_H_
#define VRDMA_BACKEND_ENGINE_GUEST_RING_H_

#include <cstdint>

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

inline constexpr uint32_t kRingProducerOffset = 128;
inline constexpr uint32_t kRingConsumerOffset = 256;
inline constexpr uint32_t kRingHeaderSize = VIRTIO_RDMA_RING_HDR_SIZE;

class GuestRing {
 public:
  GuestRing() = default;
  GuestRing(uint8_t* base, uint32_t log2_num_elem, uint32_t log2_elem_size)
      : base_(base),
        mask_((1u << log2_num_elem) - 1),
        log2_elem_size_(log2_elem_size) {}

  bool valid() const { return base_ != nullptr; }
  uint32_t mask() const { return mask_; }
  uint32_t num_elem() const { return mask_ + 1; }
  // Entries the ring can hold (one slot stays empty).
  uint32_t capacity() const { return mask_; }
  uint32_t elem_size() const { return 1u << log2_elem_size_; }

  // Acquire-loads an index the guest writes; false when it is out of range.
  bool LoadProducer(uint32_t* out) const {
    return LoadIndex(kRingProducerOffset, out);
  }
  bool LoadConsumer(uint32_t* out) const {
    return LoadIndex(kRingConsumerOffset, out);
  }
  // Release-stores an index the host owns (always masked here).
  void StoreProducer(uint32_t v) const {
    StoreIndex(kRingProducerOffset, v & mask_);
  }
  void StoreConsumer(uint32_t v) const {
    StoreIndex(kRingConsumerOffset, v & mask_);
  }

  uint8_t* element(uint32_t index) const {
    return base_ + kRingHeaderSize +
           (static_cast<uint64_t>(index & mask_) << log2_elem_size_);
  }
  uint32_t Next(uint32_t index) const { return (index + 1) & mask_; }
  // Entries from `from` up to (not including) `to`.
  uint32_t Distance(uint32_t from, uint32_t to) const {
    return (to - from) & mask_;
  }

 private:
  bool LoadIndex(uint32_t offset, uint32_t* out) const {
    uint32_t v = __atomic_load_n(reinterpret_cast<uint32_t*>(base_ + offset),
                                 __ATOMIC_ACQUIRE);
    if (v > mask_) return false;
    *out = v;
    return true;
  }
  void StoreIndex(uint32_t offset, uint32_t v) const {
    __atomic_store_n(reinterpret_cast<uint32_t*>(base_ + offset), v,
                     __ATOMIC_RELEASE);
  }

  uint8_t* base_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t log2_elem_size_ = 0;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_GUEST_RING_H_
