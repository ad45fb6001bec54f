// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Two SoftRnics ("hosts" A and B) in one process, each on its own
// UdpFabric on 127.0.0.1 (docs/reliability.md §10 step 8): UC and UD
// messages cross real sockets as packets, whole and byte for byte, the
// counters of both layers agree, and a FaultyFabric over a UdpFabric (what
// --fabric-fault builds) loses packets without ever delivering part of a
// UC message. The style of backend/soft_rnic/net/soft_rnic_net_test.cc;
// the hosts run until what a test waits for has arrived (the kernel
// carries the datagrams, so this is real time, at most 3 s).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "backend/fabric/faulty_fabric.h"
#include "backend/fabric/udp_fabric.h"
#include "backend/rnic/roce_grh.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "backend/soft_rnic/net/soft_rnic_net_test_util.h"
#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {
namespace {

using fabric::UdpFabric;

std::unique_ptr<UdpFabric> OpenLoopback() {
  fabric::UdpAddress lo;
  EXPECT_TRUE(fabric::ParseUdpAddress("127.0.0.1:0", &lo));
  std::string error;
  auto f = UdpFabric::Open(lo, {}, &error);
  EXPECT_NE(f, nullptr) << error;
  return f;
}

class UdpSoftRnicTest : public ::testing::Test {
 protected:
  static constexpr size_t kBufSize = 1024 * 1024;
  static constexpr uint32_t kMtu = 1024;

  void SetUp() override {
    // Each host's fabric routes the other's VM GID to the other's socket.
    ASSERT_EQ(udp_a_->SetRoute(HostGid(2), udp_b_->local_address()), Status::kOk);
    ASSERT_EQ(udp_b_->SetRoute(HostGid(1), udp_a_->local_address()), Status::kOk);
  }

  // The hosts, once the test has chosen what A's port is.
  void MakeHosts(fabric::Fabric* port_a) {
    a_ = std::make_unique<SoftRnic>(DefaultSoftRnicLimits(), [this] { return now_; }, port_a);
    b_ = std::make_unique<SoftRnic>(DefaultSoftRnicLimits(), [this] { return now_; },
                                    udp_b_.get());
    MakeVm(*a_, &va_, 1);
    MakeVm(*b_, &vb_, 2);
  }

  static void MakeVm(SoftRnic& r, Vm* vm, uint8_t id) {
    MakeNetVm(r, vm, id, kBufSize, 4096);
  }
  static RnicQp MakeQp(SoftRnic& r, const Vm& vm, QpType type) {
    return MakeNetQp(r, vm, type, QpCaps{1024, 1024, 4, 4, 0});
  }
  // RESET -> RTS; UC: towards peer_qpn at peer, PSNs from psn.
  static void BringUp(SoftRnic& r, RnicQp qp, QpType type, const Gid& self,
                      const Gid& peer, uint32_t peer_qpn, uint32_t psn = 0) {
    BringUpNetQp(r, qp, type, self, peer, peer_qpn, kMtu, psn);
  }

  // Runs both hosts (their clock moving 1 us a turn) until `done` or 3 s.
  template <typename Done>
  void RunUntil(Done done) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!done()) {
      ASSERT_LT(std::chrono::steady_clock::now(), end) << "never got there";
      const bool busy = a_->Progress() | b_->Progress();
      now_ += 1000;
      if (!busy) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Drains cq into *out; returns how many *out holds.
  static size_t Drain(SoftRnic& r, RnicCq cq, std::vector<Completion>* out) {
    std::array<Completion, 64> batch;
    int n;
    while ((n = r.PollCq(cq, batch)) > 0) out->insert(out->end(), batch.begin(), batch.begin() + n);
    return out->size();
  }

  static void Post(SoftRnic& r, RnicQp qp, const SendWr& wr) { PostOne(r, qp, wr); }
  static void PostR(SoftRnic& r, RnicQp qp, uint64_t wr_id, const Vm& vm, uint64_t off,
                    uint32_t len) {
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.num_sge = 1;
    wr.sge[0] = Sge{vm.at(off), len, vm.mr.lkey};
    Status st = Status::kOk;
    EXPECT_EQ(r.PostRecv(qp, std::span(&wr, 1), &st), 1);
    EXPECT_EQ(st, Status::kOk);
  }
  static SendWr Wr(WrOpcode op, uint64_t wr_id, const Vm& vm, uint64_t off, uint32_t len) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = kSendSignaled;
    wr.num_sge = len > 0 ? 1 : 0;
    wr.sge[0] = Sge{vm.at(off), len, vm.mr.lkey};
    return wr;
  }
  static uint64_t Packets(uint32_t len) { return len == 0 ? 1 : (len + kMtu - 1) / kMtu; }

  uint64_t now_ = 1'000'000'000;
  std::unique_ptr<UdpFabric> udp_a_ = OpenLoopback();
  std::unique_ptr<UdpFabric> udp_b_ = OpenLoopback();
  std::unique_ptr<SoftRnic> a_, b_;
  Vm va_, vb_;
};

TEST_F(UdpSoftRnicTest, UcSendsAndWritesCrossTwoSockets) {
  MakeHosts(udp_a_.get());
  RnicQp qa = MakeQp(*a_, va_, QpType::kUc);
  RnicQp qb = MakeQp(*b_, vb_, QpType::kUc);
  // PSNs start just below 2^24: they wrap on the way.
  BringUp(*a_, qa, QpType::kUc, va_.gid, vb_.gid, qb.qpn, 0xffffc0);
  BringUp(*b_, qb, QpType::kUc, vb_.gid, va_.gid, qa.qpn, 0xffffc0);
  // 40 SENDs of 0..9.5 KB, each into its own 12 KiB receive, and one
  // WRITE_WITH_IMM of 20000 bytes: far more than one batch of 32 packets.
  constexpr int kSends = 40;
  std::vector<uint32_t> len(kSends);
  uint64_t packets = 0;
  for (int i = 0; i < kSends; ++i) {
    len[i] = static_cast<uint32_t>((i * 2371) % 9500);
    packets += Packets(len[i]);
    PostR(*b_, qb, 100 + i, vb_, uint64_t{12288} * i, 12288);
  }
  PostR(*b_, qb, 999, vb_, 0, 0);  // for the WRITE_WITH_IMM's immediate
  // In rounds of 4 messages (at most 40 packets, ~100 KB in the kernel):
  // an unpaced SoftRnic sends up to 32 messages a turn, more than the
  // receiving socket's default buffer holds (see UdpFabric's
  // rx_kernel_drops; a daemon asks for a larger buffer).
  std::vector<Completion> sc, rc;
  for (int i = 0; i < kSends; ++i) {
    SendWr s = Wr(WrOpcode::kSendWithImm, i, va_, uint64_t{97} * i, len[i]);
    s.imm_data = 0xabc00000u + i;
    Post(*a_, qa, s);
    if (i % 4 == 3) {
      RunUntil([&] { return Drain(*b_, vb_.rcq, &rc) == static_cast<size_t>(i + 1); });
    }
  }
  SendWr w = Wr(WrOpcode::kRdmaWriteWithImm, 500, va_, 100'000, 20'000);
  w.remote_addr = vb_.at(600'000);
  w.rkey = vb_.mr.rkey;
  w.imm_data = 0x77;
  Post(*a_, qa, w);
  packets += Packets(20'000);
  RunUntil([&] {
    return Drain(*a_, va_.scq, &sc) == kSends + 1 && Drain(*b_, vb_.rcq, &rc) == kSends + 1;
  });
  EXPECT_EQ(udp_b_->stats().rx_kernel_drops, 0u);
  for (const Completion& c : sc) EXPECT_EQ(c.status, WcStatus::kSuccess);
  // Every receive, in order, has its message whole.
  for (int i = 0; i < kSends; ++i) {
    ASSERT_EQ(rc[i].wr_id, 100u + i);
    EXPECT_EQ(rc[i].status, WcStatus::kSuccess);
    EXPECT_EQ(rc[i].byte_len, len[i]);
    EXPECT_EQ(rc[i].imm_data, 0xabc00000u + i);
    EXPECT_EQ(0, std::memcmp(&vb_.buf[12288 * i], &va_.buf[97 * i], len[i])) << i;
  }
  EXPECT_EQ(rc[kSends].wr_id, 999u);
  EXPECT_EQ(rc[kSends].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc[kSends].imm_data, 0x77u);
  EXPECT_EQ(rc[kSends].byte_len, 20'000u);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[600'000], &va_.buf[100'000], 20'000));
  // Both layers counted the same packets, computed from the sizes, and
  // the sockets carried them in batches.
  EXPECT_EQ(a_->net_stats().tx_packets, packets);
  EXPECT_EQ(udp_a_->stats().tx_packets, packets);
  EXPECT_LT(udp_a_->stats().tx_batches, packets);
  EXPECT_EQ(udp_b_->stats().delivered, packets);
  EXPECT_EQ(b_->net_stats().rx_packets, packets);
  EXPECT_EQ(b_->net_stats().total_drops(), 0u);
  EXPECT_EQ(udp_b_->stats().rx_dropped(), 0u);
  EXPECT_EQ(b_->QueryQp(qb)->rq_psn, (0xffffc0 + packets) & 0xffffff);
}

TEST_F(UdpSoftRnicTest, UdCrossesWithItsGrhAndAWrongQkeyIsDropped) {
  MakeHosts(udp_a_.get());
  RnicQp ua = MakeQp(*a_, va_, QpType::kUd);
  RnicQp ub = MakeQp(*b_, vb_, QpType::kUd);
  BringUp(*a_, ua, QpType::kUd, va_.gid, va_.gid, 0);
  BringUp(*b_, ub, QpType::kUd, vb_.gid, vb_.gid, 0);
  AddressVector av;
  av.sgid = va_.gid;
  av.dgid = vb_.gid;
  av.flow_label = 0x54321;
  av.hop_limit = 7;
  RnicAh ah = *a_->CreateAh(va_.pd, av);
  auto ud = [&](uint64_t id, uint32_t len, uint32_t qkey) {
    SendWr s = Wr(WrOpcode::kSend, id, va_, 1000 + id, len);
    s.ah = ah;
    s.remote_qpn = ub.qpn;
    s.remote_qkey = qkey;
    return s;
  };
  PostR(*b_, ub, 1, vb_, 0, 4096 + kGrhBytes);
  PostR(*b_, ub, 2, vb_, 8192, 4096 + kGrhBytes);
  Post(*a_, ua, ud(1, 4096, 0x2222));  // a wrong Q_Key: dropped at B
  Post(*a_, ua, ud(2, 4096, 0x1111));  // the active MTU, one packet
  Post(*a_, ua, ud(3, 33, 0x1111));
  std::vector<Completion> sc, rc;
  RunUntil([&] { return Drain(*a_, va_.scq, &sc) == 3 && Drain(*b_, vb_.rcq, &rc) == 2; });
  EXPECT_EQ(b_->net_stats().drops(NetDrop::kQkey), 1u);
  EXPECT_EQ(rc[0].wr_id, 1u);
  EXPECT_EQ(rc[0].byte_len, 4096u + kGrhBytes);
  EXPECT_EQ(rc[0].src_qpn, ua.qpn);
  EXPECT_EQ(rc[0].wc_flags, uint32_t{kWcGrh});
  uint8_t grh[kGrhBytes];
  BuildRoceGrh(av, 4096, grh);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], grh, kGrhBytes));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[kGrhBytes], &va_.buf[1002], 4096));
  EXPECT_EQ(rc[1].wr_id, 2u);
  EXPECT_EQ(rc[1].byte_len, 33u + kGrhBytes);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[8192 + kGrhBytes], &va_.buf[1003], 33));
  EXPECT_EQ(udp_b_->stats().delivered, 3u);
  EXPECT_EQ(udp_b_->stats().rx_dropped(), 0u);
}

TEST_F(UdpSoftRnicTest, FaultyUdpLosesPacketsButNeverPartOfAUcMessage) {
  // What --fabric-fault loss=0.02 builds: a FaultyFabric over the socket.
  fabric::FaultConfig fc;
  fc.loss = 0.02;
  fabric::FaultyFabric lossy_a(udp_a_.get(), fc, /*seed=*/15);
  MakeHosts(&lossy_a);
  RnicQp qa = MakeQp(*a_, va_, QpType::kUc);
  RnicQp qb = MakeQp(*b_, vb_, QpType::kUc);
  BringUp(*a_, qa, QpType::kUc, va_.gid, vb_.gid, qb.qpn);
  BringUp(*b_, qb, QpType::kUc, vb_.gid, va_.gid, qa.qpn);
  // 60 messages of 4 packets; each names itself in its first 4 bytes.
  constexpr int kMsgs = 60;
  constexpr uint32_t kLen = 4 * kMtu;
  std::vector<Completion> sc, rc;
  for (int i = 0; i < kMsgs; ++i) {
    PostR(*b_, qb, i, vb_, uint64_t{kLen} * i, kLen);
    const uint32_t tag = i;
    std::memcpy(&va_.buf[uint64_t{kLen} * i], &tag, 4);
    Post(*a_, qa, Wr(WrOpcode::kSend, i, va_, uint64_t{kLen} * i, kLen));
    if (i % 6 == 5) {  // rounds of 24 packets: the socket's buffer holds them
      // Every packet A sent has been through B or was lost on the way.
      RunUntil([&] {
        return b_->net_stats().rx_packets + lossy_a.fault_stats().lost_random ==
               (i + 1) * 4u;
      });
    }
  }
  EXPECT_EQ(Drain(*a_, va_.scq, &sc), static_cast<size_t>(kMsgs));
  Drain(*b_, vb_.rcq, &rc);
  EXPECT_EQ(udp_b_->stats().rx_kernel_drops, 0u);
  EXPECT_GT(lossy_a.fault_stats().lost_random, 0u);
  ASSERT_GT(rc.size(), 0u);
  ASSERT_LT(rc.size(), static_cast<size_t>(kMsgs));
  // Receives complete in order; each holds one message whole, messages in
  // the order sent.
  int last = -1;
  for (size_t k = 0; k < rc.size(); ++k) {
    EXPECT_EQ(rc[k].wr_id, k);
    ASSERT_EQ(rc[k].byte_len, kLen);
    uint32_t tag;
    std::memcpy(&tag, &vb_.buf[uint64_t{kLen} * k], 4);
    ASSERT_LT(tag, static_cast<uint32_t>(kMsgs));
    EXPECT_GT(static_cast<int>(tag), last);
    last = static_cast<int>(tag);
    EXPECT_EQ(0, std::memcmp(&vb_.buf[uint64_t{kLen} * k], &va_.buf[uint64_t{kLen} * tag],
                             kLen));
  }
  EXPECT_EQ(udp_b_->stats().rx_dropped(), 0u);
}

}  // namespace
}  // namespace vrdma::testing
