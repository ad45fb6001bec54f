// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Little-endian loads and stores at any alignment, byte by byte: for bytes
// another host wrote (the daemon-to-daemon wire, the peer channel), so
// neither alignment nor the host's byte order matters and no struct is laid
// over untrusted bytes.
#ifndef VRDMA_BACKEND_BASE_BYTE_ORDER_H_
#define VRDMA_BACKEND_BASE_BYTE_ORDER_H_

#include <cstdint>

namespace vrdma {

inline uint16_t LoadLe16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
inline uint32_t LoadLe32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) |
         (uint32_t{p[3]} << 24);
}
inline uint64_t LoadLe64(const uint8_t* p) {
  return uint64_t{LoadLe32(p)} | (uint64_t{LoadLe32(p + 4)} << 32);
}
inline void StoreLe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void StoreLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void StoreLe64(uint8_t* p, uint64_t v) {
  StoreLe32(p, static_cast<uint32_t>(v));
  StoreLe32(p + 4, static_cast<uint32_t>(v >> 32));
}

}  // namespace vrdma

#endif  // VRDMA_BACKEND_BASE_BYTE_ORDER_H_
