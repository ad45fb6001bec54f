// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// QpControl (qp_control.h): QPs on the control path: checks and ring
// mapping on the control thread; the CQs grown in a RunSync closure; the
// RNIC's QP created and modified where the slow RNIC calls run
// (rnic_calls.h); the stage's flow and publication, and a transition's
// effect on the engine's side, in closures after it.
#include "backend/engine/qp_control.h"

#include <algorithm>
#include <bit>

#include "backend/engine/address.h"
#include "backend/engine/cq_sizing.h"
#include "backend/engine/qp_attr_check.h"
#include "backend/engine/recv_queue.h"
#include "backend/engine/ring_check.h"
#include "backend/engine/rnic_calls.h"

namespace vrdma::engine {
namespace {

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

Result<CreateQpResult> QpControl::CreateQp(VmId id,
                                            const CreateQpRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  VRDMA_RETURN_IF_ERROR(CheckCreateQp(req, resources_.VmLimits(*vm)));
  if (vm->pds.Lookup(req.pd) == nullptr ||
      vm->cqs.Lookup(req.send_cq) == nullptr ||
      vm->cqs.Lookup(req.recv_cq) == nullptr ||
      (req.srq != 0 && vm->srqs.Lookup(req.srq) == nullptr)) {
    return Status::kBadHandle;
  }
  const QpCaps& c = req.caps;
  const bool has_rq = req.srq == 0;
  if (vm->qps.full()) return Status::kNoResource;
  // A kernel QP (docs/virtio-rdma.md §4.8): the operator allowed the VM's
  // kernel consumers, and its PD's RAM MRs exist (registered now for the
  // PD's first one). They stay with the PD if the QP fails after.
  if (req.kernel) {
    if (!vm->config.quotas.kernel_verbs) return Status::kUnsupported;
    VRDMA_RETURN_IF_ERROR(resources_.EnsureRamMrs(*vm, req.pd));
  }
  if (!CanStart(*vm, RingPinned(req.sq) + (has_rq ? RingPinned(req.rq) : 0),
                sizeof(QpObj))) {
    return Status::kNoResource;
  }

  Charge charge;
  auto qp = std::make_unique<QpObj>();
  VRDMA_RETURN_IF_ERROR(resources_.MapPages(*vm, req.sq.pages, &qp->sq_view, &charge));
  GuestPageView rq_view;
  if (has_rq) {
    VRDMA_RETURN_IF_ERROR(resources_.MapPages(*vm, req.rq.pages, &rq_view, &charge));
  }

  qp->type = req.type;
  qp->pd = req.pd;
  qp->caps = c;
  if (!has_rq) qp->caps.max_recv_wr = qp->caps.max_recv_sge = 0;
  qp->sq_sig_all = req.sq_sig_all;
  qp->kernel = req.kernel;
  qp->sq = GuestRing(qp->sq_view.data(), req.sq.log2_num_elem,
                     req.sq.log2_elem_size);
  qp->sq_window = sched::HostSqDepth(qp->sq.capacity(), limits_.max_qp_wr);
  qp->sq_limits.type = req.type;
  qp->sq_limits.max_sge = c.max_send_sge;
  qp->sq_limits.max_inline = c.max_inline_data;
  qp->sq_limits.elem_size = qp->sq.elem_size();
  qp->sq_limits.max_msg_sz = limits_.max_msg_sz;
  qp->sq_limits.windows = resources_.VmLimits(*vm).max_mw > 0;  // F_MW offered
  // REG_MR on the VM's kernel QPs (F_KERNEL offered, §4.8).
  qp->sq_limits.fast_reg = req.kernel && resources_.VmLimits(*vm).max_fr_mr > 0 &&
                           (req.type == QpType::kRc || req.type == QpType::kUc);
  // The QP's flow in the scheduler stage: its FIFO and piece records are
  // allocated here, on the control thread.
  sched::FlowSpec flow;
  flow.tenant = vm->id;
  flow.owner = qp.get();
  flow.type = req.type;
  flow.rnic_depth = qp->sq_window;
  flow.queue_capacity = std::min(qp->sq.capacity(), kStageQueueCapacity);
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
  rnic_caps.type = req.type;  // a layer RNIC charges by type (QpCaps::type)
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

  // 1. On the data-path thread: the host CQs' growth to hold this QP's
  // worst case too (cq_sizing.h: they cannot overflow) planned and charged,
  // or the QP is refused.
  Result<CreateQpResult> out = Status::kNoResource;
  QpInit init;
  CqPlan plan;
  bool planned = false;
  struct Growth {
    CqObj* cq;
    uint32_t from;
    Charge charge;
  };
  std::array<Growth, 2> growth{};
  int n_growth = 0;
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    CqObj* scq = vm->cqs.Lookup(req.send_cq);
    CqObj* rcq = vm->cqs.Lookup(req.recv_cq);
    SrqObj* srq = has_rq ? nullptr : vm->srqs.Lookup(req.srq);
    if (!pd || !scq || !rcq || (!has_rq && !srq)) {
      out = Status::kBadHandle;
      return;
    }
    if (!vm->qps.PeekNextHandle().ok()) return;
    if (scq->rnic_failed || rcq->rnic_failed) {
      out = Status::kBadState;  // the guest was told (CQ_ERR): destroy it
      return;
    }
    plan = PlanCqs(*qp, scq, rcq, srq, sched::Stage::RecordCapacity(flow), limits_.max_cqe);
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
    for (int i = 0; i < 2; ++i) {
      CqObj* cq = plan.cqs[i];
      if (cq == nullptr || plan.need[i] <= cq->host_depth) continue;
      const Charge grown{0, rnic_.CqHostBytes(plan.need[i]) -
                                rnic_.CqHostBytes(cq->host_depth), 0};
      growth[n_growth++] = Growth{cq, cq->host_depth, grown};
      cq->host_depth = plan.need[i];  // read on the control path only
      cq->charge.host_bytes += grown.host_bytes;
      Take(vm->stats, grown);
    }
    init.type = req.type;
    init.pd = pd->rnic;
    init.send_cq = scq->rnic;
    init.recv_cq = rcq->rnic;
    init.has_srq = !has_rq;
    if (srq) init.srq = srq->rnic;
    init.caps = rnic_caps;
    init.sq_sig_all = req.sq_sig_all;
    planned = true;
  });
  if (!planned) {
    rnic_.Reclaim();
    return out;
  }
  // 2. The CQs grown and the RNIC's QP made where the slow RNIC calls run
  // (rnic_calls.h): firmware commands on a physical RNIC, beside the data
  // path, which may poll those CQs meanwhile (the QP is not yet theirs).
  // Only this thread destroys CQs.
  int grown = 0;
  const Status resized = RunRnicControl(rnic_, executor_, [&] {
    for (; grown < n_growth; ++grown) {
      const Status s = rnic_.ResizeCq(growth[grown].cq->rnic, growth[grown].cq->host_depth);
      if (s != Status::kOk) return s;
    }
    return Status::kOk;
  });
  if (resized != Status::kOk) {
    executor_.RunSync([&] {  // the CQs the RNIC did not grow
      for (int i = grown; i < n_growth; ++i) {
        growth[i].cq->host_depth = growth[i].from;
        growth[i].cq->charge.host_bytes -= growth[i].charge.host_bytes;
        GiveBack(vm->stats, growth[i].charge);
      }
    });
    rnic_.Reclaim();
    return Status::kNoResource;
  }
  const Result<RnicQp> r = RunRnicControl(rnic_, executor_, [&] { return rnic_.CreateQp(init); });
  if (!r.ok()) {
    rnic_.Reclaim();
    return r.status();
  }
  // 3. Published on the data-path thread. Only this thread destroys the
  // QP's PD, CQs and SRQ; a CQ the RNIC failed meanwhile refuses it.
  executor_.RunSync([&] {
    PdObj* pd = vm->pds.Lookup(req.pd);
    CqObj* scq = vm->cqs.Lookup(req.send_cq);
    CqObj* rcq = vm->cqs.Lookup(req.recv_cq);
    SrqObj* srq = has_rq ? nullptr : vm->srqs.Lookup(req.srq);
    if (scq->rnic_failed || rcq->rnic_failed) {
      out = Status::kBadState;
      return;
    }
    Result<uint32_t> h = vm->qps.PeekNextHandle();
    // Its QP1 (gsi.h) is one of its max_qp QPs too.
    if (!h.ok() || vm->stats.qps >= vm->config.quotas.max_qp) return;
    // QPN 1 is the VM's GSI QP (gsi.h); RNICs keep 0 and 1 for SMI and GSI.
    if (r->qpn == VIRTIO_RDMA_GSI_QPN || !vm->qpn_to_qp.Insert(r->qpn, *h)) {
      out = Status::kIoError;  // the RNIC reused a live or reserved QPN
      return;
    }
    (void)vms_.qpn_owner.Insert(r->qpn, vm->id);  // best effort: an optimisation
    storage->spec.qp = *r;
    storage->spec.send_cq = scq->rnic;
    storage->spec.cookie_base = MakeCookie(*h, CookieKind::kSend, 0);
    qp->flow = stage_.AddFlow(std::move(storage), clock_());
    if (qp->flow == sched::kNoFlow) {
      vm->qpn_to_qp.Erase(r->qpn);
      vms_.qpn_owner.Erase(r->qpn);
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
    qp->send_cq_demand = plan.send_demand;
    qp->recv_cq_demand = srq ? 0 : plan.recv_demand;  // an SRQ's: per CQ
    scq->demand += plan.send_demand;
    rcq->demand += plan.recv_demand;
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
      completions_.Watch(*rcq);  // SRQ receives may land at any time
    }
    ++vm->stats.qps;
    Take(vm->stats, charge);
    CreateQpResult res{qp->qpn, qp->caps};
    (void)vm->qps.Insert(std::move(qp));
    out = res;
  });
  if (!out.ok()) {
    // Not published: the data path never saw it.
    RunRnicControl(rnic_, executor_, [&] { return rnic_.DestroyQp(*r); });
  }
  rnic_.Reclaim();  // queue memory the RNIC let go of on the data-path thread
  return out;
}

Status QpControl::ModifyQp(VmId id, const ModifyQpRequest& req) {
  VmContext* vm = vms_.Find(id);
  if (vm == nullptr) return Status::kBadHandle;
  auto find = [&]() -> QpObj* {
    std::optional<uint32_t> h = vm->qpn_to_qp.Find(req.qpn);
    return h ? vm->qps.Lookup(*h) : nullptr;
  };
  // Where the RNIC allows it, its ModifyQp (a firmware command on a
  // physical RNIC) runs beside the data path, between two closures; else
  // all in one.
  const bool beside = rnic_.control_beside_data_path();
  QpTransition t;
  RnicQp rnic_qp{};
  Status s = Status::kOk;
  executor_.RunSync([&] {
    QpObj* qp = find();
    if (qp == nullptr) {
      s = Status::kBadHandle;
      return;
    }
    s = PlanModifyQp(*vm, *qp, req, &t);
    if (s != Status::kOk) return;
    if (t.next == QpState::kReset) QuiesceForReset(*qp);
    rnic_qp = qp->rnic;
    if (beside) return;
    s = rnic_.ModifyQp(rnic_qp, t.attr, t.mask);
    if (s == Status::kOk) ApplyModifyQp(*qp, req, t);
  });
  if (!beside || s != Status::kOk) return s;
  // Only this thread destroys QPs: the RNIC's QP outlives the call.
  VRDMA_RETURN_IF_ERROR(rnic_.ModifyQp(rnic_qp, t.attr, t.mask));
  executor_.RunSync([&] {
    if (QpObj* qp = find()) ApplyModifyQp(*qp, req, t);
  });
  return Status::kOk;
}

Status QpControl::PlanModifyQp(const VmContext& vm, const QpObj& qp,
                               const ModifyQpRequest& req, QpTransition* t) const {
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
  // Translated for the RNIC (it enforces its own rules too).
  constexpr uint32_t kRnicBits = kQpState | kQpAccessFlags | kQpPkeyIndex |
                                 kQpPort | kQpQkey | kQpAv | kQpPathMtu |
                                 kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                 kQpRqPsn | kQpMaxQpRdAtomic | kQpMinRnrTimer |
                                 kQpSqPsn | kQpMaxDestRdAtomic | kQpDestQpn;
  QpAttr& attr = t->attr;
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
  t->mask = req.mask & kRnicBits;
  t->from = qp.state;
  t->next = next;
  return Status::kOk;
}

void QpControl::QuiesceForReset(QpObj& qp) {
  if (qp.state == QpState::kReset) return;
  // The RNIC discards outstanding work without completions.
  send_.Unschedule(qp);
  stage_.EndFlowWork(qp.flow, policy::FlowEnd::kReset, clock_());
  send_.CloseSendWindow(qp);
  recv_.Reset(qp);
  qp.state = QpState::kReset;
}

void QpControl::ApplyModifyQp(QpObj& qp, const ModifyQpRequest& req,
                              const QpTransition& t) {
  RecordQpAttrs(req, &qp.attrs);
  // Between the closures the data path may have moved the QP on (to ERR,
  // on an RNIC error): that state stands.
  if (t.next == t.from || qp.state != t.from) return;
  qp.state = t.next;
  if (t.next == QpState::kErr) {
    errors_.EnterError(qp);  // RNIC already in ERR: drain, flush our side
    return;
  }
  if (t.next == QpState::kRtr) {
    if (!qp.srq) {
      recv_.ChooseReceiveMode(qp);
      recv_.Replenish(qp.rq);
    }
    recv_.UpdateReassembly(qp);
  }
  if (t.next == QpState::kRts) send_.Schedule(qp);  // WQEs posted early
}

Result<QueryQpResult> QpControl::QueryQp(VmId id, uint32_t qpn) const {
  const VmContext* vm = vms_.Find(id);
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
    out = QueryQpAnswer(qp->attrs, qp->qpn, r->state, qp->caps);
  });
  return out;
}

}  // namespace vrdma::engine
