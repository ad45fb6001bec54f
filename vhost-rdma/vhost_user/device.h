// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What a vhost-user device implements. The protocol layer (connection.cc:
// sockets, message validation, memory table, vring setup) calls these and
// nothing else; the device never sees a socket or a vhost-user message.
// Shaped after rust-vmm's VhostUserBackend.
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_DEVICE_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_DEVICE_H_

#include <cstdint>
#include <memory>
#include <span>

#include "backend/base/status.h"
#include "backend/memory/guest_memory.h"
#include "vhost-rdma/vhost_user/virtqueue.h"

namespace vrdma::vhost {

class VhostUserDevice {
 public:
  virtual ~VhostUserDevice() = default;

  // Virtio feature bits the device offers. The protocol layer adds
  // VIRTIO_F_VERSION_1, VHOST_USER_F_PROTOCOL_FEATURES and the ring features
  // it implements itself (VIRTIO_RING_F_EVENT_IDX, INDIRECT_DESC).
  virtual uint64_t device_features() const = 0;
  virtual uint32_t num_queues() const = 0;
  virtual uint16_t max_queue_size() const = 0;
  // GET_CONFIG: the whole config space (the layer serves any in-range slice).
  virtual std::span<const uint8_t> config() const = 0;

  // The frontend acknowledged these features (device bits included).
  virtual Status SetFeatures(uint64_t acked) = 0;
  // A new memory table was installed (also the first one).
  virtual void SetMemory(std::shared_ptr<const GuestMemory> memory) = 0;
  // Queue `index` is set up, enabled and has its fds. The device decides
  // which thread services it and registers vq.kick_fd there.
  virtual Status StartQueue(uint32_t index, Virtqueue& vq) = 0;
  // Stop using queue `index` now (GET_VRING_BASE, disable, disconnect). When
  // this returns, no thread touches the Virtqueue any more.
  virtual void StopQueue(uint32_t index) = 0;
  // VHOST_USER_SET_STATUS: the driver's virtio status byte.
  virtual void SetStatus(uint8_t status) = 0;
  // The frontend disconnected or reset the device: release everything the
  // VM owns (QPs, MRs, CQs, pinned views). Queues are already stopped.
  virtual void Reset() = 0;
};

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_DEVICE_H_
