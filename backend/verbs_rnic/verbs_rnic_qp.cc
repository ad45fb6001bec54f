// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// VerbsRnic QPs: creation, and QpAttr <-> ibv_qp_attr one to one (the
// QpAttrMask bits are the IBV_QP_* bits, QpState values the IBV_QPS_*
// values). The engine runs the QP state machine; the device runs its own
// and any refusal comes back as a Status.
#include <cerrno>
#include <cstring>

#include "backend/verbs_rnic/verbs_rnic.h"

namespace vrdma {
namespace {

constexpr bool Same(uint32_t a, uint32_t b) { return a == b; }

static_assert(Same(kQpState, IBV_QP_STATE) && Same(kQpAccessFlags, IBV_QP_ACCESS_FLAGS) &&
              Same(kQpPkeyIndex, IBV_QP_PKEY_INDEX) && Same(kQpPort, IBV_QP_PORT) &&
              Same(kQpQkey, IBV_QP_QKEY) && Same(kQpAv, IBV_QP_AV) &&
              Same(kQpPathMtu, IBV_QP_PATH_MTU) && Same(kQpTimeout, IBV_QP_TIMEOUT) &&
              Same(kQpRetryCnt, IBV_QP_RETRY_CNT) && Same(kQpRnrRetry, IBV_QP_RNR_RETRY) &&
              Same(kQpRqPsn, IBV_QP_RQ_PSN) &&
              Same(kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC) &&
              Same(kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER) && Same(kQpSqPsn, IBV_QP_SQ_PSN) &&
              Same(kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC) &&
              Same(kQpDestQpn, IBV_QP_DEST_QPN));
static_assert(static_cast<int>(QpState::kErr) == IBV_QPS_ERR &&
              static_cast<int>(QpState::kRts) == IBV_QPS_RTS &&
              static_cast<int>(QpType::kUd) == IBV_QPT_UD &&
              static_cast<int>(QpType::kRc) == IBV_QPT_RC &&
              static_cast<int>(QpType::kUc) == IBV_QPT_UC);

constexpr uint32_t kHonoured =
    kQpState | kQpAccessFlags | kQpPkeyIndex | kQpPort | kQpQkey | kQpAv |
    kQpPathMtu | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpRqPsn |
    kQpMaxQpRdAtomic | kQpMinRnrTimer | kQpSqPsn | kQpMaxDestRdAtomic |
    kQpDestQpn;

bool MtuFromBytes(uint32_t bytes, ibv_mtu* out) {
  switch (bytes) {
    case 256: *out = IBV_MTU_256; return true;
    case 512: *out = IBV_MTU_512; return true;
    case 1024: *out = IBV_MTU_1024; return true;
    case 2048: *out = IBV_MTU_2048; return true;
    case 4096: *out = IBV_MTU_4096; return true;
  }
  return false;
}

uint32_t MtuToBytes(ibv_mtu mtu) { return 128u << static_cast<int>(mtu); }

}  // namespace

Result<RnicQp> VerbsRnic::CreateQp(const QpInit& init) {
  if (init.managed) return Status::kUnsupported;  // no cross-channel verbs
  Slot<ibv_pd>* pd = pds_.Get(init.pd.id);
  Slot<ibv_cq>* scq = cqs_.Get(init.send_cq.id);
  Slot<ibv_cq>* rcq = cqs_.Get(init.recv_cq.id);
  Slot<ibv_srq>* srq = init.has_srq ? srqs_.Get(init.srq.id) : nullptr;
  if (pd == nullptr || scq == nullptr || rcq == nullptr ||
      (init.has_srq && srq == nullptr)) {
    return Status::kBadHandle;
  }
  if (qps_.full()) return Status::kNoResource;
  ibv_qp_init_attr a{};
  a.send_cq = scq->obj;
  a.recv_cq = rcq->obj;
  a.srq = srq != nullptr ? srq->obj : nullptr;
  a.qp_type = static_cast<ibv_qp_type>(init.type);
  a.sq_sig_all = init.sq_sig_all ? 1 : 0;
  a.cap.max_send_wr = init.caps.max_send_wr;
  a.cap.max_send_sge = init.caps.max_send_sge;
  a.cap.max_inline_data = init.caps.max_inline_data;
  if (srq == nullptr) {
    a.cap.max_recv_wr = init.caps.max_recv_wr;
    a.cap.max_recv_sge = init.caps.max_recv_sge;
  }
  ibv_qp* qp = ibv_create_qp(pd->obj, &a);
  if (qp == nullptr) return StatusFromErrno(errno);
  const uint32_t id = qps_.Insert({qp, init.type});
  return RnicQp{id, qp->qp_num};
}

Status VerbsRnic::ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) {
  QpSlot* s = qps_.Get(qp.id);
  if (s == nullptr) return Status::kBadHandle;
  if ((mask & ~kHonoured) != 0) return Status::kInvalid;
  ibv_qp_attr a{};
  a.qp_state = static_cast<ibv_qp_state>(attr.state);
  a.qp_access_flags = attr.access_flags;
  a.pkey_index = 0;
  a.port_num = options_.port;
  a.qkey = attr.qkey;
  if (mask & kQpAv) VRDMA_RETURN_IF_ERROR(ToAhAttr(attr.av, &a.ah_attr));
  if ((mask & kQpPathMtu) && !MtuFromBytes(attr.path_mtu_bytes, &a.path_mtu)) {
    return Status::kInvalid;
  }
  a.timeout = attr.timeout;
  a.retry_cnt = attr.retry_cnt;
  a.rnr_retry = attr.rnr_retry;
  a.min_rnr_timer = attr.min_rnr_timer;
  a.max_rd_atomic = attr.max_rd_atomic;
  a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  a.rq_psn = attr.rq_psn;
  a.sq_psn = attr.sq_psn;
  a.dest_qp_num = attr.dest_qpn;
  return StatusFromErrno(ibv_modify_qp(s->obj, &a, static_cast<int>(mask)));
}

Result<QpAttr> VerbsRnic::QueryQp(RnicQp qp) const {
  const QpSlot* s = qps_.Get(qp.id);
  if (s == nullptr) return Status::kBadHandle;
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  if (int e = ibv_query_qp(s->obj, &a, static_cast<int>(kHonoured), &init); e != 0) {
    return StatusFromErrno(e);
  }
  QpAttr out;
  out.state = static_cast<QpState>(a.qp_state);
  out.access_flags = a.qp_access_flags;
  out.qkey = a.qkey;
  std::memcpy(out.av.dgid.data(), a.ah_attr.grh.dgid.raw, out.av.dgid.size());
  for (int i = 0; i < num_gids_; ++i) {
    if (gids_[i].index == a.ah_attr.grh.sgid_index) out.av.sgid = gids_[i].gid;
  }
  out.av.flow_label = a.ah_attr.grh.flow_label;
  out.av.hop_limit = a.ah_attr.grh.hop_limit;
  out.av.traffic_class = a.ah_attr.grh.traffic_class;
  out.av.sl = a.ah_attr.sl;
  out.path_mtu_bytes = MtuToBytes(a.path_mtu);
  out.timeout = a.timeout;
  out.retry_cnt = a.retry_cnt;
  out.rnr_retry = a.rnr_retry;
  out.min_rnr_timer = a.min_rnr_timer;
  out.max_rd_atomic = a.max_rd_atomic;
  out.max_dest_rd_atomic = a.max_dest_rd_atomic;
  out.rq_psn = a.rq_psn;
  out.sq_psn = a.sq_psn;
  out.dest_qpn = a.dest_qp_num;
  return out;
}

Status VerbsRnic::DestroyQp(RnicQp qp) {
  QpSlot* s = qps_.Get(qp.id);
  if (s == nullptr) return Status::kBadHandle;
  if (int e = ibv_destroy_qp(s->obj); e != 0) return StatusFromErrno(e);
  qps_.Erase(qp.id);
  return Status::kOk;
}

}  // namespace vrdma
