// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// LossDetector (docs/reliability.md §4.4): reordering within srtt / 4 is not
// loss, a later ACK past it is; only transmissions sent before the newest
// acknowledged one; RTO expiry and the doubling's expiries; each loss
// reported once; the ring's bounds and its ACK results; and a seeded
// simulation where reordering never counts as loss and every drop does.
#include "policy/reliability/loss_detector.h"

#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace vrdma::policy::reliability {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSrtt = 100 * kUs;  // reordering window 125 us
constexpr uint64_t kRto = 1 * kMs;

std::vector<Lost> Detect(LossDetector& d, uint64_t now, uint64_t srtt = kSrtt) {
  std::array<Lost, 16> out;
  const size_t n = d.DetectLost(now, srtt, out);
  return {out.begin(), out.begin() + n};
}

TEST(LossDetectorTest, ReorderingWithinAQuarterSrttIsNotLoss) {
  LossDetector d(0);
  ASSERT_EQ(d.OnSent(0, 0, kRto, 0), SentResult::kOk);        // A
  ASSERT_EQ(d.OnSent(1, 1 * kUs, kRto, 0), SentResult::kOk);  // B
  ASSERT_EQ(d.OnAcked(1), AckedResult::kAcked);               // B before A
  EXPECT_TRUE(Detect(d, 100 * kUs).empty());
  EXPECT_TRUE(Detect(d, 125 * kUs).empty());     // srtt + srtt / 4, not past
  ASSERT_EQ(d.OnAcked(0), AckedResult::kAcked);  // A, reordered, arrives
  EXPECT_TRUE(Detect(d, 10 * kMs).empty());
  EXPECT_EQ(d.occupied(), 0u);
}

TEST(LossDetectorTest, ALaterAckPastTheWindowIsLoss) {
  LossDetector d(0);
  ASSERT_EQ(d.OnSent(0, 0, kRto, 0), SentResult::kOk);
  ASSERT_EQ(d.OnSent(1, 1 * kUs, kRto, 0), SentResult::kOk);
  ASSERT_EQ(d.OnAcked(1), AckedResult::kAcked);
  const auto lost = Detect(d, 125 * kUs + 1);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].gseq, 0u);
  EXPECT_EQ(lost[0].reason, LossReason::kRack);
  EXPECT_EQ(lost[0].next_expiries(), 0u);
  EXPECT_TRUE(Detect(d, 200 * kUs).empty());  // reported once
}

TEST(LossDetectorTest, OnlyWhatWasSentBeforeTheNewestAck) {
  LossDetector d(10);
  for (uint64_t g = 10; g < 13; ++g) {
    ASSERT_EQ(d.OnSent(g, g, kRto, 0), SentResult::kOk);
  }
  ASSERT_EQ(d.OnAcked(11), AckedResult::kAcked);
  const auto lost = Detect(d, 500 * kUs);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].gseq, 10u);  // 12 was sent after 11: not yet
}

TEST(LossDetectorTest, NoAckNoSrttOnlyTheRto) {
  LossDetector d(0);
  ASSERT_EQ(d.OnSent(0, 0, kRto, 0), SentResult::kOk);
  ASSERT_EQ(d.OnSent(1, 0, kRto, 0), SentResult::kOk);
  EXPECT_TRUE(Detect(d, kRto - 1).empty());  // old, but nothing acked
  LossDetector no_srtt(0);
  ASSERT_EQ(no_srtt.OnSent(0, 0, kRto, 0), SentResult::kOk);
  ASSERT_EQ(no_srtt.OnSent(1, 0, kRto, 0), SentResult::kOk);
  ASSERT_EQ(no_srtt.OnAcked(1), AckedResult::kAcked);
  EXPECT_TRUE(Detect(no_srtt, kRto - 1, 0).empty());
  EXPECT_EQ(Detect(no_srtt, kRto, 0).size(), 1u);
}

TEST(LossDetectorTest, RtoExpiresAtItsDeadline) {
  LossDetector d(0);
  ASSERT_EQ(d.OnSent(0, 5 * kUs, 2 * kRto, 3), SentResult::kOk);
  EXPECT_EQ(d.NextDeadlineNs(kSrtt),
            std::optional<uint64_t>(5 * kUs + 2 * kRto));
  EXPECT_TRUE(Detect(d, 5 * kUs + 2 * kRto - 1).empty());
  const auto lost = Detect(d, 5 * kUs + 2 * kRto);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].reason, LossReason::kRto);
  EXPECT_EQ(lost[0].expiries, 3u);
  EXPECT_EQ(lost[0].next_expiries(), 4u);  // its retransmissions double
  EXPECT_EQ(d.NextDeadlineNs(kSrtt), std::nullopt);
}

TEST(LossDetectorTest, TheRetransmissionIsANewEntry) {
  LossDetector d(0);
  ASSERT_EQ(d.OnSent(0, 0, kRto, 0), SentResult::kOk);
  auto lost = Detect(d, kRto);
  ASSERT_EQ(lost.size(), 1u);
  ASSERT_EQ(d.OnSent(1, kRto, 2 * kRto, lost[0].next_expiries()),
            SentResult::kOk);
  lost = Detect(d, 3 * kRto);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].gseq, 1u);
  EXPECT_EQ(lost[0].expiries, 1u);
}

// RFC 6298 §5.3: an ACK of anything in flight restarts every RTO, so a
// queue the lower RNIC serializes (four chunks posted at once, acknowledged
// 0.9 ms apart under a 1 ms RTO) is no loss; a silence of one RTO after the
// last ACK is.
TEST(LossDetectorTest, AnAckRestartsTheRtoOfEverythingInFlight) {
  LossDetector d(0);
  for (uint64_t g = 0; g < 4; ++g) {
    ASSERT_EQ(d.OnSent(g, 0, kRto, 0), SentResult::kOk);
  }
  for (uint64_t g = 0; g < 3; ++g) {
    const uint64_t t = (g + 1) * 900 * kUs;
    ASSERT_EQ(d.OnAcked(g), AckedResult::kAcked);
    d.OnProgress(t);
    EXPECT_TRUE(Detect(d, t).empty()) << g;
    EXPECT_EQ(d.NextDeadlineNs(kSrtt), std::optional<uint64_t>(t + kRto));
  }
  // The last ACK came at 2.7 ms: entry 3 is lost one RTO later, not before.
  EXPECT_TRUE(Detect(d, 2700 * kUs + kRto - 1).empty());
  const auto lost = Detect(d, 2700 * kUs + kRto);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].gseq, 3u);
  EXPECT_EQ(lost[0].reason, LossReason::kRto);
}

// Without the restart, the same queue's last chunk would be lost at 1 ms
// (its send plus its RTO) although chunks kept arriving: the rule counts.
TEST(LossDetectorTest, WithoutAnAckTheRtoCountsFromTheSend) {
  LossDetector d(0);
  for (uint64_t g = 0; g < 2; ++g) {
    ASSERT_EQ(d.OnSent(g, 0, kRto, 0), SentResult::kOk);
  }
  ASSERT_EQ(d.OnAcked(0), AckedResult::kAcked);  // no OnProgress: no restart
  const auto lost = Detect(d, kRto);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].gseq, 1u);
}

TEST(LossDetectorTest, NextDeadlineIsTheEarliestTimer) {
  LossDetector d(0);
  ASSERT_EQ(d.OnSent(0, 0, kRto, 0), SentResult::kOk);
  ASSERT_EQ(d.OnSent(1, 10 * kUs, 300 * kUs, 0), SentResult::kOk);
  EXPECT_EQ(d.NextDeadlineNs(kSrtt), std::optional<uint64_t>(310 * kUs));
  ASSERT_EQ(d.OnAcked(1), AckedResult::kAcked);
  // Entry 0 is now under the reordering window: 125 us + 1.
  EXPECT_EQ(d.NextDeadlineNs(kSrtt), std::optional<uint64_t>(125 * kUs + 1));
  EXPECT_EQ(Detect(d, 125 * kUs + 1).size(), 1u);
}

TEST(LossDetectorTest, AckResults) {
  LossDetector d(100);
  ASSERT_EQ(d.OnSent(100, 0, kRto, 0), SentResult::kOk);
  ASSERT_EQ(d.OnSent(101, 0, kRto, 0), SentResult::kOk);
  EXPECT_EQ(d.OnAcked(102), AckedResult::kNeverSent);
  EXPECT_EQ(d.OnAcked(1u << 31), AckedResult::kNeverSent);
  EXPECT_EQ(d.OnAcked(101), AckedResult::kAcked);
  EXPECT_EQ(d.OnAcked(101), AckedResult::kNotInFlight);  // duplicate ACK
  EXPECT_EQ(d.OnAcked(99), AckedResult::kNotInFlight);   // before any sent
  ASSERT_EQ(Detect(d, 200 * kUs).size(), 1u);            // 100 lost
  EXPECT_EQ(d.OnAcked(100), AckedResult::kNotInFlight);  // late ACK
}

TEST(LossDetectorTest, TheRingIsBoundedFromItsOldestEntry) {
  LossDetectorParams p;
  p.capacity = 4;
  LossDetector d(0, p);
  EXPECT_EQ(d.OnSent(1, 0, kRto, 0), SentResult::kNotNext);
  for (uint64_t g = 0; g < 4; ++g) {
    ASSERT_EQ(d.OnSent(g, 0, kRto, 0), SentResult::kOk);
  }
  EXPECT_EQ(d.OnSent(4, 0, kRto, 0), SentResult::kFull);
  ASSERT_EQ(d.OnAcked(2), AckedResult::kAcked);  // not the oldest
  EXPECT_EQ(d.OnSent(4, 0, kRto, 0), SentResult::kFull);
  ASSERT_EQ(d.OnAcked(0), AckedResult::kAcked);  // the oldest: one slot
  EXPECT_EQ(d.OnSent(4, 0, kRto, 0), SentResult::kOk);
  EXPECT_EQ(d.OnSent(5, 0, kRto, 0), SentResult::kFull);
  ASSERT_EQ(d.OnAcked(1), AckedResult::kAcked);  // 1 and 2 leave
  EXPECT_EQ(d.occupied(), 2u);
  EXPECT_EQ(d.OnSent(5, 0, kRto, 0), SentResult::kOk);
  EXPECT_EQ(d.OnSent(6, 0, kRto, 0), SentResult::kOk);
  EXPECT_EQ(d.OnSent(7, 0, kRto, 0), SentResult::kFull);
}

TEST(LossDetectorTest, ReportsAtMostTheOutputsSize) {
  LossDetector d(0);
  for (uint64_t g = 0; g < 3; ++g) {
    ASSERT_EQ(d.OnSent(g, 0, kRto, 0), SentResult::kOk);
  }
  std::array<Lost, 2> out;
  ASSERT_EQ(d.DetectLost(kRto, kSrtt, out), 2u);
  EXPECT_EQ(out[0].gseq, 0u);
  EXPECT_EQ(out[1].gseq, 1u);
  ASSERT_EQ(d.DetectLost(kRto, kSrtt, out), 1u);
  EXPECT_EQ(out[0].gseq, 2u);
}

// One transmission per microsecond; each is acknowledged after a round
// trip of srtt plus up to srtt / 4 of jitter (reordering), or dropped.
// DetectLost runs after every ACK. Reordering must never be reported, and
// every drop must be, by RACK (the RTO is far off).
TEST(LossDetectorTest, SimulatedReorderingAndDrops) {
  for (const double drop : {0.0, 0.01, 0.1}) {
    std::mt19937_64 rng(15);
    std::uniform_int_distribution<uint64_t> jitter(0, kSrtt / 4);
    std::bernoulli_distribution dropped(drop);
    LossDetector d(0);
    std::multimap<uint64_t, uint64_t> acks;  // time -> gseq
    std::set<uint64_t> drops, reported;
    std::array<Lost, 64> out;
    constexpr uint64_t kN = 20'000;
    uint64_t g = 0;
    for (uint64_t now = 0; g < kN || !acks.empty(); now += kUs) {
      // Deliver the ACKs due by now, in their (reordered) time order.
      while (!acks.empty() && acks.begin()->first <= now) {
        const auto [t, ack] = *acks.begin();
        acks.erase(acks.begin());
        ASSERT_EQ(d.OnAcked(ack), AckedResult::kAcked) << ack;
        const size_t n = d.DetectLost(t, kSrtt, out);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i].reason, LossReason::kRack);
          ASSERT_TRUE(drops.count(out[i].gseq)) << out[i].gseq;
          reported.insert(out[i].gseq);
        }
      }
      // Retransmissions are the sender's business: here only new ones,
      // while the ring has room (drops hold it until detected).
      if (g < kN && d.OnSent(g, now, 10 * kRto, 0) == SentResult::kOk) {
        if (dropped(rng)) {
          drops.insert(g);
        } else {
          acks.emplace(now + kSrtt + jitter(rng), g);
        }
        ++g;
      }
    }
    // The last drops are detected at the end: no later ACK may come.
    const size_t n = d.DetectLost(UINT64_MAX / 2, kSrtt, out);
    for (size_t i = 0; i < n; ++i) reported.insert(out[i].gseq);
    EXPECT_EQ(reported, drops) << drop;
    if (drop > 0) {
      EXPECT_GT(drops.size(), 100u);
    }
  }
}

}  // namespace
}  // namespace vrdma::policy::reliability
