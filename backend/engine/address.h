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

// kInvalid: sgid_index outside the VM's GIDs, no GRH (RoCE needs one),
// port other than 1, flow label beyond 20 bits.
inline Status CheckGuestAh(const VmContext& vm, const GuestAh& ah) {
  if (ah.sgid_index >= vm.config.gids.size()) return Status::kInvalid;
  if (!ah.is_global || ah.port_num != 1 || ah.flow_label > 0xfffff)
    return Status::kInvalid;
  return Status::kOk;
}

// ah must have passed CheckGuestAh for vm.
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
