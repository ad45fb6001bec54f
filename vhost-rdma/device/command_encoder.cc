// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/device/command_encoder.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

namespace vrdma::device {

uint32_t StatusToWire(Status s) {
  switch (s) {
    case Status::kOk: return VIRTIO_RDMA_OK;
    case Status::kInvalid: return VIRTIO_RDMA_ERR_INVALID;
    case Status::kUnsupported: return VIRTIO_RDMA_ERR_UNSUPPORTED;
    case Status::kNoResource: return VIRTIO_RDMA_ERR_NO_RESOURCE;
    case Status::kBadHandle: return VIRTIO_RDMA_ERR_BAD_HANDLE;
    case Status::kBadState: return VIRTIO_RDMA_ERR_BAD_STATE;
    case Status::kBusy: return VIRTIO_RDMA_ERR_BUSY;
    case Status::kFault: return VIRTIO_RDMA_ERR_FAULT;
    case Status::kAccess: return VIRTIO_RDMA_ERR_ACCESS;
    case Status::kIoError: return VIRTIO_RDMA_ERR_NO_RESOURCE;
  }
  return VIRTIO_RDMA_ERR_INVALID;
}

virtio_rdma_resp_hdr EncodeRespHdr(Status s) {
  virtio_rdma_resp_hdr h{};
  h.status = htole32(StatusToWire(s));
  return h;
}

uint8_t MtuEnumFromBytes(uint32_t bytes) {
  uint8_t mtu = VIRTIO_RDMA_MTU_256;
  for (uint8_t m = VIRTIO_RDMA_MTU_256; m <= VIRTIO_RDMA_MTU_4096; ++m)
    if (bytes >= (128u << m)) mtu = m;
  return mtu;
}

virtio_rdma_resp_query_device EncodeQueryDevice(const engine::DeviceAttr& a) {
  const RnicLimits& l = a.limits;
  virtio_rdma_resp_query_device r{};
  r.fw_ver = htole64(VIRTIO_RDMA_ABI_VERSION);
  r.node_guid = htole64(l.node_guid);
  r.sys_image_guid = htole64(l.node_guid);
  r.max_mr_size = htole64(l.max_mr_size);
  r.page_size_cap = htole64(VIRTIO_RDMA_PAGE_SIZE);
  r.vendor_id = htole32(VIRTIO_RDMA_PCI_VENDOR_ID);
  r.vendor_part_id = htole32(VIRTIO_RDMA_PCI_DEVICE_ID);
  r.hw_ver = htole32(VIRTIO_RDMA_ABI_VERSION);
  r.max_qp = htole32(l.max_qp);
  r.max_qp_wr = htole32(l.max_qp_wr);
  r.device_cap_flags = 0;
  r.max_send_sge = htole32(l.max_sge);
  r.max_recv_sge = htole32(l.max_sge);
  r.max_sge_rd = htole32(l.max_sge);
  r.max_cq = htole32(l.max_cq);
  r.max_cqe = htole32(l.max_cqe);
  r.max_mr = htole32(l.max_mr);
  r.max_pd = htole32(l.max_pd);
  r.max_qp_rd_atom = htole32(a.max_qp_rd_atom);
  r.max_qp_init_rd_atom = htole32(a.max_qp_rd_atom);
  r.max_ah = htole32(a.max_ah);
  r.max_srq = htole32(l.max_srq);
  r.max_srq_wr = htole32(l.max_srq_wr);
  r.max_srq_sge = htole32(l.max_sge);
  r.max_inline_data = htole32(l.max_inline_data);
  r.max_pkeys = htole32(1);
  // IBV_ATOMIC_HCA when the RNIC has atomics (then VIRTIO_RDMA_F_ATOMIC is
  // offered), IBV_ATOMIC_NONE otherwise.
  r.atomic_cap = l.atomics ? 1 : 0;
  r.local_ca_ack_delay = 15;
  r.phys_port_cnt = 1;
  r.max_mw = htole32(l.max_mw);  // 0 unless VIRTIO_RDMA_F_MW is offered
  r.max_fr_pages = htole32(l.max_fr_pages);  // 0 unless VIRTIO_RDMA_F_KERNEL is
  return r;
}

virtio_rdma_resp_query_port EncodeQueryPort(const engine::DeviceAttr& a,
                                            uint32_t num_gids) {
  virtio_rdma_resp_query_port r{};
  r.port_cap_flags = 0;
  r.max_msg_sz = htole32(a.limits.max_msg_sz);
  r.gid_tbl_len = htole32(num_gids);
  r.pkey_tbl_len = htole16(1);
  r.lid = 0;  // RoCE: no LID
  r.state = VIRTIO_RDMA_PORT_ACTIVE;
  r.max_mtu = MtuEnumFromBytes(a.limits.active_mtu_bytes);
  r.active_mtu = r.max_mtu;
  r.active_speed = kActiveSpeed;
  r.active_width = kActiveWidth;
  r.phys_state = kPhysStateLinkUp;
  r.link_layer = kLinkLayerEthernet;
  return r;
}

virtio_rdma_resp_query_gid EncodeQueryGid(const Gid& gid) {
  virtio_rdma_resp_query_gid r{};
  std::memcpy(r.gid, gid.data(), sizeof(r.gid));
  r.gid_type = htole32(kGidTypeRoceV2);
  return r;
}

virtio_rdma_resp_alloc_mw EncodeAllocMw(const engine::AllocMwResult& m) {
  virtio_rdma_resp_alloc_mw r{};
  r.mw_handle = htole32(m.handle);
  r.rkey = htole32(m.rkey);
  return r;
}

virtio_rdma_resp_alloc_mr EncodeAllocMr(const engine::RegMrResult& m) {
  virtio_rdma_resp_alloc_mr r{};
  r.mr_handle = htole32(m.handle);
  r.lkey = htole32(m.lkey);
  r.rkey = htole32(m.rkey);
  return r;
}

virtio_rdma_resp_create_pd EncodeCreatePd(uint32_t pd) {
  virtio_rdma_resp_create_pd r{};
  r.pd_handle = htole32(pd);
  return r;
}

virtio_rdma_resp_reg_mr EncodeRegMr(const engine::RegMrResult& m) {
  virtio_rdma_resp_reg_mr r{};
  r.mr_handle = htole32(m.handle);
  r.lkey = htole32(m.lkey);
  r.rkey = htole32(m.rkey);
  return r;
}

virtio_rdma_resp_create_cq EncodeCreateCq(const engine::CreateCqResult& c) {
  virtio_rdma_resp_create_cq r{};
  r.cq_handle = htole32(c.handle);
  r.cqe = htole32(c.cqe);
  return r;
}

virtio_rdma_qp_cap EncodeQpCap(const QpCaps& c) {
  virtio_rdma_qp_cap r{};
  r.max_send_wr = htole32(c.max_send_wr);
  r.max_recv_wr = htole32(c.max_recv_wr);
  r.max_send_sge = htole32(c.max_send_sge);
  r.max_recv_sge = htole32(c.max_recv_sge);
  r.max_inline_data = htole32(c.max_inline_data);
  return r;
}

virtio_rdma_resp_create_qp EncodeCreateQp(const engine::CreateQpResult& q) {
  virtio_rdma_resp_create_qp r{};
  r.qpn = htole32(q.qpn);
  r.cap = EncodeQpCap(q.caps);
  return r;
}

virtio_rdma_ah_attr EncodeAhAttr(const engine::GuestAh& ah) {
  virtio_rdma_ah_attr r{};
  std::memcpy(r.dgid, ah.dgid.data(), sizeof(r.dgid));
  r.flow_label = htole32(ah.flow_label);
  r.sgid_index = ah.sgid_index;
  r.hop_limit = ah.hop_limit;
  r.traffic_class = ah.traffic_class;
  r.sl = ah.sl;
  r.port_num = ah.port_num;
  r.is_global = ah.is_global ? 1 : 0;
  return r;
}

virtio_rdma_qp_attr EncodeQpAttr(const engine::ModifyQpRequest& a) {
  virtio_rdma_qp_attr r{};
  const uint32_t m = a.mask;
  r.attr_mask = htole32(m);
  if (m & VIRTIO_RDMA_QP_STATE) r.qp_state = static_cast<uint8_t>(a.state);
  if (m & VIRTIO_RDMA_QP_CUR_STATE)
    r.cur_qp_state = static_cast<uint8_t>(a.cur_state);
  if (m & VIRTIO_RDMA_QP_ACCESS_FLAGS)
    r.qp_access_flags = htole32(a.access_flags);
  if (m & VIRTIO_RDMA_QP_PKEY_INDEX) r.pkey_index = htole16(a.pkey_index);
  if (m & VIRTIO_RDMA_QP_PORT) r.port_num = a.port_num;
  if (m & VIRTIO_RDMA_QP_QKEY) r.qkey = htole32(a.qkey);
  if (m & VIRTIO_RDMA_QP_AV) r.ah_attr = EncodeAhAttr(a.ah);
  if (m & VIRTIO_RDMA_QP_PATH_MTU) r.path_mtu = MtuEnumFromBytes(a.path_mtu_bytes);
  if (m & VIRTIO_RDMA_QP_TIMEOUT) r.timeout = a.timeout;
  if (m & VIRTIO_RDMA_QP_RETRY_CNT) r.retry_cnt = a.retry_cnt;
  if (m & VIRTIO_RDMA_QP_RNR_RETRY) r.rnr_retry = a.rnr_retry;
  if (m & VIRTIO_RDMA_QP_RQ_PSN) r.rq_psn = htole32(a.rq_psn);
  if (m & VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC) r.max_rd_atomic = a.max_rd_atomic;
  if (m & VIRTIO_RDMA_QP_MIN_RNR_TIMER) r.min_rnr_timer = a.min_rnr_timer;
  if (m & VIRTIO_RDMA_QP_SQ_PSN) r.sq_psn = htole32(a.sq_psn);
  if (m & VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC)
    r.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (m & VIRTIO_RDMA_QP_DEST_QPN) r.dest_qp_num = htole32(a.dest_qpn);
  return r;
}

virtio_rdma_resp_query_qp EncodeQueryQp(const engine::QueryQpResult& q) {
  virtio_rdma_resp_query_qp r{};
  r.attr = EncodeQpAttr(q.attr);
  r.attr.cap = EncodeQpCap(q.cap);
  r.init_cap = EncodeQpCap(q.cap);
  return r;
}

virtio_rdma_resp_create_ah EncodeCreateAh(uint32_t ah) {
  virtio_rdma_resp_create_ah r{};
  r.ah_handle = htole32(ah);
  return r;
}

virtio_rdma_resp_create_srq EncodeCreateSrq(const engine::CreateSrqResult& s) {
  virtio_rdma_resp_create_srq r{};
  r.srq_handle = htole32(s.handle);
  r.max_wr = htole32(s.max_wr);
  r.max_sge = htole32(s.max_sge);
  return r;
}

virtio_rdma_config EncodeConfig(const engine::DeviceAttr& a,
                                const engine::VmConfig& vm,
                                uint32_t num_doorbell_queues) {
  const std::vector<Gid>& gids = vm.gids;
  const RnicLimits& l = a.limits;
  virtio_rdma_config c{};
  c.abi_version = htole32(VIRTIO_RDMA_ABI_VERSION);
  c.num_doorbell_queues = htole32(num_doorbell_queues);
  c.max_qp = htole32(l.max_qp);
  c.max_qp_wr = htole32(l.max_qp_wr);
  c.max_send_sge = htole32(l.max_sge);
  c.max_recv_sge = htole32(l.max_sge);
  c.max_inline_data = htole32(l.max_inline_data);
  c.max_cq = htole32(l.max_cq);
  c.max_cqe = htole32(l.max_cqe);
  c.max_mr = htole32(l.max_mr);
  c.max_mr_size = htole64(l.max_mr_size);
  c.max_pd = htole32(l.max_pd);
  c.max_ah = htole32(a.max_ah);
  c.max_srq = htole32(l.max_srq);
  c.max_srq_wr = htole32(l.max_srq_wr);
  c.max_srq_sge = htole32(l.max_sge);
  c.max_qp_rd_atom = htole32(a.max_qp_rd_atom);
  c.max_mr_pages = htole32(a.max_mr_pages);
  c.max_msg_sz = htole32(l.max_msg_sz);
  c.node_guid = htole64(l.node_guid);
  c.phys_port_cnt = 1;
  c.port_state = VIRTIO_RDMA_PORT_ACTIVE;
  c.active_mtu = MtuEnumFromBytes(l.active_mtu_bytes);
  c.max_mtu = c.active_mtu;
  c.active_speed = kActiveSpeed;
  c.active_width = kActiveWidth;
  c.phys_state = kPhysStateLinkUp;
  const size_t n = std::min<size_t>(gids.size(), VIRTIO_RDMA_MAX_GIDS);
  c.num_gids = static_cast<uint8_t>(n);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(c.gids[i], gids[i].data(), sizeof(c.gids[i]));
  if (vm.mac) std::memcpy(c.mac, vm.mac->data(), sizeof(c.mac));
  return c;
}

}  // namespace vrdma::device
