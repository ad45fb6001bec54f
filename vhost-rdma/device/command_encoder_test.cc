// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/device/command_encoder.h"

#include <endian.h>

#include <gtest/gtest.h>

#include "vhost-rdma/device/command_decoder.h"

namespace vrdma::device {
namespace {

engine::DeviceAttr SampleAttr() {
  engine::DeviceAttr a;
  a.limits.max_qp = 1000;
  a.limits.max_qp_wr = 4096;
  a.limits.max_sge = 16;
  a.limits.max_cq = 500;
  a.limits.max_cqe = 65535;
  a.limits.max_mr = 2000;
  a.limits.max_mr_size = 1ull << 33;
  a.limits.max_pd = 77;
  a.limits.max_srq = 33;
  a.limits.max_srq_wr = 1023;
  a.limits.max_inline_data = 256;
  a.limits.max_msg_sz = 1u << 30;
  a.limits.active_mtu_bytes = 4096;
  a.limits.node_guid = 0x0102030405060708ull;
  a.max_ah = 99;
  a.max_qp_rd_atom = 16;
  a.max_mr_pages = 262144;
  return a;
}

TEST(CommandEncoderTest, StatusMapsOneToOneOntoTheAbi) {
  EXPECT_EQ(StatusToWire(Status::kOk), VIRTIO_RDMA_OK);
  EXPECT_EQ(StatusToWire(Status::kInvalid), VIRTIO_RDMA_ERR_INVALID);
  EXPECT_EQ(StatusToWire(Status::kUnsupported), VIRTIO_RDMA_ERR_UNSUPPORTED);
  EXPECT_EQ(StatusToWire(Status::kNoResource), VIRTIO_RDMA_ERR_NO_RESOURCE);
  EXPECT_EQ(StatusToWire(Status::kBadHandle), VIRTIO_RDMA_ERR_BAD_HANDLE);
  EXPECT_EQ(StatusToWire(Status::kBadState), VIRTIO_RDMA_ERR_BAD_STATE);
  EXPECT_EQ(StatusToWire(Status::kBusy), VIRTIO_RDMA_ERR_BUSY);
  EXPECT_EQ(StatusToWire(Status::kFault), VIRTIO_RDMA_ERR_FAULT);
  EXPECT_EQ(StatusToWire(Status::kAccess), VIRTIO_RDMA_ERR_ACCESS);
  EXPECT_EQ(StatusToWire(Status::kIoError), VIRTIO_RDMA_ERR_NO_RESOURCE);
  auto h = EncodeRespHdr(Status::kBusy);
  EXPECT_EQ(le32toh(h.status), VIRTIO_RDMA_ERR_BUSY);
  EXPECT_EQ(h.reserved, 0u);
}

TEST(CommandEncoderTest, MtuEnum) {
  EXPECT_EQ(MtuEnumFromBytes(0), VIRTIO_RDMA_MTU_256);
  EXPECT_EQ(MtuEnumFromBytes(256), VIRTIO_RDMA_MTU_256);
  EXPECT_EQ(MtuEnumFromBytes(1023), VIRTIO_RDMA_MTU_512);
  EXPECT_EQ(MtuEnumFromBytes(1024), VIRTIO_RDMA_MTU_1024);
  EXPECT_EQ(MtuEnumFromBytes(2048), VIRTIO_RDMA_MTU_2048);
  EXPECT_EQ(MtuEnumFromBytes(4096), VIRTIO_RDMA_MTU_4096);
  EXPECT_EQ(MtuEnumFromBytes(9000), VIRTIO_RDMA_MTU_4096);
}

TEST(CommandEncoderTest, QueryDeviceCarriesTheLimits) {
  auto r = EncodeQueryDevice(SampleAttr());
  EXPECT_EQ(le64toh(r.node_guid), 0x0102030405060708ull);
  EXPECT_EQ(le64toh(r.max_mr_size), 1ull << 33);
  EXPECT_EQ(le64toh(r.page_size_cap), 4096u);
  EXPECT_EQ(le32toh(r.vendor_id), 0x1af4u);
  EXPECT_EQ(le32toh(r.vendor_part_id), 0x106au);
  EXPECT_EQ(le32toh(r.max_qp), 1000u);
  EXPECT_EQ(le32toh(r.max_qp_wr), 4096u);
  EXPECT_EQ(le32toh(r.max_send_sge), 16u);
  EXPECT_EQ(le32toh(r.max_recv_sge), 16u);
  EXPECT_EQ(le32toh(r.max_cq), 500u);
  EXPECT_EQ(le32toh(r.max_cqe), 65535u);
  EXPECT_EQ(le32toh(r.max_mr), 2000u);
  EXPECT_EQ(le32toh(r.max_pd), 77u);
  EXPECT_EQ(le32toh(r.max_ah), 99u);
  EXPECT_EQ(le32toh(r.max_srq), 33u);
  EXPECT_EQ(le32toh(r.max_srq_wr), 1023u);
  EXPECT_EQ(le32toh(r.max_qp_rd_atom), 16u);
  EXPECT_EQ(le32toh(r.max_inline_data), 256u);
  EXPECT_EQ(r.atomic_cap, 0) << "the RNIC has no atomics";
  EXPECT_EQ(r.phys_port_cnt, 1);
  EXPECT_EQ(r.reserved, 0);
  engine::DeviceAttr with = SampleAttr();
  with.limits.atomics = true;
  EXPECT_EQ(EncodeQueryDevice(with).atomic_cap, 1) << "IBV_ATOMIC_HCA";
}

TEST(CommandEncoderTest, ConfigSpace) {
  engine::VmConfig vm;
  vm.gids.resize(2);
  vm.gids[0][0] = 0xfe;
  vm.gids[1][15] = 0x42;
  auto c = EncodeConfig(SampleAttr(), vm, 4);
  EXPECT_EQ(le32toh(c.abi_version), 1u);
  EXPECT_EQ(le32toh(c.num_doorbell_queues), 4u);
  EXPECT_EQ(le32toh(c.max_qp), 1000u);
  EXPECT_EQ(le32toh(c.max_mr_pages), 262144u);
  EXPECT_EQ(le64toh(c.max_mr_size), 1ull << 33);
  EXPECT_EQ(le32toh(c.max_msg_sz), 1u << 30);
  EXPECT_EQ(c.active_mtu, VIRTIO_RDMA_MTU_4096);
  EXPECT_EQ(c.port_state, VIRTIO_RDMA_PORT_ACTIVE);
  EXPECT_EQ(c.phys_port_cnt, 1);
  EXPECT_EQ(c.num_gids, 2);
  EXPECT_EQ(c.gids[0][0], 0xfe);
  EXPECT_EQ(c.gids[1][15], 0x42);
  EXPECT_EQ(c.gids[2][0], 0);
  for (uint32_t r : c.reserved) EXPECT_EQ(r, 0u);
  for (uint8_t b : c.mac) EXPECT_EQ(b, 0) << "no MAC given: all zero";

  vm.mac = engine::MacAddress{0x52, 0x54, 0, 0x77, 0, 1};
  c = EncodeConfig(SampleAttr(), vm, 4);
  EXPECT_EQ(c.mac[0], 0x52);
  EXPECT_EQ(c.mac[5], 1);

  engine::VmConfig many;
  many.gids.resize(VIRTIO_RDMA_MAX_GIDS + 3);
  EXPECT_EQ(EncodeConfig(SampleAttr(), many, 1).num_gids,
            VIRTIO_RDMA_MAX_GIDS);
}

TEST(CommandEncoderTest, QueryPortAndGid) {
  auto p = EncodeQueryPort(SampleAttr(), 3);
  EXPECT_EQ(le32toh(p.gid_tbl_len), 3u);
  EXPECT_EQ(le32toh(p.max_msg_sz), 1u << 30);
  EXPECT_EQ(p.state, VIRTIO_RDMA_PORT_ACTIVE);
  EXPECT_EQ(p.active_mtu, VIRTIO_RDMA_MTU_4096);
  EXPECT_EQ(p.link_layer, 2);
  Gid g{};
  g[3] = 9;
  auto r = EncodeQueryGid(g);
  EXPECT_EQ(r.gid[3], 9);
  EXPECT_EQ(le32toh(r.gid_type), 2u);
}

TEST(CommandEncoderTest, CreateResponses) {
  auto mr = EncodeRegMr({.handle = 0x10001, .lkey = 0xabc, .rkey = 0});
  EXPECT_EQ(le32toh(mr.mr_handle), 0x10001u);
  EXPECT_EQ(le32toh(mr.lkey), 0xabcu);
  EXPECT_EQ(mr.rkey, 0u);
  auto qp = EncodeCreateQp({.qpn = 0x12, .caps = {.max_send_wr = 63,
                                                   .max_recv_wr = 127,
                                                   .max_send_sge = 4,
                                                   .max_recv_sge = 1,
                                                   .max_inline_data = 64}});
  EXPECT_EQ(le32toh(qp.qpn), 0x12u);
  EXPECT_EQ(le32toh(qp.cap.max_recv_wr), 127u);
  EXPECT_EQ(le32toh(qp.cap.max_inline_data), 64u);
  EXPECT_EQ(qp.cap.reserved, 0u);
  auto srq = EncodeCreateSrq({.handle = 5, .max_wr = 6, .max_sge = 7});
  EXPECT_EQ(le32toh(srq.max_sge), 7u);
  EXPECT_EQ(le32toh(EncodeCreateCq({.handle = 1, .cqe = 255}).cqe), 255u);
  EXPECT_EQ(le32toh(EncodeCreatePd(8).pd_handle), 8u);
  EXPECT_EQ(le32toh(EncodeCreateAh(9).ah_handle), 9u);
}

// EncodeQpAttr followed by DecodeQpAttr returns every masked field.
TEST(CommandEncoderTest, QpAttrRoundTrip) {
  engine::ModifyQpRequest a;
  a.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_CUR_STATE |
           VIRTIO_RDMA_QP_ACCESS_FLAGS | VIRTIO_RDMA_QP_PKEY_INDEX |
           VIRTIO_RDMA_QP_PORT | VIRTIO_RDMA_QP_QKEY | VIRTIO_RDMA_QP_AV |
           VIRTIO_RDMA_QP_PATH_MTU | VIRTIO_RDMA_QP_TIMEOUT |
           VIRTIO_RDMA_QP_RETRY_CNT | VIRTIO_RDMA_QP_RNR_RETRY |
           VIRTIO_RDMA_QP_RQ_PSN | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC |
           VIRTIO_RDMA_QP_MIN_RNR_TIMER | VIRTIO_RDMA_QP_SQ_PSN |
           VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_DEST_QPN;
  a.state = QpState::kRts;
  a.cur_state = QpState::kRtr;
  a.access_flags = 0xe;
  a.pkey_index = 3;
  a.port_num = 1;
  a.qkey = 0x11223344;
  a.ah.dgid[0] = 0xfe;
  a.ah.dgid[15] = 0x01;
  a.ah.sgid_index = 2;
  a.ah.flow_label = 0x12345;
  a.ah.hop_limit = 7;
  a.ah.traffic_class = 0x20;
  a.ah.sl = 5;
  a.ah.port_num = 1;
  a.ah.is_global = true;
  a.path_mtu_bytes = 2048;
  a.timeout = 17;
  a.retry_cnt = 6;
  a.rnr_retry = 7;
  a.min_rnr_timer = 31;
  a.max_rd_atomic = 8;
  a.max_dest_rd_atomic = 9;
  a.rq_psn = 0xfffffe;
  a.sq_psn = 0x000001;
  a.dest_qpn = 0xabcdef;

  engine::ModifyQpRequest back;
  ASSERT_EQ(DecodeQpAttr(EncodeQpAttr(a), &back), Status::kOk);
  EXPECT_EQ(back.mask, a.mask);
  EXPECT_EQ(back.state, a.state);
  EXPECT_EQ(back.cur_state, a.cur_state);
  EXPECT_EQ(back.access_flags, a.access_flags);
  EXPECT_EQ(back.pkey_index, a.pkey_index);
  EXPECT_EQ(back.port_num, a.port_num);
  EXPECT_EQ(back.qkey, a.qkey);
  EXPECT_EQ(back.ah.dgid, a.ah.dgid);
  EXPECT_EQ(back.ah.sgid_index, a.ah.sgid_index);
  EXPECT_EQ(back.ah.flow_label, a.ah.flow_label);
  EXPECT_EQ(back.ah.hop_limit, a.ah.hop_limit);
  EXPECT_EQ(back.ah.traffic_class, a.ah.traffic_class);
  EXPECT_EQ(back.ah.sl, a.ah.sl);
  EXPECT_EQ(back.ah.is_global, a.ah.is_global);
  EXPECT_EQ(back.path_mtu_bytes, a.path_mtu_bytes);
  EXPECT_EQ(back.timeout, a.timeout);
  EXPECT_EQ(back.retry_cnt, a.retry_cnt);
  EXPECT_EQ(back.rnr_retry, a.rnr_retry);
  EXPECT_EQ(back.min_rnr_timer, a.min_rnr_timer);
  EXPECT_EQ(back.max_rd_atomic, a.max_rd_atomic);
  EXPECT_EQ(back.max_dest_rd_atomic, a.max_dest_rd_atomic);
  EXPECT_EQ(back.rq_psn, a.rq_psn);
  EXPECT_EQ(back.sq_psn, a.sq_psn);
  EXPECT_EQ(back.dest_qpn, a.dest_qpn);
}

TEST(CommandEncoderTest, QpAttrLeavesUnmaskedFieldsZero) {
  engine::ModifyQpRequest a;
  a.mask = VIRTIO_RDMA_QP_STATE;
  a.state = QpState::kErr;
  a.qkey = 0xdeadbeef;
  a.dest_qpn = 77;
  auto w = EncodeQpAttr(a);
  EXPECT_EQ(w.qp_state, VIRTIO_RDMA_QPS_ERR);
  EXPECT_EQ(w.qkey, 0u);
  EXPECT_EQ(w.dest_qp_num, 0u);
  EXPECT_EQ(w.ah_attr.port_num, 0);
}

TEST(CommandEncoderTest, QueryQpCarriesCaps) {
  engine::QueryQpResult q;
  q.attr.mask = VIRTIO_RDMA_QP_STATE;
  q.attr.state = QpState::kInit;
  q.cap.max_send_wr = 31;
  auto r = EncodeQueryQp(q);
  EXPECT_EQ(r.attr.qp_state, VIRTIO_RDMA_QPS_INIT);
  EXPECT_EQ(le32toh(r.init_cap.max_send_wr), 31u);
  EXPECT_EQ(le32toh(r.attr.cap.max_send_wr), 31u);
}

}  // namespace
}  // namespace vrdma::device
