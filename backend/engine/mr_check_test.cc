// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/mr_check.h"

#include <gtest/gtest.h>

namespace vrdma::engine {
namespace {

RegMrRequest Mr(uint32_t access, uint64_t iova, uint64_t len, uint32_t off,
                size_t pages) {
  RegMrRequest r;
  r.pd = 1;
  r.access = access;
  r.iova = iova;
  r.length = len;
  r.first_page_offset = off;
  for (size_t i = 0; i < pages; ++i) r.pages.push_back(0x100000 + i * 4096);
  return r;
}

struct Case {
  const char* name;
  RegMrRequest req;
  Status want;
};

TEST(MrCheckTest, Table) {
  constexpr uint32_t LW = VIRTIO_RDMA_ACCESS_LOCAL_WRITE;
  constexpr uint32_t RW = VIRTIO_RDMA_ACCESS_REMOTE_WRITE;
  constexpr uint32_t RR = VIRTIO_RDMA_ACCESS_REMOTE_READ;
  constexpr uint32_t RA = VIRTIO_RDMA_ACCESS_REMOTE_ATOMIC;
  RegMrRequest unaligned = Mr(LW, 0, 4096, 0, 2);
  unaligned.pages[1] += 1;
  const Case cases[] = {
      {"ok one page", Mr(LW, 0x1000, 4096, 0, 1), Status::kOk},
      {"ok offset", Mr(LW | RW | RR, 0x1010, 8000, 16, 2), Status::kOk},
      {"ok read only", Mr(0, 0, 1, 4095, 1), Status::kOk},
      {"ok remote read without local write", Mr(RR, 0, 10, 0, 1), Status::kOk},
      {"unknown access bit", Mr(LW | 0x10, 0, 10, 0, 1), Status::kInvalid},
      {"high access bit", Mr(0x80000000u | LW, 0, 10, 0, 1), Status::kInvalid},
      {"remote write without local write", Mr(RW, 0, 10, 0, 1),
       Status::kInvalid},
      {"remote atomic without local write", Mr(RA | RR, 0, 10, 0, 1),
       Status::kInvalid},
      {"remote atomic with local write", Mr(RA | LW, 0, 10, 0, 1), Status::kOk},
      {"zero length", Mr(LW, 0, 0, 0, 1), Status::kInvalid},
      {"offset 4096", Mr(LW, 0, 1, 4096, 2), Status::kInvalid},
      {"offset huge", Mr(LW, 0, 1, 0xffffffffu, 1), Status::kInvalid},
      {"beyond pages", Mr(LW, 0, 4097, 0, 1), Status::kInvalid},
      {"offset pushes beyond", Mr(LW, 0, 4096, 1, 1), Status::kInvalid},
      {"exactly to end", Mr(LW, 0, 4095, 1, 1), Status::kOk},
      {"length wraps with offset", Mr(LW, 0, ~0ull - 2, 16, 1),
       Status::kInvalid},
      {"length 2^64-1", Mr(LW, 0, ~0ull, 0, 1), Status::kInvalid},
      {"iova wraps", Mr(LW, ~0ull - 100, 4096, 0, 1), Status::kInvalid},
      {"iova to top exactly", Mr(LW, ~0ull - 4096 + 1, 4095, 0, 1),
       Status::kOk},
      {"no pages", Mr(LW, 0, 1, 0, 0), Status::kInvalid},
      {"too many pages", Mr(LW, 0, 1, 0, kMaxMrPages + 1), Status::kInvalid},
      {"unaligned page", unaligned, Status::kInvalid},
  };
  for (const Case& c : cases)
    EXPECT_EQ(CheckRegMr(c.req, MrLimits{}), c.want) << c.name;
}

TEST(MrCheckTest, MwBindOnlyWithWindows) {
  constexpr uint32_t kBind = VIRTIO_RDMA_ACCESS_MW_BIND;
  MrLimits with;
  with.windows = true;
  EXPECT_EQ(CheckRegMr(Mr(kBind, 0, 10, 0, 1), MrLimits{}), Status::kInvalid);
  EXPECT_EQ(CheckRegMr(Mr(kBind, 0, 10, 0, 1), with), Status::kOk);
  EXPECT_EQ(CheckRegMr(Mr(kBind | VIRTIO_RDMA_ACCESS_LOCAL_WRITE, 0, 10, 0, 1), with),
            Status::kOk);
  EXPECT_EQ(CheckRegMr(Mr(kBind | 0x20, 0, 10, 0, 1), with), Status::kInvalid);  // zero-based
}

TEST(MrCheckTest, MaxMrSizeEnforced) {
  MrLimits lim;
  lim.max_mr_size = 8192;
  EXPECT_EQ(CheckRegMr(Mr(0, 0, 8192, 0, 2), lim), Status::kOk);
  EXPECT_EQ(CheckRegMr(Mr(0, 0, 8193, 0, 3), lim), Status::kInvalid);
}

}  // namespace
}  // namespace vrdma::engine
