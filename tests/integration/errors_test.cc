// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Bad keys and out-of-range addresses from a guest: each must end in an
// error completion with the verbs status a real RNIC gives, the QP in the
// error state (later work flushed), the daemon alive, and both VMs still
// able to do correct work on fresh QPs.
#include <cstring>
#include <ostream>
#include <functional>

#include "guest-driver/perftest/pattern.h"
#include "tests/integration/two_vm_fixture.h"

namespace vrdma::integration {
namespace {

struct BadWrCase {
  const char* name;
  uint32_t opcode;
  // Edits a correct WR (local SGE from a's MR, remote = b's MR) into a bad one.
  std::function<void(guest::SendWr&, const guest::Mr& local, const guest::Mr& remote)> spoil;
  uint32_t want_status;
};

const BadWrCase kCases[] = {
    {"send_bad_lkey", IB_UVERBS_WR_SEND,
     [](guest::SendWr& w, const guest::Mr&, const guest::Mr&) { w.sge[0].lkey ^= 0x00ab0000; },
     kWcLocProtErr},
    {"write_bad_lkey", IB_UVERBS_WR_RDMA_WRITE,
     [](guest::SendWr& w, const guest::Mr&, const guest::Mr&) { w.sge[0].lkey += 0x100; },
     kWcLocProtErr},
    {"send_sge_past_local_mr", IB_UVERBS_WR_SEND,
     [](guest::SendWr& w, const guest::Mr& l, const guest::Mr&) {
       w.sge[0].addr = l.iova() + l.length() - 10;  // 256 bytes from 10 before the end
     },
     kWcLocProtErr},
    {"send_with_other_vms_lkey", IB_UVERBS_WR_SEND,
     [](guest::SendWr& w, const guest::Mr&, const guest::Mr& r) {
       w.sge[0] = {r.iova(), 256, r.lkey()};  // the peer VM's buffer and key
     },
     kWcLocProtErr},
    {"write_bad_rkey", IB_UVERBS_WR_RDMA_WRITE,
     [](guest::SendWr& w, const guest::Mr&, const guest::Mr&) { w.rkey ^= 0x00cd0000; },
     kWcRemAccessErr},
    {"read_bad_rkey", IB_UVERBS_WR_RDMA_READ,
     [](guest::SendWr& w, const guest::Mr&, const guest::Mr&) { w.rkey += 0x100; },
     kWcRemAccessErr},
    {"write_past_remote_mr", IB_UVERBS_WR_RDMA_WRITE,
     [](guest::SendWr& w, const guest::Mr&, const guest::Mr& r) {
       w.remote_addr = r.iova() + r.length() - 100;
     },
     kWcRemAccessErr},
    {"read_before_remote_mr", IB_UVERBS_WR_RDMA_READ,
     [](guest::SendWr& w, const guest::Mr&, const guest::Mr& r) {
       w.remote_addr = r.iova() - 4096;
     },
     kWcRemAccessErr},
    {"write_with_lkey_as_rkey_of_other_vm", IB_UVERBS_WR_RDMA_WRITE,
     [](guest::SendWr& w, const guest::Mr& l, const guest::Mr&) {
       w.rkey = l.rkey();  // our own MR's key: not valid at the peer
     },
     kWcRemAccessErr},
};

// Readable parameter names in test output (not the struct's bytes).
void PrintTo(const BadWrCase& c, std::ostream* os) { *os << c.name; }

class BadWrTest : public TwoVmTest, public ::testing::WithParamInterface<BadWrCase> {
 protected:
  void SetUp() override { TwoVmTest::SetUp(); }
  void TearDown() override { TwoVmTest::TearDown(); }
};

TEST_P(BadWrTest, ErrorCompletionQpInErrorDaemonAlive) {
  const BadWrCase& c = GetParam();
  auto qa = a_.CreateQp(VIRTIO_RDMA_QPT_RC);
  auto qb = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qa, a_.gid, *qb, b_.gid));
  // The peer has a receive posted, so a SEND fails only for the bad key.
  guest::RecvWr rw;
  rw.wr_id = 50;
  rw.num_sge = 1;
  rw.sge[0] = {b_.mr->iova(), 4096, b_.mr->lkey()};
  ASSERT_EQ(qb->PostRecv(rw), Status::kOk);

  guest::SendWr wr;
  wr.wr_id = 1;
  wr.opcode = c.opcode;
  wr.send_flags = guest::kSendSignaled;
  wr.num_sge = 1;
  wr.sge[0] = {a_.mr->iova(), 256, a_.mr->lkey()};
  wr.remote_addr = b_.mr->iova();
  wr.rkey = b_.mr->rkey();
  c.spoil(wr, *a_.mr, *b_.mr);
  ASSERT_EQ(qa->PostSend(wr), Status::kOk);
  auto wc = PollOne(*a_.cq);
  ASSERT_TRUE(wc) << "no completion for the bad WR";
  EXPECT_EQ(wc->wr_id, 1u);
  EXPECT_EQ(wc->status, c.want_status);

  // The QP is in the error state; later work is flushed.
  auto q = qa->Query();
  ASSERT_TRUE(q.ok()) << StatusName(q.status());
  EXPECT_EQ(q->attr.qp_state, VIRTIO_RDMA_QPS_ERR);
  guest::SendWr good = wr;
  good.wr_id = 2;
  good.sge[0] = {a_.mr->iova(), 256, a_.mr->lkey()};
  good.rkey = b_.mr->rkey();
  good.remote_addr = b_.mr->iova();
  ASSERT_EQ(qa->PostSend(good), Status::kOk);
  auto flushed = PollOne(*a_.cq);
  ASSERT_TRUE(flushed) << "the WR posted after the error was not flushed";
  EXPECT_EQ(flushed->wr_id, 2u);
  EXPECT_EQ(flushed->status, kWcWrFlushErr);

  EXPECT_TRUE(daemon_.alive());
  // Drain whatever the responder side reported (its QP may be in error too).
  ib_uverbs_wc drain[8];
  while (b_.cq->Poll(drain) > 0) {
  }
  qa.reset();
  qb.reset();
  ASSERT_NO_FATAL_FAILURE(ExpectHealthy(a_, b_, 1));
  ASSERT_NO_FATAL_FAILURE(ExpectHealthy(b_, a_, 2));
}

INSTANTIATE_TEST_SUITE_P(Keys, BadWrTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<BadWrCase>& i) {
                           return std::string(i.param.name);
                         });

TEST_F(TwoVmTest, WriteToMrWithoutRemoteWriteIsRejected) {
  auto ro = b_.dev->RegMr(*b_.pd, 4096, VIRTIO_RDMA_ACCESS_LOCAL_WRITE | VIRTIO_RDMA_ACCESS_REMOTE_READ);
  ASSERT_TRUE(ro.ok());
  std::memset((*ro)->data(), 0x5c, 4096);
  auto qa = a_.CreateQp(VIRTIO_RDMA_QPT_RC);
  auto qb = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qa, a_.gid, *qb, b_.gid));
  guest::SendWr wr;
  wr.opcode = IB_UVERBS_WR_RDMA_WRITE;
  wr.send_flags = guest::kSendSignaled;
  wr.num_sge = 1;
  wr.sge[0] = {a_.mr->iova(), 128, a_.mr->lkey()};
  wr.remote_addr = (*ro)->iova();
  wr.rkey = (*ro)->rkey();
  ASSERT_EQ(qa->PostSend(wr), Status::kOk);
  auto wc = PollOne(*a_.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, kWcRemAccessErr);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ((*ro)->data()[i], 0x5c) << i;  // untouched
  qa.reset();
  qb.reset();
  ro->reset();
}

}  // namespace
}  // namespace vrdma::integration
