// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A SoftRnic packet on a fabric (docs/reliability.md §7.1): one MTU of a
// message, with the fields of RoCE's BTH, RETH, DETH, ImmDt/IETH and
// AtomicETH and the GRH's GIDs, in one fixed 96-byte header (little
// endian) followed by the payload. Opcodes are IBA's (transport in bits
// 7..5, operation in 4..0), so the tables below read like rxe_opcode.c.
//
// Everything from a fabric is untrusted: Decode checks the syntax (size,
// version, length, a known opcode, field ranges) and returns which check
// failed; the responder checks the meaning (GID, QP, state, sequence,
// keys). Pure functions: no state, no allocation.
#ifndef VRDMA_BACKEND_SOFT_RNIC_NET_PACKET_H_
#define VRDMA_BACKEND_SOFT_RNIC_NET_PACKET_H_

#include <cstdint>
#include <span>

#include "backend/fabric/fabric.h"
#include "backend/rnic/rnic.h"

namespace vrdma::soft::net {

inline constexpr uint8_t kVersion = 1;
inline constexpr uint32_t kHeaderBytes = 96;
inline constexpr uint32_t kMaxPayload = 4096;  // the largest MTU
static_assert(kHeaderBytes + kMaxPayload <= fabric::kMaxPacketBytes);

// Transport (IBA 9.2, BTH opcode bits 7..5).
inline constexpr uint8_t kRc = 0x00;
inline constexpr uint8_t kUc = 0x20;
inline constexpr uint8_t kUd = 0x60;
inline constexpr uint8_t kTransportMask = 0xe0;

// Operation (BTH opcode bits 4..0).
enum Op : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0a,
  kWriteOnlyImm = 0x0b,
  kReadRequest = 0x0c,
  kReadResponseFirst = 0x0d,
  kReadResponseMiddle = 0x0e,
  kReadResponseLast = 0x0f,
  kReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  kAtomicAcknowledge = 0x12,
  kCmpSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastInv = 0x16,
  kSendOnlyInv = 0x17,
};

// The AETH syndrome of an ACKNOWLEDGE (IBA 9.7.5.2.9): bits 7..5 the kind.
inline constexpr uint8_t kSyndromeAck = 0x1f;   // ACK (no credit count)
inline constexpr uint8_t kSyndromeRnr = 0x20;   // | the RNR timer (IBA encoded)
inline constexpr uint8_t kSyndromeNak = 0x60;   // | a NakCode
inline constexpr uint8_t kSyndromeKindMask = 0xe0;
enum NakCode : uint8_t {
  kNakPsnSequence = 0,
  kNakInvalidRequest = 1,
  kNakRemoteAccess = 2,
  kNakRemoteOperation = 3,
};

// Header flags.
inline constexpr uint8_t kFlagAckReq = 0x1;
inline constexpr uint8_t kFlagSolicited = 0x2;
inline constexpr uint8_t kKnownFlags = kFlagAckReq | kFlagSolicited;

// What an opcode is (one table, OpInfoOf).
struct OpInfo {
  bool valid = false;
  bool send = false;   // SEND_*: consumes a receive at its first packet
  bool write = false;  // RDMA_WRITE_*
  bool first = false;  // starts a message (FIRST or ONLY)
  bool last = false;   // ends it (LAST or ONLY)
  bool imm = false;    // carries an immediate (a WRITE's consumes a receive)
  bool inv = false;    // SEND_*_WITH_INVALIDATE: imm holds the rkey
  bool reth = false;   // remote_addr, rkey, dma_len are meaningful
};
// Info of a full opcode (transport | op); valid only for the opcodes a
// transport has (UD: SEND_ONLY and SEND_ONLY_WITH_IMM; UC: SEND and
// WRITE, and SEND_WITH_INVALIDATE, which IBA gives RC only but SoftRnic
// posts on UC as rxe does; RC: all).
OpInfo OpInfoOf(uint8_t opcode);

// Responses travel to the requester: READ responses and acknowledgements.
inline bool IsResponse(uint8_t opcode) {
  const uint8_t op = opcode & ~kTransportMask;
  return op >= kReadResponseFirst && op <= kAtomicAcknowledge;
}

// The operation of the packet that is `first` and/or `last` of a request
// message of opcode op (SEND and WRITE kinds).
Op RequestOp(WrOpcode op, bool first, bool last);

// The decoded header. Fields a packet's opcode does not use are zero.
struct Header {
  uint8_t opcode = 0;
  uint8_t flags = 0;
  uint8_t syndrome = 0;  // ACK / NAK (RC)
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint16_t payload_len = 0;
  uint32_t dest_qpn = 0;    // 24 bits
  uint32_t src_qpn = 0;     // 24 bits
  uint32_t psn = 0;         // 24 bits
  uint32_t flow_label = 0;  // 20 bits
  uint32_t qkey = 0;        // UD
  uint32_t imm = 0;         // immediate (network order, as in the WQE) or rkey
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  uint64_t compare_add = 0;  // an atomic ACK: the original value
  uint64_t swap = 0;
  Gid dgid{};
  Gid sgid{};
};

// Which syntax check a packet failed (the responder counts each).
enum class Check : uint8_t {
  kOk = 0,
  kShort,    // shorter than the header
  kVersion,  // not kVersion
  kLength,   // payload_len disagrees with the packet's length, or > kMaxPayload
  kOpcode,   // not an opcode of OpInfoOf
  kField,    // a QPN, PSN or flow label wider than its field; unknown flags
};

// Writes h (with payload_len) into out[0, kHeaderBytes).
void EncodeHeader(const Header& h, uint8_t* out);
// Decodes and checks packet's header; the payload is packet's bytes after
// kHeaderBytes (payload_len of them when kOk).
Check Decode(std::span<const uint8_t> packet, Header* h);

}  // namespace vrdma::soft::net

#endif  // VRDMA_BACKEND_SOFT_RNIC_NET_PACKET_H_
