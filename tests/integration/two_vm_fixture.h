// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A real daemon with two attached VMs, each driven by an in-process guest
// (guest-driver/lib) on this thread: device, PD, one CQ, a 64 KiB MR with
// every access right. Helpers build and connect QPs and poll completions
// with a timeout (a lost completion fails the test instead of hanging it).
#ifndef VRDMA_TESTS_INTEGRATION_TWO_VM_FIXTURE_H_
#define VRDMA_TESTS_INTEGRATION_TWO_VM_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "guest-driver/lib/verbs.h"
#include "tests/integration/daemon_harness.h"

namespace vrdma::integration {

inline constexpr uint32_t kAllAccess = VIRTIO_RDMA_ACCESS_LOCAL_WRITE |
                                       VIRTIO_RDMA_ACCESS_REMOTE_WRITE |
                                       VIRTIO_RDMA_ACCESS_REMOTE_READ;
inline constexpr uint64_t kMrBytes = 64 * 1024;

// ibv_wc values a guest application reads (the uapi names only the send
// side): opcodes IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM; flags, statuses.
inline constexpr uint32_t kWcRecv = 128;
inline constexpr uint32_t kWcRecvRdmaWithImm = 129;
inline constexpr uint32_t kWcFlagGrh = 1;
inline constexpr uint32_t kWcFlagWithImm = 2;
inline constexpr uint32_t kWcSuccess = 0;
inline constexpr uint32_t kWcLocProtErr = 4;
inline constexpr uint32_t kWcWrFlushErr = 5;
inline constexpr uint32_t kWcRemAccessErr = 10;

struct Guest {
  std::unique_ptr<guest::Device> dev;
  std::unique_ptr<guest::Pd> pd;
  std::unique_ptr<guest::Cq> cq;
  std::unique_ptr<guest::Mr> mr;
  guest::GidBytes gid{};

  // Opens the VM's socket and builds PD, CQ and MR. ASSERTs inside.
  void Open(const std::string& socket, uint64_t ram_bytes = 32ull << 20);
  std::unique_ptr<guest::Qp> CreateQp(uint8_t type, uint32_t depth = 32);
  void Close();
};

// Polls until one completion arrives (or timeout_ms passes).
std::optional<ib_uverbs_wc> PollOne(guest::Cq& cq, int timeout_ms = 5000);
// Drives a and b to RTS toward each other (RC/UC), or RTS alone (UD).
void Connect(guest::Qp& a, const guest::GidBytes& gid_a, guest::Qp& b,
             const guest::GidBytes& gid_b);

// A correct SEND from a to b on a fresh QP pair, payload verified: both VMs
// still work. ASSERTs inside.
void ExpectHealthy(Guest& a, Guest& b, uint64_t tag);

class TwoVmTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Extra vhost-rdma-daemon flags (e.g. --policy) for a derived fixture;
  // SetUp adds --rnic $VRDMA_TEST_RNIC when that is set.
  virtual std::vector<std::string> DaemonArgs() const { return {}; }

  DaemonHarness daemon_;
  std::string sock_a_, sock_b_;
  Guest a_, b_;
};

}  // namespace vrdma::integration

#endif  // VRDMA_TESTS_INTEGRATION_TWO_VM_FIXTURE_H_
