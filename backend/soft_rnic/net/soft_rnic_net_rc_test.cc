// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RC between two SoftRnics on a fabric (docs/reliability.md §7.1, §10 step
// 7): PSNs, ACKs, go-back-N from a lost packet, the ACK timeout and its
// retry count, RNR NAKs, READ served again, atomics answered from their
// saved results, error NAKs. Losses are placed exactly (LosePackets: the
// n-th packet a host sends), so every count below is known in advance.
#include "backend/soft_rnic/net/soft_rnic_net_test_util.h"

namespace vrdma::testing {
namespace {

using Rc = SoftRnicNetTest;

// 4.096 us << 10: the ACK timeout of Conn{} (about 4.2 ms).
constexpr uint64_t kAckTimeoutNs = 4096ull << 10;

SendWr Rdma(WrOpcode op, uint64_t wr_id, const Vm& from, uint64_t off,
            uint32_t len, const Vm& to, uint64_t to_off) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = op;
  w.send_flags = kSendSignaled;
  w.num_sge = len > 0 ? 1 : 0;
  w.sge[0] = Sge{from.at(off), len, from.mr.lkey};
  w.remote_addr = to.at(to_off);
  w.rkey = to.mr.rkey;
  return w;
}

TEST_F(Rc, EveryOpcodeCrossesHostsAndCompletesInOrder) {
  ConnectRc(0xfffff0);  // PSNs wrap on the way
  PostR(b_, qb_, Rwr(1, vb_, 20000, 4000));
  uint64_t target = 40;
  std::memcpy(&vb_.buf[60000], &target, 8);
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 1, va_, 0, 5000, vb_, 0));
  Post(a_, qa_, Wr(WrOpcode::kSend, 2, va_, 8000, 3000));
  Post(a_, qa_, Rdma(WrOpcode::kRdmaRead, 3, va_, 30000, 6000, vb_, 10000));
  SendWr fa = Rdma(WrOpcode::kAtomicFetchAdd, 4, va_, 50000, 8, vb_, 60000);
  fa.compare_add = 2;
  Post(a_, qa_, fa);
  SendWr cs = Rdma(WrOpcode::kAtomicCmpSwp, 5, va_, 50008, 8, vb_, 60000);
  cs.compare_add = 42;
  cs.swap = 7;
  Post(a_, qa_, cs);
  Pump();

  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sc[i].wr_id, i + 1);
    EXPECT_EQ(sc[i].status, WcStatus::kSuccess) << i;
  }
  EXPECT_EQ(sc[2].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], &va_.buf[0], 5000));
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[20000], &va_.buf[8000], 3000));
  EXPECT_EQ(0, std::memcmp(&va_.buf[30000], &vb_.buf[10000], 6000));
  uint64_t fetched = 0, swapped_from = 0, now_there = 0;
  std::memcpy(&fetched, &va_.buf[50000], 8);
  std::memcpy(&swapped_from, &va_.buf[50008], 8);
  std::memcpy(&now_there, &vb_.buf[60000], 8);
  EXPECT_EQ(fetched, 40u);
  EXPECT_EQ(swapped_from, 42u);
  EXPECT_EQ(now_there, 7u);
  // WRITE 5 packets, SEND 3, READ and two atomics 1 each: 11 requests; an
  // ACK for each of the WRITE and the SEND, two atomic ACKs, 6 READ data.
  EXPECT_EQ(a_.net_stats().tx_packets, 11u);
  EXPECT_EQ(b_.net_stats().acks_sent, 4u);
  EXPECT_EQ(b_.net_stats().tx_packets, 4u + 6u);
  EXPECT_EQ(a_.net_stats().retransmitted, 0u);
  // PSNs: 5 + 3 + 6 (the READ's responses) + 1 + 1 from 0xfffff0.
  EXPECT_EQ(a_.QueryQp(qa_)->sq_psn, (0xfffff0u + 16) & 0xffffff);
  EXPECT_EQ(b_.QueryQp(qb_)->rq_psn, (0xfffff0u + 16) & 0xffffff);
}

TEST_F(Rc, WorkPostedWhileWaitingForAnAckGoesOutAtOnce) {
  // Several WQEs in flight: B does not run, so no ACK comes back, and
  // what A's application posts meanwhile still goes on the wire.
  ConnectRc();
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 1, va_, 0, 100, vb_, 0));
  a_.Progress();  // sent; A waits for the ACK (its timer armed)
  EXPECT_EQ(a_.net_stats().tx_packets, 1u);
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 2, va_, 0, 100, vb_, 0));
  a_.Progress();
  EXPECT_EQ(a_.net_stats().tx_packets, 2u);
  Pump();
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 2u);
  // B saw both before it answered: one ACK each, nothing resent.
  EXPECT_EQ(b_.net_stats().acks_sent, 2u);
  EXPECT_EQ(a_.net_stats().retransmitted, 0u);
}

TEST_F(Rc, AtMostMaxRdAtomicReadsAndAtomicsAreInFlight) {
  ConnectRc();  // max_rd_atomic 4 (the fixture's)
  for (uint64_t i = 0; i < 6; ++i) {
    SendWr w = (i % 2 == 0)
                   ? Rdma(WrOpcode::kRdmaRead, i, va_, 100 * i, 100, vb_, 0)
                   : Rdma(WrOpcode::kAtomicFetchAdd, i, va_, 8000 + 8 * i, 8, vb_, 64);
    Post(a_, qa_, w);
  }
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 9, va_, 0, 10, vb_, 200));
  a_.Progress();
  // Four requests out; the fifth waits for a response, and so does the
  // WRITE behind it (in order).
  EXPECT_EQ(a_.net_stats().tx_packets, 4u);
  Pump();
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 7u);
  for (const Completion& c : sc) EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(a_.net_stats().tx_packets, 7u);
  EXPECT_EQ(a_.net_stats().retransmitted, 0u);
}

TEST_F(Rc, ALostPacketIsResentFromIt) {
  ConnectRc(100);
  // A 5-packet WRITE whose third packet (PSN 102) is lost.
  lossy_a_.lose = {2};
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 1, va_, 0, 5000, vb_, 0));
  Pump();
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], &va_.buf[0], 5000));
  // B NAKed the gap once and dropped the two packets after it; A sent
  // again from PSN 102 (three packets), before any timeout.
  EXPECT_EQ(b_.net_stats().naks_sent, 1u);
  EXPECT_EQ(b_.net_stats().drops(NetDrop::kSequence), 2u);
  EXPECT_EQ(a_.net_stats().retransmitted, 3u);
  EXPECT_EQ(a_.net_stats().timeouts, 0u);
  EXPECT_EQ(a_.net_stats().tx_packets, 8u);
  EXPECT_EQ(b_.net_stats().duplicates, 0u);
  EXPECT_EQ(b_.QueryQp(qb_)->rq_psn, 105u);
}

TEST_F(Rc, ALostAckTimesOutAndTheDuplicatesAreAckedNotExecuted) {
  ConnectRc();
  PostR(b_, qb_, Rwr(1, vb_, 0, 4096));
  PostR(b_, qb_, Rwr(2, vb_, 8192, 4096));
  lossy_b_.lose = {0};  // B's ACK of the SEND
  Post(a_, qa_, Wr(WrOpcode::kSend, 1, va_, 0, 2000));
  Run(5, 0);  // sent, executed; the ACK is lost: A waits (a timer runs)
  EXPECT_TRUE(Poll(a_, va_.scq).empty());
  EXPECT_EQ(Poll(b_, vb_.rcq).size(), 1u);
  Run(1, kAckTimeoutNs);  // the timeout passes
  Run(3, 0);              // A sends again, B ACKs the duplicates
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a_.net_stats().timeouts, 1u);
  EXPECT_EQ(a_.net_stats().retransmitted, 2u);
  EXPECT_EQ(b_.net_stats().duplicates, 2u);
  EXPECT_EQ(b_.net_stats().acks_sent, 3u);  // the lost one, one per duplicate
  // The SEND consumed one receive, once.
  EXPECT_TRUE(Poll(b_, vb_.rcq).empty());
  Post(a_, qa_, Wr(WrOpcode::kSend, 2, va_, 0, 10));
  Pump();
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 2u);
}

TEST_F(Rc, AnAtomicIsNeverExecutedTwice) {
  ConnectRc();
  uint64_t target = 1000;
  std::memcpy(&vb_.buf[64], &target, 8);
  lossy_b_.lose = {0};  // the atomic ACK
  SendWr fa = Rdma(WrOpcode::kAtomicFetchAdd, 1, va_, 0, 8, vb_, 64);
  fa.compare_add = 5;
  Post(a_, qa_, fa);
  Run(5, 0);
  Run(1, kAckTimeoutNs);
  Run(3, 0);
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  uint64_t got = 0;
  std::memcpy(&got, &va_.buf[0], 8);
  std::memcpy(&target, &vb_.buf[64], 8);
  EXPECT_EQ(got, 1000u);     // the value before the one execution
  EXPECT_EQ(target, 1005u);  // added once
  EXPECT_EQ(b_.net_stats().duplicates, 1u);
  EXPECT_EQ(b_.net_stats().atomics_replayed, 1u);
}

TEST_F(Rc, ALostReadResponseIsServedAgain) {
  ConnectRc();
  // The READ's second response packet lost: the third shows the gap, and
  // A sends the READ again at once.
  lossy_b_.lose = {1};
  Post(a_, qa_, Rdma(WrOpcode::kRdmaRead, 1, va_, 0, 3000, vb_, 4000));
  Run(5, 0);
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(&va_.buf[0], &vb_.buf[4000], 3000));
  EXPECT_EQ(a_.net_stats().timeouts, 0u);
  EXPECT_EQ(b_.net_stats().reads_served, 2u);
  EXPECT_EQ(b_.net_stats().duplicates, 1u);
  // Dropped at A: the third response (the gap), then the first again
  // (placed already).
  EXPECT_EQ(a_.net_stats().drops(NetDrop::kResponse), 2u);

  // The last response lost: nothing shows a gap, the timeout does.
  lossy_b_.lose = {8};  // B sent 0-2, 3-5 (the READ again): 6-8 now
  Post(a_, qa_, Rdma(WrOpcode::kRdmaRead, 2, va_, 8000, 3000, vb_, 20000));
  Run(5, 0);
  EXPECT_TRUE(Poll(a_, va_.scq).empty());
  Run(1, kAckTimeoutNs);
  Run(3, 0);
  sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(&va_.buf[8000], &vb_.buf[20000], 3000));
  EXPECT_EQ(a_.net_stats().timeouts, 1u);
  EXPECT_EQ(b_.net_stats().reads_served, 4u);
}

TEST_F(Rc, RetriesRunOutToRetryExcErr) {
  Conn c;
  c.retry_cnt = 2;
  ConnectRc(0, c, c);
  lossy_a_.lose_all = true;
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 1, va_, 0, 3000, vb_, 0));
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 2, va_, 0, 10, vb_, 0));
  Run(1, 0);  // both sent (lost)
  for (int i = 0; i < 2; ++i) {
    Run(1, kAckTimeoutNs - 1);
    EXPECT_TRUE(Poll(a_, va_.scq).empty()) << "a timeout fired early";
    Run(1, 1);
    Run(1, 0);
  }
  EXPECT_EQ(a_.net_stats().timeouts, 2u);
  EXPECT_TRUE(Poll(a_, va_.scq).empty());
  Run(1, kAckTimeoutNs);
  Run(1, 0);
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(sc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(a_.QueryQp(qa_)->state, QpState::kErr);
  // Each timeout sent both WQEs again: 3 + 1 packets, twice.
  EXPECT_EQ(a_.net_stats().retransmitted, 8u);
  EXPECT_EQ(b_.net_stats().rx_packets, 0u);
}

TEST_F(Rc, RnrWaitsTheRespondersTimerAndSendsAgain) {
  Conn c;
  c.min_rnr_timer = 1;  // 10 us
  c.rnr_retry = 1;
  ConnectRc(0, c, c);
  Post(a_, qa_, Wr(WrOpcode::kSend, 1, va_, 0, 100));
  Run(5, 0);  // no receive at B: RNR NAK
  EXPECT_EQ(b_.net_stats().naks_sent, 1u);
  EXPECT_TRUE(Poll(a_, va_.scq).empty());
  PostR(b_, qb_, Rwr(9, vb_, 0, 100));
  Run(1, 9'999);  // not yet
  EXPECT_EQ(a_.net_stats().retransmitted, 0u);
  Run(1, 1);
  Run(3, 0);
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(a_.net_stats().retransmitted, 1u);
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
  // No receive twice: rnr_retry 1 allows one wait, the second NAK fails.
  Post(a_, qa_, Wr(WrOpcode::kSend, 2, va_, 0, 100));
  for (int i = 0; i < 5; ++i) Run(2, 20'000);
  sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(b_.net_stats().naks_sent, 3u);
  EXPECT_EQ(b_.QueryQp(qb_)->state, QpState::kRts);  // RNR is not an error there
}

TEST_F(Rc, ABadRkeyIsNakedAndBothEndsStop) {
  ConnectRc();
  SendWr w = Rdma(WrOpcode::kRdmaWrite, 1, va_, 0, 100, vb_, 0);
  w.rkey ^= 0x100;  // another index: no such MR
  Post(a_, qa_, w);
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 2, va_, 0, 100, vb_, 0));
  Pump();
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(sc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(a_.QueryQp(qa_)->state, QpState::kErr);
  EXPECT_EQ(b_.QueryQp(qb_)->state, QpState::kErr);
  EXPECT_EQ(b_.net_stats().naks_sent, 1u);
}

TEST_F(Rc, ALossyReorderingDuplicatingFabricCompletesEverythingOnce) {
  // Hosts C and D whose ports lose 3%, reorder 3% by 20 us, duplicate 2%
  // and jitter by 2 us: 200 WRITEs and SENDs of 1 to 4 packets, each
  // completed once, in order, with its bytes.
  fabric::FaultConfig f;
  f.loss = 0.03;
  f.p_reorder = 0.03;
  f.reorder_delay_ns = 20'000;
  f.p_dup = 0.02;
  f.jitter_ns = 2'000;
  fabric::FaultyFabric pc(fabric_.AddPort(), f, 1);
  fabric::FaultyFabric pd(fabric_.AddPort(), f, 2);
  SoftRnic hc(limits_, [this] { return now_; }, &pc);
  SoftRnic hd(limits_, [this] { return now_; }, &pd);
  Vm vc, vd;
  MakeVm(hc, &vc, 5);
  MakeVm(hd, &vd, 6);
  RnicQp qc = MakeQp(hc, vc, QpType::kRc);
  RnicQp qd = MakeQp(hd, vd, QpType::kRc);
  Conn c;
  c.timeout = 4;  // 65 us
  c.retry_cnt = 7;
  BringUp(hc, qc, QpType::kRc, vc.gid, vd.gid, qd.qpn, 0, c);
  BringUp(hd, qd, QpType::kRc, vd.gid, vc.gid, qc.qpn, 0, c);
  constexpr int kMsgs = 200;
  for (int i = 0; i < kMsgs; ++i) PostR(hd, qd, Rwr(i, vd, 32768, 4096));
  uint64_t posted = 0, sends = 0;
  std::vector<uint64_t> done;
  std::vector<uint64_t> recvs;
  for (int turn = 0; turn < 200'000 && done.size() < kMsgs; ++turn) {
    if (posted < kMsgs && posted - done.size() < 16) {
      const uint32_t len = 1 + (posted * 997) % 4000;
      SendWr w = (posted % 3 == 0)
                     ? Wr(WrOpcode::kSend, posted, vc, posted % 7, len)
                     : Rdma(WrOpcode::kRdmaWrite, posted, vc, posted % 7, len,
                            vd, 0);
      if (posted % 3 == 0) ++sends;
      Post(hc, qc, w);
      ++posted;
    }
    hc.Progress();
    hd.Progress();
    now_ += 500;
    for (const Completion& x : Poll(hc, vc.scq)) {
      ASSERT_EQ(x.status, WcStatus::kSuccess) << x.wr_id;
      done.push_back(x.wr_id);
    }
    for (const Completion& x : Poll(hd, vd.rcq)) {
      ASSERT_EQ(x.status, WcStatus::kSuccess);
      recvs.push_back(x.wr_id);
    }
  }
  ASSERT_EQ(done.size(), static_cast<size_t>(kMsgs));
  for (int i = 0; i < kMsgs; ++i) EXPECT_EQ(done[i], static_cast<uint64_t>(i));
  // Each SEND consumed exactly one receive, in order.
  ASSERT_EQ(recvs.size(), sends);
  for (size_t i = 0; i < recvs.size(); ++i) EXPECT_EQ(recvs[i], i);
  // The last WRITE's bytes are in place (each WRITE overwrote offset 0).
  const uint32_t last_write = 199 % 3 == 0 ? 198 : 199;
  const uint32_t len = 1 + (last_write * 997) % 4000;
  EXPECT_EQ(0, std::memcmp(&vd.buf[0], &vc.buf[last_write % 7], len));
  // The faults did happen, and recovery did run.
  EXPECT_GT(pc.fault_stats().lost_random + pd.fault_stats().lost_random, 0u);
  EXPECT_GT(pc.fault_stats().duplicated, 0u);
  EXPECT_GT(hc.net_stats().retransmitted, 0u);
  EXPECT_GT(hd.net_stats().duplicates, 0u);
}

TEST_F(Rc, ForgedResponsesCompleteNothing) {
  // A host that spoofs B's GID and QPN answers requests A never made.
  ConnectRc(500);
  net::Header h;
  h.dest_qpn = qa_.qpn;
  h.src_qpn = qb_.qpn;
  h.dgid = va_.gid;
  h.sgid = vb_.gid;
  h.psn = 500;
  auto fired = [&](uint8_t op, uint8_t syndrome, uint32_t payload) {
    h.opcode = net::kRc | op;
    h.syndrome = syndrome;
    const SoftNetStats was = a_.net_stats();
    Inject(h, std::vector<uint8_t>(payload, 1), va_.gid);
    a_.Progress();
    return a_.net_stats().drops(NetDrop::kResponse) - was.drops(NetDrop::kResponse);
  };
  EXPECT_EQ(fired(net::kReadResponseOnly, 0, 10), 1u);
  EXPECT_EQ(fired(net::kAtomicAcknowledge, net::kSyndromeAck, 0), 1u);
  EXPECT_EQ(fired(net::kAcknowledge, net::kSyndromeNak | net::kNakRemoteAccess, 0), 1u);
  EXPECT_EQ(fired(net::kAcknowledge, net::kSyndromeRnr | 3, 0), 1u);
  EXPECT_EQ(fired(net::kAcknowledge, 0x40, 0), 1u);  // no such syndrome kind
  // A plain ACK of nothing completes nothing and is not an error.
  EXPECT_EQ(fired(net::kAcknowledge, net::kSyndromeAck, 0), 0u);
  // While a WRITE is in flight, an ACK from the wrong QPN does not count.
  lossy_a_.lose_all = true;  // the WRITE never reaches B
  Post(a_, qa_, Rdma(WrOpcode::kRdmaWrite, 1, va_, 0, 10, vb_, 0));
  Run(1, 0);
  h.src_qpn = qb_.qpn + 0x100;
  h.opcode = net::kRc | net::kAcknowledge;
  h.syndrome = net::kSyndromeAck;
  Inject(h, {}, va_.gid);
  a_.Progress();
  EXPECT_EQ(a_.net_stats().drops(NetDrop::kNotConnected), 1u);
  EXPECT_TRUE(Poll(a_, va_.scq).empty());
  EXPECT_EQ(a_.QueryQp(qa_)->state, QpState::kRts);
  // (An ACK that spoofs B exactly would complete it: RC trusts its peer's
  // path, as on RoCE.)
}

TEST_F(Rc, TheResponderNaksAGapOnceAndBreaksOnABadOpSequence) {
  // Requests forged as A's (its GID and QPN) straight into B.
  ConnectRc(1000);
  net::Header h;
  h.dest_qpn = qb_.qpn;
  h.src_qpn = qa_.qpn;
  h.dgid = vb_.gid;
  h.sgid = va_.gid;
  h.opcode = net::kRc | net::kWriteOnly;
  h.rkey = vb_.mr.rkey;
  h.remote_addr = vb_.at(0);
  h.dma_len = 10;
  const std::vector<uint8_t> ten(10, 0x77);
  h.psn = 1003;  // 1000..1002 never came
  Inject(h, ten, vb_.gid);
  h.psn = 1004;
  Inject(h, ten, vb_.gid);
  b_.Progress();
  EXPECT_EQ(b_.net_stats().naks_sent, 1u);  // once per gap
  EXPECT_EQ(b_.net_stats().drops(NetDrop::kSequence), 2u);
  EXPECT_NE(vb_.buf[0], 0x77);
  EXPECT_EQ(b_.QueryQp(qb_)->rq_psn, 1000u);
  // A WRITE_FIRST at the expected PSN, then a READ inside that WRITE.
  h.psn = 1000;
  h.opcode = net::kRc | net::kWriteFirst;
  h.dma_len = 2 * kMtu;
  Inject(h, std::vector<uint8_t>(kMtu, 0x66), vb_.gid);
  h.psn = 1001;
  h.opcode = net::kRc | net::kReadRequest;
  h.dma_len = 8;
  Inject(h, {}, vb_.gid);
  b_.Progress();
  EXPECT_EQ(b_.net_stats().naks_sent, 2u);
  EXPECT_EQ(b_.QueryQp(qb_)->state, QpState::kErr);
  EXPECT_EQ(b_.net_stats().reads_served, 0u);
  // A never asked for any of it: the NAKs answer nothing there.
  a_.Progress();
  EXPECT_EQ(a_.net_stats().drops(NetDrop::kResponse), 2u);
  EXPECT_EQ(a_.QueryQp(qa_)->state, QpState::kRts);
}

TEST_F(Rc, TwoSendersBehindOneBottleneckLoseToTailDropAndRecover) {
  // Incast 2:1: hosts C and D each post 40 WRITEs of 8 packets at once to
  // host E, through one shared queue towards E (1 Gb/s, 8 KiB: fewer
  // packets than one message). Bursts overflow it again on every resend;
  // only going back to the oldest PSN no ACK covered (not to the start of
  // the oldest message, whose first packets fill the queue each time)
  // makes progress. Every WRITE completes once, in order.
  fabric::FaultConfig f;
  f.bottleneck_bps = 1'000'000'000;
  f.bottleneck_bytes = 8 * 1024;
  fabric::FaultModel shared(f, 1);
  fabric::FaultyFabric pc(fabric_.AddPort(), &shared);
  fabric::FaultyFabric pd(fabric_.AddPort(), &shared);
  SoftRnic hc(limits_, [this] { return now_; }, &pc);
  SoftRnic hd(limits_, [this] { return now_; }, &pd);
  SoftRnic he(limits_, [this] { return now_; }, fabric_.AddPort());
  Vm vc, vd, ve;
  MakeVm(hc, &vc, 5);
  MakeVm(hd, &vd, 6);
  MakeVm(he, &ve, 7);
  Conn conn;
  conn.timeout = 6;  // 262 us
  conn.retry_cnt = 7;
  RnicQp c = MakeQp(hc, vc, QpType::kRc), d = MakeQp(hd, vd, QpType::kRc);
  RnicQp ec = MakeQp(he, ve, QpType::kRc), ed = MakeQp(he, ve, QpType::kRc);
  BringUp(hc, c, QpType::kRc, vc.gid, ve.gid, ec.qpn, 0, conn);
  BringUp(he, ec, QpType::kRc, ve.gid, vc.gid, c.qpn, 0, conn);
  BringUp(hd, d, QpType::kRc, vd.gid, ve.gid, ed.qpn, 0, conn);
  BringUp(he, ed, QpType::kRc, ve.gid, vd.gid, d.qpn, 0, conn);
  constexpr uint64_t kWrites = 40;
  for (uint64_t i = 0; i < kWrites; ++i) {
    Post(hc, c, Rdma(WrOpcode::kRdmaWrite, i, vc, 0, 8 * kMtu, ve, 0));
    Post(hd, d, Rdma(WrOpcode::kRdmaWrite, i, vd, 0, 8 * kMtu, ve, 32768));
  }
  std::vector<uint64_t> done_c, done_d;
  for (int turn = 0; turn < 200'000 && done_c.size() + done_d.size() < 2 * kWrites;
       ++turn) {
    hc.Progress();
    hd.Progress();
    he.Progress();
    now_ += 1'000;
    for (const Completion& x : Poll(hc, vc.scq)) {
      ASSERT_EQ(x.status, WcStatus::kSuccess);
      done_c.push_back(x.wr_id);
    }
    for (const Completion& x : Poll(hd, vd.scq)) {
      ASSERT_EQ(x.status, WcStatus::kSuccess);
      done_d.push_back(x.wr_id);
    }
  }
  ASSERT_EQ(done_c.size(), kWrites);
  ASSERT_EQ(done_d.size(), kWrites);
  for (uint64_t i = 0; i < kWrites; ++i) {
    EXPECT_EQ(done_c[i], i);
    EXPECT_EQ(done_d[i], i);
  }
  EXPECT_EQ(0, std::memcmp(&ve.buf[0], &vc.buf[0], 8 * kMtu));
  EXPECT_EQ(0, std::memcmp(&ve.buf[32768], &vd.buf[0], 8 * kMtu));
  EXPECT_GT(shared.stats().bottleneck_drops, 0u);
  EXPECT_GT(hc.net_stats().retransmitted + hd.net_stats().retransmitted, 0u);
  EXPECT_GT(hc.net_stats().timeouts + hd.net_stats().timeouts, 0u);
}

TEST_F(Rc, ALineRateSpacesEveryPacketOnTheFabric) {
  // Hosts C and D with 1 Gb/s ports: a packet of p payload bytes takes
  // (p + 82) x 8 ns, one after another, and arrives when its last bit left.
  RnicLimits l = limits_;
  l.link_rate_bps = 1'000'000'000;
  SoftRnic hc(l, [this] { return now_; }, fabric_.AddPort());
  SoftRnic hd(l, [this] { return now_; }, fabric_.AddPort());
  Vm vc, vd;
  MakeVm(hc, &vc, 5);
  MakeVm(hd, &vd, 6);
  RnicQp uc = MakeQp(hc, vc, QpType::kUc), ud = MakeQp(hd, vd, QpType::kUc);
  BringUp(hc, uc, QpType::kUc, vc.gid, vd.gid, ud.qpn);
  BringUp(hd, ud, QpType::kUc, vd.gid, vc.gid, uc.qpn);
  PostR(hd, ud, Rwr(1, vd, 0, 16384));
  const uint64_t t0 = now_;
  Post(hc, uc, Wr(WrOpcode::kSend, 1, vc, 0, 10 * kMtu));
  hc.Progress();
  constexpr uint64_t kPacketNs = (1024 + 82) * 8;
  EXPECT_EQ(hc.wire_bytes(), 10u * (1024 + 82));
  now_ = t0 + 10 * kPacketNs - 1;
  hd.Progress();
  EXPECT_TRUE(Poll(hd, vd.rcq).empty());  // the last packet is still on the wire
  EXPECT_EQ(hd.net_stats().rx_packets, 9u);
  now_ = t0 + 10 * kPacketNs;
  hd.Progress();
  auto rc = Poll(hd, vd.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 10 * kMtu);

  // RC: the request on C's wire, the ACK on D's.
  RnicQp rcq = MakeQp(hc, vc, QpType::kRc), rdq = MakeQp(hd, vd, QpType::kRc);
  BringUp(hc, rcq, QpType::kRc, vc.gid, vd.gid, rdq.qpn);
  BringUp(hd, rdq, QpType::kRc, vd.gid, vc.gid, rcq.qpn);
  Poll(hc, vc.scq);
  now_ += 1'000'000;
  const uint64_t t1 = now_;
  const uint64_t c_bytes = hc.wire_bytes();
  Post(hc, rcq, Rdma(WrOpcode::kRdmaWrite, 7, vc, 0, 100, vd, 0));
  hc.Progress();
  EXPECT_EQ(hc.wire_bytes() - c_bytes, 182u);
  now_ = t1 + 182 * 8;
  hd.Progress();  // executes, ACKs: 82 bytes on D's wire
  EXPECT_EQ(hd.wire_bytes(), 82u);
  now_ = t1 + 182 * 8 + 82 * 8 - 1;
  hc.Progress();
  EXPECT_TRUE(Poll(hc, vc.scq).empty());
  now_ += 1;
  hc.Progress();
  auto sc = Poll(hc, vc.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 7u);
  EXPECT_EQ(sc[0].timestamp_ns, t1 + 182 * 8 + 82 * 8);
}

}  // namespace
}  // namespace vrdma::testing
