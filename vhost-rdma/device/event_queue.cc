// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/device/event_queue.h"

#include <endian.h>

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::device {

void EventQueue::Post(uint32_t type, uint32_t handle) {
  if (vq_ != nullptr && vq_->ready() && !vq_->broken()) {
    // Skip (and return unused) buffers too small for an event; bounded by
    // the ring size.
    for (uint32_t tries = 0; tries < vq_->size(); ++tries) {
      auto next = vq_->Pop();
      if (!next.has_value() || !next->ok()) break;
      const vhost::DescChain& chain = next->value();
      if (chain.writable_bytes() < sizeof(virtio_rdma_event)) {
        vq_->Push(chain.head, 0);
        continue;
      }
      virtio_rdma_event ev{};
      ev.type = htole32(type);
      ev.handle = htole32(handle);
      const uint32_t lost = lost_.load(std::memory_order_relaxed);
      ev.lost = htole32(lost);
      const size_t n = chain.Write(
          0, {reinterpret_cast<const uint8_t*>(&ev), sizeof(ev)});
      vq_->Push(chain.head, static_cast<uint32_t>(n));
      notify_pending_ = true;
      lost_.store(0, std::memory_order_relaxed);
      written_.store(written_.load(std::memory_order_relaxed) + 1,
                     std::memory_order_relaxed);
      return;
    }
    notify_pending_ = true;  // for any small buffers returned above
  }
  const uint32_t lost = lost_.load(std::memory_order_relaxed);
  if (lost != UINT32_MAX) lost_.store(lost + 1, std::memory_order_relaxed);
}

void EventQueue::Flush() {
  if (!notify_pending_) return;
  notify_pending_ = false;
  if (vq_ != nullptr && vq_->ready() && !vq_->broken()) vq_->NotifyGuest();
}

}  // namespace vrdma::device
