// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A VM's memory as the vhost-user frontend shared it (VHOST_USER_SET_MEM_TABLE):
// a set of regions, each backed by a file descriptor (a memfd) and mapped
// into this process. This is the only way host code reaches guest memory.
//
// A GuestMemory is immutable once built. SET_MEM_TABLE builds a new one and
// swaps the shared_ptr whole (RCU style): readers that still hold the old
// table keep a valid mapping until they drop it, and the data path never
// waits on the control path.
#ifndef VRDMA_BACKEND_MEMORY_GUEST_MEMORY_H_
#define VRDMA_BACKEND_MEMORY_GUEST_MEMORY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/base/status.h"

namespace vrdma {

// One region as described by the frontend. `fd` is owned by the spec until
// GuestMemory::Map takes it (it closes it on failure too).
struct GuestRegionSpec {
  uint64_t guest_phys_addr = 0;
  uint64_t size = 0;
  uint64_t user_addr = 0;    // the frontend's virtual address of the region
  uint64_t mmap_offset = 0;  // offset of the region inside fd
  int fd = -1;
};

// How much the memory layer trusts the frontend's region files.
struct GuestMemoryOptions {
  // Accept a region whose file cannot be sealed against shrinking (a memfd
  // created without MFD_ALLOW_SEALING, a hugetlbfs or tmpfs file). A
  // frontend holding such a file can truncate it under the daemon's mapping
  // and the daemon's next access to that memory dies of SIGBUS: only an
  // operator who trusts the frontend turns this on (the daemon's
  // --allow-unsealed-memory; docs/operators.md). Default: refused.
  bool allow_unsealed = false;
};

class GuestMemory {
 public:
  // Where guest-physical bytes live in a backing file: what a page view maps.
  struct FileLocation {
    int fd;
    uint64_t offset;            // file offset of the address
    uint64_t bytes_to_end;      // bytes from there to the end of the region
  };

  // Validates the specs and maps every region MAP_SHARED. Takes ownership of
  // every fd, on success and on failure. The rules, all checked here and
  // nowhere else (docs/virtio-rdma.md, "Validation rules"):
  //  - 1..kMaxRegions regions, size > 0, no overflow of any address + size,
  //    no overlap in guest-physical or user address space: kInvalid;
  //  - each fd is a regular file (memfd, tmpfs, hugetlbfs): kInvalid;
  //  - each file is sealed against shrinking (F_SEAL_SHRINK: added here when
  //    the file allows it, then read back with F_GET_SEALS): kAccess when the
  //    seal is not in force, unless options.allow_unsealed;
  //  - [mmap_offset, mmap_offset + size) lies inside the file, checked after
  //    sealing so the file cannot shrink between check and use: kInvalid.
  static Result<std::shared_ptr<const GuestMemory>> Map(
      std::vector<GuestRegionSpec> specs, const GuestMemoryOptions& options);
  static constexpr size_t kMaxRegions = 8;  // VHOST_MEMORY_BASELINE_NREGIONS

  ~GuestMemory();
  GuestMemory(const GuestMemory&) = delete;
  GuestMemory& operator=(const GuestMemory&) = delete;

  // Host pointer to [gpa, gpa + len) when the whole range lies in one
  // region; kFault otherwise (also on arithmetic overflow). len may be 0.
  Result<uint8_t*> Translate(uint64_t gpa, uint64_t len) const;
  // The same for a frontend virtual address (vring addresses use these).
  Result<uint8_t*> TranslateUserAddr(uint64_t uva, uint64_t len) const;
  // The backing file of guest-physical address gpa.
  Result<FileLocation> Locate(uint64_t gpa) const;

  // Region i (i < region_count()): its guest-physical range and the host
  // mapping of it (RAM MRs, docs/virtio-rdma.md §4.8, register it whole).
  struct RegionView {
    uint64_t gpa = 0;
    uint64_t size = 0;
    uint8_t* host = nullptr;
  };
  RegionView region(size_t i) const {
    const Region& r = regions_[i];
    return {r.spec.guest_phys_addr, r.spec.size, r.host};
  }
  size_t region_count() const { return regions_.size(); }
  uint64_t total_bytes() const;

 private:
  struct Region {
    GuestRegionSpec spec;
    uint8_t* host = nullptr;    // mapping of [mmap_offset, mmap_offset+size)
    uint8_t* map_base = nullptr;
    size_t map_len = 0;
  };
  GuestMemory() = default;
  std::vector<Region> regions_;
};

// A contiguous host view of scattered guest pages (an MR or a ring): a
// reserved virtual range into which each run of file-contiguous pages is
// mapped MAP_FIXED|MAP_SHARED from the guest's backing file. The view stays
// valid across SET_MEM_TABLE because it maps the file, not the table.
// Only the listed pages are reachable through it: nothing else of guest RAM.
//
// Each run costs one kernel mapping (a VMA; the process has at most
// vm.max_map_count of them): a physically contiguous buffer is one mapping
// however large, a list of scattered or aliased pages is one per page.
// Callers charge mappings() to whoever asked for the view.
class GuestPageView {
 public:
  static constexpr uint64_t kPageSize = 4096;
  // Every gpa must be kPageSize aligned and lie in guest memory (kInvalid,
  // kFault). kNoResource, before anything is mapped, when the view would
  // take more than max_mappings kernel mappings.
  static Result<GuestPageView> Map(const GuestMemory& memory,
                                   std::span<const uint64_t> page_gpas,
                                   uint32_t max_mappings);
  // Kernel mappings a view of these pages takes (its runs of
  // file-contiguous pages); kInvalid/kFault as Map.
  static Result<uint32_t> CountMappings(const GuestMemory& memory,
                                        std::span<const uint64_t> page_gpas);

  GuestPageView() = default;
  GuestPageView(GuestPageView&& other) noexcept;
  GuestPageView& operator=(GuestPageView&& other) noexcept;
  ~GuestPageView();

  uint8_t* data() const { return base_; }
  size_t size() const { return size_; }
  uint32_t mappings() const { return mappings_; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t mappings_ = 0;
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_MEMORY_GUEST_MEMORY_H_
