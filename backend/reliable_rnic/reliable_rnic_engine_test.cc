// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine tells the layer each QP's type in the caps it charges and
// prepares (QpCaps::type, docs/reliability.md §2.1): the one engine change
// the layer needs, so that UC and UD QPs are not charged for RC machinery.
// (The engine's own tests run over the layer in engine_rnic_test and
// engine_alloc_test.)
#include <gtest/gtest.h>

#include <vector>

#include "backend/engine/testing/soft_rnic_guests.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

// The layer, noting the type of every shape it is asked about.
class TypeRecordingLayer : public ReliableRnic {
 public:
  using ReliableRnic::ReliableRnic;
  uint64_t QpHostBytes(const QpCaps& caps) const override {
    charged.push_back(caps.type);
    return ReliableRnic::QpHostBytes(caps);
  }
  void PrepareQp(const QpCaps& caps) override {
    prepared.push_back(caps.type);
    ReliableRnic::PrepareQp(caps);
  }
  mutable std::vector<QpType> charged;
  std::vector<QpType> prepared;
};

class ReliableEngineTest : public engine::testing::EngineGuestsTest {
 protected:
  void SetUp() override { StartEngine(layer_); }
  ~ReliableEngineTest() override { engine_.reset(); }

  SoftRnic soft_;
  TypeRecordingLayer layer_{soft_};
};

TEST_F(ReliableEngineTest, EngineFillsTheQpTypeIntoTheCaps) {
  engine::testing::Guest rc(0x100000), uc(0x40000000), ud(0x80000000);
  AddGuest(rc, 1, QpType::kRc);
  AddGuest(uc, 2, QpType::kUc);
  AddGuest(ud, 3, QpType::kUd);
  const std::vector<QpType> expect{QpType::kRc, QpType::kUc, QpType::kUd};
  EXPECT_EQ(layer_.charged, expect);
  EXPECT_EQ(layer_.prepared, expect);
  EXPECT_EQ(layer_.ObjectCounts().qps, 3u);
}

}  // namespace
}  // namespace vrdma
