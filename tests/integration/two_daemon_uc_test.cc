// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The reliability layer's goals across two real daemons
// (docs/reliability.md §9; two_daemon_fixture.h): both daemons with
// --reliability-layer, both VMs in uc mode.
//
// TwoDaemons.BulkAckRatio: vrdma-perftest write_bw of 64 KiB WRITEs,
// lossless: the receiving daemon's ACKs are at most 3 % of the data
// packets the sending daemon put on the fabric.
//
// TwoDaemons.MixedMessages (1000 messages) and .MillionMixedMessages
// (nightly, 10^6): in-process guests on both daemons, two RC QPs (one
// posting from A, one from B), messages of sizes log-uniform 1 B..1 MiB
// and opcodes from kOps, at 1 % loss with reordering and duplication on
// what each daemon sends. Every payload byte is a pattern of (flow,
// message id, offset), checked where it lands; every wr_id completes once,
// in post order, with success; every receive once, in message order.
//
// BulkAckRatio and MixedMessages run in CI. MillionMixedMessages is the
// nightly run (about 15 minutes here); run it with
// --gtest_also_run_disabled_tests.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "guest-driver/lib/spin_wait.h"
#include "guest-driver/perftest/pattern.h"
#include "tests/integration/perftest_runner.h"
#include "tests/integration/two_daemon_fixture.h"

namespace vrdma::integration {
namespace {

using perftest::CheckPattern;
using perftest::FillPattern;

// What both daemons' `stats` say of the layer and the fabric.
struct Snapshot {
  nlohmann::json ra, rb;  // "reliability"
  FabricCounters fa, fb;
};
Snapshot Read(DaemonPair& d) {
  Snapshot s;
  const nlohmann::json sa = d.a().Control({{"cmd", "stats"}});
  const nlohmann::json sb = d.b().Control({{"cmd", "stats"}});
  EXPECT_TRUE(sa.contains("reliability") && sb.contains("reliability"))
      << sa.dump() << "\n"
      << sb.dump();
  s.ra = sa.value("reliability", nlohmann::json::object());
  s.rb = sb.value("reliability", nlohmann::json::object());
  s.fa = DaemonPair::Counters(d.a());
  s.fb = DaemonPair::Counters(d.b());
  return s;
}
uint64_t Get(const nlohmann::json& r, const char* name) {
  return r.value(name, uint64_t{0});
}

// ---- BulkAckRatio ----

constexpr double kAckRatioGoal = 0.03;  // §9: ACKs <= 3 % of data packets

// write_bw from a client on B to a server on A, lossless, uc: A's layer
// receives and ACKs, B's sends. Data packets = what B's SoftRnic sent on
// the fabric (chunks and anything resent: B sends nothing else here), ACKs
// = A's layer's acks_sent (A's SoftRnic sent nothing else either). About
// one ACK per chunk (docs/reliability.md §4.3): 0.017-0.019 here since the
// RTO restarts at each ACK and spurious RTOs are undone (§4.4), 0.028-0.084
// before, when spurious RTOs cut the chunks and resent units.
TEST(TwoDaemons, BulkAckRatio) {
  DaemonPair d;
  d.UsePeers(true);
  std::string err;
  ASSERT_TRUE(d.Start({}, &err)) << err;
  const std::string server = d.AttachA("vm-server", "uc");
  const std::string client = d.AttachB("vm-client", "uc");
  ASSERT_FALSE(server.empty() || client.empty());
  ASSERT_TRUE(WaitLayers(d));
  PerftestCase c{
      "write_bw", {"-n", "3000", "-s", "65536"}, "RDMA_Write BW Test"};
  const PerftestPair r = RunPerftestPair(c, server, client, d.b().dir(), 120);
  std::printf("%s", r.client_out.c_str());
  const Snapshot s = Read(d);
  EXPECT_EQ(r.client_rc, 0) << "client:\n"
                            << r.client_out << "\nserver:\n"
                            << r.server_out;
  EXPECT_NE(r.client_out.find("Verify: PASSED"), std::string::npos)
      << r.client_out;
  EXPECT_GT(Get(s.rb, "connects_uc"), 0u) << s.rb.dump();
  EXPECT_GE(Get(s.rb, "messages_completed"), 3000u) << s.rb.dump();
  EXPECT_EQ(s.fa.lost + s.fb.lost, 0u);
  const uint64_t data = s.fb.tx_packets, acks = Get(s.ra, "acks_sent");
  ASSERT_GE(data, 3000u * 64) << s.fb.raw.dump();  // 64 packets each, at least
  const double ratio = static_cast<double>(acks) / static_cast<double>(data);
  std::printf(
      " bulk 64 KiB WRITE, lossless, uc: B sent %lu data packets (%lu chunks, "
      "%lu units"
      " resent, RACK %lu, RTO %lu, %lu RTOs undone), A sent %lu ACKs (A's fabric tx %lu "
      "packets):"
      " ACK ratio %.4f (goal <= %.2f: %s)\n",
      static_cast<unsigned long>(data),
      static_cast<unsigned long>(Get(s.rb, "chunks_sent")),
      static_cast<unsigned long>(Get(s.rb, "retx_sent")),
      static_cast<unsigned long>(Get(s.rb, "lost_rack")),
      static_cast<unsigned long>(Get(s.rb, "lost_rto")),
      static_cast<unsigned long>(Get(s.rb, "rto_undone")),
      static_cast<unsigned long>(acks),
      static_cast<unsigned long>(s.fa.tx_packets), ratio, kAckRatioGoal,
      ratio <= kAckRatioGoal ? "pass" : "FAIL");
  EXPECT_LE(ratio, kAckRatioGoal)
      << "A: " << s.ra.dump() << "\nB: " << s.rb.dump();
  EXPECT_TRUE(d.a().alive());
  EXPECT_TRUE(d.b().alive());
  d.Stop();
}

// ---- MixedMessages ----

// The guest's ack timeout: 4.096 us x 2^18 = 1.07 s, so a message may stay
// unacknowledged (retry_cnt + 1) x that = 8.6 s from its first
// transmission (§1), as in the layer's own tests. (The guest library's 14,
// 0.54 s, failed 2 runs in 3 here, a 514 KB SEND once in its first 0.55 s;
// 20, 34 s, hid the stalls of docs/reliability.md §10, done of step 19.)
constexpr uint8_t kAckTimeout = 18;

// Connect's steps with kAckTimeout at RTS.
void ConnectRc(guest::Qp& a, const guest::GidBytes& gid_a, guest::Qp& b,
               const guest::GidBytes& gid_b) {
  ASSERT_EQ(a.ToInit(kAllAccess), Status::kOk);
  ASSERT_EQ(b.ToInit(kAllAccess), Status::kOk);
  ASSERT_EQ(a.ToRtr({b.qpn(), 200, gid_b}), Status::kOk);
  ASSERT_EQ(b.ToRtr({a.qpn(), 100, gid_a}), Status::kOk);
  for (auto [q, psn] : {std::pair{&a, 100u}, std::pair{&b, 200u}}) {
    virtio_rdma_qp_attr r{};
    r.qp_state = VIRTIO_RDMA_QPS_RTS;
    r.sq_psn = psn;
    r.timeout = kAckTimeout;
    r.retry_cnt = 7;
    r.rnr_retry = 7;
    r.max_rd_atomic = 1;
    r.attr_mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN |
                  VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
                  VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
    ASSERT_EQ(q->Modify(r), Status::kOk);
  }
}

// READ through the layer in uc mode (docs/reliability.md §10 step 13):
// true once it has landed.
constexpr bool kReadInUc = true;

struct OpKind {
  const char* name;
  uint32_t opcode;  // IB_UVERBS_WR_*
  bool enabled;
};
constexpr OpKind kOps[] = {
    {"WRITE", IB_UVERBS_WR_RDMA_WRITE, true},
    {"WRITE_WITH_IMM", IB_UVERBS_WR_RDMA_WRITE_WITH_IMM, true},
    {"SEND", IB_UVERBS_WR_SEND, true},
    {"SEND_WITH_IMM", IB_UVERBS_WR_SEND_WITH_IMM, true},
    {"READ", IB_UVERBS_WR_RDMA_READ, kReadInUc},
};
bool ConsumesReceive(uint32_t op) {
  return op == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM || op == IB_UVERBS_WR_SEND ||
         op == IB_UVERBS_WR_SEND_WITH_IMM;
}

constexpr uint32_t kMaxLen = 1u << 20;
constexpr uint32_t kWindow = 8;  // messages outstanding per flow
constexpr uint32_t kSlots =
    2 * kWindow;  // payload slots per flow (reused in turn)
constexpr uint32_t kRecvs = kWindow + 4;  // receives posted per flow
constexpr uint64_t kFlowBytes = uint64_t{kMaxLen} * (2 * kSlots + kRecvs);
constexpr char kFaults[] = "loss=0.01,reorder=0.01:20us,dup=0.005";

// The immediate of message mid of flow f (network order is the guest's
// business: the layer carries it as it is).
uint32_t ImmOf(uint32_t f, uint64_t mid) {
  return static_cast<uint32_t>(mid * 2654435761u) ^ (f << 28);
}

// One RC QP pair: `poster` posts every message of the flow, `peer` holds
// its targets and receives. Each side's MR (one per guest, shared by both
// flows) holds the flow's regions at `base` on the poster (local: WRITE
// and SEND sources, READ targets) and on the peer (remote: WRITE targets,
// READ sources; then the receive buffers).
struct Flow {
  uint32_t id = 0;
  Guest* poster = nullptr;
  Guest* peer = nullptr;
  guest::Mr* poster_mr = nullptr;
  guest::Mr* peer_mr = nullptr;
  std::unique_ptr<guest::Qp> qp, peer_qp;
  uint64_t base = 0;  // offset of this flow's regions in both MRs

  struct Msg {
    uint64_t mid;
    uint32_t op, len, slot;
    std::chrono::steady_clock::time_point posted;
  };
  std::deque<Msg> outstanding;     // posted, not completed, in post order
  std::deque<Msg> expect_recv;     // receive-consuming, not yet received
  std::deque<uint32_t> recv_bufs;  // receive buffers posted, in post order
  std::vector<uint32_t> free_recv;
  uint64_t posted = 0, completed = 0, received = 0, bytes = 0;
  uint64_t stall_mid = 0;        // 1 + the message a stall was printed for
  Snapshot stall_first;          // the counters when its wait passed kStallS
  uint64_t stall_first_for = 0;  // 1 + the message stall_first is for

  uint8_t* local(uint32_t slot) const {
    return poster_mr->data() + base + uint64_t{slot} * kMaxLen;
  }
  uint8_t* remote(uint32_t slot) const {
    return peer_mr->data() + base + uint64_t{kSlots + slot} * kMaxLen;
  }
  uint64_t remote_iova(uint32_t slot) const {
    return peer_mr->iova() + base + uint64_t{kSlots + slot} * kMaxLen;
  }
  uint64_t recv_off(uint32_t buf) const {
    return base + uint64_t{2 * kSlots + buf} * kMaxLen;
  }
};

class MixedMessages {
 public:
  MixedMessages(DaemonPair& d, uint64_t seed) : d_(d), rng_(seed) {
    for (const OpKind& k : kOps) {
      if (k.enabled) ops_.push_back(k.opcode);
    }
  }

  // Attaches a guest to each daemon and connects both flows.
  void SetUp() {
    const std::string sa = d_.AttachA("vm-a", "uc");
    const std::string sb = d_.AttachB("vm-b", "uc");
    ASSERT_FALSE(sa.empty() || sb.empty());
    ASSERT_TRUE(WaitLayers(d_));
    const uint64_t mr_bytes = 2 * kFlowBytes;
    for (auto [g, sock, mr] :
         {std::tuple{&a_, sa, &mr_a_}, std::tuple{&b_, sb, &mr_b_}}) {
      ASSERT_NO_FATAL_FAILURE(g->Open(sock, mr_bytes + (64ull << 20)));
      auto m = g->dev->RegMr(*g->pd, mr_bytes, kAllAccess);
      ASSERT_TRUE(m.ok()) << StatusName(m.status());
      *mr = std::move(m.value());
    }
    flows_[0] = MakeFlow(0, &a_, mr_a_.get(), &b_, mr_b_.get());
    flows_[1] = MakeFlow(1, &b_, mr_b_.get(), &a_, mr_a_.get());
    for (Flow& f : flows_) {
      f.qp = f.poster->CreateQp(VIRTIO_RDMA_QPT_RC, 32);
      f.peer_qp = f.peer->CreateQp(VIRTIO_RDMA_QPT_RC, 32);
      ASSERT_TRUE(f.qp && f.peer_qp);
      ASSERT_NO_FATAL_FAILURE(
          ConnectRc(*f.qp, f.poster->gid, *f.peer_qp, f.peer->gid));
      for (uint32_t i = 0; i < kRecvs; ++i)
        ASSERT_NO_FATAL_FAILURE(PostRecv(f, i));
    }
  }

  // n messages, split between the flows; false on a timeout (failures
  // are gtest's).
  bool Run(uint64_t n, double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    const bool done =
        Loop(n, start + std::chrono::milliseconds(
                            static_cast<int64_t>(timeout_s * 1000)));
    seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    return done;
  }

  void TearDown() {
    for (Flow& f : flows_) {
      f.qp.reset();
      f.peer_qp.reset();
    }
    mr_a_.reset();
    mr_b_.reset();
    a_.Close();
    b_.Close();
  }

  uint64_t messages() const {
    return flows_[0].completed + flows_[1].completed;
  }
  uint64_t bytes() const { return flows_[0].bytes + flows_[1].bytes; }
  double seconds() const { return seconds_; }
  const std::vector<uint64_t>& per_op() const { return per_op_; }
  uint64_t failures() const { return failures_; }
  // The longest any message waited from its post to its completion.
  double longest() const { return longest_; }
  const std::string& longest_what() const { return longest_what_; }

 private:
  bool Loop(uint64_t n, std::chrono::steady_clock::time_point end) {
    const uint64_t per_flow[2] = {(n + 1) / 2, n / 2};
    uint32_t spins = 0;
    guest::SpinWait spin;
    while (flows_[0].completed < per_flow[0] ||
           flows_[1].completed < per_flow[1] ||
           !flows_[0].expect_recv.empty() || !flows_[1].expect_recv.empty()) {
      for (Flow& f : flows_) {
        while (f.posted < per_flow[f.id] && f.outstanding.size() < kWindow) {
          if (!PostNext(f)) return false;
        }
      }
      const bool any = Poll(*a_.cq) + Poll(*b_.cq) > 0;
      // Three pollers on two cores: let the daemons run when idle.
      if (any) {
        spin.Reset();
      } else {
        spin.Idle();
      }
      if (::testing::Test::HasFatalFailure() || failures_ > 20) return false;
      if (!any && (spins & 0xfff) == 0) WatchStalls();
      if (!any && (++spins & 0xfff) == 0 &&
          std::chrono::steady_clock::now() > end) {
        ADD_FAILURE() << "timeout: flow 0 " << flows_[0].completed << "/"
                      << per_flow[0] << " (" << flows_[0].expect_recv.size()
                      << " receives due), flow 1 " << flows_[1].completed << "/"
                      << per_flow[1] << " (" << flows_[1].expect_recv.size()
                      << " receives due)";
        return false;
      }
    }
    return true;
  }

  // A message waiting kStallS for its completion: the daemons' counters
  // then and kStallS later, printed once per message (what moved).
  static constexpr double kStallS = 2.0;
  void WatchStalls() {
    const auto now = std::chrono::steady_clock::now();
    for (Flow& f : flows_) {
      if (f.outstanding.empty()) continue;
      const Flow::Msg& m = f.outstanding.front();
      const double waited =
          std::chrono::duration<double>(now - m.posted).count();
      if (waited < kStallS || f.stall_mid == m.mid + 1) continue;
      if (f.stall_first.ra.is_null() || f.stall_first_for != m.mid + 1) {
        f.stall_first = Read(d_);
        f.stall_first_for = m.mid + 1;
        continue;
      }
      if (waited < 2 * kStallS) continue;
      const Snapshot later = Read(d_);
      std::string moved;
      for (const char* k :
           {"chunks_sent", "sends_sent", "retx_sent", "lost_rack", "lost_rto",
            "cwnd_resets", "rtt_samples", "acks_sent", "acks_received",
            "rnr_waits", "resent_after_wait", "hold_refused",
            "messages_completed", "messages_delivered"}) {
        moved += std::string(" ") + k + " " +
                 std::to_string(Get(later.ra, k) - Get(f.stall_first.ra, k)) +
                 "/" +
                 std::to_string(Get(later.rb, k) - Get(f.stall_first.rb, k));
      }
      std::printf(
          " stall: flow %u message %lu (%s, %u B) waited %.1f s; in the last"
          " %.1f s, A/B:%s; fabric tx %lu/%lu rx %lu/%lu\n",
          f.id, static_cast<unsigned long>(m.mid), kOps[OpIndex(m.op)].name,
          m.len, waited, waited - kStallS, moved.c_str(),
          static_cast<unsigned long>(later.fa.tx_packets -
                                     f.stall_first.fa.tx_packets),
          static_cast<unsigned long>(later.fb.tx_packets -
                                     f.stall_first.fb.tx_packets),
          static_cast<unsigned long>(later.fa.rx_packets -
                                     f.stall_first.fa.rx_packets),
          static_cast<unsigned long>(later.fb.rx_packets -
                                     f.stall_first.fb.rx_packets));
      f.stall_mid = m.mid + 1;
      f.stall_first = Snapshot{};
    }
  }

  static Flow MakeFlow(uint32_t id, Guest* poster, guest::Mr* pmr, Guest* peer,
                       guest::Mr* qmr) {
    Flow f;
    f.id = id;
    f.poster = poster;
    f.peer = peer;
    f.poster_mr = pmr;
    f.peer_mr = qmr;
    f.base = id * kFlowBytes;
    return f;
  }

  void PostRecv(Flow& f, uint32_t buf) {
    guest::RecvWr r;
    r.wr_id = uint64_t{f.id} << 32 | buf;
    r.num_sge = 1;
    r.sge[0] = {f.peer_mr->iova() + f.recv_off(buf), kMaxLen,
                f.peer_mr->lkey()};
    ASSERT_EQ(f.peer_qp->PostRecv(r), Status::kOk);
    f.recv_bufs.push_back(buf);
  }

  uint32_t NextLen() {
    // log-uniform on [1, 2^20]: 2^U(0, 20), floored.
    const double e = std::uniform_real_distribution<double>(0.0, 20.0)(rng_);
    return std::clamp<uint32_t>(static_cast<uint32_t>(std::exp2(e)), 1,
                                kMaxLen);
  }

  bool PostNext(Flow& f) {
    const uint64_t mid = f.posted;
    const uint32_t slot = static_cast<uint32_t>(mid % kSlots);
    const uint32_t op = ops_[rng_() % ops_.size()];
    const uint32_t len = NextLen();
    // The slot's last message completed and was checked (kSlots > kWindow).
    guest::SendWr w;
    w.wr_id = uint64_t{f.id} << 48 | mid;
    w.opcode = op;
    w.send_flags = guest::kSendSignaled;
    w.num_sge = 1;
    w.sge[0] = {f.poster_mr->iova() + f.base + uint64_t{slot} * kMaxLen, len,
                f.poster_mr->lkey()};
    if (op == IB_UVERBS_WR_RDMA_READ) {
      FillPattern(f.remote(slot), len, f.id, mid);
      std::memset(f.local(slot), 0, len);
    } else {
      FillPattern(f.local(slot), len, f.id, mid);
    }
    if (op == IB_UVERBS_WR_RDMA_WRITE ||
        op == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM ||
        op == IB_UVERBS_WR_RDMA_READ) {
      w.remote_addr = f.remote_iova(slot);
      w.rkey = f.peer_mr->rkey();
    }
    if (op == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM ||
        op == IB_UVERBS_WR_SEND_WITH_IMM) {
      w.imm_data = ImmOf(f.id, mid);
    }
    const Status st = f.qp->PostSend(w);
    if (st != Status::kOk) {
      ADD_FAILURE() << "flow " << f.id << " message " << mid << ": post "
                    << StatusName(st);
      return false;
    }
    const Flow::Msg m{mid, op, len, slot, std::chrono::steady_clock::now()};
    f.outstanding.push_back(m);
    if (ConsumesReceive(op)) f.expect_recv.push_back(m);
    ++f.posted;
    return true;
  }

  // Takes what cq holds; the number of completions.
  int Poll(guest::Cq& cq) {
    std::array<ib_uverbs_wc, 32> wc;
    const int n = cq.Poll(wc);
    for (int i = 0; i < n; ++i) {
      const bool recv =
          wc[i].opcode == kWcRecv || wc[i].opcode == kWcRecvRdmaWithImm;
      if (recv) {
        OnRecv(wc[i]);
      } else {
        OnSend(wc[i]);
      }
    }
    return n;
  }

  void Fail(const std::string& what) {
    ++failures_;
    ADD_FAILURE() << what;
  }

  void OnSend(const ib_uverbs_wc& wc) {
    const uint32_t fid = static_cast<uint32_t>(wc.wr_id >> 48);
    if (fid > 1 || flows_[fid].outstanding.empty()) {
      return Fail("a send completion for nothing outstanding: wr_id " +
                  std::to_string(wc.wr_id));
    }
    Flow& f = flows_[fid];
    const Flow::Msg m = f.outstanding.front();
    const uint64_t mid = wc.wr_id & ((uint64_t{1} << 48) - 1);
    if (mid != m.mid) {
      return Fail("flow " + std::to_string(fid) + ": completion of message " +
                  std::to_string(mid) + ", expected " + std::to_string(m.mid) +
                  " (twice, or out of order)");
    }
    f.outstanding.pop_front();
    const double waited = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - m.posted)
                              .count();
    if (waited > longest_) {
      longest_ = waited;
      longest_what_ = "flow " + std::to_string(fid) + " message " +
                      std::to_string(m.mid) + " (" + kOps[OpIndex(m.op)].name +
                      ", " + std::to_string(m.len) + " B)";
    }
    ++f.completed;
    f.bytes += m.len;
    ++per_op_[OpIndex(m.op)];
    if (wc.status != kWcSuccess) {
      return Fail("flow " + std::to_string(fid) + " message " +
                  std::to_string(mid) + " (" + kOps[OpIndex(m.op)].name + ", " +
                  std::to_string(m.len) + " B): status " +
                  std::to_string(wc.status));
    }
    // A success means the peer placed it (RC): WRITE bytes are in place,
    // a READ's in the local slot.
    size_t bad = m.len;
    if (m.op == IB_UVERBS_WR_RDMA_WRITE ||
        m.op == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM) {
      bad = CheckPattern(f.remote(m.slot), m.len, fid, m.mid);
    } else if (m.op == IB_UVERBS_WR_RDMA_READ) {
      bad = CheckPattern(f.local(m.slot), m.len, fid, m.mid);
    }
    if (bad != m.len) {
      Fail("flow " + std::to_string(fid) + " message " + std::to_string(mid) +
           " (" + kOps[OpIndex(m.op)].name + ", " + std::to_string(m.len) +
           " B): byte " + std::to_string(bad) + " wrong");
    }
  }

  void OnRecv(const ib_uverbs_wc& wc) {
    const uint32_t fid = static_cast<uint32_t>(wc.wr_id >> 32);
    const uint32_t buf = static_cast<uint32_t>(wc.wr_id);
    if (fid > 1 || flows_[fid].recv_bufs.empty() ||
        flows_[fid].recv_bufs.front() != buf) {
      return Fail("a receive completion out of order or twice: wr_id " +
                  std::to_string(wc.wr_id));
    }
    Flow& f = flows_[fid];
    f.recv_bufs.pop_front();
    if (f.expect_recv.empty())
      return Fail("flow " + std::to_string(fid) + ": a receive for no message");
    const Flow::Msg m = f.expect_recv.front();
    f.expect_recv.pop_front();
    ++f.received;
    const std::string who =
        "flow " + std::to_string(fid) + " message " + std::to_string(m.mid) +
        " (" + kOps[OpIndex(m.op)].name + ", " + std::to_string(m.len) + " B)";
    if (wc.status != kWcSuccess)
      return Fail(who + ": receive status " + std::to_string(wc.status));
    if (wc.byte_len != m.len) {
      Fail(who + ": receive byte_len " + std::to_string(wc.byte_len));
    }
    const bool imm = m.op == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM ||
                     m.op == IB_UVERBS_WR_SEND_WITH_IMM;
    if (((wc.wc_flags & kWcFlagWithImm) != 0) != imm ||
        (imm && wc.ex.imm_data != ImmOf(fid, m.mid))) {
      Fail(who + ": immediate flags " + std::to_string(wc.wc_flags) +
           " value " + std::to_string(wc.ex.imm_data));
    }
    const uint32_t want_op =
        m.op == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM ? kWcRecvRdmaWithImm : kWcRecv;
    if (wc.opcode != want_op)
      Fail(who + ": receive opcode " + std::to_string(wc.opcode));
    // The data is in place when its receive completes: the SEND's in the
    // receive buffer, the WRITE_WITH_IMM's at its target.
    const uint8_t* at = m.op == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM
                            ? f.remote(m.slot)
                            : f.peer_mr->data() + f.recv_off(buf);
    const size_t bad = CheckPattern(at, m.len, fid, m.mid);
    if (bad != m.len)
      Fail(who + ": received byte " + std::to_string(bad) + " wrong");
    PostRecv(f, buf);
  }

  static size_t OpIndex(uint32_t op) {
    for (size_t i = 0; i < std::size(kOps); ++i) {
      if (kOps[i].opcode == op) return i;
    }
    return 0;
  }

  DaemonPair& d_;
  std::mt19937_64 rng_;
  std::vector<uint32_t> ops_;
  Guest a_, b_;
  std::unique_ptr<guest::Mr> mr_a_, mr_b_;
  Flow flows_[2];
  std::vector<uint64_t> per_op_ = std::vector<uint64_t>(std::size(kOps));
  uint64_t failures_ = 0;
  double seconds_ = 0;
  double longest_ = 0;
  std::string longest_what_;
};

// lifetime_us: both daemons' --reliability-packet-lifetime-us (0: not
// given, no delivery hold).
void RunMixed(uint64_t n, double timeout_s, uint32_t lifetime_us = 0) {
  DaemonPair d;
  d.UsePeers(true);
  std::string err;
  std::vector<std::string> both;
  if (lifetime_us != 0) {
    both = {"--reliability-packet-lifetime-us", std::to_string(lifetime_us)};
  }
  ASSERT_TRUE(d.Start(both, &err, FaultArgs(kFaults, 15), FaultArgs(kFaults, 16)))
      << err;
  MixedMessages m(d, 20261126);
  ASSERT_NO_FATAL_FAILURE(m.SetUp());
  const bool done = m.Run(n, timeout_s);
  const Snapshot s = Read(d);
  std::printf(
      " mixed, uc, %s on both:%s %lu messages, %.1f MB, %.2f s (%.1f MB/s);",
      kFaults, kReadInUc ? "" : " (READ off: step 13)",
      static_cast<unsigned long>(m.messages()), m.bytes() / 1e6, m.seconds(),
      m.seconds() > 0 ? m.bytes() / 1e6 / m.seconds() : 0.0);
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (kOps[i].enabled)
      std::printf(" %s %lu", kOps[i].name,
                  static_cast<unsigned long>(m.per_op()[i]));
  }
  std::printf(
      "\n packets lost %lu+%lu; units resent %lu+%lu; losses RACK %lu+%lu, RTO "
      "%lu+%lu;"
      " ACKs %lu+%lu; chunks %lu+%lu; WRITE chunks placed after delivery"
      " %lu+%lu; delivery holds %lu+%lu; RC retransmitted %lu+%lu; longest"
      " wait %.3f s (%s)\n",
      static_cast<unsigned long>(s.fa.lost),
      static_cast<unsigned long>(s.fb.lost),
      static_cast<unsigned long>(Get(s.ra, "retx_sent")),
      static_cast<unsigned long>(Get(s.rb, "retx_sent")),
      static_cast<unsigned long>(Get(s.ra, "lost_rack")),
      static_cast<unsigned long>(Get(s.rb, "lost_rack")),
      static_cast<unsigned long>(Get(s.ra, "lost_rto")),
      static_cast<unsigned long>(Get(s.rb, "lost_rto")),
      static_cast<unsigned long>(Get(s.ra, "acks_sent")),
      static_cast<unsigned long>(Get(s.rb, "acks_sent")),
      static_cast<unsigned long>(Get(s.ra, "chunks_sent")),
      static_cast<unsigned long>(Get(s.rb, "chunks_sent")),
      static_cast<unsigned long>(Get(s.ra, "late_writes")),
      static_cast<unsigned long>(Get(s.rb, "late_writes")),
      static_cast<unsigned long>(Get(s.ra, "delivery_holds")),
      static_cast<unsigned long>(Get(s.rb, "delivery_holds")),
      static_cast<unsigned long>(s.fa.retransmitted),
      static_cast<unsigned long>(s.fb.retransmitted), m.longest(),
      m.longest_what().c_str());
  EXPECT_TRUE(done) << "A: " << s.ra.dump() << "\nB: " << s.rb.dump();
  EXPECT_EQ(m.failures(), 0u);
  EXPECT_EQ(m.messages(), n);
  EXPECT_GT(Get(s.ra, "connects_uc"), 0u) << s.ra.dump();
  EXPECT_GT(Get(s.rb, "connects_uc"), 0u) << s.rb.dump();
  EXPECT_EQ(Get(s.ra, "messages_failed") + Get(s.rb, "messages_failed"), 0u);
  EXPECT_EQ(s.fa.retransmitted + s.fb.retransmitted,
            0u);  // the layer, not go-back-N
  // Every connection given work was woken, and none asleep had work
  // before its time (its sweep every 10 ms found none it had to pump:
  // docs/reliability.md §2.1 "Turns").
  EXPECT_TRUE(s.ra.contains("missed_wakes")) << s.ra.dump();
  EXPECT_EQ(Get(s.ra, "missed_wakes") + Get(s.rb, "missed_wakes"), 0u);
  EXPECT_EQ(Get(s.ra, "missed_deadlines") + Get(s.rb, "missed_deadlines"), 0u);
  // Repaired messages wait for the packet lifetime only when one is given.
  const uint64_t holds = Get(s.ra, "delivery_holds") + Get(s.rb, "delivery_holds");
  if (lifetime_us != 0) {
    EXPECT_GT(holds, 0u);
  } else {
    EXPECT_EQ(holds, 0u);
  }
  m.TearDown();
  EXPECT_TRUE(d.a().alive());
  EXPECT_TRUE(d.b().alive());
  d.Stop();
}

// For CI: kCiMessages (80 MB). With the window's minimum at 512 B a third
// to a half of the runs had a message wait 6-21 s (the window at its
// minimum, a unit every 8 srtt) and failed RETRY_EXC_ERR at the 8.6 s
// budget; with one unit (docs/reliability.md §4.5) the runs took 0.5-1.2 s
// alone and about 4 s beside three busy loops, the longest wait 0.38 s.
// 50 s at most allowed.
constexpr uint64_t kCiMessages = 1000;
TEST(TwoDaemons, MixedMessages) { RunMixed(kCiMessages, 50); }

// The same with --reliability-packet-lifetime-us 2000 on both daemons
// (docs/reliability.md §4.2, "Late originals"): every message a WRITE_RETX
// repaired waits 2 ms before delivery; every byte, WR and receive checked
// as above. (Late writes are not asserted: the faults duplicate packets,
// which the hold does not cover.)
TEST(TwoDaemons, MixedMessagesWithAPacketLifetime) {
  RunMixed(kCiMessages, 50, 2000);
}

// Nightly (§9): 10^6 messages (about 79 GB; 864 s whole at 634f107).
TEST(TwoDaemons, DISABLED_MillionMixedMessages) {
  RunMixed(1'000'000, 24 * 3600);
}

}  // namespace
}  // namespace vrdma::integration
