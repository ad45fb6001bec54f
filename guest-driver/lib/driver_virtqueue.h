// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The DRIVER side of one split virtqueue (virtio 1.x, <linux/virtio_ring.h>
// layout), as a guest kernel would run it: the descriptor table, avail ring
// and used ring live in guest RAM; the driver adds descriptor chains of
// guest-physical buffers, publishes them, decides whether the device wants
// a kick, and polls the used ring.
//
// Memory ordering (the device runs in another process):
//   - descriptors and the avail ring entry are written, then avail->idx is
//     stored with release semantics, so the device (which loads avail->idx
//     with acquire) sees complete chains;
//   - a full fence separates the avail->idx store from reading the device's
//     notification suppression (used->flags or avail_event), as in Linux's
//     virtqueue_kick_prepare(): otherwise a kick could be lost;
//   - used->idx is loaded with acquire before its entries are read.
//
// Not thread-safe: one thread drives a queue.
#ifndef VRDMA_GUEST_DRIVER_LIB_DRIVER_VIRTQUEUE_H_
#define VRDMA_GUEST_DRIVER_LIB_DRIVER_VIRTQUEUE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

// <linux/virtio_ring.h> types, included only by the .cc (its legacy inline
// helpers do not compile as C++).
struct vring_desc;
struct vring_avail;
struct vring_used;

namespace vrdma::guest {

// One buffer of a chain, in guest-physical terms.
struct DriverBuf {
  uint64_t gpa = 0;
  uint32_t len = 0;
  bool device_writable = false;
};

struct UsedElem {
  uint16_t head = 0;     // the id Add() returned
  uint32_t written = 0;  // bytes the device wrote into the chain
};

class DriverVirtqueue {
 public:
  // Bytes of guest RAM the three rings need for `size` entries (descriptor
  // table, avail ring with used_event, used ring with avail_event at a
  // 4-byte aligned offset), rounded to whole 4 KiB pages.
  static uint64_t RingBytes(uint16_t size);

  DriverVirtqueue() = default;
  DriverVirtqueue(const DriverVirtqueue&) = delete;
  DriverVirtqueue& operator=(const DriverVirtqueue&) = delete;

  // Lays the rings out in [host, host + RingBytes(size)), which is guest
  // RAM at guest-physical address gpa (zeroed by the caller). size: power of
  // two, 1 .. 32768. event_idx: VIRTIO_RING_F_EVENT_IDX was negotiated.
  // The driver never wants interrupts (it polls), so it sets
  // VRING_AVAIL_F_NO_INTERRUPT and keeps used_event behind.
  bool Init(uint8_t* host, uint64_t gpa, uint16_t size, bool event_idx);

  uint16_t size() const { return size_; }
  uint64_t desc_gpa() const { return gpa_; }
  uint64_t avail_gpa() const { return gpa_ + avail_off_; }
  uint64_t used_gpa() const { return gpa_ + used_off_; }
  uint16_t num_free() const { return num_free_; }
  // Chains added but not yet returned by the device.
  uint16_t in_flight() const { return chains_in_flight_; }

  // Adds one chain (device-readable buffers must come before writable ones;
  // the caller orders them). Returns the head id, or nullopt when there are
  // not enough free descriptors. Not visible to the device until Publish().
  std::optional<uint16_t> Add(std::span<const DriverBuf> bufs);
  // Makes every added chain visible to the device. Returns true when the
  // device asked to be kicked for them (VRING_USED_F_NO_NOTIFY clear, or the
  // avail_event index was crossed).
  bool Publish();
  // The next used element, or nullopt. Frees the chain's descriptors.
  std::optional<UsedElem> PollUsed();
  // True when PollUsed() would return something.
  bool HasUsed() const;

 private:
  uint8_t* host_ = nullptr;
  uint64_t gpa_ = 0;
  uint16_t size_ = 0;
  bool event_idx_ = false;
  uint64_t avail_off_ = 0;
  uint64_t used_off_ = 0;
  ::vring_desc* desc_ = nullptr;
  ::vring_avail* avail_ = nullptr;
  ::vring_used* used_ = nullptr;

  uint16_t free_head_ = 0;
  uint16_t num_free_ = 0;
  uint16_t avail_idx_ = 0;       // next avail slot (shadow of avail->idx)
  uint16_t published_idx_ = 0;   // avail->idx at the last Publish()
  uint16_t last_used_idx_ = 0;
  uint16_t chains_in_flight_ = 0;
  std::vector<uint16_t> chain_len_;  // per head: descriptors in the chain
};

}  // namespace vrdma::guest

#endif  // VRDMA_GUEST_DRIVER_LIB_DRIVER_VIRTQUEUE_H_
