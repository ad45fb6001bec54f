// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A VM (a child process running an in-process guest) is SIGKILLed in the
// middle of RDMA traffic. The daemon must notice the vhost-user disconnect,
// release everything the VM held (its stats drop to zero), stay alive, keep
// serving the other VM, and accept the dead VM's socket again.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/integration/two_vm_fixture.h"

namespace vrdma::integration {
namespace {

struct PeerInfo {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t addr;
  uint8_t gid[16];
};

bool WriteAll(int fd, const void* p, size_t n) {
  return write(fd, p, n) == static_cast<ssize_t>(n);
}
bool ReadAll(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, static_cast<uint8_t*>(p) + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// The child VM: connects a QP to the parent's and RDMA-writes into the
// parent's MR until it is killed. Never returns.
[[noreturn]] void ChildVm(const std::string& socket, int to_parent, int from_parent) {
  Guest a;
  a.Open(socket);
  if (!a.dev) _exit(2);
  auto qp = a.CreateQp(VIRTIO_RDMA_QPT_RC, 64);
  if (!qp) _exit(3);
  PeerInfo me{qp->qpn(), a.mr->rkey(), a.mr->iova(), {}};
  std::memcpy(me.gid, a.gid.data(), 16);
  PeerInfo peer;
  if (!WriteAll(to_parent, &me, sizeof(me)) || !ReadAll(from_parent, &peer, sizeof(peer))) {
    _exit(4);
  }
  guest::GidBytes pg;
  std::memcpy(pg.data(), peer.gid, 16);
  if (qp->ToInit(kAllAccess) != Status::kOk || qp->ToRtr({peer.qpn, 0, pg}) != Status::kOk ||
      qp->ToRts(0) != Status::kOk) {
    _exit(5);
  }
  uint64_t posted = 0, done = 0;
  bool told = false;
  for (;;) {
    while (posted - done < 32) {
      guest::SendWr wr;
      wr.wr_id = posted;
      wr.opcode = IB_UVERBS_WR_RDMA_WRITE;
      wr.send_flags = guest::kSendSignaled;
      wr.num_sge = 1;
      wr.sge[0] = {a.mr->iova(), 4096, a.mr->lkey()};
      wr.remote_addr = peer.addr + (posted % 8) * 4096;
      wr.rkey = peer.rkey;
      if (qp->PostSend(wr) != Status::kOk) _exit(6);
      ++posted;
    }
    ib_uverbs_wc wc[16];
    const int n = a.cq->Poll(wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != 0) _exit(7);
      ++done;
    }
    if (!told && done >= 200) {
      const uint8_t b = 1;
      if (!WriteAll(to_parent, &b, 1)) _exit(8);
      told = true;
    }
    if (n == 0) sched_yield();
  }
}

class VmKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(daemon_.Start(&err)) << err;
    sock_a_ = daemon_.AttachVm("vm-a", "::ffff:10.0.0.1");
    sock_b_ = daemon_.AttachVm("vm-b", "::ffff:10.0.0.2");
    ASSERT_FALSE(sock_a_.empty() || sock_b_.empty());
  }
  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    daemon_.Stop();
  }
  DaemonHarness daemon_;
  std::string sock_a_, sock_b_;
  pid_t child_ = -1;
};

TEST_F(VmKillTest, DaemonReleasesTheDeadVmAndServesTheOther) {
  Guest b;
  ASSERT_NO_FATAL_FAILURE(b.Open(sock_b_));
  auto qb = b.CreateQp(VIRTIO_RDMA_QPT_RC, 64);
  ASSERT_TRUE(qb);

  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  child_ = fork();
  ASSERT_GE(child_, 0);
  if (child_ == 0) {
    close(up[0]);
    close(down[1]);
    ChildVm(sock_a_, up[1], down[0]);
  }
  close(up[1]);
  close(down[0]);
  PeerInfo a_info;
  ASSERT_TRUE(ReadAll(up[0], &a_info, sizeof(a_info))) << "child VM did not start";
  PeerInfo me{qb->qpn(), b.mr->rkey(), b.mr->iova(), {}};
  std::memcpy(me.gid, b.gid.data(), 16);
  ASSERT_TRUE(WriteAll(down[1], &me, sizeof(me)));
  guest::GidBytes ag;
  std::memcpy(ag.data(), a_info.gid, 16);
  ASSERT_EQ(qb->ToInit(kAllAccess), Status::kOk);
  ASSERT_EQ(qb->ToRtr({a_info.qpn, 0, ag}), Status::kOk);
  ASSERT_EQ(qb->ToRts(0), Status::kOk);

  uint8_t started = 0;
  ASSERT_TRUE(ReadAll(up[0], &started, 1)) << "child VM failed before traffic ran";
  auto before = daemon_.VmStats("vm-a");
  ASSERT_FALSE(before.is_null());
  EXPECT_GE(before.value("qps", 0), 1);
  EXPECT_GE(before.value("mrs", 0), 1);
  EXPECT_GT(before.value("pinned_bytes", 0ull), 0ull);

  // Kill it mid-traffic (it keeps 32 writes in flight).
  ASSERT_EQ(kill(child_, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child_, &status, 0), child_);
  child_ = -1;
  EXPECT_TRUE(WIFSIGNALED(status)) << "the child VM exited on its own: " << status;
  close(up[0]);
  close(down[1]);

  // Everything vm-a held is released.
  nlohmann::json after;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    after = daemon_.VmStats("vm-a");
    ASSERT_FALSE(after.is_null()) << "vm-a vanished from the daemon";
    if (after.value("qps", 1) == 0 && after.value("mrs", 1) == 0 && after.value("cqs", 1) == 0 &&
        after.value("pds", 1) == 0 && after.value("pinned_bytes", 1ull) == 0) {
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), end) << "not released: " << after.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(after.value("connected", true));
  ASSERT_TRUE(daemon_.alive());

  // vm-b's resources are intact and it keeps working: a loopback pair
  // inside vm-b, then a new guest on vm-a's socket talking to vm-b.
  auto b_stats = daemon_.VmStats("vm-b");
  EXPECT_GE(b_stats.value("qps", 0), 1);
  qb.reset();
  ASSERT_NO_FATAL_FAILURE(ExpectHealthy(b, b, 11));
  Guest a2;
  ASSERT_NO_FATAL_FAILURE(a2.Open(sock_a_));
  ASSERT_NO_FATAL_FAILURE(ExpectHealthy(a2, b, 12));
  ASSERT_NO_FATAL_FAILURE(ExpectHealthy(b, a2, 13));
  a2.Close();
  b.Close();
  EXPECT_TRUE(daemon_.alive());
}

}  // namespace
}  // namespace vrdma::integration
