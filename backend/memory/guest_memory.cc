// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/memory/guest_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace vrdma {
namespace {

constexpr uint64_t kPage = GuestPageView::kPageSize;

void CloseAll(std::vector<GuestRegionSpec>& specs) {
  for (auto& s : specs) {
    if (s.fd >= 0) close(s.fd);
    s.fd = -1;
  }
}

// [a, a+alen) and [b, b+blen) intersect. Callers checked a+alen, b+blen do
// not overflow.
bool Overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  return a < b + blen && b < a + alen;
}

// The file can no longer shrink: F_SEAL_SHRINK is added where the file
// allows it (a memfd created with MFD_ALLOW_SEALING) and is in force when
// F_GET_SEALS says so, whoever added it (QEMU's memory-backend-memfd seals
// GROW|SHRINK|SEAL itself, after which F_ADD_SEALS fails with EPERM).
bool SealedAgainstShrink(int fd) {
  (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
  const int seals = fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & F_SEAL_SHRINK) != 0;
}

// One spec: syntax, the kind of its fd, its seal, and that the file backs
// the whole range (or touching the tail of the mapping would SIGBUS the
// daemon). The seal comes before the size check: a file that is checked
// first and sealed afterwards could shrink in between.
Status CheckSpec(const GuestRegionSpec& s, const GuestMemoryOptions& options) {
  uint64_t end;
  if (s.size == 0 || s.fd < 0) return Status::kInvalid;
  if (__builtin_add_overflow(s.guest_phys_addr, s.size, &end)) return Status::kInvalid;
  if (__builtin_add_overflow(s.user_addr, s.size, &end)) return Status::kInvalid;
  uint64_t file_end;
  if (__builtin_add_overflow(s.mmap_offset, s.size, &file_end)) return Status::kInvalid;
  // The aligned-down mapping length must fit size_t and not overflow.
  uint64_t delta = s.mmap_offset % kPage;
  if (__builtin_add_overflow(s.size, delta, &end)) return Status::kInvalid;
  struct stat st;
  if (fstat(s.fd, &st) != 0) return Status::kIoError;
  // Guest RAM is a file (memfd, tmpfs, hugetlbfs); never a device, pipe or
  // socket.
  if (!S_ISREG(st.st_mode)) return Status::kInvalid;
  if (!SealedAgainstShrink(s.fd) && !options.allow_unsealed) return Status::kAccess;
  if (fstat(s.fd, &st) != 0) return Status::kIoError;
  if (static_cast<uint64_t>(st.st_size) < file_end) return Status::kInvalid;
  return Status::kOk;
}

}  // namespace

Result<std::shared_ptr<const GuestMemory>> GuestMemory::Map(std::vector<GuestRegionSpec> specs,
                                                            const GuestMemoryOptions& options) {
  if (specs.empty() || specs.size() > kMaxRegions) {
    CloseAll(specs);
    return Status::kInvalid;
  }
  for (const auto& s : specs) {
    if (Status st = CheckSpec(s, options); st != Status::kOk) {
      CloseAll(specs);
      return st;
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    for (size_t j = i + 1; j < specs.size(); ++j) {
      const auto& a = specs[i];
      const auto& b = specs[j];
      if (Overlaps(a.guest_phys_addr, a.size, b.guest_phys_addr, b.size) ||
          Overlaps(a.user_addr, a.size, b.user_addr, b.size)) {
        CloseAll(specs);
        return Status::kInvalid;
      }
    }
  }

  // From here the GuestMemory owns the fds: its destructor closes them and
  // unmaps whatever was mapped, also on a failure half way.
  std::shared_ptr<GuestMemory> mem(new GuestMemory());
  mem->regions_.reserve(specs.size());
  for (auto& s : specs) {
    mem->regions_.push_back(Region{s});
    s.fd = -1;
  }
  for (auto& r : mem->regions_) {
    // mmap needs a page-aligned file offset: map from the aligned-down
    // offset and point `host` at the region's first byte inside it.
    uint64_t delta = r.spec.mmap_offset % kPage;
    uint64_t aligned = r.spec.mmap_offset - delta;
    size_t len = r.spec.size + delta;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, r.spec.fd,
                   static_cast<off_t>(aligned));
    if (p == MAP_FAILED) return Status::kIoError;
    r.map_base = static_cast<uint8_t*>(p);
    r.map_len = len;
    r.host = r.map_base + delta;
  }
  return std::shared_ptr<const GuestMemory>(std::move(mem));
}

GuestMemory::~GuestMemory() {
  for (auto& r : regions_) {
    if (r.map_base != nullptr) munmap(r.map_base, r.map_len);
    if (r.spec.fd >= 0) close(r.spec.fd);
  }
}

uint64_t GuestMemory::total_bytes() const {
  uint64_t total = 0;
  for (const auto& r : regions_) total += r.spec.size;
  return total;
}

Result<uint8_t*> GuestMemory::Translate(uint64_t gpa, uint64_t len) const {
  for (const auto& r : regions_) {
    if (gpa < r.spec.guest_phys_addr) continue;
    uint64_t off = gpa - r.spec.guest_phys_addr;
    if (off >= r.spec.size) continue;
    // Regions never overlap, so a range that starts here but does not end
    // here crosses into another region (or into nothing): a fault.
    if (len > r.spec.size - off) return Status::kFault;
    return r.host + off;
  }
  return Status::kFault;
}

Result<uint8_t*> GuestMemory::TranslateUserAddr(uint64_t uva, uint64_t len) const {
  for (const auto& r : regions_) {
    if (uva < r.spec.user_addr) continue;
    uint64_t off = uva - r.spec.user_addr;
    if (off >= r.spec.size) continue;
    if (len > r.spec.size - off) return Status::kFault;
    return r.host + off;
  }
  return Status::kFault;
}

Result<GuestMemory::FileLocation> GuestMemory::Locate(uint64_t gpa) const {
  for (const auto& r : regions_) {
    if (gpa < r.spec.guest_phys_addr) continue;
    uint64_t off = gpa - r.spec.guest_phys_addr;
    if (off >= r.spec.size) continue;
    return FileLocation{r.spec.fd, r.spec.mmap_offset + off, r.spec.size - off};
  }
  return Status::kFault;
}

// ---------------------------------------------------------------------------

namespace {

// The length in pages of the run of file-contiguous pages starting at
// page_gpas[i] (every page already located).
size_t RunLength(const GuestMemory& memory, std::span<const uint64_t> page_gpas, size_t i) {
  auto first = memory.Locate(page_gpas[i]);
  size_t run = 1;
  while (i + run < page_gpas.size()) {
    auto next = memory.Locate(page_gpas[i + run]);
    if (next->fd != first->fd || next->offset != first->offset + run * kPage) break;
    ++run;
  }
  return run;
}

}  // namespace

Result<uint32_t> GuestPageView::CountMappings(const GuestMemory& memory,
                                              std::span<const uint64_t> page_gpas) {
  if (page_gpas.empty()) return Status::kInvalid;
  uint64_t total;
  if (__builtin_mul_overflow(static_cast<uint64_t>(page_gpas.size()), kPageSize, &total)) {
    return Status::kInvalid;
  }
  for (uint64_t gpa : page_gpas) {
    if (gpa % kPageSize != 0) return Status::kInvalid;
    auto loc = memory.Locate(gpa);
    if (!loc.ok()) return Status::kFault;
    if (loc->bytes_to_end < kPageSize) return Status::kFault;
    // A region whose mmap_offset is not page aligned cannot be mapped page
    // by page from its file.
    if (loc->offset % kPageSize != 0) return Status::kInvalid;
  }
  uint32_t runs = 0;
  for (size_t i = 0; i < page_gpas.size(); i += RunLength(memory, page_gpas, i)) ++runs;
  return runs;
}

Result<GuestPageView> GuestPageView::Map(const GuestMemory& memory,
                                         std::span<const uint64_t> page_gpas,
                                         uint32_t max_mappings) {
  // Every page checked and the cost known before anything is reserved.
  Result<uint32_t> runs = CountMappings(memory, page_gpas);
  if (!runs.ok()) return runs.status();
  if (*runs > max_mappings) return Status::kNoResource;
  const size_t total = page_gpas.size() * kPageSize;
  // Reserve the whole range inaccessible first, so the view is contiguous
  // and nothing else can be mapped into its holes. The runs replace the
  // reservation entirely: the view holds exactly *runs mappings.
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
  if (base == MAP_FAILED) return Status::kIoError;
  GuestPageView view;
  view.base_ = static_cast<uint8_t*>(base);
  view.size_ = total;
  view.mappings_ = *runs;

  size_t i = 0;
  while (i < page_gpas.size()) {
    auto first = memory.Locate(page_gpas[i]);
    const size_t run = RunLength(memory, page_gpas, i);
    void* p = mmap(view.base_ + i * kPageSize, run * kPageSize, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, first->fd, static_cast<off_t>(first->offset));
    if (p == MAP_FAILED) return Status::kIoError;  // view's destructor unmaps
    i += run;
  }
  return view;
}

GuestPageView::GuestPageView(GuestPageView&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mappings_(std::exchange(other.mappings_, 0)) {}

GuestPageView& GuestPageView::operator=(GuestPageView&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, size_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mappings_ = std::exchange(other.mappings_, 0);
  }
  return *this;
}

GuestPageView::~GuestPageView() {
  if (base_ != nullptr) munmap(base_, size_);
}

}  // namespace vrdma
