// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableSwitchTest (step 17, docs/reliability.md §6): a VM's mode
// switched live under WRITE/SEND/READ traffic both ways, over an
// InprocFabric with and without FaultyFabric loss; every WR completes
// once, in order, with success and its bytes in place (the Stream of
// reliable_switch_test_util.h); one end asking alone; forged SWITCH,
// DRAINED and READY; a peer that stops answering mid-switch.
#include <gtest/gtest.h>

#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/reliable_switch_test_util.h"

namespace vrdma::testing {
namespace {

using reliable::QpModeCounts;
using Mode = ReliabilityMode;

// Switches through `modes` (from the first) with traffic running through
// every switch; checks each one ended in the new mode on both ends.
class ReliableSwitchChainTest : public ReliableSwitchTest {
 public:
  void Chain(const std::vector<Mode>& modes, const fabric::FaultConfig& f = {},
             uint64_t seed = 1) {
    QpConf c;
    // Native RC repairs a lost last packet only at its transport timer:
    // 4.096 us << 12 = 17 ms instead of 1 s keeps the lossy runs short.
    c.timeout = 12;
    Setup(modes.front(), c, f, seed);
    ASSERT_EQ(la_->QpModes(va_.gid), Only(modes.front()));
    ASSERT_EQ(lb_->QpModes(vb_.gid), Only(modes.front()));
    size_t total = 0;
    for (size_t i = 1; i < modes.size(); ++i) {
      total += 40;
      Traffic(total, 30);  // traffic running before the switch
      SwitchBoth(modes[i], total);
      ASSERT_TRUE(FinishTraffic(total, 400000)) << "step " << i;
      // The switch ended on both ends.
      if (!RunUntil(
              [&] {
                return Switched(*la_, va_.gid) && Switched(*lb_, vb_.gid);
              },
              100000)) {
        Dump();
        FAIL() << "step " << i << ": the switch did not end";
      }
      EXPECT_EQ(la_->QpModes(va_.gid), Only(modes[i])) << "step " << i;
      EXPECT_EQ(lb_->QpModes(vb_.gid), Only(modes[i])) << "step " << i;
      const bool uc = modes[i] == Mode::kUc;
      const reliable::Connection* ka = la_->FindConnection(qa_.qpn);
      EXPECT_EQ(ka != nullptr && ka->state() == ConnState::kUc, uc);
      // rc: the backup is connected on both ends.
      for (auto [layer, qpn] :
           {std::pair{la_.get(), qa_.qpn}, std::pair{lb_.get(), qb_.qpn}}) {
        const reliable::RcPath* path = layer->FindRcPath(qpn);
        EXPECT_EQ(path != nullptr, modes[i] == Mode::kRc);
        if (path != nullptr) {
          EXPECT_EQ(path->state(), reliable::RcPath::State::kReady);
        }
      }
      ExpectClean();
      if (HasFailure()) return;
    }
    // Traffic after the last switch, then nothing more may come.
    total += 40;
    ASSERT_TRUE(FinishTraffic(total, 400000));
    Run(500);
    ab_.Check(got_, &seen_a_, recv_b_, &seen_rb_);
    ba_.Check(got_b_, &seen_b_, recv_a_, &seen_ra_);
    EXPECT_EQ(got_.size(), total);
    EXPECT_EQ(got_b_.size(), total);
    EXPECT_EQ(recv_a_.size(), ba_.sends.size());
    EXPECT_EQ(recv_b_.size(), ab_.sends.size());
    ExpectClean();
    const uint64_t steps = modes.size() - 1;
    EXPECT_EQ(la_->counters().switches_done, steps);
    EXPECT_EQ(lb_->counters().switches_done, steps);
    EXPECT_EQ(la_->counters().switches_failed, 0u);
    EXPECT_EQ(la_->counters().switch_bad + la_->counters().drained_bad +
                  la_->counters().ready_bad,
              0u);
  }
};

TEST_F(ReliableSwitchChainTest, NativeUcNative) {
  Chain({Mode::kNative, Mode::kUc, Mode::kNative});
}

TEST_F(ReliableSwitchChainTest, UcNativeUc) {
  Chain({Mode::kUc, Mode::kNative, Mode::kUc});
}

// §10 step 17's row: native -> uc -> rc -> native.
TEST_F(ReliableSwitchChainTest, NativeUcRcNative) {
  Chain({Mode::kNative, Mode::kUc, Mode::kRc, Mode::kNative});
}

TEST_F(ReliableSwitchChainTest, RcUcNativeRc) {
  Chain({Mode::kRc, Mode::kUc, Mode::kNative, Mode::kRc});
}

TEST_F(ReliableSwitchChainTest, NativeRcNativeUcRc) {
  Chain({Mode::kNative, Mode::kRc, Mode::kNative, Mode::kUc, Mode::kRc,
         Mode::kUc});
}

TEST_F(ReliableSwitchChainTest, NativeUcRcNativeAtOnePercentLoss) {
  Chain({Mode::kNative, Mode::kUc, Mode::kRc, Mode::kNative},
        Faults(0.01, 0.0, 0.0), 7);
}

TEST_F(ReliableSwitchChainTest, RcUcRcWithLossReorderingDuplication) {
  Chain({Mode::kRc, Mode::kUc, Mode::kRc, Mode::kNative},
        Faults(0.02, 0.01, 0.01), 9);
}

// Every mode to every other under every fault at once, over several
// seeds (the switch's moments fall differently in the traffic).
class ReliableSwitchSeedTest : public ReliableSwitchChainTest,
                               public ::testing::WithParamInterface<uint64_t> {
};

TEST_P(ReliableSwitchSeedTest, EveryPairOfModesUnderEveryFault) {
  Chain({Mode::kNative, Mode::kUc, Mode::kRc, Mode::kNative, Mode::kRc,
         Mode::kUc, Mode::kNative},
        Faults(0.02, 0.01, 0.01), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReliableSwitchSeedTest,
                         ::testing::Values(11, 12, 13, 14, 15, 16));

TEST_F(ReliableSwitchChainTest, NativeUcNativeAtOnePercentLoss) {
  Chain({Mode::kNative, Mode::kUc, Mode::kNative, Mode::kUc},
        Faults(0.01, 0.0, 0.0), 3);
}

TEST_F(ReliableSwitchChainTest, UcNativeWithLossReorderingDuplication) {
  Chain({Mode::kUc, Mode::kNative, Mode::kUc, Mode::kNative},
        Faults(0.02, 0.01, 0.01), 5);
}

// The held WRs: posted while the switch drains, they go first on the new
// path, in post order.
TEST_F(ReliableSwitchTest, WrsPostedDuringTheSwitchAreHeldAndGoFirst) {
  Setup(Mode::kNative);
  Traffic(20, 40);
  SwitchBothNow(Mode::kUc);
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  Traffic(60, 1, 40);
  ASSERT_TRUE(FinishTraffic(60, 400000));
  ASSERT_TRUE(RunUntil([&] { return Switched(*la_, va_.gid); }, 1000));
  EXPECT_EQ(la_->QpModes(va_.gid), Only(Mode::kUc));
  EXPECT_GT(la_->counters().switch_wrs_held, 0u);
  ExpectClean();
}

// The VM's mode is what its QPs converge to: a SetMode while a QP's switch
// runs is asked once that switch ended (uc first, then rc), whatever else
// it waited for.
TEST_F(ReliableSwitchTest, AModeSetDuringASwitchIsAskedWhenItEnds) {
  Setup(Mode::kNative);
  Traffic(20, 40);
  SwitchBothNow(Mode::kUc);
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kRc);
  Traffic(60, 5);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kRc);
  ASSERT_TRUE(FinishTraffic(200, 400000));
  ASSERT_TRUE(BothSettleIn(Mode::kRc));
  EXPECT_EQ(la_->counters().switches_done, 2u);
  EXPECT_EQ(lb_->counters().switches_done, 2u);
  ExpectClean();
}

// A SetMode while a QP still connects (CONNECT unanswered) is asked once
// it connected: both VMs set back to native before their uc connection
// was agreed end native, through a switch.
TEST_F(ReliableSwitchTest, AModeSetWhileConnectingIsAskedOnceConnected) {
  Setup(Mode::kUc, {}, {}, 1, {.settle_turns = 0});
  ASSERT_NE(la_->FindConnection(qa_.qpn), nullptr);
  ASSERT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kConnecting);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kNative);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kNative);
  ASSERT_TRUE(FinishTraffic(120, 400000));
  ASSERT_TRUE(BothSettleIn(Mode::kNative));
  EXPECT_EQ(la_->counters().connects_uc, 1u);
  EXPECT_EQ(la_->counters().switches_done, 1u);
  ExpectClean();
}

// One end asks, the other does not: the QP stays in its old mode and
// counts as switching there; traffic is untouched. When the other asks
// later, the switch runs.
TEST_F(ReliableSwitchTest, OneSideAloneStaysInItsModeUntilThePeerAsks) {
  Setup(Mode::kNative);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kUc);
  ASSERT_TRUE(FinishTraffic(60, 400000));
  Run(200);
  EXPECT_EQ(la_->QpModes(va_.gid), (QpModeCounts{0, 0, 0, 1}));
  EXPECT_EQ(lb_->QpModes(vb_.gid), Only(Mode::kNative));
  EXPECT_EQ(la_->FindConnection(qa_.qpn), nullptr);
  EXPECT_EQ(la_->counters().switches_begun, 0u);
  ExpectClean();
  // B asks another mode than A: still nothing.
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kNative);
  Run(100);
  EXPECT_EQ(la_->counters().switches_begun, 0u);
  // Now the same one.
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kUc);
  ASSERT_TRUE(FinishTraffic(120, 400000));
  ASSERT_TRUE(RunUntil(
      [&] { return Switched(*la_, va_.gid) && Switched(*lb_, vb_.gid); },
      100000));
  EXPECT_EQ(la_->QpModes(va_.gid), Only(Mode::kUc));
  EXPECT_EQ(lb_->QpModes(vb_.gid), Only(Mode::kUc));
  ExpectClean();
}

// A's VM was already in uc when its QP connected to B's native one, so
// the QP runs native (CONNECT_NATIVE, §2.2) and A has nothing to ask.
// When B's operator sets uc later, B's ask meets A's VM mode: A asks too,
// and both QPs switch to uc. Either order of the operators works.
TEST_F(ReliableSwitchTest, APeersAskMatchingTheVmsModeIsAnswered) {
  SetupModes(/*mode_a=*/Mode::kUc, /*mode_b=*/Mode::kNative);
  ASSERT_EQ(la_->QpModes(va_.gid), Only(Mode::kNative));
  ASSERT_TRUE(FinishTraffic(40, 400000));
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kUc);
  ASSERT_TRUE(FinishTraffic(120, 400000));
  ASSERT_TRUE(BothSettleIn(Mode::kUc));
  EXPECT_EQ(la_->counters().switches_done, 1u);
  ExpectClean();
}

// A SetMode while a QP is in RTR (framed for the mode its VM had then) is
// asked at RTS. Here A's ask reaches B's daemon before B's QP exists and is
// dropped there; B's CONNECT, answered CONNECT_NATIVE by A, brings A's ask
// again, and B, whose VM is in uc, asks too.
TEST_F(ReliableSwitchTest, AModeSetInRtrIsAskedAtRts) {
  SetupModes(/*mode_a=*/Mode::kNative, /*mode_b=*/Mode::kUc, {}, {}, 1,
             {.at_rtr_a = [&] { la_->SetMode(std::span(&va_.gid, 1), Mode::kUc); },
              .turns_before_b = 10});
  ASSERT_TRUE(FinishTraffic(120, 400000));
  ASSERT_TRUE(BothSettleIn(Mode::kUc));
  EXPECT_EQ(la_->counters().switches_done, 1u);
  EXPECT_EQ(lb_->counters().switch_bad, 1u);  // the first ask, before B's QP
  ExpectClean();
}

// A WR held during a switch that the new path does not carry (LOCAL_INV:
// uc carries no memory-window operation) completes as an RNIC completes a
// WQE it cannot execute: the WRs before it succeed, it fails
// LOC_QP_OP_ERR, the QP goes to ERR and what follows flushes, once each.
TEST_F(ReliableSwitchTest, AHeldWrTheNewPathRefusesFailsAfterTheWrsBeforeIt) {
  Setup(Mode::kNative);
  SwitchBothNow(Mode::kUc);
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  const size_t before = got_.size();
  Post(Write(901, 0, 0, 8192));
  Post(Write(902, 8192, 8192, 100));
  SendWr inv;
  inv.wr_id = 903;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = kSendSignaled;
  inv.invalidate_rkey = va_.mr.rkey;
  Post(inv);
  Post(Write(904, 16384, 16384, 64));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= before + 4; }, 100000));
  Run(200);
  ASSERT_EQ(got_.size(), before + 4);
  const uint64_t ids[] = {901, 902, 903, 904};
  const WcStatus want[] = {WcStatus::kSuccess, WcStatus::kSuccess,
                           WcStatus::kLocQpOpErr, WcStatus::kWrFlushErr};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got_[before + i].wr_id, ids[i]) << i;
    EXPECT_EQ(got_[before + i].status, want[i]) << i;
  }
  EXPECT_EQ(0, std::memcmp(vb_.buf.data(), va_.buf.data(), 8192));
  EXPECT_EQ(la_->FindQp(qa_.id)->attr.state, QpState::kErr);
  EXPECT_EQ(la_->counters().switches_failed, 1u);
  EXPECT_EQ(la_->QpModes(va_.gid).uc, 0u);  // a QP in ERR counts in none
}

// A takes its ask back before B asks: nothing switches.
TEST_F(ReliableSwitchTest, AnAskTakenBackIsNotMatched) {
  Setup(Mode::kNative);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kUc);
  Run(10);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kNative);
  Run(10);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kUc);
  ASSERT_TRUE(FinishTraffic(60, 400000));
  Run(200);
  EXPECT_EQ(la_->QpModes(va_.gid), Only(Mode::kNative));
  EXPECT_EQ(lb_->QpModes(vb_.gid), (QpModeCounts{0, 0, 0, 1}));
  EXPECT_EQ(lb_->counters().switches_begun, 0u);
  ExpectClean();
}

// Forged and unmatched SWITCH, DRAINED, READY: counted, dropped, and the
// QP's traffic and mode untouched.
TEST_F(ReliableSwitchTest, ForgedMessagesAreCountedAndDropped) {
  Setup(Mode::kNative);
  Traffic(20, 20);
  const auto deliver = [&](uint64_t origin, peer::MsgType type,
                           peer::Body body) {
    peer::PeerMessage m;
    m.type = type;
    m.origin = origin;
    m.seq = 1000;
    m.body = std::move(body);
    uint8_t buf[peer::kMaxMessageBytes];
    const size_t n = peer::Encode(m, buf);
    ASSERT_GT(n, 0u);
    la_->OnPeerMessage(std::span<const uint8_t>(buf, n));
  };
  peer::Switch s;
  s.vqpn = qa_.qpn;
  s.conn_token = 0x1234;
  s.data_qpn = qb_.qpn;
  s.data_psn = 1;
  s.backup_qpn = qb_.qpn;
  s.backup_psn = 1;
  s.to_mode = peer::Mode::kUc;
  const auto bad = [&] { return la_->own_counters().switch_bad; };
  uint64_t before = bad();
  deliver(3, peer::MsgType::kSwitch, s);  // not the QP's peer daemon
  EXPECT_EQ(bad(), before + 1);
  peer::Switch other = s;
  other.vqpn = qa_.qpn + 77;  // no such QP
  deliver(2, peer::MsgType::kSwitch, other);
  EXPECT_EQ(bad(), before + 2);
  other = s;
  other.backup_qpn = qb_.qpn + 1;  // not the peer's end of the pair
  deliver(2, peer::MsgType::kSwitch, other);
  EXPECT_EQ(bad(), before + 3);
  // A well-formed one from the peer daemon is its ask, kept until A asks
  // (here: native, A's mode, which no ask of A's matches); its replay is
  // refused.
  s.to_mode = peer::Mode::kNative;
  deliver(2, peer::MsgType::kSwitch, s);
  EXPECT_EQ(bad(), before + 3);
  deliver(2, peer::MsgType::kSwitch, s);
  EXPECT_EQ(bad(), before + 4);
  // DRAINED and READY with no switch running.
  deliver(2, peer::MsgType::kDrained, peer::Drained{qa_.qpn, 0, 0});
  EXPECT_EQ(la_->own_counters().drained_bad, 1u);
  deliver(2, peer::MsgType::kReady, peer::Ready{qa_.qpn});
  EXPECT_EQ(la_->own_counters().ready_bad, 1u);
  // A forged SWITCH never starts A's switch: A asks native -> nothing, and
  // the traffic runs natively.
  ASSERT_TRUE(FinishTraffic(80, 400000));
  EXPECT_EQ(la_->QpModes(va_.gid), Only(Mode::kNative));
  EXPECT_EQ(la_->counters().switches_begun, 0u);
  ExpectClean();

  // Now a real switch; while it runs, READY before DRAINED, DRAINED from
  // another daemon, and READY twice are refused.
  la_->SetMode(std::span(&va_.gid, 1), Mode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kUc);
  Turn();  // the SWITCHes cross: both hold
  const uint64_t ready_before = la_->own_counters().ready_bad;
  const uint64_t drained_before = la_->own_counters().drained_bad;
  if (la_->QpModes(va_.gid).switching == 1 &&
      la_->counters().switches_begun == 1 &&
      la_->counters().switches_done == 0) {
    deliver(2, peer::MsgType::kReady, peer::Ready{qa_.qpn});
    EXPECT_EQ(la_->own_counters().ready_bad, ready_before + 1);
    deliver(3, peer::MsgType::kDrained, peer::Drained{qa_.qpn, 0, 0});
    EXPECT_EQ(la_->own_counters().drained_bad, drained_before + 1);
  } else {
    ADD_FAILURE() << "the switch ended before the forged messages";
  }
  ASSERT_TRUE(FinishTraffic(140, 400000));
  ASSERT_TRUE(RunUntil(
      [&] { return Switched(*la_, va_.gid) && Switched(*lb_, vb_.gid); },
      100000));
  EXPECT_EQ(la_->QpModes(va_.gid), Only(Mode::kUc));
  deliver(2, peer::MsgType::kReady, peer::Ready{qa_.qpn});  // after the end
  EXPECT_EQ(la_->own_counters().ready_bad, ready_before + 2);
  ExpectClean();
}

// The engine polls a CQ only while it is owed a guest completion there:
// a switch whose QPs' CQs nobody polls still ends (the layer polls them
// for its drain marker and the flushes of the receives it takes back),
// and a guest completion it met on the way reaches the guest once, in
// order, when the CQ is polled again.
class ReliableSwitchUnpolledTest : public ReliableSwitchTest,
                                   public ::testing::WithParamInterface<Mode> {};

TEST_P(ReliableSwitchUnpolledTest, ASwitchEndsWhileNobodyPollsTheCqs) {
  Setup(Mode::kNative);
  // B keeps receives posted (they are taken back and posted again).
  for (uint64_t i = 0; i < 4; ++i) PostRecvB(700 + i, kRecvDst + i * kSlot, 64);
  Run(20);
  collect_ = false;
  Post(Write(800, 0, kWriteDst, 100));  // its completion waits in A's CQ
  Run(50);
  la_->SetMode(std::span(&va_.gid, 1), GetParam());
  lb_->SetMode(std::span(&vb_.gid, 1), GetParam());
  ASSERT_TRUE(RunUntil(
      [&] { return Switched(*la_, va_.gid) && Switched(*lb_, vb_.gid); },
      20000));
  EXPECT_EQ(la_->counters().switches_done, 1u);
  EXPECT_EQ(lb_->counters().switches_done, 1u);
  collect_ = true;
  Run(20);
  ASSERT_EQ(got_.size(), 1u);
  EXPECT_EQ(got_[0].wr_id, 800u);
  EXPECT_EQ(got_[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(recv_b_.empty());  // B's receives: taken back, not flushed
  // They are still there: a SEND on the new path lands in the first.
  Post(Send(801, 0, 64));
  ASSERT_TRUE(RunUntil([&] { return recv_b_.size() == 1; }, 20000));
  EXPECT_EQ(recv_b_[0].wr_id, 700u);
  EXPECT_EQ(recv_b_[0].status, WcStatus::kSuccess);
}

INSTANTIATE_TEST_SUITE_P(ToUcAndRc, ReliableSwitchUnpolledTest,
                         ::testing::Values(Mode::kUc, Mode::kRc));

// A drain that takes longer than the retry budget but keeps progressing
// (a slow bottleneck under many large WRITEs) fails nothing: a held WR's
// budget counts from the switch's last progress, as a native WR waits
// behind earlier ones for as long as they progress.
TEST_F(ReliableSwitchTest, ASlowDrainThatProgressesOutlastsTheBudget) {
  QpConf c;
  c.timeout = 8;  // 4.096 us << 8 = 1.05 ms; x (7 + 1): 8.4 ms
  fabric::FaultConfig f;
  f.bottleneck_bps = 200'000'000;  // 1 MiB in 42 ms
  Setup(Mode::kUc, c, f);
  for (uint64_t i = 0; i < 16; ++i) {
    Post(Write(100 + i, i * 65536, kWriteDst + i * 65536, 65536));
  }
  Run(10);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kNative);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kNative);
  Turn();
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  for (uint64_t i = 0; i < 3; ++i) Post(Write(200 + i, 0, kWriteDst, 100));
  const uint64_t t0 = now_;
  ASSERT_TRUE(RunUntil([&] { return got_.size() == 19; }, 200000));
  const uint64_t budget = 8ull * (4096ull << 8);
  EXPECT_GT(now_ - t0, budget);  // the drain outlasted the budget
  for (size_t i = 0; i < got_.size(); ++i) {
    EXPECT_EQ(got_[i].wr_id, i < 16 ? 100 + i : 200 + (i - 16));
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess) << i;
  }
  EXPECT_EQ(la_->counters().switches_done, 1u);
  EXPECT_EQ(la_->counters().switches_failed, 0u);
  EXPECT_EQ(la_->QpModes(va_.gid), Only(Mode::kNative));
}

// The peer stops answering mid-switch (its DRAINED never comes): the WRs
// A holds wait for the retry budget of the oldest, which then fails
// RETRY_EXC_ERR, the rest WR_FLUSH_ERR, each once, in order.
TEST_F(ReliableSwitchTest, StalledPeerFailsTheOldestHeldWrAtItsBudget) {
  QpConf c;
  c.timeout = 8;  // 4.096 us << 8 = 1.05 ms; x (7 + 1): 8.4 ms
  Setup(Mode::kNative, c);
  ASSERT_TRUE(FinishTraffic(20, 100000));
  la_->SetMode(std::span(&va_.gid, 1), Mode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kUc);
  link_b_->drop = true;  // B's SWITCH is in A's inbox; nothing after it
  Turn();
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  const size_t before = got_.size();
  for (uint64_t i = 0; i < 3; ++i) Post(Write(900 + i, 0, kWriteDst, 100));
  const uint64_t t0 = now_;
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= before + 3; }, 20000));
  const uint64_t budget = 8ull * (4096ull << 8);
  EXPECT_GE(now_ - t0, budget);
  EXPECT_LE(now_ - t0, budget + 200'000);
  Run(200);
  ASSERT_EQ(got_.size(), before + 3);
  EXPECT_EQ(got_[before].wr_id, 900u);
  EXPECT_EQ(got_[before].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(got_[before + 1].wr_id, 901u);
  EXPECT_EQ(got_[before + 1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(got_[before + 2].wr_id, 902u);
  EXPECT_EQ(got_[before + 2].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(la_->counters().switches_failed, 1u);
  EXPECT_EQ(la_->QpModes(va_.gid).switching, 0u);
  Result<QpAttr> qa = la_->QueryQp(qa_);
  ASSERT_TRUE(qa.ok());
  EXPECT_EQ(qa->state, QpState::kErr);
  // A later post completes WR_FLUSH_ERR, once.
  Post(Write(950, 0, kWriteDst, 10));
  Run(50);
  ASSERT_EQ(got_.size(), before + 4);
  EXPECT_EQ(got_[before + 3].wr_id, 950u);
  EXPECT_EQ(got_[before + 3].status, WcStatus::kWrFlushErr);
}

// A held WR's inline bytes are copied when it is held: the guest may
// reuse its buffer as soon as PostSend returns.
TEST_F(ReliableSwitchTest, HeldInlineWrsKeepTheirBytes) {
  Setup(Mode::kNative);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kUc);
  Turn();
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  std::vector<uint8_t> expect;
  for (uint64_t i = 0; i < 4; ++i) {
    uint8_t bytes[48];
    for (size_t j = 0; j < sizeof(bytes); ++j) {
      bytes[j] = static_cast<uint8_t>(0xa0 + i * 16 + j);
    }
    expect.insert(expect.end(), bytes, bytes + sizeof(bytes));
    SendWr w = Write(800 + i, 0, kWriteDst + i * 64, sizeof(bytes));
    w.send_flags |= kSendInline;
    w.inline_data = bytes;
    w.inline_len = sizeof(bytes);
    Post(w);
    std::memset(bytes, 0xee, sizeof(bytes));  // the guest reuses it
  }
  ASSERT_TRUE(RunUntil([&] { return got_.size() == 4; }, 100000));
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got_[i].wr_id, 800 + i);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(0, std::memcmp(&vb_.buf[kWriteDst + i * 64], &expect[i * 48], 48))
        << i;
  }
  EXPECT_EQ(la_->QpModes(va_.gid), Only(Mode::kUc));
  EXPECT_EQ(la_->counters().switch_wrs_held, 4u);
}

// From uc, the peer goes silent (its ACKs and its peer messages lost)
// with WRs in flight: the old path's own budget fails the oldest
// RETRY_EXC_ERR, then every later WR, the held ones too, WR_FLUSH_ERR.
TEST_F(ReliableSwitchTest, SilentPeerFromUcFailsInFlightThenHeld) {
  QpConf c;
  c.timeout = 8;
  Setup(Mode::kUc, c);
  ASSERT_TRUE(FinishTraffic(10, 100000));
  const size_t before = got_.size();
  tap_b_->match = [](std::span<const uint8_t>, const Gid&) { return true; };
  Post(Write(600, 0, kWriteDst, 5000));
  Post(Write(601, 0, kWriteDst + 8192, 10));
  Run(5);
  la_->SetMode(std::span(&va_.gid, 1), Mode::kNative);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kNative);
  link_b_->drop = true;
  Turn();
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  Post(Write(602, 0, kWriteDst + 16384, 10));
  Post(Write(603, 0, kWriteDst + 24576, 10));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= before + 4; }, 40000));
  Run(200);
  ASSERT_EQ(got_.size(), before + 4);
  const WcStatus want[] = {WcStatus::kRetryExcErr, WcStatus::kWrFlushErr,
                           WcStatus::kWrFlushErr, WcStatus::kWrFlushErr};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got_[before + i].wr_id, 600 + i) << i;
    EXPECT_EQ(got_[before + i].status, want[i]) << i;
  }
  EXPECT_EQ(la_->counters().switches_failed, 1u);
}

// The guest moves its QP to ERR while a switch holds WRs: they flush, in
// order, once.
TEST_F(ReliableSwitchTest, GuestErrorDuringASwitchFlushesTheHeldWrs) {
  Setup(Mode::kNative);
  ASSERT_TRUE(FinishTraffic(10, 100000));
  const size_t before = got_.size();
  la_->SetMode(std::span(&va_.gid, 1), Mode::kRc);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kRc);
  link_b_->drop = true;  // the switch cannot end
  Turn();
  ASSERT_EQ(la_->counters().switches_begun, 1u);
  for (uint64_t i = 0; i < 3; ++i) Post(Write(700 + i, 0, kWriteDst, 10));
  Run(20);
  ASSERT_EQ(got_.size(), before);  // held
  QpAttr a;
  a.state = QpState::kErr;
  ASSERT_EQ(la_->ModifyQp(qa_, a, kQpState), Status::kOk);
  Run(50);
  ASSERT_EQ(got_.size(), before + 3);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got_[before + i].wr_id, 700 + i);
    EXPECT_EQ(got_[before + i].status, WcStatus::kWrFlushErr);
  }
  EXPECT_EQ(la_->QpModes(va_.gid).switching, 0u);
}

// Several QPs of the VM: one switching does not stop the others (they
// are served by Progress() meanwhile), and QpModes counts them all.
TEST_F(ReliableSwitchTest, QpModesCountsEveryQpOfTheVm) {
  Setup(Mode::kNative);
  // A second pair whose B end is another VM (native, never asks).
  UcVm vc;
  MakeVm(*lb_, &vc, 4);
  link_b_->AddGid(vc.gid);
  lb_->SetMode(std::span(&vc.gid, 1), Mode::kNative);
  const QpConf c;
  UcVm va2 = va_;  // A's VM, with CQs of its own for the second QP
  va2.scq = *la_->CreateCq(64);
  va2.rcq = *la_->CreateCq(64);
  const RnicQp qa2 = MakeQp(*la_, va2, c);
  const RnicQp qc = MakeQp(*lb_, vc, c);
  BringUp(*la_, qa2, va_.gid, vc.gid, qc.qpn, c);
  BringUp(*lb_, qc, vc.gid, va_.gid, qa2.qpn, c);
  Run(20);
  EXPECT_EQ(la_->QpModes(va_.gid), (QpModeCounts{2, 0, 0, 0}));
  la_->SetMode(std::span(&va_.gid, 1), Mode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), Mode::kUc);
  // qa_ switches; qa2 asks alone (vc never asks) and keeps running natively.
  Traffic(60, 20);
  const auto write2 = [&](uint64_t id) {
    SendWr w = Write(id, 0, kWriteDst, 64);
    w.remote_addr = vc.at(0);
    w.rkey = vc.mr.rkey;
    Status st = Status::kOk;
    ASSERT_EQ(la_->PostSend(qa2, std::span(&w, 1), &st), 1);
  };
  write2(7001);
  ASSERT_TRUE(FinishTraffic(60, 400000));
  ASSERT_TRUE(RunUntil(
      [&] {
        return la_->QpModes(va_.gid) == QpModeCounts{0, 0, 1, 1};
      },
      100000));
  ExpectClean();
  // qa2's WRITE completed natively, with success, once.
  std::array<Completion, 8> out;
  ASSERT_EQ(la_->PollCq(va2.scq, out), 1);
  EXPECT_EQ(out[0].wr_id, 7001u);
  EXPECT_EQ(out[0].status, WcStatus::kSuccess);
  EXPECT_EQ(out[0].qpn, qa2.qpn);
  EXPECT_EQ(lb_->QpModes(vb_.gid), Only(Mode::kUc));
  EXPECT_EQ(lb_->QpModes(vc.gid), Only(Mode::kNative));
  EXPECT_EQ(la_->QpModes(HostGid(99)), (QpModeCounts{}));  // no such VM
}

}  // namespace
}  // namespace vrdma::testing
