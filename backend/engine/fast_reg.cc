// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Fast-registration MRs (docs/virtio-rdma.md §4.8): ALLOC_MR
// (Resources::AllocMr). The REG_MR WQE's rule is fast_reg.h; DEREG_MR is
// Teardown's, as for every MR.
#include "backend/engine/fast_reg.h"

#include <memory>
#include <utility>

#include "backend/engine/resources.h"
#include "backend/engine/rnic_calls.h"

namespace vrdma::engine {

Result<RegMrResult> Resources::AllocMr(VmId id, const AllocMrRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  const RnicLimits limits = VmLimits(*vm);
  if (limits.max_fr_mr == 0) return Status::kUnsupported;
  if (req.max_pages == 0 || req.max_pages > limits.max_fr_pages) return Status::kInvalid;
  // The page list: 8-byte entries inside one region of the VM's RAM now
  // (each REG_MR WQE translates it again, against the table of its time).
  if (req.page_list % sizeof(uint64_t) != 0 || vm->memory == nullptr ||
      !vm->memory->Translate(req.page_list, uint64_t{req.max_pages} * sizeof(uint64_t)).ok()) {
    return Status::kInvalid;
  }
  const PdObj* p = vm->pds.Lookup(req.pd);
  if (p == nullptr) return Status::kBadHandle;
  if (vm->mrs.full() || vm->stats.fr_mrs >= limits.max_fr_mr) return Status::kNoResource;
  // The page array: a deregistered MR's (VmContext::fr_page_pool, already
  // charged) if one is large enough, else a new one, charged now and for
  // the VM's life. Only this thread (and Teardown inside RunSync, which
  // this thread runs) touches the pool.
  FrPageArray array;
  executor_.RunSync([&] {
    auto& pool = vm->fr_page_pool;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (pool[i].capacity >= req.max_pages) {
        array = std::move(pool[i]);
        pool[i] = std::move(pool.back());
        pool.pop_back();
        return;
      }
    }
  });
  const bool fresh = array.pages == nullptr;
  const Charge charge{.host_bytes = sizeof(MrObj) +
                                    (fresh ? uint64_t{req.max_pages} * sizeof(FrPage) : 0)};
  auto give_back = [&] {
    if (!fresh) executor_.RunSync([&] { vm->fr_page_pool.push_back(std::move(array)); });
  };
  if (!Fits(vm->config.quotas, vm->stats, charge)) {
    give_back();
    return Status::kNoResource;
  }
  if (fresh) array = {std::make_unique<FrPage[]>(req.max_pages), req.max_pages};
  auto obj = std::make_unique<MrObj>();
  obj->pd = req.pd;
  obj->fr_pages = std::move(array.pages);
  obj->fr_capacity = array.capacity;
  obj->fr_max_pages = req.max_pages;
  obj->fr_page_list = req.page_list;
  // Only the MR itself is given back at DEREG_MR; the array's bytes stay
  // charged with the pool.
  obj->charge = Charge{.host_bytes = sizeof(MrObj)};
  const RnicPd pd_rnic = p->rnic;  // only this thread destroys PDs
  const Result<RnicMr> mr = RunRnicControl(
      rnic_, executor_, [&] { return rnic_.AllocFrMr(pd_rnic, req.max_pages); });
  if (!mr.ok()) {
    array = {std::move(obj->fr_pages), obj->fr_capacity};
    give_back();
    return mr.status();
  }
  Result<RegMrResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    if (pd == nullptr) {
      out = Status::kBadHandle;
      return;
    }
    Result<uint32_t> h = vm->mrs.PeekNextHandle();
    if (!h.ok() || vm->stats.fr_mrs >= limits.max_fr_mr ||
        !Fits(vm->config.quotas, vm->stats, charge)) {
      return;  // kNoResource
    }
    if (!vm->fr_index_to_mr.Insert(FrIndex(mr->lkey), *h)) {
      out = Status::kIoError;  // the RNIC reused a live MR's index
      return;
    }
    // Room for every array Teardown may return to the pool.
    vm->fr_page_pool.reserve(vm->fr_page_pool.size() + vm->stats.fr_mrs + 1);
    obj->rnic = *mr;
    (void)vm->mrs.Insert(std::move(obj));
    ++pd->refs;
    ++vm->stats.mrs;
    ++vm->stats.fr_mrs;
    Take(vm->stats, charge);
    out = RegMrResult{*h, mr->lkey, mr->rkey};
  });
  if (!out.ok() && obj != nullptr) {
    array = {std::move(obj->fr_pages), obj->fr_capacity};
    give_back();
  }
  if (!out.ok()) RunRnicControl(rnic_, executor_, [&] { return rnic_.DeregMr(*mr); });
  return out;
}

}  // namespace vrdma::engine
