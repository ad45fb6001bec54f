// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The peer channel's messages (docs/reliability.md §3.5): what one daemon
// tells another over UDP on the host network. This file is the codec only:
// pure functions, no socket, no clock, no allocation, so the channel (step
// 9), the tests and a fuzzer drive them alike. Every message is at most
// 512 bytes, little endian, one per datagram.
//
// Header (24 bytes):
//   0  type (MsgType)   1  version (1)   2  length: the whole message (u16)
//   4  behind: how many sequence numbers before seq the origin may still
//      resend (u32, below seq; ACK: 0). The receiver takes none below
//      seq - behind any more: the channel's resync after a loss it gave
//      up on, a restart, an eviction (peer_channel.h)
//   8  origin: the sending daemon's id (u64, not 0)
//   16 seq: its sequence number, per origin (u64; not 0, except ACK: 0)
// Bodies, by type (QPNs and PSNs are 24-bit values in u32 fields; vqpn:
// the receiving daemon's virtual QPN unless named otherwise):
//   ACK            0 acked seq (u64, not 0)                          8 bytes
//   HELLO          0 unit_size (4096)  4 ACK QP's QPN  8 its Q_Key
//                  12 reserved  16 ACK QP's GID (16)                32 bytes
//                  (QPN, Q_Key and GID all 0: a daemon without the layer)
//   GIDS           0 op (1 add, 2 remove)  1 count (1..30)  2 reserved (6)
//                  8 count GIDs of 16 bytes, none zero, none twice  8 + 16n
//   CONNECT,       0 src_vqpn (the sender's)  4 dst_vqpn  8 data QPN
//   CONNECT_OK     12 data PSN  16 backup QPN  20 backup PSN  24 conn_token
//                  (not 0)  28 mode (1 rc, 2 uc)  29 rnr_retry (0..7)
//                  30 reserved (2)  32 retry budget in ns (u64, not 0)  40 bytes
//   CONNECT_NATIVE 0 src_vqpn  4 dst_vqpn  8 conn_token  12 reserved  16 bytes
//   SWITCH         0 vqpn  4 conn_token  8 data QPN  12 data PSN
//                  16 backup QPN  20 backup PSN  24 to_mode (0 native,
//                  1 rc, 2 uc)  25 reserved (7)                      32 bytes
//   DRAINED        0 vqpn  4 next_mid  8 rcv_sent  12 reserved       16 bytes
//   READY          0 vqpn  4 reserved                                 8 bytes
//   RECOVER        0 vqpn  4 failed QPN                               8 bytes
//   RECOVERED      0 vqpn  4 epsn                                     8 bytes
//   CREDIT         0 dest_qpn  4 posted (wrapping)                    8 bytes
// QPNs are never 0 or 1 (QP0 and QP1 are the special QPs).
//
// Decode checks every field (untrusted: another host's bytes) in the order
// of PeerCheck (a body's reserved bytes last, after its fields) and
// returns the first that fails; the caller counts it
// (PeerCheckCounters), one counter per check. What only the channel can
// decide (is the origin a known peer, is the seq new, does a vqpn name a
// QP connected to it) is its business, after Decode. Every message Decode
// accepts re-encodes (Encode) to the same bytes.
#ifndef VRDMA_BACKEND_PEER_CHANNEL_PEER_MESSAGE_H_
#define VRDMA_BACKEND_PEER_CHANNEL_PEER_MESSAGE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

namespace vrdma::peer {

using Gid = std::array<uint8_t, 16>;

inline constexpr size_t kMaxMessageBytes = 512;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint8_t kVersion = 1;
inline constexpr uint32_t kUnitSize = 4096;  // docs/reliability.md: wire constant
inline constexpr size_t kGidsFixedBytes = 8;
inline constexpr uint32_t kMaxGidsPerMessage =
    (kMaxMessageBytes - kHeaderBytes - kGidsFixedBytes) / 16;  // 30

enum class MsgType : uint8_t {
  kAck = 1,
  kHello = 2,
  kGids = 3,
  kConnect = 4,
  kConnectOk = 5,
  kConnectNative = 6,
  kSwitch = 7,
  kDrained = 8,
  kReady = 9,
  kRecover = 10,
  kRecovered = 11,
  kCredit = 12,
};

enum class Mode : uint8_t { kNative = 0, kRc = 1, kUc = 2 };

struct Ack {
  uint64_t acked_seq = 0;
  bool operator==(const Ack&) const = default;
};
struct Hello {
  uint32_t unit_size = kUnitSize;
  uint32_t ack_qpn = 0;
  uint32_t ack_qkey = 0;
  Gid ack_gid{};
  bool operator==(const Hello&) const = default;
};
struct Gids {
  bool add = true;  // false: remove
  uint8_t count = 0;
  std::array<Gid, kMaxGidsPerMessage> gids{};  // [0, count) used
  bool operator==(const Gids&) const = default;
};
// CONNECT and CONNECT_OK.
struct Connect {
  uint32_t src_vqpn = 0;
  uint32_t dst_vqpn = 0;
  uint32_t data_qpn = 0;
  uint32_t data_psn = 0;
  uint32_t backup_qpn = 0;
  uint32_t backup_psn = 0;
  uint32_t conn_token = 0;
  Mode mode = Mode::kUc;
  uint8_t rnr_retry = 0;
  uint64_t retry_budget_ns = 0;
  bool operator==(const Connect&) const = default;
};
struct ConnectNative {
  uint32_t src_vqpn = 0;
  uint32_t dst_vqpn = 0;
  uint32_t conn_token = 0;
  bool operator==(const ConnectNative&) const = default;
};
struct Switch {
  uint32_t vqpn = 0;
  uint32_t conn_token = 0;
  uint32_t data_qpn = 0;
  uint32_t data_psn = 0;
  uint32_t backup_qpn = 0;
  uint32_t backup_psn = 0;
  Mode to_mode = Mode::kNative;
  bool operator==(const Switch&) const = default;
};
struct Drained {
  uint32_t vqpn = 0;
  uint32_t next_mid = 0;
  uint32_t rcv_sent = 0;
  bool operator==(const Drained&) const = default;
};
struct Ready {
  uint32_t vqpn = 0;
  bool operator==(const Ready&) const = default;
};
struct Recover {
  uint32_t vqpn = 0;
  uint32_t failed_qpn = 0;
  bool operator==(const Recover&) const = default;
};
struct Recovered {
  uint32_t vqpn = 0;
  uint32_t epsn = 0;
  bool operator==(const Recovered&) const = default;
};
struct Credit {
  uint32_t dest_qpn = 0;
  uint32_t posted = 0;
  bool operator==(const Credit&) const = default;
};

using Body = std::variant<Ack, Hello, Gids, Connect, ConnectNative, Switch, Drained, Ready,
                          Recover, Recovered, Credit>;

struct PeerMessage {
  MsgType type = MsgType::kHello;
  uint64_t origin = 0;
  uint64_t seq = 0;
  Body body;  // the alternative of type (Connect for CONNECT and CONNECT_OK)
  uint32_t behind = 0;  // below seq (ACK: 0); set by the channel
  bool operator==(const PeerMessage&) const = default;
};

// Every check Decode makes, in the order it makes them; the first failure
// is returned and the message is dropped.
enum class PeerCheck : uint8_t {
  kOk = 0,
  kShort,         // fewer bytes than a header
  kLong,          // more than kMaxMessageBytes
  kLength,        // the length field is not the number of bytes
  kVersion,       // not kVersion
  kType,          // no such MsgType
  kReserved,      // a reserved byte (of a body) not 0
  kOrigin,        // origin 0
  kSeq,           // seq 0 (ACK: not 0); behind not below seq (ACK: not 0)
  kBodyLength,    // the body is not its type's size (GIDS: 8 + 16 x count)
  kQpn,           // a QPN wider than 24 bits, or 0 or 1
  kPsn,           // a PSN wider than 24 bits
  kMode,          // CONNECT: not rc or uc; SWITCH: not native, rc or uc
  kRnrRetry,      // above 7
  kToken,         // conn_token 0
  kRetryBudget,   // 0
  kUnitSize,      // HELLO: not kUnitSize
  kGidOp,         // GIDS: op neither add nor remove
  kGidCount,      // GIDS: count 0 or above kMaxGidsPerMessage
  kZeroGid,       // a GID of all zeros
  kDuplicateGid,  // GIDS: a GID twice in one message
  kAckSeq,        // ACK: acked seq 0
  kCount,
};

const char* PeerCheckName(PeerCheck c);  // "peer_short", ...

// One counter per check (kOk: messages accepted).
struct PeerCheckCounters {
  std::array<uint64_t, static_cast<size_t>(PeerCheck::kCount)> n{};
  void Count(PeerCheck c) { ++n[static_cast<size_t>(c)]; }
  uint64_t operator[](PeerCheck c) const { return n[static_cast<size_t>(c)]; }
};

// Fills *out from bytes when every check passes (kOk); otherwise returns
// the check that failed and *out is unspecified.
[[nodiscard]] PeerCheck Decode(std::span<const uint8_t> bytes, PeerMessage* out);

// Writes m into out; returns its length, or 0 when out is too small or m
// is not a message Decode would accept (the body is not type's, a field
// is out of range).
[[nodiscard]] size_t Encode(const PeerMessage& m, std::span<uint8_t> out);

}  // namespace vrdma::peer

#endif  // VRDMA_BACKEND_PEER_CHANNEL_PEER_MESSAGE_H_
