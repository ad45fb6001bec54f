// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SoftRnic construction, limits, GIDs and the simple objects (PDs, AHs,
// SRQs). MRs, CQs, QPs and the data path live in their own files.
#include "backend/soft_rnic/soft_rnic.h"

#include <algorithm>
#include <chrono>

namespace vrdma {
namespace {

constexpr uint32_t kMaxQpByQpn = 0xffff;  // qpn = index << 8 | tag, 24 bits

uint64_t SteadyNowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

RnicLimits Clamp(RnicLimits l) {
  // Index of an lkey is 24 bits; the per-WR arrays are kMaxSge/kMaxInline.
  l.max_qp = std::min(l.max_qp, kMaxQpByQpn);
  // MR keys take indices up to 0x7fffff, window keys the next 0x3fffff
  // (SoftRnic::kMwIndexBase), fast-registration MRs' the last 0x3fffff
  // (SoftRnic::kFrIndexBase).
  l.max_mr = std::min<uint32_t>(l.max_mr, 0x7fffff);
  l.max_mw = std::min<uint32_t>(l.max_mw, 0x3fffff);
  l.max_fr_mr = std::min<uint32_t>(l.max_fr_mr, 0x3fffff);
  if (l.max_fr_mr == 0) l.max_fr_pages = 0;
  l.max_sge = std::min<uint32_t>(l.max_sge, kMaxSge);
  l.max_inline_data = std::min<uint32_t>(l.max_inline_data, kMaxInline);
  if (l.active_mtu_bytes < 256 || l.active_mtu_bytes > 4096 ||
      (l.active_mtu_bytes & (l.active_mtu_bytes - 1)) != 0) {
    l.active_mtu_bytes = 4096;
  }
  // A line rate below 1 Mb/s is raised to it (the wire's time of a largest
  // message then still fits its picosecond arithmetic).
  if (l.link_rate_bps != 0) l.link_rate_bps = std::max<uint64_t>(l.link_rate_bps, 1'000'000);
  return l;
}

}  // namespace

RnicLimits DefaultSoftRnicLimits() {
  RnicLimits l;
  l.max_qp = 16384;
  l.max_qp_wr = 16384;
  l.max_sge = 32;
  l.max_cq = 16384;
  l.max_cqe = 65536;
  l.max_mr = 65536;
  l.max_mr_size = uint64_t{1} << 32;
  l.max_mw = 65536;
  // Fast registration (nvme-rdma asks for 256 + 1 pages per MR).
  l.max_fr_mr = 4096;
  l.max_fr_pages = 512;
  l.max_pd = 16384;
  l.max_srq = 4096;
  l.max_srq_wr = 16384;
  l.max_inline_data = 256;
  l.max_msg_sz = uint32_t{1} << 31;
  l.active_mtu_bytes = 4096;
  l.node_guid = 0x02005e'fffe'000001ull;
  l.atomics = true;  // one data-path thread executes them all
  return l;
}

SoftRnic::SoftRnic(RnicLimits limits, SoftRnicClock clock,
                   fabric::Fabric* fabric)
    : limits_(Clamp(limits)),
      clock_(clock ? std::move(clock) : SoftRnicClock(SteadyNowNs)),
      wire_(limits_.link_rate_bps),
      fabric_(fabric),
      pds_(limits_.max_pd),
      mrs_(limits_.max_mr),
      mws_(limits_.max_mw, kMwIndexBase),
      frs_(limits_.max_fr_mr, kFrIndexBase),
      cqs_(limits_.max_cq),
      srqs_(limits_.max_srq),
      qps_(limits_.max_qp),
      // An AH per peer per PD: bound it like QPs.
      ahs_(limits_.max_qp) {
  async_cq_errors_.Init(limits_.max_cq);
}

SoftRnic::~SoftRnic() = default;

// --- GIDs -------------------------------------------------------------------

bool SoftRnic::GidRegistered(const Gid& gid) const {
  // Linear: GIDs are a handful per VM and the scan touches one array.
  for (int i = 0; i < num_gids_; ++i) {
    if (gids_[i] == gid) return true;
  }
  return false;
}

Status SoftRnic::AddGid(const Gid& gid) {
  if (gid == Gid{}) return Status::kInvalid;
  if (GidRegistered(gid)) return Status::kBusy;
  if (num_gids_ == kMaxGids) return Status::kNoResource;
  // On a fabric the GID must be this host's alone (another host has it:
  // kBusy), and packets to it come here from now on.
  if (fabric_ != nullptr) VRDMA_RETURN_IF_ERROR(fabric_->AddGid(gid));
  gids_[num_gids_++] = gid;
  return Status::kOk;
}

Status SoftRnic::RemoveGid(const Gid& gid) {
  for (int i = 0; i < num_gids_; ++i) {
    if (gids_[i] == gid) {
      gids_[i] = gids_[--num_gids_];
      if (fabric_ != nullptr) (void)fabric_->RemoveGid(gid);
      return Status::kOk;
    }
  }
  return Status::kBadHandle;
}

// --- PDs --------------------------------------------------------------------

Result<RnicPd> SoftRnic::AllocPd() {
  uint32_t h = 0;
  soft::Pd* pd = pds_.Create(&h);
  if (pd == nullptr) return Status::kNoResource;
  pd->handle = h;
  return RnicPd{h};
}

Status SoftRnic::DeallocPd(RnicPd pd) {
  soft::Pd* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  if (p->refs != 0) return Status::kBusy;
  pds_.Destroy(pd.id);
  return Status::kOk;
}

// --- AHs --------------------------------------------------------------------

Result<RnicAh> SoftRnic::CreateAh(RnicPd pd, const AddressVector& av) {
  soft::Pd* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  // Like a real RNIC's sgid_index check: only a GID of this port.
  if (!GidRegistered(av.sgid)) return Status::kInvalid;
  uint32_t h = 0;
  soft::Ah* ah = ahs_.Create(&h);
  if (ah == nullptr) return Status::kNoResource;
  ah->pd = p;
  ah->av = av;
  ++p->refs;
  return RnicAh{h};
}

Status SoftRnic::DestroyAh(RnicAh ah) {
  soft::Ah* a = ahs_.Get(ah.id);
  if (a == nullptr) return Status::kBadHandle;
  // Posted UD WQEs carry a copy of the address vector, so this is safe
  // while sends are outstanding.
  --a->pd->refs;
  ahs_.Destroy(ah.id);
  return Status::kOk;
}

// --- SRQs -------------------------------------------------------------------

// What CreateQp, CreateCq and CreateSrq allocate for objects of a shape
// (soft_objects.h): the object, its queues and side tables.
uint64_t SoftRnic::QpHostBytes(const QpCaps& c) const {
  return sizeof(soft::Qp) + uint64_t{c.max_send_wr} * sizeof(soft::SqSlot) +
         uint64_t{c.max_send_wr} * c.max_inline_data +
         soft::RecvRing::BytesFor(c.max_recv_wr, c.max_recv_sge);
}

uint64_t SoftRnic::CqHostBytes(uint32_t depth) const {
  return sizeof(soft::Cq) + uint64_t{depth} * sizeof(Completion);
}

uint64_t SoftRnic::SrqHostBytes(uint32_t max_wr, uint32_t max_sge) const {
  return sizeof(soft::Srq) + soft::RecvRing::BytesFor(max_wr, max_sge);
}

void SoftRnic::PrepareQp(const QpCaps& caps) {
  prepared_qp_.Put(soft::QueueMemory::ForQp(caps));
}

void SoftRnic::PrepareCq(uint32_t depth) {
  // Two slots (a QP may grow its send and its receive CQ): the older of
  // the two is replaced.
  prepared_cq_[next_cq_slot_++ % prepared_cq_.size()].Put(soft::QueueMemory::ForCq(depth));
}

void SoftRnic::PrepareSrq(uint32_t max_wr, uint32_t max_sge) {
  prepared_srq_.Put(soft::QueueMemory::ForSrq(max_wr, max_sge));
}

void SoftRnic::Reclaim() { graveyard_.Free(); }

Result<RnicSrq> SoftRnic::CreateSrq(RnicPd pd, uint32_t max_wr,
                                    uint32_t max_sge) {
  soft::Pd* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  if (max_wr == 0 || max_wr > limits_.max_srq_wr || max_sge == 0 ||
      max_sge > limits_.max_sge) {
    return Status::kInvalid;
  }
  uint32_t h = 0;
  soft::Srq* s = srqs_.Create(&h);
  if (s == nullptr) return Status::kNoResource;
  s->handle = h;
  s->pd = p;
  s->max_sge = max_sge;
  std::unique_ptr<soft::QueueMemory> m = prepared_srq_.Take([&](const soft::QueueMemory& p) {
    return p.kind == soft::QueueMemory::Kind::kSrq && p.max_wr == max_wr && p.max_sge == max_sge;
  });
  if (m != nullptr) {
    s->ring = std::move(m->rq);
    graveyard_.Push(std::move(m));
  } else {
    s->ring.Init(max_wr, max_sge);
  }
  ++p->refs;
  return RnicSrq{h};
}

Status SoftRnic::DestroySrq(RnicSrq srq) {
  soft::Srq* s = srqs_.Get(srq.id);
  if (s == nullptr) return Status::kBadHandle;
  if (s->refs != 0) return Status::kBusy;
  --s->pd->refs;
  auto dead = std::make_unique<soft::QueueMemory>();
  dead->rq = std::move(s->ring);
  graveyard_.Push(std::move(dead));
  srqs_.Destroy(srq.id);
  return Status::kOk;
}

}  // namespace vrdma
