// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The wire between daemons of issue 15 (docs/reliability.md §3): the chunk
// immediate (§3.1), the 64-byte daemon header (§3.2), the ACK (§3.3), MID
// expansion (§3.4), and every check of §3.6 that the bytes alone, plus what
// the receiver tells about itself (RxContext, AckContext), can decide.
//
// Pure functions: no I/O, no clock, no allocation, no globals, so the data
// path, the tests and fuzz_reliable_wire drive them alike. Fields are read
// byte by byte from the caller's bytes (little endian, any alignment); the
// guest immediate is copied as it is (network order, as Wr::imm_data).
//
// How a packet is checked (§3.6: in this order, the first failure drops it
// and counts one counter):
//
//   ACK:    ParseAck                 ack_malformed
//           the layer: dst_vqpn      ack_unknown_qp      (its QP table)
//           CheckAck                 ack_stale_token, ack_bad_mid, ack_bad_nak
//           per entry: CheckAckEntry ack_unknown_number  (range part), then
//             the layer's chunk table ("names nothing in flight") with the
//             entry CheckAckEntry returned; the entry is skipped, not the ACK
//           CheckAckSampleIndex      ack_bad_sample      (index part), then
//             policy/reliability/rtt_estimator.h RttSampleNs with the
//             entry's T1 (hold_ns > T4 - T1 takes no sample)
//   SEND:   ParseHeader              rx_malformed
//           (the layer finds the message record of header.mid, if any, and
//            gives its length in RxContext::known_msg_len)
//           CheckHeader              rx_wrong_qp, rx_stale_token,
//                                    rx_after_delivery, rx_mid_outside_window,
//                                    rx_bad_offset, rx_bad_rcv_index
//           the layer: rx_access_nak (MrTable), rx_duplicate and
//             rx_ranges_full (its range list), rx_lower_error (completions)
//   chunk:  DecodeChunkImm, ExpandMid (every immediate parses; no token,
//           open question 3), then the record as above, then
//           CheckChunk               rx_after_delivery, rx_mid_outside_window,
//                                    rx_bad_offset
//
// ack_unknown_number and ack_bad_sample do not drop the ACK (§3.6): they are
// decided after every check that does, so CheckAck's bad_nak comes before
// them here although the table lists it after unknown_number.
//
// Every packet Parse* accepts re-encodes (Encode*) to the same bytes: the
// fuzz target checks it. Fields a type does not use are carried, not
// checked; reserved bytes and unknown flag bits must be zero (malformed),
// and an ACK without the NAK flag has nak_code and nak_mid 0 (ack_bad_nak).
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_WIRE_FORMAT_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_WIRE_FORMAT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "policy/reliability/reliability_constants.h"

namespace vrdma::reliable {

using policy::reliability::kMidBytes;
using policy::reliability::kUnitSize;
using policy::reliability::kUnitsPerMid;

// ---- Counters (§3.6), in check order ----------------------------------------

// Every counter a received packet can hit, in the order the checks run.
// rx_after_delivery and rx_duplicate are §3.4's: the packet is acknowledged
// again, not dropped silently. Which counters the layer decides (with its
// tables) and which this file does is in the comment at the top.
enum class WireCounter : uint8_t {
  kAckMalformed,
  kAckUnknownQp,
  kAckStaleToken,
  kAckBadMid,
  kAckUnknownNumber,
  kAckBadNak,
  kAckBadSample,
  kRxMalformed,
  kRxWrongQp,
  kRxStaleToken,
  kRxAfterDelivery,
  kRxMidOutsideWindow,
  kRxBadOffset,
  kRxBadRcvIndex,
  kRxAccessNak,
  kRxDuplicate,
  kRxRangesFull,
  kRxLowerError,
  kCount,
};
inline constexpr size_t kWireCounterCount =
    static_cast<size_t>(WireCounter::kCount);

// What the layer does with a packet that hit the counter (§3.6, §3.4).
enum class WireAction : uint8_t {
  kDrop,           // dropped, unacknowledged
  kAckAgain,       // nothing written, acknowledged again
  kSkipEntry,      // this ACK entry skipped, the rest of the ACK used
  kNoSample,       // the ACK used, no RTT sample taken
  kNak,            // the message is NAKed
  kRepost,         // the receive buffer is reposted
};

struct WireCounterInfo {
  const char* name;  // as stats.reliability and metrics show it
  WireAction action;
};

inline constexpr std::array<WireCounterInfo, kWireCounterCount> kWireCounters{{
    {"ack_malformed", WireAction::kDrop},
    {"ack_unknown_qp", WireAction::kDrop},
    {"ack_stale_token", WireAction::kDrop},
    {"ack_bad_mid", WireAction::kDrop},
    {"ack_unknown_number", WireAction::kSkipEntry},
    {"ack_bad_nak", WireAction::kDrop},
    {"ack_bad_sample", WireAction::kNoSample},
    {"rx_malformed", WireAction::kDrop},
    {"rx_wrong_qp", WireAction::kDrop},
    {"rx_stale_token", WireAction::kDrop},
    {"rx_after_delivery", WireAction::kAckAgain},
    {"rx_mid_outside_window", WireAction::kDrop},
    {"rx_bad_offset", WireAction::kDrop},
    {"rx_bad_rcv_index", WireAction::kDrop},
    {"rx_access_nak", WireAction::kNak},
    {"rx_duplicate", WireAction::kAckAgain},
    {"rx_ranges_full", WireAction::kDrop},
    {"rx_lower_error", WireAction::kRepost},
}};

constexpr const char* WireCounterName(WireCounter c) {
  return c < WireCounter::kCount ? kWireCounters[static_cast<size_t>(c)].name
                                 : "unknown";
}
constexpr WireAction WireCounterAction(WireCounter c) {
  return c < WireCounter::kCount ? kWireCounters[static_cast<size_t>(c)].action
                                 : WireAction::kDrop;
}

// A check's result: nullopt when the packet passed, else the counter of the
// first check it failed.
using WireCheck = std::optional<WireCounter>;

// ---- Wire constants ---------------------------------------------------------

inline constexpr uint8_t kWireVersion = 1;
// §3.4: the receiver's ring of message records, rx_messages_per_qp.
inline constexpr uint32_t kRxMessagesPerQp = 64;

// ---- §3.1 The chunk immediate -----------------------------------------------

inline constexpr uint32_t kImmHint = 1u << 31;
inline constexpr uint32_t kImmLast = 1u << 30;
inline constexpr uint32_t kMidLowBits = 14;
inline constexpr uint32_t kMidLowMask = (1u << kMidLowBits) - 1;
// A chunk's reliable number: imm & kReliableNumberMask (MID low bits, OFF).
inline constexpr uint32_t kReliableNumberMask = 0x3fffffff;

struct ChunkImm {
  bool hint = false;   // H: ACK now
  bool last = false;   // L: the message's last chunk
  uint16_t mid14 = 0;  // the MID's low 14 bits (0..0x3fff)
  uint16_t off = 0;    // the chunk's first unit in the message

  friend bool operator==(const ChunkImm&, const ChunkImm&) = default;
};

// The immediate as a number (bit 31 = H); mid14 is masked to 14 bits.
[[nodiscard]] constexpr uint32_t EncodeChunkImm(const ChunkImm& c) {
  return (c.hint ? kImmHint : 0) | (c.last ? kImmLast : 0) |
         ((uint32_t{c.mid14} & kMidLowMask) << 16) | c.off;
}
[[nodiscard]] constexpr ChunkImm DecodeChunkImm(uint32_t imm) {
  return ChunkImm{.hint = (imm & kImmHint) != 0,
                  .last = (imm & kImmLast) != 0,
                  .mid14 = static_cast<uint16_t>((imm >> 16) & kMidLowMask),
                  .off = static_cast<uint16_t>(imm & 0xffff)};
}
[[nodiscard]] constexpr uint32_t ReliableNumber(uint32_t mid, uint16_t off) {
  return ((mid & kMidLowMask) << 16) | off;
}
// The immediate number to and from Wr::imm_data / Completion::imm_data,
// which hold it in network order (bit 31 in the first byte on the wire).
[[nodiscard]] uint32_t ChunkImmToImmData(uint32_t imm);
[[nodiscard]] uint32_t ChunkImmFromImmData(uint32_t imm_data);

// §3.4: the one MID congruent to mid14 modulo 2^14 in
// [reference - 8192, reference + 8192) (modulo 2^32). The receiver's
// reference is its deliv_mid, so [deliv_mid, deliv_mid + 8192) as §3.4 says,
// and the other half of the 14-bit space names MIDs already delivered
// (rx_after_delivery); the sender's is its acked MID (ACK entries).
[[nodiscard]] constexpr uint32_t ExpandMid(uint32_t mid14, uint32_t reference) {
  constexpr uint32_t kSpace = kMidLowMask + 1;  // 16384
  const uint32_t ahead = (mid14 - reference) & kMidLowMask;
  return ahead < kSpace / 2 ? reference + ahead : reference + ahead - kSpace;
}

// ---- §3.2 The daemon header -------------------------------------------------

inline constexpr size_t kHeaderSize = 64;

enum class HeaderType : uint8_t {
  kSendData = 1,
  kWriteTail = 2,
  kWriteRetx = 3,
  kReadReq = 4,
  kReadResp = 5,
};

inline constexpr uint8_t kHdrHint = 0x1;
inline constexpr uint8_t kHdrLast = 0x2;
inline constexpr uint8_t kHdrSolicited = 0x4;
inline constexpr uint8_t kHdrWithImm = 0x8;
inline constexpr uint8_t kHdrRetransmission = 0x10;
inline constexpr uint8_t kHdrKnownFlags = 0x1f;

struct DaemonHeader {
  HeaderType type = HeaderType::kSendData;
  uint8_t flags = 0;            // kHdr*
  uint32_t dst_vqpn = 0;        // the receiving virtual QPN
  uint64_t gseq = 0;            // global number of this transmission
  uint32_t mid = 0;             // full 32-bit MID
  uint32_t off_units = 0;       // this piece's first unit in the message
  uint32_t data_len = 0;        // bytes after the header, <= kUnitSize
  uint32_t guest_imm_be = 0;    // network order, copied as Wr::imm_data
  uint64_t msg_len = 0;         // the message's (READ_REQ: the READ's)
  uint64_t remote_addr = 0;     // WRITE_TAIL/RETX: target; READ_REQ: source
  uint32_t rkey = 0;
  uint32_t conn_token = 0;
  uint32_t rcv_index = 0;       // SEND_DATA, WRITE_TAIL
  uint32_t credits = 0;         // receives posted since connect

  friend bool operator==(const DaemonHeader&, const DaemonHeader&) = default;
};

// Writes the 64 header bytes into out[0, 64); false (nothing written) when
// out is shorter. No check: the sender's own values.
[[nodiscard]] bool EncodeHeader(const DaemonHeader& h,
                                std::span<uint8_t> out);

// rx_malformed: bytes is the whole received SEND (its completion's
// byte_len): at least 64 bytes, version 1, a known type, reserved byte 0,
// no unknown flag, data_len <= 4096 and == bytes.size() - 64, and a
// READ_REQ carries no data. On success *out is the header; the data is
// bytes.subspan(64).
[[nodiscard]] WireCheck ParseHeader(std::span<const uint8_t> bytes,
                                    DaemonHeader* out);

// What the receiving end of a virtual QP knows when a piece arrives.
struct RxContext {
  uint32_t vqpn = 0;        // the virtual QP of the data QP it arrived on
  uint32_t conn_token = 0;  // the connection's
  // Receiver of this direction: every MID below deliv_mid is delivered;
  // records exist for [deliv_mid, deliv_mid + mid_window).
  uint32_t deliv_mid = 0;
  uint32_t mid_window = kRxMessagesPerQp;
  // READ_RESP names a READ of this end's own send direction: the MIDs of
  // READs not yet complete lie in [read_mid_begin, read_mid_end) (oldest
  // incomplete READ, this end's next MID). Whether the MID is a READ is the
  // layer's (its message table).
  uint32_t read_mid_begin = 0;
  uint32_t read_mid_end = 0;
  // The message length an earlier piece of this MID gave (its record).
  std::optional<uint64_t> known_msg_len;
  // rcv_index window (§3.4): the index of the oldest receive-consuming
  // message not yet delivered, and the receiver's RQ depth.
  uint32_t rcv_next = 0;
  uint32_t rcv_window = 0;
};

// The checks of a parsed header against the receiver, in §3.6's order:
//   rx_wrong_qp:           dst_vqpn == ctx.vqpn
//   rx_stale_token:        conn_token == ctx.conn_token
//   rx_after_delivery:     mid before deliv_mid (READ_RESP: before
//                          read_mid_begin), modulo 2^32
//   rx_mid_outside_window: mid at or after deliv_mid + mid_window
//                          (READ_RESP: read_mid_end)
//   rx_bad_offset:         msg_len <= 256 MiB (one MID); msg_len ==
//                          known_msg_len when known; READ_REQ: off_units 0
//                          and L; every other type: the piece is exactly
//                          unit off_units of the message (off_units x 4096 <
//                          msg_len, or both 0; data_len == min(4096, msg_len
//                          - off_units x 4096)) and L is set iff it is the
//                          last; WRITE_TAIL is always the last
//   rx_bad_rcv_index:      SEND_DATA, WRITE_TAIL: rcv_index - rcv_next <
//                          rcv_window, modulo 2^32
[[nodiscard]] WireCheck CheckHeader(const DaemonHeader& h,
                                    const RxContext& ctx);

// The checks of a UC WRITE_WITH_IMM chunk: its immediate, its MID as
// ExpandMid(imm.mid14, ctx.deliv_mid) gave it, and its completion's
// byte_len. Uses deliv_mid, mid_window and known_msg_len of ctx:
//   rx_after_delivery, rx_mid_outside_window: as CheckHeader
//   rx_bad_offset: off x 4096 + byte_len <= 256 MiB; a chunk without L is
//                  whole units, at least one, ending before known_msg_len;
//                  a chunk with L ends at known_msg_len; a zero-length
//                  chunk is a whole zero-length message (off 0, L)
[[nodiscard]] WireCheck CheckChunk(const ChunkImm& imm, uint32_t mid,
                                   uint32_t byte_len, const RxContext& ctx);

// ---- §3.3 The ACK -------------------------------------------------------------

inline constexpr uint8_t kAckType = 0x41;
inline constexpr size_t kAckHeaderSize = 48;
inline constexpr uint32_t kAckMaxEntries = 48;
inline constexpr size_t kAckMaxSize = kAckHeaderSize + 4 * kAckMaxEntries;

inline constexpr uint8_t kAckSampleValid = 0x1;
inline constexpr uint8_t kAckNak = 0x2;
inline constexpr uint8_t kAckWaitingReceive = 0x4;
inline constexpr uint8_t kAckKnownFlags = 0x7;

enum class NakCode : uint8_t {
  kNone = 0,
  kRnrExceeded = 1,
  kRemoteAccess = 2,
  kInvalidRequest = 3,
  kRemoteOperation = 4,
};

struct Ack {
  uint8_t n = 0;             // entries used, 0..48
  uint8_t flags = 0;         // kAck*
  uint32_t dst_vqpn = 0;     // the data sender's virtual QPN
  uint32_t conn_token = 0;
  uint32_t deliv_mid = 0;    // every MID below it delivered
  uint64_t base_gseq = 0;
  uint32_t hold_ns = 0;      // T3' - T2 of the sampled entry
  uint8_t sample = 0;        // the sampled entry
  uint8_t nak_code = 0;      // NakCode
  uint32_t nak_mid = 0;
  uint32_t credits = 0;
  uint64_t send_bitmap = 0;  // bit i: entry i is a SEND's gseq - base_gseq
  std::array<uint32_t, kAckMaxEntries> entries{};  // [0, n) on the wire

  [[nodiscard]] bool entry_is_send(uint32_t i) const {
    return i < 64 && ((send_bitmap >> i) & 1) != 0;
  }
  // Equal on the wire: entries past n do not count.
  friend bool operator==(const Ack& a, const Ack& b);
};

[[nodiscard]] constexpr size_t AckSize(uint32_t n) {
  return kAckHeaderSize + 4 * size_t{n};
}

// Writes the ACK into out[0, AckSize(n)) and returns that size; 0 (nothing
// written) when n > 48 or out is shorter.
[[nodiscard]] size_t EncodeAck(const Ack& a, std::span<uint8_t> out);

// ack_malformed: bytes is the ACK (the UD receive without its 40-byte GRH):
// at least 48 bytes, n <= 48, exactly 48 + 4n bytes (§3.3 "Length is 48 +
// 4n"), version 1, type 0x41, reserved bytes 0, no unknown flag.
[[nodiscard]] WireCheck ParseAck(std::span<const uint8_t> bytes, Ack* out);

// What the data sender of the ACK's direction knows, from the connection
// the layer found by dst_vqpn (ack_unknown_qp is the layer's).
struct AckContext {
  uint32_t conn_token = 0;
  uint32_t acked_mid = 0;  // the last deliv_mid taken: MIDs below delivered
  uint32_t next_mid = 0;   // one past the newest MID sent
  uint64_t next_gseq = 0;  // one past the newest gseq sent
};

// The checks that drop an ACK, after ParseAck and the layer's QP lookup:
//   ack_stale_token: conn_token == ctx.conn_token
//   ack_bad_mid:     deliv_mid in [acked_mid, next_mid], modulo 2^32
//   ack_bad_nak:     with NAK: nak_code 1..4 and nak_mid in
//                    [deliv_mid, next_mid) (sent, not delivered); without
//                    it: nak_code and nak_mid 0
[[nodiscard]] WireCheck CheckAck(const Ack& a, const AckContext& ctx);

// One entry of an ACK: what it names, for the layer's chunk table.
struct AckEntry {
  bool is_send = false;
  uint64_t gseq = 0;  // is_send: the transmission's global number
  uint32_t mid = 0;   // !is_send: the WRITE chunk's MID (expanded)
  uint16_t off = 0;   // !is_send: its first unit
};

// ack_unknown_number, the part the numbers decide: entry i < a.n names a
// transmission this end sent (SEND: base_gseq + entry < next_gseq, no
// overflow) of a MID in flight (WRITE: bits 31..30 clear, the MID expanded
// from acked_mid in [acked_mid, next_mid)). The layer then looks the entry
// up ("already acked" is its chunk table's).
[[nodiscard]] WireCheck CheckAckEntry(const Ack& a, uint32_t i,
                                      const AckContext& ctx, AckEntry* out);

// ack_bad_sample, the part the bytes decide: with the sample flag, the
// sample names an entry of this ACK (sample < n). nullopt without the flag
// too (then there is no sample to take).
[[nodiscard]] WireCheck CheckAckSampleIndex(const Ack& a);

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_WIRE_FORMAT_H_
