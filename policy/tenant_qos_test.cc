// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include <string>

#include "gtest/gtest.h"
#include "policy/scheduler_policy.h"

namespace vrdma::policy {
namespace {

// A 25 GbE card that does 20 M messages/s.
CardProfile Card() {
  CardProfile c;
  c.line_rate_bps = 25e9;
  c.max_msgs_per_s = 20e6;
  return c;
}

TEST(CheckTenantQos, AcceptsTheDefaultAndEveryLimitUpToTheCard) {
  std::string error;
  EXPECT_TRUE(CheckTenantQos(TenantQos{}, Card(), &error)) << error;
  TenantQos q;
  q.weight = 1000;
  q.max_rate_bps = 25'000'000'000;
  q.min_rate_bps = 25'000'000'000;
  q.max_msgs_per_s = 20'000'000;
  q.latency_target_ns = 5000;
  q.app_class = TenantClass::kLatency;
  EXPECT_TRUE(CheckTenantQos(q, Card(), &error)) << error;
  // A guarantee with no byte cap is bounded by the card alone.
  q.max_rate_bps = 0;
  EXPECT_TRUE(CheckTenantQos(q, Card(), &error)) << error;
}

TEST(CheckTenantQos, RefusesEachBrokenRuleNamingTheField) {
  struct Case {
    const char* field;
    TenantQos qos;
  };
  auto with = [](auto set) {
    TenantQos q;
    set(q);
    return q;
  };
  const Case cases[] = {
      {"weight", with([](TenantQos& q) { q.weight = 0; })},
      {"max_rate_bps", with([](TenantQos& q) { q.max_rate_bps = 25'000'000'001; })},
      {"max_msgs_per_s", with([](TenantQos& q) { q.max_msgs_per_s = 20'000'001; })},
      {"min_rate_bps", with([](TenantQos& q) { q.min_rate_bps = 26'000'000'000; })},
      {"min_rate_bps", with([](TenantQos& q) {
         q.max_rate_bps = 1'000'000'000;
         q.min_rate_bps = 2'000'000'000;
       })},
      {"class", with([](TenantQos& q) { q.app_class = static_cast<TenantClass>(3); })},
  };
  for (const Case& c : cases) {
    std::string error;
    EXPECT_FALSE(CheckTenantQos(c.qos, Card(), &error)) << c.field;
    EXPECT_EQ(error.rfind(c.field, 0), 0u) << "names the field first: " << error;
  }
}

TEST(CheckTenantQos, SaysWhatTheLimitIs) {
  TenantQos q;
  q.max_rate_bps = 40'000'000'000;
  std::string error;
  ASSERT_FALSE(CheckTenantQos(q, Card(), &error));
  EXPECT_EQ(error,
            "max_rate_bps: 40000000000 is above the card's line rate "
            "(25000000000 bps)");
}

TEST(CheckGuarantees, AdmitsUpToTheGuaranteeableShareOfTheLine) {
  std::string error;
  const auto limit = static_cast<uint64_t>(kGuaranteeableShare * Card().line_rate_bps);
  EXPECT_TRUE(CheckGuarantees(0, Card(), &error));
  EXPECT_TRUE(CheckGuarantees(limit, Card(), &error)) << error;
  ASSERT_FALSE(CheckGuarantees(limit + 1, Card(), &error));
  EXPECT_EQ(error.rfind("min_rate_bps: the guarantees on this card would sum to 22500000001", 0),
            0u)
      << error;
}

}  // namespace
}  // namespace vrdma::policy
