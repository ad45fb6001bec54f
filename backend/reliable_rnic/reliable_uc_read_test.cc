// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// uc mode for READ and atomics (docs/reliability.md §2.3, §10 step 13), on
// the fixture of reliable_uc_test_util.h: a READ is one READ_REQ, checked
// by the responder's rules and served at its delivery as READ_RESP units
// copied into the READ's local SGEs; CMP_SWP and FETCH_ADD go on the
// virtual QP's lower RC QP, in post order.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace vrdma::testing {
namespace {

class ReliableUcReadTest : public ReliableUcTest {
 protected:
  // B's buffer: a pattern unlike A's.
  void FillB(uint32_t salt = 0) {
    for (size_t i = 0; i < kBufSize; ++i) {
      vb_.buf[i] = static_cast<uint8_t>(i * 13 + i / 4091 + 5 + salt);
    }
  }
  // An atomic on B's 8 bytes at dst, its result into A's at res.
  SendWr Atomic(uint64_t wr_id, WrOpcode op, uint64_t res, uint64_t dst,
                uint64_t compare_add, uint64_t swap = 0) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = op;
    w.send_flags = kSendSignaled;
    w.num_sge = 1;
    w.sge[0] = Sge{va_.at(res), 8, va_.mr.lkey};
    w.remote_addr = vb_.at(dst);
    w.rkey = vb_.mr.rkey;
    w.compare_add = compare_add;
    w.swap = swap;
    return w;
  }
  uint64_t U64(const std::vector<uint8_t>& buf, uint64_t off) const {
    uint64_t v;
    std::memcpy(&v, &buf[off], 8);
    return v;
  }
  void SetU64(std::vector<uint8_t>& buf, uint64_t off, uint64_t v) {
    std::memcpy(&buf[off], &v, 8);
  }

  struct PlannedRead {
    uint64_t wr_id, dst, src;
    uint32_t len;
  };
  // Posts the READs in order, runs until each completed, and checks one
  // completion per WR, in post order, success, and A's bytes equal B's.
  void ReadAndVerify(const std::vector<PlannedRead>& plan, int max_turns) {
    for (const PlannedRead& p : plan) Post(Read(p.wr_id, p.src, p.dst, p.len));
    const size_t before = got_.size();
    ASSERT_TRUE(RunUntil([&] { return got_.size() >= before + plan.size(); },
                         max_turns))
        << "completed " << got_.size() - before << " of " << plan.size();
    Run(300);  // nothing more may come
    ASSERT_EQ(got_.size(), before + plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      const Completion& c = got_[before + i];
      EXPECT_EQ(c.wr_id, plan[i].wr_id) << i;
      EXPECT_EQ(c.status, WcStatus::kSuccess) << i;
      EXPECT_EQ(c.opcode, WcOpcode::kRdmaRead) << i;
      EXPECT_EQ(c.byte_len, plan[i].len) << i;
      EXPECT_EQ(0, std::memcmp(&va_.buf[plan[i].dst], &vb_.buf[plan[i].src],
                               plan[i].len))
          << "READ " << plan[i].wr_id << " of " << plan[i].len << " bytes";
    }
  }
  // n READs of sizes up to 256 KiB from B, each into its own place of A.
  static std::vector<PlannedRead> MixedReads(int n, uint64_t seed) {
    static constexpr uint32_t kSizes[] = {0,    1,    100,   4095,   4096,
                                          4097, 8197, 65536, 100000, 262144};
    std::mt19937_64 rng(seed);
    std::vector<PlannedRead> plan;
    uint64_t dst = 0;
    for (int i = 0; i < n; ++i) {
      const uint32_t len = kSizes[rng() % std::size(kSizes)];
      plan.push_back({100u + i, dst, (rng() % 1000) * 11, len});
      dst += (len + 4095) / 4096 * 4096 + 4096;
    }
    return plan;
  }
};

TEST_F(ReliableUcReadTest, ReadOfEverySizeClass) {
  Build();
  Connect();
  FillB();
  const uint32_t sizes[] = {0, 1, 4095, 4096, 4097, 64 << 10, 1 << 20};
  std::vector<PlannedRead> plan;
  uint64_t dst = 0;
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    plan.push_back({1 + i, dst, 3 + i * 1001, sizes[i]});
    dst += sizes[i] + 8192;
  }
  ReadAndVerify(plan, 40000);
  // Not a byte past the READs: A's own pattern is still there.
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    const uint64_t end = plan[i].dst + sizes[i];
    EXPECT_EQ(va_.buf[end], static_cast<uint8_t>(end * 7 + end / 4093 + 1))
        << i;
  }
  const auto& a = la_->counters();
  const auto& b = lb_->counters();
  EXPECT_EQ(a.reads_sent, std::size(sizes));
  EXPECT_EQ(a.reads_completed, std::size(sizes));
  EXPECT_EQ(b.reads_served, std::size(sizes));
  // Units: max(1, ceil(len / 4096)) each.
  EXPECT_EQ(b.read_units_sent, 1u + 1 + 1 + 1 + 2 + 16 + 256);
  EXPECT_EQ(a.read_units_received, b.read_units_sent);
  EXPECT_EQ(b.read_units_resent, 0u);
  for (size_t i = 0; i < reliable::kWireCounterCount; ++i) {
    EXPECT_EQ(a.wire[i], 0u) << reliable::kWireCounters[i].name;
    EXPECT_EQ(b.wire[i], 0u) << reliable::kWireCounters[i].name;
  }
}

// READs under loss, reordering and duplication (both directions: requests,
// responses, ACKs): every byte verified, each WR completed once, in order.
class ReliableUcReadFaultTest : public ReliableUcReadTest,
                                public ::testing::WithParamInterface<double> {};

TEST_P(ReliableUcReadFaultTest, ReadsUnderFaults) {
  const fabric::FaultConfig f = Faults(GetParam(), 0.02, 0.02);
  Build(f, f, 7);
  Connect();
  FillB();
  ReadAndVerify(MixedReads(40, 5), 400000);
  const auto& a = la_->counters();
  const auto& b = lb_->counters();
  EXPECT_EQ(a.reads_completed, 40u);
  EXPECT_EQ(b.reads_served, 40u);  // a duplicate READ_REQ is never served
  EXPECT_GT(b.read_units_resent, 0u);
  EXPECT_EQ(a.retry_exceeded, 0u);
  EXPECT_EQ(b.read_responses_dropped, 0u);
  std::printf(
      "loss %.2f: %lu READ_RESP units, %lu sent again; %lu READ_REQ "
      "units again (WRITE_RETX path: %lu); losses A %lu RACK %lu RTO, "
      "B %lu RACK %lu RTO; dup units at A %lu\n",
      GetParam(), static_cast<unsigned long>(b.read_units_sent),
      static_cast<unsigned long>(b.read_units_resent),
      static_cast<unsigned long>(a.retx_sent),
      static_cast<unsigned long>(a.retx_sent),
      static_cast<unsigned long>(a.lost_rack),
      static_cast<unsigned long>(a.lost_rto),
      static_cast<unsigned long>(b.lost_rack),
      static_cast<unsigned long>(b.lost_rto),
      static_cast<unsigned long>(a[WireCounter::kRxDuplicate]));
}

INSTANTIATE_TEST_SUITE_P(Loss, ReliableUcReadFaultTest,
                         ::testing::Values(0.01, 0.05));

// RC order across opcodes (§1): a READ after a WRITE to the same remote
// buffer sees the WRITE's bytes; SENDs between them complete their
// receives; every WR completes in post order. Under loss and reordering.
TEST_F(ReliableUcReadTest, WriteSendReadKeepOrder) {
  const fabric::FaultConfig f = Faults(0.03, 0.02, 0.01);
  Build(f, f, 17);
  Connect();
  constexpr uint32_t kLen = 100000;
  std::vector<uint64_t> order;
  uint64_t id = 1;
  for (int round = 0; round < 6; ++round) {
    const uint64_t src = 5 + round * 3001;  // A's pattern, a new slice
    const uint64_t at = 1 << 20;            // one remote buffer, rewritten
    const uint64_t back = (4 << 20) + round * (kLen + 4096);
    PostRecvB(500 + round, (6 << 20) + round * 8192, 8192);
    Post(Write(id, src, at, kLen));
    order.push_back(id++);
    Post(Send(id, 7 + round, 3000));
    order.push_back(id++);
    Post(Read(id, at, back, kLen));
    order.push_back(id++);
    ASSERT_TRUE(RunUntil([&] { return got_.size() == order.size(); }, 200000))
        << "round " << round << ": " << got_.size() << " of " << order.size();
    // The READ saw the WRITE before it, every byte.
    EXPECT_EQ(0, std::memcmp(&va_.buf[back], &va_.buf[src], kLen)) << round;
  }
  Run(300);
  ASSERT_EQ(got_.size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(got_[i].wr_id, order[i]) << i;
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess) << i;
  }
  ASSERT_EQ(recv_b_.size(), 6u);
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(recv_b_[r].wr_id, 500u + r);
    EXPECT_EQ(recv_b_[r].byte_len, 3000u);
  }
}

// A READ_REQ lost, sent again, and its first copy delivered late, after
// the READ completed: served once, the late copy acknowledged again,
// nothing written twice, no second completion.
TEST_F(ReliableUcReadTest, LostThenLateReadRequestIsServedOnce) {
  Build();
  Connect();
  FillB();
  tap_a_->hold = true;
  tap_a_->match = [&](std::span<const uint8_t> p, const Gid&) {
    return tap_a_->held.empty() && IsUcSend(p) &&
           p.size() > net::kHeaderBytes &&
           p[net::kHeaderBytes] ==
               static_cast<uint8_t>(reliable::HeaderType::kReadReq);
  };
  Post(Read(1, 4096, 0, 64 << 10));
  ASSERT_TRUE(RunUntil([&] { return got_.size() == 1; }, 20000));
  ASSERT_EQ(tap_a_->held.size(), 1u);
  EXPECT_EQ(got_[0].status, WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(&va_.buf[0], &vb_.buf[4096], 64 << 10));
  EXPECT_GE(la_->counters().retx_sent, 1u);  // the READ_REQ again
  const std::vector<uint8_t> first(va_.buf.begin(),
                                   va_.buf.begin() + (64 << 10));
  tap_a_->match = nullptr;
  FillB(1);  // a second serving would bring other bytes
  tap_a_->Release(0, now_);
  Run(2000);
  EXPECT_EQ(got_.size(), 1u);
  EXPECT_EQ(0, std::memcmp(&va_.buf[0], first.data(), first.size()));
  const auto& b = lb_->counters();
  EXPECT_EQ(b.reads_served, 1u);
  EXPECT_EQ(b.read_units_sent, 16u);
  EXPECT_GE(b[WireCounter::kRxAfterDelivery], 1u);
}

// A READ the responder refuses: REM_ACCESS_ERR (REM_INV_REQ_ERR for the
// QP's own rules), the WR after it flushed, and the rule's counter.
class ReliableUcReadAccessTest : public ReliableUcReadTest {
 protected:
  void ExpectRefused(const SendWr& bad, WcStatus status,
                     uint64_t reliable::ReliabilityCounters::*rule,
                     const QpConf& c = {}) {
    Connect(c);
    FillB();
    Post(Read(1, 0, 0, 5000));  // a good one first
    Post(bad);
    Post(Read(3, 0, 8192, 100));
    ASSERT_TRUE(RunUntil([&] { return got_.size() == 3; }, 20000));
    Run(300);
    ASSERT_EQ(got_.size(), 3u);
    EXPECT_EQ(got_[0].status, WcStatus::kSuccess);
    EXPECT_EQ(got_[1].wr_id, bad.wr_id);
    EXPECT_EQ(got_[1].status, status);
    EXPECT_EQ(got_[2].status, WcStatus::kWrFlushErr);
    const auto& b = lb_->counters();
    EXPECT_GE(b[WireCounter::kRxAccessNak], 1u);
    EXPECT_GE(b.*rule, 1u);
    uint64_t fired = 0;
    for (auto r : {&reliable::ReliabilityCounters::read_nak_qp,
                   &reliable::ReliabilityCounters::read_nak_rkey,
                   &reliable::ReliabilityCounters::read_nak_pd,
                   &reliable::ReliabilityCounters::read_nak_access,
                   &reliable::ReliabilityCounters::read_nak_range}) {
      if (b.*r > 0) ++fired;
    }
    EXPECT_EQ(fired, 1u) << "one rule, the expected one";
    EXPECT_EQ(b.reads_served, 1u);
    // Nothing of the refused READ reached A's buffer.
    EXPECT_EQ(va_.buf[16384],
              static_cast<uint8_t>(16384 * 7 + 16384 / 4093 + 1));
  }
};

TEST_F(ReliableUcReadAccessTest, WrongRkey) {
  Build();
  SendWr w = Read(2, 0, 16384, 100);
  w.rkey = vb_.mr.rkey + 0x1000;
  ExpectRefused(w, WcStatus::kRemAccessErr,
                &reliable::ReliabilityCounters::read_nak_rkey);
}

TEST_F(ReliableUcReadAccessTest, MrWithoutRemoteRead) {
  Build();
  Result<RnicMr> mr =
      lb_->RegMr(vb_.pd, vb_.buf.data() + (7 << 20), 4096, vb_.at(7 << 20),
                 kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok());
  SendWr w = Read(2, 7 << 20, 16384, 100);
  w.rkey = mr->rkey;
  ExpectRefused(w, WcStatus::kRemAccessErr,
                &reliable::ReliabilityCounters::read_nak_access);
}

TEST_F(ReliableUcReadAccessTest, OutOfRange) {
  Build();
  ExpectRefused(Read(2, kBufSize - 100, 16384, 200), WcStatus::kRemAccessErr,
                &reliable::ReliabilityCounters::read_nak_range);
}

TEST_F(ReliableUcReadAccessTest, AnotherPdsMr) {
  Build();
  RnicPd other = *lb_->AllocPd();
  Result<RnicMr> mr = lb_->RegMr(other, vb_.buf.data() + (7 << 20), 4096,
                                 vb_.at(7 << 20), kAll);
  ASSERT_TRUE(mr.ok());
  SendWr w = Read(2, 7 << 20, 16384, 100);
  w.rkey = mr->rkey;
  ExpectRefused(w, WcStatus::kRemAccessErr,
                &reliable::ReliabilityCounters::read_nak_pd);
}

// A responder QP that offers no READ resources answers as natively
// (SoftRnic, rxe): an invalid request. The first READ is refused too, so
// the "good one" is refused: checked by hand.
TEST_F(ReliableUcReadAccessTest, ResponderWithoutReadResources) {
  Build();
  QpConf c;
  c.max_dest_rd_atomic = 0;
  Connect(c);
  FillB();
  Post(Read(1, 0, 0, 5000));
  Post(Read(2, 0, 8192, 100));
  ASSERT_TRUE(RunUntil([&] { return got_.size() == 2; }, 20000));
  EXPECT_EQ(got_[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  EXPECT_GE(lb_->counters().read_nak_qp, 1u);
  EXPECT_EQ(lb_->counters().read_nak_rkey, 0u);
  EXPECT_EQ(lb_->counters().reads_served, 0u);
}

// The responder answers at most max_dest_rd_atomic READs at once, even
// when the requester asks for more (its max_rd_atomic above it): the
// rest wait for their delivery; the requester keeps to its own
// max_rd_atomic.
TEST_F(ReliableUcReadTest, ResponderRecordsNeverAboveMaxDestRdAtomic) {
  Build();
  QpConf c;
  c.max_rd_atomic = 8;
  c.max_dest_rd_atomic = 2;
  Connect(c);
  FillB();
  std::vector<PlannedRead> plan;
  for (int i = 0; i < 12; ++i) {
    plan.push_back(
        {1u + i, uint64_t(i) * (70 << 10), uint64_t(i) * 999, 64 << 10});
  }
  uint32_t peak_a = 0;
  for (const PlannedRead& p : plan) Post(Read(p.wr_id, p.src, p.dst, p.len));
  ASSERT_TRUE(RunUntil(
      [&] {
        peak_a = std::max(
            peak_a, la_->FindConnection(qa_.qpn)->sender().rd_outstanding());
        EXPECT_LE(lb_->FindConnection(qb_.qpn)->sender().responses_in_use(),
                  2u);
        return got_.size() == plan.size();
      },
      100000));
  EXPECT_EQ(lb_->counters().read_records_peak, 2u);
  EXPECT_EQ(peak_a, 8u);
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(got_[i].wr_id, plan[i].wr_id);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(0, std::memcmp(&va_.buf[plan[i].dst], &vb_.buf[plan[i].src],
                             plan[i].len));
  }
}

TEST_F(ReliableUcReadTest, RequesterKeepsToMaxRdAtomic) {
  Build();
  QpConf c;
  c.max_rd_atomic = 2;
  c.max_dest_rd_atomic = 8;
  Connect(c);
  FillB();
  for (int i = 0; i < 10; ++i) {
    Post(Read(1 + i, uint64_t(i) * 777, uint64_t(i) * (70 << 10), 64 << 10));
  }
  uint32_t peak = 0;
  ASSERT_TRUE(RunUntil(
      [&] {
        peak = std::max(
            peak, la_->FindConnection(qa_.qpn)->sender().rd_outstanding());
        return got_.size() == 10;
      },
      100000));
  EXPECT_EQ(peak, 2u);
  // The responder keeps a record until its last unit is acknowledged,
  // which may be after the requester took the data and sent its next
  // READ: at most its own max_dest_rd_atomic, not the requester's count.
  EXPECT_LE(lb_->counters().read_records_peak, 8u);
  for (const Completion& c2 : got_) EXPECT_EQ(c2.status, WcStatus::kSuccess);
}

// ---- Atomics ---------------------------------------------------------------

TEST_F(ReliableUcReadTest, FetchAddAndCmpSwpResults) {
  Build();
  Connect();
  SetU64(vb_.buf, 4096, 1000);
  SetU64(vb_.buf, 8192, 77);
  Post(Atomic(1, WrOpcode::kAtomicFetchAdd, 64, 4096, 5));
  Post(Atomic(2, WrOpcode::kAtomicFetchAdd, 72, 4096, 7));
  Post(Atomic(3, WrOpcode::kAtomicCmpSwp, 80, 8192, 77, 99));   // matches
  Post(Atomic(4, WrOpcode::kAtomicCmpSwp, 88, 8192, 77, 123));  // does not
  ASSERT_TRUE(RunUntil([&] { return got_.size() == 4; }, 20000));
  Run(300);
  ASSERT_EQ(got_.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got_[i].wr_id, 1u + i);
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_[i].opcode,
              i < 2 ? WcOpcode::kFetchAdd : WcOpcode::kCompSwap);
  }
  EXPECT_EQ(U64(va_.buf, 64), 1000u);
  EXPECT_EQ(U64(va_.buf, 72), 1005u);
  EXPECT_EQ(U64(vb_.buf, 4096), 1012u);
  EXPECT_EQ(U64(va_.buf, 80), 77u);
  EXPECT_EQ(U64(va_.buf, 88), 99u);
  EXPECT_EQ(U64(vb_.buf, 8192), 99u);
  EXPECT_EQ(la_->counters().atomics_posted, 4u);
  EXPECT_EQ(la_->counters().atomics_completed, 4u);
}

// Atomics in order with WRITEs and READs around them, under loss: each
// FETCH_ADD executed exactly once (the final value is the sum; each result
// is the sum of the adds before it) and every WR completed once in order.
TEST_F(ReliableUcReadTest, FetchAddExactlyOnceUnderLoss) {
  const fabric::FaultConfig f = Faults(0.05, 0.02, 0.02);
  Build(f, f, 29);
  QpConf c;
  c.timeout = 10;  // the RC QP's timer: 4.2 ms (the layer's budget 34 ms)
  Connect(c);
  FillB();
  SetU64(vb_.buf, 4096, 0);
  constexpr int kN = 40;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kN; ++i) {
    Post(Atomic(1000 + i, WrOpcode::kAtomicFetchAdd, 8 * i, 4096, i + 1));
    ids.push_back(1000 + i);
    if (i % 4 == 0) {
      Post(Write(2000 + i, 1 << 20, (1 << 20) + i * 8192, 5000));
      ids.push_back(2000 + i);
      Post(Read(3000 + i, (1 << 20) + i * 8192, (2 << 20) + i * 8192, 5000));
      ids.push_back(3000 + i);
    }
  }
  ASSERT_TRUE(RunUntil([&] { return got_.size() == ids.size(); }, 2000000))
      << got_.size() << " of " << ids.size();
  Run(300);
  ASSERT_EQ(got_.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(got_[i].wr_id, ids[i]) << i;
    EXPECT_EQ(got_[i].status, WcStatus::kSuccess) << i;
  }
  uint64_t sum = 0;
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(U64(va_.buf, 8 * i), sum) << i;
    sum += i + 1;
  }
  EXPECT_EQ(U64(vb_.buf, 4096), sum);
  // The READs after a WRITE saw it.
  for (int i = 0; i < kN; i += 4) {
    EXPECT_EQ(
        0, std::memcmp(&va_.buf[(2 << 20) + i * 8192], &va_.buf[1 << 20], 5000))
        << i;
  }
}

}  // namespace
}  // namespace vrdma::testing
