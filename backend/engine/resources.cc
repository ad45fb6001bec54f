// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// VM lifecycle, PDs, MRs, AHs, queries and stats. See engine_impl.h for the
// threading rule (checks and page mapping here, the rest in RunSync).
#include <algorithm>
#include <chrono>

#include "backend/engine/address.h"
#include "backend/engine/engine_impl.h"
#include "backend/engine/mr_check.h"
#include "backend/engine/qp_attr_check.h"

namespace vrdma::engine {

std::unique_ptr<Engine> Engine::Create(Rnic& rnic, Executor& executor,
                                       policy::SchedulerPolicy& policy) {
  return CreateEngine(rnic, executor, policy, EngineOptions{});
}

std::unique_ptr<Engine> CreateEngine(Rnic& rnic, Executor& executor,
                                     policy::SchedulerPolicy& policy,
                                     EngineOptions options) {
  if (!options.clock) {
    options.clock = [] {
      return static_cast<policy::Nanos>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now().time_since_epoch())
              .count());
    };
  }
  return std::make_unique<EngineImpl>(rnic, executor, policy,
                                      std::move(options));
}

EngineImpl::EngineImpl(Rnic& rnic, Executor& executor,
                       policy::SchedulerPolicy& policy, EngineOptions options)
    : rnic_(rnic),
      executor_(executor),
      options_(std::move(options)),
      limits_(rnic.limits()),
      stage_(rnic, policy, *this),
      vms_(options_.max_vms),
      qpn_owner_(std::min<uint32_t>(std::max<uint32_t>(limits_.max_qp, 1),
                                    1u << 20)) {}

EngineImpl::~EngineImpl() {
  for (uint32_t id : vms_.Handles()) DetachVm(id);
  // The data path no longer runs (its poller is gone before the engine):
  // the RNIC is this thread's now.
  CloseProbePath();
}

// ---------------------------------------------------------------- VMs

Result<VmId> EngineImpl::AttachVm(const VmConfig& config, VmEventSink* sink) {
  if (config.gids.empty() || config.gids.size() > VIRTIO_RDMA_MAX_GIDS)
    return Status::kInvalid;
  const Quotas& q = config.quotas;
  for (uint32_t n :
       {q.max_pd, q.max_cq, q.max_qp, q.max_mr, q.max_ah, q.max_srq}) {
    if (n > kMaxTableCapacity) return Status::kInvalid;
  }
  for (size_t i = 0; i < config.gids.size(); ++i) {
    if (config.gids[i] == Gid{}) return Status::kInvalid;
    for (size_t j = 0; j < i; ++j) {
      if (config.gids[i] == config.gids[j]) return Status::kInvalid;
    }
    // One owner per GID: otherwise a VM could send as another (or as the
    // daemon itself).
    if (config.gids[i] == kHostGid ||
        std::find(gids_in_use_.begin(), gids_in_use_.end(), config.gids[i]) !=
            gids_in_use_.end()) {
      return Status::kInvalid;
    }
  }
  // Admission: every attached VM may use its whole mapping quota at once.
  if (q.max_mappings > options_.mapping_budget - std::min(mappings_admitted_,
                                                          options_.mapping_budget)) {
    return Status::kNoResource;
  }
  auto ctx = std::make_unique<VmContext>(config.quotas);
  ctx->config = config;
  ctx->sink = sink;
  Result<VmId> result = Status::kNoResource;
  executor_.RunSync([&] {
    Result<uint32_t> id = vms_.PeekNextHandle();
    if (!id.ok()) return;
    size_t added = 0;
    for (; added < config.gids.size(); ++added) {
      if (rnic_.AddGid(config.gids[added]) != Status::kOk) break;
    }
    if (added != config.gids.size()) {
      for (size_t i = 0; i < added; ++i) (void)rnic_.RemoveGid(config.gids[i]);
      result = Status::kIoError;
      return;
    }
    ctx->id = *id;
    (void)vms_.Insert(std::move(ctx));
    stage_.AddTenant(*id, config.qos);
    result = *id;
  });
  if (result.ok()) {
    gids_in_use_.insert(gids_in_use_.end(), config.gids.begin(),
                        config.gids.end());
    mappings_admitted_ += q.max_mappings;
  }
  return result;
}

void EngineImpl::DetachVm(VmId id) {
  std::unique_ptr<VmContext> dead;
  executor_.RunSync([&] {
    VmContext* vm = FindVm(id);
    if (vm == nullptr) return;
    // Dependents first: QPs, then SRQs, AHs, MRs, CQs, PDs.
    for (uint32_t h : vm->qps.Handles()) DestroyQpLocked(*vm, h);
    for (uint32_t h : vm->srqs.Handles()) DestroySrqLocked(*vm, h);
    for (uint32_t h : vm->ahs.Handles()) {
      (void)rnic_.DestroyAh(vm->ahs.Lookup(h)->rnic);
    }
    for (uint32_t h : vm->mrs.Handles()) DestroyMrLocked(*vm, h);
    for (uint32_t h : vm->cqs.Handles()) DestroyCqLocked(*vm, h);
    for (uint32_t h : vm->pds.Handles())
      (void)rnic_.DeallocPd(vm->pds.Lookup(h)->rnic);
    for (const Gid& g : vm->config.gids) (void)rnic_.RemoveGid(g);
    stage_.RemoveTenant(id);
    events_pending_.Remove(vm);
    dead = vms_.Remove(id);
  });
  if (dead) {
    for (const Gid& g : dead->config.gids) {
      auto it = std::find(gids_in_use_.begin(), gids_in_use_.end(), g);
      if (it != gids_in_use_.end()) gids_in_use_.erase(it);
    }
    mappings_admitted_ -= dead->config.quotas.max_mappings;
  }
  // Page views, tables and the RNIC's queue memory are released here, on
  // the control thread.
  rnic_.Reclaim();
}

void EngineImpl::SetGuestMemory(VmId id,
                                std::shared_ptr<const GuestMemory> memory) {
  // Only the control thread maps pages; published views map the backing
  // files, so they stay valid across memory tables.
  if (VmContext* vm = FindVm(id)) vm->memory = std::move(memory);
}

Result<VmStats> EngineImpl::Stats(VmId id) const {
  Result<VmStats> out = Status::kBadHandle;
  executor_.RunSync([&] {
    if (const VmContext* vm = FindVm(id)) {
      VmStats s = vm->stats;
      s.sched = stage_.tenant_account(id);
      out = s;
    }
  });
  return out;
}

RnicLimits EngineImpl::VmLimits(const VmContext& vm) const {
  RnicLimits l = limits_;
  const Quotas& q = vm.config.quotas;
  l.max_qp = std::min(l.max_qp, q.max_qp);
  l.max_cq = std::min(l.max_cq, q.max_cq);
  l.max_mr = std::min(l.max_mr, q.max_mr);
  l.max_pd = std::min(l.max_pd, q.max_pd);
  l.max_srq = std::min(l.max_srq, q.max_srq);
  // Ring indices are 16 bits wide at most.
  const uint32_t max_ring = (1u << VIRTIO_RDMA_MAX_RING_LOG2_ELEMS) - 1;
  l.max_qp_wr = std::min(l.max_qp_wr, max_ring);
  l.max_cqe = std::min(l.max_cqe, max_ring);
  l.max_srq_wr = std::min(l.max_srq_wr, max_ring);
  l.max_sge = std::min<uint32_t>(l.max_sge, kMaxSge);
  l.max_inline_data = std::min<uint32_t>(l.max_inline_data, kMaxInline);
  l.max_mr_size = std::min<uint64_t>(l.max_mr_size, MrLimits{}.max_mr_size);
  return l;
}

Result<DeviceAttr> EngineImpl::QueryDevice(VmId id) const {
  const VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  DeviceAttr a;
  a.limits = VmLimits(*vm);
  a.max_ah = vm->config.quotas.max_ah;
  a.max_qp_rd_atom = kMaxQpRdAtom;
  a.max_mr_pages = kMaxMrPages;
  return a;
}

Result<Gid> EngineImpl::QueryGid(VmId id, uint32_t index) const {
  const VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (index >= vm->config.gids.size()) return Status::kInvalid;
  return vm->config.gids[index];
}

Status EngineImpl::MapPages(const VmContext& vm,
                            const std::vector<uint64_t>& pages,
                            GuestPageView* view, Charge* charge) const {
  if (!vm.memory) return Status::kFault;
  const uint64_t left =
      Left(Left(vm.config.quotas.max_mappings, vm.stats.mappings), charge->mappings);
  Result<GuestPageView> r = GuestPageView::Map(
      *vm.memory, pages, static_cast<uint32_t>(std::min<uint64_t>(left, UINT32_MAX)));
  if (!r.ok()) return r.status();
  *view = std::move(r.value());
  charge->pinned_bytes += view->size();
  charge->mappings += view->mappings();
  return Status::kOk;
}

// ---------------------------------------------------------------- PDs

Result<uint32_t> EngineImpl::CreatePd(VmId id) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  Result<uint32_t> out = Status::kNoResource;
  executor_.RunSync([&] {
    if (vm->pds.full()) return;
    Result<RnicPd> pd = rnic_.AllocPd();
    if (!pd.ok()) {
      out = pd.status();
      return;
    }
    auto obj = std::make_unique<PdObj>();
    obj->rnic = *pd;
    out = vm->pds.Insert(std::move(obj));
    ++vm->stats.pds;
  });
  return out;
}

Status EngineImpl::DestroyPd(VmId id, uint32_t pd) {
  return DestroyObject(id, &VmContext::pds, pd, [&](VmContext& vm, PdObj& obj) {
    (void)rnic_.DeallocPd(obj.rnic);
    --vm.stats.pds;
  });
}

// ---------------------------------------------------------------- MRs

Result<RegMrResult> EngineImpl::RegMr(VmId id, const RegMrRequest& req) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  MrLimits mr_limits;
  mr_limits.max_mr_size = VmLimits(*vm).max_mr_size;
  VRDMA_RETURN_IF_ERROR(CheckRegMr(req, mr_limits));
  if (vm->pds.Lookup(req.pd) == nullptr) return Status::kBadHandle;
  if (vm->mrs.full()) return Status::kNoResource;
  const Quotas& quotas = vm->config.quotas;
  Charge charge{.host_bytes = sizeof(MrObj)};
  if (!Fits(quotas, vm->stats,
            Charge{MrPinnedBytes(req), charge.host_bytes, 0})) {
    return Status::kNoResource;  // before any mapping is made
  }
  auto obj = std::make_unique<MrObj>();
  VRDMA_RETURN_IF_ERROR(MapPages(*vm, req.pages, &obj->view, &charge));
  obj->pd = req.pd;
  obj->iova = req.iova;
  obj->length = req.length;
  obj->access = req.access;
  obj->charge = charge;

  Result<RegMrResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    if (pd == nullptr) {
      out = Status::kBadHandle;
      return;
    }
    if (!Fits(quotas, vm->stats, charge)) return;  // kNoResource
    Result<RnicMr> mr =
        rnic_.RegMr(pd->rnic, obj->view.data() + req.first_page_offset,
                    req.length, req.iova, req.access);
    if (!mr.ok()) {
      out = mr.status();
      return;
    }
    Result<uint32_t> h = vm->mrs.PeekNextHandle();
    if (!h.ok() || !vm->lkey_to_mr.Insert(mr->lkey, *h)) {
      // Full, or the RNIC reused a live lkey (would alias two MRs).
      (void)rnic_.DeregMr(*mr);
      out = h.ok() ? Status::kIoError : Status::kNoResource;
      return;
    }
    obj->rnic = *mr;
    (void)vm->mrs.Insert(std::move(obj));
    ++pd->refs;
    ++vm->stats.mrs;
    Take(vm->stats, charge);
    const bool remote = req.access & (kAccessRemoteRead | kAccessRemoteWrite |
                                      kAccessRemoteAtomic);
    out = RegMrResult{*h, mr->lkey, remote ? mr->rkey : 0};
  });
  return out;  // on failure obj (and its view) is released here
}

void EngineImpl::DestroyMrLocked(VmContext& vm, uint32_t handle) {
  MrObj* mr = vm.mrs.Lookup(handle);
  if (mr == nullptr) return;
  (void)rnic_.DeregMr(mr->rnic);
  vm.lkey_to_mr.Erase(mr->rnic.lkey);
  if (PdObj* pd = vm.pds.Lookup(mr->pd)) --pd->refs;
  GiveBack(vm.stats, mr->charge);
  --vm.stats.mrs;
}

Status EngineImpl::DeregMr(VmId id, uint32_t mr) {
  // The view is unmapped after the RNIC let go of the MR.
  return DestroyObject(id, &VmContext::mrs, mr, [&](VmContext& vm, MrObj&) {
    DestroyMrLocked(vm, mr);
  });
}

// ---------------------------------------------------------------- AHs

Result<uint32_t> EngineImpl::CreateAh(VmId id, uint32_t pd, const GuestAh& ah) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (vm->pds.Lookup(pd) == nullptr) return Status::kBadHandle;
  VRDMA_RETURN_IF_ERROR(CheckAh(ah, static_cast<uint32_t>(vm->config.gids.size())));
  Result<uint32_t> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* p = vm->pds.Lookup(pd);
    if (p == nullptr || vm->ahs.full()) return;
    Result<RnicAh> r = rnic_.CreateAh(p->rnic, MakeAv(*vm, ah));
    if (!r.ok()) {
      out = r.status();
      return;
    }
    auto obj = std::make_unique<AhObj>();
    obj->pd = pd;
    obj->rnic = *r;
    obj->guest = ah;
    out = vm->ahs.Insert(std::move(obj));
    ++p->refs;
    ++vm->stats.ahs;
  });
  return out;
}

Status EngineImpl::DestroyAh(VmId id, uint32_t ah) {
  return DestroyObject(id, &VmContext::ahs, ah, [&](VmContext& vm, AhObj& obj) {
    (void)rnic_.DestroyAh(obj.rnic);
    if (PdObj* pd = vm.pds.Lookup(obj.pd)) --pd->refs;
    --vm.stats.ahs;
  });
}

}  // namespace vrdma::engine
