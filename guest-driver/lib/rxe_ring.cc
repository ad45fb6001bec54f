// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/lib/rxe_ring.h"

namespace vrdma::guest {

uint64_t RxeRing::Bytes(uint32_t log2_num_elem, uint32_t log2_elem_size) {
  const uint64_t bytes = VIRTIO_RDMA_RING_HDR_SIZE +
                         (uint64_t{1} << (log2_num_elem + log2_elem_size));
  return (bytes + VIRTIO_RDMA_PAGE_SIZE - 1) & ~uint64_t{VIRTIO_RDMA_PAGE_SIZE - 1};
}

void RxeRing::Init(uint8_t* mem, uint32_t log2_num_elem,
                   uint32_t log2_elem_size) {
  hdr_ = reinterpret_cast<rxe_queue_buf*>(mem);
  log2_elem_size_ = log2_elem_size;
  mask_ = (1u << log2_num_elem) - 1;
  hdr_->log2_elem_size = log2_elem_size;
  hdr_->index_mask = mask_;
  __atomic_store_n(&hdr_->producer_index, 0u, __ATOMIC_RELAXED);
  __atomic_store_n(&hdr_->consumer_index, 0u, __ATOMIC_RELEASE);
  prod_ = cons_ = 0;
}

bool RxeRing::Full() const {
  const uint32_t cons = __atomic_load_n(&hdr_->consumer_index, __ATOMIC_ACQUIRE);
  return ((prod_ + 1) & mask_) == (cons & mask_);
}

void RxeRing::Produce() {
  prod_ = (prod_ + 1) & mask_;
  __atomic_store_n(&hdr_->producer_index, prod_, __ATOMIC_RELEASE);
}

uint32_t RxeRing::FreeSlots() const {
  const uint32_t cons = __atomic_load_n(&hdr_->consumer_index, __ATOMIC_ACQUIRE);
  return mask_ - ((prod_ - cons) & mask_);
}

bool RxeRing::Empty() const {
  const uint32_t prod = __atomic_load_n(&hdr_->producer_index, __ATOMIC_ACQUIRE);
  return (prod & mask_) == cons_;
}

void RxeRing::Consume() {
  cons_ = (cons_ + 1) & mask_;
  __atomic_store_n(&hdr_->consumer_index, cons_, __ATOMIC_RELEASE);
}

uint32_t RxeRing::Count() const {
  const uint32_t prod = __atomic_load_n(&hdr_->producer_index, __ATOMIC_ACQUIRE);
  return (prod - cons_) & mask_;
}

}  // namespace vrdma::guest
