// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A page-granular allocator of guest-physical memory for the in-process
// guest: it hands out ranges of the frontend's memfd-backed guest RAM as
// (guest-physical address, host pointer) pairs, the way a guest kernel's
// page allocator would hand out DMA-able pages. First fit over a sorted
// free list with coalescing; control path only (it allocates).
#ifndef VRDMA_GUEST_DRIVER_LIB_GUEST_RAM_ALLOCATOR_H_
#define VRDMA_GUEST_DRIVER_LIB_GUEST_RAM_ALLOCATOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace vrdma::guest {

inline constexpr uint64_t kGuestPageSize = 4096;

// A range of guest RAM.
struct GuestBuffer {
  uint64_t gpa = 0;
  uint8_t* host = nullptr;
  uint64_t size = 0;  // a multiple of kGuestPageSize

  // Guest-physical addresses of every page, in order (for page lists).
  std::vector<uint64_t> page_gpas() const;
};

class GuestRamAllocator {
 public:
  // host: where guest-physical address gpa_base is mapped in this process;
  // size: bytes of guest RAM. gpa_base and size must be page aligned.
  GuestRamAllocator(uint8_t* host, uint64_t gpa_base, uint64_t size);

  // Zeroed pages covering at least `bytes` (0 is rounded up to one page);
  // nullopt when no free range is large enough.
  std::optional<GuestBuffer> Allocate(uint64_t bytes);
  // Returns a buffer obtained from Allocate. Double or foreign frees are
  // ignored and counted (they are bugs in the caller, not guest input).
  void Free(const GuestBuffer& buf);

  uint64_t free_bytes() const;
  uint64_t bad_frees() const { return bad_frees_; }
  uint8_t* HostOf(uint64_t gpa) const { return host_ + (gpa - gpa_base_); }

 private:
  uint8_t* host_;
  uint64_t gpa_base_;
  uint64_t size_;
  std::map<uint64_t, uint64_t> free_;  // gpa -> bytes, no two adjacent
  std::map<uint64_t, uint64_t> used_;  // gpa -> bytes
  uint64_t bad_frees_ = 0;
};

}  // namespace vrdma::guest

#endif  // VRDMA_GUEST_DRIVER_LIB_GUEST_RAM_ALLOCATOR_H_
