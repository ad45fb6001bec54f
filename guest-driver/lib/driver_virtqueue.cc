// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/lib/driver_virtqueue.h"

#define VIRTIO_RING_NO_LEGACY
#include <linux/virtio_ring.h>

#include <atomic>

namespace vrdma::guest {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// The ring words shared with the device are accessed as atomics: the device
// is another process.
template <typename T>
T LoadAcquire(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename T>
void StoreRelease(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
template <typename T>
T LoadRelaxed(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
template <typename T>
void StoreRelaxed(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

}  // namespace

uint64_t DriverVirtqueue::RingBytes(uint16_t size) {
  const uint64_t desc = 16ull * size;
  const uint64_t avail = 6 + 2ull * size;        // flags, idx, ring, used_event
  const uint64_t used_off = AlignUp(desc + avail, 4);
  const uint64_t used = 6 + 8ull * size;         // flags, idx, ring, avail_event
  return AlignUp(used_off + used, kPage);
}

bool DriverVirtqueue::Init(uint8_t* host, uint64_t gpa, uint16_t size,
                           bool event_idx) {
  if (size == 0 || size > 32768 || (size & (size - 1)) != 0) return false;
  host_ = host;
  gpa_ = gpa;
  size_ = size;
  event_idx_ = event_idx;
  avail_off_ = 16ull * size;
  used_off_ = AlignUp(avail_off_ + 6 + 2ull * size, 4);
  desc_ = reinterpret_cast<vring_desc*>(host);
  avail_ = reinterpret_cast<vring_avail*>(host + avail_off_);
  used_ = reinterpret_cast<vring_used*>(host + used_off_);
  for (uint16_t i = 0; i < size; ++i) {
    desc_[i].next = static_cast<uint16_t>((i + 1) % size);
  }
  free_head_ = 0;
  num_free_ = size;
  avail_idx_ = published_idx_ = last_used_idx_ = 0;
  chains_in_flight_ = 0;
  chain_len_.assign(size, 0);
  // We poll: no interrupts wanted.
  StoreRelaxed(&avail_->flags, static_cast<uint16_t>(VRING_AVAIL_F_NO_INTERRUPT));
  if (event_idx_) StoreRelaxed(&avail_->ring[size_], static_cast<uint16_t>(0xffff));
  return true;
}

std::optional<uint16_t> DriverVirtqueue::Add(std::span<const DriverBuf> bufs) {
  if (bufs.empty() || bufs.size() > num_free_) return std::nullopt;
  const uint16_t head = free_head_;
  uint16_t idx = head;
  for (size_t i = 0; i < bufs.size(); ++i) {
    vring_desc& d = desc_[idx];
    d.addr = bufs[i].gpa;
    d.len = bufs[i].len;
    uint16_t flags = bufs[i].device_writable ? VRING_DESC_F_WRITE : 0;
    if (i + 1 < bufs.size()) flags |= VRING_DESC_F_NEXT;
    d.flags = flags;
    idx = d.next;  // the free list links through `next`
  }
  free_head_ = idx;
  num_free_ -= static_cast<uint16_t>(bufs.size());
  chain_len_[head] = static_cast<uint16_t>(bufs.size());
  ++chains_in_flight_;
  StoreRelaxed(&avail_->ring[avail_idx_ & (size_ - 1)], head);
  ++avail_idx_;
  return head;
}

bool DriverVirtqueue::Publish() {
  const uint16_t old = published_idx_;
  const uint16_t now = avail_idx_;
  if (old == now) return false;
  StoreRelease(&avail_->idx, now);
  published_idx_ = now;
  // Order the idx store before reading the device's suppression state.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (event_idx_) {
    // avail_event is the 16 bits after the used ring (vring_avail_event()).
    const uint16_t ev =
        LoadRelaxed(reinterpret_cast<const uint16_t*>(&used_->ring[size_]));
    return vring_need_event(ev, now, old);
  }
  return (LoadRelaxed(&used_->flags) & VRING_USED_F_NO_NOTIFY) == 0;
}

bool DriverVirtqueue::HasUsed() const {
  return LoadAcquire(&used_->idx) != last_used_idx_;
}

std::optional<UsedElem> DriverVirtqueue::PollUsed() {
  if (LoadAcquire(&used_->idx) == last_used_idx_) return std::nullopt;
  const vring_used_elem& e = used_->ring[last_used_idx_ & (size_ - 1)];
  const uint32_t id = LoadRelaxed(&e.id);
  const uint32_t written = LoadRelaxed(&e.len);
  ++last_used_idx_;
  if (event_idx_) {
    // Keep used_event just behind what we consumed: the device never finds
    // a reason to interrupt a polling driver.
    StoreRelaxed(&avail_->ring[size_], static_cast<uint16_t>(last_used_idx_ - 1));
  }
  if (id >= size_ || chain_len_[id] == 0) {
    // A device bug; the chain cannot be freed safely. Report it as empty.
    return UsedElem{static_cast<uint16_t>(id & 0xffff), 0};
  }
  // Return the chain's descriptors to the free list.
  uint16_t n = chain_len_[id];
  chain_len_[id] = 0;
  uint16_t tail = static_cast<uint16_t>(id);
  for (uint16_t i = 1; i < n; ++i) tail = desc_[tail].next;
  desc_[tail].next = free_head_;
  free_head_ = static_cast<uint16_t>(id);
  num_free_ += n;
  --chains_in_flight_;
  return UsedElem{static_cast<uint16_t>(id), written};
}

}  // namespace vrdma::guest
