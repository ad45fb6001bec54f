// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// LossDetector (docs/reliability.md §4.4): reordering within srtt / 4 is not
// loss, a later ACK past it is; only transmissions sent before the newest
// acknowledged one; RTO expiry and the doubling's expiries; each loss
// reported once; the ring's bounds and its ACK results; and a seeded
// simulation where reordering never counts as loss and every drop does;
// DetectLost's shortcut (no scan while nothing can be lost) and NextCheckNs
// (the caller's timer) against a scan of every entry.
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

// NextCheckNs: never with nothing in flight; the earliest RTO; the end of
// the oldest entry's reordering window once a later one was acknowledged;
// at once when sends were not in time order (DetectLost scans then).
TEST(LossDetectorTest, NextCheckIsTheShortcutsEnd) {
  LossDetector d(0);
  EXPECT_EQ(d.NextCheckNs(kSrtt), UINT64_MAX);
  ASSERT_EQ(d.OnSent(0, 10 * kUs, kRto, 0), SentResult::kOk);
  ASSERT_EQ(d.OnSent(1, 20 * kUs, kRto, 0), SentResult::kOk);
  ASSERT_EQ(d.OnSent(2, 30 * kUs, kRto, 0), SentResult::kOk);
  EXPECT_EQ(d.NextCheckNs(kSrtt), 10 * kUs + kRto);
  ASSERT_EQ(d.OnAcked(1), AckedResult::kAcked);
  const uint64_t rack = 10 * kUs + 125 * kUs + 1;
  EXPECT_EQ(d.NextCheckNs(kSrtt), rack);
  EXPECT_EQ(d.NextCheckNs(0), 10 * kUs + kRto);  // no srtt: no RACK
  EXPECT_TRUE(Detect(d, rack - 1).empty());
  ASSERT_EQ(Detect(d, rack).size(), 1u);  // 0, by RACK
  EXPECT_EQ(d.NextCheckNs(kSrtt), 30 * kUs + kRto);  // 2: not before 1
  ASSERT_EQ(d.OnSent(3, 5 * kUs, kRto, 0), SentResult::kOk);  // clock back
  EXPECT_EQ(d.NextCheckNs(kSrtt), 0u);
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

// What DetectLost reports without its shortcut: every entry in flight
// checked, oldest first.
class ScanEveryEntry {
 public:
  void Sent(uint64_t g, uint64_t t, uint64_t rto, uint32_t exp) {
    e_[g] = {t, rto, exp, true};
  }
  void Acked(uint64_t g) {
    auto it = e_.find(g);
    if (it == e_.end() || !it->second.in_flight) return;
    it->second.in_flight = false;
    highest_ = any_ ? std::max(highest_, g) : g;
    any_ = true;
  }
  void Progress(uint64_t now) { progress_ = std::max(progress_, now); }
  std::vector<Lost> Detect(uint64_t now, uint64_t srtt, size_t max) {
    std::vector<Lost> out;
    for (auto& [g, e] : e_) {
      if (out.size() == max) break;
      if (!e.in_flight) continue;
      const uint64_t window = srtt + srtt / 4;
      if (now >= std::max(e.t, progress_) + e.rto) {
        out.push_back({g, LossReason::kRto, e.exp});
      } else if (srtt > 0 && any_ && g < highest_ && now > e.t &&
                 now - e.t > window) {
        out.push_back({g, LossReason::kRack, e.exp});
      } else {
        continue;
      }
      e.in_flight = false;
    }
    return out;
  }

 private:
  struct E {
    uint64_t t, rto;
    uint32_t exp;
    bool in_flight;
  };
  std::map<uint64_t, E> e_;
  bool any_ = false;
  uint64_t highest_ = 0, progress_ = 0;
};

TEST(LossDetectorTest, DetectLostMatchesAScanOfEveryEntry) {
  for (const bool clock_goes_back : {false, true}) {
    std::mt19937_64 rng(clock_goes_back ? 5 : 4);
    LossDetector d(0, LossDetectorParams{.capacity = 64});
    ScanEveryEntry ref;
    std::vector<uint64_t> in_flight;
    uint64_t now = 0, g = 0;
    int quiet_calls = 0;  // DetectLost calls before NextCheckNs
    for (int step = 0; step < 50'000; ++step) {
      now += rng() % (20 * kUs);
      if (clock_goes_back && rng() % 50 == 0) now -= std::min(now, 300 * kUs);
      const uint64_t op = rng() % 10;
      if (op < 4) {
        const uint64_t rto = 200 * kUs + rng() % (2 * kMs);
        const uint32_t exp = static_cast<uint32_t>(rng() % 3);
        if (d.OnSent(g, now, rto, exp) == SentResult::kOk) {
          ref.Sent(g, now, rto, exp);
          in_flight.push_back(g++);
        }
      } else if (op < 7 && !in_flight.empty()) {
        const size_t i = rng() % std::min<size_t>(in_flight.size(), 4);
        const uint64_t a = in_flight[i];
        in_flight.erase(in_flight.begin() + static_cast<ptrdiff_t>(i));
        if (d.OnAcked(a) == AckedResult::kAcked) {
          ref.Acked(a);
          if (rng() % 2) {
            d.OnProgress(now);
            ref.Progress(now);
          }
        }
      } else {
        const uint64_t srtt = rng() % 4 == 0 ? 0 : 50 * kUs + rng() % (200 * kUs);
        const size_t max = 1 + rng() % 8;
        std::array<Lost, 8> out;
        // Before NextCheckNs, a scan of every entry finds nothing either.
        const bool quiet = now < d.NextCheckNs(srtt);
        const size_t n = d.DetectLost(now, srtt, std::span(out.data(), max));
        const std::vector<Lost> want = ref.Detect(now, srtt, max);
        ASSERT_EQ(n, want.size()) << "step " << step;
        if (quiet) {
          ASSERT_TRUE(want.empty()) << "step " << step;
          ++quiet_calls;
        }
        for (size_t k = 0; k < n; ++k) {
          ASSERT_EQ(out[k].gseq, want[k].gseq) << "step " << step;
          ASSERT_EQ(out[k].reason, want[k].reason) << "step " << step;
          ASSERT_EQ(out[k].expiries, want[k].expiries) << "step " << step;
          std::erase(in_flight, out[k].gseq);
        }
      }
    }
    // The bound is a timer, not always "at once".
    EXPECT_GT(quiet_calls, 100) << clock_goes_back;
  }
}

}  // namespace
}  // namespace vrdma::policy::reliability
