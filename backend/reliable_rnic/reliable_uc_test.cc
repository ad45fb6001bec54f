// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// uc mode for WRITE (docs/reliability.md §2-§4, §10 step 11): two
// ReliableRnics ("daemons" A and B), each over its own SoftRnic on an
// InprocFabric, each port behind a FaultyFabric (loss, reordering,
// duplication) and a Tap that holds or drops the packets a test names;
// their peer messages go through InprocPeerLink. A guest VM on each end
// has an RC QP towards the other's; both VMs are in uc mode, so the QPs
// are framed: WRITEs travel as chunks on the layer's UC data QPs and are
// acknowledged on its UD ACK QPs. A raw third port forges ACKs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "backend/fabric/faulty_fabric.h"
#include "backend/fabric/inproc_fabric.h"
#include "backend/reliable_rnic/inproc_peer_link.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "backend/soft_rnic/net/packet.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

using reliable::ConnState;
using reliable::WireCounter;
using Link = reliable::InprocPeerLinkT<ReliableRnic>;
namespace net = soft::net;

constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite |
                          kAccessRemoteRead | kAccessRemoteAtomic;

Gid HostGid(uint8_t id) {
  return Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};
}

// A port that holds or drops the packets `match` picks (hold: until
// Release), passing the rest on.
class Tap final : public fabric::Fabric {
 public:
  explicit Tap(fabric::Fabric* inner) : inner_(inner) {}
  Status AddGid(const Gid& gid) override { return inner_->AddGid(gid); }
  Status RemoveGid(const Gid& gid) override { return inner_->RemoveGid(gid); }
  void Send(std::span<const uint8_t> p, const Gid& dgid, uint64_t now) override {
    if (match && match(p, dgid)) {
      if (hold) held.push_back({std::vector<uint8_t>(p.begin(), p.end()), dgid});
      ++matched;
      return;
    }
    inner_->Send(p, dgid, now);
  }
  int Poll(std::span<fabric::Datagram> out, uint64_t now) override {
    return inner_->Poll(out, now);
  }
  std::optional<uint64_t> NextEventNs() const override {
    return inner_->NextEventNs();
  }
  // Sends held packet i now.
  void Release(size_t i, uint64_t now) {
    inner_->Send(held[i].bytes, held[i].dgid, now);
  }

  struct Held {
    std::vector<uint8_t> bytes;
    Gid dgid;
  };
  std::function<bool(std::span<const uint8_t>, const Gid&)> match;
  bool hold = false;  // false: matched packets are dropped
  std::vector<Held> held;
  uint64_t matched = 0;

 private:
  fabric::Fabric* inner_;
};

// The packet's header, or an all-zero one when it does not decode.
net::Header HeaderOf(std::span<const uint8_t> p) {
  net::Header h;
  if (net::Decode(p, &h) != net::Check::kOk) return net::Header{};
  return h;
}
bool IsUcWrite(std::span<const uint8_t> p) {
  const net::Header h = HeaderOf(p);
  return (h.opcode & net::kTransportMask) == net::kUc &&
         net::OpInfoOf(h.opcode).write;
}
bool IsUcSend(std::span<const uint8_t> p) {
  const net::Header h = HeaderOf(p);
  return (h.opcode & net::kTransportMask) == net::kUc &&
         net::OpInfoOf(h.opcode).send;
}

struct Vm {
  Gid gid{};
  RnicPd pd{};
  RnicCq scq{}, rcq{};
  std::vector<uint8_t> buf;
  uint64_t iova = 0;
  RnicMr mr{};
  uint64_t at(uint64_t off) const { return iova + off; }
};

// Connection attributes of a test's QPs.
struct QpConf {
  uint32_t mtu = 1024;
  uint8_t timeout = 18;  // 4.096 us << 18: ~1.07 s
  uint8_t retry_cnt = 7;
  uint32_t sq_depth = 256;
};

class ReliableUcTest : public ::testing::Test {
 protected:
  static constexpr size_t kBufSize = 8 << 20;
  static constexpr uint64_t kStepNs = 2'000;

  // Builds both daemons; fa and fb: the faults on what A and B send.
  void Build(const fabric::FaultConfig& fa = {}, const fabric::FaultConfig& fb = {},
             uint64_t seed = 1) {
    fabric_ = std::make_unique<fabric::InprocFabric>(fabric::InprocFabricOptions{
        .queue_packets = 16384, .latency_ns = 5'000});
    port_a_ = fabric_->AddPort();
    port_b_ = fabric_->AddPort();
    raw_ = fabric_->AddPort();
    ASSERT_EQ(raw_->AddGid(HostGid(3)), Status::kOk);
    faulty_a_ = std::make_unique<fabric::FaultyFabric>(port_a_, fa, seed, 8192);
    faulty_b_ = std::make_unique<fabric::FaultyFabric>(port_b_, fb, seed + 1, 8192);
    tap_a_ = std::make_unique<Tap>(faulty_a_.get());
    tap_b_ = std::make_unique<Tap>(faulty_b_.get());
    RnicLimits limits = DefaultSoftRnicLimits();
    soft_a_ = std::make_unique<SoftRnic>(limits, [this] { return now_; }, tap_a_.get());
    soft_b_ = std::make_unique<SoftRnic>(limits, [this] { return now_; }, tap_b_.get());
    ReliableRnicOptions o;
    o.clock = [this] { return now_; };
    o.ack.recvs = 512;
    o.daemon_id = 1;
    o.token_seed = 11;
    la_ = std::make_unique<ReliableRnic>(*soft_a_, o);
    o.daemon_id = 2;
    o.token_seed = 22;
    lb_ = std::make_unique<ReliableRnic>(*soft_b_, o);
    link_a_ = std::make_unique<Link>(1);
    link_b_ = std::make_unique<Link>(2);
    Link::Join(*link_a_, *link_b_);
    ASSERT_EQ(la_->AttachPeerLink(link_a_.get(), kDaemonA), Status::kOk);
    ASSERT_EQ(lb_->AttachPeerLink(link_b_.get(), kDaemonB), Status::kOk);
    MakeVm(*la_, &va_, 1);
    MakeVm(*lb_, &vb_, 2);
    link_a_->AddGid(va_.gid);
    link_b_->AddGid(vb_.gid);
  }

  void MakeVm(ReliableRnic& r, Vm* vm, uint8_t id) {
    vm->gid = HostGid(id);
    ASSERT_EQ(r.AddGid(vm->gid), Status::kOk);
    vm->pd = *r.AllocPd();
    vm->scq = *r.CreateCq(4096);
    vm->rcq = *r.CreateCq(4096);
    vm->buf.assign(kBufSize, 0);
    if (id == 1) {
      for (size_t i = 0; i < kBufSize; ++i) {
        vm->buf[i] = static_cast<uint8_t>(i * 7 + i / 4093 + 1);
      }
    }
    vm->iova = uint64_t{id} << 36;
    Result<RnicMr> mr = r.RegMr(vm->pd, vm->buf.data(), kBufSize, vm->iova, kAll);
    ASSERT_TRUE(mr.ok());
    vm->mr = *mr;
  }

  RnicQp MakeQp(ReliableRnic& r, const Vm& vm, const QpConf& c) {
    QpInit init;
    init.type = QpType::kRc;
    init.pd = vm.pd;
    init.send_cq = vm.scq;
    init.recv_cq = vm.rcq;
    init.caps = QpCaps{c.sq_depth, 64, 4, 4, 64, QpType::kRc};
    Result<RnicQp> qp = r.CreateQp(init);
    EXPECT_TRUE(qp.ok());
    return qp.ok() ? *qp : RnicQp{};
  }

  void BringUp(ReliableRnic& r, RnicQp qp, const Gid& self, const Gid& peer,
               uint32_t dest_qpn, const QpConf& c) {
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = kAll;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
              Status::kOk);
    a.state = QpState::kRtr;
    a.av.sgid = self;
    a.av.dgid = peer;
    a.path_mtu_bytes = c.mtu;
    a.dest_qpn = dest_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 4;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                                    kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
              Status::kOk);
    a.state = QpState::kRts;
    a.sq_psn = 0;
    a.timeout = c.timeout;
    a.retry_cnt = c.retry_cnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                    kQpRnrRetry | kQpMaxQpRdAtomic),
              Status::kOk);
  }

  // Both VMs in `mode_b` (A always uc), an RC QP each towards the other,
  // and the peer messages exchanged.
  void Connect(const QpConf& c = {}, ReliabilityMode mode_b = ReliabilityMode::kUc) {
    la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kUc);
    lb_->SetMode(std::span(&vb_.gid, 1), mode_b);
    qa_ = MakeQp(*la_, va_, c);
    qb_ = MakeQp(*lb_, vb_, c);
    BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
    BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
    Run(20);
  }

  void Turn() {
    la_->Progress();
    lb_->Progress();
    link_a_->Deliver(*la_);
    link_b_->Deliver(*lb_);
    Collect();
    now_ += kStepNs;
  }
  void Run(int turns) {
    for (int i = 0; i < turns; ++i) Turn();
  }
  // Runs until done() or max_turns; true when done() held.
  bool RunUntil(const std::function<bool()>& done, int max_turns) {
    for (int i = 0; i < max_turns; ++i) {
      if (done()) return true;
      Turn();
    }
    return done();
  }

  void Collect() {
    std::array<Completion, 64> out;
    int n;
    while ((n = la_->PollCq(va_.scq, out)) > 0) {
      got_.insert(got_.end(), out.begin(), out.begin() + n);
    }
    while ((n = lb_->PollCq(vb_.scq, out)) > 0) {
      got_b_.insert(got_b_.end(), out.begin(), out.begin() + n);
    }
  }

  // A WRITE of len bytes from A's buffer at src to B's at dst.
  SendWr Write(uint64_t wr_id, uint64_t src, uint64_t dst, uint32_t len) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = WrOpcode::kRdmaWrite;
    w.send_flags = kSendSignaled;
    w.num_sge = len > 0 ? 1 : 0;
    w.sge[0] = Sge{va_.at(src), len, va_.mr.lkey};
    w.remote_addr = vb_.at(dst);
    w.rkey = vb_.mr.rkey;
    return w;
  }
  void Post(const SendWr& w) {
    Status st = Status::kOk;
    ASSERT_EQ(la_->PostSend(qa_, std::span(&w, 1), &st), 1) << StatusName(st);
  }

  struct Planned {
    uint64_t wr_id, src, dst;
    uint32_t len;
  };
  // Posts every write of `plan` (in order), runs until each completed,
  // and checks: one completion per WR, in post order, success, and B's
  // bytes equal A's.
  void PostAndVerify(const std::vector<Planned>& plan, int max_turns) {
    for (const Planned& p : plan) Post(Write(p.wr_id, p.src, p.dst, p.len));
    const size_t before = got_.size();
    ASSERT_TRUE(RunUntil([&] { return got_.size() >= before + plan.size(); },
                         max_turns))
        << "completed " << got_.size() - before << " of " << plan.size();
    Run(200);  // nothing more may come
    ASSERT_EQ(got_.size(), before + plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      const Completion& c = got_[before + i];
      EXPECT_EQ(c.wr_id, plan[i].wr_id) << i;
      EXPECT_EQ(c.status, WcStatus::kSuccess) << i;
      EXPECT_EQ(c.opcode, WcOpcode::kRdmaWrite) << i;
      EXPECT_EQ(c.qpn, qa_.qpn) << i;
      EXPECT_EQ(0, std::memcmp(&vb_.buf[plan[i].dst], &va_.buf[plan[i].src],
                               plan[i].len))
          << "WR " << plan[i].wr_id << " of " << plan[i].len << " bytes";
    }
  }

  // A mixed plan of n WRITEs of sizes up to 256 KiB, each to its own place.
  static std::vector<Planned> MixedPlan(int n, uint64_t seed) {
    static constexpr uint32_t kSizes[] = {0,     1,     100,   4095,  4096,
                                          4097,  8197,  65536, 100000, 262144};
    std::mt19937_64 rng(seed);
    std::vector<Planned> plan;
    uint64_t dst = 0;
    for (int i = 0; i < n; ++i) {
      const uint32_t len = kSizes[rng() % std::size(kSizes)];
      const uint64_t src = (rng() % 1000) * 7;
      plan.push_back({100u + i, src, dst, len});
      dst += (len + 4095) / 4096 * 4096 + 4096;
    }
    return plan;
  }

  const Gid kDaemonA = HostGid(101);
  const Gid kDaemonB = HostGid(102);
  uint64_t now_ = 1'000'000'000;
  std::unique_ptr<fabric::InprocFabric> fabric_;
  fabric::Fabric* port_a_ = nullptr;
  fabric::Fabric* port_b_ = nullptr;
  fabric::Fabric* raw_ = nullptr;
  std::unique_ptr<fabric::FaultyFabric> faulty_a_, faulty_b_;
  std::unique_ptr<Tap> tap_a_, tap_b_;
  std::unique_ptr<SoftRnic> soft_a_, soft_b_;
  std::unique_ptr<ReliableRnic> la_, lb_;
  std::unique_ptr<Link> link_a_, link_b_;
  Vm va_, vb_;
  RnicQp qa_{}, qb_{};
  std::vector<Completion> got_, got_b_;
};

TEST_F(ReliableUcTest, BothEndsConnectInUcMode) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  reliable::Connection* kb = lb_->FindConnection(qb_.qpn);
  ASSERT_NE(ka, nullptr);
  ASSERT_NE(kb, nullptr);
  EXPECT_EQ(ka->state(), ConnState::kUc);
  EXPECT_EQ(kb->state(), ConnState::kUc);
  // Each learnt the other's token and data QP.
  EXPECT_EQ(ka->peer_token(), kb->my_token());
  EXPECT_EQ(kb->peer_token(), ka->my_token());
  EXPECT_NE(ka->data_qpn(), qa_.qpn);
  EXPECT_EQ(la_->counters().connects_uc, 1u);
  EXPECT_EQ(lb_->counters().connects_uc, 1u);
  EXPECT_EQ(la_->counters().peer[peer::PeerCheck::kOk] + 0, link_b_->sent);
}

TEST_F(ReliableUcTest, WriteOfEverySizeClass) {
  Build();
  Connect();
  const uint32_t sizes[] = {0, 1, 4095, 4096, 4097, 64 << 10, 1 << 20};
  std::vector<Planned> plan;
  uint64_t dst = 4096;
  for (uint32_t i = 0; i < std::size(sizes); ++i) {
    plan.push_back({i + 1, 3 + i * 1000, dst, sizes[i]});
    dst += sizes[i] + 8192;
  }
  PostAndVerify(plan, 20000);
  // Lossless: nothing sent twice; a chunk per 64 KiB at most.
  const reliable::ReliabilityCounters& a = la_->counters();
  const reliable::ReliabilityCounters& b = lb_->counters();
  EXPECT_EQ(a.retx_sent, 0u);
  EXPECT_EQ(a.messages_completed, plan.size());
  EXPECT_EQ(b.messages_delivered, plan.size());
  EXPECT_GE(a.chunks_sent, 1u + 1 + 1 + 1 + 1 + 1 + 16);
  EXPECT_GT(a.tail_waits, 0u);  // 1 MiB: its L chunk waited for the others
  EXPECT_GT(a.acks_received, 0u);
  EXPECT_GT(a.rtt_samples, 0u);
  for (size_t i = 0; i < reliable::kWireCounterCount; ++i) {
    EXPECT_EQ(a.wire[i], 0u) << reliable::kWireCounters[i].name;
    EXPECT_EQ(b.wire[i], 0u) << reliable::kWireCounters[i].name;
  }
  // Nothing reached the guest's lower QPs' CQs but the layer's completions.
  EXPECT_TRUE(got_b_.empty());
}

TEST_F(ReliableUcTest, InlineAndUnsignaledWrites) {
  Build();
  Connect();
  SendWr w = Write(1, 0, 0, 0);
  uint8_t bytes[40];
  for (int i = 0; i < 40; ++i) bytes[i] = static_cast<uint8_t>(0xa0 + i);
  w.send_flags = kSendInline;  // unsignaled
  w.inline_data = bytes;
  w.inline_len = 40;
  w.num_sge = 0;
  Post(w);
  SendWr w2 = Write(2, 100, 4096, 5000);
  Post(w2);
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 5000));
  Run(100);
  ASSERT_EQ(got_.size(), 1u);  // only the signaled one
  EXPECT_EQ(got_[0].wr_id, 2u);
  EXPECT_EQ(0, std::memcmp(vb_.buf.data(), bytes, 40));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[4096], &va_.buf[100], 5000));
}

TEST_F(ReliableUcTest, NativeWhenThePeersVmIsNative) {
  Build();
  Connect({}, ReliabilityMode::kNative);
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  ASSERT_NE(ka, nullptr);
  EXPECT_EQ(ka->state(), ConnState::kNative);
  EXPECT_EQ(lb_->FindConnection(qb_.qpn), nullptr);
  EXPECT_EQ(la_->counters().connects_native, 1u);
  PostAndVerify({{1, 0, 0, 10000}, {2, 50, 20000, 0}, {3, 7, 40000, 70000}}, 5000);
  EXPECT_EQ(la_->counters().chunks_sent, 0u);  // the lower RC QP carried them
}

TEST_F(ReliableUcTest, WritesPostedBeforeTheConnectWaitForIt) {
  Build();
  la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kUc);
  lb_->SetMode(std::span(&vb_.gid, 1), ReliabilityMode::kUc);
  const QpConf c;
  qa_ = MakeQp(*la_, va_, c);
  qb_ = MakeQp(*lb_, vb_, c);
  BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
  // B is not in RTR yet: A's CONNECT finds nothing there, and is repeated.
  Post(Write(1, 0, 0, 9000));
  Run(10);
  EXPECT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kConnecting);
  BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
  Post(Write(2, 1, 16384, 3));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 5000));
  Run(100);
  ASSERT_EQ(got_.size(), 2u);
  EXPECT_EQ(got_[0].wr_id, 1u);
  EXPECT_EQ(got_[1].wr_id, 2u);
  EXPECT_EQ(la_->FindConnection(qa_.qpn)->state(), ConnState::kUc);
  EXPECT_EQ(0, std::memcmp(&vb_.buf[0], &va_.buf[0], 9000));
  EXPECT_EQ(0, std::memcmp(&vb_.buf[16384], &va_.buf[1], 3));
}

// ---- Faults -------------------------------------------------------------------

TEST_F(ReliableUcTest, WritesSurviveOnePercentLoss) {
  fabric::FaultConfig f;
  f.loss = 0.01;
  Build(f, f, 7);
  Connect();
  PostAndVerify(MixedPlan(40, 1), 400000);
  const auto& a = la_->counters();
  EXPECT_GT(faulty_a_->fault_stats().lost_random, 0u);
  EXPECT_GT(a.retx_sent, 0u);
  EXPECT_GT(a.lost_rto + a.lost_rack, 0u);
  EXPECT_EQ(a.messages_completed, 40u);
  EXPECT_EQ(lb_->counters().messages_delivered, 40u);
}

TEST_F(ReliableUcTest, WritesSurviveTenPercentLoss) {
  fabric::FaultConfig f;
  f.loss = 0.10;
  Build(f, f, 9);
  Connect();
  PostAndVerify(MixedPlan(30, 2), 2000000);
  const auto& a = la_->counters();
  EXPECT_GT(a.retx_sent, 10u);
  EXPECT_GT(lb_->counters().retx_copied, 0u);
  EXPECT_EQ(a.messages_completed, 30u);
}

TEST_F(ReliableUcTest, WritesSurviveReorderingAndDuplication) {
  fabric::FaultConfig f;
  // A packet held back 30 us arrives after its message's later packets:
  // the lower UC responder drops that message whole. (No jitter: at 1 KiB
  // packets that leave together it would reorder nearly every message.)
  f.p_reorder = 0.01;
  f.reorder_delay_ns = 30'000;
  f.p_dup = 0.05;
  Build(f, f, 5);
  Connect();
  PostAndVerify(MixedPlan(40, 3), 400000);
  EXPECT_GT(faulty_a_->fault_stats().duplicated, 0u);
  EXPECT_GT(faulty_a_->fault_stats().reordered, 0u);
  EXPECT_EQ(lb_->counters().messages_delivered, 40u);
  // Duplicates reach the layer and are acknowledged again, not placed.
  EXPECT_GT(lb_->counters()[WireCounter::kRxDuplicate] +
                lb_->counters()[WireCounter::kRxAfterDelivery],
            0u);
  // A message dropped whole by the lower (a packet held back) is found
  // lost by a later ACK (RACK) and sent again.
  EXPECT_GT(la_->counters().lost_rack, 0u);
}

TEST_F(ReliableUcTest, WritesSurviveLossReorderingAndDuplicationTogether) {
  fabric::FaultConfig f;
  f.loss = 0.02;
  f.p_reorder = 0.02;
  f.reorder_delay_ns = 20'000;
  f.p_dup = 0.02;
  Build(f, f, 13);
  Connect();
  PostAndVerify(MixedPlan(60, 4), 800000);
  EXPECT_GT(la_->counters().retx_sent, 0u);
}

// A unit sent again arrives after its message was delivered (the original
// chunk was only late): it is not copied, so the bytes the receiving
// application wrote after delivery stay.
TEST_F(ReliableUcTest, LateRetransmissionNeverLandsAfterDelivery) {
  Build();
  QpConf c;
  c.mtu = 4096;  // one packet per chunk of a unit
  Connect(c);
  // Every data packet A sends is held.
  tap_a_->match = [](std::span<const uint8_t> p, const Gid&) {
    return IsUcWrite(p) || IsUcSend(p);
  };
  tap_a_->hold = true;
  Post(Write(1, 0, 0, 4096));
  ASSERT_TRUE(RunUntil([&] { return la_->counters().retx_sent >= 1; }, 5000));
  Run(5);  // the lower sends what the layer posted
  ASSERT_EQ(la_->counters().retx_sent, 1u);
  ASSERT_EQ(tap_a_->held.size(), 3u);  // the chunk, the WRITE_RETX's 2 packets
  ASSERT_TRUE(IsUcWrite(tap_a_->held[0].bytes));
  tap_a_->match = nullptr;
  // The original arrives: delivered, acknowledged, completed.
  tap_a_->Release(0, now_);
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 2000));
  EXPECT_EQ(got_[0].status, WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(vb_.buf.data(), va_.buf.data(), 4096));
  EXPECT_EQ(lb_->counters().messages_delivered, 1u);
  // B's application owns the bytes again and writes them.
  std::memset(vb_.buf.data(), 0xee, 4096);
  // The late WRITE_RETX arrives: counted, acknowledged again, not copied.
  tap_a_->Release(1, now_);
  tap_a_->Release(2, now_);
  Run(500);
  EXPECT_EQ(lb_->counters()[WireCounter::kRxAfterDelivery], 1u);
  EXPECT_EQ(lb_->counters().retx_copied, 0u);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(vb_.buf[i], 0xee) << i;
  EXPECT_EQ(got_.size(), 1u);  // no CQE twice
}

// A WRITE_RETX copies a unit only while its message is not delivered: a
// lost chunk is completed by its retransmitted units, the tail unit last.
TEST_F(ReliableUcTest, LostChunkIsCompletedByRetransmittedUnits) {
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  // A's first chunk (64 KiB, 16 packets) is lost whole.
  bool lost = false;
  tap_a_->match = [&](std::span<const uint8_t> p, const Gid&) {
    if (lost || !IsUcWrite(p)) return false;
    if (net::OpInfoOf(HeaderOf(p).opcode).last) lost = true;
    return true;
  };
  PostAndVerify({{1, 0, 0, 64 << 10}}, 20000);
  EXPECT_EQ(la_->counters().retx_sent, 16u);
  EXPECT_EQ(lb_->counters().retx_copied, 16u);
  EXPECT_EQ(la_->counters().lost_rto, 1u);
}

TEST_F(ReliableUcTest, WithheldAcksFailTheWrRetryExceeded) {
  Build();
  QpConf c;
  c.timeout = 8;    // 4.096 us << 8 = 1.05 ms
  c.retry_cnt = 2;  // budget: 3 x 1.05 ms
  Connect(c);
  // B's daemon sends no ACK to A.
  tap_b_->match = [this](std::span<const uint8_t>, const Gid& dgid) {
    return dgid == kDaemonA;
  };
  const uint64_t t0 = now_;
  Post(Write(1, 0, 0, 20000));
  Post(Write(2, 0, 65536, 100));
  ASSERT_TRUE(RunUntil([&] { return got_.size() >= 2; }, 20000));
  EXPECT_EQ(got_[0].wr_id, 1u);
  EXPECT_EQ(got_[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(got_[1].wr_id, 2u);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
  const uint64_t budget = 3 * (uint64_t{4096} << 8);
  EXPECT_GE(now_ - t0, budget);
  EXPECT_LT(now_ - t0, budget + 2'000'000);
  EXPECT_EQ(la_->counters().retry_exceeded, 1u);
  EXPECT_GT(la_->counters().retx_sent, 0u);
  EXPECT_GT(tap_b_->matched, 0u);
  // Later WRs are flushed, once each.
  Post(Write(3, 0, 0, 10));
  Run(50);
  ASSERT_EQ(got_.size(), 3u);
  EXPECT_EQ(got_[2].status, WcStatus::kWrFlushErr);
}

TEST_F(ReliableUcTest, RemoteAccessViolationIsNakedRemAccessErr) {
  Build();
  QpConf c;
  c.mtu = 4096;
  Connect(c);
  SendWr w = Write(1, 0, 0, 5000);
  w.rkey = vb_.mr.rkey + 0x1000;  // no such key at B: the chunk is dropped
  Post(w);
  ASSERT_TRUE(RunUntil([&] { return !got_.empty(); }, 20000));
  EXPECT_EQ(got_[0].status, WcStatus::kRemAccessErr);
  EXPECT_GE(lb_->counters()[WireCounter::kRxAccessNak], 1u);
  EXPECT_GE(lb_->counters().naks_sent, 1u);
}

// ACKs from a hostile peer (or anyone who forges the peer's ACK QP): each
// bad one is counted and dropped; the QP's data still completes right.
TEST_F(ReliableUcTest, HostileAcksAreCountedAndDropped) {
  Build();
  Connect();
  reliable::Connection* ka = la_->FindConnection(qa_.qpn);
  ASSERT_NE(ka, nullptr);
  const uint32_t a_ack_qpn = la_->ack_channel()->qpn();
  const uint32_t b_ack_qpn = lb_->ack_channel()->qpn();
  const uint32_t qkey = la_->ack_channel()->qkey();
  auto inject = [&](std::span<const uint8_t> payload, uint32_t src_qpn) {
    net::Header h;
    h.opcode = net::kUd | net::kSendOnly;
    h.dest_qpn = a_ack_qpn;
    h.src_qpn = src_qpn;
    h.qkey = qkey;
    h.hop_limit = 64;
    h.dgid = kDaemonA;
    h.sgid = kDaemonB;  // forged: B's daemon GID
    h.payload_len = static_cast<uint16_t>(payload.size());
    std::vector<uint8_t> p(net::kHeaderBytes + payload.size());
    net::EncodeHeader(h, p.data());
    std::memcpy(p.data() + net::kHeaderBytes, payload.data(), payload.size());
    raw_->Send(p, kDaemonA, now_);
  };
  auto ack = [&](const reliable::Ack& a) {
    std::array<uint8_t, reliable::kAckMaxSize> buf{};
    const size_t n = reliable::EncodeAck(a, buf);
    return std::vector<uint8_t>(buf.begin(), buf.begin() + n);
  };
  reliable::Ack good;
  good.dst_vqpn = qa_.qpn;
  good.conn_token = ka->my_token();
  reliable::Ack stale = good;
  stale.conn_token ^= 0x5a5a;
  reliable::Ack unknown = good;
  unknown.dst_vqpn = 0x123456;
  reliable::Ack bad_mid = good;
  bad_mid.deliv_mid = 1000;
  reliable::Ack bad_entry = good;
  bad_entry.n = 1;
  bad_entry.entries[0] = reliable::ReliableNumber(5, 0);  // never sent
  const auto counts = [&] { return la_->counters(); };
  const auto before = counts();
  inject(ack(stale), b_ack_qpn);
  inject(ack(unknown), b_ack_qpn);
  inject(ack(bad_mid), b_ack_qpn);
  inject(ack(bad_entry), b_ack_qpn);
  inject(ack(good), 77);  // not the peer's ACK QP
  std::vector<uint8_t> shortened = ack(good);
  shortened.resize(40);
  inject(shortened, b_ack_qpn);
  Run(20);
  const auto after = counts();
  const auto delta = [&](WireCounter c) { return after[c] - before[c]; };
  EXPECT_EQ(delta(WireCounter::kAckStaleToken), 1u);
  EXPECT_EQ(delta(WireCounter::kAckUnknownQp), 2u);
  EXPECT_EQ(delta(WireCounter::kAckBadMid), 1u);
  EXPECT_EQ(delta(WireCounter::kAckUnknownNumber), 1u);
  EXPECT_EQ(delta(WireCounter::kAckMalformed), 1u);
  EXPECT_EQ(after.acks_received - before.acks_received, 1u);  // bad_entry's
  EXPECT_TRUE(got_.empty());
  PostAndVerify({{1, 0, 0, 70000}, {2, 9, 90000, 1}}, 20000);
}

TEST_F(ReliableUcTest, GuestErrFlushesEveryWrOnce) {
  Build();
  Connect();
  // Nothing A sends arrives: the WRs stay in flight.
  tap_a_->match = [](std::span<const uint8_t> p, const Gid&) { return IsUcWrite(p); };
  Post(Write(1, 0, 0, 100));
  Post(Write(2, 0, 8192, 100));
  Run(10);
  QpAttr a;
  a.state = QpState::kErr;
  ASSERT_EQ(la_->ModifyQp(qa_, a, kQpState), Status::kOk);
  Run(10);
  ASSERT_EQ(got_.size(), 2u);
  EXPECT_EQ(got_[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(got_[1].status, WcStatus::kWrFlushErr);
}

TEST_F(ReliableUcTest, DestroyLeavesNothingOnTheLower) {
  Build();
  Run(2);  // HELLOs: each layer has an AH for the other's ACK QP
  const SoftRnicCounts empty_a = soft_a_->ObjectCounts();
  Connect();
  PostAndVerify({{1, 0, 0, 5000}}, 5000);
  ASSERT_EQ(la_->DestroyQp(qa_), Status::kOk);
  ASSERT_EQ(lb_->DestroyQp(qb_), Status::kOk);
  EXPECT_EQ(la_->FindConnection(qa_.qpn), nullptr);
  EXPECT_EQ(soft_a_->ObjectCounts(), empty_a);
}

}  // namespace
}  // namespace vrdma
