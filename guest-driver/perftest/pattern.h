// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The --verify data pattern: every byte of a message is a function of
// (QP index, iteration, byte offset), so a receiver can check a payload it
// did not see being written, and a stale or misplaced message is caught.
#ifndef VRDMA_GUEST_DRIVER_PERFTEST_PATTERN_H_
#define VRDMA_GUEST_DRIVER_PERFTEST_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vrdma::perftest {

inline uint64_t PatternWord(uint32_t qp, uint64_t iter, uint64_t word) {
  uint64_t x = (iter + 1) * 0x9E3779B97F4A7C15ull ^ (word + 1) * 0xBF58476D1CE4E5B9ull ^
               (uint64_t{qp} + 1) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

inline void FillPattern(uint8_t* p, size_t len, uint32_t qp, uint64_t iter) {
  size_t w = 0;
  for (; (w + 1) * 8 <= len; ++w) {
    const uint64_t v = PatternWord(qp, iter, w);
    std::memcpy(p + w * 8, &v, 8);
  }
  if (w * 8 < len) {
    const uint64_t v = PatternWord(qp, iter, w);
    std::memcpy(p + w * 8, &v, len - w * 8);
  }
}

// Returns the offset of the first wrong byte, or len when all match.
inline size_t CheckPattern(const uint8_t* p, size_t len, uint32_t qp, uint64_t iter) {
  size_t w = 0;
  for (; (w + 1) * 8 <= len; ++w) {
    const uint64_t v = PatternWord(qp, iter, w);
    if (std::memcmp(p + w * 8, &v, 8) != 0) {
      for (size_t b = 0; b < 8; ++b) {
        if (p[w * 8 + b] != reinterpret_cast<const uint8_t*>(&v)[b]) return w * 8 + b;
      }
    }
  }
  if (w * 8 < len) {
    const uint64_t v = PatternWord(qp, iter, w);
    for (size_t b = 0; w * 8 + b < len; ++b) {
      if (p[w * 8 + b] != reinterpret_cast<const uint8_t*>(&v)[b]) return w * 8 + b;
    }
  }
  return len;
}

// Latency tests poll the last byte of the buffer for the iteration's
// sequence byte (never 0, and different for consecutive iterations).
inline uint8_t SeqByte(uint64_t iter) { return static_cast<uint8_t>(iter % 255 + 1); }

}  // namespace vrdma::perftest

#endif  // VRDMA_GUEST_DRIVER_PERFTEST_PATTERN_H_
