// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "tests/integration/two_vm_fixture.h"

#include <chrono>
#include <cstdlib>
#include <random>

#include "guest-driver/lib/spin_wait.h"
#include "guest-driver/perftest/pattern.h"

namespace vrdma::integration {

void Guest::Open(const std::string& socket, uint64_t ram_bytes) {
  guest::DriverOptions o;
  o.ram_bytes = ram_bytes;
  o.timeout_ms = 5000;
  auto d = guest::Device::Open(socket, o);
  ASSERT_TRUE(d.ok()) << "open " << socket << ": " << StatusName(d.status());
  dev = std::move(d.value());
  auto g = dev->QueryGid(0);
  ASSERT_TRUE(g.ok()) << StatusName(g.status());
  gid = *g;
  auto p = dev->AllocPd();
  ASSERT_TRUE(p.ok()) << StatusName(p.status());
  pd = std::move(p.value());
  auto c = dev->CreateCq(256);
  ASSERT_TRUE(c.ok()) << StatusName(c.status());
  cq = std::move(c.value());
  auto m = dev->RegMr(*pd, kMrBytes, kAllAccess);
  ASSERT_TRUE(m.ok()) << StatusName(m.status());
  mr = std::move(m.value());
}

std::unique_ptr<guest::Qp> Guest::CreateQp(uint8_t type, uint32_t depth) {
  guest::QpInitAttr qa;
  qa.qp_type = type;
  qa.send_cq = cq.get();
  qa.recv_cq = cq.get();
  qa.max_send_wr = depth;
  qa.max_recv_wr = depth;
  auto q = dev->CreateQp(*pd, qa);
  EXPECT_TRUE(q.ok()) << StatusName(q.status());
  return q.ok() ? std::move(q.value()) : nullptr;
}

void Guest::Close() {
  mr.reset();
  cq.reset();
  pd.reset();
  dev.reset();
}

std::optional<ib_uverbs_wc> PollOne(guest::Cq& cq, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  guest::SpinWait spin;
  ib_uverbs_wc wc;
  uint32_t n = 0;
  while (cq.Poll({&wc, 1}) == 0) {
    if ((++n & 0xff) == 0 && std::chrono::steady_clock::now() > end) return std::nullopt;
    spin.Idle();
  }
  return wc;
}

void Connect(guest::Qp& a, const guest::GidBytes& gid_a, guest::Qp& b,
             const guest::GidBytes& gid_b) {
  static std::mt19937 rng(12345);
  const uint32_t psn_a = rng() & 0xffffff, psn_b = rng() & 0xffffff;
  ASSERT_EQ(a.ToInit(kAllAccess), Status::kOk);
  ASSERT_EQ(b.ToInit(kAllAccess), Status::kOk);
  ASSERT_EQ(a.ToRtr({b.qpn(), psn_b, gid_b}), Status::kOk);
  ASSERT_EQ(b.ToRtr({a.qpn(), psn_a, gid_a}), Status::kOk);
  ASSERT_EQ(a.ToRts(psn_a), Status::kOk);
  ASSERT_EQ(b.ToRts(psn_b), Status::kOk);
}

void ExpectHealthy(Guest& a, Guest& b, uint64_t tag) {
  auto qa = a.CreateQp(VIRTIO_RDMA_QPT_RC);
  auto qb = b.CreateQp(VIRTIO_RDMA_QPT_RC);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(Connect(*qa, a.gid, *qb, b.gid));
  guest::RecvWr rw;
  rw.wr_id = 1;
  rw.num_sge = 1;
  rw.sge[0] = {b.mr->iova() + 32768, 1000, b.mr->lkey()};
  ASSERT_EQ(qb->PostRecv(rw), Status::kOk);
  // Source and target differ even when a and b are the same guest.
  perftest::FillPattern(a.mr->data() + 16384, 1000, 9, tag);
  guest::SendWr sw;
  sw.opcode = IB_UVERBS_WR_SEND;
  sw.send_flags = guest::kSendSignaled;
  sw.num_sge = 1;
  sw.sge[0] = {a.mr->iova() + 16384, 1000, a.mr->lkey()};
  ASSERT_EQ(qa->PostSend(sw), Status::kOk);
  auto r = PollOne(*b.cq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, kWcSuccess);
  EXPECT_EQ(perftest::CheckPattern(b.mr->data() + 32768, 1000, 9, tag), 1000u);
  auto s = PollOne(*a.cq);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, kWcSuccess);
}

void TwoVmTest::SetUp() {
  std::string err;
  std::vector<std::string> args = DaemonArgs();
  // On an rdma-core device (tests/vm/run-verbs.sh: rxe0 in a host VM, with
  // the VMs' GIDs on its netdev); the software RNIC otherwise.
  if (const char* dev = std::getenv("VRDMA_TEST_RNIC"); dev != nullptr && *dev != '\0') {
    args.insert(args.end(), {"--rnic", dev});
  }
  ASSERT_TRUE(daemon_.Start(&err, args)) << err;
  sock_a_ = daemon_.AttachVm("vm-a", "::ffff:10.0.0.1");
  sock_b_ = daemon_.AttachVm("vm-b", "::ffff:10.0.0.2");
  ASSERT_FALSE(sock_a_.empty());
  ASSERT_FALSE(sock_b_.empty());
  ASSERT_NO_FATAL_FAILURE(a_.Open(sock_a_));
  ASSERT_NO_FATAL_FAILURE(b_.Open(sock_b_));
}

void TwoVmTest::TearDown() {
  a_.Close();
  b_.Close();
  EXPECT_TRUE(daemon_.alive()) << "the daemon died during the test";
  daemon_.Stop();
}

}  // namespace vrdma::integration
