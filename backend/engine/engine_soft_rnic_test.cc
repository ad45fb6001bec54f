// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// End to end through the engine and SoftRnic: VMs with memfd guest RAM,
// WQEs written into their rings by hand (rdma_user_rxe.h layouts, as librxe
// writes them), doorbells, PollOnce, then the CQEs in the guest CQ rings
// and the bytes in the guests' memory. The tests that hold on any RNIC
// (every opcode, errors, teardown, two VMs) are in engine_rnic_test.cc and
// run on SoftRnic and VerbsRnic; these depend on SoftRnic's timing (a
// receive found within a turn) or on its loopback GID (the probe path).
#include "backend/engine/testing/soft_rnic_guests.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backend/engine/engine_impl.h"

namespace vrdma::engine {
namespace {

using testing::DrainCq;
using testing::EngineSoftRnicTest;
using testing::Guest;
using testing::GuestRingRef;
using testing::GuestSend;
using testing::kBufPages;

// librxe posts receives without a doorbell. A receive posted before the
// peer's send must be found even when the sweep is busy elsewhere: the
// engine pulls the destination's receives before posting the send.
TEST_F(EngineSoftRnicTest, UdReceivePostedWithoutDoorbellIsFoundAtOnce) {
  Guest c(0x80000000), a(0x100000), b(0x40000000);
  AddGuest(c, 3, QpType::kUd);
  // Many idle UD QPs ahead of B on the receive sweep.
  std::vector<GuestRingRef> rings;
  for (int i = 0; i < 12; ++i) {
    CreateQpRequest q;
    q.pd = c.pd;
    q.type = QpType::kUd;
    q.send_cq = c.scq_h;
    q.recv_cq = c.rcq_h;
    q.caps = {4, 4, 1, 1, 0};
    rings.emplace_back(c.env, 3, 8);
    q.sq = rings.back().spec;
    rings.emplace_back(c.env, 3, 6);
    q.rq = rings.back().spec;
    Result<CreateQpResult> r = engine_->CreateQp(c.vm, q);
    ASSERT_TRUE(r.ok());
    Guest tmp(0);
    tmp.vm = c.vm;
    tmp.qpn = r->qpn;
    BringUp(tmp, QpType::kUd, nullptr);
  }
  AddGuest(a, 1, QpType::kUd);
  AddGuest(b, 2, QpType::kUd);
  BringUp(a, QpType::kUd, nullptr);
  BringUp(b, QpType::kUd, nullptr);
  for (int i = 0; i < 3; ++i) engine_->PollOnce();
  Result<uint32_t> ah = engine_->CreateAh(a.vm, a.pd, GuestAh{.dgid = b.gid});
  ASSERT_TRUE(ah.ok());
  int delivered = 0;
  for (uint64_t i = 0; i < 10; ++i) {
    testing::PostRecv(b.rq, i, {{b.iova, 40 + 64, b.lkey}});
    testing::PostSend(a.sq, GuestSend{.wr_id = i,
                                      .ud_qpn = b.qpn,
                                      .ud_qkey = 0x1111,
                                      .ah = *ah,
                                      .sges = {{a.iova, 64, a.lkey}}});
    engine_->Doorbell(a.vm, VIRTIO_RDMA_DB_SQ, a.qpn);
    engine_->PollOnce();  // one turn: the sweep has not reached B
    engine_->PollOnce();
    std::vector<ib_uverbs_wc> rb = DrainCq(b.rcq);
    DrainCq(a.scq);
    if (rb.size() == 1 && rb[0].status == 0 && rb[0].wr_id == i) ++delivered;
  }
  EXPECT_EQ(delivered, 10);
}

}  // namespace
}  // namespace vrdma::engine
