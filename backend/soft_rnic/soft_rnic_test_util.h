// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test fixture for SoftRnic: a fake clock, "VMs" (a GID, a PD, CQs and one
// registered buffer each, in their own iova ranges) and helpers that bring
// QPs up the way an application would.
#ifndef VRDMA_BACKEND_SOFT_RNIC_SOFT_RNIC_TEST_UTIL_H_
#define VRDMA_BACKEND_SOFT_RNIC_SOFT_RNIC_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma::testing {

inline constexpr uint32_t kAllAccess = kAccessLocalWrite | kAccessRemoteWrite |
                                       kAccessRemoteRead | kAccessRemoteAtomic;

struct Vm {
  Gid gid{};
  RnicPd pd{};
  RnicCq scq{};
  RnicCq rcq{};
  std::vector<uint8_t> buf;
  uint64_t iova = 0;
  RnicMr mr{};
  // iova of byte `off` of buf.
  uint64_t at(uint64_t off) const { return iova + off; }
};

// Connection attributes a test can tweak before BringUp.
struct Conn {
  uint32_t access = kAllAccess;
  uint8_t timeout = 10;  // 4.096 us << 10 = ~4.2 ms
  uint8_t retry_cnt = 3;
  uint8_t rnr_retry = 3;
  uint8_t min_rnr_timer = 12;  // 0.64 ms
  uint32_t qkey = 0x1111;
};

class SoftRnicTest : public ::testing::Test {
 protected:
  static constexpr size_t kBufSize = 64 * 1024;

  SoftRnicTest() = default;
  // A fixture whose RNIC has other limits (e.g. a line rate).
  explicit SoftRnicTest(const RnicLimits& limits) : limits_(limits) {}

  void SetUp() override {
    MakeVm(&a_, 1);
    MakeVm(&b_, 2);
  }

  void MakeVm(Vm* vm, uint8_t id, uint32_t cq_depth = 1024) {
    vm->gid = Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};
    ASSERT_EQ(rnic_.AddGid(vm->gid), Status::kOk);
    auto pd = rnic_.AllocPd();
    ASSERT_TRUE(pd.ok());
    vm->pd = *pd;
    auto scq = rnic_.CreateCq(cq_depth);
    auto rcq = rnic_.CreateCq(cq_depth);
    ASSERT_TRUE(scq.ok() && rcq.ok());
    vm->scq = *scq;
    vm->rcq = *rcq;
    vm->buf.assign(kBufSize, 0);
    for (size_t i = 0; i < kBufSize; ++i) {
      vm->buf[i] = static_cast<uint8_t>(i * 7 + id * 31);
    }
    vm->iova = uint64_t{id} << 32;
    auto mr =
        rnic_.RegMr(vm->pd, vm->buf.data(), kBufSize, vm->iova, kAllAccess);
    ASSERT_TRUE(mr.ok());
    vm->mr = *mr;
  }

  RnicQp MakeQp(const Vm& vm, QpType type, uint32_t depth = 64,
                bool sig_all = false, const RnicSrq* srq = nullptr) {
    QpInit init;
    init.type = type;
    init.pd = vm.pd;
    init.send_cq = vm.scq;
    init.recv_cq = vm.rcq;
    init.caps = QpCaps{depth, depth, 8, 8, 128};
    init.sq_sig_all = sig_all;
    if (srq != nullptr) {
      init.has_srq = true;
      init.srq = *srq;
    }
    auto qp = rnic_.CreateQp(init);
    EXPECT_TRUE(qp.ok());
    return qp.ok() ? *qp : RnicQp{};
  }

  Status ToInit(RnicQp qp, QpType type, const Conn& c = {}) {
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = c.access;
    a.qkey = c.qkey;
    uint32_t mask = kQpState | kQpPkeyIndex | kQpPort |
                    (type == QpType::kUd ? kQpQkey : kQpAccessFlags);
    return rnic_.ModifyQp(qp, a, mask);
  }

  Status ToRtr(RnicQp qp, QpType type, const Gid& sgid, const Gid& dgid,
               uint32_t dest_qpn, const Conn& c = {}) {
    QpAttr a;
    a.state = QpState::kRtr;
    a.av.sgid = sgid;
    a.av.dgid = dgid;
    a.path_mtu_bytes = 4096;
    a.dest_qpn = dest_qpn;
    a.min_rnr_timer = c.min_rnr_timer;
    a.max_dest_rd_atomic = 4;
    uint32_t mask = kQpState;
    if (type != QpType::kUd) {
      mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    }
    if (type == QpType::kRc) mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    return rnic_.ModifyQp(qp, a, mask);
  }

  Status ToRts(RnicQp qp, QpType type, const Conn& c = {}) {
    QpAttr a;
    a.state = QpState::kRts;
    a.timeout = c.timeout;
    a.retry_cnt = c.retry_cnt;
    a.rnr_retry = c.rnr_retry;
    a.max_rd_atomic = 4;
    uint32_t mask = kQpState | kQpSqPsn;
    if (type == QpType::kRc) {
      mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    }
    return rnic_.ModifyQp(qp, a, mask);
  }

  // RESET -> RTS for one side of a connection (or a UD QP: peer unused).
  void BringUp(RnicQp qp, QpType type, const Vm& self, const Vm& peer,
               uint32_t peer_qpn, const Conn& c = {}) {
    ASSERT_EQ(ToInit(qp, type, c), Status::kOk);
    ASSERT_EQ(ToRtr(qp, type, self.gid, peer.gid, peer_qpn, c), Status::kOk);
    ASSERT_EQ(ToRts(qp, type, c), Status::kOk);
  }

  // Creates and connects a QP pair between a_ and b_.
  void Connect(QpType type, const Conn& ca = {}, const Conn& cb = {},
               uint32_t depth = 64) {
    qa_ = MakeQp(a_, type, depth);
    qb_ = MakeQp(b_, type, depth);
    BringUp(qa_, type, a_, b_, qb_.qpn, ca);
    BringUp(qb_, type, b_, a_, qa_.qpn, cb);
  }

  // Runs Progress until it reports no work. Bounded: Progress also reports
  // work while a timer is pending, and the fake clock does not move here.
  int Drain() {
    int n = 0;
    while (rnic_.Progress() && n < 1000) ++n;
    return n;
  }

  std::vector<Completion> Poll(RnicCq cq) {
    std::vector<Completion> out(4096);
    int n = rnic_.PollCq(cq, out);
    out.resize(n > 0 ? n : 0);
    return out;
  }

  QpState StateOf(RnicQp qp) {
    auto a = rnic_.QueryQp(qp);
    EXPECT_TRUE(a.ok());
    return a.ok() ? a->state : QpState::kReset;
  }

  static SendWr Wr(WrOpcode op, uint64_t wr_id, const Vm& vm, uint64_t off,
                   uint32_t len, uint32_t flags = kSendSignaled) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.num_sge = 1;
    wr.sge[0] = Sge{vm.at(off), len, vm.mr.lkey};
    return wr;
  }

  static RecvWr Rwr(uint64_t wr_id, const Vm& vm, uint64_t off, uint32_t len) {
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.num_sge = 1;
    wr.sge[0] = Sge{vm.at(off), len, vm.mr.lkey};
    return wr;
  }

  Status Post(RnicQp qp, const SendWr& wr) {
    Status st = Status::kOk;
    int n = rnic_.PostSend(qp, std::span<const SendWr>(&wr, 1), &st);
    EXPECT_EQ(n, st == Status::kOk ? 1 : 0);
    return st;
  }

  Status PostR(RnicQp qp, const RecvWr& wr) {
    Status st = Status::kOk;
    int n = rnic_.PostRecv(qp, std::span<const RecvWr>(&wr, 1), &st);
    EXPECT_EQ(n, st == Status::kOk ? 1 : 0);
    return st;
  }

  uint64_t now_ = 1'000'000'000;
  RnicLimits limits_ = DefaultSoftRnicLimits();
  SoftRnic rnic_{limits_, [this] { return now_; }};
  Vm a_, b_;
  RnicQp qa_{}, qb_{};
};

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_SOFT_RNIC_SOFT_RNIC_TEST_UTIL_H_
