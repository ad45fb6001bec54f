// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Every opcode between two VMs through the real daemon (device, engine,
// software RNIC), payloads verified byte for byte, completions checked
// field by field as a verbs application would read them.
#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "backend/rnic/roce_grh.h"
#include "guest-driver/perftest/pattern.h"
#include "tests/integration/two_vm_fixture.h"

namespace vrdma::integration {
namespace {

using guest::RecvWr;
using guest::SendWr;
using perftest::CheckPattern;
using perftest::FillPattern;

constexpr uint32_t kLen = 3000;  // spans MTUs (1024) and pages of the MR

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

class OpcodeTest : public TwoVmTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TwoVmTest::SetUp());
    qa_ = a_.CreateQp(VIRTIO_RDMA_QPT_RC);
    qb_ = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
    ASSERT_TRUE(qa_ && qb_);
    ASSERT_NO_FATAL_FAILURE(Connect(*qa_, a_.gid, *qb_, b_.gid));
  }
  void TearDown() override {
    qa_.reset();
    qb_.reset();
    TwoVmTest::TearDown();
  }
  std::unique_ptr<guest::Qp> qa_, qb_;
};

TEST_F(OpcodeTest, RcSendRecv) {
  ASSERT_EQ(qb_->PostRecv(MakeRecv(*b_.mr, 4096, 8192, 77)), Status::kOk);
  FillPattern(a_.mr->data() + 100, kLen, 1, 1);
  ASSERT_EQ(qa_->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 100, kLen, 11)), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, 0u);
  EXPECT_EQ(rwc->wr_id, 77u);
  EXPECT_EQ(rwc->opcode, kWcRecv);
  EXPECT_EQ(rwc->byte_len, kLen);
  EXPECT_EQ(rwc->qp_num, qb_->qpn());
  EXPECT_EQ(CheckPattern(b_.mr->data() + 4096, kLen, 1, 1), kLen);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, 0u);
  EXPECT_EQ(swc->wr_id, 11u);
  EXPECT_EQ(swc->opcode, static_cast<uint32_t>(IB_UVERBS_WC_SEND));
}

TEST_F(OpcodeTest, RcSendWithImmAndManyInOrder) {
  for (uint32_t i = 0; i < 20; ++i) {
    ASSERT_EQ(qb_->PostRecv(MakeRecv(*b_.mr, i * 1024, 1024, 1000 + i)), Status::kOk);
  }
  for (uint32_t i = 0; i < 20; ++i) {
    FillPattern(a_.mr->data() + i * 1024, 500 + i, 2, i);
    SendWr wr = MakeWr(IB_UVERBS_WR_SEND_WITH_IMM, *a_.mr, i * 1024, 500 + i, i);
    wr.imm_data = htonl(0xabc00 + i);
    ASSERT_EQ(qa_->PostSend(wr), Status::kOk);
  }
  for (uint32_t i = 0; i < 20; ++i) {
    auto wc = PollOne(*b_.cq);
    ASSERT_TRUE(wc) << i;
    EXPECT_EQ(wc->status, 0u);
    EXPECT_EQ(wc->wr_id, 1000u + i);  // receives complete in order
    EXPECT_EQ(wc->byte_len, 500u + i);
    EXPECT_TRUE(wc->wc_flags & kWcFlagWithImm);
    EXPECT_EQ(ntohl(wc->ex.imm_data), 0xabc00u + i);
    EXPECT_EQ(CheckPattern(b_.mr->data() + i * 1024, 500 + i, 2, i), 500u + i);
  }
  for (uint32_t i = 0; i < 20; ++i) {
    auto wc = PollOne(*a_.cq);
    ASSERT_TRUE(wc);
    EXPECT_EQ(wc->status, 0u);
    EXPECT_EQ(wc->wr_id, i);
  }
}

TEST_F(OpcodeTest, RcWrite) {
  FillPattern(a_.mr->data(), kLen, 3, 7);
  std::memset(b_.mr->data() + 8000, 0xee, kLen + 16);
  SendWr wr = MakeWr(IB_UVERBS_WR_RDMA_WRITE, *a_.mr, 0, kLen, 5);
  wr.remote_addr = b_.mr->iova() + 8008;
  wr.rkey = b_.mr->rkey();
  ASSERT_EQ(qa_->PostSend(wr), Status::kOk);
  auto wc = PollOne(*a_.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, 0u);
  EXPECT_EQ(wc->opcode, static_cast<uint32_t>(IB_UVERBS_WC_RDMA_WRITE));
  EXPECT_EQ(CheckPattern(b_.mr->data() + 8008, kLen, 3, 7), kLen);
  // Exactly the target range was written.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(b_.mr->data()[8000 + i], 0xee);
    EXPECT_EQ(b_.mr->data()[8008 + kLen + i], 0xee);
  }
  // A plain WRITE consumes no receive and makes no completion at the target.
  ib_uverbs_wc none;
  EXPECT_EQ(b_.cq->Poll({&none, 1}), 0);
}

TEST_F(OpcodeTest, RcWriteWithImm) {
  ASSERT_EQ(qb_->PostRecv(MakeRecv(*b_.mr, 0, 0, 42)), Status::kOk);
  FillPattern(a_.mr->data(), kLen, 4, 1);
  SendWr wr = MakeWr(IB_UVERBS_WR_RDMA_WRITE_WITH_IMM, *a_.mr, 0, kLen, 6);
  wr.remote_addr = b_.mr->iova() + 20000;
  wr.rkey = b_.mr->rkey();
  wr.imm_data = htonl(0x12345678);
  ASSERT_EQ(qa_->PostSend(wr), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, 0u);
  EXPECT_EQ(rwc->wr_id, 42u);
  EXPECT_EQ(rwc->opcode, kWcRecvRdmaWithImm);
  EXPECT_TRUE(rwc->wc_flags & kWcFlagWithImm);
  EXPECT_EQ(ntohl(rwc->ex.imm_data), 0x12345678u);
  EXPECT_EQ(rwc->byte_len, kLen);
  EXPECT_EQ(CheckPattern(b_.mr->data() + 20000, kLen, 4, 1), kLen);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, 0u);
  EXPECT_EQ(swc->opcode, static_cast<uint32_t>(IB_UVERBS_WC_RDMA_WRITE));
}

TEST_F(OpcodeTest, RcRead) {
  FillPattern(b_.mr->data() + 1234, kLen, 5, 9);
  std::memset(a_.mr->data(), 0, kLen);
  SendWr wr = MakeWr(IB_UVERBS_WR_RDMA_READ, *a_.mr, 0, kLen, 8);
  wr.remote_addr = b_.mr->iova() + 1234;
  wr.rkey = b_.mr->rkey();
  ASSERT_EQ(qa_->PostSend(wr), Status::kOk);
  auto wc = PollOne(*a_.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, 0u);
  EXPECT_EQ(wc->wr_id, 8u);
  EXPECT_EQ(wc->opcode, static_cast<uint32_t>(IB_UVERBS_WC_RDMA_READ));
  EXPECT_EQ(wc->byte_len, kLen);
  EXPECT_EQ(CheckPattern(a_.mr->data(), kLen, 5, 9), kLen);
}

TEST_F(TwoVmTest, UdSendCarriesGrhWithTheSendersGid) {
  auto ua = a_.CreateQp(VIRTIO_RDMA_QPT_UD);
  auto ub = b_.CreateQp(VIRTIO_RDMA_QPT_UD);
  ASSERT_TRUE(ua && ub);
  ASSERT_NO_FATAL_FAILURE(Connect(*ua, a_.gid, *ub, b_.gid));
  auto ah = a_.dev->CreateAh(*a_.pd, b_.gid);
  ASSERT_TRUE(ah.ok()) << StatusName(ah.status());
  constexpr uint32_t kUd = 512;
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
  if (!rwc) {
    auto swc = PollOne(*a_.cq, 100);
    ADD_FAILURE() << "no UD receive; send completion: "
                  << (swc ? std::to_string(swc->status) : std::string("none"))
                  << "; stats " << daemon_.Control({{"cmd", "stats"}}).dump();
  }
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, 0u);
  EXPECT_EQ(rwc->opcode, kWcRecv);
  EXPECT_EQ(rwc->src_qp, ua->qpn());
  EXPECT_EQ(rwc->byte_len, 40 + kUd);
  EXPECT_TRUE(rwc->wc_flags & kWcFlagGrh);
  // The network header as RoCE v2 delivers it (roce_grh.h): the fixture's
  // GIDs are IPv4-mapped, so an IPv4 header at byte 20 with the source
  // address at 32 and the destination at 36. The source must be the
  // sending VM's own GID (it cannot spoof another's).
  ASSERT_TRUE(IsV4MappedGid(a_.gid) && IsV4MappedGid(b_.gid));
  EXPECT_EQ(b_.mr->data()[20], 0x45);
  EXPECT_EQ(std::memcmp(b_.mr->data() + 32, a_.gid.data() + 12, 4), 0);
  EXPECT_EQ(std::memcmp(b_.mr->data() + 36, b_.gid.data() + 12, 4), 0);
  EXPECT_EQ(CheckPattern(b_.mr->data() + 40, kUd, 6, 0), kUd);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, 0u);
  // A wrong qkey is dropped silently (UD): nothing arrives.
  ASSERT_EQ(ub->PostRecv(MakeRecv(*b_.mr, 4096, 40 + kUd, 5)), Status::kOk);
  ASSERT_EQ(ub->RingRqDoorbell(), Status::kOk);
  wr.remote_qkey = 0x22222222;
  wr.wr_id = 9;
  ASSERT_EQ(ua->PostSend(wr), Status::kOk);
  auto swc2 = PollOne(*a_.cq);
  ASSERT_TRUE(swc2);
  EXPECT_EQ(swc2->status, 0u);  // UD sends complete locally either way
  EXPECT_FALSE(PollOne(*b_.cq, 200));
  ah->reset();
}

TEST_F(TwoVmTest, UcSendAndWrite) {
  auto ua = a_.CreateQp(VIRTIO_RDMA_QPT_UC);
  auto ub = b_.CreateQp(VIRTIO_RDMA_QPT_UC);
  ASSERT_TRUE(ua && ub);
  ASSERT_NO_FATAL_FAILURE(Connect(*ua, a_.gid, *ub, b_.gid));
  ASSERT_EQ(ub->PostRecv(MakeRecv(*b_.mr, 0, 4096, 1)), Status::kOk);
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
  wr.remote_addr = b_.mr->iova() + 10000;
  wr.rkey = b_.mr->rkey();
  ASSERT_EQ(ua->PostSend(wr), Status::kOk);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, kWcSuccess);
  // UC has no ACK: the local completion may precede placement.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (CheckPattern(b_.mr->data() + 10000, kLen, 8, 1) != kLen &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::yield();
  }
  EXPECT_EQ(CheckPattern(b_.mr->data() + 10000, kLen, 8, 1), kLen);
}

TEST_F(TwoVmTest, InlineSendCopiesThePayloadAtPostTime) {
  guest::QpInitAttr qa;
  qa.qp_type = VIRTIO_RDMA_QPT_RC;
  qa.send_cq = a_.cq.get();
  qa.recv_cq = a_.cq.get();
  qa.max_inline_data = 128;
  auto q = a_.dev->CreateQp(*a_.pd, qa);
  ASSERT_TRUE(q.ok()) << StatusName(q.status());
  auto& qpa = *q;
  auto qpb = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
  ASSERT_TRUE(qpb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qpa, a_.gid, *qpb, b_.gid));
  ASSERT_GE(qpa->cap().max_inline_data, 100u);
  ASSERT_EQ(qpb->PostRecv(MakeRecv(*b_.mr, 0, 256, 1)), Status::kOk);
  // Inline data comes from ordinary (unregistered) memory and may be reused
  // as soon as PostSend returns.
  uint8_t payload[100];
  FillPattern(payload, sizeof(payload), 10, 0);
  SendWr wr;
  wr.opcode = IB_UVERBS_WR_SEND;
  wr.send_flags = guest::kSendSignaled | guest::kSendInline;
  wr.num_sge = 1;
  wr.sge[0] = {reinterpret_cast<uint64_t>(payload), sizeof(payload), 0};
  ASSERT_EQ(qpa->PostSend(wr), Status::kOk);
  std::memset(payload, 0, sizeof(payload));
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, kWcSuccess);
  EXPECT_EQ(rwc->byte_len, sizeof(payload));
  EXPECT_EQ(CheckPattern(b_.mr->data(), sizeof(payload), 10, 0), sizeof(payload));
  ASSERT_TRUE(PollOne(*a_.cq));
}

// req_notify_cq: a CQ_ARM doorbell asks for one completion event; it comes
// on the event queue naming the CQ, and only after a completion.
TEST_F(OpcodeTest, ArmedCqRaisesOneCompletionEvent) {
  while (b_.dev->driver().PollEvent()) {
  }
  ASSERT_EQ(b_.cq->ReqNotify(), Status::kOk);
  // Nothing completed yet: no event.
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(b_.dev->driver().PollEvent());
  ASSERT_EQ(qb_->PostRecv(MakeRecv(*b_.mr, 0, 256, 1)), Status::kOk);
  FillPattern(a_.mr->data(), 256, 7, 0);
  ASSERT_EQ(qa_->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, 256, 2)), Status::kOk);
  ASSERT_TRUE(PollOne(*b_.cq));
  ASSERT_TRUE(PollOne(*a_.cq));
  std::optional<virtio_rdma_event> ev;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!(ev = b_.dev->driver().PollEvent()) && std::chrono::steady_clock::now() < end) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(ev) << "no CQ_COMP event after an armed CQ completed";
  EXPECT_EQ(ev->type, static_cast<uint32_t>(VIRTIO_RDMA_EV_CQ_COMP));
  EXPECT_EQ(ev->handle, b_.cq->handle());
  // One arm, one event: a second completion raises nothing.
  ASSERT_EQ(qb_->PostRecv(MakeRecv(*b_.mr, 0, 256, 3)), Status::kOk);
  ASSERT_EQ(qa_->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, 256, 4)), Status::kOk);
  ASSERT_TRUE(PollOne(*b_.cq));
  ASSERT_TRUE(PollOne(*a_.cq));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(b_.dev->driver().PollEvent());
}

// With VIRTIO_RING_F_EVENT_IDX negotiated, a device that wants kicks must
// keep avail_event current after every drain; a Linux guest driver has no
// re-kick and would hang on its second command otherwise.
TEST_F(TwoVmTest, ControlCommandsNeedNoRekick) {
  const uint64_t before = a_.dev->driver().rekicks();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(a_.dev->QueryPort().ok());
  EXPECT_EQ(a_.dev->driver().rekicks() - before, 0u);
  EXPECT_EQ(before, 0u);
}

// librxe posts receives with no doorbell at all. The engine pulls the
// destination's receive queue before it posts a SEND to a QP on this host,
// so a datagram never overtakes a receive the guest had already posted.
TEST_F(TwoVmTest, UdReceivePostedLikeLibrxeIsDelivered) {
  auto ua = a_.CreateQp(VIRTIO_RDMA_QPT_UD);
  auto ub = b_.CreateQp(VIRTIO_RDMA_QPT_UD);
  ASSERT_TRUE(ua && ub);
  ASSERT_NO_FATAL_FAILURE(Connect(*ua, a_.gid, *ub, b_.gid));
  auto ah = a_.dev->CreateAh(*a_.pd, b_.gid);
  ASSERT_TRUE(ah.ok());
  int delivered = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(ub->PostRecv(MakeRecv(*b_.mr, 0, 40 + 64, i)), Status::kOk);
    SendWr wr = MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, 64, i);
    wr.ah = (*ah)->handle();
    wr.remote_qpn = ub->qpn();
    wr.remote_qkey = 0x11111111;
    ASSERT_EQ(ua->PostSend(wr), Status::kOk);
    ASSERT_TRUE(PollOne(*a_.cq));
    if (PollOne(*b_.cq, 200)) ++delivered;
  }
  EXPECT_EQ(delivered, 20);
  ah->reset();
}

}  // namespace
}  // namespace vrdma::integration
