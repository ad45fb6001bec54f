// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// CQs, QPs and SRQs on the control path: checks and ring mapping on the
// control thread, RNIC calls and publication in one RunSync closure.
#include <algorithm>
#include <bit>

#include "backend/engine/address.h"
#include "backend/engine/cq_sizing.h"
#include "backend/engine/engine_impl.h"
#include "backend/engine/qp_attr_check.h"
#include "backend/engine/ring_check.h"

namespace vrdma::engine {
namespace {

uint64_t RingPinned(const RingSpec& r) {
  return uint64_t{r.pages.size()} * VIRTIO_RDMA_PAGE_SIZE;
}

// The quota check before any page is mapped: what the object will pin and
// what it costs in host memory as far as known (mappings are checked as
// the views are made, the final charge again when it is published).
bool CanStart(const VmContext& vm, uint64_t pinned, uint64_t host_bytes) {
  return Fits(vm.config.quotas, vm.stats, Charge{pinned, host_bytes, 0});
}

// What a new QP asks of its CQs (cq_sizing.h): its worst-case completions
// in each, and the host depth each then needs (0: beyond max_cqe). cqs[1]
// is null when both are one CQ (counted once).
struct CqPlan {
  std::array<CqObj*, 2> cqs{};
  std::array<uint32_t, 2> need{};
  uint64_t send_demand = 0;
  uint64_t recv_demand = 0;
};

CqPlan PlanCqs(const QpObj& qp, CqObj* scq, CqObj* rcq, const SrqObj* srq,
               uint32_t records, uint32_t max_cqe) {
  CqPlan p;
  uint32_t recv_depth = qp.rq.depth;
  if (srq != nullptr) {
    // An SRQ's receives count once per CQ, however many QPs share it.
    const bool counted =
        std::any_of(rcq->srq_users.begin(), rcq->srq_users.end(),
                    [&](const auto& u) { return u.first == srq; });
    recv_depth = counted ? 0 : srq->rq.depth;
  }
  p.send_demand = QpCqDemand(true, records, 0);
  p.recv_demand = QpCqDemand(false, 0, recv_depth);
  p.cqs = {scq, rcq == scq ? nullptr : rcq};
  for (int i = 0; i < 2; ++i) {
    CqObj* cq = p.cqs[i];
    if (cq == nullptr) continue;
    const uint64_t added =
        (cq == scq ? p.send_demand : 0) + (cq == rcq ? p.recv_demand : 0);
    p.need[i] = RequiredCqDepth(cq->demand, added, cq->host_depth, max_cqe);
  }
  return p;
}

}  // namespace

void EngineImpl::InitRecvQueue(RecvQueue& rq, const RingSpec& ring,
                               uint32_t max_sge, uint32_t rnic_max_wr,
                               GuestPageView view) {
  rq.view = std::move(view);
  rq.ring = GuestRing(rq.view.data(), ring.log2_num_elem, ring.log2_elem_size);
  rq.limits.max_sge = max_sge;
  rq.limits.elem_size = rq.ring.elem_size();
  // High watermark: everything the ring can hold, as far as the RNIC takes.
  rq.depth = std::min(rq.ring.capacity(), rnic_max_wr);
  rq.low_watermark = std::max<uint32_t>(1, rq.depth / 2);
  rq.wr_ids.assign(rq.ring.num_elem(), 0);
  rq.done.assign(rq.ring.num_elem(), 0);
  rq.slots.assign(rq.ring.num_elem(), RecvSlot{});
  rq.head = rq.consumer = rq.posted = 0;
}

// ---------------------------------------------------------------- CQs

Result<CreateCqResult> EngineImpl::CreateCq(VmId id,
                                            const CreateCqRequest& req) {
  VmContext* vm = FindVm(id);
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

  Result<CreateCqResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    Result<uint32_t> h = vm->cqs.PeekNextHandle();
    if (!h.ok() || !Fits(vm->config.quotas, vm->stats, charge)) return;
    Result<RnicCq> r = rnic_.CreateCq(host_depth);
    if (!r.ok()) {
      out = r.status();
      return;
    }
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
  rnic_.Reclaim();  // queue memory the RNIC let go of on the data-path thread
  return out;
}

void EngineImpl::DestroyCqLocked(VmContext& vm, uint32_t handle) {
  CqObj* cq = vm.cqs.Lookup(handle);
  if (cq == nullptr) return;
  active_cq_.Remove(cq);
  (void)rnic_.DestroyCq(cq->rnic);
  GiveBack(vm.stats, cq->charge);
  --vm.stats.cqs;
}

Status EngineImpl::DestroyCq(VmId id, uint32_t cq) {
  return DestroyObject(id, &VmContext::cqs, cq, [&](VmContext& vm, CqObj&) {
    DestroyCqLocked(vm, cq);
  });
}

Status EngineImpl::ReqNotifyCq(VmId id, uint32_t cq, bool solicited_only) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  Status s = Status::kOk;
  executor_.RunSync([&] {
    CqObj* obj = vm->cqs.Lookup(cq);
    if (obj == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    // "Next completion" is the stronger request; it is never weakened.
    if (!solicited_only) {
      obj->armed = CqObj::kArmNext;
    } else if (obj->armed != CqObj::kArmNext) {
      obj->armed = CqObj::kArmSolicited;
    }
  });
  return s;
}

// ---------------------------------------------------------------- QPs

Result<CreateQpResult> EngineImpl::CreateQp(VmId id,
                                            const CreateQpRequest& req) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  VRDMA_RETURN_IF_ERROR(CheckCreateQp(req, VmLimits(*vm)));
  if (vm->pds.Lookup(req.pd) == nullptr ||
      vm->cqs.Lookup(req.send_cq) == nullptr ||
      vm->cqs.Lookup(req.recv_cq) == nullptr ||
      (req.srq != 0 && vm->srqs.Lookup(req.srq) == nullptr)) {
    return Status::kBadHandle;
  }
  const QpCaps& c = req.caps;
  const bool has_rq = req.srq == 0;
  if (vm->qps.full()) return Status::kNoResource;
  if (!CanStart(*vm, RingPinned(req.sq) + (has_rq ? RingPinned(req.rq) : 0),
                sizeof(QpObj))) {
    return Status::kNoResource;
  }

  Charge charge;
  auto qp = std::make_unique<QpObj>();
  VRDMA_RETURN_IF_ERROR(MapPages(*vm, req.sq.pages, &qp->sq_view, &charge));
  GuestPageView rq_view;
  if (has_rq) {
    VRDMA_RETURN_IF_ERROR(MapPages(*vm, req.rq.pages, &rq_view, &charge));
  }

  qp->type = req.type;
  qp->pd = req.pd;
  qp->caps = c;
  if (!has_rq) qp->caps.max_recv_wr = qp->caps.max_recv_sge = 0;
  qp->sq_sig_all = req.sq_sig_all;
  qp->sq = GuestRing(qp->sq_view.data(), req.sq.log2_num_elem,
                     req.sq.log2_elem_size);
  qp->sq_window = std::min(qp->sq.capacity(), limits_.max_qp_wr);
  qp->sq_limits.type = req.type;
  qp->sq_limits.max_sge = c.max_send_sge;
  qp->sq_limits.max_inline = c.max_inline_data;
  qp->sq_limits.elem_size = qp->sq.elem_size();
  qp->sq_limits.max_msg_sz = limits_.max_msg_sz;
  // The QP's flow in the scheduler stage: its FIFO and piece records are
  // allocated here, on the control thread.
  sched::FlowSpec flow;
  flow.tenant = vm->id;
  flow.owner = qp.get();
  flow.type = req.type;
  flow.rnic_depth = qp->sq_window;
  flow.queue_capacity = std::min(qp->sq_window, kStageQueueCapacity);
  flow.max_inline = c.max_inline_data;
  std::unique_ptr<sched::FlowStorage> storage = sched::Stage::PrepareFlow(flow);
  {
    // Room for every WR the stage can hold: its FIFO and its records.
    const uint32_t n = std::bit_ceil(flow.queue_capacity +
                                     sched::Stage::RecordCapacity(flow) + 1);
    qp->slots.assign(n, SendSlot{});
    qp->slot_mask = n - 1;
  }
  if (has_rq) {
    InitRecvQueue(qp->rq, req.rq, c.max_recv_sge, limits_.max_qp_wr,
                  std::move(rq_view));
  }
  // The RNIC QP: the guest's caps, its queues as deep as the engine feeds
  // them.
  QpCaps rnic_caps;
  rnic_caps.max_send_wr = qp->sq_window;
  rnic_caps.max_recv_wr = has_rq ? qp->rq.depth : 0;
  rnic_caps.max_send_sge = c.max_send_sge;
  rnic_caps.max_recv_sge = has_rq ? c.max_recv_sge : 0;
  rnic_caps.max_inline_data = c.max_inline_data;
  charge.host_bytes = sizeof(QpObj) + qp->slots.capacity() * sizeof(SendSlot) +
                      ShadowBytes(qp->rq) + storage->host_bytes() +
                      rnic_.QpHostBytes(rnic_caps);
  qp->charge = charge;
  // Refused before the RNIC's memory is prepared: a VM at its quota costs
  // the control thread no queue allocation.
  if (!Fits(vm->config.quotas, vm->stats, charge)) return Status::kNoResource;
  // The RNIC's queue memory, and the CQ growth this QP will need, are
  // allocated here on the control thread (the plan is checked again on
  // the data-path thread, where it is applied).
  rnic_.PrepareQp(rnic_caps);
  {
    CqObj* scq = vm->cqs.Lookup(req.send_cq);
    CqObj* rcq = vm->cqs.Lookup(req.recv_cq);
    const SrqObj* srq = has_rq ? nullptr : vm->srqs.Lookup(req.srq);
    const CqPlan plan = PlanCqs(*qp, scq, rcq, srq, sched::Stage::RecordCapacity(flow),
                                limits_.max_cqe);
    for (int i = 0; i < 2; ++i) {
      if (plan.cqs[i] != nullptr && plan.need[i] > plan.cqs[i]->host_depth) {
        rnic_.PrepareCq(plan.need[i]);
      }
    }
  }

  Result<CreateQpResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    CqObj* scq = vm->cqs.Lookup(req.send_cq);
    CqObj* rcq = vm->cqs.Lookup(req.recv_cq);
    SrqObj* srq = has_rq ? nullptr : vm->srqs.Lookup(req.srq);
    if (!pd || !scq || !rcq || (!has_rq && !srq)) {
      out = Status::kBadHandle;
      return;
    }
    Result<uint32_t> h = vm->qps.PeekNextHandle();
    if (!h.ok()) return;
    // Host CQs that cannot overflow (cq_sizing.h): grow them to hold this
    // QP's worst case too, or refuse the QP.
    if (scq->rnic_failed || rcq->rnic_failed) {
      out = Status::kBadState;  // the guest was told (CQ_ERR): destroy it
      return;
    }
    const uint32_t records = sched::Stage::RecordCapacity(flow);
    const CqPlan plan = PlanCqs(*qp, scq, rcq, srq, records, limits_.max_cqe);
    // The QP is refused unless its own charge and the growth of its CQs
    // fit.
    Charge total = charge;
    for (int i = 0; i < 2; ++i) {
      CqObj* cq = plan.cqs[i];
      if (cq == nullptr) continue;
      if (plan.need[i] == 0) return;  // kNoResource: beyond the RNIC's max_cqe
      if (plan.need[i] > cq->host_depth) {
        total.host_bytes += rnic_.CqHostBytes(plan.need[i]) -
                            rnic_.CqHostBytes(cq->host_depth);
      }
    }
    if (!Fits(vm->config.quotas, vm->stats, total)) return;  // kNoResource
    const uint64_t send_demand = plan.send_demand;
    const uint64_t recv_demand = plan.recv_demand;
    const std::array<uint32_t, 2>& need = plan.need;
    for (int i = 0; i < 2; ++i) {
      CqObj* cq = plan.cqs[i];
      if (cq == nullptr || need[i] <= cq->host_depth) continue;
      if (rnic_.ResizeCq(cq->rnic, need[i]) != Status::kOk) return;
      const Charge grown{0, rnic_.CqHostBytes(need[i]) -
                                rnic_.CqHostBytes(cq->host_depth), 0};
      cq->host_depth = need[i];
      cq->charge.host_bytes += grown.host_bytes;
      Take(vm->stats, grown);
    }
    QpInit init;
    init.type = req.type;
    init.pd = pd->rnic;
    init.send_cq = scq->rnic;
    init.recv_cq = rcq->rnic;
    init.has_srq = !has_rq;
    if (srq) init.srq = srq->rnic;
    init.caps = rnic_caps;
    init.sq_sig_all = req.sq_sig_all;
    Result<RnicQp> r = rnic_.CreateQp(init);
    if (!r.ok()) {
      out = r.status();
      return;
    }
    if (!vm->qpn_to_qp.Insert(r->qpn, *h)) {
      (void)rnic_.DestroyQp(*r);
      out = Status::kIoError;  // the RNIC reused a live QPN
      return;
    }
    (void)qpn_owner_.Insert(r->qpn, vm->id);  // best effort: an optimisation
    storage->spec.qp = *r;
    storage->spec.send_cq = scq->rnic;
    storage->spec.cookie_base = MakeCookie(*h, CookieKind::kSend, 0);
    qp->flow = stage_.AddFlow(std::move(storage), options_.clock());
    if (qp->flow == sched::kNoFlow) {
      vm->qpn_to_qp.Erase(r->qpn);
      qpn_owner_.Erase(r->qpn);
      (void)rnic_.DestroyQp(*r);
      out = Status::kNoResource;
      return;
    }
    qp->rnic = *r;
    qp->qpn = r->qpn;
    qp->vm = vm;
    qp->handle = *h;
    qp->send_cq = scq;
    qp->recv_cq = rcq;
    qp->srq = srq;
    qp->sq.StoreConsumer(0);  // the host owns the consumer index
    if (has_rq) {
      qp->rq.qp = qp.get();
      qp->rq.ring.StoreConsumer(0);
    }
    ++pd->refs;
    ++scq->refs;
    ++rcq->refs;
    qp->send_cq_demand = send_demand;
    qp->recv_cq_demand = srq ? 0 : recv_demand;  // an SRQ's: per CQ
    scq->demand += send_demand;
    rcq->demand += recv_demand;
    if (srq) {
      auto it = std::find_if(rcq->srq_users.begin(), rcq->srq_users.end(),
                             [&](const auto& u) { return u.first == srq; });
      if (it == rcq->srq_users.end()) {
        rcq->srq_users.emplace_back(srq, 1);  // control path: may allocate
      } else {
        ++it->second;
      }
      ++srq->refs;
      ++rcq->srq_listeners;
      active_cq_.PushBack(rcq);  // SRQ receives may land at any time
    }
    ++vm->stats.qps;
    Take(vm->stats, charge);
    CreateQpResult res{qp->qpn, qp->caps};
    (void)vm->qps.Insert(std::move(qp));
    out = res;
  });
  rnic_.Reclaim();  // queue memory the RNIC let go of on the data-path thread
  return out;
}

Status EngineImpl::ModifyQp(VmId id, const ModifyQpRequest& req) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  Status s = Status::kOk;
  executor_.RunSync([&] {
    std::optional<uint32_t> h = vm->qpn_to_qp.Find(req.qpn);
    QpObj* qp = h ? vm->qps.Lookup(*h) : nullptr;
    if (qp == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    s = ModifyQpLocked(*vm, *qp, req);
  });
  return s;
}

Status EngineImpl::ModifyQpLocked(VmContext& vm, QpObj& qp,
                                  const ModifyQpRequest& req) {
  // 1. Check without side effects.
  QpCheckContext ctx;
  ctx.type = qp.type;
  ctx.current = qp.state;
  ctx.num_gids = static_cast<uint32_t>(vm.config.gids.size());
  ctx.active_mtu_bytes =
      limits_.active_mtu_bytes ? limits_.active_mtu_bytes : 4096;
  QpState next = qp.state;
  VRDMA_RETURN_IF_ERROR(CheckModifyQp(req, ctx, &next));
  // A QP on a host CQ the RNIC failed cannot work again.
  if ((qp.send_cq->rnic_failed || qp.recv_cq->rnic_failed) &&
      next != QpState::kErr && next != QpState::kReset) {
    return Status::kBadState;
  }

  // 2. Translate and let the RNIC apply (it enforces its own rules too).
  constexpr uint32_t kRnicBits = kQpState | kQpAccessFlags | kQpPkeyIndex |
                                 kQpPort | kQpQkey | kQpAv | kQpPathMtu |
                                 kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                 kQpRqPsn | kQpMaxQpRdAtomic | kQpMinRnrTimer |
                                 kQpSqPsn | kQpMaxDestRdAtomic | kQpDestQpn;
  QpAttr attr;
  attr.state = next;
  attr.access_flags = req.access_flags;
  attr.qkey = req.qkey;
  if (req.mask & kQpAv) attr.av = MakeAv(vm, req.ah);
  attr.path_mtu_bytes = req.path_mtu_bytes;
  attr.timeout = req.timeout;
  attr.retry_cnt = req.retry_cnt;
  attr.rnr_retry = req.rnr_retry;
  attr.min_rnr_timer = req.min_rnr_timer;
  attr.max_rd_atomic = req.max_rd_atomic;
  attr.max_dest_rd_atomic = req.max_dest_rd_atomic;
  attr.rq_psn = req.rq_psn;
  attr.sq_psn = req.sq_psn;
  attr.dest_qpn = req.dest_qpn;
  VRDMA_RETURN_IF_ERROR(rnic_.ModifyQp(qp.rnic, attr, req.mask & kRnicBits));

  // 3. Apply on our side.
  ModifyQpRequest& a = qp.attrs;
  const uint32_t m = req.mask;
  if (m & kQpAccessFlags) a.access_flags = req.access_flags;
  if (m & kQpPkeyIndex) a.pkey_index = req.pkey_index;
  if (m & kQpPort) a.port_num = req.port_num;
  if (m & kQpQkey) a.qkey = req.qkey;
  if (m & kQpAv) a.ah = req.ah;
  if (m & kQpPathMtu) a.path_mtu_bytes = req.path_mtu_bytes;
  if (m & kQpTimeout) a.timeout = req.timeout;
  if (m & kQpRetryCnt) a.retry_cnt = req.retry_cnt;
  if (m & kQpRnrRetry) a.rnr_retry = req.rnr_retry;
  if (m & kQpMinRnrTimer) a.min_rnr_timer = req.min_rnr_timer;
  if (m & kQpMaxQpRdAtomic) a.max_rd_atomic = req.max_rd_atomic;
  if (m & kQpMaxDestRdAtomic) a.max_dest_rd_atomic = req.max_dest_rd_atomic;
  if (m & kQpRqPsn) a.rq_psn = req.rq_psn;
  if (m & kQpSqPsn) a.sq_psn = req.sq_psn;
  if (m & kQpDestQpn) a.dest_qpn = req.dest_qpn;
  a.mask |= m & ~uint32_t{VIRTIO_RDMA_QP_CUR_STATE |
                          VIRTIO_RDMA_QP_EN_SQD_ASYNC_NOTIFY};

  const QpState prev = qp.state;
  if (next == prev) return Status::kOk;
  switch (next) {
    case QpState::kReset: {
      // The RNIC discarded outstanding work without completions.
      pending_sq_.Remove(&qp);
      stage_.EndFlowWork(qp.flow, policy::FlowEnd::kReset, options_.clock());
      CloseSendWindow(qp);
      if (!qp.srq) {
        UnlinkRecv(qp.rq);
        Retire(*qp.recv_cq, qp.rq.posted);
        qp.rq.posted = 0;
        qp.rq.head = qp.rq.consumer;  // those WQEs get posted again later
        std::fill(qp.rq.done.begin(), qp.rq.done.end(), 0);
        std::fill(qp.rq.slots.begin(), qp.rq.slots.end(), RecvSlot{});
        qp.rq.plan_head = qp.rq.plan_count = 0;
        qp.rq.open = false;
        qp.rq.announced = false;  // chosen again at RTR
      }
      qp.state = next;
      break;
    }
    case QpState::kErr:
      qp.state = next;
      EnterError(qp);  // RNIC already in ERR: drain, flush our side
      break;
    default:
      qp.state = next;
      if (next == QpState::kRtr) {
        if (!qp.srq) {
          ChooseReceiveMode(qp);
          ReplenishRecv(qp.rq);
        }
        UpdateReassembly(qp);
      }
      if (next == QpState::kRts)
        pending_sq_.PushBack(&qp);  // WQEs posted early
      break;
  }
  return Status::kOk;
}

Result<QueryQpResult> EngineImpl::QueryQp(VmId id, uint32_t qpn) const {
  const VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  Result<QueryQpResult> out = Status::kBadHandle;
  executor_.RunSync([&] {
    std::optional<uint32_t> h = vm->qpn_to_qp.Find(qpn);
    const QpObj* qp = h ? vm->qps.Lookup(*h) : nullptr;
    if (qp == nullptr) return;
    Result<QpAttr> r = rnic_.QueryQp(qp->rnic);
    if (!r.ok()) {
      out = r.status();
      return;
    }
    QueryQpResult res;
    res.attr = qp->attrs;
    res.attr.qpn = qp->qpn;
    res.attr.state = r->state;
    res.attr.cur_state = r->state;
    res.attr.mask = qp->attrs.mask | VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_CAP;
    res.cap = qp->caps;
    out = res;
  });
  return out;
}

void EngineImpl::DestroyQpLocked(VmContext& vm, uint32_t handle) {
  QpObj* qp = vm.qps.Lookup(handle);
  if (qp == nullptr) return;
  pending_sq_.Remove(qp);
  qp->flow_storage = stage_.RemoveFlow(qp->flow, options_.clock());
  qp->flow = sched::kNoFlow;
  if (!qp->srq) UnlinkRecv(qp->rq);
  // Destroy generates no completions; any still in the RNIC CQ carry a
  // cookie whose handle is now stale and are dropped.
  (void)rnic_.DestroyQp(qp->rnic);
  CloseSendWindow(*qp);
  if (!qp->srq) Retire(*qp->recv_cq, qp->rq.posted);
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
  qpn_owner_.Erase(qp->qpn);
  GiveBack(vm.stats, qp->charge);
  --vm.stats.qps;
}

Status EngineImpl::DestroyQp(VmId id, uint32_t qpn) {
  VmContext* vm = FindVm(id);
  if (vm == nullptr) return Status::kBadHandle;
  Status s = Status::kOk;
  std::unique_ptr<QpObj> dead;
  executor_.RunSync([&] {
    std::optional<uint32_t> h = vm->qpn_to_qp.Find(qpn);
    if (!h || vm->qps.Lookup(*h) == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    DestroyQpLocked(*vm, *h);
    dead = vm->qps.Remove(*h);
  });
  rnic_.Reclaim();
  return s;  // ring views unmapped here, and the RNIC's queues freed
}

// ---------------------------------------------------------------- SRQs

Result<CreateSrqResult> EngineImpl::CreateSrq(VmId id,
                                              const CreateSrqRequest& req) {
  VmContext* vm = FindVm(id);
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

  Result<CreateSrqResult> out = Status::kNoResource;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    Result<uint32_t> h = vm->srqs.PeekNextHandle();
    if (pd == nullptr || !h.ok() || !Fits(vm->config.quotas, vm->stats, charge)) {
      return;  // kNoResource
    }
    Result<RnicSrq> r = rnic_.CreateSrq(pd->rnic, srq->rq.depth, req.max_sge);
    if (!r.ok()) {
      out = r.status();
      return;
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
    ReplenishRecv(raw->rq);  // WQEs the guest posted before creation returned
    out = CreateSrqResult{*h, req.max_wr, req.max_sge};
  });
  rnic_.Reclaim();  // queue memory the RNIC let go of on the data-path thread
  return out;
}

Status EngineImpl::ModifySrq(VmId id, uint32_t srq, uint32_t mask,
                             uint32_t max_wr, uint32_t srq_limit) {
  (void)max_wr;
  VmContext* vm = FindVm(id);
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

void EngineImpl::DestroySrqLocked(VmContext& vm, uint32_t handle) {
  SrqObj* srq = vm.srqs.Lookup(handle);
  if (srq == nullptr) return;
  UnlinkRecv(srq->rq);
  (void)rnic_.DestroySrq(srq->rnic);
  if (PdObj* pd = vm.pds.Lookup(srq->pd)) --pd->refs;
  GiveBack(vm.stats, srq->charge);
  --vm.stats.srqs;
}

Status EngineImpl::DestroySrq(VmId id, uint32_t srq) {
  return DestroyObject(id, &VmContext::srqs, srq, [&](VmContext& vm, SrqObj&) {
    DestroySrqLocked(vm, srq);
  });
}

}  // namespace vrdma::engine
