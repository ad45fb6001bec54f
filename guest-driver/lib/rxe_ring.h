// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A work or completion queue exactly as librxe lays it out and as the guest
// kernel module hands it to the device (see vhost-rdma/abi/virtio_rdma.h):
// struct rxe_queue_buf (log2_elem_size, index_mask, producer_index and
// consumer_index on their own cache lines) followed by 2^n elements at byte
// offset VIRTIO_RDMA_RING_HDR_SIZE. Indices are masked into [0, index_mask];
// one slot stays empty, so a ring of 2^n slots holds 2^n - 1 entries.
//
// The side that produces stores producer_index with release after writing
// the element; the side that consumes loads it with acquire, and stores
// consumer_index with release once it is done with the element. The device
// is another process, so both indices are accessed atomically.
#ifndef VRDMA_GUEST_DRIVER_LIB_RXE_RING_H_
#define VRDMA_GUEST_DRIVER_LIB_RXE_RING_H_

#include <cstdint>

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::guest {

class RxeRing {
 public:
  // Bytes of guest memory a ring of 2^log2_num_elem elements of
  // 2^log2_elem_size bytes occupies, rounded up to whole pages.
  static uint64_t Bytes(uint32_t log2_num_elem, uint32_t log2_elem_size);

  RxeRing() = default;
  // Writes the header into zeroed memory at `mem` (log2_elem_size,
  // index_mask, both indices 0).
  void Init(uint8_t* mem, uint32_t log2_num_elem, uint32_t log2_elem_size);

  uint32_t num_slots() const { return mask_ + 1; }
  uint32_t capacity() const { return mask_; }  // one slot stays empty
  uint32_t elem_size() const { return 1u << log2_elem_size_; }
  rxe_queue_buf* header() const { return hdr_; }

  // --- Producer side (SQ/RQ/SRQ in the driver). ---
  bool Full() const;
  // The slot at the (private) producer index; valid while !Full().
  uint8_t* ProducerSlot() const { return Slot(prod_); }
  // Publishes the element written into ProducerSlot().
  void Produce();
  // Entries that can still be produced before the ring is full.
  uint32_t FreeSlots() const;

  // --- Consumer side (CQ in the driver). ---
  bool Empty() const;
  uint8_t* ConsumerSlot() const { return Slot(cons_); }
  void Consume();

  // Number of published, not yet consumed entries (consumer side view).
  uint32_t Count() const;

 private:
  uint8_t* Slot(uint32_t index) const {
    return hdr_->data + (static_cast<uint64_t>(index & mask_) << log2_elem_size_);
  }

  rxe_queue_buf* hdr_ = nullptr;
  uint32_t log2_elem_size_ = 0;
  uint32_t mask_ = 0;
  // Private copies: the driver owns one index of each ring and never trusts
  // the device's copy of its own.
  uint32_t prod_ = 0;
  uint32_t cons_ = 0;
};

}  // namespace vrdma::guest

#endif  // VRDMA_GUEST_DRIVER_LIB_RXE_RING_H_
