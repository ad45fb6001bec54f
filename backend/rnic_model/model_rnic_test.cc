// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The model behind vrdma::Rnic: state checks, translation, and the same
// timing as driving the simulator directly (what the isolation bench does).
#include "backend/rnic_model/model_rnic.h"

#include <array>
#include <cstring>
#include <vector>

#include "backend/rnic/roce_grh.h"
#include "gtest/gtest.h"

namespace vrdma::model {
namespace {

struct Cards {
  ModelWorld world{FabricParams{}, 1};
  ModelRnic a{world, ConnectX6RoCE100()};
  ModelRnic b{world, ConnectX6RoCE100()};
  RnicCq cqa, cqb;
  RnicQp qa, qb;

  void SetUp(QpType type = QpType::kRc, uint32_t depth = 64) {
    cqa = *a.CreateCq(256);
    cqb = *b.CreateCq(256);
    QpInit init;
    init.type = type;
    init.caps.max_send_wr = depth;
    init.send_cq = cqa;
    init.recv_cq = cqa;
    qa = *a.CreateQp(init);
    init.send_cq = cqb;
    init.recv_cq = cqb;
    qb = *b.CreateQp(init);
  }
  void Connect() {
    QpAttr at;
    at.state = QpState::kInit;
    ASSERT_EQ(a.ModifyQp(qa, at, kQpState), Status::kOk);
    ASSERT_EQ(b.ModifyQp(qb, at, kQpState), Status::kOk);
    at.state = QpState::kRtr;
    at.dest_qpn = qb.qpn;
    ASSERT_EQ(a.ModifyQp(qa, at, kQpState | kQpDestQpn), Status::kOk);
    at.dest_qpn = qa.qpn;
    ASSERT_EQ(b.ModifyQp(qb, at, kQpState | kQpDestQpn), Status::kOk);
    at.state = QpState::kRts;
    ASSERT_EQ(a.ModifyQp(qa, at, kQpState), Status::kOk);
    ASSERT_EQ(b.ModifyQp(qb, at, kQpState), Status::kOk);
  }
  // Advances virtual time until each card has a completion (at most 100
  // quanta): a's into out[0..1], b's into out[2..3].
  void RunUntilBothComplete(Completion (&out)[4], int* na, int* nb) {
    for (int i = 0; i < 100 && (*na == 0 || *nb == 0); ++i) {
      a.Progress();
      if (*na == 0) *na = a.PollCq(cqa, {out, 2});
      if (*nb == 0) *nb = b.PollCq(cqb, {out + 2, 2});
    }
  }
};

SendWr MakeWr(uint64_t id, WrOpcode op, uint32_t len) {
  SendWr w;
  w.wr_id = id;
  w.opcode = op;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sge[0].length = len;
  return w;
}

// ModifyQp's timeout (kQpTimeout) sets the model QP's retransmission timer:
// with every packet lost and retry_cnt 0, the QP fails at its first timeout,
// 4.19 ms for timeout 10 instead of the card's 1 ms.
TEST(ModelRnic, TimeoutAttributeSetsTheRetransmissionTimer) {
  FabricParams lossy;
  lossy.random_loss = 1.0;
  ModelWorld world{lossy, 1};
  ModelRnic a{world, ConnectX6RoCE100()};
  ModelRnic b{world, ConnectX6RoCE100()};
  RnicCq cqa = *a.CreateCq(16), cqb = *b.CreateCq(16);
  QpInit init;
  init.type = QpType::kRc;
  init.send_cq = init.recv_cq = cqa;
  RnicQp qa = *a.CreateQp(init);
  init.send_cq = init.recv_cq = cqb;
  RnicQp qb = *b.CreateQp(init);
  QpAttr at;
  for (QpState st : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
    at.state = st;
    at.dest_qpn = qb.qpn;
    ASSERT_EQ(a.ModifyQp(qa, at, kQpState | kQpDestQpn), Status::kOk);
    at.dest_qpn = qa.qpn;
    ASSERT_EQ(b.ModifyQp(qb, at, kQpState | kQpDestQpn), Status::kOk);
  }
  at.retry_cnt = 0;
  at.timeout = 10;
  ASSERT_EQ(a.ModifyQp(qa, at, kQpRetryCnt | kQpTimeout), Status::kOk);
  SendWr w = MakeWr(1, WrOpcode::kRdmaWrite, 64);
  Status err = Status::kOk;
  ASSERT_EQ(a.PostSend(qa, {&w, 1}, &err), 1);
  for (int i = 0; i < 2000; ++i) a.Progress();  // 2 ms
  EXPECT_EQ(a.QueryQp(qa)->state, QpState::kRts);
  for (int i = 0; i < 2500; ++i) a.Progress();  // 4.5 ms
  EXPECT_EQ(a.QueryQp(qa)->state, QpState::kErr);
}

TEST(ModelRnic, StateMachineAndUnsupported) {
  Cards c;
  c.SetUp();
  SendWr w = MakeWr(1, WrOpcode::kRdmaWrite, 16);
  Status err = Status::kOk;
  EXPECT_EQ(c.a.PostSend(c.qa, {&w, 1}, &err), 0);
  EXPECT_EQ(err, Status::kBadState);
  QpAttr at;
  at.state = QpState::kRts;
  EXPECT_EQ(c.a.ModifyQp(c.qa, at, kQpState), Status::kBadState);  // Reset -> RTS
  c.Connect();
  SendWr atomic = MakeWr(2, WrOpcode::kAtomicFetchAdd, 8);
  err = Status::kOk;
  EXPECT_EQ(c.a.PostSend(c.qa, {&atomic, 1}, &err), 1);  // atomics are modelled
  EXPECT_EQ(err, Status::kOk);
  EXPECT_FALSE(c.a.CreateSrq(RnicPd{1}, 16, 1).ok());
  EXPECT_EQ(c.a.PostSend(RnicQp{99, 99}, {&w, 1}, &err), 0);
  EXPECT_EQ(err, Status::kBadHandle);
  // No memory windows (docs/virtio-rdma.md §4.7): none to allocate, and
  // the window opcodes are refused at post.
  EXPECT_EQ(c.a.limits().max_mw, 0u);
  EXPECT_EQ(c.a.AllocMw(RnicPd{1}, 2).status(), Status::kUnsupported);
  EXPECT_EQ(c.a.DeallocMw(RnicMw{1, 1}), Status::kUnsupported);
  for (WrOpcode op : {WrOpcode::kBindMw, WrOpcode::kLocalInv, WrOpcode::kSendWithInv}) {
    SendWr mw = MakeWr(3, op, 0);
    err = Status::kOk;
    EXPECT_EQ(c.a.PostSend(c.qa, {&mw, 1}, &err), 0);
    EXPECT_NE(err, Status::kOk);
  }
}

Gid GidOf(uint8_t host) {
  Gid g{};
  g[0] = 0xfe;
  g[15] = host;
  return g;
}

// UD through the Rnic interface: GIDs name cards, an AH resolves its dgid
// to a card, a SEND goes to remote_qpn there and the receive completion
// names the sender's QPN; a UD SEND with no receive posted is dropped.
TEST(ModelRnic, UdSendThroughAddressHandle) {
  Cards c;
  c.SetUp(QpType::kUd);
  ASSERT_EQ(c.a.AddGid(GidOf(1)), Status::kOk);
  ASSERT_EQ(c.b.AddGid(GidOf(2)), Status::kOk);
  EXPECT_EQ(c.b.AddGid(GidOf(1)), Status::kBusy);        // a's already
  EXPECT_EQ(c.a.AddGid(Gid{}), Status::kInvalid);
  EXPECT_EQ(c.a.RemoveGid(GidOf(2)), Status::kBadHandle);  // b's, not a's
  QpAttr at;
  for (auto [rnic, qp] : {std::pair{&c.a, c.qa}, std::pair{&c.b, c.qb}}) {
    for (QpState st : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
      at.state = st;  // no dest_qpn: UD has no peer
      ASSERT_EQ(rnic->ModifyQp(qp, at, kQpState), Status::kOk);
    }
  }
  AddressVector av;
  av.sgid = GidOf(1);
  av.dgid = GidOf(9);
  EXPECT_EQ(c.a.CreateAh(RnicPd{1}, av).status(), Status::kInvalid);  // unknown dgid
  av.sgid = GidOf(2);
  av.dgid = GidOf(2);
  EXPECT_EQ(c.a.CreateAh(RnicPd{1}, av).status(), Status::kInvalid);  // sgid not a's
  av.sgid = GidOf(1);
  Result<RnicAh> ah = c.a.CreateAh(RnicPd{1}, av);
  ASSERT_TRUE(ah.ok());

  RecvWr r;
  r.wr_id = 41;
  ASSERT_EQ(c.b.PostRecv(c.qb, {&r, 1}, nullptr), 1);
  SendWr w = MakeWr(7, WrOpcode::kSend, 1024);
  w.ah = *ah;
  w.remote_qpn = c.qb.qpn;
  Wr mw;
  ASSERT_TRUE(c.a.ToModelWr(w, &mw));
  EXPECT_EQ(mw.ah_host, c.b.host());
  EXPECT_EQ(mw.ah_qp, ModelRnic::SimQp(c.qb.qpn));
  EXPECT_GE(c.qa.qpn, ModelRnic::kFirstQpn) << "QPNs 0 and 1 are SMI's and GSI's";
  Status err = Status::kOk;
  ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, &err), 1);
  Completion out[4];
  int na = 0, nb = 0;
  c.RunUntilBothComplete(out, &na, &nb);
  ASSERT_EQ(na, 1);
  ASSERT_EQ(nb, 1);
  EXPECT_EQ(out[0].wr_id, 7u);
  EXPECT_EQ(out[0].status, WcStatus::kSuccess);
  EXPECT_EQ(out[2].wr_id, 41u);
  EXPECT_EQ(out[2].opcode, WcOpcode::kRecv);
  EXPECT_EQ(out[2].byte_len, 1024u + kGrhBytes);  // RoCE: the GRH in front
  EXPECT_EQ(out[2].qpn, c.qb.qpn);
  EXPECT_EQ(out[2].src_qpn, c.qa.qpn);

  // No receive posted: the sender completes, the receiver sees nothing.
  w.wr_id = 8;
  ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, &err), 1);
  na = nb = 0;
  for (int i = 0; i < 100; ++i) {
    c.a.Progress();
    na += c.a.PollCq(c.cqa, out);
    nb += c.b.PollCq(c.cqb, {out + 2, 2});
  }
  EXPECT_EQ(na, 1);
  EXPECT_EQ(nb, 0);

  // What UD refuses: no AH, over one MTU, not a SEND, a destroyed AH.
  SendWr bad = w;
  bad.ah = RnicAh{};
  EXPECT_EQ(c.a.PostSend(c.qa, {&bad, 1}, &err), 0);
  EXPECT_EQ(err, Status::kInvalid);
  bad = w;
  bad.sge[0].length = c.a.limits().active_mtu_bytes + 1;
  err = Status::kOk;
  EXPECT_EQ(c.a.PostSend(c.qa, {&bad, 1}, &err), 0);
  EXPECT_EQ(err, Status::kInvalid);
  bad = w;
  bad.opcode = WrOpcode::kRdmaWrite;
  err = Status::kOk;
  EXPECT_EQ(c.a.PostSend(c.qa, {&bad, 1}, &err), 0);
  EXPECT_EQ(err, Status::kInvalid);
  ASSERT_EQ(c.a.DestroyAh(*ah), Status::kOk);
  EXPECT_EQ(c.a.DestroyAh(*ah), Status::kBadHandle);
  err = Status::kOk;
  EXPECT_EQ(c.a.PostSend(c.qa, {&w, 1}, &err), 0);
  EXPECT_EQ(err, Status::kInvalid);
  EXPECT_EQ(c.a.RemoveGid(GidOf(1)), Status::kOk);
  EXPECT_EQ(c.a.CreateAh(RnicPd{1}, av).status(), Status::kInvalid);  // sgid gone
}

TEST(ModelRnic, SendQueueFullIsNoResource) {
  Cards c;
  c.SetUp(QpType::kRc, 4);
  c.Connect();
  std::vector<SendWr> wrs(6, MakeWr(1, WrOpcode::kRdmaWrite, 16));
  Status err = Status::kOk;
  EXPECT_EQ(c.a.PostSend(c.qa, wrs, &err), 4);
  EXPECT_EQ(err, Status::kNoResource);
}

TEST(ModelRnic, SendRecvCompletionsWithTimestamps) {
  Cards c;
  c.SetUp();
  c.Connect();
  RecvWr r;
  r.wr_id = 77;
  ASSERT_EQ(c.b.PostRecv(c.qb, {&r, 1}, nullptr), 1);
  SendWr w = MakeWr(5, WrOpcode::kSend, 4096);
  ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, nullptr), 1);
  Completion out[4];
  int na = 0, nb = 0;
  c.RunUntilBothComplete(out, &na, &nb);
  ASSERT_EQ(na, 1);
  ASSERT_EQ(nb, 1);
  EXPECT_EQ(out[0].wr_id, 5u);
  EXPECT_EQ(out[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(out[0].qpn, c.qa.qpn);
  EXPECT_EQ(out[2].wr_id, 77u);
  EXPECT_EQ(out[2].opcode, WcOpcode::kRecv);
  EXPECT_EQ(out[2].byte_len, 4096u);
  // The receiver sees the data before the sender sees the ACK.
  EXPECT_LT(out[2].timestamp_ns, out[0].timestamp_ns);
  EXPECT_GT(out[0].timestamp_ns, 1000u);
}

TEST(ModelRnic, SameTimingAsTheSimulatorDirectly) {
  // Through the Rnic interface.
  Cards c;
  c.SetUp();
  c.Connect();
  SendWr w = MakeWr(9, WrOpcode::kRdmaWrite, 1 << 20);
  ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, nullptr), 1);
  Completion out[1];
  int n = 0;
  for (int i = 0; i < 1000 && n == 0; ++i) {
    c.a.Progress();
    n = c.a.PollCq(c.cqa, out);
  }
  ASSERT_EQ(n, 1);
  // The same WRITE through the simulator's own API, as the bench posts it.
  Simulator sim(FabricParams{}, 1);
  HostId ha = sim.AddHost(ConnectX6RoCE100()), hb = sim.AddHost(ConnectX6RoCE100());
  CqId ca = sim.CreateCq(ha), cb = sim.CreateCq(hb);
  QpConfig qc;
  qc.send_cq = ca; qc.recv_cq = ca; qc.sq_depth = 64;
  QpId x = sim.CreateQp(ha, qc);
  qc.send_cq = cb; qc.recv_cq = cb;
  QpId y = sim.CreateQp(hb, qc);
  sim.Connect(x, y);
  Wr mw;
  ASSERT_TRUE(c.a.ToModelWr(w, &mw));
  sim.PostSend(x, {&mw, 1});
  sim.RunUntil(NsToPs(1e6));
  Cqe direct[1];
  ASSERT_EQ(sim.PollCq(ca, direct), 1);
  EXPECT_EQ(out[0].timestamp_ns, direct[0].time / kPicosPerNano);
}

TEST(ModelRnic, OpcodesRoundTripAndCompleteByRnicsTable) {
  Cards c;
  c.SetUp();
  for (Op op : {Op::kWrite, Op::kWriteImm, Op::kSend, Op::kSendImm, Op::kRead}) {
    SendWr w = MakeWr(1, WrOpcodeOf(op), 64);
    Wr mw;
    ASSERT_TRUE(c.a.ToModelWr(w, &mw));
    EXPECT_EQ(mw.op, op) << "ToModelWr and WrOpcodeOf are inverses";
    Cqe cqe;
    cqe.op = op;
    EXPECT_EQ(ModelRnic::ToCompletion(cqe).opcode, SendCompletionOpcode(w.opcode));
  }
  EXPECT_EQ(WrOpcodeOf(Op::kWait), WrOpcode::kWait);
  EXPECT_EQ(WrOpcodeOf(Op::kEnable), WrOpcode::kEnable);
}

TEST(ModelRnic, RegMrMapsKeysToModelMemoryRegions) {
  Cards c;
  c.SetUp();
  c.Connect();
  const RnicMr la = *c.a.RegMr(RnicPd{1}, nullptr, 1 << 20, 0x10000, 0);
  const RnicMr rb = *c.b.RegMr(RnicPd{1}, nullptr, 1 << 20, 0x20000, 0);
  SendWr w = MakeWr(1, WrOpcode::kRdmaWrite, 64 << 10);
  w.sge[0].addr = 0x10000 + 4096;
  w.sge[0].lkey = la.lkey;
  w.remote_addr = 0x20000;
  w.rkey = rb.rkey;
  Wr m;
  ASSERT_TRUE(c.a.ToModelWr(w, &m));
  EXPECT_EQ(m.local_mr, la.id);
  EXPECT_EQ(m.local_offset, 4096u);
  EXPECT_EQ(m.remote_mr, rb.id);
  EXPECT_EQ(m.remote_offset, 0u);
  Status err = Status::kOk;
  ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, &err), 1);
  for (int i = 0; i < 100; ++i) c.a.Progress();
  const Simulator& sim = c.world.sim();
  EXPECT_EQ(sim.cache_stats(c.a.host()).mpt.misses, 1u);
  EXPECT_GE(sim.cache_stats(c.a.host()).mtt.misses, 2u);   // 16 pages from page 1
  EXPECT_EQ(sim.cache_stats(c.b.host()).mpt.misses, 1u);
  // Unknown keys (as the bench passes) stay on the always-hot region.
  w.sge[0].lkey = 0x1234;
  w.rkey = 7;
  ASSERT_TRUE(c.a.ToModelWr(w, &m));
  EXPECT_EQ(m.local_mr, kNoMr);
  EXPECT_EQ(m.remote_mr, kNoMr);
  EXPECT_EQ(c.a.DeregMr(la), Status::kOk);
  EXPECT_EQ(c.a.DeregMr(la), Status::kBadHandle);
  w.sge[0].lkey = la.lkey;
  ASSERT_TRUE(c.a.ToModelWr(w, &m));
  EXPECT_EQ(m.local_mr, kNoMr);  // deregistered
}

// What ReliableRnic needs of its lower RNIC (docs/reliability.md §9, §10
// step 15): the immediate of WRITE_WITH_IMM and SEND_WITH_IMM in the
// receiver's completion, and the first 256 bytes of a SEND (its daemon
// header) from the sender's registered memory into the posted receive's
// SGEs; nothing beyond them (the model moves no payload).
TEST(ModelRnicTest, CarriesImmediateAndHeader) {
  for (QpType type : {QpType::kRc, QpType::kUc}) {
    SCOPED_TRACE(type == QpType::kRc ? "RC" : "UC");
    Cards c;
    c.SetUp(type);
    c.Connect();
    std::vector<uint8_t> src(8192), dst(8192, 0xee);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
    const uint64_t src_iova = 0x100000, dst_iova = 0x200000;
    const RnicMr ma = *c.a.RegMr(RnicPd{1}, src.data(), src.size(), src_iova, 0);
    const RnicMr mb = *c.b.RegMr(RnicPd{1}, dst.data(), dst.size(), dst_iova, 0);

    // A SEND_WITH_IMM of 300 bytes from two SGEs into a receive of two
    // SGEs (100 + 400 bytes): bytes 0..255 land, the rest stays.
    RecvWr r;
    r.wr_id = 61;
    r.num_sge = 2;
    r.sge[0] = Sge{dst_iova, 100, mb.lkey};
    r.sge[1] = Sge{dst_iova + 1000, 400, mb.lkey};
    ASSERT_EQ(c.b.PostRecv(c.qb, {&r, 1}, nullptr), 1);
    SendWr w = MakeWr(5, WrOpcode::kSendWithImm, 0);
    w.num_sge = 2;
    w.sge[0] = Sge{src_iova + 16, 200, ma.lkey};
    w.sge[1] = Sge{src_iova + 4096, 100, ma.lkey};
    w.imm_data = 0x11223344;
    ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, nullptr), 1);
    Completion out[4];
    int na = 0, nb = 0;
    c.RunUntilBothComplete(out, &na, &nb);
    ASSERT_EQ(nb, 1);
    EXPECT_EQ(out[2].wr_id, 61u);
    EXPECT_EQ(out[2].status, WcStatus::kSuccess);
    EXPECT_EQ(out[2].opcode, WcOpcode::kRecv);
    EXPECT_EQ(out[2].byte_len, 300u);
    EXPECT_TRUE(out[2].wc_flags & kWcWithImm);
    EXPECT_EQ(out[2].imm_data, 0x11223344u);
    std::array<uint8_t, 300> want;
    std::memcpy(want.data(), src.data() + 16, 200);
    std::memcpy(want.data() + 200, src.data() + 4096, 100);
    EXPECT_EQ(std::memcmp(dst.data(), want.data(), 100), 0);
    EXPECT_EQ(std::memcmp(dst.data() + 1000, want.data() + 100, 156), 0);
    EXPECT_EQ(dst[1000 + 156], 0xee) << "only the first 256 bytes are carried";
    EXPECT_EQ(dst[100], 0xee) << "nothing between the receive's SGEs";

    // A WRITE_WITH_IMM: the immediate and the length, no bytes moved.
    std::fill(dst.begin(), dst.end(), 0xee);
    r.wr_id = 62;
    ASSERT_EQ(c.b.PostRecv(c.qb, {&r, 1}, nullptr), 1);
    w = MakeWr(6, WrOpcode::kRdmaWriteWithImm, 0);
    w.sge[0] = Sge{src_iova, 5000, ma.lkey};
    w.remote_addr = dst_iova;
    w.rkey = mb.rkey;
    w.imm_data = 0xa5b6c7d8;
    ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, nullptr), 1);
    na = nb = 0;
    c.RunUntilBothComplete(out, &na, &nb);
    ASSERT_EQ(nb, 1);
    EXPECT_EQ(out[2].wr_id, 62u);
    EXPECT_EQ(out[2].opcode, WcOpcode::kRecvRdmaWithImm);
    EXPECT_EQ(out[2].byte_len, 5000u);
    EXPECT_TRUE(out[2].wc_flags & kWcWithImm);
    EXPECT_EQ(out[2].imm_data, 0xa5b6c7d8u);
    EXPECT_EQ(dst[0], 0xee);
    EXPECT_EQ(dst[1000], 0xee);

    // A plain SEND has no immediate; its 64 bytes land whole.
    r.wr_id = 63;
    ASSERT_EQ(c.b.PostRecv(c.qb, {&r, 1}, nullptr), 1);
    w = MakeWr(7, WrOpcode::kSend, 0);
    w.sge[0] = Sge{src_iova + 64, 64, ma.lkey};
    w.imm_data = 0x99;  // ignored: not an immediate opcode
    ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, nullptr), 1);
    na = nb = 0;
    c.RunUntilBothComplete(out, &na, &nb);
    ASSERT_EQ(nb, 1);
    EXPECT_EQ(out[2].byte_len, 64u);
    EXPECT_FALSE(out[2].wc_flags & kWcWithImm);
    EXPECT_EQ(out[2].imm_data, 0u);
    EXPECT_EQ(std::memcmp(dst.data(), src.data() + 64, 64), 0);
    EXPECT_EQ(dst[64], 0xee);
    EXPECT_EQ(c.world.carry_overwritten(), 0u);
  }
}

// UD (the layer's ACK channel): the receive gets the 40-byte GRH a RoCE
// RNIC writes (BuildRoceGrh of the sender's AH) and then the payload;
// byte_len counts both, src_qpn names the sender.
TEST(ModelRnicTest, UdReceiveGetsGrhAndPayload) {
  Cards c;
  c.SetUp(QpType::kUd);
  ASSERT_EQ(c.a.AddGid(GidOf(1)), Status::kOk);
  ASSERT_EQ(c.b.AddGid(GidOf(2)), Status::kOk);
  QpAttr at;
  for (auto [rnic, qp] : {std::pair{&c.a, c.qa}, std::pair{&c.b, c.qb}}) {
    for (QpState st : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
      at.state = st;
      ASSERT_EQ(rnic->ModifyQp(qp, at, kQpState), Status::kOk);
    }
  }
  AddressVector av;
  av.sgid = GidOf(1);
  av.dgid = GidOf(2);
  av.hop_limit = 64;
  const RnicAh ah = *c.a.CreateAh(RnicPd{1}, av);
  std::vector<uint8_t> src(512), dst(512, 0xee);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i ^ 0x5a);
  const RnicMr ma = *c.a.RegMr(RnicPd{1}, src.data(), src.size(), 0x1000, 0);
  const RnicMr mb = *c.b.RegMr(RnicPd{1}, dst.data(), dst.size(), 0x9000, 0);
  RecvWr r;
  r.wr_id = 3;
  r.num_sge = 1;
  r.sge[0] = Sge{0x9000, 320, mb.lkey};
  ASSERT_EQ(c.b.PostRecv(c.qb, {&r, 1}, nullptr), 1);
  SendWr w = MakeWr(4, WrOpcode::kSend, 0);
  w.sge[0] = Sge{0x1000 + 8, 240, ma.lkey};
  w.ah = ah;
  w.remote_qpn = c.qb.qpn;
  ASSERT_EQ(c.a.PostSend(c.qa, {&w, 1}, nullptr), 1);
  Completion out[4];
  int na = 0, nb = 0;
  c.RunUntilBothComplete(out, &na, &nb);
  ASSERT_EQ(nb, 1);
  EXPECT_EQ(out[2].byte_len, 240u + kGrhBytes);
  EXPECT_EQ(out[2].src_qpn, c.qa.qpn);
  uint8_t grh[kGrhBytes];
  BuildRoceGrh(av, 240, grh);
  EXPECT_EQ(std::memcmp(dst.data(), grh, kGrhBytes), 0);
  EXPECT_EQ(std::memcmp(dst.data() + kGrhBytes, src.data() + 8, 240), 0);
  EXPECT_EQ(dst[kGrhBytes + 240], 0xee);
}

// What else the layer asks of a lower RNIC: ResizeCq on a live CQ, control
// calls on the data-path thread (the layer runs its control calls inline).
TEST(ModelRnicTest, OffersWhatTheLayerAsksOfALowerRnic) {
  Cards c;
  c.SetUp();
  EXPECT_EQ(c.a.ResizeCq(c.cqa, 4096), Status::kOk);
  EXPECT_EQ(c.a.ResizeCq(RnicCq{99}, 4096), Status::kBadHandle);
  EXPECT_FALSE(c.a.control_beside_data_path());
  EXPECT_EQ(c.a.limits().max_srq, 0u);  // the layer keeps SRQ QPs native
}

}  // namespace
}  // namespace vrdma::model
