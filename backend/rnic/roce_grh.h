// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The 40 bytes a UD receive gets in front of its payload, as a RoCE v2 RNIC
// delivers them (docs/virtio-rdma.md §2.1): between two IPv4-mapped GIDs,
// 20 zero bytes and the IPv4 header; otherwise the IPv6 header. Both name
// UDP as the next protocol and carry a valid IPv4 checksum, which is what
// Linux's ib_get_net_type_by_grh() and ib_get_gids_from_rdma_hdr() parse
// to answer a datagram (RDMA CM, udaddy, ibv_ud_pingpong).
#ifndef VRDMA_BACKEND_RNIC_ROCE_GRH_H_
#define VRDMA_BACKEND_RNIC_ROCE_GRH_H_

#include <cstdint>
#include <cstring>

#include "backend/rnic/rnic.h"

namespace vrdma {

inline constexpr uint32_t kGrhBytes = 40;

inline bool IsV4MappedGid(const Gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.data(), kPrefix, sizeof(kPrefix)) == 0;
}

// payload_len: the datagram's payload (after BTH and DETH).
inline void BuildRoceGrh(const AddressVector& av, uint32_t payload_len, uint8_t* g) {
  constexpr uint32_t kUdp = 8, kBth = 12, kDeth = 8, kIcrc = 4;
  constexpr uint8_t kProtoUdp = 17;
  const uint32_t l4 = kUdp + kBth + kDeth + payload_len + kIcrc;
  std::memset(g, 0, kGrhBytes);
  if (IsV4MappedGid(av.sgid) && IsV4MappedGid(av.dgid)) {
    uint8_t* ip = g + 20;
    const uint32_t total = 20 + l4;
    ip[0] = 0x45;  // version 4, IHL 5
    ip[1] = av.traffic_class;
    ip[2] = static_cast<uint8_t>(total >> 8);
    ip[3] = static_cast<uint8_t>(total);
    ip[6] = 0x40;  // don't fragment
    ip[8] = av.hop_limit;
    ip[9] = kProtoUdp;
    std::memcpy(ip + 12, av.sgid.data() + 12, 4);
    std::memcpy(ip + 16, av.dgid.data() + 12, 4);
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += uint32_t{ip[i]} << 8 | ip[i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const uint16_t check = static_cast<uint16_t>(~sum);
    ip[10] = static_cast<uint8_t>(check >> 8);
    ip[11] = static_cast<uint8_t>(check);
    return;
  }
  g[0] = static_cast<uint8_t>(0x60 | (av.traffic_class >> 4));
  g[1] = static_cast<uint8_t>((av.traffic_class << 4) | ((av.flow_label >> 16) & 0xf));
  g[2] = static_cast<uint8_t>(av.flow_label >> 8);
  g[3] = static_cast<uint8_t>(av.flow_label);
  g[4] = static_cast<uint8_t>(l4 >> 8);
  g[5] = static_cast<uint8_t>(l4);
  g[6] = kProtoUdp;
  g[7] = av.hop_limit;
  std::memcpy(g + 8, av.sgid.data(), 16);
  std::memcpy(g + 24, av.dgid.data(), 16);
}

}  // namespace vrdma

#endif  // VRDMA_BACKEND_RNIC_ROCE_GRH_H_
