// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The data path of the verbs API, as librxe runs it in guest user space:
// WQEs written straight into the rings, producer indices published with
// release, completions read at the consumer index. Nothing here allocates
// or blocks (a full doorbell queue waits for the device, with a timeout).
#include <cstring>

#include "guest-driver/lib/verbs.h"

namespace vrdma::guest {

Status Qp::WriteSendWqe(const SendWr& wr) {
  if (wr.num_sge < 0 || wr.num_sge > SendWr::kMaxSge) return Status::kInvalid;
  // The ring slot was sized from what we asked for; the device's reported
  // caps may be larger, so the slot's own room is checked too.
  const uint32_t room = sq_.elem_size() - VIRTIO_RDMA_SEND_WQE_SGE_OFFSET;
  if (!(wr.send_flags & kSendInline) &&
      (static_cast<uint32_t>(wr.num_sge) > cap_.max_send_sge ||
       wr.num_sge * sizeof(rxe_sge) > room)) {
    return Status::kInvalid;
  }
  if (sq_.Full()) return Status::kNoResource;
  uint8_t* slot = sq_.ProducerSlot();
  std::memset(slot, 0, VIRTIO_RDMA_SEND_WQE_SGE_OFFSET);
  auto* wqe = reinterpret_cast<rxe_send_wqe*>(slot);
  wqe->wr.wr_id = wr.wr_id;
  wqe->wr.opcode = wr.opcode;
  wqe->wr.send_flags = wr.send_flags;
  wqe->wr.ex.imm_data = wr.imm_data;
  if (type_ == VIRTIO_RDMA_QPT_UD) {
    wqe->wr.wr.ud.remote_qpn = wr.remote_qpn;
    wqe->wr.wr.ud.remote_qkey = wr.remote_qkey;
    wqe->wr.wr.ud.ah_num = wr.ah;
  } else {
    wqe->wr.wr.rdma.remote_addr = wr.remote_addr;
    wqe->wr.wr.rdma.rkey = wr.rkey;
  }
  uint32_t length = 0;
  uint8_t* payload = slot + VIRTIO_RDMA_SEND_WQE_SGE_OFFSET;
  if (wr.send_flags & kSendInline) {
    for (int i = 0; i < wr.num_sge; ++i) length += wr.sge[i].length;
    if (length > cap_.max_inline_data || length > room) {
      return Status::kInvalid;
    }
    for (int i = 0; i < wr.num_sge; ++i) {
      std::memcpy(payload, reinterpret_cast<const void*>(wr.sge[i].addr),
                  wr.sge[i].length);
      payload += wr.sge[i].length;
    }
  } else {
    for (int i = 0; i < wr.num_sge; ++i) length += wr.sge[i].length;
    std::memcpy(payload, wr.sge.data(), sizeof(rxe_sge) * wr.num_sge);
  }
  wqe->iova = wr.remote_addr;
  wqe->dma.length = length;
  wqe->dma.resid = length;
  wqe->dma.num_sge = static_cast<uint32_t>(wr.num_sge);
  wqe->dma.cur_sge = 0;
  wqe->dma.sge_offset = 0;
  wqe->ssn = ssn_++;
  sq_.Produce();  // release: the WQE is complete before the index moves
  return Status::kOk;
}

Status Qp::PostSend(const SendWr& wr) {
  VRDMA_RETURN_IF_ERROR(WriteSendWqe(wr));
  return dev_->driver().Doorbell(VIRTIO_RDMA_DB_SQ, qpn_, doorbell_queue_);
}

Status Qp::PostSend(std::span<const SendWr> wrs) {
  Status first = Status::kOk;
  size_t posted = 0;
  for (const SendWr& wr : wrs) {
    first = WriteSendWqe(wr);
    if (first != Status::kOk) break;
    ++posted;
  }
  if (posted > 0) {
    VRDMA_RETURN_IF_ERROR(
        dev_->driver().Doorbell(VIRTIO_RDMA_DB_SQ, qpn_, doorbell_queue_));
  }
  return first;
}

uint32_t Qp::sq_free() const { return sq_.FreeSlots(); }

Status Qp::PostRecv(const RecvWr& wr) {
  if (wr.num_sge < 0 || wr.num_sge > RecvWr::kMaxSge ||
      wr.num_sge * sizeof(rxe_sge) > rq_.elem_size() - VIRTIO_RDMA_RECV_WQE_SGE_OFFSET) {
    return Status::kInvalid;
  }
  if (rq_.Full()) return Status::kNoResource;
  uint8_t* slot = rq_.ProducerSlot();
  std::memset(slot, 0, VIRTIO_RDMA_RECV_WQE_SGE_OFFSET);
  auto* wqe = reinterpret_cast<rxe_recv_wqe*>(slot);
  uint32_t length = 0;
  for (int i = 0; i < wr.num_sge; ++i) length += wr.sge[i].length;
  wqe->wr_id = wr.wr_id;
  wqe->dma.length = length;
  wqe->dma.resid = length;
  wqe->dma.num_sge = static_cast<uint32_t>(wr.num_sge);
  std::memcpy(slot + VIRTIO_RDMA_RECV_WQE_SGE_OFFSET, wr.sge.data(),
              sizeof(rxe_sge) * wr.num_sge);
  rq_.Produce();
  return Status::kOk;
}

Status Qp::RingRqDoorbell() {
  return dev_->driver().Doorbell(VIRTIO_RDMA_DB_RQ, qpn_, doorbell_queue_);
}

int Cq::Poll(std::span<ib_uverbs_wc> out) {
  int n = 0;
  while (static_cast<size_t>(n) < out.size() && !ring_.Empty()) {
    std::memcpy(&out[n], ring_.ConsumerSlot(), sizeof(ib_uverbs_wc));
    ring_.Consume();
    ++n;
  }
  return n;
}

Status Cq::ReqNotify(bool solicited_only) {
  return dev_->driver().Doorbell(
      solicited_only ? VIRTIO_RDMA_DB_CQ_ARM_SOLICITED : VIRTIO_RDMA_DB_CQ_ARM,
      handle_);
}

}  // namespace vrdma::guest
