// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// For VerbsRnic tests on the device VRDMA_TEST_RNIC names: opening it (or
// skipping, saying so), page-aligned buffers, and two RC QPs connected
// through the device's own loopback on one of its IPv4 GIDs.
#ifndef VRDMA_BACKEND_VERBS_RNIC_TESTING_VERBS_LOOPBACK_H_
#define VRDMA_BACKEND_VERBS_RNIC_TESTING_VERBS_LOOPBACK_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/verbs_rnic/verbs_rnic.h"

namespace vrdma::testing {

inline constexpr uint32_t kAllAccess = kAccessLocalWrite | kAccessRemoteWrite |
                                       kAccessRemoteRead | kAccessRemoteAtomic;

class VerbsRnicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dev = std::getenv("VRDMA_TEST_RNIC");
    if (dev == nullptr || *dev == '\0') {
      GTEST_SKIP() << "VRDMA_TEST_RNIC not set: no rdma-core device (this host "
                      "has none; tests/vm/run-verbs.sh runs this in a VM on "
                      "rxe0). NOT a pass.";
    }
    std::string error;
    VerbsRnic::Options o;
    o.device = dev;
    rnic_ = VerbsRnic::Open(o, &error);
    ASSERT_NE(rnic_, nullptr) << error;
    for (const Gid& g : rnic_->PortGids()) {
      if (g[10] == 0xff && g[11] == 0xff) gid_ = g;  // an IPv4 GID
    }
    ASSERT_NE(gid_, Gid{}) << dev << " has no IPv4 GID (give its netdev an address)";
  }
  void TearDown() override {
    rnic_.reset();
    for (void* p : pages_) std::free(p);
  }
  // Page-aligned, like the engine's page views: the kernel wants the
  // address and the iova at the same offset in their pages.
  std::span<uint8_t> Pages(size_t n) {
    void* p = std::aligned_alloc(4096, n * 4096);
    pages_.push_back(p);
    return {static_cast<uint8_t*>(p), n * 4096};
  }

  // Two RC QPs of pd on cq, connected to each other from gid_ (registered
  // here) to gid_, in RTS.
  std::pair<RnicQp, RnicQp> ConnectedPair(RnicPd pd, RnicCq cq) {
    EXPECT_EQ(rnic_->AddGid(gid_), Status::kOk);
    QpInit init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.caps = {16, 16, 2, 2, 0};
    Result<RnicQp> qa = rnic_->CreateQp(init), qb = rnic_->CreateQp(init);
    EXPECT_TRUE(qa.ok() && qb.ok());
    if (!qa.ok() || !qb.ok()) return {};
    for (auto [q, peer] : {std::pair{*qa, *qb}, std::pair{*qb, *qa}}) {
      QpAttr at;
      at.state = QpState::kInit;
      at.access_flags = kAllAccess;
      EXPECT_EQ(rnic_->ModifyQp(q, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
                Status::kOk);
      at.state = QpState::kRtr;
      at.av.sgid = at.av.dgid = gid_;
      at.dest_qpn = peer.qpn;
      at.path_mtu_bytes = 1024;
      EXPECT_EQ(rnic_->ModifyQp(q, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                                           kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
                Status::kOk);
      at.state = QpState::kRts;
      EXPECT_EQ(rnic_->ModifyQp(q, at, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                           kQpRnrRetry | kQpMaxQpRdAtomic),
                Status::kOk);
    }
    return {*qa, *qb};
  }

  std::unique_ptr<VerbsRnic> rnic_;
  Gid gid_{};
  std::vector<void*> pages_;
};

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_VERBS_RNIC_TESTING_VERBS_LOOPBACK_H_
