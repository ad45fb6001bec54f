// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RAM MRs (ram_mrs.h): registering a memory table's regions in a kernel PD (Resources::EnsureRamMrs, ReplaceRamMrs), where the
// RNIC's slow calls run (rnic_calls.h), published in one RunSync closure.
#include "backend/engine/ram_mrs.h"

#include <utility>

#include "backend/engine/resources.h"
#include "backend/engine/rnic_calls.h"

namespace vrdma::engine {
Status Resources::EnsureRamMrs(VmContext& vm, uint32_t pd) {
  const PdObj* p = vm.pds.Lookup(pd);  // only this thread changes the tables
  if (p == nullptr) return Status::kBadHandle;
  if (p->ram.count > 0) return Status::kOk;
  if (!vm.memory) return Status::kFault;
  return ReplaceRamMrs(vm, pd, vm.memory);
}

Status Resources::ReplaceRamMrs(VmContext& vm, uint32_t pd,
                                std::shared_ptr<const GuestMemory> memory) {
  const PdObj* p = vm.pds.Lookup(pd);
  if (p == nullptr) return Status::kBadHandle;
  RamMrs fresh;
  Status status = Status::kOk;
  if (memory != nullptr) {
    fresh.charge.pinned_bytes = limits_.pins_memory ? memory->total_bytes() : 0;
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
      for (size_t i = 0; i < memory->region_count(); ++i) {
        const GuestMemory::RegionView r = memory->region(i);
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
