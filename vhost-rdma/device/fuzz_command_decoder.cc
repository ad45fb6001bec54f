// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// libFuzzer: arbitrary bytes as the readable part of a control-queue chain
// and as a doorbell record. The decoder must never crash, read out of
// bounds, or hit undefined behaviour; whatever it accepts and the engine's
// request checks then accept (the decoder only parses; ring geometry, MR
// access and coverage are the engine's) must satisfy the invariants the
// engine relies on (checked below, abort on violation).
#include <cstdint>
#include <cstdlib>
#include <span>

#include "backend/engine/mr_check.h"
#include "backend/engine/qp_attr_check.h"
#include "backend/engine/ring_check.h"
#include "vhost-rdma/device/command_decoder.h"

namespace {

using vrdma::device::Command;

void CheckPages(const std::vector<uint64_t>& pages) {
  for (uint64_t p : pages)
    if (p & 4095) std::abort();
}

// The limits a VM sees (the engine's checks take them).
vrdma::RnicLimits Limits() {
  vrdma::RnicLimits l;
  l.max_qp_wr = 16384;
  l.max_sge = 32;
  l.max_cqe = 65535;
  l.max_srq_wr = 16384;
  l.max_inline_data = 512;
  return l;
}

constexpr uint32_t kGids = 2;  // the VM's GID table

// The engine's checks of a decoded request; true when it would go on.
bool EngineAccepts(const Command& cmd) {
  using namespace vrdma::device;
  if (const auto* m = std::get_if<RegMrCmd>(&cmd)) {
    return vrdma::engine::CheckRegMr(m->req, vrdma::engine::MrLimits{}) == vrdma::Status::kOk;
  }
  if (const auto* q = std::get_if<CreateCqCmd>(&cmd)) {
    return vrdma::engine::CheckCreateCq(q->req, Limits()) == vrdma::Status::kOk;
  }
  if (const auto* q = std::get_if<CreateQpCmd>(&cmd)) {
    return vrdma::engine::CheckCreateQp(q->req, Limits()) == vrdma::Status::kOk;
  }
  if (const auto* q = std::get_if<CreateSrqCmd>(&cmd)) {
    return vrdma::engine::CheckCreateSrq(q->req, Limits()) == vrdma::Status::kOk;
  }
  if (const auto* a = std::get_if<CreateAhCmd>(&cmd)) {
    return vrdma::engine::CheckAh(a->ah, kGids) == vrdma::Status::kOk;
  }
  if (const auto* m = std::get_if<ModifyQpCmd>(&cmd)) {
    // Every type and current state: whatever some QP would take.
    for (auto type : {vrdma::QpType::kRc, vrdma::QpType::kUc, vrdma::QpType::kUd}) {
      for (int s = 0; s <= static_cast<int>(vrdma::QpState::kErr); ++s) {
        vrdma::engine::QpCheckContext ctx;
        ctx.type = type;
        ctx.current = static_cast<vrdma::QpState>(s);
        ctx.num_gids = kGids;
        vrdma::QpState next;
        if (vrdma::engine::CheckModifyQp(m->req, ctx, &next) == vrdma::Status::kOk) return true;
      }
    }
    return false;
  }
  return true;
}

void CheckInvariants(const Command& cmd) {
  if (const auto* mr = std::get_if<vrdma::device::RegMrCmd>(&cmd)) {
    const auto& r = mr->req;
    if (r.length == 0 || r.first_page_offset >= 4096) std::abort();
    if (r.iova + r.length < r.iova) std::abort();
    if (r.first_page_offset + r.length > r.pages.size() * 4096) std::abort();
    CheckPages(r.pages);
  } else if (const auto* qp = std::get_if<vrdma::device::CreateQpCmd>(&cmd)) {
    CheckPages(qp->req.sq.pages);
    CheckPages(qp->req.rq.pages);
    if (qp->req.sq.log2_num_elem > 16 || qp->req.sq.log2_elem_size > 12)
      std::abort();
  } else if (const auto* cq = std::get_if<vrdma::device::CreateCqCmd>(&cmd)) {
    CheckPages(cq->req.ring.pages);
    if (cq->req.cqe >= (1u << cq->req.ring.log2_num_elem)) std::abort();
  } else if (const auto* ah = std::get_if<vrdma::device::CreateAhCmd>(&cmd)) {
    // MakeAv indexes the VM's GID table with it.
    if (ah->ah.sgid_index >= kGids || ah->ah.flow_label > 0xfffff) std::abort();
  } else if (const auto* m = std::get_if<vrdma::device::ModifyQpCmd>(&cmd)) {
    const auto& r = m->req;
    if ((r.mask & VIRTIO_RDMA_QP_AV) && r.ah.sgid_index >= kGids) std::abort();
    if ((r.mask & VIRTIO_RDMA_QP_PATH_MTU) && !vrdma::engine::IsValidMtu(r.path_mtu_bytes)) {
      std::abort();
    }
    if ((r.mask & VIRTIO_RDMA_QP_STATE) && r.state > vrdma::QpState::kErr) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const vrdma::device::DecodeLimits limits{.max_mr_pages = 4096,
                                           .max_ring_pages = 4096};
  std::span<const uint8_t> bytes(data, size);
  auto res = vrdma::device::DecodeCommand(bytes, limits);
  if (!res.ok()) {
    if (res.status() != vrdma::Status::kInvalid) std::abort();
  } else if (EngineAccepts(*res)) {
    CheckInvariants(*res);
  }
  (void)vrdma::device::DecodeDoorbell(bytes);
  return 0;
}
