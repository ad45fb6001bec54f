// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The GSI QP (gsi.h, docs/virtio-rdma.md §4.6): QP1 datagrams between VMs
// of one engine, carried in software (the fake RNIC never sees a QP), and
// the rules a hostile guest meets.
#include <cstring>

#include "backend/engine/testing/engine_fixture.h"
#include "backend/rnic/roce_grh.h"

namespace vrdma::engine::testing {
namespace {

constexpr uint32_t kQkey = VIRTIO_RDMA_GSI_QKEY;
constexpr uint32_t kMad = 256;

constexpr uint32_t St(WcStatus s) { return static_cast<uint32_t>(s); }

Gid V4(uint8_t last) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, last};
}

// A VM with a PD, CQs and its QP1 in RTS, the way Linux's MAD layer makes
// them, plus a page of guest RAM for MADs.
struct GsiVm {
  explicit GsiVm(EngineTest* t) : t(t) {}
  EngineTest* t;
  GuestEnv env;
  RecordingSink sink;
  VmId vm = 0;
  uint32_t pd = 0, scq_h = 0, rcq_h = 0;
  GuestRingRef scq, rcq, sq, rq;
  uint64_t buf = 0;  // guest-physical, 4 pages
};

class GsiTest : public EngineTest {
 protected:
  // Exposes the fixture's helpers to GsiVm set-up.
  void Make(GsiVm& g, uint8_t ip, bool rts = true) {
    g.vm = Attach(g.env, {V4(ip)}, &g.sink);
    g.pd = *engine_->CreatePd(g.vm);
    g.scq_h = engine_->CreateCq(g.vm, Cq(g.scq, g.env))->handle;
    g.rcq_h = engine_->CreateCq(g.vm, Cq(g.rcq, g.env))->handle;
    g.buf = g.env.AllocPages(4);
    Result<CreateQpResult> qp = engine_->CreateQp(g.vm, GsiReq(g));
    ASSERT_TRUE(qp.ok()) << StatusName(qp.status());
    ASSERT_EQ(qp->qpn, 1u);
    if (rts) ToRts(g);
  }
  CreateQpRequest GsiReq(GsiVm& g) {
    CreateQpRequest q;
    q.pd = g.pd;
    q.type = QpType::kGsi;
    q.send_cq = g.scq_h;
    q.recv_cq = g.rcq_h;
    q.caps = {64, 8, 2, 2, 0};
    g.sq = GuestRingRef(g.env, 7, 8);
    g.rq = GuestRingRef(g.env, 4, 7);
    q.sq = g.sq.spec;
    q.rq = g.rq.spec;
    return q;
  }
  void ToRts(GsiVm& g) {
    ModifyQpRequest m;
    m.qpn = 1;
    m.state = QpState::kInit;
    m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX | VIRTIO_RDMA_QP_QKEY;
    m.qkey = kQkey;
    ASSERT_EQ(engine_->ModifyQp(g.vm, m), Status::kOk);
    m = {};
    m.qpn = 1;
    m.state = QpState::kRtr;
    m.mask = VIRTIO_RDMA_QP_STATE;
    ASSERT_EQ(engine_->ModifyQp(g.vm, m), Status::kOk);
    m.state = QpState::kRts;
    m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN;
    ASSERT_EQ(engine_->ModifyQp(g.vm, m), Status::kOk);
  }
  uint32_t AhTo(GsiVm& g, const Gid& dgid) {
    GuestAh ah;
    ah.dgid = dgid;
    ah.sgid_index = 0;
    Result<uint32_t> h = engine_->CreateAh(g.vm, g.pd, ah);
    EXPECT_TRUE(h.ok());
    return *h;
  }
  // A MAD of `len` bytes at g.buf, sent to dest's QP1 (or `qpn`).
  void SendMad(GsiVm& g, uint32_t ah, uint64_t wr_id, uint32_t len = kMad,
               uint32_t lkey = VIRTIO_RDMA_LOCAL_DMA_LKEY, uint32_t qpn = 1,
               uint64_t addr = 0) {
    for (uint32_t i = 0; i < len; ++i) g.env.host(g.buf)[i] = static_cast<uint8_t>(i * 7 + wr_id);
    GuestSend s;
    s.wr_id = wr_id;
    s.ud_qpn = qpn;
    s.ud_qkey = kQkey;
    s.ah = ah;
    s.sges = {{addr != 0 ? addr : g.buf, len, lkey}};
    PostSend(g.sq, s);
    engine_->Doorbell(g.vm, VIRTIO_RDMA_DB_SQ, 1);
  }
  void PostMadRecv(GsiVm& g, uint64_t wr_id, uint32_t len = kGrhBytes + kMad,
                   uint32_t lkey = VIRTIO_RDMA_LOCAL_DMA_LKEY) {
    PostRecv(g.rq, wr_id, {{g.buf + 2 * 4096, len, lkey}});
  }
  VmStats StatsOf(const GsiVm& g) { return *engine_->Stats(g.vm); }
  QpState StateOf(const GsiVm& g) { return engine_->QueryQp(g.vm, 1)->attr.state; }
};

TEST_F(GsiTest, CarriesAMadToTheVmOwningTheGidWithTheRoceHeader) {
  GsiVm a(this), b(this);
  Make(a, 1);
  Make(b, 2);
  EXPECT_TRUE(rnic_.qps.empty()) << "QP1 is the engine's, never the RNIC's";
  PostMadRecv(b, 77);
  SendMad(a, AhTo(a, V4(2)), 5);
  Poll();

  auto sc = DrainCq(a.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, St(WcStatus::kSuccess));
  EXPECT_EQ(sc[0].wr_id, 5u);
  EXPECT_EQ(sc[0].qp_num, 1u);
  auto rc = DrainCq(b.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, St(WcStatus::kSuccess));
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].opcode, static_cast<uint32_t>(WcOpcode::kRecv));
  EXPECT_EQ(rc[0].byte_len, kGrhBytes + kMad);
  EXPECT_EQ(rc[0].qp_num, 1u);
  EXPECT_EQ(rc[0].src_qp, 1u);
  EXPECT_EQ(rc[0].wc_flags, uint32_t{kWcGrh});
  const uint8_t* got = b.env.host(b.buf + 2 * 4096);
  EXPECT_EQ(got[20], 0x45) << "IPv4 header at 20: both GIDs are IPv4-mapped";
  EXPECT_EQ(got[20 + 15], 1) << "source 10.77.0.1";
  EXPECT_EQ(got[20 + 19], 2) << "destination 10.77.0.2";
  EXPECT_EQ(0, std::memcmp(got + kGrhBytes, a.env.host(a.buf), kMad));
  EXPECT_EQ(b.rq.consumer(), 1u) << "the buffer is the guest's again";
  const VmStats s = StatsOf(a);
  EXPECT_EQ(s.gsi_sent, 1u);
  EXPECT_EQ(s.gsi_delivered, 1u);
  EXPECT_EQ(s.gsi_dropped, 0u);
}

TEST_F(GsiTest, DropsWhatNoVmHereCanTakeAndTheSendStillSucceeds) {
  GsiVm a(this), b(this), c(this);
  Make(a, 1);
  Make(b, 2);           // no receive posted
  Make(c, 3, false);    // QP1 still in RESET
  PostMadRecv(c, 1);
  SendMad(a, AhTo(a, V4(9)), 1);  // no VM has 10.77.0.9
  SendMad(a, AhTo(a, V4(2)), 2);
  SendMad(a, AhTo(a, V4(3)), 3);
  Poll();
  auto sc = DrainCq(a.scq);
  ASSERT_EQ(sc.size(), 3u);
  for (auto& wc : sc) EXPECT_EQ(wc.status, St(WcStatus::kSuccess));
  EXPECT_TRUE(DrainCq(b.rcq).empty());
  EXPECT_TRUE(DrainCq(c.rcq).empty());
  EXPECT_EQ(StatsOf(a).gsi_dropped, 3u);
  EXPECT_EQ(StatsOf(a).gsi_delivered, 0u);
  EXPECT_EQ(c.rq.consumer(), 0u) << "a QP1 in RESET takes nothing";
}

// Each hostile send fails with its own status, the sender's QP1 goes to
// ERR, and no byte reaches the other VM.
TEST_F(GsiTest, HostileSendsGetTheirRulesErrorAndReachNobody) {
  struct Case {
    const char* what;
    uint32_t len, lkey, qpn;
    bool outside_ram;
    uint32_t want;
  };
  const Case cases[] = {
      {"an MR's lkey instead of the local DMA lkey", kMad, 0x1234, 1, false, St(WcStatus::kLocProtErr)},
      {"an address outside guest RAM", kMad, 0, 1, true, St(WcStatus::kLocProtErr)},
      {"more than one MAD", kMad + 1, 0, 1, false, St(WcStatus::kLocLenErr)},
      {"a destination other than QP1", kMad, 0, 2, false, St(WcStatus::kLocQpOpErr)},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    GsiVm a(this), b(this);
    Make(a, 1);
    Make(b, 2);
    PostMadRecv(b, 1);
    const uint32_t ah = AhTo(a, V4(2));
    SendMad(a, ah, 9, k.len, k.lkey, k.qpn, k.outside_ram ? a.env.end_gpa() + 4096 : 0);
    SendMad(a, ah, 10);  // behind it: flushed
    Poll();
    auto sc = DrainCq(a.scq);
    ASSERT_EQ(sc.size(), 2u);
    EXPECT_EQ(sc[0].status, k.want);
    EXPECT_EQ(sc[0].wr_id, 9u);
    EXPECT_EQ(sc[1].status, St(WcStatus::kWrFlushErr));
    EXPECT_EQ(StateOf(a), QpState::kErr);
    EXPECT_TRUE(DrainCq(b.rcq).empty());
    EXPECT_EQ(StatsOf(a).gsi_sent, 0u);
    EXPECT_EQ(StatsOf(a).wqes_rejected, 1u);
    engine_->DetachVm(a.vm);
    engine_->DetachVm(b.vm);
  }
}

TEST_F(GsiTest, AReceiveTooSmallForHeaderAndMadIsTheReceiversLengthError) {
  GsiVm a(this), b(this);
  Make(a, 1);
  Make(b, 2);
  PostMadRecv(b, 4, kMad);  // no room for the 40-byte header
  SendMad(a, AhTo(a, V4(2)), 1);
  Poll();
  auto rc = DrainCq(b.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, St(WcStatus::kLocLenErr));
  EXPECT_EQ(StateOf(b), QpState::kErr);
  EXPECT_EQ(DrainCq(a.scq).at(0).status, St(WcStatus::kSuccess)) << "UD: the sender never knows";
  EXPECT_EQ(StatsOf(a).gsi_dropped, 1u);
}

// A VM that posts many MADs gets kTurnBudget of them carried per turn.
TEST_F(GsiTest, AVmsDatagramsPerTurnAreBounded) {
  GsiVm a(this), b(this);
  Make(a, 1);
  Make(b, 2);
  const uint32_t ah = AhTo(a, V4(2));
  for (uint64_t i = 0; i < 40; ++i) SendMad(a, ah, i);
  engine_->PollOnce();
  EXPECT_EQ(a.sq.consumer(), Gsi::kTurnBudget);
  Poll(3);
  EXPECT_EQ(a.sq.consumer(), 40u);
  EXPECT_EQ(StatsOf(a).gsi_sent, 40u);
}

// Beyond the burst, a VM's datagrams go at Gsi::kRatePerSec, and the
// engine says when to look again instead of spinning.
class GsiRateTest : public GsiTest {
 protected:
  GsiRateTest() { options_.clock = [this] { return now_; }; }
  policy::Nanos now_ = 1'000'000;
};

TEST_F(GsiRateTest, AVmsDatagramsGoAtItsRateAfterTheBurst) {
  GsiVm a(this), b(this);
  Make(a, 1);
  Make(b, 2);
  const uint32_t ah = AhTo(a, V4(2));
  for (uint64_t i = 0; i < 100; ++i) SendMad(a, ah, i);
  Poll(20);
  EXPECT_EQ(a.sq.consumer(), static_cast<uint32_t>(Gsi::kBurst));
  const policy::Nanos wait = engine_->NextDeadline() - now_;
  EXPECT_GT(wait, 0);
  EXPECT_LE(wait, static_cast<policy::Nanos>(1e9 / Gsi::kRatePerSec) + 1);
  now_ += 1'000'000;  // 1 ms: kRatePerSec / 1000 more
  Poll(20);
  EXPECT_EQ(a.sq.consumer(),
            static_cast<uint32_t>(Gsi::kBurst + Gsi::kRatePerSec / 1000));
  EXPECT_EQ(StatsOf(a).gsi_sent, a.sq.consumer());
}

TEST_F(GsiTest, OnePerVmHoldsItsCqsAndLeavesWithTheVm) {
  GsiVm a(this);
  Make(a, 1);
  EXPECT_EQ(engine_->CreateQp(a.vm, GsiReq(a)).status(), Status::kNoResource);
  EXPECT_EQ(engine_->DestroyCq(a.vm, a.scq_h), Status::kBusy);
  EXPECT_EQ(engine_->DestroyPd(a.vm, a.pd), Status::kBusy);
  const uint64_t pinned = StatsOf(a).pinned_bytes;
  EXPECT_EQ(engine_->DestroyQp(a.vm, 1), Status::kOk);
  EXPECT_EQ(engine_->DestroyQp(a.vm, 1), Status::kBadHandle);
  EXPECT_LT(StatsOf(a).pinned_bytes, pinned) << "its ring pages given back";
  EXPECT_EQ(engine_->DestroyCq(a.vm, a.scq_h), Status::kOk);
  // A VM that leaves with QP1 live (the fixture's teardown checks the rest).
  GsiVm b(this);
  Make(b, 2);
  engine_->DetachVm(b.vm);
  EXPECT_FALSE(engine_->Stats(b.vm).ok());
}

TEST_F(GsiTest, QpOneIsOneOfTheVmsMaxQp) {
  GsiVm a(this);
  Quotas q;
  q.max_qp = 1;
  a.vm = Attach(a.env, {V4(1)}, nullptr, q);
  a.pd = *engine_->CreatePd(a.vm);
  a.scq_h = engine_->CreateCq(a.vm, Cq(a.scq, a.env))->handle;
  a.rcq_h = engine_->CreateCq(a.vm, Cq(a.rcq, a.env))->handle;
  ASSERT_TRUE(engine_->CreateQp(a.vm, GsiReq(a)).ok());
  CreateQpRequest ud = GsiReq(a);
  ud.type = QpType::kUd;
  EXPECT_EQ(engine_->CreateQp(a.vm, ud).status(), Status::kNoResource);
  ASSERT_EQ(engine_->DestroyQp(a.vm, 1), Status::kOk);
  EXPECT_TRUE(engine_->CreateQp(a.vm, ud).ok());
  EXPECT_EQ(engine_->CreateQp(a.vm, GsiReq(a)).status(), Status::kNoResource);
}

TEST_F(GsiTest, ModifyTakesUdsRulesWithoutAPort) {
  GsiVm a(this);
  Make(a, 1, false);
  ModifyQpRequest m;
  m.qpn = 1;
  m.state = QpState::kInit;
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX | VIRTIO_RDMA_QP_QKEY |
           VIRTIO_RDMA_QP_PORT;
  m.port_num = 1;
  EXPECT_EQ(engine_->ModifyQp(a.vm, m), Status::kInvalid);
  m.state = QpState::kRts;
  m.mask = VIRTIO_RDMA_QP_STATE;
  EXPECT_EQ(engine_->ModifyQp(a.vm, m), Status::kBadState);
  ToRts(a);
  Result<QueryQpResult> q = engine_->QueryQp(a.vm, 1);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->attr.state, QpState::kRts);
  EXPECT_EQ(q->attr.qkey, kQkey);
  EXPECT_EQ(q->attr.qpn, 1u);
}

}  // namespace
}  // namespace vrdma::engine::testing
