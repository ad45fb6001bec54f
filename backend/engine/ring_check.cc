// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/ring_check.h"

#include <algorithm>

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

uint32_t CqMinElemBytes() { return 1u << VIRTIO_RDMA_MIN_CQE_LOG2_SIZE; }

uint32_t SqMinElemBytes(uint32_t max_send_sge, uint32_t max_inline) {
  // Callers bound max_send_sge and max_inline first; 64-bit math anyway.
  uint64_t payload =
      std::max<uint64_t>(uint64_t{max_send_sge} * sizeof(rxe_sge), max_inline);
  return static_cast<uint32_t>(std::min<uint64_t>(
      VIRTIO_RDMA_SEND_WQE_SGE_OFFSET + payload, UINT32_MAX));
}

uint32_t RqMinElemBytes(uint32_t max_recv_sge) {
  uint64_t b = VIRTIO_RDMA_RECV_WQE_SGE_OFFSET +
               uint64_t{max_recv_sge} * sizeof(rxe_sge);
  return static_cast<uint32_t>(std::min<uint64_t>(b, UINT32_MAX));
}

uint64_t RingBytes(uint32_t log2_num_elem, uint32_t log2_elem_size) {
  return VIRTIO_RDMA_RING_HDR_SIZE +
         ((uint64_t{1} << log2_num_elem) << log2_elem_size);
}

Status CheckRingGeometry(const RingSpec& ring, uint32_t min_elem_bytes,
                         uint32_t min_entries) {
  // log2_num_elem 0 is a one-slot ring that holds nothing: what a driver
  // describes for a queue of depth 0 (a send-only QP's receive queue).
  if (ring.log2_num_elem > kMaxRingLog2Elems) return Status::kInvalid;
  if (ring.log2_elem_size > kMaxRingLog2ElemSize) return Status::kInvalid;
  if ((uint64_t{1} << ring.log2_elem_size) < min_elem_bytes)
    return Status::kInvalid;
  if ((uint64_t{1} << ring.log2_num_elem) - 1 < min_entries)
    return Status::kInvalid;
  const uint64_t bytes = RingBytes(ring.log2_num_elem, ring.log2_elem_size);
  const uint64_t needed_pages =
      (bytes + VIRTIO_RDMA_PAGE_SIZE - 1) / VIRTIO_RDMA_PAGE_SIZE;
  // Exactly the pages the ring occupies: extra pages would only pin memory.
  if (ring.pages.size() != needed_pages) return Status::kInvalid;
  for (uint64_t gpa : ring.pages) {
    if (gpa % VIRTIO_RDMA_PAGE_SIZE != 0) return Status::kInvalid;
  }
  return Status::kOk;
}

Status CheckCreateCq(const CreateCqRequest& req, const RnicLimits& lim) {
  if (req.cqe == 0 || req.cqe > lim.max_cqe) return Status::kInvalid;
  return CheckRingGeometry(req.ring, CqMinElemBytes(), req.cqe);
}

Status CheckCreateQp(const CreateQpRequest& req, const RnicLimits& lim) {
  if (req.type != QpType::kRc && req.type != QpType::kUc &&
      req.type != QpType::kUd && req.type != QpType::kGsi) {
    return Status::kInvalid;
  }
  const QpCaps& c = req.caps;
  if (c.max_send_wr == 0 || c.max_send_wr > lim.max_qp_wr ||
      c.max_send_sge > lim.max_sge || c.max_inline_data > lim.max_inline_data) {
    return Status::kInvalid;
  }
  const bool has_rq = req.srq == 0;
  if (has_rq) {
    if (c.max_recv_wr == 0 || c.max_recv_wr > lim.max_qp_wr ||
        c.max_recv_sge > lim.max_sge) {
      return Status::kInvalid;
    }
  } else if (!req.rq.pages.empty()) {
    return Status::kInvalid;
  }
  VRDMA_RETURN_IF_ERROR(CheckRingGeometry(
      req.sq, SqMinElemBytes(c.max_send_sge, c.max_inline_data),
      c.max_send_wr));
  if (has_rq) {
    VRDMA_RETURN_IF_ERROR(CheckRingGeometry(
        req.rq, RqMinElemBytes(c.max_recv_sge), c.max_recv_wr));
  }
  return Status::kOk;
}

Status CheckCreateSrq(const CreateSrqRequest& req, const RnicLimits& lim) {
  if (req.max_wr == 0 || req.max_wr > lim.max_srq_wr || req.max_sge == 0 ||
      req.max_sge > lim.max_sge || req.srq_limit > req.max_wr) {
    return Status::kInvalid;
  }
  return CheckRingGeometry(req.ring, RqMinElemBytes(req.max_sge), req.max_wr);
}

}  // namespace vrdma::engine
