// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// QP setup: ring geometry as the guest kernel module computes it for librxe,
// CREATE_QP with the SQ and RQ page lists, and the usual state transitions.
#include <algorithm>
#include <cstring>
#include <vector>

#include "guest-driver/lib/verbs.h"

namespace vrdma::guest {

Result<std::unique_ptr<Qp>> Device::CreateQp(Pd& pd, const QpInitAttr& attr) {
  if (attr.send_cq == nullptr || attr.recv_cq == nullptr) return Status::kInvalid;
  if (attr.max_send_sge > SendWr::kMaxSge || attr.max_recv_sge > RecvWr::kMaxSge) {
    return Status::kInvalid;
  }
  // Like rxe_qp_init_req()/rxe_qp_init_resp(): element = header + the larger
  // of the SGE array and the inline data, rounded to a power of two.
  const uint32_t sq_payload = std::max<uint32_t>(
      attr.max_send_sge * sizeof(rxe_sge), attr.max_inline_data);
  const uint32_t sq_log2_elem = Log2Ceil(VIRTIO_RDMA_SEND_WQE_SGE_OFFSET + sq_payload);
  const uint32_t sq_log2_num = Log2Ceil(uint64_t{attr.max_send_wr} + 1);
  const uint32_t rq_log2_elem = Log2Ceil(VIRTIO_RDMA_RECV_WQE_SGE_OFFSET +
                                         std::max<uint32_t>(1, attr.max_recv_sge) * sizeof(rxe_sge));
  const uint32_t rq_log2_num = Log2Ceil(uint64_t{std::max<uint32_t>(1, attr.max_recv_wr)} + 1);
  if (sq_log2_num > VIRTIO_RDMA_MAX_RING_LOG2_ELEMS ||
      rq_log2_num > VIRTIO_RDMA_MAX_RING_LOG2_ELEMS) {
    return Status::kInvalid;
  }
  const uint64_t sq_bytes = RxeRing::Bytes(sq_log2_num, sq_log2_elem);
  const uint64_t rq_bytes = RxeRing::Bytes(rq_log2_num, rq_log2_elem);
  // One allocation: SQ pages first, then RQ pages, as the page list orders
  // them.
  auto mem = driver_->ram().Allocate(sq_bytes + rq_bytes);
  if (!mem) return Status::kNoResource;
  std::unique_ptr<Qp> qp(new Qp());
  qp->ring_mem_ = *mem;
  qp->sq_.Init(mem->host, sq_log2_num, sq_log2_elem);
  qp->rq_.Init(mem->host + sq_bytes, rq_log2_num, rq_log2_elem);

  virtio_rdma_req_create_qp req{};
  req.pd_handle = pd.handle();
  req.send_cq_handle = attr.send_cq->handle();
  req.recv_cq_handle = attr.recv_cq->handle();
  req.srq_handle = 0;
  req.qp_type = attr.qp_type;
  req.sq_sig_all = attr.sq_sig_all ? 1 : 0;
  req.cap.max_send_wr = attr.max_send_wr;
  req.cap.max_recv_wr = attr.max_recv_wr;
  req.cap.max_send_sge = attr.max_send_sge;
  req.cap.max_recv_sge = attr.max_recv_sge;
  req.cap.max_inline_data = attr.max_inline_data;
  req.sq = {sq_log2_num, sq_log2_elem,
            static_cast<uint32_t>(sq_bytes / kGuestPageSize), 0};
  req.rq = {rq_log2_num, rq_log2_elem,
            static_cast<uint32_t>(rq_bytes / kGuestPageSize), 0};
  const auto pages = mem->page_gpas();
  virtio_rdma_resp_create_qp resp{};
  if (Status s = driver_->Command(VIRTIO_RDMA_CMD_CREATE_QP, req, &resp, pages);
      s != Status::kOk) {
    driver_->ram().Free(*mem);
    return s;
  }
  qp->dev_ = this;
  qp->qpn_ = resp.qpn;
  qp->type_ = attr.qp_type;
  qp->cap_ = resp.cap;
  qp->doorbell_queue_ = attr.doorbell_queue;
  return qp;
}

Qp::~Qp() {
  if (dev_ == nullptr) return;
  if (dev_->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_QP, qpn_) == Status::kOk) {
    dev_->driver().ram().Free(ring_mem_);
  }
}

Status Qp::Modify(const virtio_rdma_qp_attr& attr) {
  virtio_rdma_req_modify_qp req{};
  req.qpn = qpn_;
  req.attr = attr;
  return dev_->driver().Command(VIRTIO_RDMA_CMD_MODIFY_QP,
                                {reinterpret_cast<const uint8_t*>(&req), sizeof(req)},
                                {}, {});
}

Status Qp::ToInit(uint32_t access_flags, uint32_t qkey) {
  virtio_rdma_qp_attr a{};
  a.qp_state = VIRTIO_RDMA_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.attr_mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX | VIRTIO_RDMA_QP_PORT;
  if (type_ == VIRTIO_RDMA_QPT_UD) {
    a.qkey = qkey;
    a.attr_mask |= VIRTIO_RDMA_QP_QKEY;
  } else {
    a.qp_access_flags = access_flags;
    a.attr_mask |= VIRTIO_RDMA_QP_ACCESS_FLAGS;
  }
  return Modify(a);
}

Status Qp::ToRtr(const RemoteQpInfo& remote, uint8_t path_mtu) {
  virtio_rdma_qp_attr a{};
  a.qp_state = VIRTIO_RDMA_QPS_RTR;
  a.attr_mask = VIRTIO_RDMA_QP_STATE;
  if (type_ != VIRTIO_RDMA_QPT_UD) {
    a.path_mtu = path_mtu;
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    std::memcpy(a.ah_attr.dgid, remote.gid.data(), 16);
    a.ah_attr.sgid_index = 0;
    a.ah_attr.hop_limit = 64;
    a.ah_attr.port_num = 1;
    a.ah_attr.is_global = 1;
    a.attr_mask |= VIRTIO_RDMA_QP_AV | VIRTIO_RDMA_QP_PATH_MTU |
                   VIRTIO_RDMA_QP_DEST_QPN | VIRTIO_RDMA_QP_RQ_PSN;
    if (type_ == VIRTIO_RDMA_QPT_RC) {
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 12;
      a.attr_mask |= VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER;
    }
  }
  return Modify(a);
}

Status Qp::ToRts(uint32_t sq_psn) {
  virtio_rdma_qp_attr a{};
  a.qp_state = VIRTIO_RDMA_QPS_RTS;
  a.sq_psn = sq_psn;
  a.attr_mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN;
  if (type_ == VIRTIO_RDMA_QPT_RC) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    a.attr_mask |= VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
                   VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
  }
  return Modify(a);
}

Result<virtio_rdma_resp_query_qp> Qp::Query() {
  virtio_rdma_req_query_qp req{qpn_, VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED};
  virtio_rdma_resp_query_qp resp{};
  VRDMA_RETURN_IF_ERROR(dev_->driver().Command(VIRTIO_RDMA_CMD_QUERY_QP, req, &resp));
  return resp;
}

}  // namespace vrdma::guest
