// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Two real vhost-rdma-daemon processes pointed at each other by the fabric
// flags (--fabric-listen, --fabric-route), one VM on each driven by an
// in-process guest (guest-driver/lib, tests/integration's harness): UD,
// UC and RC messages from the VM on one daemon reach the VM on the other
// through the two daemons' UDP sockets, payloads verified byte for byte.
// The first guest-to-guest path across daemons (docs/reliability.md §7.3
// will grow it into the two-daemon fixture with the peer channel).
#include <netinet/in.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/fabric/udp_address.h"
#include "backend/fabric/udp_fabric.h"
#include "guest-driver/perftest/pattern.h"
#include "tests/integration/two_vm_fixture.h"

namespace vrdma::integration {
namespace {

using guest::RecvWr;
using guest::SendWr;
using perftest::CheckPattern;
using perftest::FillPattern;

constexpr char kGidA[] = "::ffff:10.0.0.1";
constexpr char kGidB[] = "::ffff:10.0.0.2";

// A UDP port on 127.0.0.1 that was free a moment ago.
uint16_t FreePort() {
  fabric::UdpAddress a;
  EXPECT_TRUE(fabric::ParseUdpAddress("127.0.0.1:0", &a));
  std::string error;
  auto f = fabric::UdpFabric::Open(a, {}, &error);
  EXPECT_NE(f, nullptr) << error;
  return f ? ntohs(reinterpret_cast<const sockaddr_in&>(f->local_address().storage).sin_port)
           : 0;
}

SendWr MakeWr(uint32_t opcode, const guest::Mr& mr, uint64_t offset, uint32_t len,
              uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.send_flags = guest::kSendSignaled;
  wr.num_sge = 1;
  wr.sge[0] = {mr.iova() + offset, len, mr.lkey()};
  return wr;
}

RecvWr MakeRecv(const guest::Mr& mr, uint64_t offset, uint32_t len, uint64_t wr_id) {
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.num_sge = 1;
  wr.sge[0] = {mr.iova() + offset, len, mr.lkey()};
  return wr;
}

class TwoDaemonFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string pa = "127.0.0.1:" + std::to_string(FreePort());
    const std::string pb = "127.0.0.1:" + std::to_string(FreePort());
    std::string err;
    std::vector<std::string> args_a = {"--fabric-listen", pa, "--fabric-route",
                                       std::string(kGidB) + "=" + pb};
    std::vector<std::string> args_b = {"--fabric-listen", pb, "--fabric-route",
                                       std::string(kGidA) + "=" + pa};
    const std::vector<std::string> extra = ExtraArgs();
    args_a.insert(args_a.end(), extra.begin(), extra.end());
    args_b.insert(args_b.end(), extra.begin(), extra.end());
    ASSERT_TRUE(da_.Start(&err, args_a)) << err;
    ASSERT_TRUE(db_.Start(&err, args_b)) << err;
    const std::string sa = da_.AttachVm("vm-a", kGidA);
    const std::string sb = db_.AttachVm("vm-b", kGidB);
    ASSERT_FALSE(sa.empty());
    ASSERT_FALSE(sb.empty());
    ASSERT_NO_FATAL_FAILURE(a_.Open(sa));
    ASSERT_NO_FATAL_FAILURE(b_.Open(sb));
  }
  // More flags for both daemons (a derived fixture's faults).
  virtual std::vector<std::string> ExtraArgs() const { return {}; }

  void TearDown() override {
    a_.Close();
    b_.Close();
    EXPECT_TRUE(da_.alive()) << "daemon A died";
    EXPECT_TRUE(db_.alive()) << "daemon B died";
  }

  DaemonHarness da_, db_;
  Guest a_, b_;
};

TEST_F(TwoDaemonFabricTest, UdCrossesDaemons) {
  auto ua = a_.CreateQp(VIRTIO_RDMA_QPT_UD);
  auto ub = b_.CreateQp(VIRTIO_RDMA_QPT_UD);
  ASSERT_TRUE(ua && ub);
  ASSERT_NO_FATAL_FAILURE(Connect(*ua, a_.gid, *ub, b_.gid));
  auto ah = a_.dev->CreateAh(*a_.pd, b_.gid);
  ASSERT_TRUE(ah.ok()) << StatusName(ah.status());
  constexpr uint32_t kUd = 1000;
  ASSERT_EQ(ub->PostRecv(MakeRecv(*b_.mr, 0, 40 + kUd, 3)), Status::kOk);
  // UD has no RNR retry: make sure the device has picked the receive up.
  ASSERT_EQ(ub->RingRqDoorbell(), Status::kOk);
  FillPattern(a_.mr->data(), kUd, 6, 0);
  SendWr wr = MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, kUd, 4);
  wr.ah = (*ah)->handle();
  wr.remote_qpn = ub->qpn();
  wr.remote_qkey = 0x11111111;  // the qkey ToInit gives UD QPs
  ASSERT_EQ(ua->PostSend(wr), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc) << "daemon A: " << da_.Control({{"cmd", "stats"}}).dump()
                   << "\ndaemon B: " << db_.Control({{"cmd", "stats"}}).dump();
  EXPECT_EQ(rwc->status, kWcSuccess);
  EXPECT_EQ(rwc->src_qp, ua->qpn());
  EXPECT_EQ(rwc->byte_len, 40 + kUd);
  // The GRH names the sending VM's GID, as RoCE v2 would.
  EXPECT_EQ(std::memcmp(b_.mr->data() + 32, a_.gid.data() + 12, 4), 0);
  EXPECT_EQ(CheckPattern(b_.mr->data() + 40, kUd, 6, 0), kUd);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, kWcSuccess);
  ah->reset();
}

TEST_F(TwoDaemonFabricTest, UcSendAndWriteCrossDaemons) {
  auto ua = a_.CreateQp(VIRTIO_RDMA_QPT_UC);
  auto ub = b_.CreateQp(VIRTIO_RDMA_QPT_UC);
  ASSERT_TRUE(ua && ub);
  ASSERT_NO_FATAL_FAILURE(Connect(*ua, a_.gid, *ub, b_.gid));
  constexpr uint32_t kLen = 5000;  // five packets at the 1024-byte MTU
  ASSERT_EQ(ub->PostRecv(MakeRecv(*b_.mr, 0, 8192, 1)), Status::kOk);
  ASSERT_EQ(ub->RingRqDoorbell(), Status::kOk);
  FillPattern(a_.mr->data(), kLen, 8, 0);
  ASSERT_EQ(ua->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, kLen, 2)), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, kWcSuccess);
  EXPECT_EQ(rwc->byte_len, kLen);
  EXPECT_EQ(CheckPattern(b_.mr->data(), kLen, 8, 0), kLen);
  ASSERT_TRUE(PollOne(*a_.cq));
  FillPattern(a_.mr->data(), kLen, 8, 1);
  SendWr wr = MakeWr(IB_UVERBS_WR_RDMA_WRITE, *a_.mr, 0, kLen, 3);
  wr.remote_addr = b_.mr->iova() + 20000;
  wr.rkey = b_.mr->rkey();
  ASSERT_EQ(ua->PostSend(wr), Status::kOk);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, kWcSuccess);
  // UC has no ACK: the local completion may precede placement.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (CheckPattern(b_.mr->data() + 20000, kLen, 8, 1) != kLen &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(CheckPattern(b_.mr->data() + 20000, kLen, 8, 1), kLen);
}

TEST_F(TwoDaemonFabricTest, RcSendAndReadCrossDaemons) {
  auto qa = a_.CreateQp(VIRTIO_RDMA_QPT_RC);
  auto qb = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qa, a_.gid, *qb, b_.gid));
  constexpr uint32_t kLen = 6000;
  ASSERT_EQ(qb->PostRecv(MakeRecv(*b_.mr, 0, 8192, 1)), Status::kOk);
  FillPattern(a_.mr->data(), kLen, 9, 0);
  ASSERT_EQ(qa->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, kLen, 2)), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, kWcSuccess);
  EXPECT_EQ(rwc->byte_len, kLen);
  EXPECT_EQ(CheckPattern(b_.mr->data(), kLen, 9, 0), kLen);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, kWcSuccess);  // RC: acknowledged by daemon B
  // A READ of B's memory into A's.
  FillPattern(b_.mr->data() + 30000, kLen, 9, 1);
  SendWr rd = MakeWr(IB_UVERBS_WR_RDMA_READ, *a_.mr, 10000, kLen, 5);
  rd.remote_addr = b_.mr->iova() + 30000;
  rd.rkey = b_.mr->rkey();
  ASSERT_EQ(qa->PostSend(rd), Status::kOk);
  auto rdc = PollOne(*a_.cq);
  ASSERT_TRUE(rdc);
  EXPECT_EQ(rdc->status, kWcSuccess);
  EXPECT_EQ(rdc->wr_id, 5u);
  EXPECT_EQ(CheckPattern(a_.mr->data() + 10000, kLen, 9, 1), kLen);
}

// Both daemons lose 10% of what they send (--fabric-fault): native RC
// recovers by go-back-N, every message arrives once, whole and in order.
// 10 messages of 6 packets (the guest MR holds 64 KiB) and their ACKs:
// losses are all but certain (0.9^70 < 0.1%), and the seed makes the
// choices the same every run.
class LossyTwoDaemonFabricTest : public TwoDaemonFabricTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--fabric-fault", "loss=0.1", "--fabric-fault-seed", "15"};
  }
};

TEST_F(LossyTwoDaemonFabricTest, RcRecoversEveryMessage) {
  auto qa = a_.CreateQp(VIRTIO_RDMA_QPT_RC, 64);
  auto qb = b_.CreateQp(VIRTIO_RDMA_QPT_RC, 64);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qa, a_.gid, *qb, b_.gid));
  constexpr int kMsgs = 10;
  constexpr uint32_t kLen = 6000;
  for (int i = 0; i < kMsgs; ++i) {
    ASSERT_EQ(qb->PostRecv(MakeRecv(*b_.mr, uint64_t{kLen} * i, kLen, 100 + i)), Status::kOk);
  }
  for (int i = 0; i < kMsgs; ++i) {
    FillPattern(a_.mr->data() + uint64_t{kLen} * i, kLen, 10, i);
    ASSERT_EQ(qa->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, uint64_t{kLen} * i, kLen, i)),
              Status::kOk);
  }
  for (int i = 0; i < kMsgs; ++i) {
    auto r = PollOne(*b_.cq, 10000);
    ASSERT_TRUE(r) << "message " << i;
    EXPECT_EQ(r->status, kWcSuccess);
    EXPECT_EQ(r->wr_id, 100u + i);
    EXPECT_EQ(r->byte_len, kLen);
    EXPECT_EQ(CheckPattern(b_.mr->data() + uint64_t{kLen} * i, kLen, 10, i), kLen) << i;
  }
  for (int i = 0; i < kMsgs; ++i) {
    auto s = PollOne(*a_.cq, 10000);
    ASSERT_TRUE(s) << "send " << i;
    EXPECT_EQ(s->status, kWcSuccess);
    EXPECT_EQ(s->wr_id, static_cast<uint64_t>(i));
  }
  EXPECT_FALSE(PollOne(*b_.cq, 100));  // nothing twice
  // The daemons' stats: packets were lost on the way and sent again, and
  // nothing from a stranger or out of place reached either socket.
  const nlohmann::json fa = da_.Control({{"cmd", "stats"}})["fabric"];
  const nlohmann::json fb = db_.Control({{"cmd", "stats"}})["fabric"];
  const uint64_t lost = fa["faults"].value("lost_random", uint64_t{0}) +
                        fb["faults"].value("lost_random", uint64_t{0});
  EXPECT_GT(lost, 0u) << fa.dump() << "\n" << fb.dump();
  EXPECT_GT(fa["packets"].value("retransmitted", uint64_t{0}), 0u) << fa.dump();
  for (const nlohmann::json* f : {&fa, &fb}) {
    EXPECT_EQ((*f)["udp"]["rx_unknown_source"], 0) << f->dump();
    EXPECT_EQ((*f)["udp"]["rx_kernel_drops"], 0) << f->dump();
  }
}

}  // namespace
}  // namespace vrdma::integration
