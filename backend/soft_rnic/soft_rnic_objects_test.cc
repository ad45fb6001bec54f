// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Object lifecycles: key format and reuse, references that keep objects
// alive (kBusy), bounded tables, GIDs, argument checks.
#include <set>

#include "backend/soft_rnic/object_table.h"
#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

using Objects = SoftRnicTest;

TEST_F(Objects, KeysAreIndexAndTagAndNotReusedImmediately) {
  std::set<uint32_t> seen;
  for (int i = 0; i < 300; ++i) {
    auto mr = rnic_.RegMr(a_.pd, a_.buf.data(), 4096, a_.iova,
                          kAccessLocalWrite | kAccessRemoteRead);
    ASSERT_TRUE(mr.ok());
    EXPECT_NE(mr->lkey >> 8, 0u);
    EXPECT_NE(mr->lkey & 0xff, 0u);
    EXPECT_EQ(mr->rkey, mr->lkey);
    EXPECT_TRUE(seen.insert(mr->lkey).second) << "key reused: " << mr->lkey;
    ASSERT_EQ(rnic_.DeregMr(*mr), Status::kOk);
    EXPECT_EQ(rnic_.DeregMr(*mr), Status::kBadHandle);  // stale now
  }
  auto local = rnic_.RegMr(a_.pd, a_.buf.data(), 4096, 0, kAccessLocalWrite);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->rkey, 0u);
}

TEST(ObjectTable, TagsChangeOnReuseAndStaleHandlesFail) {
  soft::ObjectTable<int> t(1);
  uint32_t h1 = 0, h2 = 0, h3 = 0;
  ASSERT_NE(t.Create(&h1), nullptr);
  EXPECT_EQ(t.Create(&h3), nullptr);  // full
  ASSERT_TRUE(t.Destroy(h1));
  ASSERT_NE(t.Create(&h2), nullptr);
  EXPECT_EQ(h1 >> 8, h2 >> 8);  // only one slot
  EXPECT_NE(h1, h2);
  EXPECT_EQ(t.Get(h1), nullptr);
  EXPECT_NE(t.Get(h2), nullptr);
  EXPECT_FALSE(t.Destroy(h1));
  EXPECT_EQ(t.Get(0), nullptr);
  EXPECT_EQ(t.Get(0xffffffff), nullptr);
  // 255 reuses later the tag comes round, never as 0.
  for (int i = 0; i < 600; ++i) {
    ASSERT_TRUE(t.Destroy(h2));
    ASSERT_NE(t.Create(&h2), nullptr);
    EXPECT_NE(h2 & 0xff, 0u);
  }
}

TEST_F(Objects, RegMrArgumentChecks) {
  uint8_t* p = a_.buf.data();
  EXPECT_EQ(rnic_.RegMr(RnicPd{0x999}, p, 16, 0, 0).status(),
            Status::kBadHandle);
  EXPECT_EQ(rnic_.RegMr(a_.pd, nullptr, 16, 0, 0).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.RegMr(a_.pd, p, 0, 0, 0).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.RegMr(a_.pd, p, (uint64_t{1} << 32) + 1, 0, 0).status(),
            Status::kInvalid);
  EXPECT_EQ(rnic_.RegMr(a_.pd, p, 16, 0, 0x100).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.RegMr(a_.pd, p, 16, ~uint64_t{0} - 4, 0).status(),
            Status::kInvalid);  // iova range wraps
  // Remote write / atomic without local write is not allowed (IB).
  EXPECT_EQ(rnic_.RegMr(a_.pd, p, 16, 0, kAccessRemoteWrite).status(),
            Status::kInvalid);
  EXPECT_EQ(rnic_.RegMr(a_.pd, p, 16, 0, kAccessRemoteAtomic).status(),
            Status::kInvalid);
}

TEST_F(Objects, ReferencedObjectsAreBusy) {
  Vm c;
  MakeVm(&c, 3);
  auto srq = rnic_.CreateSrq(c.pd, 4, 1);
  ASSERT_TRUE(srq.ok());
  RnicQp qp = MakeQp(c, QpType::kRc, 4, false, &*srq);
  EXPECT_EQ(rnic_.DeallocPd(c.pd), Status::kBusy);
  EXPECT_EQ(rnic_.DestroyCq(c.scq), Status::kBusy);
  EXPECT_EQ(rnic_.DestroyCq(c.rcq), Status::kBusy);
  EXPECT_EQ(rnic_.DestroySrq(*srq), Status::kBusy);
  ASSERT_EQ(rnic_.DestroyQp(qp), Status::kOk);
  EXPECT_EQ(rnic_.DestroyQp(qp), Status::kBadHandle);
  EXPECT_EQ(rnic_.DestroyCq(c.scq), Status::kOk);
  EXPECT_EQ(rnic_.DestroyCq(c.rcq), Status::kOk);
  EXPECT_EQ(rnic_.DestroySrq(*srq), Status::kOk);
  EXPECT_EQ(rnic_.DeallocPd(c.pd), Status::kBusy);  // the MR
  ASSERT_EQ(rnic_.DeregMr(c.mr), Status::kOk);
  AddressVector av;
  av.sgid = c.gid;
  auto ah = rnic_.CreateAh(c.pd, av);
  ASSERT_TRUE(ah.ok());
  EXPECT_EQ(rnic_.DeallocPd(c.pd), Status::kBusy);  // the AH
  ASSERT_EQ(rnic_.DestroyAh(*ah), Status::kOk);
  EXPECT_EQ(rnic_.DeallocPd(c.pd), Status::kOk);
  EXPECT_EQ(rnic_.DeallocPd(c.pd), Status::kBadHandle);
  Completion out[1];
  EXPECT_EQ(rnic_.PollCq(c.scq, out), 0);
  EXPECT_EQ(rnic_.QueryCqStats(c.scq).status(), Status::kBadHandle);
}

TEST_F(Objects, CreateArgumentChecks) {
  RnicLimits l = rnic_.limits();
  EXPECT_EQ(rnic_.CreateCq(0).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.CreateCq(l.max_cqe + 1).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.CreateSrq(a_.pd, 0, 1).status(), Status::kInvalid);
  EXPECT_EQ(rnic_.CreateSrq(a_.pd, 4, l.max_sge + 1).status(),
            Status::kInvalid);
  QpInit init;
  init.type = QpType::kRc;
  init.pd = a_.pd;
  init.send_cq = a_.scq;
  init.recv_cq = a_.rcq;
  init.caps = QpCaps{l.max_qp_wr + 1, 1, 1, 1, 0};
  EXPECT_EQ(rnic_.CreateQp(init).status(), Status::kInvalid);
  init.caps = QpCaps{1, 1, 1, 1, l.max_inline_data + 1};
  EXPECT_EQ(rnic_.CreateQp(init).status(), Status::kInvalid);
  init.caps = QpCaps{1, 1, l.max_sge + 1, 1, 0};
  EXPECT_EQ(rnic_.CreateQp(init).status(), Status::kInvalid);
  init.caps = QpCaps{1, 1, 1, 1, 0};
  init.send_cq = RnicCq{0x777};
  EXPECT_EQ(rnic_.CreateQp(init).status(), Status::kBadHandle);
  init.send_cq = a_.scq;
  init.type = static_cast<QpType>(9);
  EXPECT_EQ(rnic_.CreateQp(init).status(), Status::kInvalid);
}

TEST_F(Objects, Gids) {
  Gid g{};
  EXPECT_EQ(rnic_.AddGid(g), Status::kInvalid);  // the zero GID
  EXPECT_EQ(rnic_.AddGid(a_.gid), Status::kBusy);
  g[0] = 0x20;
  EXPECT_EQ(rnic_.RemoveGid(g), Status::kBadHandle);
  EXPECT_EQ(rnic_.AddGid(g), Status::kOk);
  EXPECT_EQ(rnic_.RemoveGid(g), Status::kOk);
  EXPECT_EQ(rnic_.RemoveGid(g), Status::kBadHandle);
}

TEST(SoftRnicLimits, TablesAreBounded) {
  RnicLimits l = DefaultSoftRnicLimits();
  l.max_qp = 2;
  l.max_mr = 3;
  l.max_pd = 1;
  l.max_cq = 1;
  SoftRnic rnic(l);
  auto pd = rnic.AllocPd();
  ASSERT_TRUE(pd.ok());
  EXPECT_EQ(rnic.AllocPd().status(), Status::kNoResource);
  auto cq = rnic.CreateCq(4);
  ASSERT_TRUE(cq.ok());
  EXPECT_EQ(rnic.CreateCq(4).status(), Status::kNoResource);
  QpInit init;
  init.pd = *pd;
  init.send_cq = *cq;
  init.recv_cq = *cq;
  init.caps = QpCaps{1, 1, 1, 1, 0};
  ASSERT_TRUE(rnic.CreateQp(init).ok());
  auto q2 = rnic.CreateQp(init);
  ASSERT_TRUE(q2.ok());
  EXPECT_EQ(rnic.CreateQp(init).status(), Status::kNoResource);
  ASSERT_EQ(rnic.DestroyQp(*q2), Status::kOk);
  auto q3 = rnic.CreateQp(init);
  ASSERT_TRUE(q3.ok());
  EXPECT_NE(q3->qpn, q2->qpn);  // same slot, new tag
  uint8_t buf[64];
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(rnic.RegMr(*pd, buf, 64, 0, 0).ok());
  EXPECT_EQ(rnic.RegMr(*pd, buf, 64, 0, 0).status(), Status::kNoResource);
}

TEST(SoftRnicLimits, DefaultsAndClamps) {
  RnicLimits d = DefaultSoftRnicLimits();
  EXPECT_EQ(d.max_qp, 16384u);
  EXPECT_EQ(d.max_qp_wr, 16384u);
  EXPECT_EQ(d.max_sge, 32u);
  EXPECT_EQ(d.max_cqe, 65536u);
  EXPECT_EQ(d.max_mr, 65536u);
  EXPECT_EQ(d.max_mr_size, uint64_t{1} << 32);
  EXPECT_EQ(d.max_inline_data, 256u);
  EXPECT_EQ(d.active_mtu_bytes, 4096u);
  EXPECT_EQ(d.max_msg_sz, uint32_t{1} << 31);
  RnicLimits big = d;
  big.max_qp = 1u << 20;  // QPNs are 24 bits: index << 8 | tag
  big.max_sge = 100;
  big.max_inline_data = 4096;
  big.active_mtu_bytes = 1000;
  big.max_mr = 16;
  SoftRnic rnic(big);
  EXPECT_EQ(rnic.limits().max_qp, 0xffffu);
  EXPECT_EQ(rnic.limits().max_sge, static_cast<uint32_t>(kMaxSge));
  EXPECT_EQ(rnic.limits().max_inline_data, static_cast<uint32_t>(kMaxInline));
  EXPECT_EQ(rnic.limits().active_mtu_bytes, 4096u);
}

TEST(SoftRnicClock, DefaultClockStampsCompletions) {
  SoftRnic rnic;
  Gid g{1};
  ASSERT_EQ(rnic.AddGid(g), Status::kOk);
  auto pd = rnic.AllocPd();
  auto cq = rnic.CreateCq(4);
  ASSERT_TRUE(pd.ok() && cq.ok());
  QpInit init;
  init.pd = *pd;
  init.send_cq = *cq;
  init.recv_cq = *cq;
  init.caps = QpCaps{4, 4, 1, 1, 0};
  auto qp = rnic.CreateQp(init);
  ASSERT_TRUE(qp.ok());
  RecvWr r;
  r.wr_id = 4;
  QpAttr a;
  a.state = QpState::kInit;
  ASSERT_EQ(
      rnic.ModifyQp(*qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
      Status::kOk);
  Status st;
  ASSERT_EQ(rnic.PostRecv(*qp, std::span<const RecvWr>(&r, 1), &st), 1);
  a.state = QpState::kErr;
  ASSERT_EQ(rnic.ModifyQp(*qp, a, kQpState), Status::kOk);
  Completion c[2];
  ASSERT_EQ(rnic.PollCq(*cq, c), 1);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  EXPECT_GT(c[0].timestamp_ns, 0u);
}

}  // namespace
}  // namespace vrdma::testing
