// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Checks of guest rings (CQ, SQ, RQ, SRQ) and of the requests that create
// them, without side effects.
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
// Pages the largest ring these bounds allow spans (a bound for page lists).
inline constexpr uint32_t kMaxRingPages =
    (VIRTIO_RDMA_RING_HDR_SIZE + (1u << (kMaxRingLog2Elems + kMaxRingLog2ElemSize)) +
     VIRTIO_RDMA_PAGE_SIZE - 1) /
    VIRTIO_RDMA_PAGE_SIZE;

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

// Whole requests that create queues, against the limits the VM sees (its
// quotas applied to the RNIC's): every rule that needs no VM state. The
// engine applies them before anything else; the device's decoder only
// parses (docs/virtio-rdma.md §8). kInvalid on:
//  - CQ: cqe 0 or above max_cqe; the ring (CQE size, cqe entries);
//  - QP: a type other than RC, UC, UD; max_send_wr 0 or above max_qp_wr,
//    max_send_sge above max_sge, max_inline_data above max_inline_data;
//    without an SRQ the same for the receive side, with one any RQ pages;
//    the SQ ring (element for the SGEs or inline data, max_send_wr
//    entries) and the RQ ring (element for the SGEs, max_recv_wr entries);
//  - SRQ: max_wr 0 or above max_srq_wr, max_sge 0 or above max_sge,
//    srq_limit above max_wr; the ring (element, max_wr entries).
Status CheckCreateCq(const CreateCqRequest& req, const RnicLimits& limits);
Status CheckCreateQp(const CreateQpRequest& req, const RnicLimits& limits);
Status CheckCreateSrq(const CreateSrqRequest& req, const RnicLimits& limits);

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RING_CHECK_H_
