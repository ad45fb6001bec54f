// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "policy/policy_options.h"

#include "gtest/gtest.h"
#include "policy/policy_registry.h"

namespace vrdma::policy {
namespace {

struct Params {
  uint32_t count = 4;
  uint64_t bytes = 1024;
  double ratio = 0.5;
  bool on = false;
};

std::vector<Knob> KnobsOf(Params& p) {
  return {{"count", &p.count, 1, 100},
          {"bytes", &p.bytes, 0, 1e9},
          {"ratio", &p.ratio, 0, 1},
          {"on", &p.on, 0, 1}};
}

TEST(PolicyOptions, AppliesEveryKnobOfTheList) {
  Params p;
  std::string error;
  ASSERT_TRUE(ApplyKnobs({"count=7", "bytes=1e6", "ratio=0.25", "on=true"}, KnobsOf(p),
                         &error))
      << error;
  EXPECT_EQ(p.count, 7u);
  EXPECT_EQ(p.bytes, 1000000u);
  EXPECT_DOUBLE_EQ(p.ratio, 0.25);
  EXPECT_TRUE(p.on);
  EXPECT_EQ(DescribeKnobs(KnobsOf(p)), "count=7, bytes=1000000, ratio=0.25, on=true");
}

TEST(PolicyOptions, RefusesAndChangesNothingOnAnyBadOption) {
  for (const char* bad : {"count=0", "count=101", "count=2.5", "ratio=2", "nope=1",
                          "count", "=3", "count=", "count=3x", "bytes=inf", "on=yes"}) {
    Params p;
    std::string error;
    EXPECT_FALSE(ApplyKnobs({"ratio=0.75", bad}, KnobsOf(p), &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
    EXPECT_DOUBLE_EQ(p.ratio, 0.5) << bad << ": the good option before it was not applied";
  }
}

TEST(PolicyRegistry, EveryListedPolicyIsMadeAndUnknownNamesAreRefused) {
  for (const std::string& name : PolicyNames()) {
    std::string error;
    auto p = MakePolicy(name, CardProfile{}, {}, 0, &error);
    ASSERT_NE(p, nullptr) << name << ": " << error;
    EXPECT_EQ(p->name(), name);
  }
  std::string error;
  EXPECT_EQ(MakePolicy("fifo", CardProfile{}, {}, 0, &error), nullptr);
  EXPECT_EQ(error, "unknown policy: fifo");
  EXPECT_EQ(MakePolicy("pass-through", CardProfile{}, {"x=1"}, 0, &error), nullptr);
}

}  // namespace
}  // namespace vrdma::policy
