// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The size of a new chunk (docs/reliability.md §4.1, B §3.4.1):
// min(cwnd - inflight, max_chunk, message bytes left) rounded down to
// units, at least one unit while the window is open (cwnd > inflight), and
// never across a MID (a MID covers 2^16 units of a message, §3.1), so every
// chunk but a message's or MID's last is a whole number of units.
// max_chunk is 64 KiB scaled by target / max(target, srtt), halved at each
// detected loss down to one unit, doubled after each round trip without
// loss up to 64 KiB. A message that one chunk could carry whole is not
// sliced by the window's room while the window holds `whole_ratio` times
// what is left of it (the wait is then short and most of the window stays
// in flight): a slice costs its message's end a round trip, a chunk and an
// ACK more (the tail rule, §2.3). Hint says whether a chunk carries H
// (§3.1): it fills the window or ends the queue. Pure: times are
// parameters (ns).
#ifndef VRDMA_POLICY_RELIABILITY_CHUNK_SIZE_H_
#define VRDMA_POLICY_RELIABILITY_CHUNK_SIZE_H_

#include <algorithm>
#include <cstdint>
#include <optional>

#include "policy/reliability/reliability_constants.h"

namespace vrdma::policy::reliability {

struct ChunkSizeParams {
  uint64_t max_chunk = uint64_t{64} << 10;  // 64 KiB
  // Wait for room rather than slice a message while cwnd >= whole_ratio x
  // its bytes left (0: always slice). At 4, at least 3/4 of the window is
  // in flight while a message waits.
  uint64_t whole_ratio = 4;
};

struct Chunk {
  uint64_t bytes = 0;
  bool last = false;  // ends its MID (L): the message's end or 2^16 units
};

class ChunkSize {
 public:
  explicit ChunkSize(const ChunkSizeParams& params = {})
      : p_(params), max_chunk_(AlignDown(params.max_chunk)) {
    // Next multiplies it by a message's bytes left (< 2^29): kept below
    // 2^32 so that cannot overflow (a larger ratio means the same).
    p_.whole_ratio = std::min<uint64_t>(p_.whole_ratio, uint64_t{1} << 32);
  }

  // The largest chunk now, scaled by the delay: max_chunk x target /
  // max(target, srtt), rounded down to units, at least one unit.
  [[nodiscard]] uint64_t MaxChunk(uint64_t target_ns, uint64_t srtt_ns) const {
    // srtt within the target: unscaled, without a division (the common
    // case; a 64-bit division is tens of cycles, and a WR asks this
    // three times).
    if (srtt_ns <= target_ns) return max_chunk_;
    // max_chunk <= 64 KiB-ish, target < 2^40 ns: no overflow.
    return AlignDown(max_chunk_ * target_ns / srtt_ns);
  }

  // The next new chunk of a message: msg_offset is the byte offset of its
  // first byte in the guest WR (a whole number of units: where the last
  // chunk ended), msg_bytes_left what remains of the WR from there (0: a
  // zero-length message, one zero-length chunk with L). nullopt while the
  // window is closed (inflight >= cwnd), or while the message waits for
  // room to go whole (whole_ratio).
  [[nodiscard]] std::optional<Chunk> Next(uint64_t cwnd, uint64_t inflight,
                                          uint64_t msg_offset,
                                          uint64_t msg_bytes_left,
                                          uint64_t target_ns,
                                          uint64_t srtt_ns) const {
    if (inflight >= cwnd) return std::nullopt;
    const uint64_t max_chunk = MaxChunk(target_ns, srtt_ns);
    const uint64_t size = AlignDown(std::min(cwnd - inflight, max_chunk));
    const uint64_t to_mid_end = kMidBytes - msg_offset % kMidBytes;
    const uint64_t bytes = std::min({size, msg_bytes_left, to_mid_end});
    // cwnd / whole_ratio >= left, without the division.
    if (bytes < msg_bytes_left && inflight > 0 &&
        msg_bytes_left <= std::min(max_chunk, to_mid_end) &&
        p_.whole_ratio != 0 && cwnd >= msg_bytes_left * p_.whole_ratio) {
      return std::nullopt;  // only the room slices it: wait for more
    }
    return Chunk{bytes, bytes == msg_bytes_left || bytes == to_mid_end};
  }

  // H (§3.1, §4.1): the chunk fills the window (inflight after it reaches
  // cwnd) or ends the queue (nothing more to send after it).
  [[nodiscard]] static bool Hint(uint64_t cwnd, uint64_t inflight_after,
                                 bool queue_empty_after) {
    return inflight_after >= cwnd || queue_empty_after;
  }

  // A detected loss: max_chunk halves, down to one unit.
  void OnLoss(uint64_t now_ns) {
    max_chunk_ = AlignDown(max_chunk_ / 2);
    since_ns_ = now_ns;
  }

  // A spurious RTO's halving undone (rto_undo.h): max_chunk as it was
  // before, if larger.
  void Undo(uint64_t max_chunk) {
    max_chunk_ =
        std::max(max_chunk_, AlignDown(std::min(max_chunk, p_.max_chunk)));
  }

  // An ACK at now_ns: a whole round trip (srtt) since the last loss or
  // doubling doubles max_chunk, up to its parameter.
  void OnAck(uint64_t now_ns, uint64_t srtt_ns) {
    const uint64_t top = AlignDown(p_.max_chunk);
    if (max_chunk_ >= top || now_ns < since_ns_ + srtt_ns) return;
    max_chunk_ = std::min(max_chunk_ * 2, top);
    since_ns_ = now_ns;
  }

  // The unscaled max_chunk (after halvings and doublings).
  [[nodiscard]] uint64_t max_chunk() const { return max_chunk_; }

 private:
  // Rounded down to whole units, at least one unit.
  static uint64_t AlignDown(uint64_t bytes) {
    return std::max(bytes - bytes % kUnitSize, kUnitSize);
  }

  ChunkSizeParams p_;
  uint64_t max_chunk_;
  uint64_t since_ns_ = 0;
};

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_CHUNK_SIZE_H_
