// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// REG_MR request checks, without side effects (the rxe "chk_attr" step).
// Quota and guest-memory checks need VM state and are done by the engine.
#ifndef VRDMA_BACKEND_ENGINE_MR_CHECK_H_
#define VRDMA_BACKEND_ENGINE_MR_CHECK_H_

#include <cstdint>

#include "backend/base/status.h"
#include "backend/engine/engine.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

// Page-list entries in one REG_MR (reported as max_mr_pages): 256 MiB.
inline constexpr uint32_t kMaxMrPages = 1u << 16;

struct MrLimits {
  uint32_t max_pages = kMaxMrPages;
  uint64_t max_mr_size = uint64_t{kMaxMrPages} * VIRTIO_RDMA_PAGE_SIZE;
  bool windows = false;  // the VM has memory windows: MW_BIND is an access bit
};

// kInvalid on: unknown access bits (MW_BIND only with windows); REMOTE_WRITE or REMOTE_ATOMIC without
// LOCAL_WRITE (IB spec 10.6.3.1); length 0 or above max_mr_size;
// first_page_offset >= 4096; no pages or more than max_pages; a page not
// 4 KiB aligned; first_page_offset + length beyond the pages; iova + length
// wrapping around 2^64. All arithmetic is overflow-checked.
Status CheckRegMr(const RegMrRequest& req, const MrLimits& limits);

// Bytes a registration pins (its whole pages).
inline uint64_t MrPinnedBytes(const RegMrRequest& req) {
  return uint64_t{req.pages.size()} * VIRTIO_RDMA_PAGE_SIZE;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_MR_CHECK_H_
