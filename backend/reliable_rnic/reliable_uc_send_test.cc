// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// uc mode for SEND, SEND_WITH_IMM and WRITE_WITH_IMM (docs/reliability.md
// §2.3, §10 step 12), on the fixture of reliable_uc_test_util.h: SENDs
// travel as SEND_DATA units copied into the guest receives the layer
// keeps, a WRITE_WITH_IMM as chunks and a WRITE_TAIL; credits and RNR.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace vrdma::testing {
namespace {

using ReliableUcSendTest = ReliableUcTest;

constexpr uint32_t kImm = 0x12345678;

// A's bytes at src equal B's at dst.
#define EXPECT_BYTES(dst, src, len)                            \
  EXPECT_EQ(0, std::memcmp(&vb_.buf[dst], &va_.buf[src], len)) \
      << "len " << (len)

TEST_F(ReliableUcSendTest, SendOfEverySizeClassIntoReceivesOfSeveralSges) {
  Build();
  Connect();
  const uint32_t sizes[] = {0, 1, 4096, 4097, 64 << 10};
  // Each receive: 4 SGEs of 16 KiB + 1 (a SEND's units straddle them).
  constexpr uint32_t kSge = (16 << 10) + 1;
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    PostRecvB(100 + i, i * (128 << 10), kSge, 4);
  }
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    Post(Send(1 + i, 11 + i * 1000, sizes[i]));
  }
  ASSERT_TRUE(RunUntil(
      [&] {
        return recv_b_.size() == std::size(sizes) &&
               got_.size() == std::size(sizes);
      },
      20000));
  Run(200);
  ASSERT_EQ(recv_b_.size(), std::size(sizes));
  ASSERT_EQ(got_.size(), std::size(sizes));
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    const Completion& r = recv_b_[i];
    EXPECT_EQ(r.wr_id, 100 + i);
    EXPECT_EQ(r.status, WcStatus::kSuccess);
    EXPECT_EQ(r.opcode, WcOpcode::kRecv);
    EXPECT_EQ(r.byte_len, sizes[i]);
    EXPECT_EQ(r.wc_flags & kWcWithImm, 0u);
    EXPECT_EQ(r.qpn, qb_.qpn);
    EXPECT_BYTES(i * (128 << 10), 11 + i * 1000, sizes[i]);
    EXPECT_EQ(got_[i].wr_id, 1 + i);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_[i].opcode, WcOpcode::kSend);
  }
  // Not a byte past the message.
  EXPECT_EQ(vb_.buf[4 * (128 << 10) + (64 << 10)], 0);
  const auto& b = lb_->counters();
  EXPECT_EQ(b.recvs_completed, std::size(sizes));
  EXPECT_EQ(b.units_copied, 1u + 1 + 1 + 2 + 16);
  EXPECT_EQ(la_->counters().sends_sent, 1u + 1 + 1 + 2 + 16);
  EXPECT_EQ(la_->counters().retx_sent, 0u);
  for (size_t i = 0; i < reliable::kWireCounterCount; ++i) {
    EXPECT_EQ(b.wire[i], 0u) << reliable::kWireCounters[i].name;
  }
}

TEST_F(ReliableUcSendTest, SendWithImmCarriesTheImmediate) {
  Build();
  Connect();
  PostRecvB(7, 0, 8192);
  PostRecvB(8, 8192, 8192);
  Post(Send(1, 5, 5000, kImm));
  Post(Send(2, 9, 0, 0xdeadbeef));
  ASSERT_TRUE(
      RunUntil([&] { return recv_b_.size() == 2 && got_.size() == 2; }, 20000));
  EXPECT_EQ(recv_b_[0].wr_id, 7u);
  EXPECT_EQ(recv_b_[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(recv_b_[0].byte_len, 5000u);
  EXPECT_EQ(recv_b_[0].wc_flags & kWcWithImm, kWcWithImm);
  EXPECT_EQ(recv_b_[0].imm_data, kImm);
  EXPECT_BYTES(0, 5, 5000);
  EXPECT_EQ(recv_b_[1].byte_len, 0u);
  EXPECT_EQ(recv_b_[1].imm_data, 0xdeadbeefu);
  EXPECT_EQ(recv_b_[1].wc_flags & kWcWithImm, kWcWithImm);
}

TEST_F(ReliableUcSendTest, WriteWithImmOfEverySize) {
  Build();
  Connect();
  const uint32_t sizes[] = {0, 1, 4096, 9000, 200000};
  for (uint32_t i = 0; i < std::size(sizes); ++i) PostRecvB(50 + i, 0, 16);
  uint64_t dst = 4096;
  std::vector<uint64_t> dsts;
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    SendWr w = Write(1 + i, 3 + i * 777, dst, sizes[i]);
    w.opcode = WrOpcode::kRdmaWriteWithImm;
    w.imm_data = kImm + i;
    Post(w);
    dsts.push_back(dst);
    dst += sizes[i] + 8192;
  }
  ASSERT_TRUE(RunUntil(
      [&] {
        return recv_b_.size() == std::size(sizes) &&
               got_.size() == std::size(sizes);
      },
      40000));
  Run(200);
  ASSERT_EQ(recv_b_.size(), std::size(sizes));
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    const Completion& r = recv_b_[i];
    EXPECT_EQ(r.wr_id, 50 + i);
    EXPECT_EQ(r.status, WcStatus::kSuccess);
    EXPECT_EQ(r.opcode, WcOpcode::kRecvRdmaWithImm);
    EXPECT_EQ(r.byte_len, sizes[i]);  // the whole message
    EXPECT_EQ(r.wc_flags & kWcWithImm, kWcWithImm);
    EXPECT_EQ(r.imm_data, kImm + i);
    EXPECT_BYTES(dsts[i], 3 + i * 777, sizes[i]);
    EXPECT_EQ(got_[i].wr_id, 1 + i);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_[i].opcode, WcOpcode::kRdmaWrite);
  }
  // The receives' buffers are untouched: a WRITE_WITH_IMM's bytes go to
  // its remote address.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(vb_.buf[i], 0);
  // Body chunks for 9000 (8192) and 200000 (196608), tails as SENDs.
  EXPECT_EQ(la_->counters().sends_sent, std::size(sizes));
  EXPECT_GT(la_->counters().tail_waits, 0u);
}

// RC order across opcodes (§1): when the SEND's receive completes, the
// WRITE posted before it is in place, every byte, whatever the faults.
TEST_F(ReliableUcSendTest, WriteThenSendTheReceiverSeesTheWrite) {
  const fabric::FaultConfig f = Faults(0.03, 0.02, 0);
  Build(f, f, 13);
  Connect();
  for (int round = 0; round < 6; ++round) {
    const uint64_t dst = (1 << 20) + round * (300 << 10);
    const uint32_t len = 256 << 10;
    PostRecvB(round, round * 64, 64);
    Post(Write(10 + round, round * 13, dst, len));
    Post(Send(20 + round, 100, 64));
    bool seen = false;
    for (int t = 0; t < 200000 && !seen; ++t) {
      Turn();
      if (recv_b_.size() > static_cast<size_t>(round)) {
        seen = true;
        ASSERT_EQ(0, std::memcmp(&vb_.buf[dst], &va_.buf[round * 13], len))
            << "round " << round;
      }
    }
    ASSERT_TRUE(seen) << "round " << round;
  }
  ASSERT_TRUE(RunUntil([&] { return got_.size() == 12; }, 100000));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_[i].wr_id,
              static_cast<uint64_t>(i % 2 == 0 ? 10 + i / 2 : 20 + i / 2));
  }
}

// Many SENDs of mixed sizes under loss, reordering and duplication: every
// receive completes once, in order, with its message's length and bytes.
class ReliableUcSendFaultTest : public ReliableUcSendTest,
                                public ::testing::WithParamInterface<double> {};

TEST_P(ReliableUcSendFaultTest, ManySendsCompleteInOrderExactlyOnce) {
  fabric::FaultConfig f;
  f.loss = GetParam();
  f.p_reorder = 0.01;
  f.reorder_delay_ns = 25'000;
  f.p_dup = 0.01;
  Build(f, f, 21);
  Connect();
  constexpr int kN = 240;
  constexpr uint32_t kSizes[] = {0, 1, 64, 1000, 4095, 4096, 4097, 9000, 20000};
  constexpr uint64_t kSlot = 24 << 10;  // each receive's place at B
  std::mt19937_64 rng(GetParam() * 1000);
  std::vector<uint32_t> len(kN);
  std::vector<uint64_t> src(kN);
  for (int i = 0; i < kN; ++i) {
    len[i] = kSizes[rng() % std::size(kSizes)];
    src[i] = (rng() % 4000) * 3;
  }
  // Receives are posted as they are used (the RQ holds 64): the guest
  // keeps 48 ahead; later ones wait in bounce buffers meanwhile.
  int posted = 0, sent = 0;
  size_t checked = 0;
  auto top_up = [&] {
    while (posted < kN && posted < static_cast<int>(recv_b_.size()) + 48) {
      PostRecvB(1000 + posted, (posted % 200) * kSlot, 12 << 10, 2);
      ++posted;
    }
  };
  top_up();
  const int max_turns = GetParam() > 0.05 ? 3'000'000 : 600'000;
  int turns = 0;
  while ((recv_b_.size() < kN || got_.size() < kN) && turns < max_turns) {
    while (sent < kN && sent < static_cast<int>(got_.size()) + 100) {
      Post(Send(sent, src[sent], len[sent],
                sent % 3 == 0 ? std::optional(kImm + sent) : std::nullopt));
      ++sent;
    }
    Turn();
    ++turns;
    // Verify each receive as it completes (its slot is reused later).
    for (; checked < recv_b_.size(); ++checked) {
      const Completion& r = recv_b_[checked];
      const int i = static_cast<int>(checked);
      ASSERT_EQ(r.wr_id, 1000u + i);
      ASSERT_EQ(r.status, WcStatus::kSuccess) << i;
      ASSERT_EQ(r.byte_len, len[i]) << i;
      ASSERT_EQ(r.imm_data, i % 3 == 0 ? kImm + i : 0u) << i;
      ASSERT_EQ(
          0, std::memcmp(&vb_.buf[(i % 200) * kSlot], &va_.buf[src[i]], len[i]))
          << "SEND " << i << " of " << len[i] << " bytes";
    }
    top_up();
  }
  Run(500);
  ASSERT_EQ(recv_b_.size(), static_cast<size_t>(kN));
  ASSERT_EQ(got_.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got_[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
  }
  const auto& a = la_->counters();
  const auto& b = lb_->counters();
  EXPECT_GT(faulty_a_->fault_stats().lost_random, 0u);
  EXPECT_GT(a.retx_sent, 0u);
  EXPECT_EQ(b.recvs_completed, static_cast<uint64_t>(kN));
  EXPECT_GT(b[WireCounter::kRxDuplicate] + b[WireCounter::kRxAfterDelivery],
            0u);
  std::printf(
      "loss %.2f: %d turns, %llu units sent, %llu again, %llu RACK, "
      "%llu RTO, %llu waits for a receive\n",
      GetParam(), turns, static_cast<unsigned long long>(a.sends_sent),
      static_cast<unsigned long long>(a.retx_sent),
      static_cast<unsigned long long>(a.lost_rack),
      static_cast<unsigned long long>(a.lost_rto),
      static_cast<unsigned long long>(b.rnr_waits));
}

INSTANTIATE_TEST_SUITE_P(Loss, ReliableUcSendFaultTest,
                         ::testing::Values(0.01, 0.10));

// WRITE, WRITE_WITH_IMM, SEND and SEND_WITH_IMM mixed, every fault at
// once, over several seeds: each WR completes once, in order; each
// receive once, in order, with its length and immediate; every byte in
// place, and a receive-consuming message's receive completes only once
// every earlier WRITE is in place (RC order across opcodes, §1).
class ReliableUcMixedSeedTest : public ReliableUcSendTest,
                                public ::testing::WithParamInterface<int> {};

TEST_P(ReliableUcMixedSeedTest, MixedOpcodesEveryByteOnceInOrder) {
  const fabric::FaultConfig f = Faults(0.03, 0.02, 0.02);
  Build(f, f, 100 + GetParam());
  Connect();
  constexpr int kN = 120;
  constexpr uint32_t kSizes[] = {0,    1,    100,   4095, 4096,
                                 4097, 9000, 30000, 70000};
  std::mt19937_64 rng(GetParam());
  struct Msg {
    WrOpcode op;
    uint32_t len;
    uint64_t src, dst;  // dst: WRITEs' remote place
    int rcv = -1;       // the receive it consumes
  };
  std::vector<Msg> msgs(kN);
  int nrecv = 0;
  uint64_t dst = 2 << 20;
  for (Msg& m : msgs) {
    static constexpr WrOpcode kOps[] = {
        WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteWithImm, WrOpcode::kSend,
        WrOpcode::kSendWithImm};
    m.op = kOps[rng() % 4];
    m.len = kSizes[rng() % std::size(kSizes)];
    m.src = (rng() % 5000) * 3;
    m.dst = dst;
    dst += m.len + 4096;
    if (m.op != WrOpcode::kRdmaWrite) m.rcv = nrecv++;
  }
  ASSERT_LT(dst, kBufSize);
  // Receives: 64 KiB + 8 KiB each, from B's buffer (slot i % 24), posted as
  // they are used.
  constexpr uint64_t kSlot = 80 << 10;
  int posted = 0, sent = 0;
  size_t checked = 0;
  auto top_up = [&] {
    while (posted < nrecv && posted < static_cast<int>(recv_b_.size()) + 24) {
      PostRecvB(posted, (posted % 24) * kSlot, 36 << 10, 2);
      ++posted;
    }
  };
  top_up();
  int turns = 0;
  while ((got_.size() < kN || recv_b_.size() < static_cast<size_t>(nrecv)) &&
         turns < 2'000'000) {
    while (sent < kN && sent < static_cast<int>(got_.size()) + 64) {
      const Msg& m = msgs[sent];
      SendWr w =
          m.op == WrOpcode::kRdmaWrite || m.op == WrOpcode::kRdmaWriteWithImm
              ? Write(sent, m.src, m.dst, m.len)
              : Send(sent, m.src, m.len);
      w.opcode = m.op;
      w.imm_data = kImm ^ static_cast<uint32_t>(sent);
      Post(w);
      ++sent;
    }
    Turn();
    ++turns;
    for (; checked < recv_b_.size(); ++checked) {
      const Completion& r = recv_b_[checked];
      const int rcv = static_cast<int>(checked);
      int i = 0;
      while (msgs[i].rcv != rcv) ++i;
      const Msg& m = msgs[i];
      ASSERT_EQ(r.wr_id, static_cast<uint64_t>(rcv));
      ASSERT_EQ(r.status, WcStatus::kSuccess) << i;
      ASSERT_EQ(r.byte_len, m.len) << i;
      ASSERT_EQ(r.imm_data,
                m.op == WrOpcode::kSend ? 0u : kImm ^ static_cast<uint32_t>(i));
      ASSERT_EQ(r.opcode, m.op == WrOpcode::kRdmaWriteWithImm
                              ? WcOpcode::kRecvRdmaWithImm
                              : WcOpcode::kRecv);
      if (m.op == WrOpcode::kSend || m.op == WrOpcode::kSendWithImm) {
        ASSERT_EQ(0, std::memcmp(&vb_.buf[(rcv % 24) * kSlot], &va_.buf[m.src],
                                 m.len))
            << "message " << i;
      }
      // Every WRITE before it, and itself, is in place.
      for (int j = 0; j <= i; ++j) {
        if (msgs[j].op != WrOpcode::kRdmaWrite &&
            msgs[j].op != WrOpcode::kRdmaWriteWithImm) {
          continue;
        }
        ASSERT_EQ(0, std::memcmp(&vb_.buf[msgs[j].dst], &va_.buf[msgs[j].src],
                                 msgs[j].len))
            << "WRITE " << j << " not in place when receive " << rcv
            << " completed";
      }
    }
    top_up();
  }
  Run(300);
  ASSERT_EQ(got_.size(), static_cast<size_t>(kN));
  ASSERT_EQ(recv_b_.size(), static_cast<size_t>(nrecv));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got_[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_[i].opcode, SendCompletionOpcode(msgs[i].op));
    if (msgs[i].op == WrOpcode::kRdmaWrite ||
        msgs[i].op == WrOpcode::kRdmaWriteWithImm) {
      EXPECT_EQ(0, std::memcmp(&vb_.buf[msgs[i].dst], &va_.buf[msgs[i].src],
                               msgs[i].len));
    }
  }
  EXPECT_GT(la_->counters().retx_sent, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReliableUcMixedSeedTest,
                         ::testing::Range(1, 5));

// ---- Receive credits and RNR (§2.3)
// -------------------------------------------

// No receive at B, rnr_retry 2 at A, min_rnr_timer 14 (1.28 ms) at B: B
// holds the SEND for 2.56 ms, drops it and NAKs RNR; A fails the WR
// RNR_RETRY_EXC_ERR and flushes the next.
TEST_F(ReliableUcSendTest, RnrRetryExceededAfterItsBudget) {
  Build();
  QpConf c;
  c.rnr_retry = 2;
  c.min_rnr_timer = 14;
  Connect(c);
  const uint64_t t0 = now_;
  Post(Send(1, 0, 6000));
  Post(Send(2, 0, 10));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 20000));
  EXPECT_EQ(got_[0].wr_id, 1u);
  EXPECT_EQ(got_[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  EXPECT_GE(now_ - t0, 2 * 1'280'000u);
  EXPECT_LT(now_ - t0, 2 * 1'280'000u + 1'000'000u);
  EXPECT_EQ(lb_->counters().rnr_naks, 1u);
  EXPECT_EQ(la_->counters().rnr_exceeded, 1u);
  EXPECT_EQ(lb_->FindConnection(qb_.qpn)->receiver().held(), 0u);
  // A receive posted later is not filled by the dropped message.
  PostRecvB(9, 0, 8192);
  Run(2000);
  EXPECT_TRUE(recv_b_.empty());
  EXPECT_TRUE(got_b_.empty());
}

// The same with half of B's packets lost, its ACKs and NAKs among them:
// the NAK is repeated, and A still fails the WR RNR_RETRY_EXC_ERR, not
// RETRY_EXC_ERR.
TEST_F(ReliableUcSendTest, RnrNakSurvivesLostAcks) {
  fabric::FaultConfig fb;
  fb.loss = 0.5;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    got_.clear();
    la_.reset();  // the layers before what they run over
    lb_.reset();
    Build({}, fb, seed);
    QpConf c;
    c.rnr_retry = 1;
    c.min_rnr_timer = 10;  // 0.32 ms
    c.timeout = 12;        // retry budget 8 x 16.8 ms
    Connect(c);
    ASSERT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kUc);
    Post(Send(1, 0, 3000));
    Post(Send(2, 0, 10));
    ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 100000));
    EXPECT_EQ(got_[0].status, WcStatus::kRnrRetryExcErr);
    EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  }
}

// rnr_retry 7: the SENDs wait at B, for longer than A's retry budget
// (B tells A so in its ACKs), until B posts receives; then every one
// completes, in order, with its bytes.
TEST_F(ReliableUcSendTest, RnrRetrySevenWaitsForAReceive) {
  Build();
  QpConf c;
  c.timeout = 10;  // A's retry budget: 2 x 4.2 ms
  c.retry_cnt = 1;
  Connect(c);
  for (int i = 0; i < 40; ++i) Post(Send(1 + i, i * 100, i % 2 ? 5000 : 100));
  Run(15000);  // 30 ms
  EXPECT_TRUE(got_.empty());
  EXPECT_TRUE(recv_b_.empty());
  reliable::Receiver& rb = lb_->FindConnection(qb_.qpn)->receiver();
  EXPECT_GT(rb.held(), 0u);
  // B holds units in its bounce receives less a quarter (kept for units
  // whose receives are posted); the units held were acknowledged, the
  // others are refused and sent again with the RTO's backoff.
  EXPECT_EQ(rb.held(), 24u);
  std::printf("waiting 30 ms: %llu units sent, %llu again, %llu refused\n",
              static_cast<unsigned long long>(la_->counters().sends_sent),
              static_cast<unsigned long long>(la_->counters().retx_sent),
              static_cast<unsigned long long>(lb_->counters().hold_refused));
  EXPECT_EQ(la_->counters().messages_failed, 0u);
  for (int i = 0; i < 40; ++i) PostRecvB(100 + i, i * 8192, 8192);
  ASSERT_TRUE(RunUntil(
      [&] { return recv_b_.size() == 40 && got_.size() == 40; }, 40000));
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(recv_b_[i].wr_id, 100u + i);
    EXPECT_EQ(recv_b_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(recv_b_[i].byte_len, i % 2 ? 5000u : 100u);
    EXPECT_BYTES(i * 8192, i * 100, i % 2 ? 5000 : 100);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(la_->counters().rnr_exceeded, 0u);
  EXPECT_GT(lb_->counters().rnr_waits, 0u);
  // The refused units went again when the wait ended, not after a backoff.
  EXPECT_GT(la_->counters().resent_after_wait, 0u);
}

// A SEND waits at B for a receive; the ACK that tells its delivery, once
// the receive is posted, carries no entry (the unit was acknowledged while
// it waited) and is lost: B sends it again while nothing new arrives
// (docs/reliability.md §4.3), and A completes within its budget.
TEST_F(ReliableUcSendTest, TheAckOfADeliveryAfterAnRnrWaitIsSentAgainWhenLost) {
  Build();
  Connect();
  Post(Send(1, 0, 100));
  reliable::Receiver& rb = lb_->FindConnection(qb_.qpn)->receiver();
  ASSERT_TRUE(RunUntil([&] { return rb.held() == 1; }, 2000));
  Run(50);  // its ACK, with the waiting flag, reaches A
  ASSERT_TRUE(got_.empty());
  tap_b_->match = [](std::span<const uint8_t> p, const Gid&) {
    return IsUd(p);
  };
  PostRecvB(100, 0, 8192);
  ASSERT_TRUE(RunUntil([&] { return !recv_b_.empty(); }, 1000));
  Run(20);
  EXPECT_GT(tap_b_->matched, 0u);  // the delivery's ACK, lost
  EXPECT_TRUE(got_.empty());
  tap_b_->match = nullptr;
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 2000));
  EXPECT_EQ(got_[0].status, WcStatus::kSuccess);
  EXPECT_GE(lb_->counters().delivery_acks_repeated, 1u);
}

// The guest moves B's QP to ERR with receives posted and SENDs on the
// way: every receive completes once, WR_FLUSH_ERR, none is filled after,
// and a receive posted later flushes at once.
TEST_F(ReliableUcSendTest, GuestErrFlushesEveryReceiveOnce) {
  Build();
  Connect();
  PostRecvB(1, 0, 4096);
  PostRecvB(2, 4096, 4096);
  QpAttr a;
  a.state = QpState::kErr;
  ASSERT_EQ(lb_->ModifyQp(qb_, a, kQpState), Status::kOk);
  for (int i = 0; i < 4; ++i) Post(Send(10 + i, 0, 1000));
  PostRecvB(3, 8192, 4096);
  Run(3000);
  ASSERT_EQ(recv_b_.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(recv_b_[i].wr_id, 1u + i);
    EXPECT_EQ(recv_b_[i].status, WcStatus::kWrFlushErr);
  }
  for (int i = 0; i < 12288; ++i) ASSERT_EQ(vb_.buf[i], 0) << i;
}

// Receives posted before the QP's RTR (the usual order) are kept by the
// layer and filled once it is framed.
TEST_F(ReliableUcSendTest, ReceivesPostedBeforeRtrAreUsed) {
  Build();
  la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), ReliabilityMode::kUc);
  const QpConf c;
  qa_ = MakeQp(*la_, va_, c);
  qb_ = MakeQp(*lb_, vb_, c);
  PostRecvB(5, 100, 3000);
  BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
  BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
  Post(Send(1, 7, 2999));
  ASSERT_TRUE(
      RunUntil([&] { return recv_b_.size() == 1 && got_.size() == 1; }, 20000));
  EXPECT_EQ(recv_b_[0].wr_id, 5u);
  EXPECT_EQ(recv_b_[0].byte_len, 2999u);
  EXPECT_BYTES(100, 7, 2999);
  EXPECT_EQ(lb_->FindConnection(qb_.qpn)->state(), ConnState::kUc);
}

// A peer VM in native mode: receives kept before RTR go to the lower RC
// QP, and SENDs run natively.
TEST_F(ReliableUcSendTest, NativePeerGetsTheReceivesKeptBeforeRtr) {
  Build();
  la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), ReliabilityMode::kNative);
  const QpConf c;
  qa_ = MakeQp(*la_, va_, c);
  qb_ = MakeQp(*lb_, vb_, c);
  PostRecvB(5, 0, 3000);
  BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
  BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
  PostRecvB(6, 4096, 3000);
  Post(Send(1, 7, 2000));
  Post(Send(2, 9, 1000, kImm));
  ASSERT_TRUE(
      RunUntil([&] { return recv_b_.size() == 2 && got_.size() == 2; }, 20000));
  EXPECT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kNative);
  EXPECT_EQ(recv_b_[0].wr_id, 5u);
  EXPECT_EQ(recv_b_[1].wr_id, 6u);
  EXPECT_EQ(recv_b_[1].imm_data, kImm);
  EXPECT_BYTES(0, 7, 2000);
  EXPECT_BYTES(4096, 9, 1000);
  EXPECT_EQ(la_->counters().sends_sent, 0u);
}

// ---- Errors as natively
// ----------------------------------------------------------

// What SoftRnic does natively when a SEND is longer than the receive
// (backend/soft_rnic/README.md): the receive completes LOC_LEN_ERR, the
// sender's WR REM_INV_REQ_ERR, and the receiving QP goes to ERR (its next
// receive flushes). The same test natively and in uc mode.
class ReliableUcSendModeTest
    : public ReliableUcSendTest,
      public ::testing::WithParamInterface<ReliabilityMode> {};

TEST_P(ReliableUcSendModeTest, SendLongerThanTheReceiveIsLocLenErr) {
  const ReliabilityMode mode = GetParam();
  Build();
  Connect({}, mode);
  PostRecvB(1, 0, 100);
  PostRecvB(2, 4096, 100);
  Post(Send(10, 0, 5000));
  Post(Send(11, 0, 10));
  ASSERT_TRUE(
      RunUntil([&] { return recv_b_.size() >= 2 && got_.size() >= 2; }, 20000));
  Run(500);
  ASSERT_EQ(recv_b_.size(), 2u);
  EXPECT_EQ(recv_b_[0].wr_id, 1u);
  EXPECT_EQ(recv_b_[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(recv_b_[1].status, WcStatus::kWrFlushErr);
  ASSERT_EQ(got_.size(), 2u);
  EXPECT_EQ(got_[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(vb_.buf[i], 0) << i;
  // The receiving QP is in ERR.
  Result<QpAttr> qb = lb_->QueryQp(qb_);
  ASSERT_TRUE(qb.ok());
  EXPECT_EQ(qb->state, QpState::kErr);
  int events = 0;
  AsyncEvent ev;
  while (lb_->PollAsyncEvent(&ev)) ++events;
  EXPECT_EQ(events, 0);  // natively none either: the errors are in CQEs
  if (mode == ReliabilityMode::kUc) {
    EXPECT_EQ(lb_->counters().recv_errors, 1u);
    EXPECT_GT(la_->counters().sends_sent, 0u);
  } else {
    EXPECT_EQ(la_->counters().sends_sent, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ReliableUcSendModeTest,
                         ::testing::Values(ReliabilityMode::kNative,
                                           ReliabilityMode::kUc));

// Hostile daemon headers for receives (§3.6): an rcv_index outside the
// receive window, or one that skips a receive, is counted and dropped;
// nothing lands, and the real SEND afterwards completes its receive.
TEST_F(ReliableUcSendTest, HostileRcvIndexIsCountedAndDropped) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  reliable::Connection* kb = lb_->FindConnection(qb_.qpn);
  PostRecvB(1, 0, 4096);
  PostRecvB(2, 4096, 4096);
  auto inject = [&](const reliable::DaemonHeader& h) {
    std::vector<uint8_t> payload(reliable::kHeaderSize + h.data_len, 0x77);
    ASSERT_TRUE(reliable::EncodeHeader(h, payload));
    net::Header p;
    p.opcode = net::kUc | net::kSendOnly;
    p.dest_qpn = kb->data_qpn();
    p.src_qpn = ka->data_qpn();
    p.psn = 0x1234;
    p.dgid = vb_.gid;
    p.sgid = va_.gid;
    Inject(p, payload);
  };
  reliable::DaemonHeader h;
  h.type = reliable::HeaderType::kSendData;
  h.flags = reliable::kHdrLast;
  h.dst_vqpn = qb_.qpn;
  h.conn_token = kb->my_token();
  h.mid = 0;
  h.data_len = 100;
  h.msg_len = 100;
  h.rcv_index = 64;  // the RQ holds 64: outside the window
  inject(h);
  h.rcv_index = 1;  // MID 0 can consume receive 0 only
  inject(h);
  h.rcv_index = 0;
  h.data_len = 50;  // not the unit msg_len says
  inject(h);
  Run(50);
  const auto& b = lb_->counters();
  EXPECT_EQ(b[WireCounter::kRxBadRcvIndex], 2u);
  EXPECT_EQ(b[WireCounter::kRxBadOffset], 1u);
  EXPECT_EQ(b.units_copied, 0u);
  for (int i = 0; i < 8192; ++i) ASSERT_EQ(vb_.buf[i], 0) << i;
  EXPECT_TRUE(recv_b_.empty());
  Post(Send(1, 3, 300));
  ASSERT_TRUE(
      RunUntil([&] { return recv_b_.size() == 1 && got_.size() == 1; }, 20000));
  EXPECT_EQ(recv_b_[0].wr_id, 1u);
  EXPECT_EQ(recv_b_[0].byte_len, 300u);
  EXPECT_BYTES(0, 3, 300);
}

}  // namespace
}  // namespace vrdma::testing
