// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The attached VMs and the owner of every QPN on this engine: shared state
// every part reads, not a part. Written only inside Executor::RunSync
// closures (Resources and QpControl publish, Teardown unpublishes); read on
// the data-path thread and by control verbs' checks (FindVm).
#ifndef VRDMA_BACKEND_ENGINE_VM_TABLE_H_
#define VRDMA_BACKEND_ENGINE_VM_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <optional>

#include "backend/engine/key_map.h"
#include "backend/engine/objects.h"
#include "backend/engine/resource_table.h"

namespace vrdma::engine {

struct VmTable {
  VmTable(uint32_t max_vms, uint32_t rnic_max_qp)
      : vms(max_vms),
        qpn_owner(std::min<uint32_t>(std::max<uint32_t>(rnic_max_qp, 1),
                                     1u << 20)) {}

  VmContext* Find(VmId id) const { return vms.Lookup(id); }
  // One of vm's QPs by its QPN (the guest names QPs by QPN).
  static QpObj* FindQp(const VmContext& vm, uint32_t qpn) {
    std::optional<uint32_t> h = vm.qpn_to_qp.Find(qpn);
    return h ? vm.qps.Lookup(*h) : nullptr;
  }
  // A QP of any VM of this engine by its QPN (null: a remote peer's), and
  // its VM.
  QpObj* FindAnyQp(uint32_t qpn, VmContext** vm_out = nullptr) const {
    std::optional<uint32_t> owner = qpn_owner.Find(qpn);
    if (!owner) return nullptr;
    VmContext* vm = Find(*owner);
    if (vm_out != nullptr) *vm_out = vm;
    return vm ? FindQp(*vm, qpn) : nullptr;
  }

  ResourceTable<VmContext> vms;
  KeyMap qpn_owner;  // qpn -> VmId, every VM's QPs
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_VM_TABLE_H_
