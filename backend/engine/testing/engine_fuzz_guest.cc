// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/testing/engine_fuzz_guest.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vrdma::engine::fuzz {
namespace {

constexpr uint64_t kGpaLow = 0x100000;     // layout 0, and file [0, 40) in 1
constexpr uint64_t kGpaHigh = 0x40000000;  // layout 1: file [48, 96)
constexpr uint32_t kLowPages1 = 40;
constexpr uint32_t kHighFirst1 = 48;
constexpr uint64_t kUnmappedGpa = 0x7000000000ull;

void Magic(uint8_t vm, uint8_t out[4]) {
  out[0] = kMagic0;
  out[1] = 0x5a;
  out[2] = 0x96;
  out[3] = static_cast<uint8_t>(0xe0 + vm);
}

}  // namespace

void Fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "fuzz_engine invariant violated: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::fflush(stderr);
  abort();
}

// The VM's initial RAM: computed once per VM index (fuzzing runs many
// inputs per process).
static const std::vector<uint8_t>& Pattern(uint8_t index) {
  static std::vector<uint8_t> patterns[8];
  std::vector<uint8_t>& pat = patterns[index % 8];
  if (!pat.empty()) return pat;
  pat.resize(kVmBytes);
  uint8_t magic[4];
  Magic(index, magic);
  for (uint64_t o = 0; o < kVmBytes; o += 16) {
    uint8_t* c = pat.data() + o;
    std::memcpy(c, magic, 4);
    const uint32_t off = static_cast<uint32_t>(o);
    std::memcpy(c + 4, &off, 4);
    uint64_t h = (o + 1) ^ (uint64_t{index} << 40);  // splitmix64
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    std::memcpy(c + 8, &h, 8);
    // Only a magic holds the magic's first byte.
    for (int i = 4; i < 16; ++i) {
      if (c[i] == kMagic0) c[i] = 0;
    }
  }
  return pat;
}

FuzzGuest::FuzzGuest(uint8_t index) : index_(index), shadow_(Pattern(index)) {
  fd_ = memfd_create("fuzz-guest-ram", MFD_ALLOW_SEALING);
  if (fd_ < 0 || ftruncate(fd_, kVmBytes) != 0) Fail("memfd");
  void* p = mmap(nullptr, kVmBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) Fail("mmap");
  ram_ = static_cast<uint8_t*>(p);
  std::memcpy(ram_, shadow_.data(), kVmBytes);
}

FuzzGuest* FuzzGuest::Get(uint8_t index) {
  static std::unique_ptr<FuzzGuest> pool[8];
  std::unique_ptr<FuzzGuest>& g = pool[index % 8];
  if (!g) {
    g.reset(new FuzzGuest(index));
    return g.get();
  }
  // Back to the pattern: only the pages that changed are copied.
  const std::vector<uint8_t>& pat = Pattern(index);
  for (uint64_t o = 0; o < kVmBytes; o += kPage) {
    if (std::memcmp(g->ram_ + o, pat.data() + o, kPage) != 0)
      std::memcpy(g->ram_ + o, pat.data() + o, kPage);
    if (std::memcmp(g->shadow_.data() + o, pat.data() + o, kPage) != 0)
      std::memcpy(g->shadow_.data() + o, pat.data() + o, kPage);
  }
  g->changed_bytes_ = 0;
  std::fill(g->writes_.begin(), g->writes_.end(), 0);
  return g.get();
}

FuzzGuest::~FuzzGuest() {
  munmap(ram_, kVmBytes);
  close(fd_);
}

std::shared_ptr<const GuestMemory> FuzzGuest::MakeMemory(int layout) const {
  std::vector<GuestRegionSpec> specs;
  auto add = [&](uint64_t gpa, uint32_t first, uint32_t pages) {
    GuestRegionSpec s;
    s.guest_phys_addr = gpa;
    s.size = uint64_t{pages} * kPage;
    s.user_addr = 0x7f0000000000ull + gpa;
    s.mmap_offset = uint64_t{first} * kPage;
    s.fd = dup(fd_);
    specs.push_back(s);
  };
  if (layout == 0) {
    add(kGpaLow, 0, kVmPages);
  } else if (layout == 1) {
    add(kGpaHigh, kHighFirst1, kVmPages - kHighFirst1);
    add(kGpaLow, 0, kLowPages1);
  } else {
    return nullptr;
  }
  Result<std::shared_ptr<const GuestMemory>> m =
      GuestMemory::Map(std::move(specs), GuestMemoryOptions{});
  if (!m.ok()) Fail("GuestMemory::Map(layout %d) failed", layout);
  return *m;
}

std::optional<uint32_t> FuzzGuest::FilePage(uint64_t gpa, int layout) {
  if (gpa % kPage != 0) return std::nullopt;
  if (layout == 0) {
    if (gpa >= kGpaLow && gpa < kGpaLow + kVmBytes)
      return static_cast<uint32_t>((gpa - kGpaLow) / kPage);
  } else if (layout == 1) {
    if (gpa >= kGpaLow && gpa < kGpaLow + uint64_t{kLowPages1} * kPage)
      return static_cast<uint32_t>((gpa - kGpaLow) / kPage);
    const uint64_t high = uint64_t{kVmPages - kHighFirst1} * kPage;
    if (gpa >= kGpaHigh && gpa < kGpaHigh + high)
      return static_cast<uint32_t>(kHighFirst1 + (gpa - kGpaHigh) / kPage);
  }
  return std::nullopt;
}

uint64_t FuzzGuest::Gpa(uint32_t fp, int layout) {
  fp %= kVmPages;
  if (layout == 0) return kGpaLow + uint64_t{fp} * kPage;
  if (layout == 1) {
    if (fp < kLowPages1) return kGpaLow + uint64_t{fp} * kPage;
    if (fp >= kHighFirst1) return kGpaHigh + uint64_t{fp - kHighFirst1} * kPage;
  }
  return kUnmappedGpa + uint64_t{fp} * kPage;
}

void FuzzGuest::Write(uint64_t foff, std::span<const uint8_t> bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const uint64_t o = (foff + i) % kVmBytes;
    uint8_t b = bytes[i];
    if (b == kMagic0) --b;
    ram_[o] = shadow_[o] = b;
    ++writes_[o / kPage];
  }
}

void FuzzGuest::WriteExact(uint64_t foff, const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t o = (foff + i) % kVmBytes;
    ram_[o] = shadow_[o] = b[i];
    ++writes_[o / kPage];
  }
}

void FuzzGuest::WriteCqConsumer(const RingRec& r, uint32_t c) {
  for (uint32_t i = 0; i < 4; ++i) {
    const uint64_t o = RingFileOffset(r, 256 + i);
    ram_[o] = shadow_[o] = static_cast<uint8_t>(c >> (8 * i));
  }
}

uint32_t FuzzGuest::Load32(uint64_t foff) const {
  uint32_t v = 0;
  if (foff + 4 <= kVmBytes) {
    v = __atomic_load_n(
        reinterpret_cast<const uint32_t*>(ram_ + (foff & ~3ull)),
        __ATOMIC_ACQUIRE);
  }
  return v;
}

void FuzzGuest::RingWrite(const RingRec& r, uint64_t off, const void* p,
                          size_t n, bool exact) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t f = RingFileOffset(r, off + i);
    if (exact) {
      WriteExact(f, b + i, 1);
    } else {
      Write(f, {b + i, 1});
    }
  }
}

void FuzzGuest::RingRead(const RingRec& r, uint64_t off, void* p,
                         size_t n) const {
  uint8_t* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = ram_[RingFileOffset(r, off + i)];
}

void FuzzGuest::CheckIsolation(const std::vector<const RingRec*>& rings,
                               const std::vector<const MrRec*>& mrs,
                               const std::vector<SgeRef>& refs, bool all_local,
                               const char* step) {
  for (uint32_t p = 0; p < kVmPages; ++p) {
    uint8_t* a = ram_ + uint64_t{p} * kPage;
    uint8_t* s = shadow_.data() + uint64_t{p} * kPage;
    if (std::memcmp(a, s, kPage) == 0) continue;
    std::bitset<kPage> data, ring;
    auto mark = [](std::bitset<kPage>& m, uint64_t lo, uint64_t hi) {
      for (uint64_t i = lo; i < hi && i < kPage; ++i) m.set(i);
    };
    // Concatenated offsets [lo, hi) of an object whose page k is file page
    // p, clipped to that page, marked in m.
    auto mark_span = [&](std::bitset<kPage>& m, uint64_t k, uint64_t lo,
                         uint64_t hi) {
      const uint64_t pl = k * kPage, ph = pl + kPage;
      lo = std::max(lo, pl);
      hi = std::min(hi, ph);
      if (lo < hi) mark(m, lo - pl, hi - pl);
    };
    for (const RingRec* r : rings) {
      for (size_t k = 0; k < r->fpages.size(); ++k) {
        if (r->fpages[k] != p) continue;
        if (r->kind == RingKind::kCq) {
          mark_span(ring, k, 128, 132);
          mark_span(ring, k, 384, r->bytes());
        } else {
          mark_span(ring, k, 256, 260);
        }
      }
    }
    for (const MrRec* m : mrs) {
      const bool remote = m->access & 0xa;  // REMOTE_WRITE | REMOTE_ATOMIC
      const bool local = m->access & 0x1;
      if (!local && !remote) continue;
      for (size_t k = 0; k < m->fpages.size(); ++k) {
        if (m->fpages[k] != p) continue;
        const uint64_t lo = m->fpo, hi = uint64_t{m->fpo} + m->length;
        if (remote || all_local) {
          mark_span(data, k, lo, hi);
          continue;
        }
        for (const SgeRef& r : refs) {
          if (r.lkey != m->lkey || r.len == 0) continue;
          // [r.addr, r.addr + len) in iova, clipped to the MR.
          uint64_t ia = std::max(r.addr, m->iova);
          uint64_t ib = std::min(r.addr + r.len, m->iova + m->length);
          if (r.addr + r.len < r.addr) ib = m->iova + m->length;
          if (ia >= ib) continue;
          mark_span(data, k, lo + (ia - m->iova), lo + (ib - m->iova));
        }
      }
    }
    for (uint32_t i = 0; i < kPage; ++i) {
      if (a[i] == s[i]) continue;
      ++changed_bytes_;
      const uint64_t foff = uint64_t{p} * kPage + i;
      if (!data[i] && !ring[i]) {
        Fail(
            "%s: VM %u byte at file offset %#llx changed outside what it "
            "registered (was %#x, now %#x)",
            step, index_, static_cast<unsigned long long>(foff), s[i], a[i]);
      }
      if (data[i]) continue;
      // A device-owned ring field: no other VM's magic may appear in it.
      for (uint32_t j = i >= 3 ? i - 3 : 0; j <= i && j + 4 <= kPage; ++j) {
        if (a[j] == kMagic0 && a[j + 1] == 0x5a && a[j + 2] == 0x96 &&
            a[j + 3] != 0xe0 + index_) {
          Fail("%s: VM %u ring bytes at file offset %#llx carry VM %d's data",
               step, index_, static_cast<unsigned long long>(foff),
               a[j + 3] - 0xe0);
        }
      }
    }
    std::memcpy(s, a, kPage);
  }
}

}  // namespace vrdma::engine::fuzz
