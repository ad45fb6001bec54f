// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Layouts of docs/reliability.md §3.1-§3.3 and the checks of §3.6 that need
// no table of the layer. Every multi-byte field but the guest immediate is
// little endian, read and written byte by byte: no struct is laid over the
// packet, so neither alignment nor the host's byte order matters.
#include "backend/reliable_rnic/wire_format.h"

#include <cstring>

#include "backend/base/byte_order.h"

namespace vrdma::reliable {
namespace {

// The guest immediate is already in network order in its uint32_t
// (Wr::imm_data): its memory bytes are the wire bytes.
uint32_t LoadRaw32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
void StoreRaw32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof(v)); }

// §3.2 offsets.
namespace hdr {
constexpr size_t kType = 0, kVersion = 1, kFlags = 2, kReserved = 3,
                 kDstVqpn = 4, kGseq = 8, kMid = 16, kOffUnits = 20,
                 kDataLen = 24, kGuestImm = 28, kMsgLen = 32,
                 kRemoteAddr = 40, kRkey = 48, kConnToken = 52,
                 kRcvIndex = 56, kCredits = 60;
}  // namespace hdr

// §3.3 offsets.
namespace ack {
constexpr size_t kType = 0, kVersion = 1, kN = 2, kFlags = 3, kDstVqpn = 4,
                 kConnToken = 8, kDelivMid = 12, kBaseGseq = 16,
                 kHoldNs = 24, kSample = 28, kNakCode = 29, kReserved = 30,
                 kNakMid = 32, kCredits = 36, kBitmap = 40, kEntries = 48;
}  // namespace ack

constexpr uint8_t kMaxHeaderType = static_cast<uint8_t>(HeaderType::kReadResp);
constexpr uint8_t kMaxNakCode = static_cast<uint8_t>(NakCode::kRemoteOperation);

// Where a MID lies against a window [begin, begin + size), modulo 2^32:
// before it (within 2^31 behind), inside, or at or after its end.
WireCheck MidWindow(uint32_t mid, uint32_t begin, uint32_t size) {
  const uint32_t ahead = mid - begin;
  if (static_cast<int32_t>(ahead) < 0) return WireCounter::kRxAfterDelivery;
  if (ahead >= size) return WireCounter::kRxMidOutsideWindow;
  return std::nullopt;
}

// rx_bad_offset for a piece that is one unit of its message (SEND_DATA,
// WRITE_TAIL, WRITE_RETX, READ_RESP): exactly unit `off` of a message of
// msg_len bytes, with L iff it is the last unit.
bool IsUnitOfMessage(uint64_t off, uint64_t data_len, uint64_t msg_len,
                     bool last) {
  const uint64_t start = off * kUnitSize;  // off < 2^32: no overflow
  if (msg_len == 0) return off == 0 && data_len == 0 && last;
  if (start >= msg_len) return false;
  const uint64_t left = msg_len - start;
  if (data_len != (left < kUnitSize ? left : kUnitSize)) return false;
  return last == (start + data_len == msg_len);
}

}  // namespace

uint32_t ChunkImmToImmData(uint32_t imm) {
  uint8_t b[4] = {static_cast<uint8_t>(imm >> 24),
                  static_cast<uint8_t>(imm >> 16),
                  static_cast<uint8_t>(imm >> 8), static_cast<uint8_t>(imm)};
  return LoadRaw32(b);
}

uint32_t ChunkImmFromImmData(uint32_t imm_data) {
  uint8_t b[4];
  StoreRaw32(b, imm_data);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
         (uint32_t{b[2]} << 8) | b[3];
}

// ---- Header -----------------------------------------------------------------

bool EncodeHeader(const DaemonHeader& h, std::span<uint8_t> out) {
  if (out.size() < kHeaderSize) return false;
  uint8_t* p = out.data();
  p[hdr::kType] = static_cast<uint8_t>(h.type);
  p[hdr::kVersion] = kWireVersion;
  p[hdr::kFlags] = h.flags;
  p[hdr::kReserved] = 0;
  StoreLe32(p + hdr::kDstVqpn, h.dst_vqpn);
  StoreLe64(p + hdr::kGseq, h.gseq);
  StoreLe32(p + hdr::kMid, h.mid);
  StoreLe32(p + hdr::kOffUnits, h.off_units);
  StoreLe32(p + hdr::kDataLen, h.data_len);
  StoreRaw32(p + hdr::kGuestImm, h.guest_imm_be);
  StoreLe64(p + hdr::kMsgLen, h.msg_len);
  StoreLe64(p + hdr::kRemoteAddr, h.remote_addr);
  StoreLe32(p + hdr::kRkey, h.rkey);
  StoreLe32(p + hdr::kConnToken, h.conn_token);
  StoreLe32(p + hdr::kRcvIndex, h.rcv_index);
  StoreLe32(p + hdr::kCredits, h.credits);
  return true;
}

WireCheck ParseHeader(std::span<const uint8_t> bytes, DaemonHeader* out) {
  constexpr WireCheck kBad = WireCounter::kRxMalformed;
  if (bytes.size() < kHeaderSize) return kBad;
  const uint8_t* p = bytes.data();
  const uint8_t type = p[hdr::kType];
  const uint8_t flags = p[hdr::kFlags];
  const uint32_t data_len = LoadLe32(p + hdr::kDataLen);
  if (p[hdr::kVersion] != kWireVersion) return kBad;
  if (type < static_cast<uint8_t>(HeaderType::kSendData) ||
      type > kMaxHeaderType) {
    return kBad;
  }
  if (p[hdr::kReserved] != 0 || (flags & ~kHdrKnownFlags) != 0) return kBad;
  if (data_len > kUnitSize || data_len != bytes.size() - kHeaderSize) {
    return kBad;
  }
  if (static_cast<HeaderType>(type) == HeaderType::kReadReq && data_len != 0) {
    return kBad;
  }
  DaemonHeader h;
  h.type = static_cast<HeaderType>(type);
  h.flags = flags;
  h.dst_vqpn = LoadLe32(p + hdr::kDstVqpn);
  h.gseq = LoadLe64(p + hdr::kGseq);
  h.mid = LoadLe32(p + hdr::kMid);
  h.off_units = LoadLe32(p + hdr::kOffUnits);
  h.data_len = data_len;
  h.guest_imm_be = LoadRaw32(p + hdr::kGuestImm);
  h.msg_len = LoadLe64(p + hdr::kMsgLen);
  h.remote_addr = LoadLe64(p + hdr::kRemoteAddr);
  h.rkey = LoadLe32(p + hdr::kRkey);
  h.conn_token = LoadLe32(p + hdr::kConnToken);
  h.rcv_index = LoadLe32(p + hdr::kRcvIndex);
  h.credits = LoadLe32(p + hdr::kCredits);
  *out = h;
  return std::nullopt;
}

WireCheck CheckHeader(const DaemonHeader& h, const RxContext& ctx) {
  if (h.dst_vqpn != ctx.vqpn) return WireCounter::kRxWrongQp;
  if (h.conn_token != ctx.conn_token) return WireCounter::kRxStaleToken;

  const WireCheck window =
      h.type == HeaderType::kReadResp
          ? MidWindow(h.mid, ctx.read_mid_begin,
                      ctx.read_mid_end - ctx.read_mid_begin)
          : MidWindow(h.mid, ctx.deliv_mid, ctx.mid_window);
  if (window) return window;

  constexpr WireCheck kBadOffset = WireCounter::kRxBadOffset;
  const bool last = (h.flags & kHdrLast) != 0;
  if (h.msg_len > kMidBytes) return kBadOffset;
  if (ctx.known_msg_len && *ctx.known_msg_len != h.msg_len) return kBadOffset;
  switch (h.type) {
    case HeaderType::kReadReq:
      // One piece, the whole request (ParseHeader: no data).
      if (h.off_units != 0 || !last) return kBadOffset;
      break;
    case HeaderType::kWriteTail:
      if (!last) return kBadOffset;
      [[fallthrough]];
    case HeaderType::kSendData:
    case HeaderType::kWriteRetx:
    case HeaderType::kReadResp:
      if (!IsUnitOfMessage(h.off_units, h.data_len, h.msg_len, last)) {
        return kBadOffset;
      }
      break;
  }

  if (h.type == HeaderType::kSendData || h.type == HeaderType::kWriteTail) {
    if (h.rcv_index - ctx.rcv_next >= ctx.rcv_window) {
      return WireCounter::kRxBadRcvIndex;
    }
  }
  return std::nullopt;
}

WireCheck CheckChunk(const ChunkImm& imm, uint32_t mid, uint32_t byte_len,
                     const RxContext& ctx) {
  if (const WireCheck window = MidWindow(mid, ctx.deliv_mid, ctx.mid_window)) {
    return window;
  }
  constexpr WireCheck kBadOffset = WireCounter::kRxBadOffset;
  const uint64_t start = uint64_t{imm.off} * kUnitSize;
  const uint64_t end = start + byte_len;
  if (end > kMidBytes) return kBadOffset;
  if (byte_len == 0 && (imm.off != 0 || !imm.last)) return kBadOffset;
  if (!imm.last) {
    if (byte_len % kUnitSize != 0) return kBadOffset;
    if (ctx.known_msg_len && end >= *ctx.known_msg_len) return kBadOffset;
  } else if (ctx.known_msg_len && end != *ctx.known_msg_len) {
    return kBadOffset;
  }
  return std::nullopt;
}

// ---- ACK ----------------------------------------------------------------------

bool operator==(const Ack& a, const Ack& b) {
  if (a.n != b.n || a.flags != b.flags || a.dst_vqpn != b.dst_vqpn ||
      a.conn_token != b.conn_token || a.deliv_mid != b.deliv_mid ||
      a.base_gseq != b.base_gseq || a.hold_ns != b.hold_ns ||
      a.sample != b.sample || a.nak_code != b.nak_code ||
      a.nak_mid != b.nak_mid || a.credits != b.credits ||
      a.send_bitmap != b.send_bitmap) {
    return false;
  }
  const uint32_t n = a.n < kAckMaxEntries ? a.n : kAckMaxEntries;
  for (uint32_t i = 0; i < n; ++i) {
    if (a.entries[i] != b.entries[i]) return false;
  }
  return true;
}

size_t EncodeAck(const Ack& a, std::span<uint8_t> out) {
  if (a.n > kAckMaxEntries || out.size() < AckSize(a.n)) return 0;
  uint8_t* p = out.data();
  p[ack::kType] = kAckType;
  p[ack::kVersion] = kWireVersion;
  p[ack::kN] = a.n;
  p[ack::kFlags] = a.flags;
  StoreLe32(p + ack::kDstVqpn, a.dst_vqpn);
  StoreLe32(p + ack::kConnToken, a.conn_token);
  StoreLe32(p + ack::kDelivMid, a.deliv_mid);
  StoreLe64(p + ack::kBaseGseq, a.base_gseq);
  StoreLe32(p + ack::kHoldNs, a.hold_ns);
  p[ack::kSample] = a.sample;
  p[ack::kNakCode] = a.nak_code;
  StoreLe16(p + ack::kReserved, 0);
  StoreLe32(p + ack::kNakMid, a.nak_mid);
  StoreLe32(p + ack::kCredits, a.credits);
  StoreLe64(p + ack::kBitmap, a.send_bitmap);
  for (uint32_t i = 0; i < a.n; ++i) {
    StoreLe32(p + ack::kEntries + 4 * i, a.entries[i]);
  }
  return AckSize(a.n);
}

WireCheck ParseAck(std::span<const uint8_t> bytes, Ack* out) {
  constexpr WireCheck kBad = WireCounter::kAckMalformed;
  if (bytes.size() < kAckHeaderSize) return kBad;
  const uint8_t* p = bytes.data();
  const uint8_t n = p[ack::kN];
  if (n > kAckMaxEntries || bytes.size() != AckSize(n)) return kBad;
  if (p[ack::kVersion] != kWireVersion || p[ack::kType] != kAckType) {
    return kBad;
  }
  if ((p[ack::kFlags] & ~kAckKnownFlags) != 0 ||
      LoadLe16(p + ack::kReserved) != 0) {
    return kBad;
  }
  // Every field is written in place (an Ack is 240 bytes to copy); the
  // entries past n are not the ACK's (operator==, EncodeAck).
  Ack& a = *out;
  a.n = n;
  a.flags = p[ack::kFlags];
  a.dst_vqpn = LoadLe32(p + ack::kDstVqpn);
  a.conn_token = LoadLe32(p + ack::kConnToken);
  a.deliv_mid = LoadLe32(p + ack::kDelivMid);
  a.base_gseq = LoadLe64(p + ack::kBaseGseq);
  a.hold_ns = LoadLe32(p + ack::kHoldNs);
  a.sample = p[ack::kSample];
  a.nak_code = p[ack::kNakCode];
  a.nak_mid = LoadLe32(p + ack::kNakMid);
  a.credits = LoadLe32(p + ack::kCredits);
  a.send_bitmap = LoadLe64(p + ack::kBitmap);
  for (uint32_t i = 0; i < n; ++i) {
    a.entries[i] = LoadLe32(p + ack::kEntries + 4 * i);
  }
  return std::nullopt;
}

WireCheck CheckAck(const Ack& a, const AckContext& ctx) {
  if (a.conn_token != ctx.conn_token) return WireCounter::kAckStaleToken;
  // deliv_mid in [acked_mid, next_mid], modulo 2^32.
  if (a.deliv_mid - ctx.acked_mid > ctx.next_mid - ctx.acked_mid) {
    return WireCounter::kAckBadMid;
  }
  if ((a.flags & kAckNak) != 0) {
    if (a.nak_code == 0 || a.nak_code > kMaxNakCode) {
      return WireCounter::kAckBadNak;
    }
    // Sent and not delivered: [deliv_mid, next_mid).
    if (a.nak_mid - a.deliv_mid >= ctx.next_mid - a.deliv_mid) {
      return WireCounter::kAckBadNak;
    }
  } else if (a.nak_code != 0 || a.nak_mid != 0) {
    return WireCounter::kAckBadNak;
  }
  return std::nullopt;
}

WireCheck CheckAckEntry(const Ack& a, uint32_t i, const AckContext& ctx,
                        AckEntry* out) {
  constexpr WireCheck kUnknown = WireCounter::kAckUnknownNumber;
  if (i >= a.n) return kUnknown;
  const uint32_t e = a.entries[i];
  AckEntry entry;
  if (a.entry_is_send(i)) {
    const uint64_t gseq = a.base_gseq + e;
    if (gseq < a.base_gseq || gseq >= ctx.next_gseq) return kUnknown;
    entry.is_send = true;
    entry.gseq = gseq;
  } else {
    if ((e & ~kReliableNumberMask) != 0) return kUnknown;
    const ChunkImm number = DecodeChunkImm(e);
    const uint32_t mid = ExpandMid(number.mid14, ctx.acked_mid);
    if (mid - ctx.acked_mid >= ctx.next_mid - ctx.acked_mid) return kUnknown;
    entry.mid = mid;
    entry.off = number.off;
  }
  *out = entry;
  return std::nullopt;
}

WireCheck CheckAckSampleIndex(const Ack& a) {
  if ((a.flags & kAckSampleValid) != 0 && a.sample >= a.n) {
    return WireCounter::kAckBadSample;
  }
  return std::nullopt;
}

}  // namespace vrdma::reliable
