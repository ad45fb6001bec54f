// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Teardown (teardown.h): objects destroyed and VMs detached: unpublished in
// one RunSync closure, freed on the control thread afterwards; their RNIC
// objects destroyed in between, where the slow RNIC calls run
// (rnic_calls.h).
#include "backend/engine/teardown.h"

#include <algorithm>
#include <vector>

#include "backend/engine/mw_access.h"

namespace vrdma::engine {

// ---------------------------------------------------------------- VMs

void Teardown::DetachVm(VmId id) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return;
  // Sized here: the closure allocates nothing for them.
  const size_t qps = vm->qps.size(), mrs = vm->mrs.size();
  SlowReleases slow;
  slow.Reserve(qps, vm->srqs.size(), vm->ahs.size(), vm->mws.size(),
               mrs + vm->pds.size() * GuestMemory::kMaxRegions, vm->cqs.size(), vm->pds.size());
  std::vector<std::unique_ptr<QpObj>> dead_qps;
  std::vector<std::unique_ptr<MrObj>> dead_mrs;
  std::unique_ptr<GsiQp> dead_gsi;
  dead_qps.reserve(qps);
  dead_mrs.reserve(mrs);
  // 1. Off the data path and out of the VM's tables (a completion still in
  // an RNIC CQ finds no QP): the VM's QPs, with their flows and receive
  // queues, its SRQs, windows, MRs, AHs and CQs. Their RNIC objects, and its PDs',
  // are destroyed after, where the slow RNIC calls run, and their page
  // views after that.
  executor_.RunSync([&] {
    for (uint32_t h : vm->qps.Handles()) {
      DestroyQpLocked(*vm, h, &slow);
      dead_qps.push_back(vm->qps.Remove(h));
    }
    for (uint32_t h : vm->srqs.Handles()) DestroySrqLocked(*vm, h, &slow);
    for (uint32_t h : vm->mws.Handles()) DestroyMwLocked(*vm, h, &slow);
    for (uint32_t h : vm->mrs.Handles()) {
      DestroyMrLocked(*vm, h, &slow);
      dead_mrs.push_back(vm->mrs.Remove(h));
    }
    for (uint32_t h : vm->ahs.Handles()) DestroyAhLocked(*vm, h, &slow);
    for (uint32_t h : vm->cqs.Handles()) DestroyCqLocked(*vm, h, &slow);
    for (uint32_t h : vm->pds.Handles()) {
      PdObj* pd = vm->pds.Lookup(h);
      ReleaseRamMrs(*vm, *pd, &slow);
      slow.pds.push_back(pd->rnic);
    }
    dead_gsi = gsi_.Unpublish(*vm);
  });
  slow.Release(rnic_, executor_);
  // 2. Its GIDs, and the VM.
  std::unique_ptr<VmContext> dead;
  executor_.RunSync([&] {
    for (const Gid& g : vm->config.gids) (void)rnic_.RemoveGid(g);
    stage_.RemoveTenant(id);
    completions_.ForgetVm(*vm);
    dead = vms_.vms.Remove(id);
  });
  if (dead) resources_.Release(dead->config);
  // Page views, tables and the RNIC's queue memory are released here, on
  // the control thread.
  rnic_.Reclaim();
}
// ---------------------------------------------------------------- PDs, MRs, AHs

Status Teardown::DestroyPd(VmId id, uint32_t pd) {
  return DestroyObject(id, &VmContext::pds, pd,
                       [&](VmContext& vm, PdObj& obj, SlowReleases* slow) {
                         ReleaseRamMrs(vm, obj, slow);
                         slow->pds.push_back(obj.rnic);
                         --vm.stats.pds;
                       });
}

void Teardown::ReleaseRamMrs(VmContext& vm, PdObj& pd, SlowReleases* slow) {
  // Deregistered after the closure; the memory table they map goes with
  // the PD object, after that.
  for (uint32_t i = 0; i < pd.ram.count; ++i) slow->mrs.push_back(pd.ram.mrs[i].rnic);
  pd.ram.count = 0;
  GiveBack(vm.stats, pd.ram.charge);
  pd.ram.charge = Charge{};
}

void Teardown::DestroyMrLocked(VmContext& vm, uint32_t handle, SlowReleases* slow) {
  MrObj* mr = vm.mrs.Lookup(handle);
  if (mr == nullptr) return;
  if (slow != nullptr) slow->mrs.push_back(mr->rnic);
  if (mr->fast_reg()) {
    vm.fr_index_to_mr.Erase(FrIndex(mr->rnic.lkey));
    --vm.stats.fr_mrs;
    // Kept, charged, for ALLOC_MR to reuse: a REG_MR WR still queued may
    // read it (objects.h). Reserved by AllocMr: no allocation here.
    vm.fr_page_pool.push_back({std::move(mr->fr_pages), mr->fr_capacity});
  } else {
    vm.lkey_to_mr.Erase(mr->rnic.lkey);
  }
  if (PdObj* pd = vm.pds.Lookup(mr->pd)) --pd->refs;
  GiveBack(vm.stats, mr->charge);
  --vm.stats.mrs;
}

Status Teardown::DeregMr(VmId id, uint32_t mr) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (vm->mws.size() == 0) {
    // The view is unmapped after the RNIC let go of the MR.
    return DestroyObject(id, &VmContext::mrs, mr,
                         [&](VmContext& v, MrObj&, SlowReleases* slow) {
                           DestroyMrLocked(v, mr, slow);
                         });
  }
  // Windows may be bound to it, which only the RNIC knows (binds run in SQ
  // order there): deregistered first, so that its refusal (kInvalid, IBA
  // 10.6.7.2.6) leaves the MR registered and published. Its lkey fails on
  // the RNIC from here until the closure unpublishes it; only this thread
  // registers MRs, so the RNIC cannot hand the lkey out again meanwhile.
  const MrObj* obj = vm->mrs.Lookup(mr);  // only this thread changes the table
  if (obj == nullptr) return Status::kBadHandle;
  const RnicMr rnic_mr = obj->rnic;
  VRDMA_RETURN_IF_ERROR(
      RunRnicControl(rnic_, executor_, [&] { return rnic_.DeregMr(rnic_mr); }));
  return DestroyObject(id, &VmContext::mrs, mr,
                       [&](VmContext& v, MrObj&, SlowReleases*) {
                         DestroyMrLocked(v, mr, nullptr);
                       });
}

void Teardown::DestroyMwLocked(VmContext& vm, uint32_t handle, SlowReleases* slow) {
  MwObj* mw = vm.mws.Lookup(handle);
  if (mw == nullptr) return;
  slow->mws.push_back(mw->rnic);  // the RNIC unbinds it first
  vm.mw_index_to_mw.Erase(MwIndex(mw->rnic.rkey));
  if (PdObj* pd = vm.pds.Lookup(mw->pd)) --pd->refs;
  GiveBack(vm.stats, mw->charge);
  --vm.stats.mws;
}

Status Teardown::DeallocMw(VmId id, uint32_t mw) {
  return DestroyObject(id, &VmContext::mws, mw,
                       [&](VmContext& vm, MwObj&, SlowReleases* slow) {
                         DestroyMwLocked(vm, mw, slow);
                       });
}

void Teardown::DestroyAhLocked(VmContext& vm, uint32_t handle, SlowReleases* slow) {
  AhObj* ah = vm.ahs.Lookup(handle);
  if (ah == nullptr) return;
  slow->ahs.push_back(ah->rnic);
  if (PdObj* pd = vm.pds.Lookup(ah->pd)) --pd->refs;
  --vm.stats.ahs;
}

Status Teardown::DestroyAh(VmId id, uint32_t ah) {
  return DestroyObject(id, &VmContext::ahs, ah,
                       [&](VmContext& vm, AhObj&, SlowReleases* slow) {
                         DestroyAhLocked(vm, ah, slow);
                       });
}
// ---------------------------------------------------------------- CQs, QPs, SRQs

void Teardown::DestroyCqLocked(VmContext& vm, uint32_t handle, SlowReleases* slow) {
  CqObj* cq = vm.cqs.Lookup(handle);
  if (cq == nullptr) return;
  completions_.Forget(*cq);
  slow->cqs.push_back(cq->rnic);
  GiveBack(vm.stats, cq->charge);
  --vm.stats.cqs;
}

Status Teardown::DestroyCq(VmId id, uint32_t cq) {
  return DestroyObject(id, &VmContext::cqs, cq,
                       [&](VmContext& vm, CqObj&, SlowReleases* slow) {
                         DestroyCqLocked(vm, cq, slow);
                       });
}

void Teardown::DestroyQpLocked(VmContext& vm, uint32_t handle, SlowReleases* slow) {
  QpObj* qp = vm.qps.Lookup(handle);
  if (qp == nullptr) return;
  send_.Unschedule(*qp);
  qp->flow_storage = stage_.RemoveFlow(qp->flow, clock_());
  qp->flow = sched::kNoFlow;
  if (!qp->srq) recv_.Unlink(qp->rq);
  // Destroyed after the closure. Its completions until then, and any
  // still in the RNIC CQ, carry a cookie whose handle is now stale and are
  // dropped.
  slow->qps.push_back(qp->rnic);
  send_.CloseSendWindow(*qp);
  if (!qp->srq) completions_.Retire(*qp->recv_cq, qp->rq.posted);
  if (qp->srq) {
    --qp->srq->refs;
    --qp->recv_cq->srq_listeners;
    auto& users = qp->recv_cq->srq_users;
    auto it = std::find_if(users.begin(), users.end(), [&](const auto& u) {
      return u.first == qp->srq;
    });
    if (it != users.end() && --it->second == 0) {
      qp->recv_cq->demand -= qp->srq->rq.depth;  // the SRQ's share
      users.erase(it);
    }
  }
  qp->send_cq->demand -= qp->send_cq_demand;
  qp->recv_cq->demand -= qp->recv_cq_demand;
  --qp->send_cq->refs;
  --qp->recv_cq->refs;
  if (PdObj* pd = vm.pds.Lookup(qp->pd)) --pd->refs;
  vm.qpn_to_qp.Erase(qp->qpn);
  vms_.qpn_owner.Erase(qp->qpn);
  GiveBack(vm.stats, qp->charge);
  --vm.stats.qps;
}

Status Teardown::DestroyQp(VmId id, uint32_t qpn) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  Status s = Status::kOk;
  std::unique_ptr<QpObj> dead;
  SlowReleases slow;
  slow.Reserve(1, 0, 0, 0, 0, 0, 0);
  executor_.RunSync([&] {
    std::optional<uint32_t> h = vm->qpn_to_qp.Find(qpn);
    if (!h || vm->qps.Lookup(*h) == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    DestroyQpLocked(*vm, *h, &slow);
    dead = vm->qps.Remove(*h);
  });
  slow.Release(rnic_, executor_);
  rnic_.Reclaim();
  return s;  // ring views unmapped here, and the RNIC's queues freed
}

void Teardown::DestroySrqLocked(VmContext& vm, uint32_t handle, SlowReleases* slow) {
  SrqObj* srq = vm.srqs.Lookup(handle);
  if (srq == nullptr) return;
  recv_.Unlink(srq->rq);
  slow->srqs.push_back(srq->rnic);
  if (PdObj* pd = vm.pds.Lookup(srq->pd)) --pd->refs;
  GiveBack(vm.stats, srq->charge);
  --vm.stats.srqs;
}

Status Teardown::DestroySrq(VmId id, uint32_t srq) {
  return DestroyObject(id, &VmContext::srqs, srq,
                       [&](VmContext& vm, SrqObj&, SlowReleases* slow) {
                         DestroySrqLocked(vm, srq, slow);
                       });
}

}  // namespace vrdma::engine
