// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Teardown: destroying a VM's objects and detaching the VM. A part of the
// engine (README.md, "Parts"). Each verb unpublishes in one
// Executor::RunSync closure (the object leaves the data path's work lists
// and its VM's tables, its charge is given back; its RNIC object is
// destroyed after the closure, where the slow RNIC calls run:
// rnic_calls.h); the object, with its page views, is freed
// after that, on the calling (control) thread, and so is the RNIC's queue memory
// (Rnic::Reclaim). A referenced object (a PD with MRs, a CQ with QPs, ...)
// is kBusy; DetachVm destroys dependents first.
#ifndef VRDMA_BACKEND_ENGINE_TEARDOWN_H_
#define VRDMA_BACKEND_ENGINE_TEARDOWN_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "backend/base/executor.h"
#include "backend/engine/completions.h"
#include "backend/engine/gsi.h"
#include "backend/engine/engine.h"
#include "backend/engine/objects.h"
#include "backend/engine/recv_path.h"
#include "backend/engine/resources.h"
#include "backend/engine/rnic_calls.h"
#include "backend/engine/send_path.h"
#include "backend/engine/vm_table.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"

namespace vrdma::engine {

class Teardown {
 public:
  struct Parts {
    Resources& resources;
    SendPath& send;
    RecvPath& recv;
    Completions& completions;
    Gsi& gsi;
  };
  Teardown(Rnic& rnic, Executor& executor, sched::Stage& stage, VmTable& vms,
           const Parts& parts, const std::function<policy::Nanos()>& clock)
      : rnic_(rnic), executor_(executor), stage_(stage), vms_(vms),
        resources_(parts.resources), send_(parts.send), recv_(parts.recv),
        completions_(parts.completions), gsi_(parts.gsi), clock_(clock) {}
  Teardown(const Teardown&) = delete;
  Teardown& operator=(const Teardown&) = delete;

  // Releases everything the VM owns; other VMs are unaffected.
  void DetachVm(VmId id);
  Status DestroyPd(VmId id, uint32_t pd);
  Status DeregMr(VmId id, uint32_t mr);
  Status DestroyCq(VmId id, uint32_t cq);
  Status DestroyQp(VmId id, uint32_t qpn);
  Status DestroyAh(VmId id, uint32_t ah);
  Status DestroySrq(VmId id, uint32_t srq);
  Status DeallocMw(VmId id, uint32_t mw);

 private:
  // Destroys object `handle` of one of the VM's tables on the data-path
  // thread: kBadHandle when it is not there, kBusy while other objects
  // still refer to it (for objects that count references), otherwise
  // `release` undoes its accounting and leaves its RNIC object in the
  // SlowReleases, released after the closure. The object, with its page
  // views, is freed after that, on the calling thread.
  template <typename T, typename Release>
  Status DestroyObject(VmId id, ResourceTable<T> VmContext::*table,
                       uint32_t handle, Release release) {
    VmContext* vm = vms_.Find(id);
    if (vm == nullptr) return Status::kBadHandle;
    Status s = Status::kOk;
    std::unique_ptr<T> dead;
    SlowReleases slow;
    // The closure allocates nothing (a PD's MRs: its RAM MRs).
    slow.Reserve(1, 1, 1, 1, GuestMemory::kMaxRegions, 1, 1);
    executor_.RunSync([&] {
      T* obj = (vm->*table).Lookup(handle);
      if (obj == nullptr) {
        s = Status::kBadHandle;
        return;
      }
      if constexpr (requires { obj->refs; }) {
        if (obj->refs > 0) {
          s = Status::kBusy;
          return;
        }
      }
      release(*vm, *obj, &slow);
      dead = (vm->*table).Remove(handle);
    });
    slow.Release(rnic_, executor_);  // before dead's page views go
    rnic_.Reclaim();  // the RNIC's queue memory, freed here too
    return s;
  }
  // Teardown of single objects, on the data-path thread. Their RNIC
  // objects go to *slow (reserved by the caller).
  void DestroyQpLocked(VmContext& vm, uint32_t handle, SlowReleases* slow);
  // slow == nullptr: the RNIC's MR is already deregistered.
  void DestroyMrLocked(VmContext& vm, uint32_t handle, SlowReleases* slow);
  void DestroyMwLocked(VmContext& vm, uint32_t handle, SlowReleases* slow);
  void DestroyAhLocked(VmContext& vm, uint32_t handle, SlowReleases* slow);
  void DestroySrqLocked(VmContext& vm, uint32_t handle, SlowReleases* slow);
  void DestroyCqLocked(VmContext& vm, uint32_t handle, SlowReleases* slow);
  // A PD's RAM MRs (ram_mrs.h) to *slow, their charge given back.
  void ReleaseRamMrs(VmContext& vm, PdObj& pd, SlowReleases* slow);

  Rnic& rnic_;
  Executor& executor_;
  sched::Stage& stage_;
  VmTable& vms_;
  Resources& resources_;
  SendPath& send_;
  RecvPath& recv_;
  Completions& completions_;
  Gsi& gsi_;
  const std::function<policy::Nanos()>& clock_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_TEARDOWN_H_
