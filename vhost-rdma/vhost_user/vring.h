// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Split-ring layout and flags (virtio 1.x 2.7, same as <linux/virtio_ring.h>,
// which does not compile as C++). Little-endian host assumed (x86-64).
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_VRING_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_VRING_H_

#include <cstdint>

namespace vrdma::vhost {

inline constexpr uint16_t kVringDescFNext = 1;
inline constexpr uint16_t kVringDescFWrite = 2;
inline constexpr uint16_t kVringDescFIndirect = 4;
inline constexpr uint16_t kVringUsedFNoNotify = 1;
inline constexpr uint16_t kVringAvailFNoInterrupt = 1;

struct VringDesc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags;
  uint16_t next;
};
static_assert(sizeof(VringDesc) == 16);

// Followed in memory by ring[size] and, with EVENT_IDX, used_event.
struct VringAvail {
  uint16_t flags;
  uint16_t idx;
  uint16_t ring[];
};

struct VringUsedElem {
  uint32_t id;
  uint32_t len;
};

// Followed in memory by ring[size] and, with EVENT_IDX, avail_event.
struct VringUsed {
  uint16_t flags;
  uint16_t idx;
  VringUsedElem ring[];
};

// vring_need_event: notify if new_idx passed event_idx since old.
constexpr bool VringNeedEvent(uint16_t event_idx, uint16_t new_idx, uint16_t old) {
  return static_cast<uint16_t>(new_idx - event_idx - 1) < static_cast<uint16_t>(new_idx - old);
}

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_VRING_H_
