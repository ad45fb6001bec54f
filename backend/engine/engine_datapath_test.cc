// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Engine tests on a FakeRnic with memfd guest memory: the data path driven
// through guest rings written the way librxe writes them, completions,
// flushes, receives, SRQs, detach, and the scheduler stage's hold/release.
#include "backend/engine/engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>

#include "backend/engine/engine_impl.h"
#include "backend/engine/testing/engine_fixture.h"
#include "backend/rnic/testing/fake_rnic.h"
#include "backend/engine/testing/guest_env.h"
#include "policy/pass_through_policy.h"

namespace vrdma::engine {
namespace {

using testing::DoorbellOnlyEngineTest;
using testing::DrainCq;
using testing::EngineTest;
using testing::FakeRnic;
using testing::GuestEnv;
using testing::GuestRingRef;
using testing::GuestSend;
using testing::kAll;
using testing::kLW;
using testing::MakeGid;
using testing::RecordingSink;
using testing::Rig;

// ------------------------------------------------------------ data path

TEST_F(DoorbellOnlyEngineTest, SendPathEndToEnd) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm);
  Poll();  // the RTS transition looks at the SQ once
  ASSERT_EQ(engine_->ReqNotifyCq(vm, r.scq_h, false), Status::kOk);
  testing::PostSend(r.sq, GuestSend{.wr_id = 0x1234,
                                    .opcode = IB_UVERBS_WR_RDMA_WRITE,
                                    .remote_addr = 0x9000,
                                    .rkey = 55,
                                    .sges = {{r.iova + 16, 100, r.lkey},
                                             {r.iova, 0, 0xbad}}});
  testing::PostSend(r.sq, GuestSend{.wr_id = 0x1235,
                                    .flags = kSendSignaled | kSendInline,
                                    .inline_data = {1, 2, 3}});
  Poll();
  EXPECT_TRUE(rnic_.qps.at(r.qpn).sends.empty());  // no doorbell yet
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  EXPECT_TRUE(engine_->PollOnce());
  FakeRnic::Qp& fq = rnic_.qps.at(r.qpn);
  ASSERT_EQ(fq.sends.size(), 2u);
  const SendWr& w = fq.sends[0];
  EXPECT_EQ(w.opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(w.remote_addr, 0x9000u);
  EXPECT_EQ(w.rkey, 55u);
  ASSERT_EQ(w.num_sge, 1);  // the zero-length SGE is dropped, not passed on
  EXPECT_EQ(w.sge[0].addr, r.iova + 16);
  EXPECT_EQ(w.sge[0].lkey, r.lkey);
  EXPECT_NE(w.wr_id, 0x1234u);  // an engine cookie, not the guest's
  ASSERT_EQ(fq.inline_copies.size(), 1u);
  EXPECT_EQ(fq.inline_copies[0], (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(r.sq.consumer(), 2u);  // slots released
  rnic_.CompleteSend(r.qpn);
  rnic_.CompleteSend(r.qpn);
  Poll(1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 0x1234u);
  EXPECT_EQ(wcs[0].qp_num, r.qpn);
  EXPECT_EQ(wcs[0].status, 0u);
  EXPECT_EQ(wcs[0].byte_len, 100u);
  EXPECT_EQ(wcs[1].wr_id, 0x1235u);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_CQ_COMP), 1);  // once, then disarmed
  EXPECT_EQ(sink.events[0].second, r.scq_h);
  EXPECT_EQ(sink.flushes, 1);

  // Events of one turn reach the guest in one notification.
  sink.flushes = 0;
  ASSERT_EQ(engine_->ReqNotifyCq(vm, r.scq_h, false), Status::kOk);
  ASSERT_EQ(engine_->ReqNotifyCq(vm, r.rcq_h, false), Status::kOk);
  testing::PostRecv(r.rq, 0x77, {{r.iova, 64, r.lkey}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r.qpn);
  testing::PostSend(r.sq, GuestSend{.wr_id = 0x1236, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(1);
  rnic_.CompleteSend(r.qpn);
  rnic_.CompleteRecv(r.qpn, 8);
  const size_t before = sink.events.size();
  EXPECT_TRUE(engine_->PollOnce());
  EXPECT_EQ(sink.events.size(), before + 2);  // both CQs armed
  EXPECT_EQ(sink.flushes, 1);
  DrainCq(r.scq);
  DrainCq(r.rcq);
  VmStats s = *engine_->Stats(vm);
  EXPECT_EQ(s.wqes_posted, 3u);
  EXPECT_EQ(s.cqes_written, 4u);
  EXPECT_EQ(s.cqes_by_status[static_cast<uint32_t>(WcStatus::kSuccess)], 4u);
  EXPECT_EQ(s.wqes_rejected, 0u);
  EXPECT_EQ(s.sched.wrs_completed, 3u);
}

// A drained send queue stays watched (EngineOptions::sq_watch_turns): the
// guest's next WQE is taken on the next turn, before its doorbell, which
// then finds nothing new; after sq_watch_turns quiet turns only a doorbell
// starts work again.
class WatchedSqTest : public EngineTest {
 protected:
  WatchedSqTest() {
    options_.sq_watch_turns = 8;
    options_.sq_watch_per_vm = 1;
  }
  size_t Sent(const Rig& r) { return rnic_.qps.at(r.qpn).sends.size(); }
  void Post(Rig& r, uint64_t id) {
    testing::PostSend(r.sq, GuestSend{.wr_id = id, .sges = {{r.iova, 8, r.lkey}}});
  }
};

TEST_F(WatchedSqTest, WqesAreTakenBeforeTheirDoorbellUntilTheQueueWasQuiet) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm);
  Post(r, 1);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(1);
  ASSERT_EQ(Sent(r), 1u);
  Post(r, 2);  // no doorbell
  Poll(1);
  EXPECT_EQ(Sent(r), 2u);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);  // late: nothing new
  Poll(1);
  EXPECT_EQ(Sent(r), 2u);
  EXPECT_EQ(r.sq.consumer(), 2u);
  // Eight quiet turns end the watch.
  Poll(8);
  Post(r, 3);
  Poll(4);
  EXPECT_EQ(Sent(r), 2u);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(1);
  EXPECT_EQ(Sent(r), 3u);
  for (int i = 0; i < 3; ++i) rnic_.CompleteSend(r.qpn);
  Poll(1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, 0u);
}

TEST_F(WatchedSqTest, EachVmHasItsOwnBoundOfWatchedQueues) {
  GuestEnv env;
  VmId v1 = Attach(env, {MakeGid(1)});
  VmId v2 = Attach(env, {MakeGid(2)});
  Rig a = MakeRig(env, v1), b = MakeRig(env, v1), c = MakeRig(env, v2);
  for (Rig* r : {&a, &b, &c}) {
    Post(*r, 1);
    engine_->Doorbell(r->vm, VIRTIO_RDMA_DB_SQ, r->qpn);
  }
  Poll(1);
  for (Rig* r : {&a, &b, &c}) Post(*r, 2);  // no doorbells
  Poll(1);
  // v1 may have one watched queue (sq_watch_per_vm), which its second QP
  // does not get; v2's own bound is untouched by v1's queues.
  EXPECT_EQ(Sent(a) + Sent(b), 3u);
  EXPECT_EQ(Sent(c), 2u);
  // Destroying the watched QP gives its place back.
  Rig& watched = Sent(a) == 2 ? a : b;
  Rig& other = Sent(a) == 2 ? b : a;
  ASSERT_EQ(engine_->DestroyQp(v1, watched.qpn), Status::kOk);
  engine_->Doorbell(v1, VIRTIO_RDMA_DB_SQ, other.qpn);
  Poll(1);
  EXPECT_EQ(Sent(other), 2u);
  Post(other, 3);
  Poll(1);
  EXPECT_EQ(Sent(other), 3u);
}

TEST_F(EngineTest, MaliciousSendWqesCompleteWithErrors) {
  struct Case {
    const char* name;
    GuestSend (*make)(const Rig&);
    WcStatus want;
  };
  const Case cases[] = {
      {"unknown lkey",
       [](const Rig& r) {
         return GuestSend{.wr_id = 7, .sges = {{r.iova, 8, r.lkey + 1000}}};
       },
       WcStatus::kLocProtErr},
      {"range past MR",
       [](const Rig& r) {
         return GuestSend{.wr_id = 7,
                          .sges = {{r.iova + 4 * 4096 - 4, 8, r.lkey}}};
       },
       WcStatus::kLocProtErr},
      {"range before MR",
       [](const Rig& r) {
         return GuestSend{.wr_id = 7, .sges = {{r.iova - 1, 8, r.lkey}}};
       },
       WcStatus::kLocProtErr},
      {"addr wraps",
       [](const Rig& r) {
         return GuestSend{.wr_id = 7, .sges = {{~0ull - 3, 8, r.lkey}}};
       },
       WcStatus::kLocProtErr},
      {"bad opcode",
       [](const Rig& r) {
         return GuestSend{
             .wr_id = 7, .opcode = 11, .sges = {{r.iova, 8, r.lkey}}};
       },
       WcStatus::kLocQpOpErr},
      {"too many sges",
       [](const Rig& r) {
         return GuestSend{.wr_id = 7,
                          .sges = std::vector<Sge>(5, Sge{r.iova, 1, r.lkey})};
       },
       WcStatus::kLocQpOpErr},
      {"inline too long",
       [](const Rig&) {
         return GuestSend{.wr_id = 7,
                          .flags = kSendInline,
                          .inline_data = std::vector<uint8_t>(129)};
       },
       WcStatus::kLocLenErr},
      {"unknown flag",
       [](const Rig& r) {
         return GuestSend{
             .wr_id = 7, .flags = 0x20, .sges = {{r.iova, 8, r.lkey}}};
       },
       WcStatus::kLocQpOpErr},
      {"write without rkey",
       [](const Rig& r) {
         return GuestSend{.wr_id = 7,
                          .opcode = IB_UVERBS_WR_RDMA_WRITE,
                          .sges = {{r.iova, 8, r.lkey}}};
       },
       WcStatus::kLocProtErr},
  };
  for (const Case& c : cases) {
    GuestEnv env;
    RecordingSink sink;
    Gid g = MakeGid(static_cast<uint8_t>(&c - cases + 1));
    VmId vm = Attach(env, {g}, &sink);
    Rig r = MakeRig(env, vm);
    testing::PostSend(r.sq, c.make(r));
    testing::PostSend(
        r.sq, GuestSend{.wr_id = 8,
                        .sges = {{r.iova, 8, r.lkey}}});  // good, but after
    engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
    Poll();
    std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
    ASSERT_EQ(wcs.size(), 2u) << c.name;
    EXPECT_EQ(wcs[0].wr_id, 7u) << c.name;
    EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(c.want)) << c.name;
    EXPECT_EQ(wcs[1].wr_id, 8u) << c.name;
    EXPECT_EQ(wcs[1].status, static_cast<uint32_t>(WcStatus::kWrFlushErr))
        << c.name;
    EXPECT_EQ(rnic_.qps.at(r.qpn).attr.state, QpState::kErr) << c.name;
    EXPECT_TRUE(rnic_.qps.at(r.qpn).sends.empty()) << c.name;
    EXPECT_EQ(r.sq.consumer(), 2u) << c.name;
    EXPECT_EQ(engine_->Stats(vm)->wqes_rejected, 1u) << c.name;
    // The CQEs counted under their statuses (metrics, stats).
    const auto by_status = engine_->Stats(vm)->cqes_by_status;
    EXPECT_EQ(by_status[static_cast<uint32_t>(c.want)], 1u) << c.name;
    EXPECT_EQ(by_status[static_cast<uint32_t>(WcStatus::kWrFlushErr)], 1u) << c.name;
    EXPECT_EQ(by_status[static_cast<uint32_t>(WcStatus::kSuccess)], 0u) << c.name;
    // Later WQEs are flushed too.
    testing::PostSend(r.sq,
                      GuestSend{.wr_id = 9, .sges = {{r.iova, 8, r.lkey}}});
    engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
    Poll();
    wcs = DrainCq(r.scq);
    ASSERT_EQ(wcs.size(), 1u) << c.name;
    EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
    engine_->DetachVm(vm);
  }
}

TEST_F(EngineTest, GuestWrittenBadIndexIsARingError) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm);
  r.sq.set_producer(16);  // mask is 15
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_QP_FATAL), 1);
  EXPECT_EQ(rnic_.qps.at(r.qpn).attr.state, QpState::kErr);
  // A bad RQ producer index is a ring error as well (QP already failed:
  // no second event), and the RQ doorbell does not crash.
  r.rq.set_producer(0xffffffff);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r.qpn);
  Poll();
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_QP_FATAL), 1);
  Rig r2 = MakeRig(env, vm);
  r2.rq.set_producer(0x10000);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r2.qpn);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_QP_FATAL), 2);
  EXPECT_EQ(sink.events.back().second, r2.qpn);
}

TEST_F(EngineTest, CqOverflowRaisesCqErrOnce) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r;
  r.vm = vm;
  r.pd = *engine_->CreatePd(vm);
  r.scq_h = engine_->CreateCq(vm, Cq(r.scq, env, 1))->handle;  // holds 1 CQE
  r.rcq_h = engine_->CreateCq(vm, Cq(r.rcq, env))->handle;
  RegMrRequest mr;
  mr.pd = r.pd;
  mr.access = kLW;
  mr.iova = r.iova;
  mr.length = 4096;
  mr.pages = GuestEnv::Pages(env.AllocPages(1), 1);
  r.lkey = engine_->RegMr(vm, mr)->lkey;
  r.qpn = engine_->CreateQp(vm, QpReq(r, env, QpType::kRc))->qpn;
  ToRts(r, QpType::kRc);
  for (uint64_t i = 0; i < 3; ++i) {
    testing::PostSend(r.sq,
                      GuestSend{.wr_id = i, .sges = {{r.iova, 8, r.lkey}}});
  }
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(1);
  for (int i = 0; i < 3; ++i) rnic_.CompleteSend(r.qpn);
  Poll();
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_CQ_ERR), 1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 0u);
  EXPECT_EQ(engine_->Stats(vm)->cqes_written, 1u);
}

// A physical RNIC reports QP errors and port changes outside completions
// (VerbsRnic's async events): the guest hears them, and a failed QP's work
// is flushed like after an error completion.
TEST_F(EngineTest, RnicAsyncQpAndPortEventsReachTheGuest) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm);
  Poll();
  rnic_.async_events.push_back(
      AsyncEvent{AsyncEvent::Type::kQpError, r.qpn, VIRTIO_RDMA_EV_QP_ACCESS_ERR});
  rnic_.async_events.push_back(
      AsyncEvent{AsyncEvent::Type::kQpError, 0xabcdef, VIRTIO_RDMA_EV_QP_FATAL});
  rnic_.async_events.push_back(AsyncEvent{AsyncEvent::Type::kPortError, 1, 0});
  rnic_.async_events.push_back(AsyncEvent{AsyncEvent::Type::kPortActive, 1, 0});
  Poll();
  EXPECT_TRUE(rnic_.async_events.empty());
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_QP_ACCESS_ERR), 1);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_QP_FATAL), 0) << "a QPN of no VM is ignored";
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_PORT_ERR), 1);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_PORT_ACTIVE), 1);
  for (const auto& [type, handle] : sink.events) {
    if (type == VIRTIO_RDMA_EV_QP_ACCESS_ERR) {
      EXPECT_EQ(handle, r.qpn);
    }
  }
  // The QP is in ERR for the engine: a new WQE is flushed, never posted.
  testing::PostSend(r.sq, GuestSend{.wr_id = 9, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  EXPECT_TRUE(rnic_.qps.at(r.qpn).sends.empty());
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 9u);
  EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
}

TEST_F(EngineTest, ImpossibleCqConsumerIndexIsAnOverflow) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm);
  Poll();
  r.scq.set_consumer(0xffffffff);
  testing::PostSend(r.sq, GuestSend{.wr_id = 1, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(1);
  rnic_.CompleteSend(r.qpn);
  Poll(1);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_CQ_ERR), 1);
  EXPECT_EQ(r.scq.producer(), 0u);  // nothing written
}

TEST_F(EngineTest, UnsignaledWrsAndRnicBackpressure) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  rnic_.sq_capacity = 15;  // the RNIC's send queue
  Rig r = MakeRig(env, vm);
  Poll();
  // 15 unsignaled WQEs fill the RNIC's send queue.
  for (uint64_t i = 0; i < 15; ++i) {
    testing::PostSend(
        r.sq, GuestSend{.wr_id = i, .flags = 0, .sges = {{r.iova, 8, r.lkey}}});
  }
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  EXPECT_EQ(rnic_.qps.at(r.qpn).sends.size(), 15u);
  EXPECT_EQ(r.sq.consumer(), 15u);
  // The next (signaled) one does not fit: it is taken from the ring and
  // held, in order, until the RNIC has room.
  testing::PostSend(r.sq,
                    GuestSend{.wr_id = 15, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  EXPECT_EQ(rnic_.qps.at(r.qpn).sends.size(), 15u);
  EXPECT_EQ(r.sq.consumer(), 0u);  // wrapped: 16 consumed
  // The RNIC runs the unsignaled ones (no completions) and frees its queue.
  rnic_.qps.at(r.qpn).sends.clear();
  Poll(1);
  ASSERT_EQ(rnic_.qps.at(r.qpn).sends.size(), 1u);
  rnic_.CompleteSend(r.qpn);
  Poll(1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 1u);  // only the signaled one reports
  EXPECT_EQ(wcs[0].wr_id, 15u);
  // Its completion retired all 16: the CQ is no longer polled.
  rnic_.polls.clear();
  Poll(5);
  EXPECT_TRUE(rnic_.polls.empty());
}

TEST_F(EngineTest, FlushReportsUnsignaledWrsWithTheirIds) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm);
  Poll();
  for (uint64_t i = 0; i < 20; ++i) {  // wraps the 16-slot ring
    testing::PostSend(
        r.sq,
        GuestSend{.wr_id = 100 + i, .flags = 0, .sges = {{r.iova, 8, r.lkey}}});
    engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
    Poll(1);
  }
  EXPECT_EQ(rnic_.qps.at(r.qpn).sends.size(), 20u);
  ModifyQpRequest m;
  m.qpn = r.qpn;
  m.mask = VIRTIO_RDMA_QP_STATE;
  m.state = QpState::kErr;
  ASSERT_EQ(engine_->ModifyQp(vm, m), Status::kOk);
  Poll();
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 20u);
  for (uint64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 100 + i);
    EXPECT_EQ(wcs[i].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  }
}

TEST_F(EngineTest, ReceivesArePulledLazily) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm, QpType::kRc, /*rts=*/false);
  // Posted before RTR: nothing goes to the RNIC yet.
  testing::PostRecv(r.rq, 100, {{r.iova, 512, r.lkey}});
  testing::PostRecv(r.rq, 101, {{r.iova + 512, 512, r.lkey}});
  Poll();
  EXPECT_TRUE(rnic_.qps.at(r.qpn).recvs.empty());
  ToRts(r, QpType::kRc);
  FakeRnic::Qp& fq = rnic_.qps.at(r.qpn);
  ASSERT_EQ(fq.recvs.size(), 2u);  // pulled at RTR
  EXPECT_EQ(fq.recvs[0].sge[0].addr, r.iova);
  EXPECT_EQ(r.rq.consumer(), 0u);  // not released until complete
  ASSERT_EQ(engine_->ReqNotifyCq(vm, r.rcq_h, /*solicited_only=*/true),
            Status::kOk);
  rnic_.CompleteRecv(r.qpn, 77, 0x55);
  Poll(1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.rcq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 100u);
  EXPECT_EQ(wcs[0].byte_len, 77u);
  EXPECT_EQ(wcs[0].opcode, static_cast<uint32_t>(WcOpcode::kRecv));
  EXPECT_EQ(wcs[0].src_qp, 0x55u);
  EXPECT_EQ(r.rq.consumer(), 1u);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_CQ_COMP), 1);
  // Posted with no doorbell while receives are in flight: picked up by the
  // next completion (or the sweep).
  testing::PostRecv(r.rq, 102, {{r.iova, 64, r.lkey}});
  Poll();
  EXPECT_EQ(fq.recvs.size(), 2u);
  EXPECT_EQ(fq.recvs[1].sge[0].length, 64u);
  // A bad receive WQE (MR without LOCAL_WRITE is not possible here: use an
  // unknown lkey): error CQE after the older receives, QP to ERR.
  testing::PostRecv(r.rq, 103, {{r.iova, 64, 0xdeadbeef}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r.qpn);
  // CQEs are written at once; the guest sees them at the end of the turn.
  EXPECT_TRUE(DrainCq(r.rcq).empty());
  Poll(1);
  wcs = DrainCq(r.rcq);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 101u);
  EXPECT_EQ(wcs[0].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(wcs[1].wr_id, 102u);
  EXPECT_EQ(wcs[2].wr_id, 103u);
  EXPECT_EQ(wcs[2].status, static_cast<uint32_t>(WcStatus::kLocProtErr));
  EXPECT_EQ(r.rq.consumer(), 4u);
  EXPECT_EQ(rnic_.qps.at(r.qpn).attr.state, QpState::kErr);
}

TEST_F(EngineTest, IdleCqsAreNotPolled) {
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm);  // RQ empty, no sends
  rnic_.polls.clear();
  Poll(10);
  EXPECT_TRUE(rnic_.polls.empty());
  testing::PostSend(r.sq, GuestSend{.wr_id = 1, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll(3);
  EXPECT_FALSE(rnic_.polls.empty());
  EXPECT_TRUE(engine_->PollOnce());  // the RNIC owes a completion: stay busy
  rnic_.CompleteSend(r.qpn);
  Poll(2);
  rnic_.polls.clear();
  Poll(10);
  EXPECT_TRUE(rnic_.polls.empty());   // retired: inactive again
  EXPECT_FALSE(engine_->PollOnce());  // idle: the loop may sleep
  // Unsignaled WRs and posted receives alone do not keep the loop busy.
  testing::PostSend(
      r.sq, GuestSend{.wr_id = 2, .flags = 0, .sges = {{r.iova, 8, r.lkey}}});
  testing::PostRecv(r.rq, 3, {{r.iova, 8, r.lkey}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_RQ, r.qpn);
  Poll(3);
  EXPECT_EQ(rnic_.qps.at(r.qpn).sends.size(), 1u);
  EXPECT_FALSE(engine_->PollOnce());
}

TEST_F(EngineTest, DetachReleasesEverythingAndSparesOthers) {
  GuestEnv e1, e2(8u << 20, 0x10000000);
  VmId v1 = Attach(e1, {MakeGid(1)});
  VmId v2 = Attach(e2, {MakeGid(2)});
  Rig a = MakeRig(e1, v1);
  Rig b = MakeRig(e2, v2);
  testing::PostRecv(a.rq, 1, {{a.iova, 64, a.lkey}});
  engine_->Doorbell(v1, VIRTIO_RDMA_DB_RQ, a.qpn);
  testing::PostSend(a.sq, GuestSend{.wr_id = 1, .sges = {{a.iova, 8, a.lkey}}});
  engine_->Doorbell(v1, VIRTIO_RDMA_DB_SQ, a.qpn);
  Poll(1);
  const size_t mrs_before = rnic_.mrs.size();
  engine_->DetachVm(v1);
  EXPECT_EQ(rnic_.qps.count(a.qpn), 0u);
  EXPECT_EQ(rnic_.qps.count(b.qpn), 1u);
  EXPECT_EQ(rnic_.mrs.size(), mrs_before - 1);
  EXPECT_EQ(rnic_.mrs.count(b.lkey), 1u);
  EXPECT_EQ(rnic_.gids.count(MakeGid(1)), 0u);
  EXPECT_EQ(rnic_.gids.count(MakeGid(2)), 1u);
  EXPECT_EQ(engine_->Stats(v1).status(), Status::kBadHandle);
  engine_->Doorbell(v1, VIRTIO_RDMA_DB_SQ, a.qpn);  // stale VM: ignored
  Poll();
  // VM 2 still works.
  testing::PostSend(b.sq, GuestSend{.wr_id = 5, .sges = {{b.iova, 8, b.lkey}}});
  engine_->Doorbell(v2, VIRTIO_RDMA_DB_SQ, b.qpn);
  Poll(1);
  rnic_.CompleteSend(b.qpn);
  Poll(1);
  std::vector<ib_uverbs_wc> wcs = DrainCq(b.scq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 5u);
  VmStats s = *engine_->Stats(v2);
  EXPECT_EQ(s.qps, 1u);
  EXPECT_EQ(s.mrs, 1u);
}

TEST_F(EngineTest, SharedReceiveQueue) {
  GuestEnv env;
  RecordingSink sink;
  VmId vm = Attach(env, {MakeGid(1)}, &sink);
  Rig r = MakeRig(env, vm, QpType::kRc, /*rts=*/false);
  GuestRingRef ring(env, 4, 7);  // 15 WQEs of up to 5 SGEs
  CreateSrqRequest req;
  req.pd = r.pd;
  req.max_wr = 15;
  req.max_sge = 4;
  req.srq_limit = 0;
  req.ring = ring.spec;
  struct Case {
    const char* name;
    void (*mutate)(CreateSrqRequest&);
    Status want;
  };
  const Case bad[] = {
      {"max_wr 0", [](CreateSrqRequest& q) { q.max_wr = 0; }, Status::kInvalid},
      {"max_wr beyond ring", [](CreateSrqRequest& q) { q.max_wr = 16; },
       Status::kInvalid},
      {"sge beyond element", [](CreateSrqRequest& q) { q.max_sge = 6; },
       Status::kInvalid},
      {"sge 0", [](CreateSrqRequest& q) { q.max_sge = 0; }, Status::kInvalid},
      {"limit above max_wr", [](CreateSrqRequest& q) { q.srq_limit = 16; },
       Status::kInvalid},
      {"bad pd", [](CreateSrqRequest& q) { q.pd = 0; }, Status::kBadHandle},
  };
  for (const Case& c : bad) {
    CreateSrqRequest q = req;
    c.mutate(q);
    EXPECT_EQ(engine_->CreateSrq(vm, q).status(), c.want) << c.name;
  }
  // WQEs posted before the SRQ exists are picked up at creation.
  testing::PostRecv(ring, 500, {{r.iova, 128, r.lkey}});
  Result<CreateSrqResult> srq = engine_->CreateSrq(vm, req);
  ASSERT_TRUE(srq.ok());
  EXPECT_EQ(engine_->ModifySrq(vm, srq->handle, VIRTIO_RDMA_SRQ_MAX_WR, 20, 0),
            Status::kUnsupported);
  EXPECT_EQ(engine_->ModifySrq(vm, srq->handle, VIRTIO_RDMA_SRQ_LIMIT, 0, 16),
            Status::kInvalid);
  ASSERT_EQ(engine_->ModifySrq(vm, srq->handle, VIRTIO_RDMA_SRQ_LIMIT, 0, 2),
            Status::kOk);
  ASSERT_EQ(rnic_.srqs.size(), 1u);
  FakeRnic::Srq& fs = rnic_.srqs.begin()->second;
  EXPECT_EQ(fs.recvs.size(), 1u);

  CreateQpRequest q = QpReq(r, env, QpType::kRc);
  q.srq = srq->handle;
  EXPECT_EQ(engine_->CreateQp(vm, q).status(),
            Status::kInvalid);  // RQ pages with an SRQ
  q.rq = {};
  Result<CreateQpResult> qp = engine_->CreateQp(vm, q);
  ASSERT_TRUE(qp.ok());
  EXPECT_EQ(qp->caps.max_recv_wr, 0u);
  EXPECT_EQ(engine_->DestroySrq(vm, srq->handle), Status::kBusy);

  // More WQEs, one of them bad: the bad one is skipped, not posted.
  testing::PostRecv(ring, 501, {{r.iova, 64, r.lkey}});
  testing::PostRecv(ring, 502, {{r.iova, 64, 0xdeadbeef}});
  testing::PostRecv(ring, 503, {{r.iova + 64, 64, r.lkey}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SRQ, srq->handle);
  ASSERT_EQ(fs.recvs.size(), 4u - 1);
  EXPECT_EQ(engine_->Stats(vm)->wqes_rejected, 1u);
  EXPECT_EQ(ring.consumer(), 0u);  // 500 not complete yet

  rnic_.CompleteSrqRecv(qp->qpn, 10);
  Poll(2);
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.rcq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 500u);
  EXPECT_EQ(wcs[0].qp_num, qp->qpn);
  EXPECT_EQ(ring.consumer(), 1u);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_SRQ_LIMIT_REACHED), 0);  // 3 left >= 2
  rnic_.CompleteSrqRecv(qp->qpn, 11);                          // 501
  Poll(2);
  // 501 done; 502 (skipped) done too: the consumer passes both.
  EXPECT_EQ(ring.consumer(), 3u);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_SRQ_LIMIT_REACHED), 1);  // 1 left < 2
  EXPECT_EQ(sink.events.back().second, srq->handle);
  rnic_.CompleteSrqRecv(qp->qpn, 12);
  Poll(2);
  EXPECT_EQ(sink.Count(VIRTIO_RDMA_EV_SRQ_LIMIT_REACHED), 1);  // disarmed
  wcs = DrainCq(r.rcq);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 501u);
  EXPECT_EQ(wcs[1].wr_id, 503u);
  ASSERT_EQ(engine_->DestroyQp(vm, qp->qpn), Status::kOk);
  EXPECT_EQ(engine_->DestroySrq(vm, srq->handle), Status::kOk);
  EXPECT_TRUE(rnic_.srqs.empty());
}

// A policy that gates every flow: nothing posts until the test grants.
class GatingPolicy : public policy::SchedulerPolicy {
 public:
  std::string_view name() const override { return "gating"; }
  void OnTenantAdded(policy::TenantId, const policy::TenantQos&) override {}
  void OnTenantQosChanged(policy::TenantId, const policy::TenantQos&) override {}
  void OnTenantRemoved(policy::TenantId) override {}
  void OnFlowAdded(policy::Nanos, const policy::FlowInfo& f) override {
    policy::FlowControl c;
    c.gated = true;
    mech().Configure(f.flow, c);
    flow = f.flow;
  }
  void OnFlowEnded(policy::Nanos, policy::FlowId, policy::FlowEnd how) override {
    ends.push_back(how);
  }
  void OnArrival(policy::Nanos, const policy::WrInfo&) override { ++arrivals; }
  void OnCompleted(policy::Nanos, const policy::WrInfo&, policy::Nanos latency,
                   bool ok) override {
    latencies.push_back(latency);
    oks.push_back(ok);
  }
  void OnCreditNeeded(policy::Nanos, policy::FlowId) override { ++asks; }
  void Release(uint32_t wrs) { mech().Grant(flow, 1u << 30, wrs); }
  policy::FlowId flow = 0;
  int arrivals = 0, asks = 0;
  std::vector<policy::Nanos> latencies;
  std::vector<bool> oks;
  std::vector<policy::FlowEnd> ends;
};

TEST_F(EngineTest, SchedulerHoldsReleasesAndFlushesInOrder) {
  GatingPolicy pol;
  policy::Nanos now = 1000;
  EngineOptions o;
  o.clock = [&] { return now; };
  engine_ = CreateEngine(rnic_, exec_, pol, o);
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm);
  for (uint64_t i = 0; i < 3; ++i) {
    testing::PostSend(
        r.sq,
        GuestSend{.wr_id = i,
                  .sges = {{r.iova, 10 + static_cast<uint32_t>(i), r.lkey}}});
  }
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  EXPECT_TRUE(rnic_.qps.at(r.qpn).sends.empty());  // held back
  EXPECT_EQ(r.sq.consumer(), 3u);                  // but copied out of the ring
  EXPECT_EQ(pol.arrivals, 3);
  EXPECT_EQ(pol.asks, 1);
  // Work only the policy can release costs no busy loop.
  EXPECT_FALSE(engine_->PollOnce());
  pol.Release(2);
  Poll(1);
  ASSERT_EQ(rnic_.qps.at(r.qpn).sends.size(), 2u);
  EXPECT_EQ(rnic_.qps.at(r.qpn).sends[0].sge[0].length, 10u);
  EXPECT_EQ(rnic_.qps.at(r.qpn).sends[1].sge[0].length, 11u);
  now = 5000;
  rnic_.CompleteSend(r.qpn);
  Poll(1);
  ASSERT_EQ(pol.latencies.size(), 1u);
  EXPECT_EQ(pol.latencies[0], 4000u);
  // Flushing the QP reports the held one and the posted one, in order.
  ModifyQpRequest m;
  m.qpn = r.qpn;
  m.mask = VIRTIO_RDMA_QP_STATE;
  m.state = QpState::kErr;
  ASSERT_EQ(engine_->ModifyQp(vm, m), Status::kOk);
  Poll();
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 0u);
  EXPECT_EQ(wcs[0].status, 0u);
  EXPECT_EQ(wcs[1].wr_id, 1u);
  EXPECT_EQ(wcs[1].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(wcs[2].wr_id, 2u);
  EXPECT_EQ(wcs[2].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  ASSERT_FALSE(pol.ends.empty());
  EXPECT_EQ(pol.ends.back(), policy::FlowEnd::kError);
  engine_.reset();  // before the policy it uses goes away
}

// A WQE that fails the checks behind WRs the stage holds does not flush
// them: they are released, complete, and only then does it fail.
TEST_F(EngineTest, BadWqeBehindHeldWorkFailsAfterIt) {
  GatingPolicy pol;
  engine_ = CreateEngine(rnic_, exec_, pol, EngineOptions{});
  GuestEnv env;
  VmId vm = Attach(env, {MakeGid(1)});
  Rig r = MakeRig(env, vm);
  rnic_.auto_complete = true;
  testing::PostSend(r.sq, GuestSend{.wr_id = 1, .sges = {{r.iova, 8, r.lkey}}});
  testing::PostSend(r.sq, GuestSend{.wr_id = 2, .sges = {{r.iova, 8, r.lkey}}});
  // lkey of no MR: a local protection error.
  testing::PostSend(r.sq, GuestSend{.wr_id = 3, .sges = {{r.iova, 8, 0xbad}}});
  testing::PostSend(r.sq, GuestSend{.wr_id = 4, .sges = {{r.iova, 8, r.lkey}}});
  engine_->Doorbell(vm, VIRTIO_RDMA_DB_SQ, r.qpn);
  Poll();
  EXPECT_TRUE(DrainCq(r.scq).empty()) << "held, and the bad one waits";
  EXPECT_EQ(rnic_.qps.at(r.qpn).attr.state, QpState::kRts);
  pol.Release(2);
  Poll();
  std::vector<ib_uverbs_wc> wcs = DrainCq(r.scq);
  ASSERT_EQ(wcs.size(), 4u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, 0u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, 0u);
  EXPECT_EQ(wcs[2].wr_id, 3u);
  EXPECT_EQ(wcs[2].status, static_cast<uint32_t>(WcStatus::kLocProtErr));
  EXPECT_EQ(wcs[3].wr_id, 4u);
  EXPECT_EQ(wcs[3].status, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(engine_->Stats(vm)->wqes_rejected, 1u);
  engine_.reset();
}

}  // namespace
}  // namespace vrdma::engine
