// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/recv_queue.h"

#include <algorithm>
#include <utility>

namespace vrdma::engine {

void InitRecvQueue(RecvQueue& rq, const RingSpec& ring, uint32_t max_sge,
                   uint32_t rnic_max_wr, GuestPageView view) {
  rq.view = std::move(view);
  rq.ring = GuestRing(rq.view.data(), ring.log2_num_elem, ring.log2_elem_size);
  rq.limits.max_sge = max_sge;
  rq.limits.elem_size = rq.ring.elem_size();
  // High watermark: everything the ring can hold, as far as the RNIC takes.
  rq.depth = std::min(rq.ring.capacity(), rnic_max_wr);
  rq.low_watermark = std::max<uint32_t>(1, rq.depth / 2);
  rq.wr_ids.assign(rq.ring.num_elem(), 0);
  rq.done.assign(rq.ring.num_elem(), 0);
  rq.slots.assign(rq.ring.num_elem(), RecvSlot{});
  rq.head = rq.consumer = rq.posted = 0;
}

}  // namespace vrdma::engine
