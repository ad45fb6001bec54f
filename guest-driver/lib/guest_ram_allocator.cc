// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/lib/guest_ram_allocator.h"

#include <cstring>
#include <iterator>

namespace vrdma::guest {

std::vector<uint64_t> GuestBuffer::page_gpas() const {
  std::vector<uint64_t> pages;
  pages.reserve(size / kGuestPageSize);
  for (uint64_t off = 0; off < size; off += kGuestPageSize) {
    pages.push_back(gpa + off);
  }
  return pages;
}

GuestRamAllocator::GuestRamAllocator(uint8_t* host, uint64_t gpa_base,
                                     uint64_t size)
    : host_(host), gpa_base_(gpa_base), size_(size & ~(kGuestPageSize - 1)) {
  if (size_ > 0) free_[gpa_base_] = size_;
}

std::optional<GuestBuffer> GuestRamAllocator::Allocate(uint64_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes > size_) return std::nullopt;
  const uint64_t need = (bytes + kGuestPageSize - 1) & ~(kGuestPageSize - 1);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const uint64_t gpa = it->first;
    const uint64_t rest = it->second - need;
    free_.erase(it);
    if (rest > 0) free_[gpa + need] = rest;
    used_[gpa] = need;
    GuestBuffer buf{gpa, HostOf(gpa), need};
    std::memset(buf.host, 0, need);
    return buf;
  }
  return std::nullopt;
}

void GuestRamAllocator::Free(const GuestBuffer& buf) {
  auto u = used_.find(buf.gpa);
  if (u == used_.end() || u->second != buf.size) {
    ++bad_frees_;
    return;
  }
  used_.erase(u);
  uint64_t gpa = buf.gpa;
  uint64_t len = buf.size;
  // Coalesce with the following free range...
  auto next = free_.lower_bound(gpa);
  if (next != free_.end() && next->first == gpa + len) {
    len += next->second;
    next = free_.erase(next);
  }
  // ...and with the preceding one.
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == gpa) {
      prev->second += len;
      return;
    }
  }
  free_[gpa] = len;
}

uint64_t GuestRamAllocator::free_bytes() const {
  uint64_t n = 0;
  for (const auto& [gpa, len] : free_) n += len;
  return n;
}

}  // namespace vrdma::guest
