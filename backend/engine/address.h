// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Guest address vectors -> RNIC address vectors. The guest chooses a source
// GID only by index into its own GID table; the bytes come from the engine,
// so a VM cannot send as another VM's GID. The destination GID is passed
// through as the fabric address.
#ifndef VRDMA_BACKEND_ENGINE_ADDRESS_H_
#define VRDMA_BACKEND_ENGINE_ADDRESS_H_

#include "backend/base/status.h"
#include "backend/engine/objects.h"

namespace vrdma::engine {

// ah must have passed CheckAh (qp_attr_check.h) with vm's GID count.
inline AddressVector MakeAv(const VmContext& vm, const GuestAh& ah) {
  AddressVector av;
  av.dgid = ah.dgid;
  av.sgid = vm.config.gids[ah.sgid_index];
  av.flow_label = ah.flow_label;
  av.hop_limit = ah.hop_limit;
  av.traffic_class = ah.traffic_class;
  av.sl = ah.sl;
  return av;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_ADDRESS_H_
