// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/qp_attr_check.h"

#include <gtest/gtest.h>

namespace vrdma::engine {
namespace {

constexpr uint32_t kInitMaskRc =
    VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX | VIRTIO_RDMA_QP_PORT |
    VIRTIO_RDMA_QP_ACCESS_FLAGS;
constexpr uint32_t kInitMaskUd = VIRTIO_RDMA_QP_STATE |
                                 VIRTIO_RDMA_QP_PKEY_INDEX |
                                 VIRTIO_RDMA_QP_PORT | VIRTIO_RDMA_QP_QKEY;
constexpr uint32_t kRtrMaskRc =
    VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_AV | VIRTIO_RDMA_QP_PATH_MTU |
    VIRTIO_RDMA_QP_DEST_QPN | VIRTIO_RDMA_QP_RQ_PSN |
    VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER;
constexpr uint32_t kRtsMaskRc =
    VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
    VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_SQ_PSN |
    VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;

ModifyQpRequest Req(QpState to, uint32_t mask) {
  ModifyQpRequest r;
  r.state = to;
  r.mask = mask;
  r.port_num = 1;
  r.path_mtu_bytes = 1024;
  r.ah.sgid_index = 0;
  r.ah.is_global = true;
  r.ah.port_num = 1;
  return r;
}

QpCheckContext Ctx(QpType t, QpState cur, uint32_t gids = 2) {
  QpCheckContext c;
  c.type = t;
  c.current = cur;
  c.num_gids = gids;
  c.active_mtu_bytes = 4096;
  return c;
}

struct TransitionCase {
  QpType type;
  QpState from;
  QpState to;
  uint32_t mask;
  Status want;
};

TEST(QpAttrCheckTest, Transitions) {
  using S = QpState;
  constexpr uint32_t ST = VIRTIO_RDMA_QP_STATE;
  const TransitionCase cases[] = {
      {QpType::kRc, S::kReset, S::kInit, kInitMaskRc, Status::kOk},
      {QpType::kUd, S::kReset, S::kInit, kInitMaskUd, Status::kOk},
      {QpType::kUc, S::kReset, S::kInit, kInitMaskRc, Status::kOk},
      {QpType::kRc, S::kReset, S::kInit, kInitMaskUd,
       Status::kInvalid},  // qkey on RC
      {QpType::kRc, S::kReset, S::kInit, ST | VIRTIO_RDMA_QP_PORT,
       Status::kInvalid},
      {QpType::kRc, S::kReset, S::kRtr, kRtrMaskRc, Status::kBadState},
      {QpType::kRc, S::kReset, S::kRts, kRtsMaskRc, Status::kBadState},
      {QpType::kRc, S::kInit, S::kRtr, kRtrMaskRc, Status::kOk},
      {QpType::kRc, S::kInit, S::kRtr, kRtrMaskRc & ~VIRTIO_RDMA_QP_AV,
       Status::kInvalid},
      {QpType::kUc, S::kInit, S::kRtr,
       kRtrMaskRc &
           ~(VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER),
       Status::kOk},
      {QpType::kUc, S::kInit, S::kRtr, kRtrMaskRc,
       Status::kInvalid},  // RC-only attrs
      {QpType::kUd, S::kInit, S::kRtr, ST, Status::kOk},
      {QpType::kUd, S::kInit, S::kRtr, ST | VIRTIO_RDMA_QP_AV,
       Status::kInvalid},
      {QpType::kRc, S::kRtr, S::kRts, kRtsMaskRc, Status::kOk},
      {QpType::kRc, S::kRtr, S::kRts, ST | VIRTIO_RDMA_QP_SQ_PSN,
       Status::kInvalid},
      {QpType::kUd, S::kRtr, S::kRts, ST | VIRTIO_RDMA_QP_SQ_PSN, Status::kOk},
      {QpType::kRc, S::kRts, S::kRts, ST | VIRTIO_RDMA_QP_MIN_RNR_TIMER,
       Status::kOk},
      {QpType::kRc, S::kRts, S::kSqd, ST, Status::kOk},
      {QpType::kRc, S::kSqd, S::kRts, ST, Status::kOk},
      {QpType::kRc, S::kRts, S::kRtr, ST, Status::kBadState},
      {QpType::kRc, S::kRts, S::kInit, ST, Status::kBadState},
      {QpType::kRc, S::kErr, S::kRts, ST, Status::kBadState},
      {QpType::kRc, S::kErr, S::kReset, ST, Status::kOk},
      {QpType::kRc, S::kRts, S::kErr, ST, Status::kOk},
      {QpType::kRc, S::kInit, S::kErr, ST, Status::kOk},
      {QpType::kUd, S::kSqe, S::kRts, ST, Status::kOk},
      {QpType::kRc, S::kSqe, S::kRts, ST, Status::kBadState},
      {QpType::kRc, S::kInit, S::kSqe, ST, Status::kBadState},
      {QpType::kRc, S::kRtr, S::kRtr, VIRTIO_RDMA_QP_TIMEOUT,
       Status::kBadState},  // no STATE
      {QpType::kRc, S::kRts, S::kRts, VIRTIO_RDMA_QP_MIN_RNR_TIMER,
       Status::kOk},  // no STATE
      // GSI: what Linux's MAD layer sends (no port: QP1 is the port's).
      {QpType::kGsi, S::kReset, S::kInit,
       ST | VIRTIO_RDMA_QP_PKEY_INDEX | VIRTIO_RDMA_QP_QKEY, Status::kOk},
      {QpType::kGsi, S::kReset, S::kInit, kInitMaskUd, Status::kInvalid},
      {QpType::kGsi, S::kInit, S::kRtr, ST, Status::kOk},
      {QpType::kGsi, S::kRtr, S::kRts, ST | VIRTIO_RDMA_QP_SQ_PSN, Status::kOk},
      {QpType::kGsi, S::kRtr, S::kRts, ST, Status::kInvalid},
      {QpType::kGsi, S::kInit, S::kRtr, ST | VIRTIO_RDMA_QP_AV,
       Status::kInvalid},
  };
  int i = 0;
  for (const TransitionCase& c : cases) {
    QpState next = QpState::kReset;
    ModifyQpRequest r = Req(c.to, c.mask);
    EXPECT_EQ(CheckModifyQp(r, Ctx(c.type, c.from), &next), c.want)
        << "case " << i;
    if (c.want == Status::kOk) {
      EXPECT_EQ(next, c.to) << "case " << i;
    }
    ++i;
  }
}

TEST(QpAttrCheckTest, BadStateValue) {
  ModifyQpRequest r = Req(static_cast<QpState>(7), VIRTIO_RDMA_QP_STATE);
  QpState next;
  EXPECT_EQ(CheckModifyQp(r, Ctx(QpType::kRc, QpState::kInit), &next),
            Status::kInvalid);
}

TEST(QpAttrCheckTest, BadCurStateValue) {
  ModifyQpRequest r =
      Req(QpState::kErr, VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_CUR_STATE);
  r.cur_state = static_cast<QpState>(9);
  QpState next;
  EXPECT_EQ(CheckModifyQp(r, Ctx(QpType::kRc, QpState::kInit), &next),
            Status::kInvalid);
}

TEST(QpAttrCheckTest, CurStateMustMatch) {
  ModifyQpRequest r =
      Req(QpState::kErr, VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_CUR_STATE);
  r.cur_state = QpState::kRts;
  QpState next;
  EXPECT_EQ(CheckModifyQp(r, Ctx(QpType::kRc, QpState::kInit), &next),
            Status::kBadState);
}

TEST(QpAttrCheckTest, UnsupportedAndUnknownMaskBits) {
  QpState next;
  for (uint32_t bit : {VIRTIO_RDMA_QP_ALT_PATH, VIRTIO_RDMA_QP_PATH_MIG_STATE,
                       VIRTIO_RDMA_QP_CAP}) {
    EXPECT_EQ(CheckModifyQp(Req(QpState::kRts, VIRTIO_RDMA_QP_STATE | bit),
                            Ctx(QpType::kRc, QpState::kRts), &next),
              Status::kUnsupported);
  }
  EXPECT_EQ(CheckModifyQp(Req(QpState::kRts, VIRTIO_RDMA_QP_STATE | (1u << 21)),
                          Ctx(QpType::kRc, QpState::kRts), &next),
            Status::kInvalid);
}

// One bad value at a time on an otherwise valid INIT -> RTR (RC).
TEST(QpAttrCheckTest, RtrValues) {
  struct V {
    const char* name;
    void (*mutate)(ModifyQpRequest&);
    uint32_t gids;
  };
  const V cases[] = {
      {"sgid beyond own gids", [](ModifyQpRequest& r) { r.ah.sgid_index = 2; },
       2},
      {"sgid 255", [](ModifyQpRequest& r) { r.ah.sgid_index = 255; }, 2},
      {"sgid 1 with one gid", [](ModifyQpRequest& r) { r.ah.sgid_index = 1; },
       1},
      {"no grh", [](ModifyQpRequest& r) { r.ah.is_global = false; }, 2},
      {"ah port 2", [](ModifyQpRequest& r) { r.ah.port_num = 2; }, 2},
      {"flow label 21 bits",
       [](ModifyQpRequest& r) { r.ah.flow_label = 1u << 20; }, 2},
      {"sl 16", [](ModifyQpRequest& r) { r.ah.sl = 16; }, 2},
      {"mtu 1000", [](ModifyQpRequest& r) { r.path_mtu_bytes = 1000; }, 2},
      {"mtu 8192", [](ModifyQpRequest& r) { r.path_mtu_bytes = 8192; }, 2},
      {"mtu 0", [](ModifyQpRequest& r) { r.path_mtu_bytes = 0; }, 2},
      {"dest qpn 25 bits", [](ModifyQpRequest& r) { r.dest_qpn = 1u << 24; },
       2},
      {"rq psn 25 bits", [](ModifyQpRequest& r) { r.rq_psn = 0x1000000; }, 2},
      {"max dest rd atomic",
       [](ModifyQpRequest& r) { r.max_dest_rd_atomic = 17; }, 2},
      {"min rnr timer", [](ModifyQpRequest& r) { r.min_rnr_timer = 32; }, 2},
  };
  for (const V& v : cases) {
    ModifyQpRequest r = Req(QpState::kRtr, kRtrMaskRc);
    QpState next;
    ASSERT_EQ(CheckModifyQp(r, Ctx(QpType::kRc, QpState::kInit, v.gids), &next),
              Status::kOk)
        << v.name;
    v.mutate(r);
    EXPECT_EQ(CheckModifyQp(r, Ctx(QpType::kRc, QpState::kInit, v.gids), &next),
              Status::kInvalid)
        << v.name;
  }
}

TEST(QpAttrCheckTest, MtuAboveActiveRejected) {
  ModifyQpRequest r = Req(QpState::kRtr, kRtrMaskRc);
  r.path_mtu_bytes = 4096;
  QpCheckContext c = Ctx(QpType::kRc, QpState::kInit);
  c.active_mtu_bytes = 1024;
  QpState next;
  EXPECT_EQ(CheckModifyQp(r, c, &next), Status::kInvalid);
  r.path_mtu_bytes = 1024;
  EXPECT_EQ(CheckModifyQp(r, c, &next), Status::kOk);
}

TEST(QpAttrCheckTest, RtsAndInitValues) {
  struct V {
    const char* name;
    QpState from, to;
    uint32_t mask;
    void (*mutate)(ModifyQpRequest&);
  };
  const V cases[] = {
      {"timeout 32", QpState::kRtr, QpState::kRts, kRtsMaskRc,
       [](ModifyQpRequest& r) { r.timeout = 32; }},
      {"retry 8", QpState::kRtr, QpState::kRts, kRtsMaskRc,
       [](ModifyQpRequest& r) { r.retry_cnt = 8; }},
      {"rnr retry 8", QpState::kRtr, QpState::kRts, kRtsMaskRc,
       [](ModifyQpRequest& r) { r.rnr_retry = 8; }},
      {"sq psn", QpState::kRtr, QpState::kRts, kRtsMaskRc,
       [](ModifyQpRequest& r) { r.sq_psn = ~0u; }},
      {"rd atomic", QpState::kRtr, QpState::kRts, kRtsMaskRc,
       [](ModifyQpRequest& r) { r.max_rd_atomic = 200; }},
      {"access bits", QpState::kReset, QpState::kInit, kInitMaskRc,
       [](ModifyQpRequest& r) { r.access_flags = 0x10; }},
      {"pkey index", QpState::kReset, QpState::kInit, kInitMaskRc,
       [](ModifyQpRequest& r) { r.pkey_index = 1; }},
      {"port 2", QpState::kReset, QpState::kInit, kInitMaskRc,
       [](ModifyQpRequest& r) { r.port_num = 2; }},
      {"port 0", QpState::kReset, QpState::kInit, kInitMaskRc,
       [](ModifyQpRequest& r) { r.port_num = 0; }},
  };
  for (const V& v : cases) {
    ModifyQpRequest r = Req(v.to, v.mask);
    QpState next;
    ASSERT_EQ(CheckModifyQp(r, Ctx(QpType::kRc, v.from), &next), Status::kOk)
        << v.name;
    v.mutate(r);
    EXPECT_EQ(CheckModifyQp(r, Ctx(QpType::kRc, v.from), &next),
              Status::kInvalid)
        << v.name;
  }
}

}  // namespace
}  // namespace vrdma::engine
