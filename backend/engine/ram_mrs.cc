// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RAM MRs (ram_mrs.h): finding a memory table's regions, and registering
// them in a kernel PD (Resources::EnsureRamMrs, ReplaceRamMrs), where the
// RNIC's slow calls run (rnic_calls.h), published in one RunSync closure.
#include "backend/engine/ram_mrs.h"

#include <utility>

#include "backend/engine/resources.h"
#include "backend/engine/rnic_calls.h"

namespace vrdma::engine {
namespace {

// The region holding gpa, as [*start, *end); false when gpa is not RAM.
// Its start by bisection over [0, gpa]: an address below the start is
// either not RAM or in a region that ends at or before it (regions never
// overlap), so "in the same region" is false below the start and true
// from it.
bool RegionAt(const GuestMemory& memory, uint64_t gpa, uint64_t* start, uint64_t* end) {
  Result<GuestMemory::FileLocation> at = memory.Locate(gpa);
  if (!at.ok()) return false;
  *end = gpa + at->bytes_to_end;  // GuestMemory::Map refused wrapping regions
  uint64_t lo = 0, hi = gpa;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    Result<GuestMemory::FileLocation> m = memory.Locate(mid);
    if (m.ok() && mid + m->bytes_to_end == *end) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  *start = lo;
  return true;
}

}  // namespace

Status FindRamRegions(const GuestMemory& memory, std::span<const uint64_t> seeds,
                      RamRegions* out) {
  out->count = 0;
  auto add = [&](uint64_t gpa) {
    for (uint32_t i = 0; i < out->count; ++i) {
      const RamRegion& r = out->regions[i];
      if (gpa >= r.gpa && gpa - r.gpa < r.size) return;  // known
    }
    uint64_t start = 0, end = 0;
    if (out->count == out->regions.size() || !RegionAt(memory, gpa, &start, &end)) return;
    Result<uint8_t*> host = memory.Translate(start, end - start);
    if (!host.ok()) return;
    out->regions[out->count++] = RamRegion{start, end - start, *host};
  };
  add(0);
  for (uint64_t s : seeds) add(s);
  // Neighbours: a region that starts where a known one ends, or ends where
  // it starts (the list grows while this walks it; at most kMaxRegions).
  for (uint32_t i = 0; i < out->count; ++i) {
    const RamRegion r = out->regions[i];
    if (r.gpa + r.size != 0) add(r.gpa + r.size);
    if (r.gpa != 0) add(r.gpa - 1);
  }
  return out->count == memory.region_count() ? Status::kOk : Status::kUnsupported;
}

Status Resources::EnsureRamMrs(VmContext& vm, uint32_t pd, std::span<const uint64_t> seeds) {
  const PdObj* p = vm.pds.Lookup(pd);  // only this thread changes the tables
  if (p == nullptr) return Status::kBadHandle;
  if (p->ram.count > 0) return Status::kOk;
  if (!vm.memory) return Status::kFault;
  return ReplaceRamMrs(vm, pd, vm.memory, seeds);
}

Status Resources::ReplaceRamMrs(VmContext& vm, uint32_t pd,
                                std::shared_ptr<const GuestMemory> memory,
                                std::span<const uint64_t> seeds) {
  const PdObj* p = vm.pds.Lookup(pd);
  if (p == nullptr) return Status::kBadHandle;
  RamMrs fresh;
  Status status = Status::kOk;
  RamRegions regions;
  if (memory != nullptr) status = FindRamRegions(*memory, seeds, &regions);
  if (memory != nullptr && status == Status::kOk) {
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < regions.count; ++i) bytes += regions.regions[i].size;
    fresh.charge.pinned_bytes = limits_.pins_memory ? bytes : 0;
    // Against what the VM would use without the PD's current RAM MRs.
    VmStats without = vm.stats;
    GiveBack(without, p->ram.charge);
    if (!Fits(vm.config.quotas, without, fresh.charge)) status = Status::kNoResource;
  }
  if (status == Status::kOk && memory != nullptr) {
    // Registered where the slow calls run: a physical RNIC pins the VM's
    // RAM meanwhile, beside the data path.
    const RnicPd pd_rnic = p->rnic;
    fresh.memory = memory;
    status = RunRnicControl(rnic_, executor_, [&] {
      for (uint32_t i = 0; i < regions.count; ++i) {
        const RamRegion& r = regions.regions[i];
        Result<RnicMr> mr = rnic_.RegMr(pd_rnic, r.host, r.size, r.gpa, kAccessLocalWrite);
        if (!mr.ok()) return mr.status();
        fresh.mrs[fresh.count++] = RamMr{r.gpa, r.size, *mr};
      }
      return Status::kOk;
    });
  }
  if (status != Status::kOk) {
    // What was registered goes; the PD loses its RAM MRs too, so no
    // kernel SGE reaches memory of an old table (they fail LOC_PROT_ERR).
    RunRnicControl(rnic_, executor_, [&] {
      for (uint32_t i = 0; i < fresh.count; ++i) (void)rnic_.DeregMr(fresh.mrs[i].rnic);
    });
    fresh = RamMrs{};
  }
  RamMrs old;
  bool published = false;
  executor_.RunSync([&] {
    PdObj* owner = vm.pds.Lookup(pd);
    if (owner == nullptr) return;
    VmStats without = vm.stats;
    GiveBack(without, owner->ram.charge);
    if (!Fits(vm.config.quotas, without, fresh.charge)) return;
    GiveBack(vm.stats, owner->ram.charge);
    Take(vm.stats, fresh.charge);
    old = std::move(owner->ram);
    owner->ram = std::move(fresh);
    published = true;
  });
  RamMrs& gone = published ? old : fresh;
  RunRnicControl(rnic_, executor_, [&] {
    for (uint32_t i = 0; i < gone.count; ++i) (void)rnic_.DeregMr(gone.mrs[i].rnic);
  });
  return published ? status : Status::kNoResource;
}

}  // namespace vrdma::engine
