// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Resources (resources.h): VM admission, PDs, MRs, AHs, CQs, SRQs, queries
// and stats. Checks and page mapping on the control thread; the RNIC's
// object made where the slow RNIC calls run (rnic_calls.h), published in a
// RunSync closure after it.
#include "backend/engine/resources.h"

#include <algorithm>
#include <chrono>

#include "backend/engine/address.h"
#include "backend/engine/host_peer.h"
#include "backend/engine/mr_check.h"
#include "backend/engine/mw_access.h"
#include "backend/engine/qp_attr_check.h"
#include "backend/engine/recv_queue.h"
#include "backend/engine/ring_check.h"
#include "backend/engine/rnic_calls.h"

namespace vrdma::engine {

// ---------------------------------------------------------------- VMs

Result<VmId> Resources::AttachVm(const VmConfig& config, VmEventSink* sink) {
  if (config.gids.empty() || config.gids.size() > VIRTIO_RDMA_MAX_GIDS)
    return Status::kInvalid;
  const Quotas& q = config.quotas;
  for (uint32_t n :
       {q.max_pd, q.max_cq, q.max_qp, q.max_mr, q.max_ah, q.max_srq, q.max_mw}) {
    if (n > kMaxTableCapacity) return Status::kInvalid;
  }
  for (size_t i = 0; i < config.gids.size(); ++i) {
    if (config.gids[i] == Gid{}) return Status::kInvalid;
    for (size_t j = 0; j < i; ++j) {
      if (config.gids[i] == config.gids[j]) return Status::kInvalid;
    }
    // One owner per GID: otherwise a VM could send as another (or as the
    // daemon itself).
    if (config.gids[i] == host_gid_ ||
        std::find(gids_in_use_.begin(), gids_in_use_.end(), config.gids[i]) !=
            gids_in_use_.end()) {
      return Status::kInvalid;
    }
  }
  // Admission: every attached VM may use its whole mapping and pinning
  // quotas at once.
  if (!mappings_.Fits(q.max_mappings) || !pinned_.Fits(q.max_pinned_bytes)) {
    return Status::kNoResource;
  }
  auto ctx = std::make_unique<VmContext>(config.quotas);
  ctx->config = config;
  ctx->sink = sink;
  Result<VmId> result = Status::kNoResource;
  executor_.RunSync([&] {
    Result<uint32_t> id = vms_.vms.PeekNextHandle();
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
    (void)vms_.vms.Insert(std::move(ctx));
    stage_.AddTenant(*id, config.qos);
    result = *id;
  });
  if (result.ok()) {
    gids_in_use_.insert(gids_in_use_.end(), config.gids.begin(),
                        config.gids.end());
    mappings_.Admit(q.max_mappings);
    pinned_.Admit(q.max_pinned_bytes);
  }
  return result;
}

void Resources::Release(const VmConfig& config) {
  for (const Gid& g : config.gids) {
    auto it = std::find(gids_in_use_.begin(), gids_in_use_.end(), g);
    if (it != gids_in_use_.end()) gids_in_use_.erase(it);
  }
  mappings_.Release(config.quotas.max_mappings);
  pinned_.Release(config.quotas.max_pinned_bytes);
}

void Resources::SetGuestMemory(VmId id,
                                std::shared_ptr<const GuestMemory> memory) {
  // Only the control thread maps pages; published views map the backing
  // files, so they stay valid across memory tables. The data path's copy
  // (GSI's guest-physical SGEs) changes between its turns; the table it
  // held is unmapped here, after the closure, if nothing else holds it.
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return;
  std::shared_ptr<const GuestMemory> old = memory;
  executor_.RunSync([&] { vm->datapath_memory.swap(old); });
  vm->memory = memory;
  // Kernel PDs' RAM MRs (ram_mrs.h) follow the table: registered over the
  // new one, or dropped when that fails, never left over memory the VM no
  // longer has.
  for (uint32_t h : vm->pds.Handles()) {
    if (vm->pds.Lookup(h)->ram.count > 0) (void)ReplaceRamMrs(*vm, h, memory);
  }
}

Result<VmStats> Resources::Stats(VmId id) const {
  Result<VmStats> out = Status::kBadHandle;
  executor_.RunSync([&] {
    if (const VmContext* vm = vms_.Find(id)) {
      VmStats s = vm->stats;
      s.sched = stage_.tenant_account(id);
      s.sampled_at_ns = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now().time_since_epoch())
              .count());
      out = s;
    }
  });
  return out;
}

RnicLimits Resources::VmLimits(const VmContext& vm) const {
  RnicLimits l = limits_;
  const Quotas& q = vm.config.quotas;
  l.max_qp = std::min(l.max_qp, q.max_qp);
  l.max_cq = std::min(l.max_cq, q.max_cq);
  l.max_mr = std::min(l.max_mr, q.max_mr);
  l.max_pd = std::min(l.max_pd, q.max_pd);
  l.max_srq = std::min(l.max_srq, q.max_srq);
  l.max_mw = std::min(l.max_mw, q.max_mw);
  // Fast registration only for a VM whose operator allowed kernel
  // consumers (VIRTIO_RDMA_F_KERNEL, docs/virtio-rdma.md §4.8).
  l.max_fr_mr = q.kernel_verbs ? std::min(l.max_fr_mr, q.max_fr_mr) : 0;
  l.max_fr_pages = l.max_fr_mr > 0 ? std::min(l.max_fr_pages, kMaxMrPages) : 0;
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

Result<DeviceAttr> Resources::QueryDevice(VmId id) const {
  const VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  DeviceAttr a;
  a.limits = VmLimits(*vm);
  a.max_ah = vm->config.quotas.max_ah;
  a.max_qp_rd_atom = kMaxQpRdAtom;
  a.max_mr_pages = kMaxMrPages;
  return a;
}

Result<Gid> Resources::QueryGid(VmId id, uint32_t index) const {
  const VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (index >= vm->config.gids.size()) return Status::kInvalid;
  return vm->config.gids[index];
}

Status Resources::MapPages(const VmContext& vm,
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
// ---------------------------------------------------------------- PDs, MRs, AHs

Result<uint32_t> Resources::CreatePd(VmId id) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (vm->pds.full()) return Status::kNoResource;
  const Result<RnicPd> pd = RunRnicControl(rnic_, executor_, [&] { return rnic_.AllocPd(); });
  if (!pd.ok()) return pd.status();
  Result<uint32_t> out = Status::kNoResource;
  executor_.RunSync([&] {
    if (vm->pds.full()) return;
    auto obj = std::make_unique<PdObj>();
    obj->rnic = *pd;
    out = vm->pds.Insert(std::move(obj));
    ++vm->stats.pds;
  });
  if (!out.ok()) RunRnicControl(rnic_, executor_, [&] { return rnic_.DeallocPd(*pd); });
  return out;
}

Result<RegMrResult> Resources::RegMr(VmId id, const RegMrRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  MrLimits mr_limits;
  mr_limits.max_mr_size = VmLimits(*vm).max_mr_size;
  mr_limits.windows = VmLimits(*vm).max_mw > 0;
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
  if (!Fits(quotas, vm->stats, charge)) return Status::kNoResource;
  obj->pd = req.pd;
  obj->iova = req.iova;
  obj->length = req.length;
  obj->access = req.access;
  obj->charge = charge;

  // Registered where the RNIC's slow calls run (rnic_calls.h): a physical
  // RNIC pins the region's pages meanwhile, beside the data path. Only
  // this thread destroys PDs, so the PD outlives the call.
  const RnicPd pd_rnic = vm->pds.Lookup(req.pd)->rnic;
  const Result<RnicMr> mr = RunRnicControl(rnic_, executor_, [&] {
    return rnic_.RegMr(pd_rnic, obj->view.data() + req.first_page_offset, req.length,
                       req.iova, req.access);
  });
  if (!mr.ok()) return mr.status();

  Result<RegMrResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    if (pd == nullptr) {
      out = Status::kBadHandle;
      return;
    }
    if (!Fits(quotas, vm->stats, charge)) return;  // kNoResource
    Result<uint32_t> h = vm->mrs.PeekNextHandle();
    if (!h.ok() || !vm->lkey_to_mr.Insert(mr->lkey, *h)) {
      // Full, or the RNIC reused a live lkey (would alias two MRs).
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
  if (!out.ok()) {
    // Not published: the data path never saw it.
    RunRnicControl(rnic_, executor_, [&] { return rnic_.DeregMr(*mr); });
  }
  return out;  // on failure obj (and its view) is released here, after the RNIC's MR
}

Result<AllocMwResult> Resources::AllocMw(VmId id, uint32_t pd, uint8_t type) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (VmLimits(*vm).max_mw == 0) return Status::kUnsupported;
  if (type != 1 && type != 2) return Status::kInvalid;
  const PdObj* p = vm->pds.Lookup(pd);
  if (p == nullptr) return Status::kBadHandle;
  if (vm->mws.full()) return Status::kNoResource;
  const Charge charge{.host_bytes = sizeof(MwObj)};
  if (!Fits(vm->config.quotas, vm->stats, charge)) return Status::kNoResource;
  const RnicPd pd_rnic = p->rnic;  // only this thread destroys PDs
  const Result<RnicMw> r =
      RunRnicControl(rnic_, executor_, [&] { return rnic_.AllocMw(pd_rnic, type); });
  if (!r.ok()) return r.status();
  Result<AllocMwResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* owner = vm->pds.Lookup(pd);
    Result<uint32_t> h = vm->mws.PeekNextHandle();
    if (owner == nullptr || !h.ok() || !Fits(vm->config.quotas, vm->stats, charge)) return;
    if (!vm->mw_index_to_mw.Insert(MwIndex(r->rkey), *h)) {
      out = Status::kIoError;  // the RNIC reused a live window's rkey
      return;
    }
    auto obj = std::make_unique<MwObj>();
    obj->pd = pd;
    obj->rnic = *r;
    obj->type = type;
    obj->charge = charge;
    (void)vm->mws.Insert(std::move(obj));
    ++owner->refs;
    ++vm->stats.mws;
    Take(vm->stats, charge);
    out = AllocMwResult{*h, r->rkey};
  });
  if (!out.ok()) RunRnicControl(rnic_, executor_, [&] { return rnic_.DeallocMw(*r); });
  return out;
}

Result<uint32_t> Resources::CreateAh(VmId id, uint32_t pd, const GuestAh& ah) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  const PdObj* p = vm->pds.Lookup(pd);
  if (p == nullptr) return Status::kBadHandle;
  VRDMA_RETURN_IF_ERROR(CheckAh(ah, static_cast<uint32_t>(vm->config.gids.size())));
  if (vm->ahs.full()) return Status::kNoResource;
  // Created where the slow RNIC calls run: a physical RoCE RNIC may resolve
  // the destination's neighbour meanwhile. Only this thread destroys PDs.
  const RnicPd pd_rnic = p->rnic;
  const Result<RnicAh> r =
      RunRnicControl(rnic_, executor_, [&] { return rnic_.CreateAh(pd_rnic, MakeAv(*vm, ah)); });
  if (!r.ok()) return r.status();
  Result<uint32_t> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* owner = vm->pds.Lookup(pd);
    if (owner == nullptr || vm->ahs.full()) return;
    auto obj = std::make_unique<AhObj>();
    obj->pd = pd;
    obj->rnic = *r;
    obj->guest = ah;
    out = vm->ahs.Insert(std::move(obj));
    ++owner->refs;
    ++vm->stats.ahs;
  });
  if (!out.ok()) RunRnicControl(rnic_, executor_, [&] { return rnic_.DestroyAh(*r); });
  return out;
}
// ---------------------------------------------------------------- CQs

Result<CreateCqResult> Resources::CreateCq(VmId id,
                                            const CreateCqRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  VRDMA_RETURN_IF_ERROR(CheckCreateCq(req, VmLimits(*vm)));
  if (vm->cqs.full()) return Status::kNoResource;
  // Sized for the guest's ring; CreateQp grows it to its QPs' worst case
  // (cq_sizing.h) and charges the growth.
  const uint32_t host_depth =
      std::min(uint32_t{(1u << req.ring.log2_num_elem) - 1}, limits_.max_cqe);
  Charge charge{.host_bytes = sizeof(CqObj) + rnic_.CqHostBytes(host_depth)};
  if (!CanStart(*vm, RingPinned(req.ring), charge.host_bytes)) {
    return Status::kNoResource;
  }
  auto cq = std::make_unique<CqObj>();
  VRDMA_RETURN_IF_ERROR(MapPages(*vm, req.ring.pages, &cq->view, &charge));
  cq->ring = GuestRing(cq->view.data(), req.ring.log2_num_elem,
                       req.ring.log2_elem_size);
  cq->depth = cq->ring.capacity();
  cq->charge = charge;
  rnic_.PrepareCq(host_depth);
  if (!Fits(vm->config.quotas, vm->stats, charge)) return Status::kNoResource;
  // Created where the slow RNIC calls run (a physical RNIC pins its queue).
  const Result<RnicCq> r =
      RunRnicControl(rnic_, executor_, [&] { return rnic_.CreateCq(host_depth); });
  if (!r.ok()) return r.status();

  Result<CreateCqResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    Result<uint32_t> h = vm->cqs.PeekNextHandle();
    if (!h.ok() || !Fits(vm->config.quotas, vm->stats, charge)) return;
    cq->rnic = *r;
    cq->host_depth = host_depth;
    cq->vm = vm;
    cq->handle = *h;
    cq->ring.StoreProducer(0);  // the host owns the producer index
    const uint32_t depth = cq->depth;
    (void)vm->cqs.Insert(std::move(cq));
    ++vm->stats.cqs;
    Take(vm->stats, charge);
    out = CreateCqResult{*h, depth};
  });
  if (!out.ok()) RunRnicControl(rnic_, executor_, [&] { return rnic_.DestroyCq(*r); });
  rnic_.Reclaim();  // queue memory the RNIC let go of on the data-path thread
  return out;
}

Status Resources::ReqNotifyCq(VmId id, uint32_t cq, bool solicited_only) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  Status s = Status::kOk;
  executor_.RunSync([&] {
    CqObj* obj = vm->cqs.Lookup(cq);
    if (obj == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    Completions::Arm(*obj, solicited_only);
  });
  return s;
}
// ---------------------------------------------------------------- SRQs

Result<CreateSrqResult> Resources::CreateSrq(VmId id,
                                              const CreateSrqRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (vm->pds.Lookup(req.pd) == nullptr) return Status::kBadHandle;
  VRDMA_RETURN_IF_ERROR(CheckCreateSrq(req, VmLimits(*vm)));
  if (vm->srqs.full()) return Status::kNoResource;
  if (!CanStart(*vm, RingPinned(req.ring), sizeof(SrqObj))) {
    return Status::kNoResource;
  }
  Charge charge;
  auto srq = std::make_unique<SrqObj>();
  GuestPageView view;
  VRDMA_RETURN_IF_ERROR(MapPages(*vm, req.ring.pages, &view, &charge));
  InitRecvQueue(srq->rq, req.ring, req.max_sge, limits_.max_srq_wr,
                std::move(view));
  srq->pd = req.pd;
  srq->max_wr = req.max_wr;
  srq->max_sge = req.max_sge;
  srq->limit = req.srq_limit;
  charge.host_bytes = sizeof(SrqObj) + ShadowBytes(srq->rq) +
                      rnic_.SrqHostBytes(srq->rq.depth, req.max_sge);
  srq->charge = charge;
  if (!Fits(vm->config.quotas, vm->stats, charge)) return Status::kNoResource;
  rnic_.PrepareSrq(srq->rq.depth, req.max_sge);

  // Created where the slow RNIC calls run (a physical RNIC pins its
  // queue); only this thread destroys PDs, so the PD outlives the call.
  const RnicPd pd_rnic = vm->pds.Lookup(req.pd)->rnic;
  const Result<RnicSrq> r = RunRnicControl(
      rnic_, executor_, [&] { return rnic_.CreateSrq(pd_rnic, srq->rq.depth, req.max_sge); });
  if (!r.ok()) return r.status();
  Result<CreateSrqResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    Result<uint32_t> h = vm->srqs.PeekNextHandle();
    if (pd == nullptr || !h.ok() || !Fits(vm->config.quotas, vm->stats, charge)) {
      return;  // kNoResource
    }
    srq->rnic = *r;
    srq->vm = vm;
    srq->handle = *h;
    srq->rq.srq = srq.get();
    srq->rq.ring.StoreConsumer(0);
    SrqObj* raw = srq.get();
    (void)vm->srqs.Insert(std::move(srq));
    ++pd->refs;
    ++vm->stats.srqs;
    Take(vm->stats, charge);
    recv_.Replenish(raw->rq);  // WQEs the guest posted before creation returned
    out = CreateSrqResult{*h, req.max_wr, req.max_sge};
  });
  if (!out.ok()) RunRnicControl(rnic_, executor_, [&] { return rnic_.DestroySrq(*r); });
  rnic_.Reclaim();  // queue memory the RNIC let go of on the data-path thread
  return out;
}

Status Resources::ModifySrq(VmId id, uint32_t srq, uint32_t mask,
                             uint32_t max_wr, uint32_t srq_limit) {
  (void)max_wr;
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  if (mask & ~uint32_t{VIRTIO_RDMA_SRQ_MAX_WR | VIRTIO_RDMA_SRQ_LIMIT})
    return Status::kInvalid;
  Status s = Status::kOk;
  executor_.RunSync([&] {
    SrqObj* obj = vm->srqs.Lookup(srq);
    if (obj == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    if (mask & VIRTIO_RDMA_SRQ_MAX_WR) {
      s = Status::kUnsupported;  // resizing a guest ring
      return;
    }
    if (mask & VIRTIO_RDMA_SRQ_LIMIT) {
      if (srq_limit > obj->max_wr) {
        s = Status::kInvalid;
        return;
      }
      obj->limit = srq_limit;
    }
  });
  return s;
}

}  // namespace vrdma::engine
