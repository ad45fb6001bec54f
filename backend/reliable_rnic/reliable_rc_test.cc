// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// rc mode (docs/reliability.md §5, step 16) on the fixture of
// reliable_uc_test_util.h: both VMs in rc mode, so each virtual RC QP runs
// natively on its lower RC QP (retry_cnt 2) with a backup RC QP connected
// to the peer's. A primary pair blackholed (the Tap drops every packet
// towards one QP of the pair: a flow of its own, as a failed ECMP path
// would) is recovered by RECOVER / RECOVERED and the takeover: no guest
// error, every byte verified, every WR completed once in order, the WRs
// the peer executed before its epsn not sent again.
#include <cstring>

#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace vrdma::testing {
namespace {

using reliable::RcPath;

class ReliableRcTest : public ReliableUcTest {
 protected:
  // A 1.05 ms ACK timeout: the lower's 3 tries end after ~3.1 ms, the
  // guest's budget (retry_cnt 7) after 8.4 ms.
  static QpConf Conf() {
    QpConf c;
    c.timeout = 8;
    c.retry_cnt = 7;
    return c;
  }
  void RcConnect() { ReliableUcTest::RcConnect(Conf()); }

  RcPath* PathA() { return la_->FindRcPath(qa_.qpn); }
  RcPath* PathB() { return lb_->FindRcPath(qb_.qpn); }

  // Drops every packet `tap` sends towards a QP in qpns (the blackholed
  // flows).
  static void Blackhole(Tap& tap, std::vector<uint32_t> qpns) {
    tap.hold = false;
    tap.match = [qpns](std::span<const uint8_t> p, const Gid&) {
      const uint32_t d = HeaderOf(p).dest_qpn;
      return std::find(qpns.begin(), qpns.end(), d) != qpns.end();
    };
  }


  void FillB(uint64_t off, uint64_t len) {
    for (uint64_t i = 0; i < len; ++i) {
      vb_.buf[off + i] = static_cast<uint8_t>(i * 13 + i / 1021 + 5);
    }
  }

  // A peer message from daemon `origin` handed to A's layer.
  void ToA(uint64_t origin, peer::MsgType type, const peer::Body& body) {
    peer::PeerMessage m;
    m.type = type;
    m.origin = origin;
    m.seq = ++forged_seq_;
    m.body = body;
    uint8_t buf[peer::kMaxMessageBytes];
    const size_t n = peer::Encode(m, buf);
    ASSERT_GT(n, 0u);
    la_->OnPeerMessage(std::span(buf, n));
  }

  // Build again: the previous daemons go before their fabric.
  void Rebuild(const fabric::FaultConfig& fa, const fabric::FaultConfig& fb,
               uint64_t seed) {
    la_.reset();
    lb_.reset();
    soft_a_.reset();
    soft_b_.reset();
    tap_a_.reset();
    tap_b_.reset();
    faulty_a_.reset();
    faulty_b_.reset();
    fabric_.reset();
    got_.clear();
    got_b_.clear();
    recv_a_.clear();
    recv_b_.clear();
    Build(fa, fb, seed);
  }

  uint64_t forged_seq_ = 1000;
};

TEST_F(ReliableRcTest, ConnectsBackupsAndCarriesWritesNatively) {
  Build();
  RcConnect();
  EXPECT_EQ(la_->counters().rc_connects, 1u);
  EXPECT_EQ(lb_->counters().rc_connects, 1u);
  EXPECT_NE(PathA()->backup_qpn(), qa_.qpn);
  EXPECT_EQ(PathA()->peer_backup_qpn(), PathB()->backup_qpn());
  // The lower RC QP retries twice; the guest's attributes are its own.
  EXPECT_EQ(soft_a_->QueryQp(qa_)->retry_cnt, reliable::kRcLowerRetryCnt);
  EXPECT_EQ(la_->QueryQp(qa_)->retry_cnt, 7);
  PostAndVerify(MixedPlan(30, 3), 20000);
  EXPECT_EQ(la_->counters().chunks_sent, 0u);  // no framing
  EXPECT_EQ(la_->counters().rc_recoveries, 0u);
}

// WRITEs, SENDs and READs in flight when the primary pair is blackholed
// both ways: recovered on the backup without a guest error.
TEST_F(ReliableRcTest, PrimaryBlackholedMidRunIsTakenOverWithoutGuestError) {
  Build();
  RcConnect();
  FillB(4 << 20, 2 << 20);
  struct Wr {
    WrOpcode op;
    uint64_t src, dst;
    uint32_t len;
  };
  std::vector<Wr> plan;
  std::mt19937_64 rng(7);
  static constexpr uint32_t kSizes[] = {0, 1, 1000, 1024, 4096, 5000, 65536};
  uint64_t wdst = 0, sdst = 2 << 20, rsrc = 4 << 20;
  int sends = 0;
  for (int i = 0; i < 60; ++i) {
    const uint32_t len = kSizes[rng() % std::size(kSizes)];
    switch (i % 3) {
      case 0:
        plan.push_back({WrOpcode::kRdmaWrite, (rng() % 1000) * 7, wdst, len});
        wdst += len + 4096;
        break;
      case 1: {
        const uint32_t l = std::min<uint32_t>(len, 8192);
        PostRecvB(500 + sends++, sdst, 8192);
        plan.push_back({WrOpcode::kSend, (rng() % 1000) * 7, sdst, l});
        sdst += 8192;
        break;
      }
      default:
        plan.push_back({WrOpcode::kRdmaRead, rsrc, rsrc, len});
        rsrc += len + 4096;
    }
  }
  Run(3);
  for (size_t i = 0; i < plan.size(); ++i) {
    const Wr& w = plan[i];
    if (w.op == WrOpcode::kRdmaWrite) Post(Write(100 + i, w.src, w.dst, w.len));
    if (w.op == WrOpcode::kSend) Post(Send(100 + i, w.src, w.len));
    if (w.op == WrOpcode::kRdmaRead) Post(Read(100 + i, w.src, w.dst, w.len));
  }
  Run(4);  // some execute, some are on the wire, most wait
  const uint64_t blackholed_at = now_;
  Blackhole(*tap_a_, {qb_.qpn});
  Blackhole(*tap_b_, {qa_.qpn});
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= plan.size(); }, 20000))
      << got_.size() << " of " << plan.size();
  Run(500);
  ASSERT_EQ(got_.size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(got_[i].wr_id, 100 + i);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess) << i;
    EXPECT_EQ(got_[i].qpn, qa_.qpn);
    const Wr& w = plan[i];
    if (w.op == WrOpcode::kRdmaWrite) {
      EXPECT_EQ(0, std::memcmp(&vb_.buf[w.dst], &va_.buf[w.src], w.len)) << i;
    } else if (w.op == WrOpcode::kSend) {
      EXPECT_EQ(0, std::memcmp(&vb_.buf[w.dst], &va_.buf[w.src], w.len)) << i;
    } else {
      EXPECT_EQ(got_[i].byte_len, w.len);
      EXPECT_EQ(0, std::memcmp(&va_.buf[w.dst], &vb_.buf[w.src], w.len)) << i;
    }
  }
  ASSERT_EQ(recv_b_.size(), static_cast<size_t>(sends));
  for (int i = 0; i < sends; ++i) {
    EXPECT_EQ(recv_b_[i].wr_id, 500u + i);
    EXPECT_EQ(recv_b_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(recv_b_[i].qpn, qb_.qpn);
  }
  const auto& c = la_->counters();
  EXPECT_EQ(c.rc_takeovers, 1u);
  EXPECT_EQ(lb_->counters().rc_takeovers, 1u);
  EXPECT_EQ(c.rc_failed_to_guest, 0u);
  EXPECT_GT(c.rc_resubmitted, 0u);
  EXPECT_EQ(PathA()->send_qpn(), PathA()->backup_qpn());
  std::printf(
      "[ rc ] blackholed at +%llu us: takeover %llu us after the failure, "
      "%llu WRs completed below epsn, %llu resubmitted, done at +%llu us\n",
      static_cast<unsigned long long>((blackholed_at - 1'000'000'000) / 1000),
      static_cast<unsigned long long>(c.rc_takeover_ns_last / 1000),
      static_cast<unsigned long long>(c.rc_completed_below_epsn),
      static_cast<unsigned long long>(c.rc_resubmitted),
      static_cast<unsigned long long>((now_ - blackholed_at) / 1000));
  // The failed pair is reset after the delay and is the next backup.
  Run(1000);
  EXPECT_EQ(la_->counters().rc_resets, 1u);
  EXPECT_EQ(lb_->counters().rc_resets, 1u);
  EXPECT_TRUE(PathA()->spare_ready());
  // Traffic keeps going on the new primary, then on the reset pair after a
  // second failure of the (former) backup's path.
  got_.clear();
  PostAndVerify({{900, 0, 7 << 20, 30000}}, 2000);
  Blackhole(*tap_a_, {PathB()->backup_qpn()});
  Blackhole(*tap_b_, {PathA()->backup_qpn()});
  got_.clear();
  PostAndVerify({{901, 100, 7 << 20, 60000}}, 20000);
  EXPECT_EQ(la_->counters().rc_takeovers, 2u);
  EXPECT_EQ(PathA()->send_qpn(), qa_.qpn);
}

// B §A.2.1: the peer executed the WRITEs but every ACK was lost (only the
// direction towards A is blackholed). RECOVERED's epsn is past all of
// them: they complete without being sent again.
TEST_F(ReliableRcTest, AckLostAfterExecutionCompletesBelowEpsnWithoutResend) {
  Build();
  RcConnect();
  Blackhole(*tap_b_, {qa_.qpn});
  uint64_t to_backup = 0;
  const uint32_t backup_b = PathB()->backup_qpn();
  tap_a_->match = [&](std::span<const uint8_t> p, const Gid&) {
    if (HeaderOf(p).dest_qpn == backup_b) ++to_backup;
    return false;
  };
  std::vector<Planned> plan;
  for (int i = 0; i < 12; ++i) {
    plan.push_back(
        {200u + i, uint64_t(i) * 333, uint64_t(i) * 70000, 20000u + i});
  }
  PostAndVerify(plan, 20000);
  const auto& c = la_->counters();
  EXPECT_EQ(c.rc_takeovers, 1u);
  EXPECT_EQ(c.rc_completed_below_epsn, plan.size());
  EXPECT_EQ(c.rc_resubmitted, 0u);
  EXPECT_EQ(to_backup, 0u);  // not a byte sent again
  EXPECT_EQ(c.rc_failed_to_guest, 0u);
}

// A FETCH_ADD the peer executed whose result was lost cannot run again:
// RETRY_EXC_ERR, and the add happened once (§1).
TEST_F(ReliableRcTest, ExecutedAtomicWithLostResultFailsOnce) {
  Build();
  RcConnect();
  uint64_t zero = 0;
  std::memcpy(&vb_.buf[64], &zero, 8);
  Blackhole(*tap_b_, {qa_.qpn});
  SendWr w;
  w.wr_id = 77;
  w.opcode = WrOpcode::kAtomicFetchAdd;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sge[0] = Sge{va_.at(0), 8, va_.mr.lkey};
  w.remote_addr = vb_.at(64);
  w.rkey = vb_.mr.rkey;
  w.compare_add = 5;
  Post(w);
  Post(Write(78, 0, 4096, 100));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 20000));
  EXPECT_EQ(got_[0].wr_id, 77u);
  EXPECT_EQ(got_[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(got_[1].wr_id, 78u);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  uint64_t v = 0;
  std::memcpy(&v, &vb_.buf[64], 8);
  EXPECT_EQ(v, 5u);
  EXPECT_EQ(la_->counters().rc_atomics_lost, 1u);
}

// A second failure before the failed pair is back (its reset takes 1 s
// here) goes to the guest, as natively.
TEST_F(ReliableRcTest, SecondFailureBeforeResetFailsToGuest) {
  rc_reset_delay_ns_ = 1'000'000'000;
  Build();
  RcConnect();
  Blackhole(*tap_a_, {qb_.qpn});
  Blackhole(*tap_b_, {qa_.qpn});
  PostAndVerify({{300, 0, 0, 50000}}, 20000);
  EXPECT_EQ(la_->counters().rc_takeovers, 1u);
  EXPECT_FALSE(PathA()->spare_ready());
  // The guest's QP is in RTS though its own lower QP waits in ERR for its
  // reset, and an RTS -> RTS change reaches the QP in use.
  EXPECT_EQ(soft_a_->QueryQp(qa_)->state, QpState::kErr);
  EXPECT_EQ(la_->QueryQp(qa_)->state, QpState::kRts);
  QpAttr m;
  m.state = QpState::kRts;
  m.min_rnr_timer = 14;
  EXPECT_EQ(la_->ModifyQp(qa_, m, kQpState | kQpMinRnrTimer), Status::kOk);
  EXPECT_EQ(soft_a_->QueryQp(PathA()->send_qp())->min_rnr_timer, 14);
  Blackhole(*tap_a_, {qb_.qpn, PathB()->backup_qpn()});
  Blackhole(*tap_b_, {qa_.qpn, PathA()->backup_qpn()});
  got_.clear();
  Post(Write(301, 0, 100000, 5000));
  Post(Write(302, 0, 200000, 5000));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 20000));
  EXPECT_EQ(got_[0].wr_id, 301u);
  EXPECT_EQ(got_[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(la_->counters().rc_failed_to_guest, 1u);
  EXPECT_EQ(la_->counters().rc_takeovers, 1u);
}

// The guest's retry budget (§1) holds across takeovers: a peer that never
// answers RECOVER fails the WR after (retry_cnt + 1) x timeout.
TEST_F(ReliableRcTest, SilentPeerFailsAfterTheGuestBudget) {
  Build();
  RcConnect();
  for (uint64_t i = 0; i < 3; ++i) {  // A's receives: moved, then flushed once
    RecvWr r;
    r.wr_id = 450 + i;
    r.num_sge = 1;
    r.sge[0] = Sge{va_.at(1 << 20), 4096, va_.mr.lkey};
    Status st = Status::kOk;
    ASSERT_EQ(la_->PostRecv(qa_, std::span(&r, 1), &st), 1);
  }
  Blackhole(*tap_a_, {qb_.qpn});
  link_a_->drop = true;  // RECOVER never arrives
  const uint64_t t0 = now_;
  Post(Write(400, 0, 0, 3000));
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 20000));
  EXPECT_EQ(got_[0].status, WcStatus::kRetryExcErr);
  const uint64_t waited = now_ - t0;
  EXPECT_GE(waited, 8u * (4096u << 8));
  EXPECT_LT(waited, 10u * (4096u << 8));
  Run(200);
  ASSERT_EQ(recv_a_.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(recv_a_[i].wr_id, 450 + i);
    EXPECT_EQ(recv_a_[i].status, WcStatus::kWrFlushErr);
  }
  EXPECT_EQ(la_->QueryQp(qa_)->state, QpState::kErr);
}

// RECOVER and RECOVERED that name nothing of the path are counted and
// dropped; the QP is unaffected.
TEST_F(ReliableRcTest, ForgedRecoverIsCountedAndDropped) {
  Build();
  RcConnect();
  const uint32_t peer_qpn = qb_.qpn;
  ToA(2, peer::MsgType::kRecover,
      peer::Recover{qa_.qpn, 0x1234});  // wrong pair
  ToA(3, peer::MsgType::kRecover,
      peer::Recover{qa_.qpn, peer_qpn});  // stranger
  ToA(2, peer::MsgType::kRecover,
      peer::Recover{0x777, peer_qpn});                             // no such QP
  ToA(2, peer::MsgType::kRecovered, peer::Recovered{qa_.qpn, 0});  // unasked
  EXPECT_EQ(la_->counters().rc_recover_bad, 3u);
  EXPECT_EQ(la_->counters().rc_recovered_bad, 1u);
  // A malformed one (a PSN wider than 24 bits) stops at the codec.
  uint8_t buf[peer::kMaxMessageBytes];
  peer::PeerMessage m;
  m.type = peer::MsgType::kRecovered;
  m.origin = 2;
  m.seq = 5000;
  m.body = peer::Recovered{qa_.qpn, 5};
  const size_t n = peer::Encode(m, buf);
  ASSERT_GT(n, 0u);
  buf[n - 1] = 0x80;  // epsn's top byte
  const uint64_t malformed = la_->counters().peer[peer::PeerCheck::kPsn];
  la_->OnPeerMessage(std::span(buf, n));
  EXPECT_EQ(la_->counters().peer[peer::PeerCheck::kPsn], malformed + 1);
  EXPECT_EQ(la_->counters().rc_recoveries, 0u);
  EXPECT_EQ(PathA()->state(), RcPath::State::kReady);
  PostAndVerify({{600, 0, 0, 10000}}, 5000);
}

// A peer VM not in rc mode: CONNECT_NATIVE, the QP runs without a backup.
TEST_F(ReliableRcTest, NativePeerRunsWithoutBackup) {
  Build();
  la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kRc);
  const QpConf c = Conf();
  qa_ = MakeQp(*la_, va_, c);
  qb_ = MakeQp(*lb_, vb_, c);
  BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
  BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
  Run(20);
  ASSERT_NE(PathA(), nullptr);
  EXPECT_EQ(PathA()->state(), RcPath::State::kNoBackup);
  PostAndVerify(MixedPlan(10, 5), 20000);
}

// §5's last paragraph in uc mode: the data QP's path (its flow label) is
// blackholed mid-transfer; two RTOs without an ACK move it to a new flow
// label and the transfer completes, every byte verified.
using ReliableUcBackupTest = ReliableUcTest;

TEST_F(ReliableUcBackupTest, BlackholedDataPathMovesToANewFlowLabel) {
  Build();
  Connect();
  reliable::Connection* k = la_->FindConnection(qa_.qpn);
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->state(), ConnState::kUc);
  const uint32_t data_qpn = k->data_qpn();
  uint32_t label = ~0u;
  uint64_t moved_packets = 0;
  bool blackholed = false;
  tap_a_->match = [&](std::span<const uint8_t> p, const Gid&) {
    const net::Header h = HeaderOf(p);
    if (h.src_qpn != data_qpn) return false;
    if (label == ~0u) label = h.flow_label;
    if (h.flow_label != label) ++moved_packets;
    return blackholed && h.flow_label == label;
  };
  const std::vector<Planned> plan = MixedPlan(30, 9);
  for (const Planned& p : plan) Post(Write(p.wr_id, p.src, p.dst, p.len));
  Run(3);
  blackholed = true;
  const size_t want = plan.size();
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= want; }, 40000))
      << got_.size() << " of " << want;
  Run(200);
  ASSERT_EQ(got_.size(), want);
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(got_[i].wr_id, plan[i].wr_id);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess) << i;
    EXPECT_EQ(0, std::memcmp(&vb_.buf[plan[i].dst], &va_.buf[plan[i].src],
                             plan[i].len))
        << i;
  }
  EXPECT_EQ(la_->counters().uc_path_moves, 1u);
  EXPECT_EQ(k->path(), 1u);
  EXPECT_GT(moved_packets, 0u);
  std::printf(
      "[ uc ] path moved after %llu RTO losses; %llu packets on the new "
      "label\n",
      static_cast<unsigned long long>(la_->counters().lost_rto),
      static_cast<unsigned long long>(moved_packets));
}

// Both ends sending when the pair fails: each sees RETRY_EXC_ERR, each
// sends RECOVER, each answers the other's; both take over once.
TEST_F(ReliableRcTest, BothEndsFailingAtOnceRecoverTogether) {
  Build();
  RcConnect();
  FillB(4 << 20, 1 << 20);
  std::vector<Planned> plan_a, plan_b;
  for (int i = 0; i < 20; ++i) {
    plan_a.push_back(
        {700u + i, uint64_t(i) * 100, uint64_t(i) * 40000, 30000u + 7 * i});
    plan_b.push_back({800u + i, (4 << 20) + uint64_t(i) * 100,
                      (2 << 20) + uint64_t(i) * 40000, 25000u + i});
  }
  for (const Planned& p : plan_a) Post(Write(p.wr_id, p.src, p.dst, p.len));
  for (const Planned& p : plan_b) {
    SendWr w;
    w.wr_id = p.wr_id;
    w.opcode = WrOpcode::kRdmaWrite;
    w.send_flags = kSendSignaled;
    w.num_sge = 1;
    w.sge[0] = Sge{vb_.at(p.src), p.len, vb_.mr.lkey};
    w.remote_addr = va_.at(p.dst);
    w.rkey = va_.mr.rkey;
    Status st = Status::kOk;
    ASSERT_EQ(lb_->PostSend(qb_, std::span(&w, 1), &st), 1);
  }
  Run(4);
  Blackhole(*tap_a_, {qb_.qpn});
  Blackhole(*tap_b_, {qa_.qpn});
  ASSERT_TRUE(
      RunUntil([&] { return got_.size() >= 20 && got_b_.size() >= 20; }, 20000))
      << got_.size() << " " << got_b_.size();
  Run(200);
  ASSERT_EQ(got_.size(), 20u);
  ASSERT_EQ(got_b_.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(got_[i].wr_id, 700u + i);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_b_[i].wr_id, 800u + i);
    EXPECT_EQ(got_b_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(0, std::memcmp(&vb_.buf[plan_a[i].dst], &va_.buf[plan_a[i].src],
                             plan_a[i].len));
    EXPECT_EQ(0, std::memcmp(&va_.buf[plan_b[i].dst], &vb_.buf[plan_b[i].src],
                             plan_b[i].len));
  }
  EXPECT_EQ(la_->counters().rc_takeovers, 1u);
  EXPECT_EQ(lb_->counters().rc_takeovers, 1u);
  EXPECT_EQ(la_->counters().rc_recoveries, 1u);
  EXPECT_EQ(lb_->counters().rc_recoveries, 1u);
  EXPECT_EQ(la_->counters().rc_recover_bad + lb_->counters().rc_recover_bad,
            0u);
}

// Many seeds: a random moment of failure, a random direction (both, or
// only the ACKs), mixed WRITE / SEND / READ; each WR once, in order, bytes
// verified; completed-below-epsn and resubmitted printed.
TEST_F(ReliableRcTest, RandomFailureMomentsOverSeeds) {
  uint64_t below = 0, resent = 0, takeovers = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Rebuild({}, {}, seed);
    RcConnect();
    FillB(4 << 20, 2 << 20);
    std::mt19937_64 rng(seed);
    std::vector<std::pair<WrOpcode, Planned>> plan;
    uint64_t wdst = 0, sdst = 2 << 20, rsrc = 4 << 20;
    int sends = 0;
    for (int i = 0; i < 40; ++i) {
      const uint32_t len = static_cast<uint32_t>(rng() % 20000);
      switch (rng() % 3) {
        case 0:
          plan.push_back({WrOpcode::kRdmaWrite,
                          {100u + i, (rng() % 1000) * 3, wdst, len}});
          wdst += len + 64;
          break;
        case 1:
          PostRecvB(500 + sends++, sdst, 20000);
          plan.push_back(
              {WrOpcode::kSend, {100u + i, (rng() % 1000) * 3, sdst, len}});
          sdst += 20000;
          break;
        default:
          plan.push_back({WrOpcode::kRdmaRead, {100u + i, rsrc, rsrc, len}});
          rsrc += len + 64;
      }
    }
    Run(3);
    for (const auto& [op, p] : plan) {
      if (op == WrOpcode::kRdmaWrite) Post(Write(p.wr_id, p.src, p.dst, p.len));
      if (op == WrOpcode::kSend) Post(Send(p.wr_id, p.src, p.len));
      if (op == WrOpcode::kRdmaRead) Post(Read(p.wr_id, p.src, p.dst, p.len));
    }
    Run(static_cast<int>(rng() % 12));
    if (seed % 2 == 0) Blackhole(*tap_a_, {qb_.qpn});
    Blackhole(*tap_b_, {qa_.qpn});
    ASSERT_TRUE(RunUntil([&] { return got_.size() >= plan.size(); }, 20000))
        << seed;
    Run(200);
    ASSERT_EQ(got_.size(), plan.size()) << seed;
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto& [op, p] = plan[i];
      EXPECT_EQ(got_[i].wr_id, p.wr_id) << seed;
      EXPECT_EQ(got_[i].status, WcStatus::kSuccess) << seed << " " << i;
      if (op == WrOpcode::kRdmaRead) {
        EXPECT_EQ(0, std::memcmp(&va_.buf[p.dst], &vb_.buf[p.src], p.len))
            << seed;
      } else {
        EXPECT_EQ(0, std::memcmp(&vb_.buf[p.dst], &va_.buf[p.src], p.len))
            << seed;
      }
    }
    ASSERT_EQ(recv_b_.size(), static_cast<size_t>(sends)) << seed;
    for (int i = 0; i < sends; ++i) {
      EXPECT_EQ(recv_b_[i].wr_id, 500u + i) << seed;
      EXPECT_EQ(recv_b_[i].status, WcStatus::kSuccess) << seed;
    }
    EXPECT_LE(la_->counters().rc_takeovers, 1u) << seed;
    EXPECT_EQ(la_->counters().rc_failed_to_guest, 0u) << seed;
    takeovers += la_->counters().rc_takeovers;
    below += la_->counters().rc_completed_below_epsn;
    resent += la_->counters().rc_resubmitted;
    got_.clear();
    got_b_.clear();
    recv_a_.clear();
    recv_b_.clear();
  }
  EXPECT_GE(takeovers, 5u);  // the failure hit WRs in flight
  std::printf(
      "[ rc ] 6 seeds: %llu takeovers, %llu WRs completed below epsn, %llu "
      "resubmitted\n",
      static_cast<unsigned long long>(takeovers),
      static_cast<unsigned long long>(below),
      static_cast<unsigned long long>(resent));
}

// 1 % loss, reordering and duplication both ways, and the primary pair
// blackholed mid-run: the lower's go-back-N repairs the losses, the
// takeover the blackhole; no guest error, every byte verified.
TEST_F(ReliableRcTest, LossyFabricThenBlackhole) {
  const fabric::FaultConfig f = Faults(0.01, 0.01, 0.01);
  for (uint64_t seed = 5; seed < 9; ++seed) {
    SCOPED_TRACE(seed);
    Rebuild(f, f, seed);
    RcConnect();
    FillB(4 << 20, 1 << 20);
    std::vector<std::pair<bool, Planned>> plan;  // true: READ
    uint64_t wdst = 0, rsrc = 4 << 20;
    for (int i = 0; i < 40; ++i) {
      const uint32_t len = 1000u + 3001u * static_cast<uint32_t>(i % 7);
      if (i % 4 == 3) {
        plan.push_back({true, {300u + i, rsrc, rsrc, len}});
        rsrc += len;
      } else {
        plan.push_back({false, {300u + i, uint64_t(i) * 11, wdst, len}});
        wdst += len;
      }
    }
    for (const auto& [read, p] : plan) {
      Post(read ? Read(p.wr_id, p.src, p.dst, p.len)
                : Write(p.wr_id, p.src, p.dst, p.len));
    }
    Run(6);
    Blackhole(*tap_a_, {qb_.qpn});
    Blackhole(*tap_b_, {qa_.qpn});
    ASSERT_TRUE(RunUntil([&] { return got_.size() >= plan.size(); }, 40000))
        << got_.size();
    Run(200);
    ASSERT_EQ(got_.size(), plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto& [read, p] = plan[i];
      EXPECT_EQ(got_[i].wr_id, p.wr_id);
      EXPECT_EQ(got_[i].status, WcStatus::kSuccess) << i;
      if (read) {
        EXPECT_EQ(0, std::memcmp(&va_.buf[p.dst], &vb_.buf[p.src], p.len)) << i;
      } else {
        EXPECT_EQ(0, std::memcmp(&vb_.buf[p.dst], &va_.buf[p.src], p.len)) << i;
      }
    }
    EXPECT_EQ(la_->counters().rc_takeovers, 1u);
    EXPECT_EQ(la_->counters().rc_failed_to_guest, 0u);
  }
}

}  // namespace
}  // namespace vrdma::testing
