// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test helper: a UDP address of 127.0.0.1 whose port was free a moment ago
// (bound, read back, released), for peer channels in tests.
#ifndef VRDMA_BACKEND_PEER_CHANNEL_TESTING_FREE_ADDRESS_H_
#define VRDMA_BACKEND_PEER_CHANNEL_TESTING_FREE_ADDRESS_H_

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "backend/fabric/udp_fabric.h"

namespace vrdma::peer::testing {

inline fabric::UdpAddress FreeAddress() {
  fabric::UdpAddress a;
  EXPECT_TRUE(fabric::ParseUdpAddress("127.0.0.1:0", &a));
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  EXPECT_EQ(bind(fd, a.sa(), a.len), 0);
  a.len = sizeof(a.storage);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len), 0);
  close(fd);
  return a;
}

}  // namespace vrdma::peer::testing

#endif  // VRDMA_BACKEND_PEER_CHANNEL_TESTING_FREE_ADDRESS_H_
