// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RAM MRs (docs/virtio-rdma.md §4.8): each region of a VM's memory table
// registered once in a PD that has kernel QPs, local write only, at iova =
// the region's guest-physical base, so that a kernel QP's SGE naming the
// local DMA lkey (VIRTIO_RDMA_LOCAL_DMA_LKEY) with a guest-physical address
// reaches the RNIC as an SGE of the region's MR. They are never in the VM's
// lkey table: no guest names their lkeys, and they carry no remote access.
//
// Registered by Resources (ram_mrs.cc) when a PD's first kernel QP is
// created and again when the memory table changes; released with the PD
// (Teardown). Published inside RunSync; the data path only reads them
// (FindRamLkey, from local_access.h).
#ifndef VRDMA_BACKEND_ENGINE_RAM_MRS_H_
#define VRDMA_BACKEND_ENGINE_RAM_MRS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "backend/base/status.h"
#include "backend/engine/quota.h"
#include "backend/memory/guest_memory.h"
#include "backend/rnic/rnic.h"

namespace vrdma::engine {

struct RamMr {
  uint64_t gpa = 0;  // the region's guest-physical base, also the MR's iova
  uint64_t length = 0;
  RnicMr rnic;
};

// A PD's RAM MRs and the memory table they map (held so that its mappings
// outlive the RNIC's registration).
struct RamMrs {
  std::array<RamMr, GuestMemory::kMaxRegions> mrs{};
  uint32_t count = 0;
  std::shared_ptr<const GuestMemory> memory;
  Charge charge;  // pinned bytes when the RNIC pins (RnicLimits::pins_memory)
};

// The lkey of the RAM MR holding all of [addr, addr + length), when one
// does (an SGE must lie inside one region). Data path: no allocation.
inline std::optional<uint32_t> FindRamLkey(const RamMrs& ram, uint64_t addr, uint32_t length) {
  uint64_t end = 0;
  if (__builtin_add_overflow(addr, uint64_t{length}, &end)) return std::nullopt;
  for (uint32_t i = 0; i < ram.count; ++i) {
    const RamMr& m = ram.mrs[i];
    if (addr >= m.gpa && end <= m.gpa + m.length) return m.rnic.lkey;
  }
  return std::nullopt;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RAM_MRS_H_
