// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableCcTest (docs/reliability.md §4.4, §4.5, §10 step 14): the
// sender's SwiftWindow, chunk sizes and pacing over a FaultyFabric
// bottleneck. N sender layers ("daemons") and one receiver layer, each
// over its own SoftRnic on one InprocFabric, joined by InprocPeerLinks;
// every sender's port sends through a FaultyFabric whose FaultModel may be
// shared (one bottleneck queue towards the receiver's VM for all of them:
// incast). Time is virtual: every layer's clock is the fixture's now_,
// advanced 2 us per turn, so every figure is deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/fabric/fault_model.h"
#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace vrdma::testing {
namespace {

constexpr uint32_t kRegion = 1 << 20;  // each sender's place at the receiver
constexpr uint32_t kWrBytes = 256 << 10;
constexpr uint32_t kSlots = kRegion / kWrBytes;

// A port that records when data packets (UC, first of a message) leave.
class Recorder final : public fabric::Fabric {
 public:
  explicit Recorder(fabric::Fabric* inner) : inner_(inner) {}
  Status AddGid(const Gid& gid) override { return inner_->AddGid(gid); }
  Status RemoveGid(const Gid& gid) override { return inner_->RemoveGid(gid); }
  void Send(std::span<const uint8_t> p, const Gid& dgid, uint64_t now) override {
    if (record) {
      const net::Header h = HeaderOf(p);
      if ((h.opcode & net::kTransportMask) == net::kUc &&
          net::OpInfoOf(h.opcode).first) {
        firsts.push_back(now);
      }
    }
    inner_->Send(p, dgid, now);
  }
  int Poll(std::span<fabric::Datagram> out, uint64_t now) override {
    return inner_->Poll(out, now);
  }
  std::optional<uint64_t> NextEventNs() const override {
    return inner_->NextEventNs();
  }
  bool record = false;
  std::vector<uint64_t> firsts;  // send times of each chunk or piece

 private:
  fabric::Fabric* inner_;
};

struct Host {
  fabric::Fabric* port = nullptr;
  std::unique_ptr<fabric::FaultModel> model;  // its own, when not shared
  std::unique_ptr<fabric::FaultyFabric> faulty;
  std::unique_ptr<Recorder> rec;
  std::unique_ptr<SoftRnic> soft;
  std::unique_ptr<ReliableRnic> layer;
  std::unique_ptr<Link> link;
  UcVm vm;
  RnicQp qp{};  // a sender's QP; the receiver's are in rx_qps_
  std::vector<Completion> done;
  uint64_t posted = 0;       // WRs posted
  uint64_t bytes_done = 0;   // bytes of WRs completed successfully
  uint64_t failed = 0;
};

class ReliableCcTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kStepNs = 2'000;

  // n senders and a receiver; `faults` on what each sender sends (shared:
  // one model for all of them, the incast bottleneck), seed per run.
  void Build(int n, const fabric::FaultConfig& faults, bool shared,
             const ReliableRnicOptions& base = {}, uint64_t seed = 7) {
    fabric_ = std::make_unique<fabric::InprocFabric>(fabric::InprocFabricOptions{
        .queue_packets = 16384, .latency_ns = 5'000});
    if (shared) shared_ = std::make_unique<fabric::FaultModel>(faults, seed);
    hosts_.resize(n + 1);
    for (int i = 0; i <= n; ++i) {
      Host& h = hosts_[i];
      h.port = fabric_->AddPort();
      fabric::FaultModel* model = shared_.get();
      if (i == n) {
        h.model = std::make_unique<fabric::FaultModel>(fabric::FaultConfig{}, 1);
        model = h.model.get();
      } else if (!shared) {
        h.model = std::make_unique<fabric::FaultModel>(faults, seed + i);
        model = h.model.get();
      }
      h.faulty = std::make_unique<fabric::FaultyFabric>(h.port, model, 4096);
      h.rec = std::make_unique<Recorder>(h.faulty.get());
      h.soft = std::make_unique<SoftRnic>(DefaultSoftRnicLimits(),
                                          [this] { return now_; }, h.rec.get());
      ReliableRnicOptions o = base;
      o.clock = [this] { return now_; };
      o.ack.recvs = 1024;
      o.daemon_id = 1 + i;
      o.token_seed = 11 + i;
      h.layer = std::make_unique<ReliableRnic>(*h.soft, o);
      h.link = std::make_unique<Link>(1 + i);
    }
    Host& rx = hosts_[n];
    for (int i = 0; i < n; ++i) Link::Join(*hosts_[i].link, *rx.link);
    for (int i = 0; i <= n; ++i) {
      Host& h = hosts_[i];
      ASSERT_EQ(h.layer->AttachPeerLink(h.link.get(), HostGid(100 + i)),
                Status::kOk);
      MakeVm(h, static_cast<uint8_t>(1 + i), i == n ? n * kRegion : 2 * kRegion,
             i != n);
      h.link->AddGid(h.vm.gid);
      h.layer->SetMode(std::span(&h.vm.gid, 1), ReliabilityMode::kUc);
    }
    for (int i = 0; i < n; ++i) {
      Host& s = hosts_[i];
      s.qp = MakeQp(s);
      rx_qps_.push_back(MakeQp(rx));
    }
    for (int i = 0; i < n; ++i) {
      Host& s = hosts_[i];
      BringUp(s, s.qp, rx.vm.gid, rx_qps_[i].qpn);
      BringUp(rx, rx_qps_[i], s.vm.gid, s.qp.qpn);
    }
    Run(30);
    for (int i = 0; i < n; ++i) {
      reliable::Connection* k = hosts_[i].layer->FindConnection(hosts_[i].qp.qpn);
      ASSERT_NE(k, nullptr);
      ASSERT_EQ(k->state(), ConnState::kUc) << i;
    }
  }

  // Back to nothing, for a second run in the same test.
  void Reset() {
    hosts_.clear();
    rx_qps_.clear();
    shared_.reset();
    fabric_.reset();
  }

  void MakeVm(Host& h, uint8_t id, size_t bytes, bool fill) {
    UcVm& vm = h.vm;
    vm.gid = HostGid(id);
    ASSERT_EQ(h.layer->AddGid(vm.gid), Status::kOk);
    vm.pd = *h.layer->AllocPd();
    vm.scq = *h.layer->CreateCq(4096);
    vm.rcq = *h.layer->CreateCq(4096);
    vm.buf.assign(bytes, 0);
    if (fill) {
      for (size_t i = 0; i < bytes; ++i) {
        vm.buf[i] = static_cast<uint8_t>(i * 7 + i / 4093 + id * 31 + 1);
      }
    }
    vm.iova = uint64_t{id} << 36;
    Result<RnicMr> mr = h.layer->RegMr(vm.pd, vm.buf.data(), bytes, vm.iova, kAll);
    ASSERT_TRUE(mr.ok());
    vm.mr = *mr;
  }

  RnicQp MakeQp(Host& h) {
    QpInit init;
    init.type = QpType::kRc;
    init.pd = h.vm.pd;
    init.send_cq = h.vm.scq;
    init.recv_cq = h.vm.rcq;
    init.caps = QpCaps{256, 64, 4, 4, 64, QpType::kRc};
    Result<RnicQp> qp = h.layer->CreateQp(init);
    EXPECT_TRUE(qp.ok());
    return qp.ok() ? *qp : RnicQp{};
  }

  void BringUp(Host& h, RnicQp qp, const Gid& peer, uint32_t dest_qpn) {
    ReliableRnic& r = *h.layer;
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = kAll;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
              Status::kOk);
    a.state = QpState::kRtr;
    a.av.sgid = h.vm.gid;
    a.av.dgid = peer;
    a.path_mtu_bytes = 1024;
    a.dest_qpn = dest_qpn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                                    kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
              Status::kOk);
    a.state = QpState::kRts;
    a.timeout = 18;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    ASSERT_EQ(r.ModifyQp(qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                    kQpRnrRetry | kQpMaxQpRdAtomic),
              Status::kOk);
  }

  void Turn() {
    for (Host& h : hosts_) h.layer->Progress();
    for (Host& h : hosts_) h.link->Deliver(*h.layer);
    std::array<Completion, 64> out;
    for (size_t i = 0; i + 1 < hosts_.size(); ++i) {
      Host& h = hosts_[i];
      int n;
      while ((n = h.layer->PollCq(h.vm.scq, out)) > 0) {
        for (int j = 0; j < n; ++j) {
          if (out[j].status == WcStatus::kSuccess) {
            h.bytes_done += kWrBytes;
          } else {
            ++h.failed;
          }
          h.done.push_back(out[j]);
        }
      }
    }
    now_ += kStepNs;
  }
  void Run(int turns) {
    for (int i = 0; i < turns; ++i) Turn();
  }

  Host& rx() { return hosts_.back(); }
  int senders() const { return static_cast<int>(hosts_.size()) - 1; }
  reliable::Sender& SenderOf(int i) {
    return hosts_[i].layer->FindConnection(hosts_[i].qp.qpn)->sender();
  }

  // WR k of sender i: 256 KiB from its own buffer (a source offset that
  // moves with k) into slot k % kSlots of its region at the receiver.
  uint64_t SrcOf(uint64_t k) const { return (k * 12289) % kRegion; }
  uint64_t DstOf(int i, uint64_t k) const {
    return uint64_t(i) * kRegion + (k % kSlots) * kWrBytes;
  }
  // Keeps `depth` WRs outstanding on every sender while `more` holds.
  void Feed(int depth, bool more) {
    for (int i = 0; i < senders(); ++i) {
      Host& h = hosts_[i];
      while (more && h.posted - h.done.size() < static_cast<uint64_t>(depth)) {
        const uint64_t k = h.posted;
        SendWr w;
        w.wr_id = k;
        w.opcode = WrOpcode::kRdmaWrite;
        w.send_flags = kSendSignaled;
        w.num_sge = 1;
        w.sge[0] = Sge{h.vm.at(SrcOf(k)), kWrBytes, h.vm.mr.lkey};
        w.remote_addr = rx().vm.at(DstOf(i, k));
        w.rkey = rx().vm.mr.rkey;
        Status st = Status::kOk;
        ASSERT_EQ(h.layer->PostSend(h.qp, std::span(&w, 1), &st), 1)
            << StatusName(st);
        ++h.posted;
      }
    }
  }
  // Runs `turns` turns keeping `depth` WRs outstanding, then drains.
  void Transfer(int turns, int depth, int drain_turns = 50'000) {
    for (int t = 0; t < turns; ++t) {
      Feed(depth, true);
      Turn();
      if (::testing::Test::HasFatalFailure()) return;
    }
    Drain(drain_turns);
  }
  void Drain(int max_turns) {
    for (int t = 0; t < max_turns; ++t) {
      bool all = true;
      for (int i = 0; i < senders(); ++i) {
        all &= hosts_[i].done.size() == hosts_[i].posted;
      }
      if (all) return;
      Turn();
    }
  }
  // Every WR completed once, in order, with success; the last kSlots WRs'
  // bytes are in place at the receiver.
  void Verify() {
    for (int i = 0; i < senders(); ++i) {
      Host& h = hosts_[i];
      ASSERT_EQ(h.done.size(), h.posted) << "sender " << i;
      for (uint64_t k = 0; k < h.posted; ++k) {
        ASSERT_EQ(h.done[k].wr_id, k) << "sender " << i;
        ASSERT_EQ(h.done[k].status, WcStatus::kSuccess) << "sender " << i;
      }
      for (uint64_t k = h.posted >= kSlots ? h.posted - kSlots : 0; k < h.posted;
           ++k) {
        ASSERT_EQ(0, std::memcmp(&rx().vm.buf[DstOf(i, k)], &h.vm.buf[SrcOf(k)],
                                 kWrBytes))
            << "sender " << i << " WR " << k;
      }
    }
  }
  uint64_t BottleneckDrops() const {
    return shared_ ? shared_->stats().bottleneck_drops
                   : hosts_[0].faulty->fault_stats().bottleneck_drops;
  }

  uint64_t now_ = 1'000'000'000;
  std::unique_ptr<fabric::InprocFabric> fabric_;
  std::unique_ptr<fabric::FaultModel> shared_;
  std::vector<Host> hosts_;
  std::vector<RnicQp> rx_qps_;
};

// One sender through a 2 Gbit/s bottleneck with a 32 KiB tail-drop
// queue: the initial 64 KiB window overflows it in the first round trips;
// then the delay holds the window near the path's BDP plus the target's
// 10 us of queue, and the drops stop.
TEST_F(ReliableCcTest, BottleneckWindowSettlesAndDropsStop) {
  fabric::FaultConfig f;
  f.bottleneck_bps = 2'000'000'000;
  f.bottleneck_bytes = 32 << 10;
  Build(1, f, false);
  const uint64_t t0 = now_;
  constexpr int kFirst = 1'500;  // 3 ms: the first RTO (1 ms, no sample yet) and its repair
  for (int t = 0; t < kFirst; ++t) {
    Feed(4, true);
    Turn();
  }
  const uint64_t early_drops = BottleneckDrops();
  const uint64_t early_bytes = hosts_[0].bytes_done;
  uint64_t cmin = ~uint64_t{0}, cmax = 0, csum = 0, cn = 0;
  constexpr int kRest = 15'000;  // 30 ms
  for (int t = 0; t < kRest; ++t) {
    Feed(4, true);
    Turn();
    if (t >= kRest / 2) {
      const uint64_t c = SenderOf(0).cwnd();
      cmin = std::min(cmin, c);
      cmax = std::max(cmax, c);
      csum += c;
      ++cn;
    }
  }
  const uint64_t late_drops = BottleneckDrops() - early_drops;
  const uint64_t bytes = hosts_[0].bytes_done - early_bytes;
  const double gbps = 8.0 * static_cast<double>(bytes) /
                      static_cast<double>(now_ - t0 - kFirst * kStepNs);
  const reliable::ReliabilityCounters& c = hosts_[0].layer->counters();
  std::printf(
      "drops: %llu in the first 3 ms, %llu in the next 30 ms; goodput %.2f "
      "Gbit/s of 2; cwnd in the last 15 ms %llu..%llu (mean %llu) B; srtt "
      "%llu ns, target %llu ns; lost rack %llu rto %llu, resets %llu\n",
      (unsigned long long)early_drops, (unsigned long long)late_drops, gbps,
      (unsigned long long)cmin, (unsigned long long)cmax,
      (unsigned long long)(csum / cn), (unsigned long long)SenderOf(0).srtt_ns(),
      (unsigned long long)SenderOf(0).target_ns(now_),
      (unsigned long long)c.lost_rack, (unsigned long long)c.lost_rto,
      (unsigned long long)c.cwnd_resets);
  Drain(50'000);
  Verify();
  EXPECT_GT(early_drops, 0u);  // the initial window overflows the queue
  EXPECT_LE(late_drops * 10, early_drops);
  EXPECT_GT(gbps, 1.0);  // the link stays busy
  EXPECT_LT(cmax, uint64_t{64} << 10);
}

// Goodput (bytes of completed WRs per virtual second) of one sender that
// keeps `depth` WRs outstanding for `turns` turns from its connect.
struct RunFigures {
  double gbps = 0;
  uint64_t cwnd_end = 0;
  uint64_t cwnd_min = ~uint64_t{0};  // after the first 1 ms
  uint64_t resets = 0, lost_rack = 0, lost_rto = 0, retx = 0;
};

// 1 % random loss of the data packets on an uncongested path (no
// bottleneck: the delay stays at base_rtt, below target), with an offered
// load of 21 Gbit/s (a 256 KiB WRITE every 100 us, at most 16
// outstanding): no loss is taken for congestion (§4.5's departure from
// B §3.4.3), the window is never reset, and the goodput stays that of the
// lossless run, both measured here in virtual time. Resetting the window
// at each loss would hold it near min_cwnd (one unit per round trip).
TEST_F(ReliableCcTest, RandomLossDoesNotCollapseTheWindow) {
  auto run = [&](double loss) {
    fabric::FaultConfig f;
    f.loss = loss;
    Build(1, f, false);
    RunFigures r;
    const uint64_t t0 = now_;
    constexpr int kTurns = 15'000;  // 30 ms
    uint64_t offered = 0;
    for (int t = 0; t < kTurns; ++t) {
      if (t % 50 == 0) ++offered;
      Host& h = hosts_[0];
      Feed(static_cast<int>(std::min<uint64_t>(offered - h.done.size(), 16)),
           h.posted < offered);
      Turn();
      if (t >= 500) r.cwnd_min = std::min(r.cwnd_min, SenderOf(0).cwnd());
    }
    r.gbps = 8.0 * static_cast<double>(hosts_[0].bytes_done) /
             static_cast<double>(now_ - t0);
    r.cwnd_end = SenderOf(0).cwnd();
    const reliable::ReliabilityCounters& c = hosts_[0].layer->counters();
    r.resets = c.cwnd_resets;
    r.lost_rack = c.lost_rack;
    r.lost_rto = c.lost_rto;
    r.retx = c.retx_sent;
    Drain(50'000);
    Verify();
    Reset();
    return r;
  };
  const RunFigures clean = run(0);
  const RunFigures lossy = run(0.01);
  const double ratio = lossy.gbps / clean.gbps;
  std::printf(
      "lossless: %.2f Gbit/s, cwnd %llu B at the end (min %llu); 1%% loss: "
      "%.2f Gbit/s, cwnd %llu B (min %llu), %llu RACK + %llu RTO losses, "
      "%llu units again, %llu window resets; ratio %.2f\n",
      clean.gbps, (unsigned long long)clean.cwnd_end,
      (unsigned long long)clean.cwnd_min, lossy.gbps,
      (unsigned long long)lossy.cwnd_end, (unsigned long long)lossy.cwnd_min,
      (unsigned long long)lossy.lost_rack, (unsigned long long)lossy.lost_rto,
      (unsigned long long)lossy.retx, (unsigned long long)lossy.resets, ratio);
  EXPECT_GT(lossy.lost_rack + lossy.lost_rto, 10u);
  EXPECT_EQ(clean.resets, 0u);
  EXPECT_EQ(lossy.resets, 0u);
  EXPECT_GT(lossy.cwnd_min, uint64_t{16} << 10);  // never near min_cwnd
  EXPECT_GT(clean.gbps, 19.0);
  EXPECT_GT(ratio, 0.9);
}

// 8:1 incast: eight sender layers write into one receiver VM through one
// bottleneck queue (4 Gbit/s, 64 KiB, tail drop) that all of them share.
// Every byte arrives, the drops of the first round trips stop, and each
// sender gets a share within a printed factor of the fair one.
TEST_F(ReliableCcTest, IncastEightToOne) {
  fabric::FaultConfig f;
  f.bottleneck_bps = 4'000'000'000;
  f.bottleneck_bytes = 64 << 10;
  Build(8, f, true);
  constexpr int kFirst = 1'000;  // 2 ms
  for (int t = 0; t < kFirst; ++t) {
    Feed(2, true);
    Turn();
  }
  const uint64_t early_drops = BottleneckDrops();
  std::vector<uint64_t> base;
  for (int i = 0; i < senders(); ++i) base.push_back(hosts_[i].bytes_done);
  const uint64_t t1 = now_;
  constexpr int kRest = 20'000;  // 40 ms
  for (int t = 0; t < kRest; ++t) {
    Feed(2, true);
    Turn();
  }
  const uint64_t late_drops = BottleneckDrops() - early_drops;
  uint64_t lo = ~uint64_t{0}, hi = 0, total = 0;
  std::printf("incast 8:1 over 40 ms: per sender Mbit/s:");
  for (int i = 0; i < senders(); ++i) {
    const uint64_t b = hosts_[i].bytes_done - base[i];
    lo = std::min(lo, b);
    hi = std::max(hi, b);
    total += b;
    std::printf(" %.0f", 8000.0 * static_cast<double>(b) /
                             static_cast<double>(now_ - t1));
  }
  const double gbps = 8.0 * static_cast<double>(total) /
                      static_cast<double>(now_ - t1);
  uint64_t resets = 0, rack = 0, rto = 0;
  for (int i = 0; i < senders(); ++i) {
    resets += hosts_[i].layer->counters().cwnd_resets;
    rack += hosts_[i].layer->counters().lost_rack;
    rto += hosts_[i].layer->counters().lost_rto;
  }
  std::printf(
      "\n  total %.2f Gbit/s of 4; max/min share %.2f; drops %llu in the "
      "first 2 ms, %llu in the next 40 ms; losses rack %llu rto %llu, "
      "window resets %llu; cwnd of sender 0 %llu B, srtt %llu ns, target "
      "%llu ns\n",
      gbps, lo ? static_cast<double>(hi) / static_cast<double>(lo) : 0.0,
      (unsigned long long)early_drops, (unsigned long long)late_drops,
      (unsigned long long)rack, (unsigned long long)rto,
      (unsigned long long)resets, (unsigned long long)SenderOf(0).cwnd(),
      (unsigned long long)SenderOf(0).srtt_ns(),
      (unsigned long long)SenderOf(0).target_ns(now_));
  Drain(100'000);
  Verify();
  EXPECT_GT(early_drops, 0u);
  EXPECT_LE(late_drops * 10, early_drops);
  EXPECT_GT(gbps, 2.0);
  ASSERT_GT(lo, 0u);
  EXPECT_LT(static_cast<double>(hi) / static_cast<double>(lo), 4.0);
}

// Below one unit of window (a min_cwnd below the default unit) a unit
// leaves every srtt x 4096 / cwnd (§4.5):
// the window held at 2048 bytes (min = max = initial), the gaps between
// the chunks' first packets are twice the srtt, not one round trip.
TEST_F(ReliableCcTest, PacingBelowOneUnit) {
  ReliableRnicOptions o;
  o.connection.sender.window.min_cwnd = 2048;
  o.connection.sender.window.max_cwnd = 2048;
  o.connection.sender.window.initial_cwnd = 2048;
  Build(1, {}, false, o);
  for (int t = 0; t < 500; ++t) {  // srtt settles
    Feed(1, true);
    Turn();
  }
  hosts_[0].rec->record = true;
  std::vector<uint64_t> expected;
  for (int t = 0; t < 5'000; ++t) {
    Feed(1, true);
    Turn();
  }
  hosts_[0].rec->record = false;
  const reliable::Sender& s = SenderOf(0);
  ASSERT_EQ(s.cwnd(), 2048u);
  const uint64_t interval = s.srtt_ns() * 4096 / s.cwnd();
  const std::vector<uint64_t>& f = hosts_[0].rec->firsts;
  ASSERT_GT(f.size(), 20u);
  std::vector<uint64_t> gaps;
  for (size_t i = 1; i < f.size(); ++i) gaps.push_back(f[i] - f[i - 1]);
  std::sort(gaps.begin(), gaps.end());
  const uint64_t median = gaps[gaps.size() / 2];
  std::printf(
      "paced: %zu chunks in 10 ms, srtt %llu ns, cwnd %llu B: interval %llu "
      "ns; gaps min %llu median %llu max %llu ns\n",
      f.size(), (unsigned long long)s.srtt_ns(), (unsigned long long)s.cwnd(),
      (unsigned long long)interval, (unsigned long long)gaps.front(),
      (unsigned long long)median, (unsigned long long)gaps.back());
  // Turns are 2 us: a gap is the interval rounded up to a turn.
  EXPECT_GE(gaps.front(), interval);
  EXPECT_LE(median, interval + kStepNs);
  EXPECT_GT(interval, s.srtt_ns() + s.srtt_ns() / 2);  // not window-clocked
  Drain(50'000);
  Verify();
}

}  // namespace
}  // namespace vrdma::testing
