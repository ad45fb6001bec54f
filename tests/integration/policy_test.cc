// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The published policies in the real daemon (--policy), between two
// in-process VMs on the software RNIC: a 1 MiB RDMA WRITE tenant next to a
// small-message tenant is split as the policy says (the stage's pieces in
// `stats`), every byte arrives, the guest sees one completion per WR, and
// `stats` reports the policy's view of each VM.
#include <cstring>

#include "guest-driver/perftest/pattern.h"
#include "tests/integration/two_vm_fixture.h"

namespace vrdma::integration {
namespace {

using perftest::CheckPattern;
using perftest::FillPattern;

constexpr uint32_t kBig = 1u << 20;
constexpr int kBigWrs = 6;

// Two VMs on a daemon running a policy, each with a 1 MiB MR, and an RC QP
// pair between them.
class PolicyTest : public TwoVmTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TwoVmTest::SetUp());
    auto ma = a_.dev->RegMr(*a_.pd, kBig, kAllAccess);
    auto mb = b_.dev->RegMr(*b_.pd, kBig, kAllAccess);
    ASSERT_TRUE(ma.ok() && mb.ok());
    big_a_ = std::move(ma.value());
    big_b_ = std::move(mb.value());
    qa_ = a_.CreateQp(VIRTIO_RDMA_QPT_RC);
    qb_ = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
    ASSERT_TRUE(qa_ && qb_);
    ASSERT_NO_FATAL_FAILURE(Connect(*qa_, a_.gid, *qb_, b_.gid));
  }
  void TearDown() override {
    qa_.reset();
    qb_.reset();
    big_a_.reset();
    big_b_.reset();
    TwoVmTest::TearDown();
  }

  // vm-b sends one 64 B WRITE to vm-a: the small-message tenant is there.
  void SmallWriteFromB() {
    guest::SendWr w;
    w.opcode = IB_UVERBS_WR_RDMA_WRITE;
    w.send_flags = guest::kSendSignaled;
    w.num_sge = 1;
    w.sge[0] = {b_.mr->iova(), 64, b_.mr->lkey()};
    w.remote_addr = a_.mr->iova();
    w.rkey = a_.mr->rkey();
    ASSERT_EQ(qb_->PostSend(w), Status::kOk);
    auto wc = PollOne(*b_.cq);
    ASSERT_TRUE(wc);
    ASSERT_EQ(wc->status, kWcSuccess);
  }

  // vm-a WRITEs kBigWrs x 1 MiB to vm-b (every one signaled, each with its
  // own pattern) and checks the last one's bytes and every completion.
  void BigWritesFromA() {
    for (int i = 0; i < kBigWrs; ++i) {
      FillPattern(big_a_->data(), kBig, 11, static_cast<uint64_t>(i));
      std::memset(big_b_->data(), 0, kBig);
      guest::SendWr w;
      w.wr_id = static_cast<uint64_t>(i);
      w.opcode = IB_UVERBS_WR_RDMA_WRITE;
      w.send_flags = guest::kSendSignaled;
      w.num_sge = 1;
      w.sge[0] = {big_a_->iova(), kBig, big_a_->lkey()};
      w.remote_addr = big_b_->iova();
      w.rkey = big_b_->rkey();
      ASSERT_EQ(qa_->PostSend(w), Status::kOk);
      auto wc = PollOne(*a_.cq);
      ASSERT_TRUE(wc);
      EXPECT_EQ(wc->status, kWcSuccess);
      EXPECT_EQ(wc->wr_id, static_cast<uint64_t>(i)) << "one CQE per guest WR";
      EXPECT_EQ(CheckPattern(big_b_->data(), kBig, 11, static_cast<uint64_t>(i)), kBig)
          << "WR " << i;
    }
    ib_uverbs_wc extra;
    EXPECT_EQ(a_.cq->Poll({&extra, 1}), 0) << "the stage's own pieces stay invisible";
  }

  double PiecesPerWr(const nlohmann::json& vm) {
    const auto& s = vm["scheduler"];
    return s["pieces_posted"].get<double>() / s["wrs_arrived"].get<double>();
  }

  std::unique_ptr<guest::Mr> big_a_, big_b_;
  std::unique_ptr<guest::Qp> qa_, qb_;
};

class PerfDaemonTest : public PolicyTest {
  std::vector<std::string> DaemonArgs() const override { return {"--policy", "perf"}; }
};
class JustitiaDaemonTest : public PolicyTest {
  std::vector<std::string> DaemonArgs() const override { return {"--policy", "justitia"}; }
};

TEST_F(PerfDaemonTest, SplitsTheBandwidthTenantIntoSubMessagesNextToAnother) {
  ASSERT_NO_FATAL_FAILURE(SmallWriteFromB());
  ASSERT_NO_FATAL_FAILURE(BigWritesFromA());
  const nlohmann::json a = daemon_.VmStats("vm-a");
  EXPECT_EQ(a["policy"]["class"], "B_App_single");
  EXPECT_EQ(a["policy"]["isolation"], "LMSE");
  // 16 KiB sub-messages: 64 per 1 MiB WR (the first small WR aside).
  EXPECT_NEAR(PiecesPerWr(a), 64.0, 0.5);
  EXPECT_EQ(a["scheduler"]["wrs_completed"], kBigWrs);
  const nlohmann::json b = daemon_.VmStats("vm-b");
  EXPECT_EQ(b["policy"]["class"], "D_App_single");
  EXPECT_EQ(b["policy"]["isolation"], "bypass");
  const nlohmann::json stats = daemon_.Control({{"cmd", "stats"}});
  EXPECT_EQ(stats["policy"]["name"], "perf");
  EXPECT_EQ(stats["policy"]["interrupts"], "posting window") << "no WAIT on the soft RNIC";
}

TEST_F(PerfDaemonTest, LeavesATenantAloneWhole) {
  ASSERT_NO_FATAL_FAILURE(BigWritesFromA());
  const nlohmann::json a = daemon_.VmStats("vm-a");
  EXPECT_EQ(a["policy"]["isolation"], "none (alone)");
  EXPECT_EQ(PiecesPerWr(a), 1.0) << "nobody to protect: no splitting";
}

TEST_F(JustitiaDaemonTest, SplitsToTokensWhenALatencyTenantIsThere) {
  const nlohmann::json r = daemon_.Control(
      {{"cmd", "set-qos"}, {"name", "vm-b"}, {"qos", {{"class", "latency"}}}});
  ASSERT_EQ(r["ok"], true) << r.dump();
  ASSERT_NO_FATAL_FAILURE(SmallWriteFromB());
  ASSERT_NO_FATAL_FAILURE(BigWritesFromA());
  const nlohmann::json a = daemon_.VmStats("vm-a");
  EXPECT_EQ(a["policy"]["class"], "bandwidth");
  EXPECT_GE(a["policy"]["tokens_received"].get<double>(), kBigWrs * 200.0);
  // 5,000-byte tokens with a latency tenant present: 210 pieces per 1 MiB.
  EXPECT_NEAR(PiecesPerWr(a), 210.0, 1.0);
  const nlohmann::json stats = daemon_.Control({{"cmd", "stats"}});
  EXPECT_EQ(stats["policy"]["name"], "justitia");
  EXPECT_EQ(stats["policy"]["token_bytes"], 5000);
  EXPECT_EQ(stats["policy"]["reference_flows"], 1) << "probes to this host's own loopback";
}

}  // namespace
}  // namespace vrdma::integration
