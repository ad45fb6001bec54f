// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// THE one place where ring WQE bytes (struct rxe_send_wqe / rxe_recv_wqe,
// rdma/rdma_user_rxe.h) become typed work requests. Inputs are the engine's
// private copies of guest bytes (never guest memory itself: every field is
// read once, from the copy), checked against the queue's limits. Checks
// that need VM state (lkeys, AH handles, QP state) come after, in the data
// path; see send_path.h.
//
// Send WQEs decode in two steps so the data path copies only what it needs:
// the fixed header (VIRTIO_RDMA_SEND_WQE_SGE_OFFSET bytes), which says how
// many payload bytes (SGEs or inline data) follow, then that payload.
//
// A flush (QP in ERR) reads only what its CQE needs, through
// DecodeSendFlush / DecodeRecvFlush below.
//
// A WQE that fails decoding completes with the returned WcStatus, like a
// real RNIC would complete a malformed work request:
// BIND_MW, LOCAL_INV and REG_MR carry no data: their SGEs and inline data
// are not read (num_sge 0 after decoding), as rxe ignores them; what they
// name is checked in the data path (mw_access.h, fast_reg.h) and by the
// RNIC.
//
//   kLocQpOpErr  unknown or unsupported opcode for the QP type (window
//                opcodes without SendQueueLimits::windows or fast_reg,
//                REG_MR without fast_reg), unknown
//                send_flags bits, too many SGEs, inline data on READ or
//                atomics, missing AH / remote QPN beyond 24 bits (UD),
//                misaligned atomic address;
//   kLocLenErr   inline data longer than max_inline or the element, total
//                length beyond max_msg_sz, atomic not exactly one 8-byte SGE;
//   kLocProtErr  RDMA or atomic without an rkey.
#ifndef VRDMA_BACKEND_ENGINE_WQE_DECODER_H_
#define VRDMA_BACKEND_ENGINE_WQE_DECODER_H_

#include <cstdint>
#include <span>

#include "backend/rnic/rnic.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

inline constexpr uint32_t kSendWqeHeaderBytes = VIRTIO_RDMA_SEND_WQE_SGE_OFFSET;
inline constexpr uint32_t kRecvWqeHeaderBytes = VIRTIO_RDMA_RECV_WQE_SGE_OFFSET;
inline constexpr uint32_t kWqeSgeBytes = sizeof(rxe_sge);  // 16
// Largest payload a decoder ever asks for.
inline constexpr uint32_t kMaxSendPayloadBytes =
    kMaxSge * kWqeSgeBytes > kMaxInline ? kMaxSge* kWqeSgeBytes : kMaxInline;
inline constexpr uint32_t kMaxRecvPayloadBytes = kMaxSge * kWqeSgeBytes;

// Byte offsets inside struct rxe_send_wqe (checked against the C header in
// wqe_decoder.cc).
namespace send_wqe {
inline constexpr uint32_t kWrId = 0;
inline constexpr uint32_t kOpcode = 12;
inline constexpr uint32_t kSendFlags = 16;
inline constexpr uint32_t kImmData = 20;
inline constexpr uint32_t kInvalidateRkey = 20;  // the same union as kImmData
inline constexpr uint32_t kRdmaRemoteAddr = 24;
inline constexpr uint32_t kRdmaRkey = 32;
inline constexpr uint32_t kAtomicRemoteAddr = 24;
inline constexpr uint32_t kAtomicCompareAdd = 32;
inline constexpr uint32_t kAtomicSwap = 40;
inline constexpr uint32_t kAtomicRkey = 48;
inline constexpr uint32_t kUdRemoteQpn = 24;
inline constexpr uint32_t kUdRemoteQkey = 28;
inline constexpr uint32_t kUdAhNum = 36;
inline constexpr uint32_t kMwAddr = 24;
inline constexpr uint32_t kMwLength = 32;
inline constexpr uint32_t kMwMrLkey = 40;
inline constexpr uint32_t kMwMwRkey = 44;
inline constexpr uint32_t kMwRkey = 48;
inline constexpr uint32_t kMwAccess = 52;
inline constexpr uint32_t kDmaLength = 184;
inline constexpr uint32_t kDmaNumSge = 196;
}  // namespace send_wqe

namespace recv_wqe {
inline constexpr uint32_t kWrId = 0;
inline constexpr uint32_t kDmaNumSge = 28;
}  // namespace recv_wqe

struct SendQueueLimits {
  QpType type = QpType::kRc;
  uint32_t max_sge = 0;
  uint32_t max_inline = 0;
  uint32_t elem_size = 0;  // ring element bytes
  uint32_t max_msg_sz = 0;
  bool atomics = true;
  // BIND_MW, LOCAL_INV, SEND_WITH_INV on RC and UC QPs (VIRTIO_RDMA_F_MW).
  bool windows = false;
  // REG_MR, and LOCAL_INV and SEND_WITH_INV, on a kernel QP of type RC or
  // UC of a VM with VIRTIO_RDMA_F_KERNEL (docs/virtio-rdma.md §4.8).
  bool fast_reg = false;
};

struct DecodedSend {
  SendWr wr;                   // wr_id: the guest's; ah: not yet resolved
  uint32_t ah_handle = 0;      // UD: the guest's AH handle (wr.ud.ah_num)
  uint32_t payload_bytes = 0;  // after DecodeSendHeader
};

// Step 1: the header (kSendWqeHeaderBytes of a private copy). On success
// out->payload_bytes says how many payload bytes step 2 needs.
WcStatus DecodeSendHeader(const uint8_t* header, const SendQueueLimits& limits,
                          DecodedSend* out);
// Step 2: out->payload_bytes bytes of a private copy. For inline sends
// out->wr.inline_data points into `payload`, which must outlive the WR.
// SGEs may already have been copied into out->wr.sge (pass its address as
// payload): struct rxe_sge and Sge share their layout.
WcStatus DecodeSendPayload(const uint8_t* payload,
                           const SendQueueLimits& limits, DecodedSend* out);
// The same two steps writing into the caller's SendWr (the data path: the
// scheduler stage's FIFO slot, so the WR is never copied again).
WcStatus DecodeSendHeaderInto(const uint8_t* header,
                              const SendQueueLimits& limits, SendWr* wr,
                              uint32_t* ah_handle, uint32_t* payload_bytes);
WcStatus DecodeSendPayloadInto(const uint8_t* payload,
                               const SendQueueLimits& limits, SendWr* wr);
// Both steps on one buffer (tests, fuzzing); kLocLenErr when the buffer is
// shorter than the WQE says.
WcStatus DecodeSendWqe(std::span<const uint8_t> wqe,
                       const SendQueueLimits& limits, DecodedSend* out);

struct RecvQueueLimits {
  uint32_t max_sge = 0;
  uint32_t elem_size = 0;
};

// kLocLenErr when num_sge is above max_sge or beyond the element. Writes
// wr (wr_id: the guest's) and the payload bytes step 2 needs.
WcStatus DecodeRecvHeader(const uint8_t* header, const RecvQueueLimits& limits,
                          RecvWr* wr, uint32_t* payload_bytes);
WcStatus DecodeRecvPayload(const uint8_t* payload, RecvWr* wr);
WcStatus DecodeRecvWqe(std::span<const uint8_t> wqe,
                       const RecvQueueLimits& limits, RecvWr* wr);

// Flushes. A WQE the engine does not execute (its QP is in ERR) completes
// with kWrFlushErr, and the CQE needs only two of its fields: the guest's
// wr_id and the completion opcode. Decoded from a private copy of the
// WQE's first bytes (the fixed extent is the bound) by the same rules as
// the headers above: an opcode the QP may not use (unknown, host-only, not
// for its type) reports kSend, as the error CQE of a WQE that fails
// DecodeSendHeader does. Nothing else of the WQE is read.
inline constexpr uint32_t kSendFlushBytes = send_wqe::kOpcode + 4;
inline constexpr uint32_t kRecvFlushBytes = recv_wqe::kWrId + 8;

struct FlushedWqe {
  uint64_t wr_id = 0;  // the guest's
  WcOpcode opcode = WcOpcode::kSend;
};

FlushedWqe DecodeSendFlush(std::span<const uint8_t, kSendFlushBytes> header,
                           const SendQueueLimits& limits);
FlushedWqe DecodeRecvFlush(std::span<const uint8_t, kRecvFlushBytes> header);

// The completion opcode of a send WR is rnic.h's SendCompletionOpcode.

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_WQE_DECODER_H_
