// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Resources: VM admission and the creation of a VM's PDs, MRs, AHs, CQs and
// SRQs, with their quotas (quota.h), and the queries and stats of a VM. A
// part of the engine (README.md, "Parts"). QPs: QpControl; destruction:
// Teardown.
//
// Threading: every verb checks its input and maps page views on the
// calling (control) thread, asks the RNIC to prepare queue memory there,
// then runs the rest (every Rnic call, every change to a VM's tables) in
// one Executor::RunSync closure, i.e. on the data-path thread; the quota is
// checked again in the closure, where the object is published. RegMr's
// Rnic call runs before that closure, where the slow calls run
// (rnic_calls.h). Stats reads
// through RunSync too; QueryDevice/QueryGid read the VM's immutable config.
#ifndef VRDMA_BACKEND_ENGINE_RESOURCES_H_
#define VRDMA_BACKEND_ENGINE_RESOURCES_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/base/executor.h"
#include "backend/engine/completions.h"
#include "backend/engine/engine.h"
#include "backend/engine/objects.h"
#include "backend/engine/quota.h"
#include "backend/engine/recv_path.h"
#include "backend/engine/vm_table.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

// Guest bytes a ring pins.
inline uint64_t RingPinned(const RingSpec& r) {
  return uint64_t{r.pages.size()} * VIRTIO_RDMA_PAGE_SIZE;
}

// The quota check before any page is mapped: what the object will pin and
// what it costs in host memory as far as known (mappings are checked as
// the views are made, the final charge again when it is published).
inline bool CanStart(const VmContext& vm, uint64_t pinned,
                     uint64_t host_bytes) {
  return Fits(vm.config.quotas, vm.stats, Charge{pinned, host_bytes, 0});
}

// A host-wide budget that the attached VMs' quotas of one kind must fit in
// together (EngineOptions::mapping_budget, pinned_budget): every VM may use
// its whole quota at once, so one at its quota never makes another's call
// fail. Control thread.
class AdmissionBudget {
 public:
  explicit AdmissionBudget(uint64_t limit) : limit_(limit) {}
  bool Fits(uint64_t quota) const { return quota <= limit_ - std::min(admitted_, limit_); }
  void Admit(uint64_t quota) { admitted_ += quota; }
  void Release(uint64_t quota) { admitted_ -= quota; }

 private:
  const uint64_t limit_;
  uint64_t admitted_ = 0;
};

class Resources {
 public:
  struct Budgets {
    uint64_t mappings = UINT64_MAX;  // EngineOptions::mapping_budget
    uint64_t pinned = UINT64_MAX;    // EngineOptions::pinned_budget
  };
  // host_gid: the daemon's own (its probe QPs'), never a VM's.
  Resources(Rnic& rnic, Executor& executor, sched::Stage& stage, VmTable& vms,
            Completions& completions, RecvPath& recv, const Budgets& budgets,
            const Gid& host_gid)
      : rnic_(rnic), executor_(executor), stage_(stage), vms_(vms),
        completions_(completions), recv_(recv), limits_(rnic.limits()),
        host_gid_(host_gid), mappings_(budgets.mappings), pinned_(budgets.pinned) {}
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;

  // VMs (control thread).
  Result<VmId> AttachVm(const VmConfig& config, VmEventSink* sink);
  // A detached VM's GIDs and mapping quota given back to admission
  // (Teardown, after the VM left the table).
  void Release(const VmConfig& config);
  void SetGuestMemory(VmId id, std::shared_ptr<const GuestMemory> memory);
  Result<VmStats> Stats(VmId id) const;
  Result<DeviceAttr> QueryDevice(VmId id) const;
  Result<Gid> QueryGid(VmId id, uint32_t index) const;

  // Objects (control thread).
  Result<uint32_t> CreatePd(VmId id);
  Result<RegMrResult> RegMr(VmId id, const RegMrRequest& req);
  Result<AllocMwResult> AllocMw(VmId id, uint32_t pd, uint8_t type);
  Result<RegMrResult> AllocMr(VmId id, const AllocMrRequest& req);  // fast_reg.cc
  Result<uint32_t> CreateAh(VmId id, uint32_t pd, const GuestAh& ah);
  Result<CreateCqResult> CreateCq(VmId id, const CreateCqRequest& req);
  Status ReqNotifyCq(VmId id, uint32_t cq, bool solicited_only);
  Result<CreateSrqResult> CreateSrq(VmId id, const CreateSrqRequest& req);
  Status ModifySrq(VmId id, uint32_t srq, uint32_t mask, uint32_t max_wr,
                   uint32_t srq_limit);

  // For QpControl (control thread).
  const RnicLimits& limits() const { return limits_; }
  // The RNIC's limits after vm's quotas and the ABI's.
  RnicLimits VmLimits(const VmContext& vm) const;
  // Maps pages into *view and adds its pages and mappings to *charge;
  // kNoResource when the VM's mapping quota, less what *charge already
  // holds, cannot take the view.
  Status MapPages(const VmContext& vm, const std::vector<uint64_t>& pages,
                  GuestPageView* view, Charge* charge) const;
  // The PD's RAM MRs (ram_mrs.h), registered over the VM's memory table
  // unless they already are; kNoResource beyond the pinned-bytes quota.
  Status EnsureRamMrs(VmContext& vm, uint32_t pd);

 private:
  // Registers RAM MRs of pd over memory (none when memory is null) and
  // publishes them in place of the PD's current ones, which are then
  // deregistered. ram_mrs.cc.
  Status ReplaceRamMrs(VmContext& vm, uint32_t pd, std::shared_ptr<const GuestMemory> memory);

  Rnic& rnic_;
  Executor& executor_;
  sched::Stage& stage_;
  VmTable& vms_;
  Completions& completions_;
  RecvPath& recv_;
  const RnicLimits limits_;
  const Gid host_gid_;
  // Admission (control thread): every attached VM's GIDs, and the sums of
  // their mapping and pinning quotas.
  std::vector<Gid> gids_in_use_;
  AdmissionBudget mappings_;
  AdmissionBudget pinned_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RESOURCES_H_
