// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Each command reaches the right engine call with the decoded values, and
// the engine's answer comes back encoded; rejected requests never reach the
// engine (StrictMock fails on any unexpected call).
#include "vhost-rdma/device/command_handler.h"

#include <endian.h>

#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vhost-rdma/device/mock_engine.h"

namespace vrdma::device {
namespace {

using ::testing::_;
using ::testing::Field;
using ::testing::Return;
using ::testing::StrictMock;

constexpr engine::VmId kVm = 3;
constexpr uint64_t kAllFeatures =
    (1ull << VIRTIO_RDMA_F_SRQ) | (1ull << VIRTIO_RDMA_F_UD) | (1ull << VIRTIO_RDMA_F_MW) |
    (1ull << VIRTIO_RDMA_F_KERNEL);

class CommandHandlerTest : public ::testing::Test {
 protected:
  CommandHandlerTest() : handler_(engine_, kVm, {64, 1024}, 3) {
    handler_.set_acked_features(kAllFeatures);
  }

  template <typename T>
  static std::vector<uint8_t> Req(uint32_t cmd, const T& body) {
    std::vector<uint8_t> b(8 + sizeof(T));
    const virtio_rdma_cmd_hdr h{htole32(cmd), 0};
    std::memcpy(b.data(), &h, 8);
    std::memcpy(b.data() + 8, &body, sizeof(T));
    return b;
  }
  static std::vector<uint8_t> Req(uint32_t cmd) {
    std::vector<uint8_t> b(8);
    const virtio_rdma_cmd_hdr h{htole32(cmd), 0};
    std::memcpy(b.data(), &h, 8);
    return b;
  }
  template <typename T>
  static T Body(const CommandResponse& r) {
    EXPECT_EQ(r.body_len, sizeof(T));
    T t;
    std::memcpy(&t, r.body.data(), sizeof(T));
    return t;
  }
  static virtio_rdma_req_handle H(uint32_t h) {
    return {htole32(h), 0};
  }

  StrictMock<testing::MockEngine> engine_;
  CommandHandler handler_;
};

TEST_F(CommandHandlerTest, QueryDeviceAndPort) {
  engine::DeviceAttr a;
  a.limits.max_qp = 42;
  a.limits.max_msg_sz = 1 << 20;
  a.limits.max_fr_pages = 512;
  EXPECT_CALL(engine_, QueryDevice(kVm)).Times(2).WillRepeatedly(Return(a));
  auto r = handler_.Handle(Req(VIRTIO_RDMA_CMD_QUERY_DEVICE));
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(le32toh(Body<virtio_rdma_resp_query_device>(r).max_qp), 42u);
  EXPECT_EQ(le32toh(Body<virtio_rdma_resp_query_device>(r).max_fr_pages), 512u);
  r = handler_.Handle(Req(VIRTIO_RDMA_CMD_QUERY_PORT,
                          virtio_rdma_req_query_port{htole32(1), 0}));
  ASSERT_EQ(r.status, Status::kOk);
  auto port = Body<virtio_rdma_resp_query_port>(r);
  EXPECT_EQ(le32toh(port.gid_tbl_len), 3u);
  EXPECT_EQ(le32toh(port.max_msg_sz), 1u << 20);
}

TEST_F(CommandHandlerTest, QueryGid) {
  Gid g{};
  g[0] = 0xfe;
  EXPECT_CALL(engine_, QueryGid(kVm, 2u)).WillOnce(Return(g));
  EXPECT_CALL(engine_, QueryGid(kVm, 5u)).WillOnce(Return(Status::kInvalid));
  auto r = handler_.Handle(Req(VIRTIO_RDMA_CMD_QUERY_GID,
                               virtio_rdma_req_query_gid{htole32(1), htole32(2)}));
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(Body<virtio_rdma_resp_query_gid>(r).gid[0], 0xfe);
  r = handler_.Handle(Req(VIRTIO_RDMA_CMD_QUERY_GID,
                          virtio_rdma_req_query_gid{htole32(1), htole32(5)}));
  EXPECT_EQ(r.status, Status::kInvalid);
  EXPECT_EQ(r.body_len, 0u);
}

TEST_F(CommandHandlerTest, DestroysReachTheirOwnEngineCall) {
  EXPECT_CALL(engine_, DestroyPd(kVm, 11u)).WillOnce(Return(Status::kOk));
  EXPECT_CALL(engine_, DeregMr(kVm, 12u)).WillOnce(Return(Status::kBadHandle));
  EXPECT_CALL(engine_, DestroyCq(kVm, 13u)).WillOnce(Return(Status::kBusy));
  EXPECT_CALL(engine_, DestroyQp(kVm, 14u)).WillOnce(Return(Status::kOk));
  EXPECT_CALL(engine_, DestroyAh(kVm, 15u)).WillOnce(Return(Status::kOk));
  EXPECT_CALL(engine_, DestroySrq(kVm, 16u)).WillOnce(Return(Status::kOk));
  EXPECT_CALL(engine_, DeallocMw(kVm, 17u)).WillOnce(Return(Status::kBadHandle));
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DESTROY_PD, H(11))).status,
            Status::kOk);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DEREG_MR, H(12))).status,
            Status::kBadHandle);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DESTROY_CQ, H(13))).status,
            Status::kBusy);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DESTROY_QP, H(14))).status,
            Status::kOk);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DESTROY_AH, H(15))).status,
            Status::kOk);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DESTROY_SRQ, H(16))).status,
            Status::kOk);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DEALLOC_MW, H(17))).status,
            Status::kBadHandle);
}

TEST_F(CommandHandlerTest, AllocMwReturnsTheWindowsRkey) {
  EXPECT_CALL(engine_, AllocMw(kVm, 4u, uint8_t{2}))
      .WillOnce(Return(engine::AllocMwResult{0x50001, 0x80000100}));
  auto r = handler_.Handle(
      Req(VIRTIO_RDMA_CMD_ALLOC_MW, virtio_rdma_req_alloc_mw{htole32(4), htole32(2)}));
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(le32toh(Body<virtio_rdma_resp_alloc_mw>(r).mw_handle), 0x50001u);
  EXPECT_EQ(le32toh(Body<virtio_rdma_resp_alloc_mw>(r).rkey), 0x80000100u);
}

TEST_F(CommandHandlerTest, AllocMrAndKernelQpsReachTheEngine) {
  EXPECT_CALL(engine_, AllocMr(kVm, ::testing::AllOf(Field(&engine::AllocMrRequest::pd, 4u),
                                          Field(&engine::AllocMrRequest::max_pages, 16u),
                                          Field(&engine::AllocMrRequest::page_list, 0x2008u))))
      .WillOnce(Return(engine::RegMrResult{0x60002, 0x1234500, 0x1234501}));
  auto r = handler_.Handle(Req(VIRTIO_RDMA_CMD_ALLOC_MR,
                               virtio_rdma_req_alloc_mr{htole32(4), htole32(16),
                                                        htole64(0x2008)}));
  ASSERT_EQ(r.status, Status::kOk);
  const auto body = Body<virtio_rdma_resp_alloc_mr>(r);
  EXPECT_EQ(le32toh(body.mr_handle), 0x60002u);
  EXPECT_EQ(le32toh(body.lkey), 0x1234500u);
  EXPECT_EQ(le32toh(body.rkey), 0x1234501u);

  CreateQpCmd kernel_qp;
  kernel_qp.req.kernel = true;
  EXPECT_CALL(engine_, CreateQp(kVm, Field(&engine::CreateQpRequest::kernel, true)))
      .WillOnce(Return(engine::CreateQpResult{0x124, {}}));
  EXPECT_EQ(handler_.Execute(kernel_qp).status, Status::kOk);
}

TEST_F(CommandHandlerTest, NotifyAndModifySrqArguments) {
  EXPECT_CALL(engine_, ReqNotifyCq(kVm, 7u, true)).WillOnce(Return(Status::kOk));
  EXPECT_CALL(engine_, ReqNotifyCq(kVm, 7u, false)).WillOnce(Return(Status::kOk));
  EXPECT_CALL(engine_, ModifySrq(kVm, 9u, VIRTIO_RDMA_SRQ_LIMIT, 100u, 20u))
      .WillOnce(Return(Status::kOk));
  EXPECT_EQ(handler_
                .Handle(Req(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
                            virtio_rdma_req_notify_cq{
                                htole32(7), htole32(VIRTIO_RDMA_NOTIFY_SOLICITED)}))
                .status,
            Status::kOk);
  EXPECT_EQ(handler_
                .Handle(Req(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
                            virtio_rdma_req_notify_cq{
                                htole32(7), htole32(VIRTIO_RDMA_NOTIFY_NEXT_COMP)}))
                .status,
            Status::kOk);
  EXPECT_EQ(handler_
                .Handle(Req(VIRTIO_RDMA_CMD_MODIFY_SRQ,
                            virtio_rdma_req_modify_srq{
                                htole32(9), htole32(VIRTIO_RDMA_SRQ_LIMIT),
                                htole32(100), htole32(20)}))
                .status,
            Status::kOk);
}

TEST_F(CommandHandlerTest, ModifyAndQueryQp) {
  virtio_rdma_req_modify_qp m{};
  m.qpn = htole32(0x77);
  m.attr.attr_mask = htole32(VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_QKEY);
  m.attr.qp_state = VIRTIO_RDMA_QPS_INIT;
  m.attr.qkey = htole32(0x1234);
  EXPECT_CALL(engine_,
              ModifyQp(kVm, ::testing::AllOf(
                                Field(&engine::ModifyQpRequest::qpn, 0x77u),
                                Field(&engine::ModifyQpRequest::state,
                                      QpState::kInit),
                                Field(&engine::ModifyQpRequest::qkey, 0x1234u))))
      .WillOnce(Return(Status::kBadState));
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_MODIFY_QP, m)).status,
            Status::kBadState);

  engine::QueryQpResult q;
  q.attr.mask = VIRTIO_RDMA_QP_STATE;
  q.attr.state = QpState::kRts;
  q.cap.max_send_wr = 15;
  EXPECT_CALL(engine_, QueryQp(kVm, 0x77u)).WillOnce(Return(q));
  auto r = handler_.Handle(Req(VIRTIO_RDMA_CMD_QUERY_QP,
                               virtio_rdma_req_query_qp{htole32(0x77), 0}));
  ASSERT_EQ(r.status, Status::kOk);
  auto out = Body<virtio_rdma_resp_query_qp>(r);
  EXPECT_EQ(out.attr.qp_state, VIRTIO_RDMA_QPS_RTS);
  EXPECT_EQ(le32toh(out.init_cap.max_send_wr), 15u);
}

TEST_F(CommandHandlerTest, CreateAhAndSrq) {
  virtio_rdma_req_create_ah ah{};
  ah.pd_handle = htole32(4);
  ah.attr.port_num = 1;
  ah.attr.is_global = 1;
  ah.attr.sgid_index = 1;
  EXPECT_CALL(engine_, CreateAh(kVm, 4u, Field(&engine::GuestAh::sgid_index, 1)))
      .WillOnce(Return(0x30001u));
  auto r = handler_.Handle(Req(VIRTIO_RDMA_CMD_CREATE_AH, ah));
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(le32toh(Body<virtio_rdma_resp_create_ah>(r).ah_handle), 0x30001u);

  std::vector<uint8_t> srq = Req(VIRTIO_RDMA_CMD_CREATE_SRQ, [] {
    virtio_rdma_req_create_srq s{};
    s.pd_handle = htole32(4);
    s.max_wr = htole32(7);
    s.max_sge = htole32(1);
    s.ring = {htole32(3), htole32(6), htole32(1), 0};
    return s;
  }());
  const uint64_t page = htole64(0x9000);
  srq.resize(srq.size() + 8);
  std::memcpy(srq.data() + srq.size() - 8, &page, 8);
  EXPECT_CALL(engine_, CreateSrq(kVm, Field(&engine::CreateSrqRequest::max_wr, 7u)))
      .WillOnce(Return(engine::CreateSrqResult{0x40001, 7, 1}));
  r = handler_.Handle(srq);
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(le32toh(Body<virtio_rdma_resp_create_srq>(r).srq_handle), 0x40001u);
}

TEST_F(CommandHandlerTest, UnnegotiatedFeaturesAreUnsupported) {
  handler_.set_acked_features(0);
  virtio_rdma_req_create_ah ah{};
  ah.attr.port_num = 1;
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_CREATE_AH, ah)).status,
            Status::kUnsupported);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DESTROY_AH, H(1))).status,
            Status::kUnsupported);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DESTROY_SRQ, H(1))).status,
            Status::kUnsupported);
  // Windows: the commands, and the MW_BIND access bit (then as unknown as
  // any other bit: EINVAL).
  EXPECT_EQ(handler_
                .Handle(Req(VIRTIO_RDMA_CMD_ALLOC_MW,
                            virtio_rdma_req_alloc_mw{htole32(1), htole32(1)}))
                .status,
            Status::kUnsupported);
  EXPECT_EQ(handler_.Handle(Req(VIRTIO_RDMA_CMD_DEALLOC_MW, H(1))).status,
            Status::kUnsupported);
  RegMrCmd bind_mr;
  bind_mr.req.access = VIRTIO_RDMA_ACCESS_MW_BIND;
  EXPECT_EQ(handler_.Execute(bind_mr).status, Status::kInvalid);
  // Kernel consumers: ALLOC_MR, and the kernel QP flag (then as unknown as
  // any other bit: EINVAL). StrictMock: neither reaches the engine.
  EXPECT_EQ(handler_
                .Handle(Req(VIRTIO_RDMA_CMD_ALLOC_MR,
                            virtio_rdma_req_alloc_mr{htole32(1), htole32(1), 0}))
                .status,
            Status::kUnsupported);
  CreateQpCmd kernel_qp;
  kernel_qp.req.kernel = true;
  EXPECT_EQ(handler_.Execute(kernel_qp).status, Status::kInvalid);
  EXPECT_EQ(handler_
                .Handle(Req(VIRTIO_RDMA_CMD_MODIFY_SRQ,
                            virtio_rdma_req_modify_srq{htole32(1), 0, 0, 0}))
                .status,
            Status::kUnsupported);

  CreateQpCmd ud;
  ud.req.type = QpType::kUd;
  EXPECT_EQ(handler_.Execute(ud).status, Status::kUnsupported);
  CreateQpCmd with_srq;
  with_srq.req.srq = 5;
  EXPECT_EQ(handler_.Execute(with_srq).status, Status::kUnsupported);
  // An RC QP without SRQ needs no feature.
  CreateQpCmd rc;
  EXPECT_CALL(engine_, CreateQp(kVm, _))
      .WillOnce(Return(engine::CreateQpResult{0x123, {}}));
  auto r = handler_.Execute(rc);
  ASSERT_EQ(r.status, Status::kOk);
  EXPECT_EQ(le32toh(Body<virtio_rdma_resp_create_qp>(r).qpn), 0x123u);
}

TEST_F(CommandHandlerTest, MalformedRequestsNeverReachTheEngine) {
  // StrictMock: any engine call fails the test.
  std::vector<uint8_t> junk = Req(VIRTIO_RDMA_CMD_CREATE_PD);
  junk.push_back(0);
  EXPECT_EQ(handler_.Handle(junk).status, Status::kInvalid);
  EXPECT_EQ(handler_.Handle({}).status, Status::kInvalid);
  EXPECT_EQ(handler_.Handle(Req(99)).status, Status::kInvalid);
  EXPECT_EQ(handler_
                .Handle(Req(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
                            virtio_rdma_req_notify_cq{htole32(1), htole32(3)}))
                .status,
            Status::kInvalid);
}

}  // namespace
}  // namespace vrdma::device
