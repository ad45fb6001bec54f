// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/scheduler/timer_wheel.h"

#include <vector>

#include "gtest/gtest.h"

namespace vrdma::sched {
namespace {

struct Named : TimerWheel::Entry {
  int id = 0;
};

class TimerWheelTest : public ::testing::Test {
 protected:
  std::vector<int> Advance(Nanos now) {
    std::vector<int> fired;
    wheel_.Advance(now, [&](TimerWheel::Entry* e) {
      fired.push_back(static_cast<Named*>(e)->id);
    });
    return fired;
  }
  TimerWheel wheel_{100};
  Named a_, b_, c_;
  void SetUp() override {
    a_.id = 1;
    b_.id = 2;
    c_.id = 3;
  }
};

TEST_F(TimerWheelTest, FiresAtExpiryNeverBefore) {
  wheel_.Arm(&a_, 1000);
  wheel_.Arm(&b_, 250);
  EXPECT_EQ(wheel_.NextExpiry(), 250u);
  EXPECT_TRUE(Advance(249).empty());
  EXPECT_EQ(Advance(250), std::vector<int>{2});
  EXPECT_EQ(wheel_.NextExpiry(), 1000u);
  EXPECT_TRUE(Advance(999).empty());
  EXPECT_EQ(Advance(5000), std::vector<int>{1});
  EXPECT_EQ(wheel_.NextExpiry(), kNoExpiry);
  EXPECT_EQ(wheel_.size(), 0u);
}

TEST_F(TimerWheelTest, CancelAndRearm) {
  wheel_.Arm(&a_, 300);
  wheel_.Arm(&b_, 400);
  wheel_.Cancel(&a_);
  EXPECT_FALSE(TimerWheel::armed(&a_));
  EXPECT_EQ(wheel_.NextExpiry(), 400u);
  wheel_.Arm(&b_, 900);  // moves it
  EXPECT_TRUE(Advance(500).empty());
  EXPECT_EQ(Advance(900), std::vector<int>{2});
}

TEST_F(TimerWheelTest, LaterRevolutionsWaitTheirTurn) {
  // Same slot, one and three revolutions later.
  const Nanos rev = TimerWheel::kSlots * 100;
  wheel_.Arm(&a_, 50 + rev);
  wheel_.Arm(&b_, 50 + 3 * rev);
  EXPECT_TRUE(Advance(rev).empty());
  EXPECT_EQ(Advance(rev + 50), std::vector<int>{1});
  EXPECT_TRUE(Advance(2 * rev + 60).empty());
  EXPECT_EQ(wheel_.NextExpiry(), 50 + 3 * rev);
  // A gap longer than a revolution visits every slot once.
  EXPECT_EQ(Advance(100 * rev), std::vector<int>{2});
}

TEST_F(TimerWheelTest, PastExpiryFiresOnNextAdvance) {
  EXPECT_TRUE(Advance(10000).empty());
  wheel_.Arm(&a_, 10);
  EXPECT_EQ(wheel_.NextExpiry(), 10001u) << "the first instant not yet served";
  EXPECT_EQ(Advance(10001), std::vector<int>{1});
}

TEST_F(TimerWheelTest, ArmedAtTheInstantJustServedFiresAtNextExpiry) {
  // An owner on a virtual clock sleeps until NextExpiry and advances to
  // exactly it: the entry must be due then, or time never moves on.
  EXPECT_TRUE(Advance(4000).empty());
  wheel_.Arm(&a_, 4000);
  EXPECT_TRUE(Advance(4000).empty()) << "4000 was served already";
  const Nanos next = wheel_.NextExpiry();
  EXPECT_GT(next, 4000u);
  EXPECT_EQ(Advance(next), std::vector<int>{1});
}

TEST_F(TimerWheelTest, CallbackMayRearmAndCancelDueEntries) {
  wheel_.Arm(&a_, 100);
  wheel_.Arm(&b_, 100);
  wheel_.Arm(&c_, 100);
  std::vector<int> fired;
  wheel_.Advance(200, [&](TimerWheel::Entry* e) {
    Named* n = static_cast<Named*>(e);
    fired.push_back(n->id);
    if (n->id == 1) {
      wheel_.Cancel(&b_);       // due, not yet fired: dropped
      wheel_.Arm(&a_, 10000);   // itself, later
    }
  });
  EXPECT_EQ(fired, (std::vector<int>{1, 3}));
  EXPECT_TRUE(TimerWheel::armed(&a_));
  EXPECT_EQ(wheel_.size(), 1u);
  EXPECT_EQ(wheel_.NextExpiry(), 10000u);
}

}  // namespace
}  // namespace vrdma::sched
