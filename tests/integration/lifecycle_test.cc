// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Object lifecycle through the real daemon: create/destroy cycles return
// the VM's daemon-side counts (and the guest's RAM) to where they were;
// destroy order is enforced (BUSY); and a VM cannot name, destroy or modify
// another VM's objects even when it knows their numbers.
#include <cstring>

#include "tests/integration/two_vm_fixture.h"

namespace vrdma::integration {
namespace {

int Count(const nlohmann::json& vm, const char* key) { return vm.value(key, -1); }

TEST_F(TwoVmTest, CreateDestroyCyclesReturnToBaseline) {
  const nlohmann::json base = daemon_.VmStats("vm-a");
  ASSERT_FALSE(base.is_null());
  const uint64_t ram_free = a_.dev->driver().ram().free_bytes();
  for (int round = 0; round < 25; ++round) {
    auto cq = a_.dev->CreateCq(100);
    ASSERT_TRUE(cq.ok()) << round;
    guest::QpInitAttr qa;
    qa.send_cq = cq->get();
    qa.recv_cq = cq->get();
    qa.qp_type = round % 2 ? VIRTIO_RDMA_QPT_RC : VIRTIO_RDMA_QPT_UD;
    auto qp = a_.dev->CreateQp(*a_.pd, qa);
    ASSERT_TRUE(qp.ok()) << round << " " << StatusName(qp.status());
    auto mr = a_.dev->RegMr(*a_.pd, 1 << 20, kAllAccess, round * 8);
    ASSERT_TRUE(mr.ok()) << round;
    auto ah = a_.dev->CreateAh(*a_.pd, b_.gid);
    ASSERT_TRUE(ah.ok()) << round;
    if (round == 0) {
      auto mid = daemon_.VmStats("vm-a");
      EXPECT_EQ(Count(mid, "qps"), Count(base, "qps") + 1);
      EXPECT_EQ(Count(mid, "cqs"), Count(base, "cqs") + 1);
      EXPECT_EQ(Count(mid, "mrs"), Count(base, "mrs") + 1);
      EXPECT_EQ(Count(mid, "ahs"), Count(base, "ahs") + 1);
      EXPECT_GT(mid.value("pinned_bytes", 0ull), base.value("pinned_bytes", 0ull));
    }
    ah->reset();
    qp->reset();
    mr->reset();
    cq->reset();
  }
  const nlohmann::json after = daemon_.VmStats("vm-a");
  for (const char* k : {"pds", "cqs", "qps", "mrs", "ahs", "srqs"}) {
    EXPECT_EQ(Count(after, k), Count(base, k)) << k;
  }
  EXPECT_EQ(after.value("pinned_bytes", 1ull), base.value("pinned_bytes", 0ull));
  EXPECT_EQ(a_.dev->driver().ram().free_bytes(), ram_free);
}

TEST_F(TwoVmTest, PdWithMrIsBusyAndDestroyTwiceIsBadHandle) {
  auto pd = a_.dev->AllocPd();
  ASSERT_TRUE(pd.ok());
  auto mr = a_.dev->RegMr(**pd, 4096, VIRTIO_RDMA_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(mr.ok());
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_PD, (*pd)->handle()), Status::kBusy);
  const uint32_t mr_handle = (*mr)->handle();
  mr->reset();  // DEREG_MR
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DEREG_MR, mr_handle), Status::kBadHandle);
  const uint32_t pd_handle = (*pd)->handle();
  pd->reset();  // DESTROY_PD now succeeds
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_PD, pd_handle), Status::kBadHandle);
}

// PD, CQ, MR and AH handles are per-VM names (the same number may name an
// object in each VM), so vm-b first creates objects whose handles vm-a does
// not have; QPNs are global (the RNIC's), so vm-b's QPN is tried directly.
TEST_F(TwoVmTest, AVmCannotTouchAnotherVmsObjects) {
  auto qa = a_.CreateQp(VIRTIO_RDMA_QPT_RC);
  auto qb = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
  ASSERT_TRUE(qa && qb);
  auto pd2 = b_.dev->AllocPd();
  auto cq2 = b_.dev->CreateCq(16);
  auto cq3 = b_.dev->CreateCq(16);
  auto mr2 = b_.dev->RegMr(*b_.pd, 4096, kAllAccess);
  auto mr3 = b_.dev->RegMr(*b_.pd, 4096, kAllAccess);
  auto ah2 = b_.dev->CreateAh(*b_.pd, a_.gid);
  ASSERT_TRUE(pd2.ok() && cq2.ok() && cq3.ok() && mr2.ok() && mr3.ok() && ah2.ok());
  ASSERT_NE((*pd2)->handle(), a_.pd->handle());
  ASSERT_NE((*cq3)->handle(), a_.cq->handle());
  ASSERT_NE((*mr3)->handle(), a_.mr->handle());
  const nlohmann::json a_before = daemon_.VmStats("vm-a");

  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_QP, qb->qpn()), Status::kBadHandle);
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DEREG_MR, (*mr3)->handle()),
            Status::kBadHandle);
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_CQ, (*cq3)->handle()),
            Status::kBadHandle);
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_PD, (*pd2)->handle()),
            Status::kBadHandle);
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_AH, (*ah2)->handle()),
            Status::kBadHandle);
  virtio_rdma_req_modify_qp m{};
  m.qpn = qb->qpn();
  m.attr.attr_mask = VIRTIO_RDMA_QP_STATE;
  m.attr.qp_state = VIRTIO_RDMA_QPS_ERR;
  EXPECT_EQ(a_.dev->driver().Command(VIRTIO_RDMA_CMD_MODIFY_QP,
                                     {reinterpret_cast<const uint8_t*>(&m), sizeof(m)}, {}, {}),
            Status::kBadHandle);
  virtio_rdma_req_query_qp q{qb->qpn(), VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED};
  virtio_rdma_resp_query_qp resp{};
  EXPECT_EQ(a_.dev->driver().Command(VIRTIO_RDMA_CMD_QUERY_QP, q, &resp), Status::kBadHandle);
  // A QP of vm-a on vm-b's CQ: refused.
  virtio_rdma_req_create_qp cq{};
  cq.pd_handle = a_.pd->handle();
  cq.send_cq_handle = (*cq3)->handle();
  cq.recv_cq_handle = (*cq3)->handle();
  cq.qp_type = VIRTIO_RDMA_QPT_RC;
  cq.cap = {3, 3, 1, 1, 0, 0};  // fits the 4-slot rings below
  cq.sq = {2, 8, 1, 0};
  cq.rq = {2, 6, 1, 0};
  auto pages = a_.dev->driver().ram().Allocate(2 * 4096);
  ASSERT_TRUE(pages);
  virtio_rdma_resp_create_qp cr{};
  EXPECT_EQ(a_.dev->driver().Command(VIRTIO_RDMA_CMD_CREATE_QP, cq, &cr, pages->page_gpas()),
            Status::kBadHandle);
  // Control: the same request on vm-a's own CQ is accepted.
  cq.send_cq_handle = cq.recv_cq_handle = a_.cq->handle();
  std::memset(pages->host, 0, pages->size);
  ASSERT_EQ(a_.dev->driver().Command(VIRTIO_RDMA_CMD_CREATE_QP, cq, &cr, pages->page_gpas()),
            Status::kOk);
  EXPECT_EQ(a_.dev->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_QP, cr.qpn), Status::kOk);
  a_.dev->driver().ram().Free(*pages);

  // Nothing of either VM changed.
  const nlohmann::json a_after = daemon_.VmStats("vm-a");
  for (const char* k : {"pds", "cqs", "qps", "mrs", "ahs"}) {
    EXPECT_EQ(Count(a_after, k), Count(a_before, k)) << k;
  }
  auto st = qb->Query();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->attr.qp_state, VIRTIO_RDMA_QPS_RESET);
  ah2->reset();
  mr2->reset();
  mr3->reset();
  cq2->reset();
  cq3->reset();
  pd2->reset();
  qa.reset();
  qb.reset();
  ASSERT_NO_FATAL_FAILURE(ExpectHealthy(b_, a_, 21));
  ASSERT_NO_FATAL_FAILURE(ExpectHealthy(a_, b_, 22));
}

}  // namespace
}  // namespace vrdma::integration
