// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ParseFaultSpec: the documented example to exact values, and each kind of
// bad input refused with its reason.
#include "backend/fabric/fault_spec.h"

#include <gtest/gtest.h>

namespace vrdma::fabric {
namespace {

TEST(FaultSpecTest, TheDocumentedExample) {
  auto c = ParseFaultSpec(
      "loss=0.01,reorder=0.01:20us,dup=0.005,delay=10us:5us,"
      "bottleneck=10gbps:256KiB,burst=0.02:0.25:0.5");
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->loss, 0.01);
  EXPECT_DOUBLE_EQ(c->p_reorder, 0.01);
  EXPECT_EQ(c->reorder_delay_ns, 20'000u);
  EXPECT_DOUBLE_EQ(c->p_dup, 0.005);
  EXPECT_EQ(c->delay_ns, 10'000u);
  EXPECT_EQ(c->jitter_ns, 5'000u);
  EXPECT_EQ(c->bottleneck_bps, 10'000'000'000u);
  EXPECT_EQ(c->bottleneck_bytes, 256u * 1024);
  EXPECT_DOUBLE_EQ(c->p_enter_bad, 0.02);
  EXPECT_DOUBLE_EQ(c->p_leave_bad, 0.25);
  EXPECT_DOUBLE_EQ(c->loss_bad, 0.5);
}

TEST(FaultSpecTest, DefaultsAndUnits) {
  auto empty = ParseFaultSpec("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->loss, 0);
  EXPECT_EQ(empty->bottleneck_bps, 0u);
  auto c = ParseFaultSpec("delay=3ms,burst=0.1:0.5,bottleneck=2.5mbps:1500");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->delay_ns, 3'000'000u);
  EXPECT_EQ(c->jitter_ns, 0u);
  EXPECT_DOUBLE_EQ(c->loss_bad, 1.0);  // the default
  EXPECT_EQ(c->bottleneck_bps, 2'500'000u);
  EXPECT_EQ(c->bottleneck_bytes, 1500u);
  EXPECT_EQ(ParseFaultSpec("delay=2s")->delay_ns, 2'000'000'000u);
  EXPECT_EQ(ParseFaultSpec("delay=7ns")->delay_ns, 7u);
}

TEST(FaultSpecTest, BadInputSaysWhy) {
  struct Case {
    const char* spec;
    const char* why;
  } cases[] = {
      {"loss", "no '='"},
      {"los=0.1", "an unknown key"},
      {"loss=0.1,loss=0.2", "a key given twice"},
      {"loss=1.5", "a value out of range"},
      {"loss=-0.1", "a value out of range"},
      {"loss=abc", "a value out of range"},
      {"loss=0.1:2", "a value out of range"},
      {"reorder=0.1", "a value out of range"},
      {"reorder=0.1:20", "a value out of range"},      // no unit
      {"delay=10xs", "a value out of range"},
      {"delay=1.5ns", "a value out of range"},         // not whole ns
      {"bottleneck=10gbps", "a value out of range"},
      {"bottleneck=10gb:1KiB", "a value out of range"},
      {"bottleneck=10gbps:0", "a value out of range"},
      {"burst=0:0.5", "a value out of range"},        // never enters
      {"loss=0.1,", "no '='"},                       // an empty item
  };
  for (const Case& c : cases) {
    std::string error;
    auto r = ParseFaultSpec(c.spec, &error);
    EXPECT_EQ(r.status(), Status::kInvalid) << c.spec;
    EXPECT_NE(error.find(c.why), std::string::npos) << c.spec << ": " << error;
  }
}

}  // namespace
}  // namespace vrdma::fabric
