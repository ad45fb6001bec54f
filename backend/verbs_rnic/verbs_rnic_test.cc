// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// VerbsRnic alone, on the rdma-core device VRDMA_TEST_RNIC names (skipped,
// and saying so, without one): limits, the GID map, errors the device
// decides without leaking objects, and a write and a send through the
// device's own loopback. The engine's tests on VerbsRnic are
// backend/engine/engine_rnic_test.cc.
#include "backend/verbs_rnic/verbs_rnic.h"
#include "backend/verbs_rnic/testing/verbs_loopback.h"

#include <poll.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace vrdma {
namespace {

constexpr uint32_t kAll = testing::kAllAccess;

TEST(VerbsRnicOpen, UnknownDeviceIsAClearError) {
  std::string error;
  VerbsRnic::Options o;
  o.device = "no-such-rnic0";
  EXPECT_EQ(VerbsRnic::Open(o, &error), nullptr);
  EXPECT_NE(error.find("no RDMA device named no-such-rnic0"), std::string::npos)
      << error;
}

TEST(VerbsRnicErrors, ErrnoMapsToStatus) {
  EXPECT_EQ(StatusFromErrno(0), Status::kOk);
  EXPECT_EQ(StatusFromErrno(EINVAL), Status::kInvalid);
  EXPECT_EQ(StatusFromErrno(ENOMEM), Status::kNoResource);
  EXPECT_EQ(StatusFromErrno(EOPNOTSUPP), Status::kUnsupported);
  EXPECT_EQ(StatusFromErrno(EPERM), Status::kAccess);
  EXPECT_EQ(StatusFromErrno(EFAULT), Status::kFault);
  EXPECT_EQ(StatusFromErrno(EBUSY), Status::kBusy);
  EXPECT_EQ(StatusFromErrno(EIO), Status::kIoError);
}

using testing::VerbsRnicTest;

TEST_F(VerbsRnicTest, LimitsComeFromTheDevice) {
  RnicLimits l = rnic_->limits();
  EXPECT_GT(l.max_qp, 0u);
  EXPECT_GT(l.max_qp_wr, 0u);
  EXPECT_GT(l.max_sge, 0u);
  EXPECT_LE(l.max_sge, uint32_t{kMaxSge});
  EXPECT_GT(l.max_cqe, 0u);
  EXPECT_GT(l.max_mr_size, 0u);
  EXPECT_GT(l.max_inline_data, 0u);
  EXPECT_LE(l.max_inline_data, uint32_t{kMaxInline});
  EXPECT_GE(l.active_mtu_bytes, 256u);
  EXPECT_FALSE(l.cross_channel);
  std::printf("limits: max_qp %u max_qp_wr %u max_sge %u max_cqe %u max_mr %u "
              "max_inline %u mtu %u link %.1f Gb/s\n",
              l.max_qp, l.max_qp_wr, l.max_sge, l.max_cqe, l.max_mr,
              l.max_inline_data, l.active_mtu_bytes, l.link_rate_bps / 1e9);
}

TEST_F(VerbsRnicTest, OnlyThePortsGidsAndOnlyRegisteredSources) {
  Gid bogus{};
  bogus[0] = 0xfd;
  bogus[15] = 0x77;
  EXPECT_FALSE(rnic_->HasGid(bogus));
  EXPECT_EQ(rnic_->AddGid(bogus), Status::kInvalid);
  EXPECT_TRUE(rnic_->HasGid(gid_));
  Result<RnicPd> pd = rnic_->AllocPd();
  ASSERT_TRUE(pd.ok());
  AddressVector av;
  av.sgid = gid_;
  av.dgid = gid_;
  // Not registered yet: no AH may send from it.
  EXPECT_EQ(rnic_->CreateAh(*pd, av).status(), Status::kInvalid);
  ASSERT_EQ(rnic_->AddGid(gid_), Status::kOk);
  EXPECT_EQ(rnic_->AddGid(gid_), Status::kBusy);
  Result<RnicAh> ah = rnic_->CreateAh(*pd, av);
  ASSERT_TRUE(ah.ok()) << StatusName(ah.status());
  EXPECT_EQ(rnic_->DestroyAh(*ah), Status::kOk);
  EXPECT_EQ(rnic_->RemoveGid(gid_), Status::kOk);
  EXPECT_EQ(rnic_->RemoveGid(gid_), Status::kBadHandle);
  EXPECT_EQ(rnic_->DeallocPd(*pd), Status::kOk);
  EXPECT_EQ(rnic_->live_objects(), 0u);
}

TEST_F(VerbsRnicTest, RefusalsLeaveNothingBehind) {
  Result<RnicPd> pd = rnic_->AllocPd();
  ASSERT_TRUE(pd.ok());
  const uint32_t base = rnic_->live_objects();
  std::span<uint8_t> buf = Pages(2);
  // The device refuses an iova at another offset in its page than the
  // address (a guest's first_page_offset that disagrees with its iova).
  EXPECT_FALSE(rnic_->RegMr(*pd, buf.data() + 8, 4096, 0x1010, kAll).ok());
  // Access bits beyond the four IB ones are never passed on.
  EXPECT_EQ(rnic_->RegMr(*pd, buf.data(), buf.size(), 0x1000, kAll | 0x20).status(),
            Status::kInvalid);
  // The device refuses REMOTE_WRITE without LOCAL_WRITE (IB spec).
  EXPECT_FALSE(rnic_->RegMr(*pd, buf.data(), buf.size(), 0x1000, kAccessRemoteWrite).ok());
  EXPECT_EQ(rnic_->CreateCq(rnic_->limits().max_cqe + 1).status(), Status::kInvalid);
  Result<RnicCq> cq = rnic_->CreateCq(16);
  ASSERT_TRUE(cq.ok());
  QpInit init;
  init.pd = *pd;
  init.send_cq = init.recv_cq = *cq;
  init.caps = {rnic_->limits().max_qp_wr + 1, 4, 1, 1, 0};
  EXPECT_FALSE(rnic_->CreateQp(init).ok()) << "deeper than max_qp_wr";
  init.caps = {4, 4, 1, 1, 0};
  init.managed = true;
  EXPECT_EQ(rnic_->CreateQp(init).status(), Status::kUnsupported);
  init.managed = false;
  Result<RnicQp> qp = rnic_->CreateQp(init);
  ASSERT_TRUE(qp.ok());
  // RESET -> RTS skips INIT and RTR: the device refuses.
  QpAttr at;
  at.state = QpState::kRts;
  EXPECT_EQ(rnic_->ModifyQp(*qp, at, kQpState | kQpSqPsn), Status::kInvalid);
  // An AV from a GID nobody registered is refused before the device.
  at.state = QpState::kInit;
  ASSERT_EQ(rnic_->ModifyQp(*qp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
            Status::kOk);
  at.state = QpState::kRtr;
  at.av.sgid = gid_;
  at.av.dgid = gid_;
  EXPECT_EQ(rnic_->ModifyQp(*qp, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                                        kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
            Status::kInvalid);
  EXPECT_EQ(rnic_->QueryQp(*qp)->state, QpState::kInit);
  EXPECT_EQ(rnic_->DestroyCq(*cq), Status::kBusy) << "a QP still uses it";
  EXPECT_EQ(rnic_->DestroyQp(*qp), Status::kOk);
  EXPECT_EQ(rnic_->DestroyCq(*cq), Status::kOk);
  EXPECT_EQ(rnic_->live_objects(), base);
  EXPECT_EQ(rnic_->DestroyQp(*qp), Status::kBadHandle);
  EXPECT_EQ(rnic_->DeallocPd(*pd), Status::kOk);
}

// Two RC QPs on the device's own loopback: a WRITE with the peer's rkey at
// the guest-style iova, and a SEND, through PostSend/PostRecv/PollCq.
TEST_F(VerbsRnicTest, LoopbackWriteAndSend) {
  Result<RnicPd> pd = rnic_->AllocPd();
  Result<RnicCq> cq = rnic_->CreateCq(64);
  ASSERT_TRUE(pd.ok() && cq.ok());
  // Page-aligned, like the engine's page views: the kernel wants the
  // address and the iova at the same offset in their pages.
  std::span<uint8_t> a = Pages(4), b = Pages(4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7);
  Result<RnicMr> ma = rnic_->RegMr(*pd, a.data(), a.size(), 0xa0000000, kAll);
  Result<RnicMr> mb = rnic_->RegMr(*pd, b.data(), b.size(), 0xb0000000, kAll);
  ASSERT_TRUE(ma.ok() && mb.ok()) << StatusName(ma.status());
  auto [qa, qb] = ConnectedPair(*pd, *cq);
  ASSERT_NE(qa.id, 0u);
  Result<QpAttr> qa_attr = rnic_->QueryQp(qa);
  ASSERT_TRUE(qa_attr.ok());
  EXPECT_EQ(qa_attr->state, QpState::kRts);
  EXPECT_EQ(qa_attr->dest_qpn, qb.qpn);
  EXPECT_EQ(qa_attr->av.sgid, gid_);

  RecvWr r;
  r.wr_id = 77;
  r.num_sge = 1;
  r.sge[0] = {0xb0000000 + 8192, 4096, mb->lkey};
  Status err = Status::kOk;
  ASSERT_EQ(rnic_->PostRecv(qb, std::span<const RecvWr>(&r, 1), &err), 1);
  SendWr w[2];
  w[0].wr_id = 1;
  w[0].opcode = WrOpcode::kRdmaWrite;
  w[0].send_flags = kSendSignaled;
  w[0].num_sge = 1;
  w[0].sge[0] = {0xa0000000 + 100, 5000, ma->lkey};
  w[0].remote_addr = 0xb0000000 + 10;
  w[0].rkey = mb->rkey;
  w[1].wr_id = 2;
  w[1].opcode = WrOpcode::kSend;
  w[1].send_flags = kSendSignaled;
  w[1].num_sge = 1;
  w[1].sge[0] = {0xa0000000, 3000, ma->lkey};
  // The completion channel: armed, quiet; a completion makes it readable
  // (what wakes the daemon's sleeping data path); drained, quiet again.
  const int fd = rnic_->completion_fd();
  ASSERT_GE(fd, 0);
  rnic_->ArmCompletions();
  pollfd pfd{fd, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 0) << "readable before any completion";
  ASSERT_EQ(rnic_->PostSend(qa, std::span<const SendWr>(w, 2), &err), 2);
  EXPECT_EQ(poll(&pfd, 1, 10'000), 1) << "no wake-up within 10 s";
  rnic_->DrainCompletionFd();
  pfd.revents = 0;
  EXPECT_EQ(poll(&pfd, 1, 0), 0) << "still readable after draining";
  std::vector<Completion> got;
  Completion c[8];
  for (int i = 0; i < 20'000'000 && got.size() < 3; ++i) {
    const int n = rnic_->PollCq(*cq, c);
    got.insert(got.end(), c, c + n);
  }
  ASSERT_EQ(got.size(), 3u);
  for (const Completion& x : got) EXPECT_EQ(x.status, WcStatus::kSuccess) << x.wr_id;
  EXPECT_EQ(std::memcmp(b.data() + 10, a.data() + 100, 5000), 0);
  EXPECT_EQ(std::memcmp(b.data() + 8192, a.data(), 3000), 0);
  for (const Completion& x : got) {
    if (x.wr_id == 77) {
      EXPECT_EQ(x.opcode, WcOpcode::kRecv);
      EXPECT_EQ(x.byte_len, 3000u);
      EXPECT_EQ(x.qpn, qb.qpn);
    }
  }
  AsyncEvent ev;
  while (rnic_->PollAsyncEvent(&ev)) {
  }
  for (RnicQp q : {qa, qb}) EXPECT_EQ(rnic_->DestroyQp(q), Status::kOk);
  EXPECT_EQ(rnic_->DeregMr(*ma), Status::kOk);
  EXPECT_EQ(rnic_->DeregMr(*mb), Status::kOk);
  EXPECT_EQ(rnic_->DestroyCq(*cq), Status::kOk);
  EXPECT_EQ(rnic_->DeallocPd(*pd), Status::kOk);
  EXPECT_EQ(rnic_->live_objects(), 0u);
}

// A type 2 window (docs/virtio-rdma.md §4.7): bound by a BIND_MW WR, a
// WRITE through it lands in the MR, LOCAL_INV frees it and the next WRITE
// through its rkey fails. Skipped where the device has no windows.
TEST_F(VerbsRnicTest, Type2WindowBindWriteAndLocalInvalidate) {
  if (rnic_->limits().max_mw == 0) GTEST_SKIP() << "the device has no memory windows";
  Result<RnicPd> pd = rnic_->AllocPd();
  Result<RnicCq> cq = rnic_->CreateCq(64);
  ASSERT_TRUE(pd.ok() && cq.ok());
  std::span<uint8_t> a = Pages(1), b = Pages(2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 13 + 1);
  Result<RnicMr> ma = rnic_->RegMr(*pd, a.data(), a.size(), 0xa0000000, kAll);
  Result<RnicMr> mb =
      rnic_->RegMr(*pd, b.data(), b.size(), 0xb0000000, kAll | kAccessMwBind);
  ASSERT_TRUE(ma.ok() && mb.ok()) << StatusName(mb.status());
  Result<RnicMw> mw = rnic_->AllocMw(*pd, 2);
  ASSERT_TRUE(mw.ok()) << StatusName(mw.status());
  auto [qa, qb] = ConnectedPair(*pd, *cq);
  ASSERT_NE(qa.id, 0u);

  Status err = Status::kOk;
  auto run = [&](RnicQp qp, const SendWr& w) {
    EXPECT_EQ(rnic_->PostSend(qp, std::span<const SendWr>(&w, 1), &err), 1)
        << StatusName(err);
    Completion c[4];
    for (int i = 0; i < 20'000'000; ++i) {
      if (rnic_->PollCq(*cq, c) > 0) return c[0];
    }
    ADD_FAILURE() << "no completion";
    return Completion{};
  };
  // The window over [4096, 4096 + 1024) of b, on qb (the responder).
  const uint8_t key = static_cast<uint8_t>(mw->rkey + 1);
  SendWr bind;
  bind.wr_id = 1;
  bind.opcode = WrOpcode::kBindMw;
  bind.send_flags = kSendSignaled;
  bind.bind = MwBind{mw->rkey, mb->lkey, 0xb0000000 + 4096, 1024, key,
                     kAccessRemoteWrite | kAccessRemoteRead, mw->id, mb->id};
  Completion c = run(qb, bind);
  ASSERT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kBindMw);
  const uint32_t rkey = (mw->rkey & ~0xffu) | key;

  SendWr w;
  w.wr_id = 2;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sge[0] = {0xa0000000, 512, ma->lkey};
  w.remote_addr = 0xb0000000 + 4096 + 100;
  w.rkey = rkey;
  c = run(qa, w);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b.data() + 4096 + 100, a.data(), 512), 0);
  EXPECT_EQ(rnic_->DeregMr(*mb), Status::kInvalid);  // a window is bound

  SendWr inv;
  inv.wr_id = 3;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = kSendSignaled;
  inv.invalidate_rkey = rkey;
  c = run(qb, inv);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kLocalInv);
  w.wr_id = 4;
  c = run(qa, w);
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);

  AsyncEvent ev;
  while (rnic_->PollAsyncEvent(&ev)) {
  }
  for (RnicQp q : {qa, qb}) EXPECT_EQ(rnic_->DestroyQp(q), Status::kOk);
  EXPECT_EQ(rnic_->DeallocMw(*mw), Status::kOk);
  EXPECT_EQ(rnic_->DeregMr(*ma), Status::kOk);
  EXPECT_EQ(rnic_->DeregMr(*mb), Status::kOk);
  EXPECT_EQ(rnic_->DestroyCq(*cq), Status::kOk);
  EXPECT_EQ(rnic_->DeallocPd(*pd), Status::kOk);
  EXPECT_EQ(rnic_->live_objects(), 0u);
}

}  // namespace
}  // namespace vrdma
