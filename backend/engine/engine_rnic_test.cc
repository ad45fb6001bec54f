// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's integration tests on the twin and on the real thing: every
// test runs over SoftRnic ("Soft"), over the reliability layer in native
// mode on SoftRnic ("ReliableOverSoft", docs/reliability.md §10 step 10:
// the engine sees no difference) and over VerbsRnic ("Verbs") on the
// rdma-core device VRDMA_TEST_RNIC names (e.g. rxe0; tests/vm/run-verbs.sh
// runs them inside a TCG VM with Soft-RoCE). Without that variable the
// Verbs instances skip and say so: a skip is not a pass.
//
// Guests are VMs with memfd guest RAM; WQEs are written into their rings as
// librxe writes them; the data path is turned until the guest CQs show the
// completions. On VerbsRnic each guest's GID is one of the port's IPv4 GIDs
// (the VM script gives eth0 three addresses): traffic between guests is the
// device's own loopback, through its real transport.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/engine/engine_impl.h"
#include "backend/engine/host_peer.h"
#include "backend/engine/testing/soft_rnic_guests.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "policy/pass_through_policy.h"
#ifdef VRDMA_HAVE_VERBS
#include "backend/verbs_rnic/verbs_rnic.h"
#endif

namespace vrdma::engine {
namespace {

using testing::Guest;
using testing::GuestSend;
using testing::kBufPages;

constexpr int kGuestsNeeded = 3;

[[maybe_unused]] bool IsIpv4Mapped(const Gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.data(), kPrefix, sizeof(kPrefix)) == 0;
}

class EngineRnicTest : public testing::EngineGuestsTest,
                       public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "Soft") {
      soft_ = std::make_unique<SoftRnic>();
      StartEngine(*soft_);
      return;
    }
    if (GetParam() == "ReliableOverSoft") {
      soft_ = std::make_unique<SoftRnic>();
      reliable_ = std::make_unique<ReliableRnic>(*soft_);
      StartEngine(*reliable_);
      return;
    }
    const char* dev = std::getenv("VRDMA_TEST_RNIC");
    if (dev == nullptr || *dev == '\0') {
      GTEST_SKIP() << "VRDMA_TEST_RNIC not set: no rdma-core device to run "
                      "VerbsRnic on (this host has none; tests/vm/run-verbs.sh "
                      "runs these inside a TCG VM on rxe0). NOT a pass.";
    }
#ifdef VRDMA_HAVE_VERBS
    std::string error;
    VerbsRnic::Options o;
    o.device = dev;
    verbs_ = VerbsRnic::Open(o, &error);
    ASSERT_NE(verbs_, nullptr) << error;
    for (const Gid& g : verbs_->PortGids()) {
      if (IsIpv4Mapped(g)) gids_.push_back(g);
    }
    ASSERT_GE(gids_.size(), size_t{kGuestsNeeded})
        << dev << " port " << int(verbs_->port()) << " has " << gids_.size()
        << " IPv4 GIDs; these tests need " << kGuestsNeeded
        << " (add addresses to its netdev)";
    real_device_ = true;
    timers_ = testing::kRealNetworkTimers;
    StartEngine(*verbs_);
#else
    GTEST_SKIP() << "built without libibverbs: no VerbsRnic. NOT a pass.";
#endif
  }
  ~EngineRnicTest() override { engine_.reset(); }  // before the RNIC

  Gid GidFor(uint8_t id) const override {
    if (gids_.empty()) return testing::MakeGid(id);
    return gids_[(id - 1) % gids_.size()];
  }

  // Host objects the RNIC holds (leak checks): every kind but GIDs; under
  // the layer, the lower SoftRnic's.
  uint32_t LiveObjects() const {
    if (soft_) {
      SoftRnicCounts c = soft_->ObjectCounts();
      return c.pds + c.mrs + c.cqs + c.srqs + c.qps + c.ahs;
    }
#ifdef VRDMA_HAVE_VERBS
    if (verbs_) return verbs_->live_objects();
#endif
    return 0;
  }

  void Ring(const Guest& g) { engine_->Doorbell(g.vm, VIRTIO_RDMA_DB_SQ, g.qpn); }

  std::unique_ptr<SoftRnic> soft_;
  std::unique_ptr<ReliableRnic> reliable_;  // over soft_, gone before it
#ifdef VRDMA_HAVE_VERBS
  std::unique_ptr<VerbsRnic> verbs_;
#endif
  std::vector<Gid> gids_;
};

TEST_P(EngineRnicTest, RcSendWriteReadBetweenTwoVms) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  Connect(a, b, QpType::kRc);

  // SEND: B posts a receive (no doorbell, like librxe), A sends 300 bytes.
  testing::PostRecv(b.rq, 0xb0, {{b.iova + 1000, 512, b.lkey}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 0xa0,
                                    .opcode = IB_UVERBS_WR_SEND_WITH_IMM,
                                    .imm = 0x01020304,
                                    .sges = {{a.iova + 10, 300, a.lkey}}});
  Ring(a);
  std::vector<ib_uverbs_wc> sa, rb;
  ASSERT_TRUE(RunUntil(
      [&] { return Collect(a.scq, sa, 1)() && Collect(b.rcq, rb, 1)(); }));
  EXPECT_EQ(sa[0].wr_id, 0xa0u);
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(sa[0].qp_num, a.qpn);
  EXPECT_EQ(rb[0].wr_id, 0xb0u);
  EXPECT_EQ(rb[0].status, 0u);
  EXPECT_EQ(rb[0].byte_len, 300u);
  EXPECT_EQ(rb[0].opcode, static_cast<uint32_t>(WcOpcode::kRecv));
  EXPECT_EQ(rb[0].ex.imm_data, 0x01020304u);
  EXPECT_TRUE(rb[0].wc_flags & kWcWithImm);
  EXPECT_EQ(rb[0].qp_num, b.qpn);
  EXPECT_EQ(std::memcmp(b.buf() + 1000, a.buf() + 10, 300), 0);
  EXPECT_EQ(b.rq.consumer(), 1u);

  // RDMA WRITE with B's rkey, then READ back into A.
  testing::PostSend(a.sq, GuestSend{.wr_id = 0xa1,
                                    .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                    .remote_addr = b.iova + 8192,
                                    .rkey = b.rkey,
                                    .sges = {{a.iova + 4096, 2048, a.lkey}}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 0xa2,
                                    .opcode = IB_UVERBS_WR_RDMA_READ,
                                    .remote_addr = b.iova + 100,
                                    .rkey = b.rkey,
                                    .sges = {{a.iova + 12000, 64, a.lkey}}});
  Ring(a);
  sa.clear();
  ASSERT_TRUE(RunUntil(Collect(a.scq, sa, 2)));
  EXPECT_EQ(sa[0].wr_id, 0xa1u);
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(sa[1].wr_id, 0xa2u);
  EXPECT_EQ(sa[1].status, 0u);
  EXPECT_EQ(sa[1].opcode, static_cast<uint32_t>(WcOpcode::kRdmaRead));
  EXPECT_EQ(std::memcmp(b.buf() + 8192, a.buf() + 4096, 2048), 0);
  EXPECT_EQ(std::memcmp(a.buf() + 12000, b.buf() + 100, 64), 0);
  EXPECT_EQ(engine_->Stats(a.vm)->wqes_posted, 3u);
  EXPECT_EQ(engine_->Stats(b.vm)->cqes_written, 1u);
}

// WRITE_WITH_IMM (consumes a receive, no bytes in it), both atomics, an
// inline SEND and a multi-SGE SEND.
TEST_P(EngineRnicTest, RcImmediateAtomicsInlineAndGather) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  Connect(a, b, QpType::kRc);
  uint64_t v = 40;
  std::memcpy(b.buf() + 4096, &v, 8);

  testing::PostRecv(b.rq, 0xb0, {{b.iova, 16, b.lkey}});
  testing::PostRecv(b.rq, 0xb1, {{b.iova + 100, 64, b.lkey}});
  testing::PostRecv(b.rq, 0xb2, {{b.iova + 200, 64, b.lkey}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 1,
                                    .opcode = IB_UVERBS_WR_RDMA_WRITE_WITH_IMM,
                                    .imm = 0x0a0b0c0d,
                                    .remote_addr = b.iova + 8192,
                                    .rkey = b.rkey,
                                    .sges = {{a.iova, 500, a.lkey}}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 2,
                                    .opcode = IB_UVERBS_WR_ATOMIC_CMP_AND_SWP,
                                    .remote_addr = b.iova + 4096,
                                    .rkey = b.rkey,
                                    .compare_add = 40,
                                    .swap = 7,
                                    .sges = {{a.iova + 2048, 8, a.lkey}}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 3,
                                    .opcode = IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD,
                                    .remote_addr = b.iova + 4096,
                                    .rkey = b.rkey,
                                    .compare_add = 5,
                                    .sges = {{a.iova + 2056, 8, a.lkey}}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 4,
                                    .flags = kSendSignaled | kSendInline,
                                    .inline_data = {'h', 'e', 'l', 'l', 'o'}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 5,
                                    .sges = {{a.iova + 1, 10, a.lkey},
                                             {a.iova + 3000, 20, a.lkey}}});
  Ring(a);
  std::vector<ib_uverbs_wc> sa, rb;
  ASSERT_TRUE(RunUntil(
      [&] { return Collect(a.scq, sa, 5)() && Collect(b.rcq, rb, 3)(); }));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sa[i].wr_id, uint64_t(i + 1));
    EXPECT_EQ(sa[i].status, 0u) << "wr " << i + 1;
  }
  EXPECT_EQ(sa[0].opcode, static_cast<uint32_t>(WcOpcode::kRdmaWrite));
  EXPECT_EQ(sa[1].opcode, static_cast<uint32_t>(WcOpcode::kCompSwap));
  EXPECT_EQ(sa[2].opcode, static_cast<uint32_t>(WcOpcode::kFetchAdd));
  EXPECT_EQ(std::memcmp(b.buf() + 8192, a.buf(), 500), 0);
  EXPECT_EQ(rb[0].wr_id, 0xb0u);
  EXPECT_EQ(rb[0].opcode, static_cast<uint32_t>(WcOpcode::kRecvRdmaWithImm));
  EXPECT_EQ(rb[0].ex.imm_data, 0x0a0b0c0du);
  uint64_t old_cas, old_faa, now;
  std::memcpy(&old_cas, a.buf() + 2048, 8);
  std::memcpy(&old_faa, a.buf() + 2056, 8);
  std::memcpy(&now, b.buf() + 4096, 8);
  EXPECT_EQ(old_cas, 40u);
  EXPECT_EQ(old_faa, 7u);
  EXPECT_EQ(now, 12u);
  EXPECT_EQ(rb[1].byte_len, 5u);
  EXPECT_EQ(std::memcmp(b.buf() + 100, "hello", 5), 0);
  EXPECT_EQ(rb[2].byte_len, 30u);
  EXPECT_EQ(std::memcmp(b.buf() + 200, a.buf() + 1, 10), 0);
  EXPECT_EQ(std::memcmp(b.buf() + 210, a.buf() + 3000, 20), 0);
}

TEST_P(EngineRnicTest, UcWriteAndSend) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1, QpType::kUc);
  AddGuest(b, 2, QpType::kUc);
  Connect(a, b, QpType::kUc);
  testing::PostRecv(b.rq, 9, {{b.iova + 512, 256, b.lkey}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 1,
                                    .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                    .remote_addr = b.iova + 8192,
                                    .rkey = b.rkey,
                                    .sges = {{a.iova, 3000, a.lkey}}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 2, .sges = {{a.iova + 64, 200, a.lkey}}});
  Ring(a);
  std::vector<ib_uverbs_wc> sa, rb;
  ASSERT_TRUE(RunUntil(
      [&] { return Collect(a.scq, sa, 2)() && Collect(b.rcq, rb, 1)(); }));
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(sa[1].status, 0u);
  EXPECT_EQ(rb[0].status, 0u);
  EXPECT_EQ(rb[0].byte_len, 200u);
  EXPECT_EQ(std::memcmp(b.buf() + 8192, a.buf(), 3000), 0);
  EXPECT_EQ(std::memcmp(b.buf() + 512, a.buf() + 64, 200), 0);
}

TEST_P(EngineRnicTest, RemoteKeyAbuseFailsOnTheFabric) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  Connect(a, b, QpType::kRc);
  const std::vector<uint8_t> before(b.buf(), b.buf() + kBufPages * 4096);
  // A writes past the end of B's MR: the responder refuses.
  testing::PostSend(a.sq,
                    GuestSend{.wr_id = 1,
                              .opcode = IB_UVERBS_WR_RDMA_WRITE,
                              .remote_addr = b.iova + kBufPages * 4096 - 8,
                              .rkey = b.rkey,
                              .sges = {{a.iova, 64, a.lkey}}});
  Ring(a);
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a.scq, sa, 1)));
  EXPECT_EQ(sa[0].wr_id, 1u);
  EXPECT_EQ(sa[0].status, static_cast<uint32_t>(WcStatus::kRemAccessErr));
  EXPECT_EQ(std::memcmp(before.data(), b.buf(), before.size()), 0);
  // After the error A's QP is in ERR: later WQEs are flushed.
  testing::PostSend(a.sq, GuestSend{.wr_id = 2, .sges = {{a.iova, 8, a.lkey}}});
  Ring(a);
  sa.clear();
  ASSERT_TRUE(RunUntil(Collect(a.scq, sa, 1)));
  EXPECT_EQ(sa[0].wr_id, 2u);
  EXPECT_EQ(sa[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(engine_->QueryQp(a.vm, a.qpn)->attr.state, QpState::kErr);
}

// A READ into a region the local MR does not allow the RNIC to write
// (an rkey without REMOTE_READ on the responder side).
TEST_P(EngineRnicTest, RemoteReadWithoutTheRightFails) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  Connect(a, b, QpType::kRc);
  // B registers a write-only MR; A reads through it.
  const uint64_t gpa = b.env.AllocPages(1);
  RegMrRequest mr;
  mr.pd = b.pd;
  mr.access = kAccessLocalWrite | kAccessRemoteWrite;
  mr.iova = b.iova + (1u << 20);
  mr.length = 4096;
  mr.pages = testing::GuestEnv::Pages(gpa, 1);
  Result<RegMrResult> m = engine_->RegMr(b.vm, mr);
  ASSERT_TRUE(m.ok());
  testing::PostSend(a.sq, GuestSend{.wr_id = 1,
                                    .opcode = IB_UVERBS_WR_RDMA_READ,
                                    .remote_addr = mr.iova,
                                    .rkey = m->rkey,
                                    .sges = {{a.iova, 64, a.lkey}}});
  Ring(a);
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a.scq, sa, 1)));
  EXPECT_EQ(sa[0].status, static_cast<uint32_t>(WcStatus::kRemAccessErr));
}

TEST_P(EngineRnicTest, UdSendThroughAnAh) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1, QpType::kUd);
  AddGuest(b, 2, QpType::kUd);
  BringUp(a, QpType::kUd, nullptr);
  BringUp(b, QpType::kUd, nullptr);
  GuestAh ah;
  ah.dgid = b.gid;
  Result<uint32_t> h = engine_->CreateAh(a.vm, a.pd, ah);
  ASSERT_TRUE(h.ok()) << StatusName(h.status());
  testing::PostRecv(b.rq, 7, {{b.iova, 40 + 256, b.lkey}});
  // Posted receives reach the RNIC before the send (the engine pulls the
  // destination's RQ); a real device needs a turn to see them too.
  for (int i = 0; i < 3; ++i) engine_->PollOnce();
  testing::PostSend(a.sq, GuestSend{.wr_id = 9,
                                    .ud_qpn = b.qpn,
                                    .ud_qkey = 0x1111,
                                    .ah = *h,
                                    .sges = {{a.iova + 5, 100, a.lkey}}});
  Ring(a);
  std::vector<ib_uverbs_wc> rb, sa0;
  ASSERT_TRUE(RunUntil(Collect(a.scq, sa0, 1)));
  EXPECT_EQ(sa0[0].status, 0u);
  ASSERT_TRUE(RunUntil(Collect(b.rcq, rb, 1)));
  EXPECT_EQ(rb[0].status, 0u);
  EXPECT_EQ(rb[0].src_qp, a.qpn);
  EXPECT_EQ(rb[0].byte_len, 140u);  // GRH + payload
  EXPECT_EQ(std::memcmp(b.buf() + 40, a.buf() + 5, 100), 0);
  // A UD WQE naming an AH handle of another VM (or none) fails locally.
  Result<uint32_t> bh = engine_->CreateAh(b.vm, b.pd, GuestAh{.dgid = a.gid});
  ASSERT_TRUE(bh.ok());
  testing::PostSend(a.sq, GuestSend{.wr_id = 10,
                                    .ud_qpn = b.qpn,
                                    .ud_qkey = 0x1111,
                                    .ah = *bh + (1u << 16),
                                    .sges = {{a.iova, 8, a.lkey}}});
  Ring(a);
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil([&] {
    Collect(a.scq, sa, 2)();
    return !sa.empty() && sa.back().wr_id == 10;
  }));
  EXPECT_EQ(sa.back().status, static_cast<uint32_t>(WcStatus::kLocQpOpErr));
}

// Two QPs of B receive through one SRQ.
TEST_P(EngineRnicTest, SharedReceiveQueueFeedsTwoQps) {
  Guest a(0x100000), b(0x40000000), c(0x80000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  AddGuest(c, 3);
  testing::GuestRingRef srq_ring(b.env, 4, 7);  // 15 WQEs, 128 B each
  Result<CreateSrqResult> srq =
      engine_->CreateSrq(b.vm, CreateSrqRequest{b.pd, 15, 2, 0, srq_ring.spec});
  ASSERT_TRUE(srq.ok()) << StatusName(srq.status());
  std::vector<std::unique_ptr<testing::GuestRingRef>> sqs;
  auto srq_qp = [&](const Guest& peer) {
    CreateQpRequest q;
    q.pd = b.pd;
    q.type = QpType::kRc;
    q.send_cq = b.scq_h;
    q.recv_cq = b.rcq_h;
    q.srq = srq->handle;
    q.caps = {8, 0, 2, 0, 0};
    sqs.push_back(std::make_unique<testing::GuestRingRef>(b.env, 4, 9));
    q.sq = sqs.back()->spec;
    Result<CreateQpResult> r = engine_->CreateQp(b.vm, q);
    EXPECT_TRUE(r.ok()) << StatusName(r.status());
    const uint32_t qpn = r.ok() ? r->qpn : 0;
    testing::BringUpQp(*engine_, b.vm, qpn, QpType::kRc, testing::kAllAccess,
                       peer.gid, peer.qpn, timers_);
    return qpn;
  };
  const uint32_t ba = srq_qp(a), bc = srq_qp(c);
  // A and C connect to B's SRQ QPs.
  testing::BringUpQp(*engine_, a.vm, a.qpn, QpType::kRc, testing::kAllAccess,
                     b.gid, ba, timers_);
  testing::BringUpQp(*engine_, c.vm, c.qpn, QpType::kRc, testing::kAllAccess,
                     b.gid, bc, timers_);
  for (uint64_t i = 0; i < 4; ++i) {
    testing::PostRecv(srq_ring, 0x50 + i, {{b.iova + 1024 * i, 1024, b.lkey}});
  }
  engine_->Doorbell(b.vm, VIRTIO_RDMA_DB_SRQ, srq->handle);
  testing::PostSend(a.sq, GuestSend{.wr_id = 1, .sges = {{a.iova, 100, a.lkey}}});
  testing::PostSend(c.sq, GuestSend{.wr_id = 2, .sges = {{c.iova, 200, c.lkey}}});
  Ring(a);
  Ring(c);
  std::vector<ib_uverbs_wc> sa, sc, rb;
  ASSERT_TRUE(RunUntil([&] {
    return Collect(a.scq, sa, 1)() && Collect(c.scq, sc, 1)() &&
           Collect(b.rcq, rb, 2)();
  }));
  EXPECT_EQ(sa[0].status, 0u);
  EXPECT_EQ(sc[0].status, 0u);
  uint32_t lens = 0;
  for (const ib_uverbs_wc& wc : rb) {
    EXPECT_EQ(wc.status, 0u);
    EXPECT_TRUE(wc.qp_num == ba || wc.qp_num == bc);
    lens += wc.byte_len;
  }
  EXPECT_EQ(lens, 300u);
}

TEST_P(EngineRnicTest, DetachMidTrafficLeavesOthersWorking) {
  Guest a(0x100000), b(0x40000000), c(0x80000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  AddGuest(c, 3);
  Connect(a, b, QpType::kRc);
  // A streams writes into B; detach A with WQEs in flight.
  for (uint64_t i = 0; i < 20; ++i) {
    testing::PostSend(a.sq, GuestSend{.wr_id = i,
                                      .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                      .remote_addr = b.iova,
                                      .rkey = b.rkey,
                                      .sges = {{a.iova, 1024, a.lkey}}});
  }
  Ring(a);
  engine_->PollOnce();
  engine_->DetachVm(a.vm);
  EXPECT_EQ(engine_->Stats(a.vm).status(), Status::kBadHandle);
  for (int i = 0; i < 1000; ++i)
    engine_->PollOnce();  // nothing of A is touched
  // B's QP lost its peer: reset it and connect it to C; traffic flows.
  ModifyQpRequest m;
  m.qpn = b.qpn;
  m.mask = VIRTIO_RDMA_QP_STATE;
  m.state = QpState::kReset;
  ASSERT_EQ(engine_->ModifyQp(b.vm, m), Status::kOk);
  Connect(c, b, QpType::kRc);
  testing::PostRecv(b.rq, 0xb1, {{b.iova + 4096, 256, b.lkey}});
  testing::PostSend(c.sq,
                    GuestSend{.wr_id = 0xc1, .sges = {{c.iova, 200, c.lkey}}});
  Ring(c);
  std::vector<ib_uverbs_wc> sc, rb;
  ASSERT_TRUE(RunUntil([&] {
    Collect(c.scq, sc, 1)();
    Collect(b.rcq, rb, 1)();
    return !sc.empty() && !rb.empty() && rb.back().wr_id == 0xb1u;
  }));
  EXPECT_EQ(sc[0].status, 0u);
  EXPECT_EQ(rb.back().status, 0u);
  EXPECT_EQ(std::memcmp(b.buf() + 4096, c.buf(), 200), 0);
  EXPECT_EQ(engine_->Stats(b.vm)->qps, 1u);
}

// Teardown: whatever the VMs held, the RNIC holds nothing once they are
// detached; a GID is free again for the next VM.
TEST_P(EngineRnicTest, DetachReleasesEveryHostObject) {
  const uint32_t before = LiveObjects();
  {
    Guest a(0x100000), b(0x40000000);
    AddGuest(a, 1);
    AddGuest(b, 2, QpType::kUd);
    BringUp(a, QpType::kRc, &b);
    ASSERT_TRUE(engine_->CreateAh(b.vm, b.pd, GuestAh{.dgid = a.gid}).ok());
    EXPECT_GT(LiveObjects(), before);
    engine_->DetachVm(a.vm);
    engine_->DetachVm(b.vm);
    EXPECT_EQ(LiveObjects(), before);
  }
  Guest again(0x100000);
  AddGuest(again, 1);  // the same GID attaches again
  EXPECT_EQ(engine_->Stats(again.vm)->qps, 1u);
}

// A policy's probes (Justitia's reference flow) go through the daemon's own
// loopback QP pair on the RNIC. On SoftRnic it is built the first time the
// policy probes, from ::ffff:127.0.0.1. On VerbsRnic it is built with the
// engine (its slow calls never run on the data path), from the port GID
// the operator gave (EngineOptions::probe_gid; the VM script gives eth0 a
// fourth address for it); without one there are no probes.
class ProbingPolicy : public policy::PassThroughPolicy {
 public:
  std::string_view name() const override { return "probing"; }
  void OnProbeCompleted(policy::Nanos, policy::DestId dest,
                        policy::Nanos rtt) override {
    rtts.push_back(rtt);
    dests.push_back(dest);
  }
  bool Probe(policy::DestId d) { return mech().SendProbe(d); }
  std::vector<policy::Nanos> rtts;
  std::vector<policy::DestId> dests;
};

TEST_P(EngineRnicTest, ProbesTravelTheDaemonsOwnQpPair) {
  const uint32_t before = LiveObjects();
  ProbingPolicy probing;
  EngineOptions options;
  Gid host = kHostGid;
  if (real_device_) {
    ProbingPolicy without;
    UsePolicy(without);
    EXPECT_FALSE(without.Probe(0)) << "no probe GID: no probes on a physical RNIC";
    ASSERT_GE(gids_.size(), size_t{kGuestsNeeded} + 1) << "no port GID left for the probes";
    host = options.probe_gid = gids_[kGuestsNeeded];
  }
  UsePolicy(probing, options);
  if (real_device_) {
    EXPECT_EQ(LiveObjects(), before + 5) << "PD, CQ, MR and two QPs, built with the engine";
  }
  Guest a(0x100000);
  AddGuest(a, 1);
  EXPECT_FALSE(probing.Probe(7)) << "no other host";
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(probing.Probe(0));
    EXPECT_FALSE(probing.Probe(0)) << "one outstanding";
    ASSERT_TRUE(RunUntil([&] { return probing.rtts.size() == size_t(i) + 1; }));
  }
  EXPECT_EQ(probing.dests, (std::vector<policy::DestId>{0, 0, 0}));
  for (policy::Nanos rtt : probing.rtts) EXPECT_GT(rtt, 0u);
  // The daemon's GID is its own: no VM may take it.
  VmConfig c;
  c.name = "thief";
  c.gids = {host};
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(), Status::kInvalid);
  engine_.reset();
  EXPECT_EQ(LiveObjects(), before) << "the probe objects are gone with the engine";
}

INSTANTIATE_TEST_SUITE_P(Rnics, EngineRnicTest,
                         ::testing::Values(std::string("Soft"), std::string("ReliableOverSoft"),
                                           std::string("Verbs")),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param;
                         });

}  // namespace
}  // namespace vrdma::engine
