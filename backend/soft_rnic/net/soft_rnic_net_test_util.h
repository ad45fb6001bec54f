// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test fixture for SoftRnic on a fabric (docs/reliability.md §7.1): two
// SoftRnics ("hosts" A and B) on an InprocFabric, each with its own VM,
// each port behind a LosePackets that loses exactly the packets a test
// names; and a raw port (host 3) where a test sees or forges packets.
#ifndef VRDMA_BACKEND_SOFT_RNIC_NET_SOFT_RNIC_NET_TEST_UTIL_H_
#define VRDMA_BACKEND_SOFT_RNIC_NET_SOFT_RNIC_NET_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "backend/fabric/faulty_fabric.h"
#include "backend/fabric/inproc_fabric.h"
#include "backend/rnic/roce_grh.h"
#include "backend/soft_rnic/net/packet.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace vrdma::testing {

namespace net = soft::net;

// A port that loses the packets whose numbers (0, 1, ... in send order)
// are in `lose`: a loss exactly where a test wants it.
class LosePackets final : public fabric::Fabric {
 public:
  explicit LosePackets(fabric::Fabric* inner) : inner_(inner) {}
  Status AddGid(const Gid& gid) override { return inner_->AddGid(gid); }
  Status RemoveGid(const Gid& gid) override { return inner_->RemoveGid(gid); }
  void Send(std::span<const uint8_t> p, const Gid& dgid, uint64_t now) override {
    if (record != nullptr) record->emplace_back(p.begin(), p.end());
    if (!lose_all && lose.count(sent_++) == 0) inner_->Send(p, dgid, now);
  }
  int Poll(std::span<fabric::Datagram> out, uint64_t now) override {
    return inner_->Poll(out, now);
  }
  std::optional<uint64_t> NextEventNs() const override {
    return inner_->NextEventNs();
  }
  std::set<uint64_t> lose;
  bool lose_all = false;
  std::vector<std::vector<uint8_t>>* record = nullptr;  // a copy of each sent

 private:
  fabric::Fabric* inner_;
  uint64_t sent_ = 0;
};

inline Gid HostGid(uint8_t id) {
  return Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};
}

// One VM on host r: GID HostGid(id), a PD, two CQs of cqe entries, and a
// buffer of buf_size bytes (a pattern of id) registered with every access.
inline void MakeNetVm(SoftRnic& r, Vm* vm, uint8_t id, size_t buf_size, uint32_t cqe) {
  vm->gid = HostGid(id);
  ASSERT_EQ(r.AddGid(vm->gid), Status::kOk);
  vm->pd = *r.AllocPd();
  vm->scq = *r.CreateCq(cqe);
  vm->rcq = *r.CreateCq(cqe);
  vm->buf.assign(buf_size, 0);
  for (size_t i = 0; i < buf_size; ++i) {
    vm->buf[i] = static_cast<uint8_t>(i * 7 + id * 31 + i / 251);
  }
  vm->iova = uint64_t{id} << 32;
  auto mr = r.RegMr(vm->pd, vm->buf.data(), buf_size, vm->iova, kAllAccess);
  ASSERT_TRUE(mr.ok());
  vm->mr = *mr;
}

inline RnicQp MakeNetQp(SoftRnic& r, const Vm& vm, QpType type, const QpCaps& caps) {
  QpInit init;
  init.type = type;
  init.pd = vm.pd;
  init.send_cq = vm.scq;
  init.recv_cq = vm.rcq;
  init.caps = caps;
  auto qp = r.CreateQp(init);
  EXPECT_TRUE(qp.ok());
  return qp.ok() ? *qp : RnicQp{};
}

// RESET -> RTS at path MTU mtu; a connected QP's PSNs start at psn (both
// directions); c's timers and retries apply to RC.
inline void BringUpNetQp(SoftRnic& r, RnicQp qp, QpType type, const Gid& self,
                         const Gid& peer, uint32_t peer_qpn, uint32_t mtu,
                         uint32_t psn = 0, const Conn& c = {}) {
  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = kAllAccess;
  a.qkey = 0x1111;
  const bool ud = type == QpType::kUd;
  ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpPkeyIndex | kQpPort |
                                  (ud ? kQpQkey : kQpAccessFlags)),
            Status::kOk);
  a.state = QpState::kRtr;
  a.min_rnr_timer = c.min_rnr_timer;
  a.max_dest_rd_atomic = 4;
  a.av.sgid = self;
  a.av.dgid = peer;
  a.path_mtu_bytes = mtu;
  a.dest_qpn = peer_qpn;
  a.rq_psn = psn;
  const bool rc = type == QpType::kRc;
  ASSERT_EQ(r.ModifyQp(qp, a, kQpState |
                                  (ud ? 0u : kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn) |
                                  (rc ? kQpMaxDestRdAtomic | kQpMinRnrTimer : 0u)),
            Status::kOk);
  a.state = QpState::kRts;
  a.sq_psn = psn;
  a.retry_cnt = c.retry_cnt;
  a.rnr_retry = c.rnr_retry;
  a.timeout = c.timeout;
  a.max_rd_atomic = 4;
  ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpSqPsn |
                                  (rc ? kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                            kQpMaxQpRdAtomic
                                      : 0u)),
            Status::kOk);
}

// Posts one send WR, which the RNIC must take.
inline void PostOne(SoftRnic& r, RnicQp qp, const SendWr& wr) {
  Status st = Status::kOk;
  EXPECT_EQ(r.PostSend(qp, std::span(&wr, 1), &st), 1);
  EXPECT_EQ(st, Status::kOk);
}

class SoftRnicNetTest : public ::testing::Test {
 protected:
  static constexpr size_t kBufSize = 64 * 1024;
  static constexpr uint32_t kMtu = 1024;

  void SetUp() override {
    ASSERT_EQ(raw_->AddGid(HostGid(3)), Status::kOk);
    MakeVm(a_, &va_, 1);
    MakeVm(b_, &vb_, 2);
  }

  static void MakeVm(SoftRnic& r, Vm* vm, uint8_t id) {
    MakeNetVm(r, vm, id, kBufSize, 1024);
  }
  static RnicQp MakeQp(SoftRnic& r, const Vm& vm, QpType type) {
    return MakeNetQp(r, vm, type, QpCaps{256, 256, 8, 8, 64});
  }
  static void BringUp(SoftRnic& r, RnicQp qp, QpType type, const Gid& self,
                      const Gid& peer, uint32_t peer_qpn, uint32_t psn = 0,
                      const Conn& c = {}) {
    BringUpNetQp(r, qp, type, self, peer, peer_qpn, kMtu, psn, c);
  }

  // A UC pair between the VMs of host A and host B.
  void ConnectUc(uint32_t psn = 0) {
    qa_ = MakeQp(a_, va_, QpType::kUc);
    qb_ = MakeQp(b_, vb_, QpType::kUc);
    BringUp(a_, qa_, QpType::kUc, va_.gid, vb_.gid, qb_.qpn, psn);
    BringUp(b_, qb_, QpType::kUc, vb_.gid, va_.gid, qa_.qpn, psn);
  }

  // An RC pair between the VMs of host A and host B.
  void ConnectRc(uint32_t psn = 0, const Conn& ca = {}, const Conn& cb = {}) {
    qa_ = MakeQp(a_, va_, QpType::kRc);
    qb_ = MakeQp(b_, vb_, QpType::kRc);
    BringUp(a_, qa_, QpType::kRc, va_.gid, vb_.gid, qb_.qpn, psn, ca);
    BringUp(b_, qb_, QpType::kRc, vb_.gid, va_.gid, qa_.qpn, psn, cb);
  }

  // Runs both hosts for `turns` turns, the clock moving step_ns each.
  void Run(int turns, uint64_t step_ns) {
    for (int i = 0; i < turns; ++i) {
      a_.Progress();
      b_.Progress();
      now_ += step_ns;
    }
  }

  // Runs both hosts until neither has anything to do (the clock stands).
  void Pump() {
    for (int i = 0; i < 1000; ++i) {
      const bool a = a_.Progress();
      const bool b = b_.Progress();
      if (!a && !b) return;
    }
    ADD_FAILURE() << "the hosts never went idle";
  }

  static std::vector<Completion> Poll(SoftRnic& r, RnicCq cq) {
    std::vector<Completion> out(1024);
    const int n = r.PollCq(cq, out);
    out.resize(n > 0 ? n : 0);
    return out;
  }

  static void Post(SoftRnic& r, RnicQp qp, const SendWr& wr) { PostOne(r, qp, wr); }
  static void PostR(SoftRnic& r, RnicQp qp, const RecvWr& wr) {
    Status st = Status::kOk;
    EXPECT_EQ(r.PostRecv(qp, std::span(&wr, 1), &st), 1);
    EXPECT_EQ(st, Status::kOk);
  }
  static SendWr Wr(WrOpcode op, uint64_t wr_id, const Vm& vm, uint64_t off,
                   uint32_t len) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = kSendSignaled;
    wr.num_sge = len > 0 ? 1 : 0;
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

  // Every packet the raw port (host 3) has received, decoded, with its
  // payload.
  struct Raw {
    net::Header h;
    std::vector<uint8_t> payload;
  };
  std::vector<Raw> RawPackets() {
    std::vector<Raw> got;
    std::array<fabric::Datagram, 32> batch;
    int n;
    while ((n = raw_->Poll(batch, now_)) > 0) {
      for (int i = 0; i < n; ++i) {
        Raw r;
        EXPECT_EQ(net::Decode(batch[i].bytes(), &r.h), net::Check::kOk);
        r.payload.assign(batch[i].data + net::kHeaderBytes,
                         batch[i].data + batch[i].len);
        got.push_back(std::move(r));
      }
    }
    return got;
  }

  // Sends a hand-made packet from the raw port to host B.
  void Inject(const net::Header& h, std::span<const uint8_t> payload,
              const Gid& to) {
    std::vector<uint8_t> p(net::kHeaderBytes + payload.size());
    net::Header hh = h;
    hh.payload_len = static_cast<uint16_t>(payload.size());
    net::EncodeHeader(hh, p.data());
    if (!payload.empty()) {
      std::memcpy(p.data() + net::kHeaderBytes, payload.data(), payload.size());
    }
    raw_->Send(p, to, now_);
  }

  uint64_t now_ = 1'000'000'000;
  fabric::InprocFabric fabric_{fabric::InprocFabricOptions{.queue_packets = 4096}};
  fabric::Fabric* port_a_ = fabric_.AddPort();
  fabric::Fabric* port_b_ = fabric_.AddPort();
  fabric::Fabric* raw_ = fabric_.AddPort();
  LosePackets lossy_a_{port_a_};
  LosePackets lossy_b_{port_b_};
  RnicLimits limits_ = DefaultSoftRnicLimits();
  SoftRnic a_{limits_, [this] { return now_; }, &lossy_a_};
  SoftRnic b_{limits_, [this] { return now_; }, &lossy_b_};
  Vm va_, vb_;
  RnicQp qa_{}, qb_{};
};

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_SOFT_RNIC_NET_SOFT_RNIC_NET_TEST_UTIL_H_
