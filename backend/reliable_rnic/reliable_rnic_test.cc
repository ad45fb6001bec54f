// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic in native mode over SoftRnic: every call reaches the lower
// RNIC with the lower's ids, the layer's tables follow the lower's objects,
// the limits are the lower's less the layer's reservations, and a virtual
// CQ returns its synthesized completions before the lower CQ's.
#include "backend/reliable_rnic/reliable_rnic.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "backend/reliable_rnic/ack_channel.h"
#include "backend/reliable_rnic/signal_every.h"
#include "backend/rnic/testing/fake_rnic.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite |
                          kAccessRemoteRead | kAccessRemoteAtomic;
const Gid kGidA{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const Gid kGidB{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

uint32_t LowerObjects(const SoftRnic& s) {
  const SoftRnicCounts c = s.ObjectCounts();
  return c.pds + c.mrs + c.cqs + c.srqs + c.qps + c.ahs + c.mws;
}

class ReliableRnicTest : public ::testing::Test {
 protected:
  explicit ReliableRnicTest(ReliableRnicOptions o = {}) : layer_(soft_, o) {}

  RnicQp MakeQp(RnicPd pd, RnicCq scq, RnicCq rcq, QpType type = QpType::kRc) {
    QpInit init;
    init.type = type;
    init.pd = pd;
    init.send_cq = scq;
    init.recv_cq = rcq;
    init.caps = QpCaps{16, 16, 4, 4, 64, type};
    Result<RnicQp> qp = layer_.CreateQp(init);
    EXPECT_TRUE(qp.ok()) << StatusName(qp.status());
    return qp.ok() ? *qp : RnicQp{};
  }

  // RESET -> RTS towards dest_qpn, through the layer.
  void BringUp(RnicQp qp, const Gid& self, const Gid& peer, uint32_t dest_qpn) {
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = kAll;
    ASSERT_EQ(layer_.ModifyQp(
                  qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
              Status::kOk);
    a.state = QpState::kRtr;
    a.av.sgid = self;
    a.av.dgid = peer;
    a.path_mtu_bytes = 4096;
    a.dest_qpn = dest_qpn;
    a.max_dest_rd_atomic = 4;
    ASSERT_EQ(
        layer_.ModifyQp(qp, a,
                        kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                            kQpMaxDestRdAtomic | kQpMinRnrTimer),
        Status::kOk);
    a.state = QpState::kRts;
    a.max_rd_atomic = 4;
    ASSERT_EQ(layer_.ModifyQp(qp, a,
                              kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                  kQpRnrRetry | kQpMaxQpRdAtomic),
              Status::kOk);
  }

  // Polls cq through the layer until n completions came (bounded).
  std::vector<Completion> PollN(RnicCq cq, size_t n) {
    std::vector<Completion> got;
    for (int turn = 0; turn < 10000 && got.size() < n; ++turn) {
      layer_.Progress();
      std::array<Completion, 4> out;
      const int k = layer_.PollCq(cq, out);
      for (int i = 0; i < k; ++i) got.push_back(out[i]);
    }
    return got;
  }

  SoftRnic soft_;
  ReliableRnic layer_;
};

TEST_F(ReliableRnicTest, LimitsAreTheLowersLessWhatTheLayerKeeps) {
  const RnicLimits lo = soft_.limits();
  const RnicLimits l = layer_.limits();
  // Independently: SoftRnic's defaults (16384 QPs, CQs, PDs; 65536 MRs),
  // one ACK QP, three lower QPs per virtual QP, two daemon CQs, one PD,
  // one daemon MR and one layer region per virtual QP.
  ASSERT_EQ(lo.max_qp, 16384u);
  ASSERT_EQ(lo.max_mr, 65536u);
  EXPECT_EQ(l.max_qp, 5461u);  // (16384 - 1) / 3
  EXPECT_EQ(l.max_cq, 16382u);
  EXPECT_EQ(l.max_pd, 16383u);
  EXPECT_EQ(l.max_mr, 65536u - 1 - 5461);  // 60074
  // The rest is the lower's.
  EXPECT_EQ(l.max_qp_wr, lo.max_qp_wr);
  EXPECT_EQ(l.max_sge, lo.max_sge);
  EXPECT_EQ(l.max_cqe, lo.max_cqe);
  EXPECT_EQ(l.max_mw, lo.max_mw);
  EXPECT_EQ(l.max_srq, lo.max_srq);
  EXPECT_EQ(l.max_srq_wr, lo.max_srq_wr);
  EXPECT_EQ(l.max_inline_data, lo.max_inline_data);
  EXPECT_EQ(l.max_msg_sz, lo.max_msg_sz);
  EXPECT_EQ(l.max_mr_size, lo.max_mr_size);
  EXPECT_EQ(l.atomics, lo.atomics);
  EXPECT_EQ(l.cross_channel, lo.cross_channel);
  EXPECT_EQ(l.link_rate_bps, lo.link_rate_bps);
  EXPECT_EQ(layer_.control_beside_data_path(),
            soft_.control_beside_data_path());
}

TEST(ReliableLimitsTest, TablesAndSmallLowersBoundThem) {
  RnicLimits lower;
  lower.max_qp = 1000;
  lower.max_cq = 1000;
  lower.max_mr = 1000;
  lower.max_pd = 1000;
  ReliableRnicOptions o;
  o.max_qp = 100;
  o.max_cq = 50;
  o.max_mr = 10;
  RnicLimits l = reliable::LayerLimits(lower, o);
  EXPECT_EQ(l.max_qp, 100u);
  EXPECT_EQ(l.max_cq, 50u);
  EXPECT_EQ(l.max_mr, 10u);
  EXPECT_EQ(l.max_pd, 999u);
  // A lower with next to nothing: nothing left, no wrap.
  lower.max_qp = 3;
  lower.max_cq = 1;
  lower.max_mr = 2;
  lower.max_pd = 0;
  l = reliable::LayerLimits(lower, ReliableRnicOptions{});
  EXPECT_EQ(l.max_qp, 0u);  // (3 - 1) / 3
  EXPECT_EQ(l.max_cq, 0u);
  EXPECT_EQ(l.max_mr, 1u);  // 2 - 1 - 0 layer regions
  EXPECT_EQ(l.max_pd, 0u);
}

// Every control call lands on the lower RNIC, with its ids; the layer's
// tables hold what §2.1 says, and everything goes when it is destroyed.
TEST_F(ReliableRnicTest, ControlCallsReachTheLowerWithItsIds) {
  ASSERT_EQ(layer_.AddGid(kGidA), Status::kOk);
  EXPECT_EQ(soft_.ObjectCounts().gids, 1u);
  EXPECT_TRUE(layer_.HasGid(kGidA));
  Result<RnicPd> pd = layer_.AllocPd();
  ASSERT_TRUE(pd.ok());
  EXPECT_EQ(soft_.ObjectCounts().pds, 1u);

  std::vector<uint8_t> buf(8192);
  Result<RnicMr> mr =
      layer_.RegMr(*pd, buf.data(), buf.size(), 0x7000, kAll | kAccessMwBind);
  ASSERT_TRUE(mr.ok());
  EXPECT_EQ(soft_.ObjectCounts().mrs, 1u);
  const reliable::MrRecord* rec = layer_.FindMr(mr->id);
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->mr.lkey, mr->lkey);
  EXPECT_EQ(rec->mr.rkey, mr->rkey);
  EXPECT_EQ(rec->pd.id, pd->id);
  EXPECT_EQ(rec->addr, buf.data());
  EXPECT_EQ(rec->iova, 0x7000u);
  EXPECT_EQ(rec->length, 8192u);
  EXPECT_EQ(rec->access, kAll | kAccessMwBind);

  Result<RnicMw> mw = layer_.AllocMw(*pd, 2);
  ASSERT_TRUE(mw.ok()) << StatusName(mw.status());
  EXPECT_EQ(soft_.ObjectCounts().mws, 1u);

  Result<RnicCq> cq = layer_.CreateCq(32);
  ASSERT_TRUE(cq.ok());
  EXPECT_EQ(soft_.ObjectCounts().cqs, 1u);
  ASSERT_NE(layer_.FindCq(cq->id), nullptr);
  EXPECT_EQ(layer_.FindCq(cq->id)->depth, 32u);
  EXPECT_EQ(layer_.FindCq(cq->id)->synthesized->capacity(), 256u);
  ASSERT_EQ(layer_.ResizeCq(*cq, 64), Status::kOk);
  EXPECT_EQ(layer_.FindCq(cq->id)->depth, 64u);

  Result<RnicSrq> srq = layer_.CreateSrq(*pd, 8, 2);
  ASSERT_TRUE(srq.ok());
  EXPECT_EQ(soft_.ObjectCounts().srqs, 1u);

  QpInit init;
  init.type = QpType::kUc;
  init.pd = *pd;
  init.send_cq = init.recv_cq = *cq;
  init.has_srq = true;
  init.srq = *srq;
  init.caps = QpCaps{8, 0, 2, 0, 16, QpType::kUc};
  Result<RnicQp> qp = layer_.CreateQp(init);
  ASSERT_TRUE(qp.ok());
  EXPECT_EQ(soft_.ObjectCounts().qps, 1u);
  const reliable::VirtualQp* v = layer_.FindQp(qp->id);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->lower.id, qp->id);
  EXPECT_EQ(v->lower.qpn, qp->qpn);
  EXPECT_EQ(v->type, QpType::kUc);
  EXPECT_EQ(v->pd.id, pd->id);
  EXPECT_EQ(v->send_cq.id, cq->id);
  EXPECT_TRUE(v->has_srq);
  EXPECT_EQ(v->srq.id, srq->id);
  EXPECT_EQ(v->caps.max_send_wr, 8u);
  // The virtual QP is the lower QP: the lower answers for the same handle.
  QpAttr a;
  a.state = QpState::kInit;
  ASSERT_EQ(layer_.ModifyQp(*qp, a,
                            kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
            Status::kOk);
  EXPECT_EQ(soft_.QueryQp(*qp)->state, QpState::kInit);
  EXPECT_EQ(layer_.QueryQp(*qp)->state, QpState::kInit);

  AddressVector av;
  av.sgid = kGidA;
  av.dgid = kGidB;
  Result<RnicAh> ah = layer_.CreateAh(*pd, av);
  ASSERT_TRUE(ah.ok());
  EXPECT_EQ(soft_.ObjectCounts().ahs, 1u);
  EXPECT_EQ(layer_.ObjectCounts(), (reliable::ReliableCounts{1, 1, 1}));

  // A lower refusal leaves the layer's record as it was.
  EXPECT_EQ(layer_.DestroyCq(*cq), Status::kBusy);
  EXPECT_NE(layer_.FindCq(cq->id), nullptr);
  EXPECT_EQ(layer_.DeallocPd(*pd), Status::kBusy);

  ASSERT_EQ(layer_.DestroyAh(*ah), Status::kOk);
  ASSERT_EQ(layer_.DestroyQp(*qp), Status::kOk);
  EXPECT_EQ(layer_.FindQp(qp->id), nullptr);
  ASSERT_EQ(layer_.DestroySrq(*srq), Status::kOk);
  ASSERT_EQ(layer_.DestroyCq(*cq), Status::kOk);
  EXPECT_EQ(layer_.FindCq(cq->id), nullptr);
  ASSERT_EQ(layer_.DeallocMw(*mw), Status::kOk);
  ASSERT_EQ(layer_.DeregMr(*mr), Status::kOk);
  EXPECT_EQ(layer_.FindMr(mr->id), nullptr);
  ASSERT_EQ(layer_.DeallocPd(*pd), Status::kOk);
  ASSERT_EQ(layer_.RemoveGid(kGidA), Status::kOk);
  EXPECT_EQ(LowerObjects(soft_), 0u);
  EXPECT_EQ(soft_.ObjectCounts().gids, 0u);
  EXPECT_EQ(layer_.ObjectCounts(), (reliable::ReliableCounts{0, 0, 0}));
  layer_.Reclaim();
}

TEST_F(ReliableRnicTest, CostsAreTheLowersPlusTheRing) {
  const QpCaps rc{64, 64, 4, 4, 64, QpType::kRc};
  const QpCaps ud{64, 64, 4, 4, 64, QpType::kUd};
  EXPECT_EQ(layer_.QpHostBytes(rc), soft_.QpHostBytes(rc));
  EXPECT_EQ(layer_.QpHostBytes(ud), soft_.QpHostBytes(ud));
  EXPECT_EQ(layer_.SrqHostBytes(64, 4), soft_.SrqHostBytes(64, 4));
  EXPECT_EQ(layer_.CqHostBytes(1024), soft_.CqHostBytes(1024) +
                                          sizeof(reliable::CompletionRing) +
                                          256 * sizeof(Completion));
}

// Two RC QPs over SoftRnic through the layer: the data moves, wr_ids and
// QPNs come back untouched, in order.
TEST_F(ReliableRnicTest, DataCallsPassThrough) {
  ASSERT_EQ(layer_.AddGid(kGidA), Status::kOk);
  ASSERT_EQ(layer_.AddGid(kGidB), Status::kOk);
  RnicPd pd = *layer_.AllocPd();
  std::vector<uint8_t> a(4096), b(4096);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 5 + 1);
  RnicMr ma = *layer_.RegMr(pd, a.data(), a.size(), 0x1000, kAll);
  RnicMr mb = *layer_.RegMr(pd, b.data(), b.size(), 0x9000, kAll);
  RnicCq cqa = *layer_.CreateCq(64), cqb = *layer_.CreateCq(64);
  RnicQp qa = MakeQp(pd, cqa, cqa), qb = MakeQp(pd, cqb, cqb);
  BringUp(qa, kGidA, kGidB, qb.qpn);
  BringUp(qb, kGidB, kGidA, qa.qpn);

  RecvWr r;
  r.wr_id = 0xb0b0;
  r.num_sge = 1;
  r.sge[0] = {0x9000, 256, mb.lkey};
  Status err = Status::kOk;
  ASSERT_EQ(layer_.PostRecv(qb, std::span(&r, 1), &err), 1);
  std::array<SendWr, 2> s;
  s[0].wr_id = 0xa0a0;
  s[0].opcode = WrOpcode::kSend;
  s[0].send_flags = kSendSignaled;
  s[0].num_sge = 1;
  s[0].sge[0] = {0x1000, 100, ma.lkey};
  s[1].wr_id = 0xa1a1;
  s[1].opcode = WrOpcode::kRdmaWrite;
  s[1].send_flags = kSendSignaled;
  s[1].num_sge = 1;
  s[1].sge[0] = {0x1000 + 200, 300, ma.lkey};
  s[1].remote_addr = 0x9000 + 1024;
  s[1].rkey = mb.rkey;
  ASSERT_EQ(layer_.PostSend(qa, s, &err), 2);

  const std::vector<Completion> ca = PollN(cqa, 2);
  const std::vector<Completion> cb = PollN(cqb, 1);
  ASSERT_EQ(ca.size(), 2u);
  ASSERT_EQ(cb.size(), 1u);
  EXPECT_EQ(ca[0].wr_id, 0xa0a0u);
  EXPECT_EQ(ca[0].status, WcStatus::kSuccess);
  EXPECT_EQ(ca[0].qpn, qa.qpn);
  EXPECT_EQ(ca[1].wr_id, 0xa1a1u);
  EXPECT_EQ(ca[1].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(cb[0].wr_id, 0xb0b0u);
  EXPECT_EQ(cb[0].byte_len, 100u);
  EXPECT_EQ(cb[0].qpn, qb.qpn);
  EXPECT_EQ(std::memcmp(b.data(), a.data(), 100), 0);
  EXPECT_EQ(std::memcmp(b.data() + 1024, a.data() + 200, 300), 0);
  // A full SQ is refused by the lower, and the layer says so.
  std::vector<SendWr> many(40, s[0]);
  const int taken = layer_.PostSend(qa, many, &err);
  EXPECT_EQ(taken, 16);
  EXPECT_EQ(err, Status::kNoResource);
}

// PollCq returns the ring first, oldest first, then the lower CQ's; a
// short poll leaves the rest for the next; the ring refuses when full and
// works again after a poll, across its wrap.
TEST_F(ReliableRnicTest, SynthesizedCompletionsComeFirst) {
  ASSERT_EQ(layer_.AddGid(kGidA), Status::kOk);
  RnicPd pd = *layer_.AllocPd();
  std::vector<uint8_t> a(4096);
  RnicMr ma = *layer_.RegMr(pd, a.data(), a.size(), 0x1000, kAll);
  RnicCq cq = *layer_.CreateCq(512);
  // A loopback QP whose signaled WRITEs put lower completions in cq.
  RnicQp q = MakeQp(pd, cq, cq);
  BringUp(q, kGidA, kGidA, q.qpn);
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sge[0] = {0x1000, 8, ma.lkey};
  w.remote_addr = 0x1800;
  w.rkey = ma.rkey;
  Status err;
  for (uint64_t i = 0; i < 3; ++i) {
    w.wr_id = 100 + i;
    ASSERT_EQ(layer_.PostSend(q, std::span(&w, 1), &err), 1);
  }
  for (int i = 0; i < 20; ++i) soft_.Progress();  // the lower CQ now holds 3
  for (uint64_t i = 0; i < 5; ++i) {
    Completion c;
    c.wr_id = i;
    c.qpn = q.qpn;
    c.status = i == 4 ? WcStatus::kRemAccessErr : WcStatus::kSuccess;
    ASSERT_TRUE(layer_.PushSynthesized(cq, c));
  }
  EXPECT_FALSE(layer_.PushSynthesized(RnicCq{cq.id + 12345}, Completion{}))
      << "not a CQ of the layer";

  std::array<Completion, 3> out;
  ASSERT_EQ(layer_.PollCq(cq, out), 3);
  EXPECT_EQ(out[0].wr_id, 0u);
  EXPECT_EQ(out[2].wr_id, 2u);
  ASSERT_EQ(layer_.PollCq(cq, out),
            3);  // the ring's last two, then the lower's first
  EXPECT_EQ(out[0].wr_id, 3u);
  EXPECT_EQ(out[1].wr_id, 4u);
  EXPECT_EQ(out[1].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(out[2].wr_id, 100u);
  ASSERT_EQ(layer_.PollCq(cq, out), 2);
  EXPECT_EQ(out[0].wr_id, 101u);
  EXPECT_EQ(out[1].wr_id, 102u);
  EXPECT_EQ(layer_.PollCq(cq, out), 0);

  // Capacity (256) and wrap: fill, refuse, drain, again.
  for (int round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 256; ++i) {
      Completion c;
      c.wr_id = round * 1000 + i;
      ASSERT_TRUE(layer_.PushSynthesized(cq, c)) << round << " " << i;
    }
    Completion extra;
    EXPECT_FALSE(layer_.PushSynthesized(cq, extra)) << "full at 256";
    std::array<Completion, 100> big;
    uint64_t expect = round * 1000;
    int total = 0;
    for (int k; (k = layer_.PollCq(cq, big)) > 0; total += k) {
      for (int i = 0; i < k; ++i) ASSERT_EQ(big[i].wr_id, expect++);
    }
    EXPECT_EQ(total, 256);
  }
  EXPECT_EQ(layer_.FindCq(cq.id)->synthesized->produced(), 5u + 3 * 256);
}

// Memory windows pass through: AllocMw and the window opcodes reach the
// lower RNIC, which binds, checks and invalidates as natively (a type 2
// window on a loopback RC QP, so the QP it is bound to is the responder).
TEST_F(ReliableRnicTest, MemoryWindowsPassThrough) {
  ASSERT_GT(layer_.limits().max_mw, 0u);
  ASSERT_EQ(layer_.AddGid(kGidA), Status::kOk);
  RnicPd pd = *layer_.AllocPd();
  std::vector<uint8_t> buf(8192);
  for (size_t i = 0; i < 4096; ++i) buf[i] = static_cast<uint8_t>(i + 9);
  RnicMr mr =
      *layer_.RegMr(pd, buf.data(), buf.size(), 0x10000, kAll | kAccessMwBind);
  RnicCq cq = *layer_.CreateCq(64);
  RnicQp q = MakeQp(pd, cq, cq);
  BringUp(q, kGidA, kGidA, q.qpn);
  Result<RnicMw> mw = layer_.AllocMw(pd, 2);
  ASSERT_TRUE(mw.ok()) << StatusName(mw.status());
  const uint32_t rkey = (mw->rkey & ~0xffu) | 0x5a;
  Status err;
  auto run = [&](const SendWr& wr) {
    EXPECT_EQ(layer_.PostSend(q, std::span(&wr, 1), &err), 1);
    std::vector<Completion> c = PollN(cq, 1);
    EXPECT_EQ(c.size(), 1u);
    return c.empty() ? Completion{} : c[0];
  };
  SendWr bind;
  bind.wr_id = 1;
  bind.opcode = WrOpcode::kBindMw;
  bind.send_flags = kSendSignaled;
  bind.bind = MwBind{mw->rkey,           mr.lkey, 0x10000 + 4096, 1024, 0x5a,
                     kAccessRemoteWrite, mw->id,  mr.id};
  Completion c = run(bind);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kBindMw);
  SendWr w;
  w.wr_id = 2;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sge[0] = {0x10000, 64, mr.lkey};
  w.remote_addr = 0x10000 + 4096 + 100;
  w.rkey = rkey;
  EXPECT_EQ(run(w).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(buf.data() + 4096 + 100, buf.data(), 64), 0);
  SendWr inv;
  inv.wr_id = 3;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = kSendSignaled;
  inv.invalidate_rkey = rkey;
  c = run(inv);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kLocalInv);
  w.wr_id = 4;
  EXPECT_EQ(run(w).status, WcStatus::kRemAccessErr) << "the window is invalid";
  EXPECT_EQ(soft_.ObjectCounts().mws, 1u);
  ASSERT_EQ(layer_.DeallocMw(*mw), Status::kOk);
  EXPECT_EQ(soft_.ObjectCounts().mws, 0u);
}

// Tables are fixed: a full one refuses before the lower RNIC is asked, so
// nothing is left behind on it.
class ReliableRnicSmallTest : public ReliableRnicTest {
 protected:
  static ReliableRnicOptions Small() {
    ReliableRnicOptions o;
    o.max_qp = 1;
    o.max_cq = 2;
    o.max_mr = 1;
    return o;
  }
  ReliableRnicSmallTest() : ReliableRnicTest(Small()) {}
};

TEST_F(ReliableRnicSmallTest, FullTablesRefuseWithoutTouchingTheLower) {
  EXPECT_EQ(layer_.limits().max_qp, 1u);
  EXPECT_EQ(layer_.limits().max_cq, 2u);
  EXPECT_EQ(layer_.limits().max_mr, 1u);
  RnicPd pd = *layer_.AllocPd();
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(layer_.RegMr(pd, buf.data(), 4096, 0, kAll).ok());
  EXPECT_EQ(layer_.RegMr(pd, buf.data(), 4096, 0, kAll).status(),
            Status::kNoResource);
  RnicCq cq = *layer_.CreateCq(16);
  ASSERT_TRUE(layer_.CreateCq(16).ok());
  EXPECT_EQ(layer_.CreateCq(16).status(), Status::kNoResource);
  MakeQp(pd, cq, cq);
  QpInit init;
  init.pd = pd;
  init.send_cq = init.recv_cq = cq;
  init.caps = QpCaps{4, 4, 1, 1, 0};
  EXPECT_EQ(layer_.CreateQp(init).status(), Status::kNoResource);
  const SoftRnicCounts c = soft_.ObjectCounts();
  EXPECT_EQ(c.mrs, 1u);
  EXPECT_EQ(c.cqs, 2u);
  EXPECT_EQ(c.qps, 1u);
}

// The ACK channel's slot counts are powers of two (a slot is a mask):
// Open refuses others before it makes anything.
TEST(AckChannelTest, SlotCountsArePowersOfTwo) {
  SoftRnic soft;
  ASSERT_EQ(soft.AddGid(kGidA), Status::kOk);
  Result<RnicPd> pd = soft.AllocPd();
  ASSERT_TRUE(pd.ok());
  reliable::AckChannel bad;
  EXPECT_EQ(bad.Open(soft, *pd, kGidA, {.recvs = 1000, .sends = 256}),
            Status::kInvalid);
  EXPECT_EQ(bad.Open(soft, *pd, kGidA, {.recvs = 1024, .sends = 200}),
            Status::kInvalid);
  EXPECT_EQ(LowerObjects(soft), 1u);  // the PD only
  reliable::AckChannel good;
  EXPECT_EQ(good.Open(soft, *pd, kGidA, {.recvs = 64, .sends = 16}),
            Status::kOk);
  good.Close();
}

// The ACK channel signals one send in signal_every; a completion ends
// every send up to it (a send queue completes in order), so the silent
// ones free their slots too.
TEST(AckChannelTest, OneSendInFourIsSignaledAndEndsThoseBeforeIt) {
  testing::FakeRnic fake;
  ASSERT_EQ(fake.AddGid(kGidA), Status::kOk);
  Result<RnicPd> pd = fake.AllocPd();
  ASSERT_TRUE(pd.ok());
  reliable::AckChannel ch;
  ASSERT_EQ(ch.Open(fake, *pd, kGidA,
                    {.recvs = 16, .sends = 8, .signal_every = 4}),
            Status::kOk);
  const reliable::AckAddress to{};  // the fake does not look at the AH
  const reliable::Ack ack{};
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(ch.Send(to, ack)) << i;
  EXPECT_FALSE(ch.Send(to, ack));  // every slot taken
  auto& sends = fake.qps.at(ch.qpn()).sends;
  ASSERT_EQ(sends.size(), 8u);
  for (size_t i = 0; i < sends.size(); ++i) {
    EXPECT_EQ((sends[i].send_flags & kSendSignaled) != 0, i % 4 == 3) << i;
  }
  // The RNIC ends sends 0-3 and completes only the signaled one.
  for (int i = 0; i < 3; ++i) sends.pop_front();
  fake.CompleteSend(ch.qpn());
  EXPECT_EQ(ch.Poll([](const reliable::AckArrival&) { ADD_FAILURE(); }), 1);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ch.Send(to, ack)) << i;
  EXPECT_FALSE(ch.Send(to, ack));
}

// SignalEvery::Ends: a completion ends the posts from `done` up to its
// own; an index outside what is in flight ends nothing; the index wraps
// at the mask.
TEST(SignalEveryTest, AnInOrderCompletionEndsEveryPostUpToIt) {
  EXPECT_EQ(reliable::SignalEvery::Ends(10, 20, 13, 0xff), 4u);
  EXPECT_EQ(reliable::SignalEvery::Ends(10, 20, 19, 0xff), 10u);
  EXPECT_EQ(reliable::SignalEvery::Ends(10, 20, 20, 0xff), 0u);  // not posted
  EXPECT_EQ(reliable::SignalEvery::Ends(10, 20, 5, 0xff), 0u);   // ended
  EXPECT_EQ(reliable::SignalEvery::Ends(250, 260, 2, 0xff), 9u);  // 258
  reliable::SignalEvery s(3, 256);
  EXPECT_EQ(s.Flags(), 0u);
  EXPECT_EQ(s.Flags(), 0u);
  EXPECT_EQ(s.Flags(), kSendSignaled);
  EXPECT_EQ(s.Flags(), 0u);
  reliable::SignalEvery every(0, 256);  // at least one
  EXPECT_EQ(every.Flags(), kSendSignaled);
  reliable::SignalEvery half(16, 8);  // at most half the queue
  EXPECT_EQ(half.Flags(), 0u);
  EXPECT_EQ(half.Flags(), 0u);
  EXPECT_EQ(half.Flags(), 0u);
  EXPECT_EQ(half.Flags(), kSendSignaled);
}

}  // namespace
}  // namespace vrdma
