// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// uc mode for WRITE (docs/reliability.md §2-§4, §10 step 11), on the
// fixture of reliable_uc_test_util.h: WRITEs travel as chunks on the
// layer's UC data QPs and are acknowledged on its UD ACK QPs.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace vrdma::testing {
namespace {

TEST_F(ReliableUcTest, BothEndsConnectInUcMode) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  reliable::Connection* kb = lb_->FindConnection(qb_.qpn);
  ASSERT_NE(ka, nullptr);
  ASSERT_NE(kb, nullptr);
  EXPECT_EQ(ka->state(), ConnState::kUc);
  EXPECT_EQ(kb->state(), ConnState::kUc);
  // Each learnt the other's token and data QP.
  EXPECT_EQ(ka->peer_token(), kb->my_token());
  EXPECT_EQ(kb->peer_token(), ka->my_token());
  EXPECT_NE(ka->data_qpn(), qa_.qpn);
  EXPECT_EQ(la_->counters().connects_uc, 1u);
  EXPECT_EQ(lb_->counters().connects_uc, 1u);
  EXPECT_EQ(la_->counters().peer[peer::PeerCheck::kOk] + 0, link_b_->sent);
  // A scheduler above slices its WRs in whole units (scheduler.md "Split").
  EXPECT_EQ(la_->PieceGranule(qa_), reliable::kUnitSize);
}

TEST_F(ReliableUcTest, WriteOfEverySizeClass) {
  Build();
  Connect();
  const uint32_t sizes[] = {0, 1, 4095, 4096, 4097, 64 << 10, 1 << 20};
  std::vector<Planned> plan;
  uint64_t dst = 4096;
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    plan.push_back({i + 1, 3 + i * 1000, dst, sizes[i]});
    dst += sizes[i] + 8192;
  }
  PostAndVerify(plan, 20000);
  // Lossless: nothing sent twice; a chunk per 64 KiB at most.
  const reliable::ReliabilityCounters& a = la_->counters();
  const reliable::ReliabilityCounters& b = lb_->counters();
  EXPECT_EQ(a.retx_sent, 0u);
  EXPECT_EQ(a.messages_completed, plan.size());
  EXPECT_EQ(b.messages_delivered, plan.size());
  EXPECT_GE(a.chunks_sent, 1u + 1 + 1 + 1 + 1 + 1 + 16);
  EXPECT_GT(a.tail_waits, 0u);  // 1 MiB: its L chunk waited for the others
  EXPECT_GT(a.acks_received, 0u);
  EXPECT_GT(a.rtt_samples, 0u);
  for (size_t i = 0; i < reliable::kWireCounterCount; ++i) {
    EXPECT_EQ(a.wire[i], 0u) << reliable::kWireCounters[i].name;
    EXPECT_EQ(b.wire[i], 0u) << reliable::kWireCounters[i].name;
  }
  // Nothing reached the guest's lower QPs' CQs but the layer's completions.
  EXPECT_TRUE(got_b_.empty());
}

TEST_F(ReliableUcTest, InlineAndUnsignaledWrites) {
  Build();
  Connect();
  SendWr w = Write(1, 0, 0, 0);
  uint8_t bytes[40];
  for (int i = 0; i < 40; ++i) bytes[i] = static_cast<uint8_t>(0xa0 + i);
  w.send_flags = kSendInline;  // unsignaled
  w.inline_data = bytes;
  w.inline_len = 40;
  w.num_sge = 0;
  Post(w);
  SendWr w2 = Write(2, 100, 4096, 5000);
  Post(w2);
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 5000));
  Run(100);
  ASSERT_EQ(got_.size(), 1u);  // only the signaled one
  EXPECT_EQ(got_[0].wr_id, 2u);
  EXPECT_EQ(0, std::memcmp(vb_.buf.data(), bytes, 40));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[4096], &va_.buf[100], 5000));
}

TEST_F(ReliableUcTest, NativeWhenThePeersVmIsNative) {
  Build();
  Connect({}, ReliabilityMode::kNative);
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  ASSERT_NE(ka, nullptr);
  EXPECT_EQ(ka->state(), ConnState::kNative);
  EXPECT_EQ(lb_->FindConnection(qb_.qpn), nullptr);
  EXPECT_EQ(la_->counters().connects_native, 1u);
  EXPECT_EQ(la_->PieceGranule(qa_), 1u);  // the lower RC QP's: any size
  PostAndVerify({{1, 0, 0, 10000}, {2, 50, 20000, 0}, {3, 7, 40000, 70000}}, 5000);
  EXPECT_EQ(la_->counters().chunks_sent, 0u);  // the lower RC QP carried them
}

TEST_F(ReliableUcTest, WritesPostedBeforeTheConnectWaitForIt) {
  Build();
  la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), ReliabilityMode::kUc);
  const QpConf c;
  qa_ = MakeQp(*la_, va_, c);
  qb_ = MakeQp(*lb_, vb_, c);
  BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
  // B is not in RTR yet: A's CONNECT finds nothing there, and is repeated.
  Post(Write(1, 0, 0, 9000));
  Run(10);
  EXPECT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kConnecting);
  BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
  Post(Write(2, 1, 16384, 3));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 5000));
  Run(100);
  ASSERT_EQ(got_.size(), 2u);
  EXPECT_EQ(got_[0].wr_id, 1u);
  EXPECT_EQ(got_[1].wr_id, 2u);
  EXPECT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kUc);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], &va_.buf[0], 9000));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[16384], &va_.buf[1], 3));
}

// A peer whose QP never reaches RTR: the CONNECTs stop after their
// repeats, the held WRs fail RETRY_EXC_ERR after the budget, and the layer
// goes idle.
TEST_F(ReliableUcTest, WrsHeldForAPeerThatNeverConnectsFailAfterTheBudget) {
  Build();
  la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), ReliabilityMode::kUc);
  QpConf c;
  c.timeout = 10;  // 4.2 ms
  c.retry_cnt = 1;
  qa_ = MakeQp(*la_, va_, c);
  qb_ = MakeQp(*lb_, vb_, c);  // left in RESET
  BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
  const uint64_t t0 = now_;
  Post(Write(1, 0, 0, 100));
  Post(Write(2, 0, 0, 100));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 20000));
  EXPECT_EQ(got_[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  EXPECT_GE(now_ - t0, 2 * (uint64_t{4096} << 10));
  // 1 + 100 CONNECTs (every 1 ms), then nothing: the layer is idle.
  ASSERT_TRUE(RunUntil([&] { return la_->counters().connects_sent >= 101; }, 200000));
  Run(60'000);  // 120 ms more
  EXPECT_EQ(la_->counters().connects_sent, 101u);
  EXPECT_FALSE(la_->Progress());
  EXPECT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kConnecting);
}

// ---- Faults -------------------------------------------------------------------

TEST_F(ReliableUcTest, WritesSurviveOnePercentLoss) {
  fabric::FaultConfig f;
  f.loss = 0.01;
  Build(f, f, 7);
  Connect();
  PostAndVerify(MixedPlan(40, 1), 400000);
  const auto& a = la_->counters();
  EXPECT_GT(faulty_a_->fault_stats().lost_random, 0u);
  EXPECT_GT(a.retx_sent, 0u);
  EXPECT_GT(a.lost_rto + a.lost_rack, 0u);
  EXPECT_EQ(a.messages_completed, 40u);
  EXPECT_EQ(lb_->counters().messages_delivered, 40u);
}

TEST_F(ReliableUcTest, WritesSurviveTenPercentLoss) {
  fabric::FaultConfig f;
  f.loss = 0.10;
  Build(f, f, 9);
  Connect();
  PostAndVerify(MixedPlan(30, 2), 2000000);
  const auto& a = la_->counters();
  EXPECT_GT(a.retx_sent, 10u);
  EXPECT_GT(lb_->counters().retx_copied, 0u);
  EXPECT_EQ(a.messages_completed, 30u);
}

TEST_F(ReliableUcTest, WritesSurviveReorderingAndDuplication) {
  fabric::FaultConfig f;
  // A packet held back 30 us arrives after its message's later packets:
  // the lower UC responder drops that message whole. (No jitter: at 1 KiB
  // packets that leave together it would reorder nearly every message.)
  f.p_reorder = 0.01;
  f.reorder_delay_ns = 30'000;
  f.p_dup = 0.05;
  Build(f, f, 5);
  Connect();
  PostAndVerify(MixedPlan(40, 3), 400000);
  EXPECT_GT(faulty_a_->fault_stats().duplicated, 0u);
  EXPECT_GT(faulty_a_->fault_stats().reordered, 0u);
  EXPECT_EQ(lb_->counters().messages_delivered, 40u);
  // Duplicates reach the layer and are acknowledged again, not placed.
  EXPECT_GT(lb_->counters()[WireCounter::kRxDuplicate] +
                lb_->counters()[WireCounter::kRxAfterDelivery],
            0u);
  // A message dropped whole by the lower (a packet held back) is found
  // lost by a later ACK (RACK) and sent again.
  EXPECT_GT(la_->counters().lost_rack, 0u);
}

TEST_F(ReliableUcTest, WritesSurviveLossReorderingAndDuplicationTogether) {
  const fabric::FaultConfig f = Faults(0.02, 0.02, 0.02);
  Build(f, f, 13);
  Connect();
  PostAndVerify(MixedPlan(60, 4), 800000);
  EXPECT_GT(la_->counters().retx_sent, 0u);
}

// The tail rule (§2.3): while a WRITE's other bytes are not all in place,
// its last byte is not either (ib_write_lat polls it), under loss,
// reordering and duplication; checked after every turn.
TEST_F(ReliableUcTest, TailByteLandsLast) {
  const fabric::FaultConfig f = Faults(0.05, 0.02, 0.02);
  Build(f, f, 21);
  Connect();
  std::vector<Planned> plan = {{1, 0, 0, 1u << 20},
                               {2, 0, 2u << 20, 300000},
                               {3, 0, 3u << 20, 65537},
                               {4, 0, 4u << 20, 8192},
                               {5, 0, 5u << 20, 4097}};
  for (Planned& p : plan) {
    // A source whose last byte is not 0, B's initial value.
    while (va_.buf[p.src + p.len - 1] == 0) ++p.src;
    Post(Write(p.wr_id, p.src, p.dst, p.len));
  }
  uint64_t tails_seen = 0;
  for (int turn = 0; turn < 400000 && got_.size() < plan.size(); ++turn) {
    Turn();
    for (const Planned& p : plan) {
      if (vb_.buf[p.dst + p.len - 1] != va_.buf[p.src + p.len - 1]) continue;
      ++tails_seen;
      ASSERT_EQ(0, std::memcmp(&vb_.buf[p.dst], &va_.buf[p.src], p.len))
          << "WR " << p.wr_id << ": its last byte landed before the rest";
    }
  }
  ASSERT_EQ(got_.size(), plan.size());
  EXPECT_GT(tails_seen, 0u);
  EXPECT_GT(la_->counters().retx_sent, 0u);
  EXPECT_GT(la_->counters().tail_waits, 0u);
}

// A WRITE_RETX copies a unit only while its message is not delivered: a
// lost chunk is completed by its retransmitted units, the tail unit last.
TEST_F(ReliableUcTest, LostChunkIsCompletedByRetransmittedUnits) {
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  // A's first chunk (64 KiB, 16 packets) is lost whole.
  bool lost = false;
  tap_a_->match = [&](std::span<const uint8_t> p, const Gid&) {
    if (lost || !IsUcWrite(p)) return false;
    if (net::OpInfoOf(HeaderOf(p).opcode).last) lost = true;
    return true;
  };
  PostAndVerify({{1, 0, 0, 64 << 10}}, 20000);
  EXPECT_EQ(la_->counters().retx_sent, 16u);
  EXPECT_EQ(lb_->counters().retx_copied, 16u);
  EXPECT_EQ(la_->counters().lost_rto, 1u);
}

// §4.4, rto_undo.h: B's ACKs are held (a receiving daemon that does not
// run) until A's RTO expires, then released: the ACK of the original WRITE
// proves the RTO spurious, its reaction is undone, and the RTO's floor
// becomes 5/4 of that late round trip, so that the same stall again, after
// quick round trips that bring srtt and rttvar back down, expires nothing.
// Without the undo rto_undone stays 0; without the floor the second stall
// costs a second RTO.
TEST_F(ReliableUcTest, ASpuriousRtoIsUndoneAndTheSameStallExpiresNothingAgain) {
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  PostAndVerify({{1, 0, 0, 8192}, {2, 8192, 8192, 8192}}, 2000);  // samples
  tap_b_->hold = true;
  const auto stall = [&](uint64_t wr_id, uint64_t off, int turns) {
    tap_b_->held.clear();
    tap_b_->MatchTo(kDaemonA);  // B's ACKs
    Post(Write(wr_id, off, off, 8192));
    const int ran = turns > 0 ? (Run(turns), turns) : [&] {
      int n = 0;
      while (la_->counters().lost_rto == 0 && n < 100000) Turn(), ++n;
      return n;
    }();
    tap_b_->match = nullptr;
    for (size_t i = 0; i < tap_b_->held.size(); ++i) tap_b_->Release(i, now_);
    const size_t before = got_.size();
    EXPECT_TRUE(RunUntil([&] { return got_.size() > before; }, 2000));
    EXPECT_EQ(got_.back().wr_id, wr_id);
    EXPECT_EQ(got_.back().status, WcStatus::kSuccess);
    return ran;
  };
  const int turns = stall(3, 16384, 0);  // until the RTO expires
  ASSERT_EQ(la_->counters().lost_rto, 1u) << "turns " << turns;
  EXPECT_EQ(la_->counters().rto_undone, 1u);
  // Quick round trips between the stalls, as a host's time slices give:
  // their samples take srtt and rttvar back down, the floor stays.
  for (uint64_t i = 0; i < 32; ++i) {
    PostAndVerify({{10 + i, 32768 + i * 64, 32768 + i * 64, 64}}, 2000);
  }
  stall(4, 24576, turns + 2);  // the same stall, a little longer
  EXPECT_EQ(la_->counters().lost_rto, 1u) << "the floor did not hold";
  EXPECT_EQ(0, std::memcmp(&vb_.buf[16384], &va_.buf[16384], 16384));
}

TEST_F(ReliableUcTest, WithheldAcksFailTheWrRetryExceeded) {
  Build();
  QpConf c;
  c.timeout = 8;    // 4.096 us << 8 = 1.05 ms
  c.retry_cnt = 2;  // budget: 3 x 1.05 ms
  Connect(c);
  tap_b_->MatchTo(kDaemonA);  // B's daemon sends no ACK to A
  const uint64_t t0 = now_;
  Post(Write(1, 0, 0, 20000));
  Post(Write(2, 0, 65536, 100));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 20000));
  EXPECT_EQ(got_[0].wr_id, 1u);
  EXPECT_EQ(got_[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(got_[1].wr_id, 2u);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  const uint64_t budget = 3 * (uint64_t{4096} << 8);
  EXPECT_GE(now_ - t0, budget);
  EXPECT_LT(now_ - t0, budget + 2'000'000);
  EXPECT_EQ(la_->counters().retry_exceeded, 1u);
  EXPECT_GT(la_->counters().retx_sent, 0u);
  EXPECT_GT(tap_b_->matched, 0u);
  // Later WRs are flushed, once each.
  Post(Write(3, 0, 0, 10));
  Run(50);
  ASSERT_EQ(got_.size(), 3u);
  EXPECT_EQ(got_[2].status, WcStatus::kWrFlushErr);
}

// The budget counts time without progress, as an RC QP's retries do (§1):
// a WRITE that takes many budgets over a slow path (B's ACKs 1 ms late,
// above the default fabric base RTT: the window stays at one unit)
// completes, because every ACK that acknowledges some of it restarts its
// budget; the WithheldAcks test above shows it still fails without them.
TEST_F(ReliableUcTest, ASlowWriteThatProgressesOutlastsItsBudget) {
  fabric::FaultConfig slow;
  slow.delay_ns = 1'000'000;
  Build({}, slow);
  QpConf c;
  c.timeout = 8;    // 1.05 ms
  c.retry_cnt = 2;  // budget: 3.15 ms
  Connect(c);
  const uint64_t t0 = now_;
  PostAndVerify({{1, 0, 0, 1 << 20}}, 400'000);
  const uint64_t budget = 3 * (uint64_t{4096} << 8);
  EXPECT_GT(now_ - t0, 3 * budget) << "not several budgets long";
  EXPECT_EQ(la_->counters().retry_exceeded, 0u);
}

TEST_F(ReliableUcTest, RemoteAccessViolationIsNakedRemAccessErr) {
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  SendWr w = Write(1, 0, 0, 5000);
  w.rkey = vb_.mr.rkey + 0x1000;  // no such key at B: the chunk is dropped
  Post(w);
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 20000));
  EXPECT_EQ(got_[0].status, WcStatus::kRemAccessErr);
  EXPECT_GE(lb_->counters()[WireCounter::kRxAccessNak], 1u);
  EXPECT_GE(lb_->counters().naks_sent, 1u);
}

// ACKs from a hostile peer (or anyone who forges the peer's ACK QP): each
// bad one is counted and dropped; the QP's data still completes right.
TEST_F(ReliableUcTest, HostileAcksAreCountedAndDropped) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  ASSERT_NE(ka, nullptr);
  const uint32_t a_ack_qpn = la_->ack_channel()->qpn();
  const uint32_t b_ack_qpn = lb_->ack_channel()->qpn();
  const uint32_t qkey = la_->ack_channel()->qkey();
  auto inject = [&](std::span<const uint8_t> payload, uint32_t src_qpn) {
    net::Header h;
    h.opcode = net::kUd | net::kSendOnly;
    h.dest_qpn = a_ack_qpn;
    h.src_qpn = src_qpn;
    h.qkey = qkey;
    h.hop_limit = 64;
    h.dgid = kDaemonA;
    h.sgid = kDaemonB;  // forged: B's daemon GID
    h.payload_len = static_cast<uint16_t>(payload.size());
    std::vector<uint8_t> p(net::kHeaderBytes + payload.size());
    net::EncodeHeader(h, p.data());
    std::memcpy(p.data() + net::kHeaderBytes, payload.data(), payload.size());
    raw_->Send(p, kDaemonA, now_);
  };
  auto ack = [&](const reliable::Ack& a) {
    std::array<uint8_t, reliable::kAckMaxSize> buf{};
    const size_t n = reliable::EncodeAck(a, buf);
    return std::vector<uint8_t>(buf.begin(), buf.begin() + n);
  };
  reliable::Ack good;
  good.dst_vqpn = qa_.qpn;
  good.conn_token = ka->my_token();
  reliable::Ack stale = good;
  stale.conn_token ^= 0x5a5a;
  reliable::Ack unknown = good;
  unknown.dst_vqpn = 0x123456;
  reliable::Ack bad_mid = good;
  bad_mid.deliv_mid = 1000;
  reliable::Ack bad_entry = good;
  bad_entry.n = 1;
  bad_entry.entries[0] = reliable::ReliableNumber(5, 0);  // never sent
  const auto counts = [&] { return la_->counters(); };
  const auto before = counts();
  inject(ack(stale), b_ack_qpn);
  inject(ack(unknown), b_ack_qpn);
  inject(ack(bad_mid), b_ack_qpn);
  inject(ack(bad_entry), b_ack_qpn);
  inject(ack(good), 77);  // not the peer's ACK QP
  std::vector<uint8_t> shortened = ack(good);
  shortened.resize(40);
  inject(shortened, b_ack_qpn);
  Run(20);
  const auto after = counts();
  const auto delta = [&](WireCounter c) { return after[c] - before[c]; };
  EXPECT_EQ(delta(WireCounter::kAckStaleToken), 1u);
  EXPECT_EQ(delta(WireCounter::kAckUnknownQp), 2u);
  EXPECT_EQ(delta(WireCounter::kAckBadMid), 1u);
  EXPECT_EQ(delta(WireCounter::kAckUnknownNumber), 1u);
  EXPECT_EQ(delta(WireCounter::kAckMalformed), 1u);
  EXPECT_EQ(after.acks_received - before.acks_received, 1u);  // bad_entry's
  EXPECT_TRUE(got_.empty());
  PostAndVerify({{1, 0, 0, 70000}, {2, 9, 90000, 1}}, 20000);
}

// Step 18: what a VM's connections count is its own (its sgid's VM, named
// by SetMode); what no VM owns (an ACK that matches no connection) is the
// layer's; the daemon-wide figures are their sum, and keep a VM that left.
TEST_F(ReliableUcTest, CountersArePerVm) {
  Build();
  Connect();  // VM a (A) and VM b (B)
  // A second VM on A, its QP towards B's VM.
  UcVm vc;
  MakeVm(*la_, &vc, 4);
  link_a_->AddGid(vc.gid);
  la_->SetMode(std::span(&vc.gid, 1), ReliabilityMode::kUc);
  const QpConf conf;
  const RnicQp qc = MakeQp(*la_, vc, conf);
  const RnicQp qb2 = MakeQp(*lb_, vb_, conf);
  BringUp(*la_, qc, vc.gid, vb_.gid, qb2.qpn, conf);
  BringUp(*lb_, qb2, vb_.gid, vc.gid, qc.qpn, conf);
  Run(20);
  ASSERT_NE(la_->FindConnection(qc.qpn), nullptr);
  ASSERT_EQ(la_->FindConnection(qc.qpn)->state(), ConnState::kUc);

  // VM a: three WRITEs; VM c: two.
  PostAndVerify({{1, 0, 0, 10000}, {2, 5, 20000, 70000}, {3, 9, 100000, 1}},
                20000);
  for (uint64_t i = 0; i < 2; ++i) {
    SendWr w;
    w.wr_id = 10 + i;
    w.opcode = WrOpcode::kRdmaWrite;
    w.send_flags = kSendSignaled;
    w.num_sge = 1;
    w.sge[0] = Sge{vc.at(0), 30000, vc.mr.lkey};
    w.remote_addr = vb_.at(200000 + i * 30000);
    w.rkey = vb_.mr.rkey;
    Status st = Status::kOk;
    ASSERT_EQ(la_->PostSend(qc, std::span(&w, 1), &st), 1) << StatusName(st);
  }
  const reliable::ReliabilityCounters* a = la_->VmCounters(va_.gid);
  const reliable::ReliabilityCounters* cc = la_->VmCounters(vc.gid);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(cc, nullptr);
  EXPECT_EQ(la_->VmCounters(HostGid(9)), nullptr);
  ASSERT_TRUE(RunUntil([&] { return cc->messages_completed >= 2; }, 20000));
  Run(200);
  EXPECT_EQ(a->messages_posted, 3u);
  EXPECT_EQ(a->messages_completed, 3u);
  EXPECT_EQ(cc->messages_posted, 2u);
  EXPECT_EQ(cc->messages_completed, 2u);
  EXPECT_EQ(a->connects_uc, 1u);
  EXPECT_EQ(cc->connects_uc, 1u);
  EXPECT_GT(a->chunks_sent, 0u);
  EXPECT_GT(cc->chunks_sent, 0u);
  EXPECT_GT(cc->acks_received, 0u);
  const reliable::ReliabilityCounters& own = la_->own_counters();
  EXPECT_EQ(own.messages_posted, 0u);
  EXPECT_EQ(own.chunks_sent, 0u);
  EXPECT_EQ(own.acks_received, 0u);
  // B's two QPs are both VM b's.
  const reliable::ReliabilityCounters* b = lb_->VmCounters(vb_.gid);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->messages_delivered, 5u);
  EXPECT_EQ(b->acks_sent, lb_->counters().acks_sent);
  EXPECT_EQ(lb_->own_counters().acks_sent, 0u);

  // The daemon-wide figures: the layer's own plus each VM's.
  auto sum_ok = [&] {
    const reliable::ReliabilityCounters all = la_->counters();
    EXPECT_EQ(all.messages_completed, own.messages_completed +
                                          a->messages_completed +
                                          cc->messages_completed);
    EXPECT_EQ(all.chunks_sent,
              own.chunks_sent + a->chunks_sent + cc->chunks_sent);
    EXPECT_EQ(all.acks_received,
              own.acks_received + a->acks_received + cc->acks_received);
    EXPECT_EQ(all.connects_sent,
              own.connects_sent + a->connects_sent + cc->connects_sent);
    EXPECT_EQ(all.peer[peer::PeerCheck::kOk], own.peer[peer::PeerCheck::kOk]);
    EXPECT_EQ(all[WireCounter::kAckUnknownQp],
              own[WireCounter::kAckUnknownQp] +
                  (*a)[WireCounter::kAckUnknownQp] +
                  (*cc)[WireCounter::kAckUnknownQp]);
  };
  sum_ok();

  // A forged ACK that names no connection: the layer's own, no VM's.
  const reliable::ReliabilityCounters a_before = *a, c_before = *cc;
  const uint64_t unknown_before = own[WireCounter::kAckUnknownQp];
  reliable::Ack forged;
  forged.dst_vqpn = 0x123456;
  forged.conn_token = 1;
  std::array<uint8_t, reliable::kAckMaxSize> buf{};
  const size_t len = reliable::EncodeAck(forged, buf);
  net::Header h;
  h.opcode = net::kUd | net::kSendOnly;
  h.dest_qpn = la_->ack_channel()->qpn();
  h.src_qpn = lb_->ack_channel()->qpn();
  h.qkey = la_->ack_channel()->qkey();
  h.hop_limit = 64;
  h.dgid = kDaemonA;
  h.sgid = kDaemonB;
  h.payload_len = static_cast<uint16_t>(len);
  std::vector<uint8_t> pkt(net::kHeaderBytes + len);
  net::EncodeHeader(h, pkt.data());
  std::memcpy(pkt.data() + net::kHeaderBytes, buf.data(), len);
  raw_->Send(pkt, kDaemonA, now_);
  Run(20);
  EXPECT_EQ(own[WireCounter::kAckUnknownQp], unknown_before + 1);
  EXPECT_EQ(0, std::memcmp(&a_before, a, sizeof(a_before)));
  EXPECT_EQ(0, std::memcmp(&c_before, cc, sizeof(c_before)));
  sum_ok();

  // VM c leaves: its counts stay in the daemon-wide figures.
  const uint64_t completed = la_->counters().messages_completed;
  la_->SetMode(std::span(&vc.gid, 1), ReliabilityMode::kNative);
  EXPECT_EQ(la_->counters().messages_completed, completed);
  EXPECT_EQ(completed, 5u);
  // Forgotten while its QP lives, its record stays (the QP counts into it);
  // once the QP is gone the record goes, and its counts stay in the totals.
  la_->ForgetVm(std::span(&vc.gid, 1));
  EXPECT_NE(la_->VmCounters(vc.gid), nullptr);
  ASSERT_EQ(la_->DestroyQp(qc), Status::kOk);
  Run(5);
  la_->ForgetVm(std::span(&vc.gid, 1));
  EXPECT_EQ(la_->VmCounters(vc.gid), nullptr);
  EXPECT_EQ(la_->counters().messages_completed, completed);
  EXPECT_NE(la_->VmCounters(va_.gid), nullptr);  // VM a is untouched
}

// Daemon headers forged onto B's data QP (as a hostile peer, or a host that
// guesses the QPN, can): each bad one is counted and dropped; one whose
// rkey B's MR table refuses is NAKed, and A, which sent no such message,
// drops the NAK as ack_bad_nak. B's memory is untouched.
TEST_F(ReliableUcTest, HostileHeadersAreCountedAndDropped) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  reliable::Connection* kb = lb_->FindConnection(qb_.qpn);
  ASSERT_NE(ka, nullptr);
  ASSERT_NE(kb, nullptr);
  auto inject = [&](const reliable::DaemonHeader& h, uint32_t data_len,
                    uint8_t version = reliable::kWireVersion) {
    std::vector<uint8_t> payload(reliable::kHeaderSize + data_len, 0x77);
    ASSERT_TRUE(reliable::EncodeHeader(h, payload));
    payload[1] = version;
    net::Header p;
    p.opcode = net::kUc | net::kSendOnly;
    p.dest_qpn = kb->data_qpn();
    p.src_qpn = ka->data_qpn();  // forged: A's data QP
    p.psn = 0x1234;
    p.hop_limit = 64;
    p.dgid = vb_.gid;
    p.sgid = va_.gid;
    p.payload_len = static_cast<uint16_t>(payload.size());
    std::vector<uint8_t> bytes(net::kHeaderBytes + payload.size());
    net::EncodeHeader(p, bytes.data());
    std::memcpy(bytes.data() + net::kHeaderBytes, payload.data(), payload.size());
    raw_->Send(bytes, vb_.gid, now_);
  };
  reliable::DaemonHeader good;
  good.type = reliable::HeaderType::kWriteRetx;
  good.flags = reliable::kHdrLast | reliable::kHdrRetransmission;
  good.dst_vqpn = qb_.qpn;
  good.conn_token = kb->my_token();
  good.mid = 0;
  good.off_units = 0;
  good.data_len = 100;
  good.msg_len = 100;
  good.remote_addr = vb_.at(0);
  good.rkey = vb_.mr.rkey;
  reliable::DaemonHeader h = good;
  inject(h, 100, 2);  // version 2
  h = good;
  h.dst_vqpn = qb_.qpn + 1;
  inject(h, 100);
  h = good;
  h.conn_token ^= 1;
  inject(h, 100);
  h = good;
  h.mid = 1000;
  inject(h, 100);
  h = good;
  h.off_units = 3;
  inject(h, 100);
  h = good;
  h.type = reliable::HeaderType::kSendData;
  h.rcv_index = 5000;  // far beyond B's receive queue (step 12)
  inject(h, 100);
  h = good;
  h.rkey = vb_.mr.rkey ^ 0x100;  // no such MR at B
  inject(h, 100);
  Run(50);
  const auto& b = lb_->counters();
  EXPECT_EQ(b[WireCounter::kRxMalformed], 1u);
  EXPECT_EQ(b[WireCounter::kRxBadRcvIndex], 1u);
  EXPECT_EQ(b[WireCounter::kRxWrongQp], 1u);
  EXPECT_EQ(b[WireCounter::kRxStaleToken], 1u);
  EXPECT_EQ(b[WireCounter::kRxMidOutsideWindow], 1u);
  EXPECT_EQ(b[WireCounter::kRxBadOffset], 1u);
  EXPECT_EQ(b[WireCounter::kRxAccessNak], 1u);
  EXPECT_EQ(b.naks_sent, 1u);
  EXPECT_EQ(b.retx_copied, 0u);
  EXPECT_EQ(la_->counters()[WireCounter::kAckBadNak], 1u);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(vb_.buf[i], 0) << i;
  EXPECT_TRUE(got_.empty());
  PostAndVerify({{1, 0, 0, 3000}}, 5000);
}

// An ACK whose hold time exceeds the round trip the sender measured is
// used, but gives no RTT sample (§3.6 ack_bad_sample).
TEST_F(ReliableUcTest, AckWithAnImpossibleHoldTimeGivesNoSample) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  ASSERT_NE(ka, nullptr);
  tap_a_->match = [](std::span<const uint8_t> p, const Gid&) { return IsUcWrite(p); };
  Post(Write(1, 0, 0, 100));
  Run(3);  // the chunk left (and was lost): in flight, unacknowledged
  reliable::Ack a;
  a.dst_vqpn = qa_.qpn;
  a.conn_token = ka->my_token();
  a.n = 1;
  a.entries[0] = reliable::ReliableNumber(0, 0);
  a.flags = reliable::kAckSampleValid;
  a.sample = 0;
  a.hold_ns = 4'000'000'000u;  // longer than since the chunk was posted
  std::array<uint8_t, reliable::kAckMaxSize> buf{};
  const size_t n = reliable::EncodeAck(a, buf);
  net::Header h;
  h.opcode = net::kUd | net::kSendOnly;
  h.dest_qpn = la_->ack_channel()->qpn();
  h.src_qpn = lb_->ack_channel()->qpn();
  h.qkey = la_->ack_channel()->qkey();
  h.dgid = kDaemonA;
  h.sgid = kDaemonB;
  const uint64_t samples = la_->counters().rtt_samples;
  Inject(h, std::span(buf.data(), n));
  Run(5);
  EXPECT_EQ(la_->counters()[WireCounter::kAckBadSample], 1u);
  EXPECT_EQ(la_->counters().rtt_samples, samples);
  EXPECT_EQ(la_->counters().acks_received, 1u);  // used all the same
}

// A message whose units arrive in 17 disjoint ranges: the 17th is dropped
// unacknowledged (§4.2, rx_ranges_full), to be resent once holes fill.
TEST_F(ReliableUcTest, SeventeenthRangeIsDroppedUnacknowledged) {
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  reliable::Connection* kb = lb_->FindConnection(qb_.qpn);
  ASSERT_NE(kb, nullptr);
  uint32_t psn = 0x100;
  for (uint32_t i = 0; i <= 16; ++i) {  // units 0, 2, ..., 32
    reliable::DaemonHeader d;
    d.type = reliable::HeaderType::kWriteRetx;
    d.flags = reliable::kHdrRetransmission;
    d.dst_vqpn = qb_.qpn;
    d.conn_token = kb->my_token();
    d.gseq = 1000 + i;
    d.mid = 0;
    d.off_units = 2 * i;
    d.data_len = 4096;
    d.msg_len = 40 * 4096;
    d.remote_addr = vb_.at(uint64_t{2 * i} * 4096);
    d.rkey = vb_.mr.rkey;
    std::vector<uint8_t> payload(reliable::kHeaderSize + 4096, static_cast<uint8_t>(i + 1));
    ASSERT_TRUE(reliable::EncodeHeader(d, payload));
    net::Header h;
    h.dest_qpn = kb->data_qpn();
    h.src_qpn = ka->data_qpn();
    h.dgid = vb_.gid;
    h.sgid = va_.gid;
    h.opcode = net::kUc | net::kSendFirst;
    h.psn = psn++;
    Inject(h, std::span(payload.data(), 4096));
    h.opcode = net::kUc | net::kSendLast;
    h.psn = psn++;
    Inject(h, std::span(payload.data() + 4096, reliable::kHeaderSize));
  }
  Run(20);
  const auto& b = lb_->counters();
  EXPECT_EQ(b.retx_copied, 16u);
  EXPECT_EQ(b[WireCounter::kRxRangesFull], 1u);
  EXPECT_EQ(vb_.buf[30 * 4096], 16);    // the 16th range's unit
  EXPECT_EQ(vb_.buf[32 * 4096], 0);     // the 17th: not copied
  EXPECT_EQ(b.messages_delivered, 0u);  // holes remain
}

// A SEND longer than a bounce buffer: the lower completes the receive in
// error (and, as SoftRnic does, takes the data QP to ERR, flushing the
// other receives); the layer counts rx_lower_error once and reads nothing
// from the buffer. (The connection is then broken: its WRs fail after
// their budget; recovering the data QP is step 16's.)
TEST_F(ReliableUcTest, OversizeSendIsALowerError) {
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  reliable::Connection* kb = lb_->FindConnection(qb_.qpn);
  std::vector<uint8_t> payload(4096 + 200, 0x55);
  net::Header h;
  h.dest_qpn = kb->data_qpn();
  h.src_qpn = ka->data_qpn();
  h.dgid = vb_.gid;
  h.sgid = va_.gid;
  h.opcode = net::kUc | net::kSendFirst;
  h.psn = 7;
  Inject(h, std::span(payload.data(), 4096));
  h.opcode = net::kUc | net::kSendLast;
  h.psn = 8;
  Inject(h, std::span(payload.data() + 4096, 200));
  Run(10);
  const auto& b = lb_->counters();
  EXPECT_EQ(b[WireCounter::kRxLowerError], 1u);
  EXPECT_EQ(b[WireCounter::kRxMalformed], 0u);
  EXPECT_EQ(b.retx_copied, 0u);
}

TEST_F(ReliableUcTest, GuestErrFlushesEveryWrOnce) {
  Build();
  Connect();
  // Nothing A sends arrives: the WRs stay in flight.
  tap_a_->match = [](std::span<const uint8_t> p, const Gid&) { return IsUcWrite(p); };
  Post(Write(1, 0, 0, 100));
  Post(Write(2, 0, 8192, 100));
  Run(10);
  QpAttr a;
  a.state = QpState::kErr;
  ASSERT_EQ(la_->ModifyQp(qa_, a, kQpState), Status::kOk);
  Run(10);
  ASSERT_EQ(got_.size(), 2u);
  EXPECT_EQ(got_[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
}

// §3.6: a guest cannot aim its own QP at a peer's layer QP.
TEST_F(ReliableUcTest, GuestQpsCannotAimAtAPeersLayerQps) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  ASSERT_NE(ka, nullptr);
  QpInit init;
  init.type = QpType::kUc;
  init.pd = va_.pd;
  init.send_cq = va_.scq;
  init.recv_cq = va_.rcq;
  init.caps = QpCaps{16, 16, 1, 1, 0, QpType::kUc};
  const RnicQp uc = *la_->CreateQp(init);
  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = kAll;
  ASSERT_EQ(la_->ModifyQp(uc, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
            Status::kOk);
  a.state = QpState::kRtr;
  a.av.sgid = va_.gid;
  a.av.dgid = vb_.gid;
  a.path_mtu_bytes = 1024;
  a.dest_qpn = ka->peer_data_qpn();  // B's data QP of this connection
  const uint32_t mask = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  EXPECT_EQ(la_->ModifyQp(uc, a, mask), Status::kInvalid);
  a.av.dgid = kDaemonB;
  a.dest_qpn = lb_->ack_channel()->qpn();  // B's ACK QP
  EXPECT_EQ(la_->ModifyQp(uc, a, mask), Status::kInvalid);
  a.av.dgid = vb_.gid;
  a.dest_qpn = qb_.qpn;  // B's guest QP: fine
  EXPECT_EQ(la_->ModifyQp(uc, a, mask), Status::kOk);
}

TEST_F(ReliableUcTest, RcQpsAreChargedTheirFramedWorstCase) {
  Build();
  const QpCaps rc{256, 64, 4, 4, 64, QpType::kRc};
  QpCaps uc = rc;
  uc.type = QpType::kUc;
  // §8: an RC QP is charged its tables, its region (32 x 4160 bounce
  // bytes, 256 header slots, its inline bytes), its data QP and the
  // transport CQ's growth, and a live switch's hold queue (§6); a UC QP
  // nothing more.
  const uint64_t extra = la_->QpHostBytes(rc) - soft_a_->QpHostBytes(rc);
  EXPECT_GE(extra, 32u * 4160 + 256 * 64 + 256 * 64 + soft_a_->QpHostBytes(uc) +
                       reliable::HoldQueue::HostBytes(rc.max_send_wr, rc.max_inline_data));
  EXPECT_LT(extra, 2u << 20);  // 1.1 MiB at these caps
  EXPECT_EQ(la_->QpHostBytes(uc), soft_a_->QpHostBytes(uc));
  // Without a peer link the layer charges what the lower does.
  ReliableRnic plain(*soft_a_);
  EXPECT_EQ(plain.QpHostBytes(rc), soft_a_->QpHostBytes(rc));
}

TEST_F(ReliableUcTest, DestroyLeavesNothingOnTheLower) {
  Build();
  Run(2);  // HELLOs: each layer has an AH for the other's ACK QP
  const SoftRnicCounts empty_a = soft_a_->ObjectCounts();
  Connect();
  PostAndVerify({{1, 0, 0, 5000}}, 5000);
  ASSERT_EQ(la_->DestroyQp(qa_), Status::kOk);
  ASSERT_EQ(lb_->DestroyQp(qb_), Status::kOk);
  EXPECT_EQ(la_->FindConnection(qa_.qpn), nullptr);
  EXPECT_EQ(soft_a_->ObjectCounts(), empty_a);
}

}  // namespace
}  // namespace vrdma::testing

namespace vrdma::testing {
namespace {

// Every fault at once, several seeds: each WR completes once, in order,
// every byte verified.
class ReliableUcSeedTest : public ReliableUcTest,
                           public ::testing::WithParamInterface<uint64_t> {
 protected:
  // 80 mixed messages over 3 % loss, 2 % reordering and 2 % duplicates.
  void RunMixedFaults() {
    fabric::FaultConfig f;
    f.loss = 0.03;
    f.p_reorder = 0.02;
    f.reorder_delay_ns = 25'000;
    f.p_dup = 0.02;
    Build(f, f, GetParam());
    Connect();
    PostAndVerify(MixedPlan(80, GetParam()), 2000000);
    EXPECT_EQ(lb_->counters().messages_delivered, 80u);
  }
};

TEST_P(ReliableUcSeedTest, MixedFaultsEveryByteOnce) { RunMixedFaults(); }

// The same with the daemon's sweep (every 10 ms): connections with only
// timers pending really sleep through the turns until their deadlines
// (§2.1 "Turns"), and every byte still arrives once. (A deadline computed
// late is what the test above finds: its sweep at every turn pumps every
// sleeper early, and TearDown asserts none had work.)
TEST_P(ReliableUcSeedTest, MixedFaultsEveryByteOnceAsleep) {
  idle_sweep_ns_ = 10'000'000;
  RunMixedFaults();
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReliableUcSeedTest, ::testing::Range<uint64_t>(1, 9));

// The peer table (options' max_peers, 64): a peer daemon that restarts
// says HELLO with a new id from its old ACK GID and takes its old entry
// again, so restarts never fill the table; distinct daemons beyond the
// table are counted and ignored.
TEST_F(ReliableUcTest, RestartedPeersReuseTheirEntryAndTheTableIsBounded) {
  Build();
  for (int i = 0; i < 10; ++i) Turn();  // B's HELLO: one entry
  auto hello = [&](uint64_t origin, const Gid& ack_gid) {
    peer::PeerMessage m;
    m.type = peer::MsgType::kHello;
    m.origin = origin;
    m.seq = 1;
    m.body = peer::Hello{peer::kUnitSize, 0x1234, 0x11, ack_gid};
    std::array<uint8_t, peer::kMaxMessageBytes> buf{};
    const size_t n = peer::Encode(m, buf);
    ASSERT_GT(n, 0u);
    la_->OnPeerMessage(std::span<const uint8_t>(buf.data(), n));
  };
  const uint64_t unmatched = la_->counters().peer_unmatched;
  Gid restarting = HostGid(200);
  for (uint64_t id = 1000; id < 1100; ++id) hello(id, restarting);
  EXPECT_EQ(la_->counters().peer_restarts, 99u);
  EXPECT_EQ(la_->counters().peer_unmatched, unmatched);
  // 100 distinct daemons: the 64-entry table (B and the restarting one
  // already in it) takes 62 more.
  for (uint8_t i = 0; i < 100; ++i) {
    Gid g = HostGid(200);
    g[14] = 1;
    g[15] = i;
    hello(5000 + i, g);
  }
  EXPECT_EQ(la_->counters().peer_unmatched, unmatched + 38);
  EXPECT_EQ(la_->counters().peer_restarts, 99u);
}

}  // namespace
}  // namespace vrdma::testing
