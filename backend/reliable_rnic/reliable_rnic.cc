// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic's control path: its limits, the object tables, the rings of
// the virtual CQs (reliable_rnic.h).
#include "backend/reliable_rnic/reliable_rnic.h"

#include <algorithm>
#include <utility>

namespace vrdma {

using reliable::CompletionRing;
using reliable::VirtualCq;
using reliable::VirtualQp;

namespace reliable {

RnicLimits LayerLimits(const RnicLimits& lower,
                       const ReliableRnicOptions& options) {
  const auto less = [](uint64_t a, uint64_t b) -> uint32_t {
    return a > b ? static_cast<uint32_t>(a - b) : 0;
  };
  // Windows and fast-registration MRs (max_mw, max_fr_mr, max_fr_pages)
  // are the lower's, passed through unchanged.
  RnicLimits l = lower;
  l.max_qp = std::min(less(lower.max_qp, kLayerQps) / kLowerQpsPerVirtualQp,
                      options.max_qp);
  l.max_cq = std::min(less(lower.max_cq, kLayerCqs), options.max_cq);
  l.max_pd = less(lower.max_pd, kLayerPds);
  l.max_mr = std::min(less(lower.max_mr, kLayerMrs + uint64_t{l.max_qp} *
                                                         kLowerMrsPerVirtualQp),
                      options.max_mr);
  return l;
}

}  // namespace reliable

ReliableRnic::ReliableRnic(Rnic& lower, ReliableRnicOptions options)
    : lower_(lower),
      options_(options),
      limits_(reliable::LayerLimits(lower.limits(), options)),
      mrs_(limits_.max_mr),
      qps_(limits_.max_qp),
      cqs_(limits_.max_cq),
      qpn_index_(limits_.max_qp),
      rc_index_(options_.max_framed_qps) {}

ReliableRnic::~ReliableRnic() {
  // Switches' connections (retired ones) before the layer's lower objects.
  qps_.ForEach([](reliable::VirtualQp& v) {
    if (v.sw != nullptr) {
      v.sw->retired.reset();
      v.sw->retired_rc.reset();
    }
  });
  DetachUc();
  delete prepared_ring_.exchange(nullptr);
  FreeDeadRings();
}

// --- MRs ---------------------------------------------------------------------

Result<RnicMr> ReliableRnic::RegMr(RnicPd pd, uint8_t* addr, uint64_t length,
                                   uint64_t iova, uint32_t access) {
  if (mrs_.live() == mrs_.capacity()) return Status::kNoResource;
  Result<RnicMr> mr = lower_.RegMr(pd, addr, length, iova, access);
  if (!mr.ok()) return mr;
  if (!mrs_.Add({*mr, pd, addr, iova, length, access})) {
    (void)lower_.DeregMr(*mr);  // a lower id recorded twice: the lower's bug
    return Status::kIoError;
  }
  return mr;
}

Status ReliableRnic::DeregMr(RnicMr mr) {
  VRDMA_RETURN_IF_ERROR(lower_.DeregMr(mr));
  mrs_.Remove(mr);
  return Status::kOk;
}

// --- CQs ---------------------------------------------------------------------

uint64_t ReliableRnic::CqHostBytes(uint32_t depth) const {
  return lower_.CqHostBytes(depth) +
         CompletionRing::BytesFor(options_.synthesized_per_cq);
}

void ReliableRnic::PrepareCq(uint32_t depth) {
  lower_.PrepareCq(depth);
  // Every ring has the same size: one prepared is enough for any CreateCq
  // (and a ResizeCq keeps its ring, so one left over waits for the next).
  if (prepared_ring_.load(std::memory_order_acquire) != nullptr) return;
  auto ring = std::make_unique<CompletionRing>(options_.synthesized_per_cq);
  delete prepared_ring_.exchange(ring.release(), std::memory_order_acq_rel);
}

std::unique_ptr<CompletionRing> ReliableRnic::TakeRing() {
  std::unique_ptr<CompletionRing> ring(
      prepared_ring_.exchange(nullptr, std::memory_order_acq_rel));
  if (ring == nullptr)
    ring = std::make_unique<CompletionRing>(options_.synthesized_per_cq);
  return ring;
}

void ReliableRnic::Bury(std::unique_ptr<CompletionRing> ring) {
  CompletionRing* node = ring.release();
  node->next_dead = dead_rings_.load(std::memory_order_relaxed);
  while (!dead_rings_.compare_exchange_weak(node->next_dead, node,
                                            std::memory_order_release,
                                            std::memory_order_relaxed)) {
  }
}

void ReliableRnic::Reclaim() {
  lower_.Reclaim();
  FreeRetired();
  FreeDeadRings();
}

void ReliableRnic::FreeDeadRings() {
  CompletionRing* n = dead_rings_.exchange(nullptr, std::memory_order_acquire);
  while (n != nullptr) {
    std::unique_ptr<CompletionRing> dead(n);
    n = n->next_dead;
  }
}

Result<RnicCq> ReliableRnic::CreateCq(uint32_t depth) {
  if (cqs_.live() == cqs_.capacity()) return Status::kNoResource;
  Result<RnicCq> cq = lower_.CreateCq(depth);
  if (!cq.ok()) return cq;
  if (cqs_.Insert(cq->id, VirtualCq{*cq, depth, TakeRing()}) == nullptr) {
    (void)lower_.DestroyCq(*cq);
    return Status::kIoError;
  }
  return cq;
}

Status ReliableRnic::ResizeCq(RnicCq cq, uint32_t depth) {
  VRDMA_RETURN_IF_ERROR(lower_.ResizeCq(cq, depth));
  if (VirtualCq* v = cqs_.Find(cq.id)) v->depth = depth;
  return Status::kOk;
}

Status ReliableRnic::DestroyCq(RnicCq cq) {
  VRDMA_RETURN_IF_ERROR(lower_.DestroyCq(cq));
  if (VirtualCq* v = cqs_.Find(cq.id)) {
    Bury(std::move(v->synthesized));
    cqs_.Erase(cq.id);
  }
  return Status::kOk;
}

// --- QPs ---------------------------------------------------------------------

Result<RnicQp> ReliableRnic::CreateQp(const QpInit& init) {
  if (qps_.live() == qps_.capacity()) return Status::kNoResource;
  Result<RnicQp> qp = lower_.CreateQp(init);
  if (!qp.ok()) return qp;
  VirtualQp v;
  v.lower = *qp;
  v.type = init.type;
  v.pd = init.pd;
  v.send_cq = init.send_cq;
  v.recv_cq = init.recv_cq;
  v.has_srq = init.has_srq;
  v.srq = init.srq;
  v.caps = init.caps;
  v.sq_sig_all = init.sq_sig_all;
  if (link_ != nullptr && init.type == QpType::kRc && !init.has_srq) {
    v.rq = std::make_unique<reliable::RecvQueue>(init.caps.max_recv_wr,
                                                 init.caps.max_recv_sge);
  }
  if (qps_.Insert(qp->id, std::move(v)) == nullptr) {
    (void)lower_.DestroyQp(*qp);
    return Status::kIoError;
  }
  (void)qpn_index_.Insert(qp->qpn, qp->id);
  return qp;
}

Status ReliableRnic::DestroyQp(RnicQp qp) {
  if (VirtualQp* v = qps_.Find(qp.id)) {
    UnframeRc(*v);  // its backup first
    DropSwitch(*v);
  }
  VRDMA_RETURN_IF_ERROR(lower_.DestroyQp(qp));
  if (VirtualQp* v = qps_.Find(qp.id)) Unframe(*v);
  qpn_index_.Erase(qp.qpn);
  qps_.Erase(qp.id);
  return Status::kOk;
}

}  // namespace vrdma
