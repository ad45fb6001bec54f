// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/mr_check.h"

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

Status CheckRegMr(const RegMrRequest& req, const MrLimits& limits) {
  const uint32_t known = VIRTIO_RDMA_ACCESS_SUPPORTED |
                         (limits.windows ? VIRTIO_RDMA_ACCESS_MW_BIND : 0u);
  if (req.access & ~known) return Status::kInvalid;
  const bool remote_writes = req.access & (VIRTIO_RDMA_ACCESS_REMOTE_WRITE |
                                           VIRTIO_RDMA_ACCESS_REMOTE_ATOMIC);
  if (remote_writes && !(req.access & VIRTIO_RDMA_ACCESS_LOCAL_WRITE))
    return Status::kInvalid;
  if (req.length == 0 || req.length > limits.max_mr_size)
    return Status::kInvalid;
  if (req.first_page_offset >= VIRTIO_RDMA_PAGE_SIZE) return Status::kInvalid;
  if (req.pages.empty() || req.pages.size() > limits.max_pages)
    return Status::kInvalid;
  for (uint64_t gpa : req.pages) {
    if (gpa % VIRTIO_RDMA_PAGE_SIZE != 0) return Status::kInvalid;
  }
  // pages.size() <= 2^32, so this product cannot overflow 64 bits.
  const uint64_t span = uint64_t{req.pages.size()} * VIRTIO_RDMA_PAGE_SIZE;
  uint64_t end = 0;
  if (__builtin_add_overflow(uint64_t{req.first_page_offset}, req.length,
                             &end)) {
    return Status::kInvalid;
  }
  if (end > span) return Status::kInvalid;
  uint64_t iova_end = 0;
  if (__builtin_add_overflow(req.iova, req.length, &iova_end))
    return Status::kInvalid;
  return Status::kOk;
}

}  // namespace vrdma::engine
