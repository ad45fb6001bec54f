// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What a VM's objects cost the host, beyond their table slots, and the one
// rule that bounds it: an object is published only when its whole charge
// fits in what its VM has left of each quota, and gives the charge back
// when it is destroyed. A VM at its quota gets kNoResource; nobody else
// notices (docs/security.md).
#ifndef VRDMA_BACKEND_ENGINE_QUOTA_H_
#define VRDMA_BACKEND_ENGINE_QUOTA_H_

#include <cstdint>

#include "backend/engine/engine.h"

namespace vrdma::engine {

struct Charge {
  uint64_t pinned_bytes = 0;  // guest pages its page views map
  // Daemon memory: the engine's shadow state for the object and what the
  // RNIC allocates for it (Rnic::*HostBytes).
  uint64_t host_bytes = 0;
  uint32_t mappings = 0;  // kernel mappings of its page views
};

// Headroom left under a quota (0 when usage already exceeds it).
inline uint64_t Left(uint64_t quota, uint64_t used) {
  return used < quota ? quota - used : 0;
}

inline bool Fits(const Quotas& q, const VmStats& used, const Charge& c) {
  return c.pinned_bytes <= Left(q.max_pinned_bytes, used.pinned_bytes) &&
         c.host_bytes <= Left(q.max_host_bytes, used.host_bytes) &&
         c.mappings <= Left(q.max_mappings, used.mappings);
}

inline void Take(VmStats& used, const Charge& c) {
  used.pinned_bytes += c.pinned_bytes;
  used.host_bytes += c.host_bytes;
  used.mappings += c.mappings;
}

inline void GiveBack(VmStats& used, const Charge& c) {
  used.pinned_bytes -= c.pinned_bytes;
  used.host_bytes -= c.host_bytes;
  used.mappings -= c.mappings;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_QUOTA_H_
