// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Two real vhost-rdma-daemon processes pointed at each other by the fabric
// flags (two_daemon_fixture.h; docs/reliability.md §7.3), VMs on each.
// TwoDaemonTest / LossyTwoDaemonTest: in-process guests, UD, UC and RC
// messages from the VM on one daemon reach the VM on the other through
// the two daemons' UDP sockets, payloads verified byte for byte, and RC
// recovers at 10% loss. TwoDaemons.Perftest*: vrdma-perftest's server on
// daemon A, its client on daemon B, every test perftest_test.cc runs on one
// daemon (StandardPerftestCases) with --verify, lossless and at 1% loss;
// each daemon's `stats` must show the traffic crossed the fabric.
// TwoDaemons.PeersFindEachOther: the peer channel (--peer-listen, --peer)
// between them; TwoDaemons.UcWriteBw: the reliability layer in uc mode
// under write_bw --verify at 1% loss.
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "guest-driver/perftest/pattern.h"
#include "tests/integration/perftest_runner.h"
#include "tests/integration/two_daemon_fixture.h"

namespace vrdma::integration {
namespace {

using guest::RecvWr;
using guest::SendWr;
using perftest::CheckPattern;
using perftest::FillPattern;

SendWr MakeWr(uint32_t opcode, const guest::Mr& mr, uint64_t offset, uint32_t len,
              uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.send_flags = guest::kSendSignaled;
  wr.num_sge = 1;
  wr.sge[0] = {mr.iova() + offset, len, mr.lkey()};
  return wr;
}

RecvWr MakeRecv(const guest::Mr& mr, uint64_t offset, uint32_t len, uint64_t wr_id) {
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.num_sge = 1;
  wr.sge[0] = {mr.iova() + offset, len, mr.lkey()};
  return wr;
}

TEST_F(TwoDaemonTest, UdCrossesDaemons) {
  auto ua = a_.CreateQp(VIRTIO_RDMA_QPT_UD);
  auto ub = b_.CreateQp(VIRTIO_RDMA_QPT_UD);
  ASSERT_TRUE(ua && ub);
  ASSERT_NO_FATAL_FAILURE(Connect(*ua, a_.gid, *ub, b_.gid));
  auto ah = a_.dev->CreateAh(*a_.pd, b_.gid);
  ASSERT_TRUE(ah.ok()) << StatusName(ah.status());
  constexpr uint32_t kUd = 1000;
  ASSERT_EQ(ub->PostRecv(MakeRecv(*b_.mr, 0, 40 + kUd, 3)), Status::kOk);
  // UD has no RNR retry: make sure the device has picked the receive up.
  ASSERT_EQ(ub->RingRqDoorbell(), Status::kOk);
  FillPattern(a_.mr->data(), kUd, 6, 0);
  SendWr wr = MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, kUd, 4);
  wr.ah = (*ah)->handle();
  wr.remote_qpn = ub->qpn();
  wr.remote_qkey = 0x11111111;  // the qkey ToInit gives UD QPs
  ASSERT_EQ(ua->PostSend(wr), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc) << "daemon A: " << daemons_.a().Control({{"cmd", "stats"}}).dump()
                   << "\ndaemon B: " << daemons_.b().Control({{"cmd", "stats"}}).dump();
  EXPECT_EQ(rwc->status, kWcSuccess);
  EXPECT_EQ(rwc->src_qp, ua->qpn());
  EXPECT_EQ(rwc->byte_len, 40 + kUd);
  // The GRH names the sending VM's GID, as RoCE v2 would.
  EXPECT_EQ(std::memcmp(b_.mr->data() + 32, a_.gid.data() + 12, 4), 0);
  EXPECT_EQ(CheckPattern(b_.mr->data() + 40, kUd, 6, 0), kUd);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, kWcSuccess);
  ah->reset();
}

TEST_F(TwoDaemonTest, UcSendAndWriteCrossDaemons) {
  auto ua = a_.CreateQp(VIRTIO_RDMA_QPT_UC);
  auto ub = b_.CreateQp(VIRTIO_RDMA_QPT_UC);
  ASSERT_TRUE(ua && ub);
  ASSERT_NO_FATAL_FAILURE(Connect(*ua, a_.gid, *ub, b_.gid));
  constexpr uint32_t kLen = 5000;  // five packets at the 1024-byte MTU
  ASSERT_EQ(ub->PostRecv(MakeRecv(*b_.mr, 0, 8192, 1)), Status::kOk);
  ASSERT_EQ(ub->RingRqDoorbell(), Status::kOk);
  FillPattern(a_.mr->data(), kLen, 8, 0);
  ASSERT_EQ(ua->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, kLen, 2)), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, kWcSuccess);
  EXPECT_EQ(rwc->byte_len, kLen);
  EXPECT_EQ(CheckPattern(b_.mr->data(), kLen, 8, 0), kLen);
  ASSERT_TRUE(PollOne(*a_.cq));
  FillPattern(a_.mr->data(), kLen, 8, 1);
  SendWr wr = MakeWr(IB_UVERBS_WR_RDMA_WRITE, *a_.mr, 0, kLen, 3);
  wr.remote_addr = b_.mr->iova() + 20000;
  wr.rkey = b_.mr->rkey();
  ASSERT_EQ(ua->PostSend(wr), Status::kOk);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, kWcSuccess);
  // UC has no ACK: the local completion may precede placement.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (CheckPattern(b_.mr->data() + 20000, kLen, 8, 1) != kLen &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(CheckPattern(b_.mr->data() + 20000, kLen, 8, 1), kLen);
}

TEST_F(TwoDaemonTest, RcSendAndReadCrossDaemons) {
  auto qa = a_.CreateQp(VIRTIO_RDMA_QPT_RC);
  auto qb = b_.CreateQp(VIRTIO_RDMA_QPT_RC);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qa, a_.gid, *qb, b_.gid));
  constexpr uint32_t kLen = 6000;
  ASSERT_EQ(qb->PostRecv(MakeRecv(*b_.mr, 0, 8192, 1)), Status::kOk);
  FillPattern(a_.mr->data(), kLen, 9, 0);
  ASSERT_EQ(qa->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, 0, kLen, 2)), Status::kOk);
  auto rwc = PollOne(*b_.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, kWcSuccess);
  EXPECT_EQ(rwc->byte_len, kLen);
  EXPECT_EQ(CheckPattern(b_.mr->data(), kLen, 9, 0), kLen);
  auto swc = PollOne(*a_.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, kWcSuccess);  // RC: acknowledged by daemon B
  // A READ of B's memory into A's.
  FillPattern(b_.mr->data() + 30000, kLen, 9, 1);
  SendWr rd = MakeWr(IB_UVERBS_WR_RDMA_READ, *a_.mr, 10000, kLen, 5);
  rd.remote_addr = b_.mr->iova() + 30000;
  rd.rkey = b_.mr->rkey();
  ASSERT_EQ(qa->PostSend(rd), Status::kOk);
  auto rdc = PollOne(*a_.cq);
  ASSERT_TRUE(rdc);
  EXPECT_EQ(rdc->status, kWcSuccess);
  EXPECT_EQ(rdc->wr_id, 5u);
  EXPECT_EQ(CheckPattern(a_.mr->data() + 10000, kLen, 9, 1), kLen);
}

// Both daemons lose 10% of what they send (--fabric-fault): native RC
// recovers by go-back-N, every message arrives once, whole and in order.
// 10 messages of 6 packets (the guest MR holds 64 KiB) and their ACKs:
// losses are all but certain (0.9^70 < 0.1%), and the seed makes the
// choices the same every run.
class LossyTwoDaemonTest : public TwoDaemonTest {
 protected:
  std::vector<std::string> DaemonArgs() const override {
    return FaultArgs("loss=0.1", 15);
  }
};

TEST_F(LossyTwoDaemonTest, RcRecoversEveryMessage) {
  auto qa = a_.CreateQp(VIRTIO_RDMA_QPT_RC, 64);
  auto qb = b_.CreateQp(VIRTIO_RDMA_QPT_RC, 64);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qa, a_.gid, *qb, b_.gid));
  constexpr int kMsgs = 10;
  constexpr uint32_t kLen = 6000;
  for (int i = 0; i < kMsgs; ++i) {
    ASSERT_EQ(qb->PostRecv(MakeRecv(*b_.mr, uint64_t{kLen} * i, kLen, 100 + i)), Status::kOk);
  }
  for (int i = 0; i < kMsgs; ++i) {
    FillPattern(a_.mr->data() + uint64_t{kLen} * i, kLen, 10, i);
    ASSERT_EQ(qa->PostSend(MakeWr(IB_UVERBS_WR_SEND, *a_.mr, uint64_t{kLen} * i, kLen, i)),
              Status::kOk);
  }
  for (int i = 0; i < kMsgs; ++i) {
    auto r = PollOne(*b_.cq, 10000);
    ASSERT_TRUE(r) << "message " << i;
    EXPECT_EQ(r->status, kWcSuccess);
    EXPECT_EQ(r->wr_id, 100u + i);
    EXPECT_EQ(r->byte_len, kLen);
    EXPECT_EQ(CheckPattern(b_.mr->data() + uint64_t{kLen} * i, kLen, 10, i), kLen) << i;
  }
  for (int i = 0; i < kMsgs; ++i) {
    auto s = PollOne(*a_.cq, 10000);
    ASSERT_TRUE(s) << "send " << i;
    EXPECT_EQ(s->status, kWcSuccess);
    EXPECT_EQ(s->wr_id, static_cast<uint64_t>(i));
  }
  EXPECT_FALSE(PollOne(*b_.cq, 100));  // nothing twice
  // The daemons' stats: packets were lost on the way and sent again, and
  // nothing from a stranger or out of place reached either socket.
  const nlohmann::json fa = daemons_.a().Control({{"cmd", "stats"}})["fabric"];
  const nlohmann::json fb = daemons_.b().Control({{"cmd", "stats"}})["fabric"];
  const uint64_t lost = fa["faults"].value("lost_random", uint64_t{0}) +
                        fb["faults"].value("lost_random", uint64_t{0});
  EXPECT_GT(lost, 0u) << fa.dump() << "\n" << fb.dump();
  EXPECT_GT(fa["packets"].value("retransmitted", uint64_t{0}), 0u) << fa.dump();
  for (const nlohmann::json* f : {&fa, &fb}) {
    EXPECT_EQ((*f)["udp"]["rx_unknown_source"], 0) << f->dump();
    EXPECT_EQ((*f)["udp"]["rx_kernel_drops"], 0) << f->dump();
  }
}

// ---- vrdma-perftest across two daemons ----

constexpr uint64_t kMtu = 1024;  // the guest library's path MTU
constexpr char kLoss[] = "loss=0.01";
// One seed per daemon, so A's and B's losses are not the same indices.
constexpr uint64_t kSeedA = 15, kSeedB = 16;

uint64_t PacketsPerMessage(uint64_t size) { return size == 0 ? 1 : (size + kMtu - 1) / kMtu; }

// The server's VM on daemon A, the client's on daemon B; a fresh pair of
// daemons per run, so their counters are this run's alone.
class TwoDaemons : public ::testing::TestWithParam<PerftestCase> {
 protected:
  void StartDaemons(bool lossy) {
    std::string err;
    std::vector<std::string> fa, fb;
    if (lossy) {
      fa = FaultArgs(kLoss, kSeedA);
      fb = FaultArgs(kLoss, kSeedB);
    }
    ASSERT_TRUE(daemons_.Start(GetParam().daemon_args, &err, fa, fb)) << err;
    server_socket_ = daemons_.AttachA("vm-server");
    client_socket_ = daemons_.AttachB("vm-client");
    ASSERT_FALSE(server_socket_.empty() || client_socket_.empty());
  }
  void TearDown() override {
    EXPECT_TRUE(daemons_.a().alive()) << "daemon A died";
    EXPECT_TRUE(daemons_.b().alive()) << "daemon B died";
    daemons_.Stop();
  }

  // A run that must pass: both exit 0, "Verify: PASSED", no errors.
  void ExpectVerified(const PerftestCase& c, const PerftestPair& r) {
    EXPECT_EQ(r.client_rc, 0) << "client:\n" << r.client_out << "\nserver:\n" << r.server_out;
    EXPECT_EQ(r.server_rc, 0) << "server:\n" << r.server_out;
    EXPECT_NE(r.client_out.find("Verify: PASSED"), std::string::npos) << r.client_out;
    EXPECT_NE(r.server_out.find("Verify: PASSED"), std::string::npos) << r.server_out;
    EXPECT_NE(r.client_out.find(c.header), std::string::npos) << r.client_out;
    EXPECT_NE(r.json.find("\"verify_errors\": 0"), std::string::npos) << r.json;
  }

  // Every message's packets reached the other daemon's SoftRnic through
  // its socket at least once (lost ones are counted where they were not
  // received, so this holds with loss too for RC): A received the
  // client's requests, B the server's replies and READ responses. A run
  // on one daemon would leave these counters at zero.
  void ExpectCrossed(const PerftestCase& c, const PerftestPair& r, const FabricCounters& a,
                     const FabricCounters& b) {
    const nlohmann::json j = nlohmann::json::parse(r.json, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.json;
    const uint64_t msgs = j["results"].value("n_iterations", uint64_t{0});
    ASSERT_GT(msgs, 0u) << r.json;
    const uint64_t ppm = PacketsPerMessage(CaseFlag(c, "-s", 0));
    const std::string t = c.test;
    uint64_t to_a = 0, to_b = 0;  // data packets each way at least
    if (t == "write_bw" || t == "send_bw") {
      to_a = msgs * ppm;
    } else if (t == "read_bw") {
      to_a = msgs;  // one request each
      to_b = msgs * ppm;
    } else if (t == "read_lat") {
      to_a = msgs;
      to_b = msgs * ppm;
    } else {  // write_lat, send_lat: a ping-pong
      to_a = to_b = msgs * ppm;
    }
    EXPECT_GE(a.rx_packets, to_a) << "daemon A: " << a.raw.dump();
    EXPECT_GE(b.tx_packets, to_a) << "daemon B: " << b.raw.dump();
    EXPECT_GE(b.rx_packets, to_b) << "daemon B: " << b.raw.dump();
    EXPECT_GE(a.tx_packets, to_b) << "daemon A: " << a.raw.dump();
    EXPECT_GT(a.udp_delivered, 0u) << a.raw.dump();
    EXPECT_GT(b.udp_sent, 0u) << b.raw.dump();
    for (const FabricCounters* f : {&a, &b}) {
      EXPECT_EQ(f->rx_unknown_source, 0u) << f->raw.dump();
    }
  }

  DaemonPair daemons_;
  std::string server_socket_, client_socket_;
};

// Lossless: every test passes its verify, as on one daemon.
TEST_P(TwoDaemons, PerftestLossless) {
  const PerftestCase& c = GetParam();
  ASSERT_NO_FATAL_FAILURE(StartDaemons(false));
  const PerftestPair r =
      RunPerftestPair(c, server_socket_, client_socket_, daemons_.b().dir(), 120);
  std::printf("%s", r.client_out.c_str());
  ASSERT_NO_FATAL_FAILURE(ExpectVerified(c, r));
  const FabricCounters a = DaemonPair::Counters(daemons_.a());
  const FabricCounters b = DaemonPair::Counters(daemons_.b());
  ExpectCrossed(c, r, a, b);
  // Nothing was lost: no UC message dropped, no fault configured.
  EXPECT_EQ(a.uc_messages_dropped + b.uc_messages_dropped, 0u) << a.raw.dump() << b.raw.dump();
  EXPECT_EQ(a.lost + b.lost, 0u);
}

// UC write_bw at 1% loss, every message checked: n <= tx_depth, so each
// iteration has a slot of its own that nothing overwrites, and the server
// checks every one. UC drops a message with a lost packet whole (the
// bytes before the gap may stay), the sender completes it anyway (no ACK),
// and nothing resends it: the run completes without a completion error and
// verify counts exactly the messages that lost a packet on the way, which
// lies between L / packets-per-message and L for L packets lost.
void RunUcWriteBwLossy(const PerftestCase& table_case, DaemonPair& daemons,
                       const std::string& server_socket, const std::string& client_socket) {
  PerftestCase c = table_case;
  const uint64_t n = CaseFlag(c, "-n", 0);
  ASSERT_GT(n, 0u);
  c.extra.insert(c.extra.end(), {"-t", std::to_string(n)});
  const PerftestPair r = RunPerftestPair(c, server_socket, client_socket, daemons.b().dir(), 120);
  std::printf("%s", r.client_out.c_str());
  const FabricCounters a = DaemonPair::Counters(daemons.a());
  const FabricCounters b = DaemonPair::Counters(daemons.b());
  const nlohmann::json j = nlohmann::json::parse(r.json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "client:\n" << r.client_out << "\nserver:\n" << r.server_out;
  const uint64_t errors = j.value("verify_errors", ~uint64_t{0});
  const uint64_t ppm = PacketsPerMessage(CaseFlag(c, "-s", 0));
  // Everything that left B and never reached A's SoftRnic.
  const uint64_t lost = b.lost + b.tx_dropped_busy + a.rx_kernel_drops;
  ASSERT_GT(lost, 0u) << "seeds " << kSeedA << "/" << kSeedB
                      << " lost nothing: pick others\n" << b.raw.dump();
  EXPECT_EQ(j["results"].value("n_iterations", uint64_t{0}), n) << r.json;  // all completed
  EXPECT_GE(errors, (lost + ppm - 1) / ppm) << r.client_out << b.raw.dump();
  EXPECT_LE(errors, lost) << r.client_out << b.raw.dump();
  EXPECT_LE(a.uc_messages_dropped, errors) << a.raw.dump();
  EXPECT_EQ(a.tx_packets, 0u) << "UC writes need no answer: " << a.raw.dump();
  EXPECT_EQ(b.retransmitted, 0u) << b.raw.dump();
  // perftest exits 3 on verify errors; the result table is still printed.
  EXPECT_EQ(r.client_rc, 3) << r.client_out;
  EXPECT_EQ(r.server_rc, 3) << r.server_out;
  EXPECT_NE(r.client_out.find("Verify: FAILED"), std::string::npos) << r.client_out;
  EXPECT_NE(r.client_out.find(c.header), std::string::npos) << r.client_out;
  EXPECT_GE(a.rx_packets + lost, n * ppm) << a.raw.dump();
}

// UC send_lat at 1% loss: a ping-pong of one-packet messages. The first
// lost ping or pong is never resent (UC), so its receiver waits for ever,
// and so does the other side: the run stalls. Asserted as: the daemons
// count a loss; from then on no packet moves either way for 500 ms while
// both processes still run (a UC that resent would move packets, a
// perftest that skipped the loss would finish).
void RunUcSendLatLossy(const PerftestCase& c, DaemonPair& daemons,
                       const std::string& server_socket, const std::string& client_socket) {
  const std::string bin = PerftestPath();
  const std::string port = PerftestPort();
  const std::string dir = daemons.b().dir();
  std::vector<std::string> client = {bin, c.test, "127.0.0.1", "--socket", client_socket, "-p",
                                     port, "--verify"};
  client.insert(client.end(), c.extra.begin(), c.extra.end());
  const pid_t s = Spawn({bin, c.test, "--socket", server_socket, "-p", port}, dir + "/server.out");
  ASSERT_GT(s, 0);
  const pid_t cl = Spawn(client, dir + "/client.out");
  ASSERT_GT(cl, 0);
  auto exited = [](pid_t p) {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(p), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid != 0;
  };
  FabricCounters a, b;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end && !exited(cl)) {
    a = DaemonPair::Counters(daemons.a());
    b = DaemonPair::Counters(daemons.b());
    if (a.lost + b.lost > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool client_ended = exited(cl);
  // The stall: nothing is in flight once the one message was lost. Read
  // both daemons again: A's counters above may predate B's loss.
  a = DaemonPair::Counters(daemons.a());
  b = DaemonPair::Counters(daemons.b());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const FabricCounters a2 = DaemonPair::Counters(daemons.a());
  const FabricCounters b2 = DaemonPair::Counters(daemons.b());
  const bool client_ended_later = exited(cl), server_ended = exited(s);
  Wait(cl, 0);  // kills
  Wait(s, 0);
  const std::string co = Slurp(dir + "/client.out"), so = Slurp(dir + "/server.out");
  ASSERT_GT(a.lost + b.lost, 0u) << "seeds " << kSeedA << "/" << kSeedB
                                 << " lost nothing (pick others), client "
                                 << (client_ended ? "ended" : "ran 60 s") << ":\n" << co;
  EXPECT_FALSE(client_ended) << "the ping-pong ended after a loss:\n" << co;
  EXPECT_FALSE(client_ended_later) << co;
  EXPECT_FALSE(server_ended) << so;
  EXPECT_EQ(a2.tx_packets, a.tx_packets) << a2.raw.dump();
  EXPECT_EQ(b2.tx_packets, b.tx_packets) << b2.raw.dump();
  EXPECT_EQ(a2.rx_packets + b2.rx_packets, a.rx_packets + b.rx_packets);
  // Before the stall the ping-pong ran across the fabric.
  EXPECT_GT(a.rx_packets, 0u) << a.raw.dump();
  EXPECT_GT(b.rx_packets, 0u) << b.raw.dump();
  EXPECT_EQ(a.retransmitted + b.retransmitted, 0u);
}

// 1% random loss on what each daemon sends. RC: every test completes and
// passes its verify (go-back-N), and the counters show losses and
// retransmissions. UC: see RunUcWriteBwLossy and RunUcSendLatLossy.
TEST_P(TwoDaemons, PerftestLossy) {
  const PerftestCase& c = GetParam();
  ASSERT_NO_FATAL_FAILURE(StartDaemons(true));
  if (CaseIsUc(c)) {
    const std::string t = c.test;
    if (t == "write_bw") {
      RunUcWriteBwLossy(c, daemons_, server_socket_, client_socket_);
    } else if (t == "send_lat") {
      RunUcSendLatLossy(c, daemons_, server_socket_, client_socket_);
    } else {
      FAIL() << "no expectation written for UC " << t;
    }
    return;
  }
  const PerftestPair r =
      RunPerftestPair(c, server_socket_, client_socket_, daemons_.b().dir(), 120);
  std::printf("%s", r.client_out.c_str());
  ASSERT_NO_FATAL_FAILURE(ExpectVerified(c, r));
  const FabricCounters a = DaemonPair::Counters(daemons_.a());
  const FabricCounters b = DaemonPair::Counters(daemons_.b());
  ExpectCrossed(c, r, a, b);
  EXPECT_GT(a.lost + b.lost, 0u) << a.raw.dump() << "\n" << b.raw.dump();
  EXPECT_GT(a.retransmitted + b.retransmitted, 0u) << a.raw.dump() << "\n" << b.raw.dump();
  std::printf(" fabric: lost %lu+%lu, retransmitted %lu+%lu, timeouts %lu+%lu, NAKs %lu+%lu\n",
              static_cast<unsigned long>(a.lost), static_cast<unsigned long>(b.lost),
              static_cast<unsigned long>(a.retransmitted),
              static_cast<unsigned long>(b.retransmitted), static_cast<unsigned long>(a.timeouts),
              static_cast<unsigned long>(b.timeouts), static_cast<unsigned long>(a.naks_sent),
              static_cast<unsigned long>(b.naks_sent));
}

// ---- The peer channel and the reliability layer between the daemons ----

// --peer-listen/--peer: each daemon's stats show the other's VM GIDs, and
// a detach takes them out.
TEST(TwoDaemons, PeersFindEachOther) {
  DaemonPair d;
  d.UsePeers(false);
  std::string err;
  ASSERT_TRUE(d.Start({}, &err)) << err;
  ASSERT_FALSE(d.AttachA("vm-a").empty());
  ASSERT_FALSE(d.AttachB("vm-b").empty());
  nlohmann::json pa, pb;
  EXPECT_TRUE(WaitPeers(
      d, [](const auto& a, const auto& b) { return HasGid(a, kGidB) && HasGid(b, kGidA); }, &pa,
      &pb))
      << pa.dump() << "\n" << pb.dump();
  EXPECT_EQ(pa["peers_known"], 1);
  EXPECT_EQ(pb["peers_known"], 1);
  EXPECT_EQ(pa["peers"][0]["id"], pb["id"]);
  EXPECT_EQ(pb["peers"][0]["id"], pa["id"]);
  EXPECT_EQ(pa["peers"][0]["address"], d.peer_listen_b());
  EXPECT_FALSE(HasGid(pa, kGidA));  // its own GIDs are not a peer's
  EXPECT_EQ(pa["peers"][0]["layer"], false);  // no --reliability-layer
  EXPECT_EQ(pa["malformed"], 0);
  EXPECT_EQ(pb["malformed"], 0);
  // (A's first HELLO may have been given up: B was not listening yet.)
  EXPECT_EQ(pa["peers"][0]["pending"], 0);
  EXPECT_EQ(pb["peers"][0]["pending"], 0);
  ASSERT_EQ(d.b().Control({{"cmd", "detach-vm"}, {"name", "vm-b"}}).value("ok", false), true);
  EXPECT_TRUE(WaitPeers(
      d, [](const auto& a, const auto&) { return !HasGid(a, kGidB); }, &pa, &pb))
      << pa.dump();
  EXPECT_TRUE(d.a().alive());
  EXPECT_TRUE(d.b().alive());
  d.Stop();
}

// write_bw -n 2000 -s 8192 --verify from a VM on B to one on A, both
// attached in `mode` to daemons with the layer and 1 % loss on what each
// sends; both perftest sides exit 0 with verify PASSED. The daemons' stats
// and fabric counters are left for the caller's mode-specific checks.
struct LayerWriteBw {
  PerftestPair r;
  nlohmann::json ra, rb;  // each daemon's stats "reliability"
  FabricCounters fa, fb;
};
void RunWriteBwThroughLayers(DaemonPair& d, const char* mode, LayerWriteBw* out) {
  d.UsePeers(true);
  std::string err;
  ASSERT_TRUE(d.Start({}, &err, FaultArgs(kLoss, kSeedA), FaultArgs(kLoss, kSeedB))) << err;
  const std::string server = d.AttachA("vm-server", mode);
  const std::string client = d.AttachB("vm-client", mode);
  ASSERT_FALSE(server.empty() || client.empty());
  // Each layer has the other's HELLO (so the other's VM GIDs have a peer)
  // before perftest's QPs reach RTR.
  ASSERT_TRUE(WaitLayers(d));
  PerftestCase c{"write_bw", {"-n", "2000", "-s", "8192"}, "RDMA_Write BW Test"};
  out->r = RunPerftestPair(c, server, client, d.b().dir(), 120);
  std::printf("%s", out->r.client_out.c_str());
  const nlohmann::json sa = d.a().Control({{"cmd", "stats"}});
  const nlohmann::json sb = d.b().Control({{"cmd", "stats"}});
  ASSERT_TRUE(sa.contains("reliability") && sb.contains("reliability")) << sa.dump();
  out->ra = sa["reliability"];
  out->rb = sb["reliability"];
  out->fa = DaemonPair::Counters(d.a());
  out->fb = DaemonPair::Counters(d.b());
  const PerftestPair& r = out->r;
  EXPECT_EQ(r.client_rc, 0) << "client:\n" << r.client_out << "\nserver:\n" << r.server_out
                            << "\nA: " << out->ra.dump() << "\nB: " << out->rb.dump();
  EXPECT_EQ(r.server_rc, 0) << r.server_out;
  EXPECT_NE(r.client_out.find("Verify: PASSED"), std::string::npos) << r.client_out;
  EXPECT_NE(r.server_out.find("Verify: PASSED"), std::string::npos) << r.server_out;
  EXPECT_NE(r.json.find("\"verify_errors\": 0"), std::string::npos) << r.json;
  EXPECT_GT(out->fa.lost + out->fb.lost, 0u) << out->fa.raw.dump() << out->fb.raw.dump();
  EXPECT_TRUE(d.a().alive());
  EXPECT_TRUE(d.b().alive());
}

// uc mode through the daemons: every WRITE went through the layer as UC
// chunks (connects_uc on both, chunks counted), the losses were recovered
// by the layer's WRITE_RETX, never by RC go-back-N (no RC packet was
// retransmitted: the guest's RC QPs carry nothing).
TEST(TwoDaemons, UcWriteBw) {
  DaemonPair d;
  LayerWriteBw w;
  ASSERT_NO_FATAL_FAILURE(RunWriteBwThroughLayers(d, "uc", &w));
  const nlohmann::json& ra = w.ra;
  const nlohmann::json& rb = w.rb;
  EXPECT_GT(ra.value("connects_uc", 0), 0) << ra.dump();
  EXPECT_GT(rb.value("connects_uc", 0), 0) << rb.dump();
  EXPECT_GT(rb.value("chunks_sent", 0), 0) << rb.dump();  // the client's WRITEs
  EXPECT_GE(rb.value("messages_completed", 0), 2000) << rb.dump();
  EXPECT_EQ(rb.value("messages_failed", 0), 0) << rb.dump();
  EXPECT_GT(rb.value("retx_sent", 0), 0) << rb.dump();  // the layer recovered
  EXPECT_EQ(w.fa.retransmitted + w.fb.retransmitted, 0u) << w.fa.raw.dump() << w.fb.raw.dump();
  std::printf(" uc: lost %lu+%lu packets; B chunks %lu, WRITE_RETX %lu, RACK %lu, RTO %lu; "
              "ACKs A sent %lu\n",
              static_cast<unsigned long>(w.fa.lost), static_cast<unsigned long>(w.fb.lost),
              rb.value("chunks_sent", 0ul), rb.value("retx_sent", 0ul),
              rb.value("lost_rack", 0ul), rb.value("lost_rto", 0ul),
              ra.value("acks_sent", 0ul));
  d.Stop();
}

// rc mode across two daemons (docs/reliability.md §5): the guests' RC QPs
// run on the RNIC's RC with a retry count of 2 and a backup QP connected
// at CONNECT; go-back-N recovers the losses and no error reaches a guest.
TEST(TwoDaemons, RcWriteBw) {
  DaemonPair d;
  LayerWriteBw w;
  ASSERT_NO_FATAL_FAILURE(RunWriteBwThroughLayers(d, "rc", &w));
  const nlohmann::json& ra = w.ra;
  const nlohmann::json& rb = w.rb;
  EXPECT_GT(ra.value("rc_connects", 0), 0) << ra.dump();
  EXPECT_GT(rb.value("rc_connects", 0), 0) << rb.dump();
  EXPECT_EQ(ra.value("connects_uc", 0) + rb.value("connects_uc", 0), 0) << rb.dump();
  EXPECT_EQ(ra.value("rc_failed_to_guest", 0) + rb.value("rc_failed_to_guest", 0), 0)
      << ra.dump() << rb.dump();
  EXPECT_GT(w.fa.retransmitted + w.fb.retransmitted, 0u)  // the RNIC's RC recovered
      << w.fa.raw.dump() << w.fb.raw.dump();
  std::printf(" rc: lost %lu+%lu packets, RC retransmitted %lu+%lu; takeovers %lu+%lu\n",
              static_cast<unsigned long>(w.fa.lost), static_cast<unsigned long>(w.fb.lost),
              static_cast<unsigned long>(w.fa.retransmitted),
              static_cast<unsigned long>(w.fb.retransmitted), ra.value("rc_takeovers", 0ul),
              rb.value("rc_takeovers", 0ul));
  d.Stop();
}

INSTANTIATE_TEST_SUITE_P(Standard, TwoDaemons, ::testing::ValuesIn(StandardPerftestCases()),
                         [](const ::testing::TestParamInfo<PerftestCase>& i) {
                           return std::string(i.param.test) + "_" + std::to_string(i.index);
                         });

}  // namespace
}  // namespace vrdma::integration
