// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The fixture of ReliableUcTest (reliable_uc_test.cc) and
// ReliableUcAllocTest (reliable_uc_alloc_test.cc): two ReliableRnics
// ("daemons" A and B), each over its own SoftRnic on an InprocFabric, each
// port behind a FaultyFabric (loss, reordering, duplication) and a Tap
// that holds or drops the packets a test names; their peer messages go
// through InprocPeerLink. A guest VM on each end has an RC QP towards the
// other's; both VMs are in uc mode, so the QPs are framed. A raw third
// port forges packets.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_UC_TEST_UTIL_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_UC_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "backend/fabric/faulty_fabric.h"
#include "backend/fabric/inproc_fabric.h"
#include "backend/reliable_rnic/inproc_peer_link.h"
#include "backend/reliable_rnic/rc_backup.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "backend/soft_rnic/net/packet.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma::testing {

using reliable::ConnState;
using reliable::WireCounter;
using Link = reliable::InprocPeerLinkT<ReliableRnic>;
namespace net = soft::net;

constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite |
                          kAccessRemoteRead | kAccessRemoteAtomic;

inline Gid HostGid(uint8_t id) {
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
  // Matches every packet to gid (a daemon's: its ACKs, the peer's chunks).
  void MatchTo(const Gid& gid) {
    match = [gid](std::span<const uint8_t>, const Gid& dgid) { return dgid == gid; };
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
inline net::Header HeaderOf(std::span<const uint8_t> p) {
  net::Header h;
  if (net::Decode(p, &h) != net::Check::kOk) return net::Header{};
  return h;
}
inline bool IsUcWrite(std::span<const uint8_t> p) {
  const net::Header h = HeaderOf(p);
  return (h.opcode & net::kTransportMask) == net::kUc &&
         net::OpInfoOf(h.opcode).write;
}
// A UD packet: here, the layer's ACKs (its ACK QP is its only UD QP).
inline bool IsUd(std::span<const uint8_t> p) {
  return (HeaderOf(p).opcode & net::kTransportMask) == net::kUd;
}
inline bool IsUcSend(std::span<const uint8_t> p) {
  const net::Header h = HeaderOf(p);
  return (h.opcode & net::kTransportMask) == net::kUc &&
         net::OpInfoOf(h.opcode).send;
}

// Random loss, reordering (by 20 us) and duplication, each a probability
// per packet, on what one end sends.
inline fabric::FaultConfig Faults(double loss, double reorder, double dup) {
  fabric::FaultConfig f;
  f.loss = loss;
  f.p_reorder = reorder;
  f.reorder_delay_ns = 20'000;
  f.p_dup = dup;
  return f;
}

struct UcVm {
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
  uint8_t rnr_retry = 7;       // the sender's (7: forever)
  uint8_t min_rnr_timer = 12;  // the receiver's (IB encoded: 0.64 ms)
  uint8_t max_rd_atomic = 4;       // READs and atomics a QP has in flight
  uint8_t max_dest_rd_atomic = 4;  // ... and answers at once
};

// How ReliableUcTest::Connect brings the two QPs up, A's first: at_rtr_a
// runs while A's is in RTR; turns_before_b turns run between A's RTS and
// B's QP; the peer messages get settle_turns turns at the end (0: the
// CONNECTs are still unanswered).
struct ConnectSteps {
  std::function<void()> at_rtr_a;
  int turns_before_b = 0;
  int settle_turns = 20;
};

class ReliableUcTest : public ::testing::Test {
 protected:
  // Every entry point woke the connection it gave work, and no sleeping
  // connection had work before its time (§2.1 "Turns"): the sweep, every
  // turn here, found none it had to pump.
  void TearDown() override {
    for (ReliableRnic* l : {la_.get(), lb_.get()}) {
      if (l == nullptr) continue;
      EXPECT_EQ(l->own_counters().missed_wakes, 0u);
      EXPECT_EQ(l->own_counters().missed_deadlines, 0u);
    }
  }

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
    o.rc_reset_delay_ns = rc_reset_delay_ns_;
    o.connection.receiver.packet_lifetime_ns = packet_lifetime_ns_;
    // Every turn by default: a missed wake or deadline is counted at once
    // (and no connection sleeps through a turn).
    o.idle_sweep_ns = idle_sweep_ns_;
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

  void MakeVm(ReliableRnic& r, UcVm* vm, uint8_t id) {
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

  RnicQp MakeQp(ReliableRnic& r, const UcVm& vm, const QpConf& c) {
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

  // at_rtr: called while the QP is in RTR, before its RTS.
  void BringUp(ReliableRnic& r, RnicQp qp, const Gid& self, const Gid& peer,
               uint32_t dest_qpn, const QpConf& c,
               const std::function<void()>& at_rtr = nullptr) {
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
    a.max_dest_rd_atomic = c.max_dest_rd_atomic;
    a.min_rnr_timer = c.min_rnr_timer;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                                    kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
              Status::kOk);
    if (at_rtr) at_rtr();
    a.state = QpState::kRts;
    a.sq_psn = 0;
    a.timeout = c.timeout;
    a.retry_cnt = c.retry_cnt;
    a.rnr_retry = c.rnr_retry;
    a.max_rd_atomic = c.max_rd_atomic;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                    kQpRnrRetry | kQpMaxQpRdAtomic),
              Status::kOk);
  }

  // A's VM in mode_a, B's in mode_b, an RC QP each towards the other, and
  // the peer messages exchanged.
  void Connect(const QpConf& c = {}, ReliabilityMode mode_b = ReliabilityMode::kUc,
               ReliabilityMode mode_a = ReliabilityMode::kUc,
               const ConnectSteps& steps = {}) {
    la_->SetMode(std::span(&va_.gid, 1), mode_a);
    lb_->SetMode(std::span(&vb_.gid, 1), mode_b);
    qa_ = MakeQp(*la_, va_, c);
    qb_ = MakeQp(*lb_, vb_, c);
    BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c, steps.at_rtr_a);
    Run(steps.turns_before_b);
    BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
    Run(steps.settle_turns);
  }

  void Turn() {
    const bool busy_a = la_->Progress();
    const bool busy_b = lb_->Progress();
    const int delivered = link_a_->Deliver(*la_) + link_b_->Deliver(*lb_);
    if (collect_) Collect();
    control_tick_();
    now_ += kStepNs;
    if (sleep_when_idle_ && !busy_a && !busy_b && delivered == 0) SleepUntilWork();
  }
  // As a data path whose layers said nothing is due at once: the clock
  // jumps to the earliest of their timers (NextTimedWorkNs) and of the
  // packets the fabric holds, as the engine's loop sleeps until its
  // deadline or an fd (docs/reliability.md §2.1 "Turns").
  void SleepUntilWork() {
    uint64_t next = std::min(la_->NextTimedWorkNs(), lb_->NextTimedWorkNs());
    for (const Tap* t : {tap_a_.get(), tap_b_.get()}) {
      if (std::optional<uint64_t> e = t->NextEventNs()) next = std::min(next, *e);
    }
    for (const SoftRnic* r : {soft_a_.get(), soft_b_.get()}) {
      if (std::optional<uint64_t> e = r->NextTimerNs()) next = std::min(next, *e);
    }
    if (next == UINT64_MAX || next <= now_) return;
    now_ = next;
    ++sleeps_;
  }
  // The daemon's tick at every turn (its control calls between turns).
  // Connects with chunks of one packet (MTU 4096) and holds every data
  // packet A sends while a one-unit WRITE (wr_id 1, A's byte 0 to B's 0)
  // goes and is found lost: held then are its chunk [0] and its
  // WRITE_RETX's two packets [1] [2]. A's later packets pass.
  void HoldAWriteAndItsRetransmission(QpConf c = {}) {
    c.mtu = 4096;
    Connect(c);
    tap_a_->match = [](std::span<const uint8_t> p, const Gid&) {
      return IsUcWrite(p) || IsUcSend(p);
    };
    tap_a_->hold = true;
    Post(Write(1, 0, 0, 4096));
    ASSERT_TRUE(RunUntil([&] { return la_->counters().retx_sent >= 1; }, 5000));
    Run(5);  // the lower sends what the layer posted
    ASSERT_EQ(la_->counters().retx_sent, 1u);
    ASSERT_EQ(tap_a_->held.size(), 3u);
    ASSERT_TRUE(IsUcWrite(tap_a_->held[0].bytes));
    tap_a_->match = nullptr;
  }

  void RunDueAsks() {
    la_->RunDueAsks();
    lb_->RunDueAsks();
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

  // Sends one hand-made packet from the raw port: its header h (payload
  // length filled in) and payload.
  void Inject(net::Header h, std::span<const uint8_t> payload) {
    h.hop_limit = 64;
    h.payload_len = static_cast<uint16_t>(payload.size());
    std::vector<uint8_t> bytes(net::kHeaderBytes + payload.size());
    net::EncodeHeader(h, bytes.data());
    if (!payload.empty()) {
      std::memcpy(bytes.data() + net::kHeaderBytes, payload.data(), payload.size());
    }
    raw_->Send(bytes, h.dgid, now_);
  }

  // false: Turn polls no CQ, as the engine polls one only while it is
  // owed a guest completion there.
  bool collect_ = true;
  // What Turn runs as the daemon's tick: the layers' due asks (a test that
  // counts the data path's allocations runs them uncounted).
  std::function<void()> control_tick_ = [this] { RunDueAsks(); };
  void Collect() {
    std::array<Completion, 64> out;
    int n;
    while ((n = la_->PollCq(va_.scq, out)) > 0) {
      got_.insert(got_.end(), out.begin(), out.begin() + n);
    }
    while ((n = lb_->PollCq(vb_.scq, out)) > 0) {
      got_b_.insert(got_b_.end(), out.begin(), out.begin() + n);
    }
    while ((n = lb_->PollCq(vb_.rcq, out)) > 0) {
      recv_b_.insert(recv_b_.end(), out.begin(), out.begin() + n);
    }
    while ((n = la_->PollCq(va_.rcq, out)) > 0) {
      recv_a_.insert(recv_a_.end(), out.begin(), out.begin() + n);
    }
  }

  // A receive on B's QP of nsge SGEs of sge_len bytes each, from B's
  // buffer at off (contiguous).
  void PostRecvB(uint64_t wr_id, uint64_t off, uint32_t sge_len, int nsge = 1) {
    RecvWr r;
    r.wr_id = wr_id;
    r.num_sge = static_cast<uint8_t>(nsge);
    for (int i = 0; i < nsge; ++i) {
      r.sge[i] = Sge{vb_.at(off + uint64_t{sge_len} * i), sge_len, vb_.mr.lkey};
    }
    Status st = Status::kOk;
    ASSERT_EQ(lb_->PostRecv(qb_, std::span(&r, 1), &st), 1) << StatusName(st);
  }
  // A SEND (imm: SEND_WITH_IMM) of len bytes from A's buffer at src.
  SendWr Send(uint64_t wr_id, uint64_t src, uint32_t len,
              std::optional<uint32_t> imm = std::nullopt) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = imm ? WrOpcode::kSendWithImm : WrOpcode::kSend;
    w.imm_data = imm.value_or(0);
    w.send_flags = kSendSignaled;
    w.num_sge = len > 0 ? 1 : 0;
    w.sge[0] = Sge{va_.at(src), len, va_.mr.lkey};
    return w;
  }

  // Both VMs in rc mode, one QP each, connected, both backups ready.
  void RcConnect(const QpConf& c) {
    la_->SetMode(std::span(&va_.gid, 1), ReliabilityMode::kRc);
    lb_->SetMode(std::span(&vb_.gid, 1), ReliabilityMode::kRc);
    qa_ = MakeQp(*la_, va_, c);
    qb_ = MakeQp(*lb_, vb_, c);
    BringUp(*la_, qa_, va_.gid, vb_.gid, qb_.qpn, c);
    BringUp(*lb_, qb_, vb_.gid, va_.gid, qa_.qpn, c);
    Run(20);
    for (auto [layer, qpn] : {std::pair{la_.get(), qa_.qpn}, std::pair{lb_.get(), qb_.qpn}}) {
      const reliable::RcPath* path = layer->FindRcPath(qpn);
      ASSERT_NE(path, nullptr);
      ASSERT_EQ(path->state(), reliable::RcPath::State::kReady);
    }
  }

  // A signaled one-SGE RDMA WR: A's buffer at `local`, B's at `remote`.
  SendWr Rdma(WrOpcode op, uint64_t wr_id, uint64_t local, uint64_t remote,
              uint32_t len) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = op;
    w.send_flags = kSendSignaled;
    w.num_sge = len > 0 ? 1 : 0;
    w.sge[0] = Sge{va_.at(local), len, va_.mr.lkey};
    w.remote_addr = vb_.at(remote);
    w.rkey = vb_.mr.rkey;
    return w;
  }
  // A READ of len bytes from B's buffer at src into A's at dst.
  SendWr Read(uint64_t wr_id, uint64_t src, uint64_t dst, uint32_t len) {
    return Rdma(WrOpcode::kRdmaRead, wr_id, dst, src, len);
  }
  // A WRITE of len bytes from A's buffer at src to B's at dst.
  SendWr Write(uint64_t wr_id, uint64_t src, uint64_t dst, uint32_t len) {
    return Rdma(WrOpcode::kRdmaWrite, wr_id, src, dst, len);
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
  // took_ns: the time from the posts to the last completion.
  void PostAndVerify(const std::vector<Planned>& plan, int max_turns,
                     uint64_t* took_ns = nullptr) {
    const uint64_t t0 = now_;
    for (const Planned& p : plan) Post(Write(p.wr_id, p.src, p.dst, p.len));
    const size_t before = got_.size();
    ASSERT_TRUE(RunUntil([&] { return got_.size() >= before + plan.size(); },
                         max_turns))
        << "completed " << got_.size() - before << " of " << plan.size();
    if (took_ns != nullptr) *took_ns = now_ - t0;
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

  uint64_t rc_reset_delay_ns_ = 1'000'000;  // rc mode (reliable_rc_test)
  uint64_t packet_lifetime_ns_ = 0;         // §4.2 "Late originals"
  uint64_t idle_sweep_ns_ = 0;              // §2.1 "Turns"
  // Turn sleeps (SleepUntilWork) when neither layer has work due at once.
  bool sleep_when_idle_ = false;
  uint64_t sleeps_ = 0;
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
  UcVm va_, vb_;
  RnicQp qa_{}, qb_{};
  std::vector<Completion> got_, got_b_;
  std::vector<Completion> recv_a_, recv_b_;  // the receive CQs' completions
};

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_UC_TEST_UTIL_H_
