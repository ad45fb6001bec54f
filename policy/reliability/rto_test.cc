// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RttEstimator and Rto (docs/reliability.md §4.4): Eq. 1's sample and its
// check, RFC 6298's srtt/rttvar against hand-computed vectors and a
// double-precision reference, the RTO's clamp bounds, the initial 1 ms,
// the doubling, and base_rtt over the last 10 s (against a brute-force
// reference, since base_rtt is cached between calls).
#include "policy/reliability/rto.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "policy/reliability/rtt_estimator.h"

namespace vrdma::policy::reliability {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSec = 1'000'000'000;

TEST(RtoTest, SampleIsRoundTripMinusHold) {
  // T1 = 1000, T2 = 5000, T3' = 7000, T4 = 12000: RTT = 11000 - 2000.
  EXPECT_EQ(RttSampleNs(1000, 12000, 2000), std::optional<uint64_t>(9000));
  EXPECT_EQ(RttSampleNs(1000, 12000, 11000), std::optional<uint64_t>(0));
}

TEST(RtoTest, HoldLongerThanRoundTripGivesNoSample) {
  EXPECT_EQ(RttSampleNs(1000, 12000, 11001), std::nullopt);
  EXPECT_EQ(RttSampleNs(12000, 1000, 0), std::nullopt);  // clock went back
}

TEST(RtoTest, FirstSampleSetsSrttAndHalfVariance) {
  RttEstimator e;
  EXPECT_FALSE(e.has_sample());
  e.AddSample(0, 800 * kUs);
  EXPECT_TRUE(e.has_sample());
  EXPECT_EQ(e.srtt(), 800 * kUs);
  EXPECT_EQ(e.rttvar(), 400 * kUs);
  EXPECT_EQ(e.latest(), 800 * kUs);
}

TEST(RtoTest, Rfc6298VectorsByHand) {
  RttEstimator e;
  Rto rto;
  e.AddSample(0, 800 * kUs);
  // RTO = 800 + 4 x 400 + 32 us.
  EXPECT_EQ(rto.BaseNs(e), 2432 * kUs);
  // R = 1600: rttvar = 3/4 x 400 + 1/4 x |800 - 1600| = 500;
  //           srtt = 7/8 x 800 + 1/8 x 1600 = 900.
  e.AddSample(1, 1600 * kUs);
  EXPECT_EQ(e.srtt(), 900 * kUs);
  EXPECT_EQ(e.rttvar(), 500 * kUs);
  EXPECT_EQ(rto.BaseNs(e), (900 + 2000 + 32) * kUs);
  // R = 100: rttvar = 3/4 x 500 + 1/4 x 800 = 575;
  //          srtt = 7/8 x 900 + 1/8 x 100 = 800.
  e.AddSample(2, 100 * kUs);
  EXPECT_EQ(e.srtt(), 800 * kUs);
  EXPECT_EQ(e.rttvar(), 575 * kUs);
  EXPECT_EQ(rto.BaseNs(e), (800 + 2300 + 32) * kUs);
  EXPECT_EQ(e.latest(), 100 * kUs);
}

TEST(RtoTest, Rfc6298MatchesDoubleReferenceOverRandomSamples) {
  std::mt19937_64 rng(15);
  std::uniform_int_distribution<uint64_t> r(5 * kUs, 500 * kUs);
  RttEstimator e;
  double srtt = 0, rttvar = 0;
  for (int i = 0; i < 10'000; ++i) {
    const uint64_t s = r(rng);
    e.AddSample(static_cast<uint64_t>(i) * kUs, s);
    if (i == 0) {
      srtt = static_cast<double>(s);
      rttvar = srtt / 2;
    } else {
      rttvar = 0.75 * rttvar + 0.25 * std::fabs(srtt - static_cast<double>(s));
      srtt = 0.875 * srtt + 0.125 * static_cast<double>(s);
    }
    // Fixed point in 1/8 and 1/4 ns: within a few ns of exact arithmetic.
    ASSERT_NEAR(static_cast<double>(e.srtt()), srtt, 2.0) << i;
    ASSERT_NEAR(static_cast<double>(e.rttvar()), rttvar, 2.0) << i;
  }
}

TEST(RtoTest, InitialIsOneMillisecond) {
  RttEstimator e;
  Rto rto;
  EXPECT_EQ(rto.BaseNs(e), 1 * kMs);
  EXPECT_EQ(rto.TimeoutNs(e, 0), 1 * kMs);
}

TEST(RtoTest, ClampedBelowAt200Microseconds) {
  RttEstimator e;
  Rto rto;
  for (int i = 0; i < 200; ++i) e.AddSample(i, 10 * kUs);
  // srtt 10 us, rttvar decayed to ~0: 10 + 32 us < 200 us.
  EXPECT_EQ(e.srtt(), 10 * kUs);
  EXPECT_LT(e.rttvar(), 1 * kUs);
  EXPECT_EQ(rto.BaseNs(e), 200 * kUs);
}

TEST(RtoTest, ClampedAboveAt20Milliseconds) {
  RttEstimator e;
  Rto rto;
  e.AddSample(0, 10 * kMs);  // 10 + 4 x 5 ms + 32 us
  EXPECT_EQ(rto.BaseNs(e), 20 * kMs);
  RttEstimator just_below;
  just_below.AddSample(0, 3 * kMs);  // 3 + 6 ms + 32 us = 9.032 ms
  EXPECT_EQ(rto.BaseNs(just_below), 9 * kMs + 32 * kUs);
}

TEST(RtoTest, DoublesAtEachExpiryUpTo20Milliseconds) {
  RttEstimator e;
  Rto rto;
  const uint64_t want[] = {1, 2, 4, 8, 16, 20, 20};
  for (uint32_t i = 0; i < 7; ++i) {
    EXPECT_EQ(rto.TimeoutNs(e, i), want[i] * kMs) << i;
  }
  EXPECT_EQ(rto.BackedOffNs(300 * kUs, 1), 600 * kUs);
  EXPECT_EQ(rto.BackedOffNs(300 * kUs, 3), 2400 * kUs);
  EXPECT_EQ(rto.BackedOffNs(300 * kUs, 6), 19200 * kUs);
  EXPECT_EQ(rto.BackedOffNs(300 * kUs, 7), 20 * kMs);
  EXPECT_EQ(rto.BackedOffNs(300 * kUs, UINT32_MAX), 20 * kMs);
}

TEST(RtoTest, ParamsChangeTheBounds) {
  RtoParams p;
  p.min_ns = 1 * kMs;
  p.max_ns = 5 * kMs;
  p.initial_ns = 3 * kMs;
  p.ack_timer_ns = 0;
  Rto rto(p);
  RttEstimator e;
  EXPECT_EQ(rto.BaseNs(e), 3 * kMs);
  EXPECT_EQ(rto.TimeoutNs(e, 1), 5 * kMs);
  e.AddSample(0, 100 * kUs);  // 100 + 200 us < 1 ms
  EXPECT_EQ(rto.BaseNs(e), 1 * kMs);
}

TEST(RtoTest, BaseRttIsTheLeastOfTheLastTenSeconds) {
  RttEstimator e;
  EXPECT_EQ(e.base_rtt(0), 0u);
  e.AddSample(0, 30 * kUs);
  e.AddSample(500 * kMs, 12 * kUs);
  e.AddSample(3 * kSec, 40 * kUs);
  EXPECT_EQ(e.base_rtt(3 * kSec), 12 * kUs);
  EXPECT_EQ(e.base_rtt(9 * kSec + 900 * kMs), 12 * kUs);
  // 10.5 s after the 12 us sample (its second, [0, 1 s), has left the
  // window): the least is now 40 us.
  e.AddSample(10 * kSec + 500 * kMs, 50 * kUs);
  EXPECT_EQ(e.base_rtt(10 * kSec + 500 * kMs), 40 * kUs);
  // Nothing recent: the newest sample stands in.
  EXPECT_EQ(e.base_rtt(30 * kSec), 50 * kUs);
  // A later, smaller sample becomes the base at once.
  e.AddSample(31 * kSec, 20 * kUs);
  EXPECT_EQ(e.base_rtt(31 * kSec), 20 * kUs);
}

TEST(RtoTest, BaseRttWindowIsAParam) {
  RttEstimatorParams p;
  p.base_rtt_window_ns = 10 * kMs;  // 1 ms buckets
  RttEstimator e(p);
  e.AddSample(0, 5 * kUs);
  e.AddSample(5 * kMs, 9 * kUs);
  EXPECT_EQ(e.base_rtt(5 * kMs), 5 * kUs);
  e.AddSample(10 * kMs, 9 * kUs);
  EXPECT_EQ(e.base_rtt(10 * kMs), 9 * kUs);
}

// base_rtt is cached per bucket period and updated by AddSample: over
// random samples and queries, now and then a step back in time, it equals
// the least of every sample whose bucket period is one of the last ten
// (the newest sample when there is none, 0 before the first).
TEST(RtoTest, BaseRttMatchesABruteForceReference) {
  RttEstimatorParams p;
  p.base_rtt_window_ns = 10 * kMs;  // 1 ms buckets
  RttEstimator e(p);
  std::vector<std::pair<uint64_t, uint64_t>> samples;  // (time, rtt)
  auto reference = [&](uint64_t now) -> uint64_t {
    const uint64_t epoch = now / kMs;
    uint64_t least = 0;
    bool any = false;
    for (const auto& [t, rtt] : samples) {
      const uint64_t se = t / kMs;
      if (se > epoch || epoch - se >= 10) continue;
      least = any ? std::min(least, rtt) : rtt;
      any = true;
    }
    return any ? least : (samples.empty() ? 0 : samples.back().second);
  };
  std::mt19937_64 rng(7);
  uint64_t now = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t r = rng() % 100;
    if (r < 3 && now > 4 * kMs) {
      now -= rng() % (4 * kMs);  // the clock went back
    } else {
      now += rng() % (r < 10 ? 5 * kMs : 200 * kUs);
    }
    if (rng() % 2 == 0) {
      const uint64_t rtt = 1 * kUs + rng() % (100 * kUs);
      e.AddSample(now, rtt);
      // A sample replaces its bucket's older period, as the estimator
      // does: the reference forgets what the bucket held.
      std::erase_if(samples, [&](const auto& s) {
        return s.first / kMs != now / kMs && (s.first / kMs) % 10 == (now / kMs) % 10;
      });
      samples.emplace_back(now, rtt);
    }
    ASSERT_EQ(e.base_rtt(now), reference(now)) << "step " << i;
  }
}

}  // namespace
}  // namespace vrdma::policy::reliability
