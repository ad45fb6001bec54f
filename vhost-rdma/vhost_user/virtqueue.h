// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The device side of one split virtqueue (virtio 1.x, <linux/virtio_ring.h>
// layout) living in guest memory. Everything read from the rings is guest
// controlled: indices are read once per pass, a count above the ring size
// means a broken ring, chain walks are bounded, descriptors are copied into
// locals before they are checked, and a descriptor exists for the device
// only after its address range translated (a "checked descriptor").
//
// Not thread-safe: one thread (the queue's owner) uses a Virtqueue at a time.
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_VIRTQUEUE_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_VIRTQUEUE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "backend/base/status.h"
#include "backend/memory/guest_memory.h"

namespace vrdma::vhost {

// One translated, range-checked descriptor.
struct CheckedDesc {
  uint8_t* host = nullptr;
  uint32_t len = 0;
  bool device_writable = false;
};

// A descriptor chain: device-readable descriptors first, then writable ones
// (a readable one after a writable one makes the chain invalid).
struct DescChain {
  static constexpr int kMaxDescs = 64;  // longer chains are rejected
  uint16_t head = 0;
  uint16_t num_readable = 0;
  uint16_t num_writable = 0;
  std::array<CheckedDesc, kMaxDescs> descs{};

  uint64_t readable_bytes() const;
  uint64_t writable_bytes() const;
  // Copies up to out.size() bytes of the readable part from byte offset
  // `offset`; returns the bytes copied. Guest memory is read exactly once.
  size_t Read(uint64_t offset, std::span<uint8_t> out) const;
  // Writes into the writable part at byte offset `offset`; returns the bytes
  // written (short when the chain is too small).
  size_t Write(uint64_t offset, std::span<const uint8_t> in) const;
};

struct VringAddrs {
  uint64_t desc_user_addr = 0;
  uint64_t avail_user_addr = 0;
  uint64_t used_user_addr = 0;
  uint64_t log_addr = 0;
  uint32_t flags = 0;
};

class Virtqueue {
 public:
  Virtqueue() = default;
  Virtqueue(const Virtqueue&) = delete;
  Virtqueue& operator=(const Virtqueue&) = delete;

  // Binds the ring to guest memory. size: power of two, <= 32768.
  Status Setup(std::shared_ptr<const GuestMemory> memory, uint16_t size,
               const VringAddrs& addrs, uint16_t last_avail_idx,
               bool event_idx);
  // Rebinds to a new memory table (SET_MEM_TABLE while running).
  Status Remap(std::shared_ptr<const GuestMemory> memory);

  // The next available chain: nullopt when the ring is empty; an error
  // status when the guest wrote something invalid (the queue is then
  // marked broken and returns kInvalid until Setup is called again).
  std::optional<Result<DescChain>> Pop();
  // Returns a chain to the guest with `written` bytes written into it.
  void Push(uint16_t head, uint32_t written);
  // Interrupts the guest through call_fd if the guest wants one (honours
  // VRING_AVAIL_F_NO_INTERRUPT or the used event index).
  void NotifyGuest();
  // Asks the guest to kick (true) or not to kick (false): busy polling
  // turns kicks off. After enabling, callers re-check with HasAvailable().
  void SetKickEnabled(bool enabled);
  bool HasAvailable() const;

  bool ready() const { return ready_; }
  bool broken() const { return broken_; }
  // A signal to call_fd would have blocked (eventfd_io.h): the queue stopped
  // signalling it. From any thread; the connection ends on it.
  bool call_stalled() const { return call_stalled_.load(std::memory_order_acquire); }
  uint16_t size() const { return size_; }
  uint16_t last_avail_idx() const { return last_avail_idx_; }

  int kick_fd = -1;   // owned by the protocol layer
  int call_fd = -1;   // owned by the protocol layer
  int err_fd = -1;    // owned by the protocol layer

 private:
  std::shared_ptr<const GuestMemory> memory_;
  uint16_t size_ = 0;
  VringAddrs addrs_{};
  void* desc_ = nullptr;   // struct vring_desc[size]
  void* avail_ = nullptr;  // struct vring_avail
  void* used_ = nullptr;   // struct vring_used
  uint16_t last_avail_idx_ = 0;
  uint16_t last_used_idx_ = 0;
  uint16_t signalled_used_ = 0;
  bool event_idx_ = false;
  bool ready_ = false;
  bool broken_ = false;
  std::atomic<bool> call_stalled_{false};
};

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_VIRTQUEUE_H_
