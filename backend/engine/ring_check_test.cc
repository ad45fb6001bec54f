// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/ring_check.h"

#include <gtest/gtest.h>

namespace vrdma::engine {
namespace {

RingSpec Ring(uint32_t log2_n, uint32_t log2_e, size_t pages,
              uint64_t base = 0x10000) {
  RingSpec r;
  r.log2_num_elem = log2_n;
  r.log2_elem_size = log2_e;
  for (size_t i = 0; i < pages; ++i) r.pages.push_back(base + i * 4096);
  return r;
}

TEST(RingCheckTest, MinimumElementSizes) {
  EXPECT_EQ(CqMinElemBytes(), 64u);
  EXPECT_EQ(SqMinElemBytes(4, 0), 208u + 64u);
  EXPECT_EQ(SqMinElemBytes(1, 256), 208u + 256u);
  EXPECT_EQ(RqMinElemBytes(2), 40u + 32u);
  EXPECT_EQ(RingBytes(4, 6), 384u + 1024u);
}

struct Case {
  const char* name;
  RingSpec ring;
  uint32_t min_elem;
  uint32_t min_entries;
  Status want;
};

TEST(RingCheckTest, Table) {
  // 16 x 64 B = 1024 + 384 header: one page.
  RingSpec misaligned = Ring(4, 6, 1);
  misaligned.pages[0] += 8;
  const Case cases[] = {
      {"ok cq", Ring(4, 6, 1), 64, 15, Status::kOk},
      {"ok sq two pages", Ring(4, 9, 3), 272, 8, Status::kOk},  // 384+8192
      {"one slot, depth 0", Ring(0, 6, 1), 64, 0, Status::kOk},
      {"one slot, depth 1", Ring(0, 6, 1), 64, 1, Status::kInvalid},
      {"too many elems", Ring(17, 6, 1 << 11), 64, 1, Status::kInvalid},
      {"elem too large", Ring(1, 13, 3), 64, 1, Status::kInvalid},
      {"elem below min (cq 32B)", Ring(4, 5, 1), 64, 1, Status::kInvalid},
      {"elem below sq need", Ring(4, 8, 2), 272, 1, Status::kInvalid},
      {"entries beyond capacity", Ring(4, 6, 1), 64, 16, Status::kInvalid},
      {"no pages", Ring(4, 6, 0), 64, 1, Status::kInvalid},
      {"too few pages", Ring(6, 6, 1), 64, 1, Status::kInvalid},  // 384+4096
      {"extra page", Ring(4, 6, 2), 64, 1, Status::kInvalid},
      {"misaligned page", misaligned, 64, 1, Status::kInvalid},
      {"max ring ok", Ring(16, 6, (384 + (1u << 22) + 4095) / 4096), 64, 65535,
       Status::kOk},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CheckRingGeometry(c.ring, c.min_elem, c.min_entries), c.want)
        << c.name;
  }
}

}  // namespace
}  // namespace vrdma::engine
