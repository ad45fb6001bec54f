// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// End to end through the engine and SoftRnic: VMs with memfd guest RAM,
// WQEs written into their rings by hand (rdma_user_rxe.h layouts, as librxe
// writes them), doorbells, PollOnce, then the CQEs in the guest CQ rings
// and the bytes in the guests' memory.
#include "backend/engine/testing/soft_rnic_guests.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backend/engine/engine_impl.h"

namespace vrdma::engine {
namespace {

using testing::DrainCq;
using testing::EngineSoftRnicTest;
using testing::Guest;
using testing::GuestRingRef;
using testing::GuestSend;
using testing::kBufPages;

TEST_F(EngineSoftRnicTest, RcSendWriteReadBetweenTwoVms) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  BringUp(a, QpType::kRc, &b);
  BringUp(b, QpType::kRc, &a);

  // SEND: B posts a receive (no doorbell, like librxe), A sends 300 bytes.
  testing::PostRecv(b.rq, 0xb0, {{b.iova + 1000, 512, b.lkey}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 0xa0,
                                    .opcode = IB_UVERBS_WR_SEND_WITH_IMM,
                                    .imm = 0x01020304,
                                    .sges = {{a.iova + 10, 300, a.lkey}}});
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
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
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
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

TEST_F(EngineSoftRnicTest, RemoteKeyAbuseFailsOnTheFabric) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  BringUp(a, QpType::kRc, &b);
  BringUp(b, QpType::kRc, &a);
  const std::vector<uint8_t> before(b.buf(), b.buf() + kBufPages * 4096);
  // A writes past the end of B's MR: the responder refuses.
  testing::PostSend(a.sq,
                    GuestSend{.wr_id = 1,
                              .opcode = IB_UVERBS_WR_RDMA_WRITE,
                              .remote_addr = b.iova + kBufPages * 4096 - 8,
                              .rkey = b.rkey,
                              .sges = {{a.iova, 64, a.lkey}}});
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil(Collect(a.scq, sa, 1)));
  EXPECT_EQ(sa[0].wr_id, 1u);
  EXPECT_EQ(sa[0].status, static_cast<uint32_t>(WcStatus::kRemAccessErr));
  EXPECT_EQ(std::memcmp(before.data(), b.buf(), before.size()), 0);
  // After the error A's QP is in ERR: later WQEs are flushed.
  testing::PostSend(a.sq, GuestSend{.wr_id = 2, .sges = {{a.iova, 8, a.lkey}}});
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
  sa.clear();
  ASSERT_TRUE(RunUntil(Collect(a.scq, sa, 1)));
  EXPECT_EQ(sa[0].wr_id, 2u);
  EXPECT_EQ(sa[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(engine_->QueryQp(a.vm, a.qpn)->attr.state, QpState::kErr);
}

TEST_F(EngineSoftRnicTest, UdSendThroughAnAh) {
  Guest a(0x100000), b(0x40000000);
  AddGuest(a, 1, QpType::kUd);
  AddGuest(b, 2, QpType::kUd);
  BringUp(a, QpType::kUd, nullptr);
  BringUp(b, QpType::kUd, nullptr);
  GuestAh ah;
  ah.dgid = b.gid;
  Result<uint32_t> h = engine_->CreateAh(a.vm, a.pd, ah);
  ASSERT_TRUE(h.ok());
  testing::PostRecv(b.rq, 7, {{b.iova, 40 + 256, b.lkey}});
  testing::PostSend(a.sq, GuestSend{.wr_id = 9,
                                    .ud_qpn = b.qpn,
                                    .ud_qkey = 0x1111,
                                    .ah = *h,
                                    .sges = {{a.iova + 5, 100, a.lkey}}});
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
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
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
  std::vector<ib_uverbs_wc> sa;
  ASSERT_TRUE(RunUntil([&] {
    Collect(a.scq, sa, 2)();
    return !sa.empty() && sa.back().wr_id == 10;
  }));
  EXPECT_EQ(sa.back().status, static_cast<uint32_t>(WcStatus::kLocQpOpErr));
}

// librxe posts receives without a doorbell. A receive posted before the
// peer's send must be found even when the sweep is busy elsewhere: the
// engine pulls the destination's receives before posting the send.
TEST_F(EngineSoftRnicTest, UdReceivePostedWithoutDoorbellIsFoundAtOnce) {
  Guest c(0x80000000), a(0x100000), b(0x40000000);
  AddGuest(c, 3, QpType::kUd);
  // Many idle UD QPs ahead of B on the receive sweep.
  std::vector<GuestRingRef> rings;
  for (int i = 0; i < 12; ++i) {
    CreateQpRequest q;
    q.pd = c.pd;
    q.type = QpType::kUd;
    q.send_cq = c.scq_h;
    q.recv_cq = c.rcq_h;
    q.caps = {4, 4, 1, 1, 0};
    rings.emplace_back(c.env, 3, 8);
    q.sq = rings.back().spec;
    rings.emplace_back(c.env, 3, 6);
    q.rq = rings.back().spec;
    Result<CreateQpResult> r = engine_->CreateQp(c.vm, q);
    ASSERT_TRUE(r.ok());
    Guest tmp(0);
    tmp.vm = c.vm;
    tmp.qpn = r->qpn;
    BringUp(tmp, QpType::kUd, nullptr);
  }
  AddGuest(a, 1, QpType::kUd);
  AddGuest(b, 2, QpType::kUd);
  BringUp(a, QpType::kUd, nullptr);
  BringUp(b, QpType::kUd, nullptr);
  for (int i = 0; i < 3; ++i) engine_->PollOnce();
  Result<uint32_t> ah = engine_->CreateAh(a.vm, a.pd, GuestAh{.dgid = b.gid});
  ASSERT_TRUE(ah.ok());
  int delivered = 0;
  for (uint64_t i = 0; i < 10; ++i) {
    testing::PostRecv(b.rq, i, {{b.iova, 40 + 64, b.lkey}});
    testing::PostSend(a.sq, GuestSend{.wr_id = i,
                                      .ud_qpn = b.qpn,
                                      .ud_qkey = 0x1111,
                                      .ah = *ah,
                                      .sges = {{a.iova, 64, a.lkey}}});
    engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
    engine_->PollOnce();  // one turn: the sweep has not reached B
    engine_->PollOnce();
    std::vector<ib_uverbs_wc> rb = DrainCq(b.rcq);
    DrainCq(a.scq);
    if (rb.size() == 1 && rb[0].status == 0 && rb[0].wr_id == i) ++delivered;
  }
  EXPECT_EQ(delivered, 10);
}

TEST_F(EngineSoftRnicTest, DetachMidTrafficLeavesOthersWorking) {
  Guest a(0x100000), b(0x40000000), c(0x80000000);
  AddGuest(a, 1);
  AddGuest(b, 2);
  AddGuest(c, 3);
  // Pair A -> B and pair C -> B2 (a second QP of B would need more rig;
  // use C <-> A's former peer role instead: C talks to B after A leaves).
  BringUp(a, QpType::kRc, &b);
  BringUp(b, QpType::kRc, &a);
  // A streams writes into B; detach A with WQEs in flight.
  for (uint64_t i = 0; i < 20; ++i) {
    testing::PostSend(a.sq, GuestSend{.wr_id = i,
                                      .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                      .remote_addr = b.iova,
                                      .rkey = b.rkey,
                                      .sges = {{a.iova, 1024, a.lkey}}});
  }
  engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
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
  BringUp(c, QpType::kRc, &b);
  BringUp(b, QpType::kRc, &c);
  testing::PostRecv(b.rq, 0xb1, {{b.iova + 4096, 256, b.lkey}});
  testing::PostSend(c.sq,
                    GuestSend{.wr_id = 0xc1, .sges = {{c.iova, 200, c.lkey}}});
  engine_->Doorbell(c.vm, VIRTIO_RDMA_DB_SQ, c.qpn);
  std::vector<ib_uverbs_wc> sc, rb;
  ASSERT_TRUE(RunUntil(
      [&] { return Collect(c.scq, sc, 1)() && Collect(b.rcq, rb, 1)(); }));
  EXPECT_EQ(sc[0].status, 0u);
  ASSERT_FALSE(rb.empty());
  EXPECT_EQ(rb.back().wr_id, 0xb1u);
  EXPECT_EQ(rb.back().status, 0u);
  EXPECT_EQ(std::memcmp(b.buf() + 4096, c.buf(), 200), 0);
  EXPECT_EQ(engine_->Stats(b.vm)->qps, 1u);
}

// A policy's probes (Justitia's reference flow) go through the daemon's own
// loopback QP pair on the RNIC, built the first time it probes.
class ProbingPolicy : public policy::SchedulerPolicy {
 public:
  std::string_view name() const override { return "probing"; }
  void OnTenantAdded(policy::TenantId, const policy::TenantQos&) override {}
  void OnTenantQosChanged(policy::TenantId, const policy::TenantQos&) override {}
  void OnTenantRemoved(policy::TenantId) override {}
  void OnFlowAdded(policy::Nanos, const policy::FlowInfo&) override {}
  void OnFlowEnded(policy::Nanos, policy::FlowId, policy::FlowEnd) override {}
  void OnArrival(policy::Nanos, const policy::WrInfo&) override {}
  void OnCompleted(policy::Nanos, const policy::WrInfo&, policy::Nanos,
                   bool) override {}
  void OnProbeCompleted(policy::Nanos, policy::DestId dest,
                        policy::Nanos rtt) override {
    rtts.push_back(rtt);
    dests.push_back(dest);
  }
  bool Probe(policy::DestId d) { return mech().SendProbe(d); }
  std::vector<policy::Nanos> rtts;
  std::vector<policy::DestId> dests;
};

TEST_F(EngineSoftRnicTest, ProbesTravelTheDaemonsOwnLoopback) {
  ProbingPolicy probing;
  UsePolicy(probing);
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
  c.gids = {kHostGid};
  EXPECT_EQ(engine_->AttachVm(c, nullptr).status(), Status::kInvalid);
  engine_.reset();
}

}  // namespace
}  // namespace vrdma::engine
