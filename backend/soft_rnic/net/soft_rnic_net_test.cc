// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SoftRnic on a fabric (docs/reliability.md §7.1): two SoftRnics ("hosts")
// on an InprocFabric, each with its own VM, UC and UD messages between
// them cut into packets of the path MTU. A raw port of the fabric plays a
// third host where a test must see or forge packets: what a SoftRnic sends
// is decoded there, and what it receives from there is hostile.
#include "backend/soft_rnic/net/soft_rnic_net_test_util.h"

namespace vrdma::testing {
namespace {

TEST_F(SoftRnicNetTest, UcSendCrossesHostsInMtuPackets) {
  // PSNs start just below 2^24: they wrap inside the message.
  ConnectUc(0xfffffa);
  PostR(b_, qb_, Rwr(7, vb_, 1000, 12000));
  SendWr s = Wr(WrOpcode::kSendWithImm, 9, va_, 100, 10000);
  s.imm_data = 0xabcd0123;
  Post(a_, qa_, s);
  Pump();

  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 9u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 7u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, 10000u);
  EXPECT_EQ(rc[0].imm_data, 0xabcd0123u);
  EXPECT_EQ(rc[0].wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(rc[0].src_qpn, qa_.qpn);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[1000], &va_.buf[100], 10000));
  // ceil(10000 / 1024) packets, every one received, none dropped.
  EXPECT_EQ(a_.net_stats().tx_packets, 10u);
  EXPECT_EQ(b_.net_stats().rx_packets, 10u);
  EXPECT_EQ(b_.net_stats().total_drops(), 0u);
  // Both ends' PSNs moved on by 10, modulo 2^24.
  EXPECT_EQ(a_.QueryQp(qa_)->sq_psn, 4u);
  EXPECT_EQ(b_.QueryQp(qb_)->rq_psn, 4u);
}

TEST_F(SoftRnicNetTest, UcMessagesArePacketisedAtThePathMtu) {
  // A's QP towards the raw port (host 3), which decodes what arrives.
  qa_ = MakeQp(a_, va_, QpType::kUc);
  BringUp(a_, qa_, QpType::kUc, va_.gid, HostGid(3), 0x4321, 100);
  SendWr w = Wr(WrOpcode::kRdmaWriteWithImm, 1, va_, 0, 2500);
  w.remote_addr = 0x5000;
  w.rkey = 0x777;
  w.imm_data = 0x99;
  Post(a_, qa_, w);
  Post(a_, qa_, Wr(WrOpcode::kSend, 2, va_, 0, kMtu));  // exactly one MTU
  Post(a_, qa_, Wr(WrOpcode::kSend, 3, va_, 0, 0));     // empty
  Pump();
  auto p = RawPackets();
  ASSERT_EQ(p.size(), 5u);
  const uint8_t uc = net::kUc;
  EXPECT_EQ(p[0].h.opcode, uc | net::kWriteFirst);
  EXPECT_EQ(p[1].h.opcode, uc | net::kWriteMiddle);
  EXPECT_EQ(p[2].h.opcode, uc | net::kWriteLastImm);
  EXPECT_EQ(p[3].h.opcode, uc | net::kSendOnly);
  EXPECT_EQ(p[4].h.opcode, uc | net::kSendOnly);
  const size_t sizes[] = {1024, 1024, 452, 1024, 0};
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(p[i].payload.size(), sizes[i]) << i;
    EXPECT_EQ(p[i].h.psn, 100 + i) << i;
    EXPECT_EQ(p[i].h.dest_qpn, 0x4321u);
    EXPECT_EQ(p[i].h.src_qpn, qa_.qpn);
    EXPECT_EQ(p[i].h.sgid, va_.gid);
    EXPECT_EQ(p[i].h.dgid, HostGid(3));
  }
  // The RETH in the first packet only, the immediate in the last.
  EXPECT_EQ(p[0].h.remote_addr, 0x5000u);
  EXPECT_EQ(p[0].h.rkey, 0x777u);
  EXPECT_EQ(p[0].h.dma_len, 2500u);
  EXPECT_EQ(p[1].h.rkey, 0u);
  EXPECT_EQ(p[2].h.imm, 0x99u);
  EXPECT_EQ(p[0].h.imm, 0u);
  // The payload is the message, in order.
  std::vector<uint8_t> joined;
  for (int i = 0; i < 3; ++i) {
    joined.insert(joined.end(), p[i].payload.begin(), p[i].payload.end());
  }
  EXPECT_EQ(joined, std::vector<uint8_t>(va_.buf.begin(), va_.buf.begin() + 2500));
  EXPECT_EQ(a_.net_stats().tx_packets, 5u);
}

TEST_F(SoftRnicNetTest, UdIsOnePacketAtTheActiveMtu) {
  RnicQp ud = MakeQp(a_, va_, QpType::kUd);
  BringUp(a_, ud, QpType::kUd, va_.gid, va_.gid, 0);
  AddressVector av;
  av.sgid = va_.gid;
  av.dgid = HostGid(3);
  RnicAh ah = *a_.CreateAh(va_.pd, av);
  SendWr s = Wr(WrOpcode::kSend, 1, va_, 0, 4096);  // the active MTU
  s.ah = ah;
  s.remote_qpn = 0x55;
  s.remote_qkey = 0x80000000;  // the QP's own
  Post(a_, ud, s);
  s.sge[0].length = 4097;  // more: refused locally
  s.wr_id = 2;
  Post(a_, ud, s);
  Pump();
  auto p = RawPackets();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].h.opcode, net::kUd | net::kSendOnly);
  EXPECT_EQ(p[0].h.qkey, 0x1111u);
  EXPECT_EQ(p[0].h.dest_qpn, 0x55u);
  EXPECT_EQ(p[0].payload.size(), 4096u);
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[1].status, WcStatus::kLocLenErr);
}

TEST_F(SoftRnicNetTest, UcLostPacketDropsItsMessageWholeAndTheNextArrives) {
  ConnectUc();
  PostR(b_, qb_, Rwr(1, vb_, 0, 8192));
  PostR(b_, qb_, Rwr(2, vb_, 16384, 8192));
  const std::vector<uint8_t> before = vb_.buf;
  // Message 1: packets 0-3, the second (1) lost. Message 2: packets 4-6.
  lossy_a_.lose = {1};
  Post(a_, qa_, Wr(WrOpcode::kSend, 11, va_, 0, 4000));
  Post(a_, qa_, Wr(WrOpcode::kSend, 12, va_, 20000, 3000));
  Pump();
  // The sender cannot tell: both complete.
  auto sc = Poll(a_, va_.scq);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sc[1].status, WcStatus::kSuccess);
  // One receive completes, the first one (message 1 did not consume it),
  // with message 2 whole.
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], &va_.buf[20000], 3000));
  // Message 1's packets after the gap were dropped, counted as such.
  EXPECT_EQ(b_.net_stats().rx_packets, 6u);
  EXPECT_EQ(b_.net_stats().uc_messages_dropped, 1u);
  EXPECT_EQ(b_.net_stats().drops(NetDrop::kSequence), 2u);
  EXPECT_EQ(b_.net_stats().total_drops(), 2u);
  // Receive 2 is still posted: the next message takes it.
  Post(a_, qa_, Wr(WrOpcode::kSend, 13, va_, 30000, 100));
  Pump();
  rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 2u);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[16384], &va_.buf[30000], 100));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[16484], &before[16484], 8192 - 100));
}

TEST_F(SoftRnicNetTest, UcLostLastPacketIsFoundAtTheNextFirst) {
  ConnectUc();
  PostR(b_, qb_, Rwr(1, vb_, 0, 8192));
  lossy_a_.lose = {3};  // message 1's LAST
  Post(a_, qa_, Wr(WrOpcode::kSend, 11, va_, 0, 4000));
  Post(a_, qa_, Wr(WrOpcode::kSend, 12, va_, 20000, 2048));
  Pump();
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].byte_len, 2048u);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], &va_.buf[20000], 2048));
  EXPECT_EQ(b_.net_stats().uc_messages_dropped, 1u);
  EXPECT_EQ(b_.net_stats().total_drops(), 0u);  // no packet was out of place
}

TEST_F(SoftRnicNetTest, UcWriteWithImmLostMiddleCompletesNothing) {
  ConnectUc();
  PostR(b_, qb_, Rwr(1, vb_, 0, 0));
  const std::vector<uint8_t> before = vb_.buf;
  lossy_a_.lose = {1};
  SendWr w = Wr(WrOpcode::kRdmaWriteWithImm, 11, va_, 0, 3000);
  w.remote_addr = vb_.at(10000);
  w.rkey = vb_.mr.rkey;
  w.imm_data = 5;
  Post(a_, qa_, w);
  SendWr w2 = w;
  w2.wr_id = 12;
  w2.sge[0].addr = va_.at(40000);
  w2.remote_addr = vb_.at(20000);
  w2.imm_data = 6;
  Post(a_, qa_, w2);
  Pump();
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[0].imm_data, 6u);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[20000], &va_.buf[40000], 3000));
  // Of the dropped WRITE, the first packet's bytes were placed (as on an
  // RNIC), the rest never arrived.
  EXPECT_EQ(0, std::memcmp(&vb_.buf[10000], &va_.buf[0], kMtu));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[10000 + kMtu], &before[10000 + kMtu],
                           3000 - kMtu));
  EXPECT_EQ(b_.net_stats().uc_messages_dropped, 1u);
  EXPECT_EQ(b_.net_stats().drops(NetDrop::kSequence), 1u);
}

TEST_F(SoftRnicNetTest, UcOverALossyFabricDeliversOnlyWholeMessages) {
  // A third host C whose port loses 5% of what it sends: 300 messages of
  // 3 packets to B, each with its number in its first bytes.
  fabric::FaultConfig c;
  c.loss = 0.05;
  fabric::FaultyFabric faulty(fabric_.AddPort(), c, 17);
  SoftRnic hc(limits_, [this] { return now_; }, &faulty);
  Vm vc;
  MakeVm(hc, &vc, 5);
  RnicQp qc = MakeQp(hc, vc, QpType::kUc);
  qb_ = MakeQp(b_, vb_, QpType::kUc);
  BringUp(hc, qc, QpType::kUc, vc.gid, vb_.gid, qb_.qpn);
  BringUp(b_, qb_, QpType::kUc, vb_.gid, vc.gid, qc.qpn);
  constexpr uint64_t kMsgs = 300, kLen = 3000, kRecvs = 20;
  for (uint64_t i = 0; i < kRecvs; ++i) PostR(b_, qb_, Rwr(i, vb_, i * kLen, kLen));
  uint64_t posted = kRecvs, delivered = 0;
  uint64_t last_num = 0;
  for (uint64_t m = 0; m < kMsgs; ++m) {
    std::memcpy(&vc.buf[(m % 16) * kLen], &m, 8);
    Post(hc, qc, Wr(WrOpcode::kSend, m, vc, (m % 16) * kLen, kLen));
    for (int i = 0; i < 100 && (hc.Progress() | b_.Progress()); ++i) {
    }
    for (const Completion& rc : Poll(b_, vb_.rcq)) {
      // Receives complete in the order posted, each once (a dropped
      // message consumed none), each with one whole message, in order.
      ASSERT_EQ(rc.status, WcStatus::kSuccess);
      ASSERT_EQ(rc.wr_id, delivered);
      ASSERT_EQ(rc.byte_len, kLen);
      const uint8_t* got = &vb_.buf[(rc.wr_id % kRecvs) * kLen];
      uint64_t num = 0;
      std::memcpy(&num, got, 8);
      ASSERT_LT(num, kMsgs);
      if (delivered > 0) {
        EXPECT_GT(num, last_num);
      }
      last_num = num;
      EXPECT_EQ(0, std::memcmp(got + 8, &vc.buf[(num % 16) * kLen + 8], kLen - 8));
      ++delivered;
      PostR(b_, qb_, Rwr(posted, vb_, (posted % kRecvs) * kLen, kLen));
      ++posted;
    }
  }
  // A message arrives when its 3 packets do: 0.95^3 = 0.857 of them.
  const double p = 0.95 * 0.95 * 0.95;
  const double sigma = std::sqrt(kMsgs * p * (1 - p));
  EXPECT_NEAR(static_cast<double>(delivered), kMsgs * p, 3 * sigma);
  EXPECT_LE(delivered + b_.net_stats().uc_messages_dropped, kMsgs);
  EXPECT_GT(b_.net_stats().uc_messages_dropped, 0u);
  EXPECT_EQ(faulty.fault_stats().lost_random,
            kMsgs * 3 - b_.net_stats().rx_packets);
  // Every message completed at the sender, lost or not.
  EXPECT_EQ(Poll(hc, vc.scq).size(), kMsgs);
}

TEST_F(SoftRnicNetTest, UdDeliversWithAGrhAndDropsWhatItMust) {
  RnicQp ua = MakeQp(a_, va_, QpType::kUd);
  RnicQp ub = MakeQp(b_, vb_, QpType::kUd);
  BringUp(a_, ua, QpType::kUd, va_.gid, va_.gid, 0);
  BringUp(b_, ub, QpType::kUd, vb_.gid, vb_.gid, 0);
  AddressVector av;
  av.sgid = va_.gid;
  av.dgid = vb_.gid;
  av.flow_label = 0x12345;
  av.traffic_class = 0x20;
  av.hop_limit = 9;
  RnicAh ah = *a_.CreateAh(va_.pd, av);
  auto ud = [&](uint64_t id, uint32_t len, uint32_t qkey) {
    SendWr s = Wr(WrOpcode::kSendWithImm, id, va_, 500, len);
    s.ah = ah;
    s.remote_qpn = ub.qpn;
    s.remote_qkey = qkey;
    s.imm_data = 0x31;
    return s;
  };
  // Delivered: the GRH the sender's address vector makes, then the data.
  PostR(b_, ub, Rwr(1, vb_, 0, 1000));
  Post(a_, ua, ud(1, 200, 0x1111));
  Pump();
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 240u);
  EXPECT_EQ(rc[0].wc_flags, uint32_t{kWcGrh | kWcWithImm});
  EXPECT_EQ(rc[0].imm_data, 0x31u);
  EXPECT_EQ(rc[0].src_qpn, ua.qpn);
  uint8_t grh[kGrhBytes];
  BuildRoceGrh(av, 200, grh);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], grh, kGrhBytes));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[40], &va_.buf[500], 200));

  // Dropped: a wrong Q_Key; then no receive posted.
  Post(a_, ua, ud(2, 200, 0x2222));
  Pump();
  EXPECT_EQ(b_.net_stats().drops(NetDrop::kQkey), 1u);
  Post(a_, ua, ud(3, 200, 0x1111));
  Pump();
  EXPECT_EQ(b_.net_stats().drops(NetDrop::kNoReceive), 1u);
  EXPECT_TRUE(Poll(b_, vb_.rcq).empty());
  // Too long for the receive: that receive fails, the QP stays up.
  PostR(b_, ub, Rwr(4, vb_, 0, 100));
  PostR(b_, ub, Rwr(5, vb_, 0, 1000));
  Post(a_, ua, ud(4, 200, 0x1111));
  Post(a_, ua, ud(5, 10, 0x1111));
  Pump();
  rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 4u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(rc[1].wr_id, 5u);
  EXPECT_EQ(rc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[1].byte_len, 50u);
  EXPECT_EQ(b_.QueryQp(ub)->state, QpState::kRts);
  // The sender saw success every time: UD is unreliable.
  for (const Completion& c : Poll(a_, va_.scq)) {
    EXPECT_EQ(c.status, WcStatus::kSuccess);
  }
}

// A well-formed UC SEND_ONLY from A's QP to B's, as the raw port forges it.
class SoftRnicNetHostileTest : public SoftRnicNetTest {
 protected:
  void SetUp() override {
    SoftRnicNetTest::SetUp();
    ConnectUc();
    PostR(b_, qb_, Rwr(1, vb_, 0, 8192));
    before_ = vb_.buf;
    good_.opcode = net::kUc | net::kSendOnly;
    good_.dest_qpn = qb_.qpn;
    good_.src_qpn = qa_.qpn;
    good_.dgid = vb_.gid;
    good_.sgid = va_.gid;
    payload_.assign(100, 0xee);
  }
  // Sends h (and payload) from the raw port to B; B runs; returns the one
  // counter that moved, or kCount when none or several did.
  NetDrop Fired(const net::Header& h, std::span<const uint8_t> payload) {
    const SoftNetStats was = b_.net_stats();
    Inject(h, payload, vb_.gid);
    b_.Progress();
    const SoftNetStats& is = b_.net_stats();
    EXPECT_EQ(is.rx_packets, was.rx_packets + 1);
    NetDrop moved = NetDrop::kCount;
    int n = 0;
    for (size_t i = 0; i < is.dropped.size(); ++i) {
      if (is.dropped[i] != was.dropped[i]) {
        moved = static_cast<NetDrop>(i);
        n += static_cast<int>(is.dropped[i] - was.dropped[i]);
      }
    }
    return n == 1 ? moved : NetDrop::kCount;
  }
  NetDrop Fired(const net::Header& h) { return Fired(h, payload_); }
  void RawBytes(std::vector<uint8_t> p) { raw_->Send(p, vb_.gid, now_); }

  net::Header good_;
  std::vector<uint8_t> payload_;
  std::vector<uint8_t> before_;
};

TEST_F(SoftRnicNetHostileTest, MalformedPacketsAreCountedAndDropped) {
  // Syntax.
  std::vector<uint8_t> p(net::kHeaderBytes + 100);
  net::Header h = good_;
  h.payload_len = 100;
  net::EncodeHeader(h, p.data());
  auto raw = [&](auto edit) {
    std::vector<uint8_t> q = p;
    edit(q);
    const SoftNetStats was = b_.net_stats();
    raw_->Send(q, vb_.gid, now_);
    b_.Progress();
    for (size_t i = 0; i < was.dropped.size(); ++i) {
      if (b_.net_stats().dropped[i] == was.dropped[i] + 1) {
        return static_cast<NetDrop>(i);
      }
    }
    return NetDrop::kCount;
  };
  EXPECT_EQ(raw([](auto& q) { q.resize(50); }), NetDrop::kShort);
  EXPECT_EQ(raw([](auto& q) { q[0] = 9; }), NetDrop::kVersion);
  EXPECT_EQ(raw([](auto& q) { q.pop_back(); }), NetDrop::kLength);
  EXPECT_EQ(raw([](auto& q) { q[1] = 0x3f; }), NetDrop::kOpcode);
  EXPECT_EQ(raw([](auto& q) { q[11] = 0x01; }), NetDrop::kField);
  // Meaning.
  h = good_;
  h.dgid = HostGid(9);  // routed to B, but not B's GID
  EXPECT_EQ(Fired(h), NetDrop::kUnknownGid);
  h = good_;
  h.dest_qpn = qb_.qpn + 0x100;  // no such QP
  EXPECT_EQ(Fired(h), NetDrop::kUnknownQp);
  h = good_;
  h.opcode = net::kUd | net::kSendOnly;  // a UD packet to a UC QP
  EXPECT_EQ(Fired(h), NetDrop::kUnknownQp);
  h = good_;
  h.opcode = net::kRc | net::kSendOnly;  // an RC packet to a UC QP
  EXPECT_EQ(Fired(h), NetDrop::kUnknownQp);
  h = good_;
  h.src_qpn = qa_.qpn + 0x100;  // not B's peer
  EXPECT_EQ(Fired(h), NetDrop::kNotConnected);
  h = good_;
  h.sgid = HostGid(3);  // the peer's QPN from another host
  EXPECT_EQ(Fired(h), NetDrop::kNotConnected);
  h = good_;
  h.opcode = net::kUc | net::kSendMiddle;  // no message in progress
  h.psn = 0;
  EXPECT_EQ(Fired(std::move(h), std::vector<uint8_t>(kMtu)), NetDrop::kSequence);
  h = good_;
  h.opcode = net::kUc | net::kSendFirst;  // a FIRST shorter than the MTU
  EXPECT_EQ(Fired(h), NetDrop::kMtu);
  h = good_;
  h.opcode = net::kUc | net::kSendOnly;  // longer than the path MTU
  EXPECT_EQ(Fired(h, std::vector<uint8_t>(kMtu + 1)), NetDrop::kMtu);
  h = good_;
  h.opcode = net::kUc | net::kWriteOnly;  // a key B never gave
  h.rkey = vb_.mr.rkey + 1;
  h.remote_addr = vb_.at(0);
  h.dma_len = 100;
  EXPECT_EQ(Fired(h), NetDrop::kAccess);
  h.rkey = vb_.mr.rkey;
  h.remote_addr = vb_.at(kBufSize - 50);  // past the MR's end
  EXPECT_EQ(Fired(h), NetDrop::kAccess);
  h.remote_addr = vb_.at(0);
  h.dma_len = 99;  // the RETH disagrees with the payload
  EXPECT_EQ(Fired(h), NetDrop::kMtu);
  // A QP that does not receive yet.
  RnicQp idle = MakeQp(b_, vb_, QpType::kUc);
  h = good_;
  h.dest_qpn = idle.qpn;
  EXPECT_EQ(Fired(h), NetDrop::kState);

  // Nothing of it reached B's memory, its receive, or its QP's state.
  EXPECT_EQ(vb_.buf, before_);
  EXPECT_TRUE(Poll(b_, vb_.rcq).empty());
  EXPECT_EQ(b_.QueryQp(qb_)->state, QpState::kRts);
  // The one message that started (the WRITE whose payload overran its
  // RETH) was dropped whole.
  EXPECT_EQ(b_.net_stats().uc_messages_dropped, 1u);
  // The well-formed packet is delivered.
  Inject(good_, payload_, vb_.gid);
  b_.Progress();
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].byte_len, 100u);
  EXPECT_EQ(vb_.buf[0], 0xee);
}

TEST_F(SoftRnicNetTest, MutatedPacketsAreDroppedOrExecutedWithinTheRules) {
  // Real packets of every kind A sends B (UC, UD, RC: SEND, WRITE with
  // and without immediate, READ, atomics), recorded, then 20,000 copies
  // with a few random bytes changed (a fixed seed) sent to B from the raw
  // port. B must take every one (no crash, no hang: the run is bounded),
  // write only inside its MR (an unregistered canary next to it stays as
  // it was; under valgrind or ASan any stray write shows), and count
  // every packet it dropped.
  std::vector<std::vector<uint8_t>> sent;
  lossy_a_.record = &sent;
  ConnectUc();
  RnicQp rca = MakeQp(a_, va_, QpType::kRc);
  RnicQp rcb = MakeQp(b_, vb_, QpType::kRc);
  BringUp(a_, rca, QpType::kRc, va_.gid, vb_.gid, rcb.qpn);
  BringUp(b_, rcb, QpType::kRc, vb_.gid, va_.gid, rca.qpn);
  RnicQp uda = MakeQp(a_, va_, QpType::kUd);
  RnicQp udb = MakeQp(b_, vb_, QpType::kUd);
  BringUp(a_, uda, QpType::kUd, va_.gid, va_.gid, 0);
  BringUp(b_, udb, QpType::kUd, vb_.gid, vb_.gid, 0);
  AddressVector av;
  av.sgid = va_.gid;
  av.dgid = vb_.gid;
  RnicAh ah = *a_.CreateAh(va_.pd, av);
  auto post_recvs = [&] {
    for (uint64_t i = 0; i < 8; ++i) {
      Status st;
      const RecvWr r = Rwr(i, vb_, 4096 * i, 4096);
      b_.PostRecv(qb_, std::span(&r, 1), &st);
      b_.PostRecv(rcb, std::span(&r, 1), &st);
      b_.PostRecv(udb, std::span(&r, 1), &st);
    }
  };
  post_recvs();
  for (QpType t : {QpType::kUc, QpType::kRc}) {
    RnicQp q = t == QpType::kUc ? qa_ : rca;
    Post(a_, q, Wr(WrOpcode::kSendWithImm, 1, va_, 0, 2500));
    SendWr w = Wr(WrOpcode::kRdmaWriteWithImm, 2, va_, 0, 1500);
    w.remote_addr = vb_.at(40000);
    w.rkey = vb_.mr.rkey;
    Post(a_, q, w);
    w.opcode = WrOpcode::kRdmaWrite;
    Post(a_, q, w);
  }
  SendWr r = Wr(WrOpcode::kRdmaRead, 3, va_, 0, 2000);
  r.remote_addr = vb_.at(0);
  r.rkey = vb_.mr.rkey;
  Post(a_, rca, r);
  SendWr fa = Wr(WrOpcode::kAtomicFetchAdd, 4, va_, 8, 8);
  fa.remote_addr = vb_.at(48000);
  fa.rkey = vb_.mr.rkey;
  Post(a_, rca, fa);
  SendWr ud = Wr(WrOpcode::kSend, 5, va_, 0, 300);
  ud.ah = ah;
  ud.remote_qpn = udb.qpn;
  ud.remote_qkey = 0x1111;
  Post(a_, uda, ud);
  Pump();
  lossy_a_.record = nullptr;
  ASSERT_GE(sent.size(), 12u);

  std::vector<uint8_t> canary(4096, 0x5c);
  const std::vector<uint8_t> canary_was = canary;
  std::mt19937_64 rng(2026);
  const SoftNetStats was = b_.net_stats();
  constexpr int kRounds = 20'000;
  uint64_t empty = 0;
  for (int i = 0; i < kRounds; ++i) {
    std::vector<uint8_t> p = sent[rng() % sent.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      // Mostly the header, where the checks are.
      const size_t at = (rng() % 4 != 0 || p.size() == net::kHeaderBytes)
                            ? rng() % net::kHeaderBytes
                            : net::kHeaderBytes + rng() % (p.size() - net::kHeaderBytes);
      p[at] = static_cast<uint8_t>(rng());
    }
    if (rng() % 16 == 0) p.resize(rng() % (p.size() + 1));
    if (p.empty()) ++empty;  // the fabric carries no empty packet
    raw_->Send(p, vb_.gid, now_);
    b_.Progress();
    a_.Progress();  // what B answers goes to A
    now_ += 1000;
    if (i % 500 == 0) post_recvs();
    Poll(b_, vb_.rcq);
    Poll(a_, va_.scq);
  }
  EXPECT_EQ(canary, canary_was);
  const SoftNetStats& is = b_.net_stats();
  EXPECT_EQ(is.rx_packets - was.rx_packets, kRounds - empty);
  // Most mutations break a check; each such packet counted once.
  EXPECT_GT(is.total_drops() - was.total_drops(), kRounds / 2u);
  EXPECT_LE(is.total_drops() - was.total_drops(), static_cast<uint64_t>(kRounds));
}

TEST_F(SoftRnicNetHostileTest, ASendLongerThanTheReceiveFailsItAndTheQp) {
  // As in loopback: the receive completes kLocLenErr and a UC responder
  // goes to ERR.
  PostR(b_, qb_, Rwr(2, vb_, 10000, 100));
  net::Header h = good_;
  h.opcode = net::kUc | net::kSendFirst;
  std::vector<uint8_t> mtu(kMtu, 1);
  Inject(h, mtu, vb_.gid);  // into receive 1 (8192 bytes): fine
  for (uint32_t i = 1; i < 8; ++i) {
    h.opcode = net::kUc | net::kSendMiddle;
    h.psn = i;
    Inject(h, mtu, vb_.gid);
  }
  h.opcode = net::kUc | net::kSendLast;
  h.psn = 8;
  Inject(h, std::vector<uint8_t>(1, 1), vb_.gid);  // byte 8193
  b_.Progress();
  auto rc = Poll(b_, vb_.rcq);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(rc[1].wr_id, 2u);
  EXPECT_EQ(rc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(b_.QueryQp(qb_)->state, QpState::kErr);
}

TEST_F(SoftRnicNetTest, LoopbackStaysInsideTheHost) {
  Vm other;
  MakeVm(a_, &other, 4);
  RnicQp x = MakeQp(a_, va_, QpType::kUc);
  RnicQp y = MakeQp(a_, other, QpType::kUc);
  BringUp(a_, x, QpType::kUc, va_.gid, other.gid, y.qpn);
  BringUp(a_, y, QpType::kUc, other.gid, va_.gid, x.qpn);
  PostR(a_, y, Rwr(1, other, 0, 8192));
  Post(a_, x, Wr(WrOpcode::kSend, 1, va_, 0, 5000));
  Pump();
  auto rc = Poll(a_, other.rcq);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].byte_len, 5000u);
  EXPECT_EQ(0, std::memcmp(&other.buf[0], &va_.buf[0], 5000));
  EXPECT_EQ(a_.net_stats().tx_packets, 0u);
  // And a GID one host has cannot be added by another.
  EXPECT_EQ(b_.AddGid(other.gid), Status::kBusy);
}

}  // namespace
}  // namespace vrdma::testing
