// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// libFuzzer: arbitrary bytes as an ACK (§3.3), as a SEND with its daemon
// header (§3.2) and as a chunk immediate (§3.1), the way a hostile peer
// daemon could send them. Parsing must never crash, read out of bounds or
// hit undefined behaviour; whatever parses must re-encode to exactly the
// same bytes; and whatever the checks of §3.6 accept must satisfy the
// invariants the layer relies on (abort on violation). The receiver's
// context is taken from the input too, so contexts vary with it.
//
// Seeds (testing/fuzz_reliable_wire_corpus/): a SEND of each header type
// whose gseq (0x10100f3f0000007f) selects a context that accepts it, the
// two ACKs of the golden vectors' shape, and a chunk immediate.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "backend/reliable_rnic/wire_format.h"

namespace {

using namespace vrdma::reliable;

// Reads a little-endian value from the input at pos, zero past its end.
uint64_t Take(std::span<const uint8_t> in, size_t pos, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width && pos + i < in.size(); ++i) {
    v |= uint64_t{in[pos + i]} << (8 * i);
  }
  return v;
}

// The receiver's context from four free values of the input (for a header,
// fields no check reads: gseq, credits, rkey, remote_addr).
RxContext ContextFrom(uint64_t k, uint32_t x, uint32_t y, uint64_t z,
                      const DaemonHeader* h) {
  RxContext c;
  // Half the time the identity matches, so the later checks are reached.
  c.vqpn = (k & 1) && h ? h->dst_vqpn : static_cast<uint32_t>(k >> 8);
  c.conn_token = (k & 2) && h ? h->conn_token : static_cast<uint32_t>(k >> 16);
  c.deliv_mid = (k & 4) && h ? h->mid - static_cast<uint32_t>((k >> 24) & 63)
                             : x;
  c.mid_window = 1 + ((k >> 32) & 127);
  c.read_mid_begin = (k & 32) && h ? h->mid - static_cast<uint32_t>(k >> 60) : y;
  c.read_mid_end = c.read_mid_begin + static_cast<uint32_t>((k >> 40) & 15);
  if (k & 8) c.known_msg_len = (k & 64) && h ? h->msg_len : z >> 35;
  c.rcv_window = static_cast<uint32_t>((k >> 48) & 1023);
  c.rcv_next = (k & 16) && h ? h->rcv_index - c.rcv_window / 2
                             : static_cast<uint32_t>(z);
  return c;
}

void FuzzAck(std::span<const uint8_t> in) {
  Ack a;
  if (ParseAck(in, &a)) return;
  uint8_t out[kAckMaxSize];
  const size_t len = EncodeAck(a, out);
  if (len != in.size() || std::memcmp(out, in.data(), len) != 0) std::abort();

  AckContext ctx{.conn_token = a.conn_token,
                 .acked_mid = a.deliv_mid - static_cast<uint32_t>(in[4] & 7),
                 .next_mid = a.deliv_mid + static_cast<uint32_t>(in[5] & 63),
                 .next_gseq = a.base_gseq + Take(in, 6, 2)};
  if (CheckAck(a, ctx)) return;
  // Accepted: deliv_mid lies in [acked, next]; a NAK names a MID in flight.
  if (a.deliv_mid - ctx.acked_mid > ctx.next_mid - ctx.acked_mid) std::abort();
  if ((a.flags & kAckNak) &&
      (a.nak_code < 1 || a.nak_code > 4 ||
       a.nak_mid - a.deliv_mid >= ctx.next_mid - a.deliv_mid)) {
    std::abort();
  }
  for (uint32_t i = 0; i < a.n; ++i) {
    AckEntry e;
    if (CheckAckEntry(a, i, ctx, &e)) continue;
    if (e.is_send && (e.gseq < a.base_gseq || e.gseq >= ctx.next_gseq)) {
      std::abort();
    }
    if (!e.is_send && e.mid - ctx.acked_mid >= ctx.next_mid - ctx.acked_mid) {
      std::abort();
    }
  }
  if (!CheckAckSampleIndex(a) && (a.flags & kAckSampleValid) &&
      a.sample >= a.n) {
    std::abort();
  }
}

void FuzzHeader(std::span<const uint8_t> in) {
  DaemonHeader h;
  if (ParseHeader(in, &h)) return;
  uint8_t out[kHeaderSize];
  if (!EncodeHeader(h, out) || std::memcmp(out, in.data(), kHeaderSize) != 0) {
    std::abort();
  }
  if (h.data_len != in.size() - kHeaderSize || h.data_len > kUnitSize) {
    std::abort();
  }
  const RxContext ctx =
      ContextFrom(h.gseq, h.credits, h.rkey, h.remote_addr, &h);
  if (CheckHeader(h, ctx)) return;
  // Accepted: the piece lies inside its message, its message inside one
  // MID, and the MID inside the window the receiver's ring covers.
  const uint64_t start = uint64_t{h.off_units} * kUnitSize;
  if (h.msg_len > kMidBytes || start + h.data_len > h.msg_len) std::abort();
  if (ctx.known_msg_len && *ctx.known_msg_len != h.msg_len) std::abort();
  if (h.type == HeaderType::kReadResp) {
    if (h.mid - ctx.read_mid_begin >= ctx.read_mid_end - ctx.read_mid_begin) {
      std::abort();
    }
  } else if (h.mid - ctx.deliv_mid >= ctx.mid_window) {
    std::abort();
  }
  if ((h.type == HeaderType::kSendData || h.type == HeaderType::kWriteTail) &&
      h.rcv_index - ctx.rcv_next >= ctx.rcv_window) {
    std::abort();
  }
}

void FuzzChunk(std::span<const uint8_t> in) {
  if (in.size() < 8) return;
  const uint32_t imm = static_cast<uint32_t>(Take(in, 0, 4));
  const uint32_t byte_len = static_cast<uint32_t>(Take(in, 4, 4));
  const ChunkImm c = DecodeChunkImm(imm);
  if (EncodeChunkImm(c) != imm) std::abort();
  if (ChunkImmFromImmData(ChunkImmToImmData(imm)) != imm) std::abort();
  const RxContext ctx = ContextFrom(Take(in, 8, 8), static_cast<uint32_t>(Take(in, 16, 4)),
                                    static_cast<uint32_t>(Take(in, 20, 4)),
                                    Take(in, 24, 8), nullptr);
  const uint32_t mid = ExpandMid(c.mid14, ctx.deliv_mid);
  if ((mid & kMidLowMask) != c.mid14) std::abort();
  const int32_t ahead = static_cast<int32_t>(mid - ctx.deliv_mid);
  if (ahead < -8192 || ahead >= 8192) std::abort();
  if (CheckChunk(c, mid, byte_len, ctx)) return;
  if (mid - ctx.deliv_mid >= ctx.mid_window) std::abort();
  if (uint64_t{c.off} * kUnitSize + byte_len > kMidBytes) std::abort();
  if (!c.last && (byte_len == 0 || byte_len % kUnitSize != 0)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  FuzzAck(in);
  FuzzHeader(in);
  FuzzChunk(in);
  return 0;
}
