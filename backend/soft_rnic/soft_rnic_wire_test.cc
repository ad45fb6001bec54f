// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The line rate on the injected clock (wire.h): what each message puts on
// the wire, one message per wire time, QPs sharing the wire in turn, an
// idle wire giving no credit and a late data path losing no wire time, and
// an RNIC that waits for its wire reporting itself busy.
#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <vector>

#include "backend/soft_rnic/soft_rnic_test_util.h"
#include "backend/soft_rnic/testing/write_load.h"

namespace vrdma::testing {
namespace {

using soft::Wire;

// 8 Gb/s: one byte per nanosecond, so wire times read as byte counts.
constexpr uint64_t kRate = 8'000'000'000;
constexpr uint32_t kMsg = 4096;  // one packet at the fixture's 4096 MTU
// A WRITE: its data packet and the ACK.
constexpr uint64_t kWriteNs = kMsg + 2 * Wire::kPacketOverheadBytes;

RnicLimits LineLimits() {
  RnicLimits l = DefaultSoftRnicLimits();
  l.link_rate_bps = kRate;
  return l;
}

class WireTest : public SoftRnicTest {
 protected:
  WireTest() : SoftRnicTest(LineLimits()) {}

  SendWr Write(uint64_t id) const {
    SendWr w = Wr(WrOpcode::kRdmaWrite, id, a_, 0, kMsg);
    w.remote_addr = b_.at(0);
    w.rkey = b_.mr.rkey;
    return w;
  }
  RnicQp SecondPair() {
    RnicQp a = MakeQp(a_, QpType::kRc);
    RnicQp b = MakeQp(b_, QpType::kRc);
    BringUp(a, QpType::kRc, a_, b_, b.qpn);
    BringUp(b, QpType::kRc, b_, a_, a.qpn);
    return a;
  }
  // Keeps each QP's send queue 32 deep for `ns` of clock, 1 us a step;
  // done_[i]: the WRITEs QP i completed so far (a later call goes on).
  void Saturate(const std::vector<RnicQp>& qps, uint64_t ns) {
    done_.resize(qps.size(), 0);
    posted_.resize(qps.size(), 0);
    std::array<Completion, 64> wcs;
    const uint64_t end = now_ + ns;
    for (; now_ <= end; now_ += 1000) {
      for (size_t i = 0; i < qps.size(); ++i) {
        while (posted_[i] - done_[i] < 32) {
          ASSERT_EQ(Post(qps[i], Write(i)), Status::kOk);
          ++posted_[i];
        }
      }
      rnic_.Progress();
      for (int n; (n = rnic_.PollCq(a_.scq, wcs)) > 0;) {
        for (int k = 0; k < n; ++k) {
          ASSERT_EQ(wcs[k].status, WcStatus::kSuccess);
          ++done_[wcs[k].wr_id];
        }
      }
    }
  }
  std::vector<uint64_t> done_, posted_;
};

TEST_F(WireTest, EachMessageCountsItsPacketsAndTheAnswer) {
  Connect(QpType::kRc);
  ASSERT_EQ(Post(qa_, Write(1)), Status::kOk);
  Drain();
  EXPECT_EQ(rnic_.wire_bytes(), kWriteNs) << "one data packet and the ACK";
  // A READ of two MTUs: a header-only request, two data packets back.
  SendWr r = Wr(WrOpcode::kRdmaRead, 2, a_, 0, 2 * kMsg);
  r.remote_addr = b_.at(0);
  r.rkey = b_.mr.rkey;
  now_ += 1'000'000;
  ASSERT_EQ(Post(qa_, r), Status::kOk);
  Drain();
  EXPECT_EQ(rnic_.wire_bytes(), kWriteNs + 2 * kMsg + 3 * Wire::kPacketOverheadBytes);
  // An RNR NAK is one packet back; the retry sends the message again.
  const uint64_t before = rnic_.wire_bytes();
  now_ += 1'000'000;
  ASSERT_EQ(Post(qa_, Wr(WrOpcode::kSend, 3, a_, 0, 100)), Status::kOk);
  Drain();
  EXPECT_EQ(rnic_.wire_bytes() - before, 100 + 2 * Wire::kPacketOverheadBytes);
  EXPECT_EQ(Poll(a_.scq).size(), 2u) << "the SEND still waits for a receive";
}

TEST_F(WireTest, UnreliableMessagesAreNotAnswered) {
  Connect(QpType::kUc);
  SendWr w = Write(1);
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  EXPECT_EQ(rnic_.wire_bytes(), kMsg + Wire::kPacketOverheadBytes);
}

TEST_F(WireTest, OneQpGetsOneMessagePerWireTime) {
  Connect(QpType::kRc);
  constexpr uint64_t kRun = 50'000'000;  // 50 ms of clock
  Saturate({qa_}, kRun);
  // Back to back from the first: message k starts at t0 + k * kWriteNs.
  const uint64_t expected = kRun / kWriteNs + 1;
  EXPECT_NEAR(static_cast<double>(done_[0]), static_cast<double>(expected), 1.0);
}

TEST_F(WireTest, TwoQpsShareTheWireInTurn) {
  Connect(QpType::kRc);
  const RnicQp second = SecondPair();
  Saturate({qa_, second}, 10'000'000);
  const std::vector<uint64_t> before = done_;
  constexpr uint64_t kRun = 50'000'000;
  Saturate({qa_, second}, kRun);
  const double a = static_cast<double>(done_[0] - before[0]);
  const double b = static_cast<double>(done_[1] - before[1]);
  EXPECT_NEAR(a + b, static_cast<double>(kRun) / kWriteNs, 2.0)
      << "together no more than the line";
  EXPECT_NEAR(a, b, 1.0) << "one message each in turn";
}

TEST_F(WireTest, WaitingForTheWireKeepsTheRnicBusyUntilItFrees) {
  Connect(QpType::kRc);
  ASSERT_EQ(Post(qa_, Write(0)), Status::kOk);
  EXPECT_TRUE(rnic_.Progress());
  EXPECT_EQ(Poll(a_.scq).size(), 1u) << "an idle wire takes it at once";
  ASSERT_EQ(Post(qa_, Write(0)), Status::kOk);
  EXPECT_EQ(rnic_.NextTimerNs(), now_ + kWriteNs);
  EXPECT_TRUE(rnic_.Progress()) << "work waits for the wire: not idle";
  EXPECT_TRUE(Poll(a_.scq).empty());
  now_ += kWriteNs - 1;
  EXPECT_TRUE(rnic_.Progress());
  EXPECT_TRUE(Poll(a_.scq).empty());
  now_ += 1;
  EXPECT_TRUE(rnic_.Progress());
  EXPECT_EQ(Poll(a_.scq).size(), 1u);
}

// Progress runs late (its thread was off the CPU for 1 ms): the WRITEs that
// were posted meanwhile go back to back from where the wire was, as a NIC
// would have sent them; an idle wire gives nothing back.
TEST_F(WireTest, ALateDataPathLosesNoWireTimeAnIdleWireGivesNone) {
  Connect(QpType::kRc);
  for (int i = 0; i < 32; ++i) ASSERT_EQ(Post(qa_, Write(0)), Status::kOk);
  const uint64_t t0 = now_;
  EXPECT_TRUE(rnic_.Progress());
  EXPECT_EQ(Poll(a_.scq).size(), 1u);
  now_ = t0 + 1'000'000;
  EXPECT_TRUE(rnic_.Progress());
  // Messages 1.. started at t0 + k * kWriteNs <= now_.
  EXPECT_EQ(Poll(a_.scq).size(), std::min<size_t>(31, 1'000'000 / kWriteNs));
  // Drained, then idle for a second: the next WRITE waits a full wire time
  // before the one after it.
  now_ += 1'000'000'000;
  Drain();
  Poll(a_.scq);
  now_ += 1'000'000'000;
  ASSERT_EQ(Post(qa_, Write(0)), Status::kOk);
  ASSERT_EQ(Post(qa_, Write(0)), Status::kOk);
  rnic_.Progress();
  EXPECT_EQ(Poll(a_.scq).size(), 1u) << "no credit for the idle second";
}

TEST(Wire, StartsAtTheLaterOfWireAndMessage) {
  Wire w(kRate);
  const uint64_t t = 1'000'000'000;
  w.Send(t, 1000);
  EXPECT_EQ(w.free_at(), t + 1000) << "idle: no credit";
  w.Send(t + 500, 1000);  // posted while the first was on the wire
  EXPECT_EQ(w.free_at(), t + 2000) << "back to back, however late it is served";
  w.Send(t + 10000, 1000);  // posted to an idle wire
  EXPECT_EQ(w.free_at(), t + 11000);
  EXPECT_TRUE(w.Busy(t + 10999));
  EXPECT_FALSE(w.Busy(t + 11000));
  EXPECT_EQ(w.bytes(), 3000u);
  // Sub-nanosecond times add up: 3 Gb/s is 2.667 ns a byte.
  Wire slow(3'000'000'000);
  for (int i = 0; i < 3000; ++i) slow.Send(t, 1);
  EXPECT_NEAR(static_cast<double>(slow.free_at() - t), 8000.0, 1.0);
  EXPECT_FALSE(Wire().limited());
  EXPECT_FALSE(Wire().Busy(0));
}

TEST(Wire, CountsPacketsOfTheMtu) {
  EXPECT_EQ(Wire::WireBytes(0, 1024), Wire::kPacketOverheadBytes);
  EXPECT_EQ(Wire::WireBytes(1024, 1024), 1024 + Wire::kPacketOverheadBytes);
  EXPECT_EQ(Wire::WireBytes(1025, 1024), 1025 + 2 * Wire::kPacketOverheadBytes);
  EXPECT_EQ(Wire::WireBytes(65536, 1024), 65536 + 64 * Wire::kPacketOverheadBytes);
}

TEST_F(SoftRnicTest, WithoutALineRateTheWireCountsNothing) {
  Connect(QpType::kRc);
  SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 4096);
  w.remote_addr = b_.at(0);
  w.rkey = b_.mr.rkey;
  ASSERT_EQ(Post(qa_, w), Status::kOk);
  Drain();
  EXPECT_EQ(rnic_.wire_bytes(), 0u);
  EXPECT_FALSE(rnic_.NextTimerNs().has_value());
  EXPECT_EQ(rnic_.limits().link_rate_bps, 0u);
}

// The same on the steady clock, over seconds, with 64 KiB WRITEs as
// write_bw sends them, 128 deep: loose bounds (this machine is shared and
// noisy: a thread kept off its CPU longer than its queue lasts, 33 ms here,
// loses line time), the figures printed. A 2 Gb/s line is far below what
// the CPU copies, so the wire is the limit.
TEST(WireOnTheSteadyClock, OneQpGetsTheLineAndTwoQpsShareIt) {
  constexpr uint64_t kLine = 2'000'000'000;
  constexpr uint32_t kBytes = 65536;
  const double expected_gbps =
      kLine / 1e9 * kBytes /
      (Wire::WireBytes(kBytes, WriteLoad::kMtu) + Wire::kPacketOverheadBytes);
  RnicLimits l = DefaultSoftRnicLimits();
  l.link_rate_bps = kLine;
  constexpr uint64_t kRunNs = 2'000'000'000;
  auto gbps = [](uint64_t bytes) { return bytes * 8.0 / kRunNs; };

  SoftRnic one(l);
  WriteLoad load1(one, 1, kBytes, 128);
  ASSERT_TRUE(load1.ok());
  const double alone = gbps(load1.Run(kRunNs)[0]);
  SoftRnic two(l);
  WriteLoad load2(two, 2, kBytes, 128);
  ASSERT_TRUE(load2.ok());
  const std::vector<uint64_t> b = load2.Run(kRunNs);
  const double qa = gbps(b[0]), qb = gbps(b[1]);
  std::printf("2 Gb/s line, 64 KiB WRITEs (payload %.3f Gb/s at most): one QP %.3f Gb/s; "
              "two QPs %.3f + %.3f = %.3f Gb/s\n",
              expected_gbps, alone, qa, qb, qa + qb);
  EXPECT_GT(alone, 0.9 * expected_gbps);
  EXPECT_LT(alone, 1.02 * expected_gbps) << "the line is the limit";
  EXPECT_GT(qa + qb, 0.9 * expected_gbps);
  EXPECT_LT(qa + qb, 1.02 * expected_gbps) << "two QPs together stay within the line";
  EXPECT_GT(std::min(qa, qb), 0.4 * (qa + qb)) << "they take turns";
}

}  // namespace
}  // namespace vrdma::testing
