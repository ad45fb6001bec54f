// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Geometry checks for guest rings (CQ, SQ, RQ, SRQ), without side effects.
// The geometry is the guest's declaration in the create request; these
// checks make sure the declared ring fits in its pages and each element
// can hold what the queue's capabilities allow, so the data path can index
// elements without further bounds checks.
#ifndef VRDMA_BACKEND_ENGINE_RING_CHECK_H_
#define VRDMA_BACKEND_ENGINE_RING_CHECK_H_

#include <cstdint>

#include "backend/base/status.h"
#include "backend/engine/engine.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

// Largest element: 4 KiB holds a send WQE with 32 SGEs or 512 inline bytes
// many times over; bigger elements only waste pinned memory.
inline constexpr uint32_t kMaxRingLog2ElemSize = 12;
inline constexpr uint32_t kMaxRingLog2Elems = VIRTIO_RDMA_MAX_RING_LOG2_ELEMS;

// Smallest element each queue kind needs.
uint32_t CqMinElemBytes();
uint32_t SqMinElemBytes(uint32_t max_send_sge, uint32_t max_inline);
uint32_t RqMinElemBytes(uint32_t max_recv_sge);

// Bytes of a ring: header + 2^log2_num_elem << log2_elem_size (no overflow
// for checked inputs: at most 384 + 2^28).
uint64_t RingBytes(uint32_t log2_num_elem, uint32_t log2_elem_size);

// kInvalid unless: 1 <= log2_num_elem <= 16, log2_elem_size <= 12,
// element >= min_elem_bytes, the ring holds min_entries (2^n - 1 >=
// min_entries), pages non-empty and page aligned, ring bytes <= pages * 4096
// and no page beyond the one holding the ring's last byte.
Status CheckRingGeometry(const RingSpec& ring, uint32_t min_elem_bytes,
                         uint32_t min_entries);

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RING_CHECK_H_
