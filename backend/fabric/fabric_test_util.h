// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test helpers for fabrics: two hosts on an InprocFabric, numbered packets
// that carry their send time, and a receiver that records what arrived.
#ifndef VRDMA_BACKEND_FABRIC_FABRIC_TEST_UTIL_H_
#define VRDMA_BACKEND_FABRIC_FABRIC_TEST_UTIL_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "backend/fabric/fabric.h"

namespace vrdma::fabric::testing {

inline Gid HostGid(uint8_t id) {
  return Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};
}

// A packet of len bytes (>= 16): its number, then its send time.
struct TestPacket {
  std::array<uint8_t, kMaxPacketBytes> bytes{};
  uint32_t len = 0;
  TestPacket(uint64_t seq, uint64_t sent_ns, uint32_t size) : len(size) {
    std::memcpy(&bytes[0], &seq, 8);
    std::memcpy(&bytes[8], &sent_ns, 8);
  }
  std::span<const uint8_t> span() const { return {bytes.data(), len}; }
};

struct Arrival {
  uint64_t seq = 0;
  uint64_t sent_ns = 0;
  uint64_t arrival_ns = 0;
  uint32_t len = 0;
};

// Polls port at now_ns until it has nothing more, recording every packet.
inline void Collect(Fabric* port, uint64_t now_ns, std::vector<Arrival>* out) {
  std::array<Datagram, 32> batch;
  for (;;) {
    const int n = port->Poll(batch, now_ns);
    for (int i = 0; i < n; ++i) {
      Arrival a;
      std::memcpy(&a.seq, batch[i].data, 8);
      std::memcpy(&a.sent_ns, batch[i].data + 8, 8);
      a.arrival_ns = batch[i].arrival_ns;
      a.len = batch[i].len;
      out->push_back(a);
    }
    if (n < static_cast<int>(batch.size())) return;
  }
}

}  // namespace vrdma::fabric::testing

#endif  // VRDMA_BACKEND_FABRIC_FABRIC_TEST_UTIL_H_
