// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The event virtqueue (queue 1): the driver keeps device-writable buffers
// there and the device writes one struct virtio_rdma_event into each. With
// no usable buffer the event is counted as lost and the count travels in
// the next event written (docs/virtio-rdma.md section 6).
//
// Data-path thread only (the engine raises events from its PollOnce).
// Allocates nothing. The guest is notified once per batch (Flush), not per
// event: the engine flushes at the end of each turn that raised any.
#ifndef VRDMA_VHOST_RDMA_DEVICE_EVENT_QUEUE_H_
#define VRDMA_VHOST_RDMA_DEVICE_EVENT_QUEUE_H_

#include <atomic>
#include <cstdint>

#include "vhost-rdma/vhost_user/virtqueue.h"

namespace vrdma::device {

class EventQueue {
 public:
  // The queue to write into; nullptr while the event queue is stopped
  // (events are then counted as lost).
  void Attach(vhost::Virtqueue* vq) { vq_ = vq; }

  void Post(uint32_t type, uint32_t handle);
  // Notifies the guest once for what Post wrote since the last Flush.
  void Flush();

  // Readable from any thread (the daemon's stats).
  uint32_t pending_lost() const { return lost_.load(std::memory_order_relaxed); }
  uint64_t written() const { return written_.load(std::memory_order_relaxed); }

 private:
  vhost::Virtqueue* vq_ = nullptr;
  bool notify_pending_ = false;
  // Single writer (the data path): plain load + store, no locked RMW.
  std::atomic<uint32_t> lost_{0};  // saturates at UINT32_MAX
  std::atomic<uint64_t> written_{0};
};

}  // namespace vrdma::device

#endif  // VRDMA_VHOST_RDMA_DEVICE_EVENT_QUEUE_H_
