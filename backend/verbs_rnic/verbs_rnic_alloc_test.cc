// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// VerbsRnic's data path allocates nothing, libibverbs and the provider
// included: this binary interposes malloc, calloc and realloc (every
// library in the process, the dlopen'ed provider too, resolves them here
// first) and counts calls while a data-path loop runs on the device
// VRDMA_TEST_RNIC names: PostRecv, PostSend (WRITE, SEND, inline SEND),
// PollCq, PollAsyncEvent, ArmCompletions, DrainCompletionFd. Skips, saying
// so, without a device. Own binary: it replaces the allocator.
#include <poll.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/verbs_rnic/testing/verbs_loopback.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
}

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
}  // namespace

extern "C" void* malloc(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  return __libc_malloc(n);
}
extern "C" void* calloc(size_t n, size_t m) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  return __libc_calloc(n, m);
}
extern "C" void* realloc(void* p, size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  return __libc_realloc(p, n);
}

namespace vrdma::testing {
namespace {

TEST_F(VerbsRnicTest, DataPathAllocatesNothing) {
  Result<RnicPd> pd = rnic_->AllocPd();
  Result<RnicCq> cq = rnic_->CreateCq(256);
  ASSERT_TRUE(pd.ok() && cq.ok());
  std::span<uint8_t> a = Pages(4), b = Pages(4);
  Result<RnicMr> ma = rnic_->RegMr(*pd, a.data(), a.size(), 0xa0000000, kAllAccess);
  Result<RnicMr> mb = rnic_->RegMr(*pd, b.data(), b.size(), 0xb0000000, kAllAccess);
  ASSERT_TRUE(ma.ok() && mb.ok());
  auto [qa, qb] = ConnectedPair(*pd, *cq);
  ASSERT_NE(qa.id, 0u);

  RecvWr r;
  r.num_sge = 1;
  r.sge[0] = {0xb0000000 + 8192, 4096, mb->lkey};
  static const uint8_t kInline[16] = "inline payload";
  SendWr w[3];
  w[0].opcode = WrOpcode::kRdmaWrite;
  w[0].send_flags = kSendSignaled;
  w[0].num_sge = 1;
  w[0].sge[0] = {0xa0000000, 2048, ma->lkey};
  w[0].remote_addr = 0xb0000000;
  w[0].rkey = mb->rkey;
  w[1].opcode = WrOpcode::kSend;
  w[1].send_flags = kSendSignaled;
  w[1].num_sge = 1;
  w[1].sge[0] = {0xa0000000 + 4096, 512, ma->lkey};
  w[2].opcode = WrOpcode::kSend;
  w[2].send_flags = kSendSignaled | kSendInline;
  w[2].inline_len = sizeof(kInline);
  w[2].inline_data = kInline;
  Completion c[16];
  AsyncEvent ev;
  const int fd = rnic_->completion_fd();
  int completions = 0, errors = 0, posted = 0;
  constexpr int kRounds = 50;

  g_counting = true;
  for (int round = 0; round < kRounds; ++round) {
    Status err = Status::kOk;
    r.wr_id = 2 * round;
    posted += rnic_->PostRecv(qb, std::span<const RecvWr>(&r, 1), &err);
    r.wr_id = 2 * round + 1;
    posted += rnic_->PostRecv(qb, std::span<const RecvWr>(&r, 1), &err);
    rnic_->ArmCompletions();
    posted += rnic_->PostSend(qa, std::span<const SendWr>(w, 3), &err);
    int want = 5, got = 0;  // 3 sends + 2 receives
    for (long spin = 0; spin < 50'000'000 && got < want; ++spin) {
      const int n = rnic_->PollCq(*cq, c);
      for (int i = 0; i < n; ++i) errors += c[i].status != WcStatus::kSuccess;
      got += n;
    }
    completions += got;
    pollfd p{fd, POLLIN, 0};
    (void)poll(&p, 1, 0);
    rnic_->DrainCompletionFd();
    while (rnic_->PollAsyncEvent(&ev)) {
    }
  }
  g_counting = false;

  EXPECT_EQ(posted, kRounds * 5);
  EXPECT_EQ(completions, kRounds * 5);
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(g_allocs.load(), 0) << "malloc/calloc/realloc calls on the data path";
  EXPECT_EQ(std::memcmp(b.data() + 8192, kInline, sizeof(kInline)), 0);
  for (RnicQp q : {qa, qb}) EXPECT_EQ(rnic_->DestroyQp(q), Status::kOk);
  EXPECT_EQ(rnic_->DeregMr(*ma), Status::kOk);
  EXPECT_EQ(rnic_->DeregMr(*mb), Status::kOk);
  EXPECT_EQ(rnic_->DestroyCq(*cq), Status::kOk);
  EXPECT_EQ(rnic_->DeallocPd(*pd), Status::kOk);
}

// The interposition works: a malloc in the window is counted (so the zero
// above means something). Runs without a device.
TEST(VerbsRnicAllocCounter, CountsMalloc) {
  g_allocs = 0;
  g_counting = true;
  void* volatile p = std::malloc(24);
  g_counting = false;
  std::free(p);
  EXPECT_EQ(g_allocs.load(), 1);
  g_allocs = 0;
}

}  // namespace
}  // namespace vrdma::testing
