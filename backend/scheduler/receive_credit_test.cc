// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/scheduler/receive_credit.h"

#include <gtest/gtest.h>

namespace vrdma::sched {
namespace {

using policy::kNever;

TEST(CreditedSender, AReceiverThatNeverAdvertisedIsNotWaitedFor) {
  CreditedSender s;
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(s.Take(i));
  EXPECT_FALSE(s.blocked());
}

TEST(CreditedSender, SendsGoOnlyAsFarAsTheReceiverPosted) {
  CreditedSender s;
  s.Expect(kNever);
  EXPECT_FALSE(s.Take(10)) << "nothing advertised yet";
  EXPECT_TRUE(s.blocked());
  EXPECT_EQ(s.HoldEndsAt(), kNever) << "rnr_retry 7: held until a credit comes";
  s.Advertise(2);
  EXPECT_TRUE(s.Take(20));
  EXPECT_TRUE(s.Take(21));
  EXPECT_FALSE(s.Take(22));
  s.Advertise(1);  // behind what was seen: reordered or lying, ignored
  EXPECT_FALSE(s.Take(23));
  s.Advertise(3);
  EXPECT_TRUE(s.Take(24));
  EXPECT_FALSE(s.blocked());
}

TEST(CreditedSender, CountsWrap) {
  // Counts are compared modulo 2^32: 2 is 4 ahead of 0xFFFFFFFE, and
  // 0xFFFFFFFF is behind 2.
  CreditedSender s;
  s.Expect(kNever);
  s.Advertise(0xFFFFFFFEu);
  s.Advertise(2);
  EXPECT_EQ(s.advertised(), 2u);
  s.Advertise(0xFFFFFFFFu);
  EXPECT_EQ(s.advertised(), 2u);
}

TEST(CreditedSender, ABoundedRnrRetryHoldsOnlyAsLongAsItsRetries) {
  // rnr_retry 3 and a 10 us RNR timer: natively the message fails after
  // four tries; held, it goes after 40 us and meets RNR as natively.
  CreditedSender s;
  s.Expect(CreditHoldNs(3, 10'000));
  EXPECT_FALSE(s.Take(1000));
  EXPECT_EQ(s.HoldEndsAt(), 41'000u);
  EXPECT_FALSE(s.Take(40'999));
  EXPECT_TRUE(s.Take(41'000));
  EXPECT_EQ(s.expired(), 1u);
  EXPECT_EQ(CreditHoldNs(7, 10'000), kNever);
}

TEST(CreditAdvertiser, SendsTheFirstCountAndThenOnlyChanges) {
  CreditAdvertiser a;
  uint32_t posted = 99;
  ASSERT_TRUE(a.Due(&posted)) << "0 receives is news too: the sender must wait";
  EXPECT_EQ(posted, 0u);
  EXPECT_FALSE(a.Due(&posted));
  a.Posted(3);
  a.Posted(2);
  ASSERT_TRUE(a.Due(&posted));
  EXPECT_EQ(posted, 5u) << "a burst of reposts is one message";
  EXPECT_FALSE(a.Due(&posted));
}

}  // namespace
}  // namespace vrdma::sched
