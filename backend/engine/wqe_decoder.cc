// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/wqe_decoder.h"

#include <cstddef>
#include <cstring>

namespace vrdma::engine {

static_assert(send_wqe::kWrId == offsetof(rxe_send_wqe, wr.wr_id));
static_assert(send_wqe::kOpcode == offsetof(rxe_send_wqe, wr.opcode));
static_assert(send_wqe::kSendFlags == offsetof(rxe_send_wqe, wr.send_flags));
static_assert(send_wqe::kImmData == offsetof(rxe_send_wqe, wr.ex.imm_data));
static_assert(send_wqe::kRdmaRemoteAddr ==
              offsetof(rxe_send_wqe, wr.wr.rdma.remote_addr));
static_assert(send_wqe::kRdmaRkey == offsetof(rxe_send_wqe, wr.wr.rdma.rkey));
static_assert(send_wqe::kAtomicCompareAdd ==
              offsetof(rxe_send_wqe, wr.wr.atomic.compare_add));
static_assert(send_wqe::kAtomicSwap ==
              offsetof(rxe_send_wqe, wr.wr.atomic.swap));
static_assert(send_wqe::kAtomicRkey ==
              offsetof(rxe_send_wqe, wr.wr.atomic.rkey));
static_assert(send_wqe::kUdRemoteQpn ==
              offsetof(rxe_send_wqe, wr.wr.ud.remote_qpn));
static_assert(send_wqe::kUdRemoteQkey ==
              offsetof(rxe_send_wqe, wr.wr.ud.remote_qkey));
static_assert(send_wqe::kUdAhNum == offsetof(rxe_send_wqe, wr.wr.ud.ah_num));
static_assert(send_wqe::kInvalidateRkey == offsetof(rxe_send_wqe, wr.ex.invalidate_rkey));
static_assert(send_wqe::kMwAddr == offsetof(rxe_send_wqe, wr.wr.mw.addr));
static_assert(send_wqe::kMwLength == offsetof(rxe_send_wqe, wr.wr.mw.length));
static_assert(send_wqe::kMwMrLkey == offsetof(rxe_send_wqe, wr.wr.mw.mr_lkey));
static_assert(send_wqe::kMwMwRkey == offsetof(rxe_send_wqe, wr.wr.mw.mw_rkey));
static_assert(send_wqe::kMwRkey == offsetof(rxe_send_wqe, wr.wr.mw.rkey));
static_assert(send_wqe::kMwAccess == offsetof(rxe_send_wqe, wr.wr.mw.access));
static_assert(send_wqe::kDmaLength == offsetof(rxe_send_wqe, dma.length));
static_assert(send_wqe::kDmaNumSge == offsetof(rxe_send_wqe, dma.num_sge));
static_assert(recv_wqe::kWrId == offsetof(rxe_recv_wqe, wr_id));
static_assert(recv_wqe::kDmaNumSge == offsetof(rxe_recv_wqe, dma.num_sge));
// SGEs are copied whole from the WQE into Sge.
static_assert(sizeof(Sge) == sizeof(rxe_sge));
static_assert(offsetof(Sge, addr) == offsetof(rxe_sge, addr));
static_assert(offsetof(Sge, length) == offsetof(rxe_sge, length));
static_assert(offsetof(Sge, lkey) == offsetof(rxe_sge, lkey));

namespace {

// Little-endian loads from a private copy (the ABI is little-endian and so
// is every host this builds for).
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

constexpr uint32_t kKnownSendFlags =
    kSendFence | kSendSignaled | kSendSolicited | kSendInline;

bool OpcodeAllowed(uint32_t op, const SendQueueLimits& limits) {
  const QpType type = limits.type;
  switch (op) {
    case IB_UVERBS_WR_SEND:
    case IB_UVERBS_WR_SEND_WITH_IMM:
      return true;
    case IB_UVERBS_WR_RDMA_WRITE:
    case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
      return type != QpType::kUd;
    case IB_UVERBS_WR_RDMA_READ:
      return type == QpType::kRc;
    case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
    case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
      return type == QpType::kRc && limits.atomics;
    case IB_UVERBS_WR_BIND_MW:
      return (type == QpType::kRc || type == QpType::kUc) && limits.windows;
    case IB_UVERBS_WR_LOCAL_INV:
    case IB_UVERBS_WR_SEND_WITH_INV:
      return (type == QpType::kRc || type == QpType::kUc) &&
             (limits.windows || limits.fast_reg);
    case VIRTIO_RDMA_WR_REG_MR:
      return (type == QpType::kRc || type == QpType::kUc) && limits.fast_reg;
    default:
      return false;
  }
}

// The two fields every CQE of a send WQE needs, by one rule for the data
// path and for flushes: the guest's wr_id, and the opcode when the QP may
// use it (else kSend, what an error CQE reports for a bad opcode). Reads
// only the first kSendFlushBytes.
bool DecodeSendIdentity(const uint8_t* h, const SendQueueLimits& limits,
                        uint64_t* wr_id, WrOpcode* op) {
  static_assert(send_wqe::kWrId + 8 <= kSendFlushBytes &&
                send_wqe::kOpcode + 4 <= kSendFlushBytes);
  *wr_id = Load64(h + send_wqe::kWrId);
  const uint32_t raw = Load32(h + send_wqe::kOpcode);
  if (!OpcodeAllowed(raw, limits)) {
    *op = WrOpcode::kSend;
    return false;
  }
  static_assert(static_cast<uint32_t>(WrOpcode::kRegMr) == VIRTIO_RDMA_WR_REG_MR);
  *op = static_cast<WrOpcode>(raw);
  return true;
}

bool IsAtomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
}
// BIND_MW, LOCAL_INV and REG_MR: executed by the requester, no data.
bool IsLocalOp(WrOpcode op) {
  return op == WrOpcode::kBindMw || op == WrOpcode::kLocalInv || op == WrOpcode::kRegMr;
}
bool IsRdma(WrOpcode op) {
  return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm ||
         op == WrOpcode::kRdmaRead;
}

}  // namespace

WcStatus DecodeSendHeader(const uint8_t* header, const SendQueueLimits& limits,
                          DecodedSend* out) {
  return DecodeSendHeaderInto(header, limits, &out->wr, &out->ah_handle,
                              &out->payload_bytes);
}

WcStatus DecodeSendHeaderInto(const uint8_t* h, const SendQueueLimits& limits,
                              SendWr* wr_out, uint32_t* ah_handle,
                              uint32_t* payload_bytes) {
  SendWr& wr = *wr_out;
  // Fields only some opcodes set: never carry them over from a previous
  // decode into the same buffer.
  wr.remote_addr = 0;
  wr.rkey = 0;
  wr.compare_add = 0;
  wr.swap = 0;
  wr.ah = {};
  wr.remote_qpn = 0;
  wr.remote_qkey = 0;
  wr.inline_data = nullptr;
  wr.invalidate_rkey = 0;
  wr.bind = {};
  wr.reg = {};
  *ah_handle = 0;
  *payload_bytes = 0;
  // wr_id and opcode first: an error CQE must carry them.
  if (!DecodeSendIdentity(h, limits, &wr.wr_id, &wr.opcode))
    return WcStatus::kLocQpOpErr;

  uint32_t flags = Load32(h + send_wqe::kSendFlags);
  if (flags & ~kKnownSendFlags) return WcStatus::kLocQpOpErr;
  if (IsLocalOp(wr.opcode)) {
    // No data: SGEs and inline data are not read (as rxe ignores them).
    wr.send_flags = flags & ~uint32_t{kSendInline};
    wr.imm_data = 0;
    wr.num_sge = 0;
    wr.inline_len = 0;
    if (wr.opcode == WrOpcode::kLocalInv) {
      wr.invalidate_rkey = Load32(h + send_wqe::kInvalidateRkey);
    } else if (wr.opcode == WrOpcode::kRegMr) {
      // wr.mw's layout (virtio_rdma.h): the page list is fast_reg.h's.
      wr.reg.iova = Load64(h + send_wqe::kMwAddr);
      wr.reg.length = Load64(h + send_wqe::kMwLength);
      wr.reg.mr_lkey = Load32(h + send_wqe::kMwMrLkey);
      wr.reg.key = static_cast<uint8_t>(Load32(h + send_wqe::kMwRkey));
      wr.reg.access = Load32(h + send_wqe::kMwAccess);
    } else {
      wr.bind.addr = Load64(h + send_wqe::kMwAddr);
      wr.bind.length = Load64(h + send_wqe::kMwLength);
      wr.bind.mr_lkey = Load32(h + send_wqe::kMwMrLkey);
      wr.bind.mw_rkey = Load32(h + send_wqe::kMwMwRkey);
      wr.bind.rkey = Load32(h + send_wqe::kMwRkey);
      wr.bind.access = Load32(h + send_wqe::kMwAccess);
    }
    return WcStatus::kSuccess;
  }
  wr.send_flags = flags;
  if (wr.opcode == WrOpcode::kSendWithInv) {
    wr.invalidate_rkey = Load32(h + send_wqe::kInvalidateRkey);
  }
  wr.imm_data = (wr.opcode == WrOpcode::kSendWithImm ||
                 wr.opcode == WrOpcode::kRdmaWriteWithImm)
                    ? Load32(h + send_wqe::kImmData)
                    : 0;

  const uint32_t payload_room = limits.elem_size > kSendWqeHeaderBytes
                                    ? limits.elem_size - kSendWqeHeaderBytes
                                    : 0;
  if (flags & kSendInline) {
    if (wr.opcode == WrOpcode::kRdmaRead || IsAtomic(wr.opcode))
      return WcStatus::kLocQpOpErr;
    const uint32_t len = Load32(h + send_wqe::kDmaLength);
    if (len > limits.max_inline || len > payload_room || len > kMaxInline) {
      return WcStatus::kLocLenErr;
    }
    wr.inline_len = static_cast<uint16_t>(len);
    wr.num_sge = 0;
    *payload_bytes = len;
  } else {
    const uint32_t n = Load32(h + send_wqe::kDmaNumSge);
    if (n > limits.max_sge || n > static_cast<uint32_t>(kMaxSge) ||
        uint64_t{n} * kWqeSgeBytes > payload_room) {
      return WcStatus::kLocQpOpErr;
    }
    wr.num_sge = static_cast<uint8_t>(n);
    wr.inline_len = 0;
    *payload_bytes = n * kWqeSgeBytes;
  }

  if (IsRdma(wr.opcode)) {
    wr.remote_addr = Load64(h + send_wqe::kRdmaRemoteAddr);
    wr.rkey = Load32(h + send_wqe::kRdmaRkey);
    if (wr.rkey == 0) return WcStatus::kLocProtErr;
  } else if (IsAtomic(wr.opcode)) {
    wr.remote_addr = Load64(h + send_wqe::kAtomicRemoteAddr);
    wr.compare_add = Load64(h + send_wqe::kAtomicCompareAdd);
    wr.swap = Load64(h + send_wqe::kAtomicSwap);
    wr.rkey = Load32(h + send_wqe::kAtomicRkey);
    if (wr.rkey == 0) return WcStatus::kLocProtErr;
    if (wr.remote_addr % 8 != 0) return WcStatus::kLocQpOpErr;
    if (wr.num_sge != 1) return WcStatus::kLocLenErr;
  }
  if (limits.type == QpType::kUd) {
    *ah_handle = Load32(h + send_wqe::kUdAhNum);
    wr.remote_qpn = Load32(h + send_wqe::kUdRemoteQpn);
    wr.remote_qkey = Load32(h + send_wqe::kUdRemoteQkey);
    if (*ah_handle == 0 || wr.remote_qpn > 0xffffff)
      return WcStatus::kLocQpOpErr;
  }
  return WcStatus::kSuccess;
}

WcStatus DecodeSendPayload(const uint8_t* payload,
                           const SendQueueLimits& limits, DecodedSend* out) {
  return DecodeSendPayloadInto(payload, limits, &out->wr);
}

WcStatus DecodeSendPayloadInto(const uint8_t* payload,
                               const SendQueueLimits& limits, SendWr* wr_out) {
  SendWr& wr = *wr_out;
  uint64_t total = 0;
  if (wr.send_flags & kSendInline) {
    wr.inline_data = payload;
    total = wr.inline_len;
  } else {
    // struct rxe_sge and Sge share their layout: one copy, and no split
    // stores for the checks that read the SGEs next to stall on.
    // The data path copies guest SGEs straight into wr.sge (its private
    // copy); then there is nothing to move.
    if (payload != reinterpret_cast<const uint8_t*>(wr.sge.data())) {
      std::memcpy(wr.sge.data(), payload, size_t{wr.num_sge} * kWqeSgeBytes);
    }
    for (int i = 0; i < wr.num_sge; ++i) {
      total += wr.sge[i].length;  // <= 32 * 2^32: no 64-bit overflow
    }
  }
  if (total > limits.max_msg_sz) return WcStatus::kLocLenErr;
  if (IsAtomic(wr.opcode) && total != 8) return WcStatus::kLocLenErr;
  return WcStatus::kSuccess;
}

WcStatus DecodeSendWqe(std::span<const uint8_t> wqe,
                       const SendQueueLimits& limits, DecodedSend* out) {
  if (wqe.size() < kSendWqeHeaderBytes) return WcStatus::kLocLenErr;
  WcStatus s = DecodeSendHeader(wqe.data(), limits, out);
  if (s != WcStatus::kSuccess) return s;
  if (wqe.size() - kSendWqeHeaderBytes < out->payload_bytes)
    return WcStatus::kLocLenErr;
  return DecodeSendPayload(wqe.data() + kSendWqeHeaderBytes, limits, out);
}

WcStatus DecodeRecvHeader(const uint8_t* h, const RecvQueueLimits& limits,
                          RecvWr* wr, uint32_t* payload_bytes) {
  static_assert(recv_wqe::kWrId + 8 <= kRecvFlushBytes);
  wr->wr_id = Load64(h + recv_wqe::kWrId);
  const uint32_t n = Load32(h + recv_wqe::kDmaNumSge);
  const uint32_t room = limits.elem_size > kRecvWqeHeaderBytes
                            ? limits.elem_size - kRecvWqeHeaderBytes
                            : 0;
  if (n > limits.max_sge || n > static_cast<uint32_t>(kMaxSge) ||
      uint64_t{n} * kWqeSgeBytes > room) {
    return WcStatus::kLocLenErr;
  }
  wr->num_sge = static_cast<uint8_t>(n);
  *payload_bytes = n * kWqeSgeBytes;
  return WcStatus::kSuccess;
}

WcStatus DecodeRecvPayload(const uint8_t* payload, RecvWr* wr) {
  std::memcpy(wr->sge.data(), payload, size_t{wr->num_sge} * kWqeSgeBytes);
  return WcStatus::kSuccess;
}

WcStatus DecodeRecvWqe(std::span<const uint8_t> wqe,
                       const RecvQueueLimits& limits, RecvWr* wr) {
  if (wqe.size() < kRecvWqeHeaderBytes) return WcStatus::kLocLenErr;
  uint32_t payload_bytes = 0;
  WcStatus s = DecodeRecvHeader(wqe.data(), limits, wr, &payload_bytes);
  if (s != WcStatus::kSuccess) return s;
  if (wqe.size() - kRecvWqeHeaderBytes < payload_bytes)
    return WcStatus::kLocLenErr;
  return DecodeRecvPayload(wqe.data() + kRecvWqeHeaderBytes, wr);
}

FlushedWqe DecodeSendFlush(std::span<const uint8_t, kSendFlushBytes> header,
                           const SendQueueLimits& limits) {
  FlushedWqe f;
  WrOpcode op = WrOpcode::kSend;
  (void)DecodeSendIdentity(header.data(), limits, &f.wr_id, &op);
  f.opcode = SendCompletionOpcode(op);
  return f;
}

FlushedWqe DecodeRecvFlush(std::span<const uint8_t, kRecvFlushBytes> header) {
  FlushedWqe f;
  f.wr_id = Load64(header.data() + recv_wqe::kWrId);
  f.opcode = WcOpcode::kRecv;
  return f;
}

}  // namespace vrdma::engine
