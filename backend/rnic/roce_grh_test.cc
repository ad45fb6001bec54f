// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/rnic/roce_grh.h"

#include <gtest/gtest.h>

namespace vrdma {
namespace {

Gid V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

// What Linux checks before it believes a RoCE v2 IPv4 header
// (ib_get_header_version): version 4, IHL 5, a checksum that sums to zero.
TEST(RoceGrh, TwoIpv4GidsGetAnIpv4HeaderAtOffset20) {
  AddressVector av;
  av.sgid = V4(10, 77, 0, 1);
  av.dgid = V4(10, 77, 0, 2);
  av.hop_limit = 64;
  av.traffic_class = 0x10;
  uint8_t g[kGrhBytes];
  std::memset(g, 0xee, sizeof(g));
  BuildRoceGrh(av, 256, g);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(g[i], 0) << i;
  const uint8_t* ip = g + 20;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 0x10);
  EXPECT_EQ((ip[2] << 8) | ip[3], 20 + 8 + 12 + 8 + 256 + 4);
  EXPECT_EQ(ip[8], 64);
  EXPECT_EQ(ip[9], 17);
  EXPECT_EQ(0, std::memcmp(ip + 12, av.sgid.data() + 12, 4));
  EXPECT_EQ(0, std::memcmp(ip + 16, av.dgid.data() + 12, 4));
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += uint32_t{ip[i]} << 8 | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu) << "a header checksum Linux accepts";
}

TEST(RoceGrh, OtherGidsGetAnIpv6HeaderWithUdpNext) {
  AddressVector av;
  av.sgid = V4(10, 0, 0, 1);
  av.dgid[0] = 0xfe;
  av.dgid[1] = 0x80;
  av.dgid[15] = 2;
  av.flow_label = 0x12345;
  av.hop_limit = 3;
  uint8_t g[kGrhBytes];
  BuildRoceGrh(av, 0, g);
  EXPECT_EQ(g[0] >> 4, 6);
  EXPECT_EQ(((g[1] & 0xf) << 16) | (g[2] << 8) | g[3], 0x12345);
  EXPECT_EQ((g[4] << 8) | g[5], 8 + 12 + 8 + 4);
  EXPECT_EQ(g[6], 17);
  EXPECT_EQ(g[7], 3);
  EXPECT_EQ(0, std::memcmp(g + 8, av.sgid.data(), 16));
  EXPECT_EQ(0, std::memcmp(g + 24, av.dgid.data(), 16));
}

}  // namespace
}  // namespace vrdma
