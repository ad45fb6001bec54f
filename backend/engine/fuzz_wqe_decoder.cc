// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// libFuzzer target for the WQE decoder: arbitrary bytes as a send or
// receive WQE, with queue limits taken from the first bytes. Checks the
// decoder's promises: no out-of-bounds read (ASan), no UB (UBSan), on
// success every bound it claims to enforce, and that a flush reports the
// wr_id and opcode the full decode does.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "backend/engine/wqe_decoder.h"

using vrdma::QpType;
using vrdma::WcStatus;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const uint8_t kind = data[0];
  vrdma::engine::SendQueueLimits sl;
  sl.type = static_cast<QpType>(2 + data[1] % 3);
  sl.max_sge = data[2] % 40;
  sl.max_inline = (data[3] << 2) % 600;
  sl.elem_size = 1u << (6 + data[4] % 7);  // 64 .. 4096
  sl.max_msg_sz = (uint32_t{data[5]} << 16) | data[6];
  sl.atomics = data[7] & 1;
  sl.windows = data[7] & 2;
  sl.fast_reg = data[7] & 4;
  data += 8;
  size -= 8;
  // The decoder reads only from private copies of at most one element.
  if (size > sl.elem_size) size = sl.elem_size;
  uint8_t* copy = static_cast<uint8_t*>(malloc(size ? size : 1));
  memcpy(copy, data, size);
  if (kind & 1) {
    vrdma::engine::DecodedSend d;
    const WcStatus st = vrdma::engine::DecodeSendWqe({copy, size}, sl, &d);
    // A flush reports what the full decode would (when it got that far).
    if (size >= vrdma::engine::kSendWqeHeaderBytes) {
      const vrdma::engine::FlushedWqe f = vrdma::engine::DecodeSendFlush(
          std::span<const uint8_t, vrdma::engine::kSendFlushBytes>(
              copy, vrdma::engine::kSendFlushBytes),
          sl);
      if (f.wr_id != d.wr.wr_id ||
          f.opcode != vrdma::SendCompletionOpcode(d.wr.opcode))
        abort();
    }
    if (st == WcStatus::kSuccess) {
      if (d.wr.num_sge > sl.max_sge) abort();
      if ((d.wr.send_flags & vrdma::kSendInline) &&
          d.wr.inline_len > sl.max_inline)
        abort();
      if (d.wr.total_length() > sl.max_msg_sz) abort();
      if (sl.type == QpType::kUd && d.ah_handle == 0) abort();
      // REG_MR only where allowed, never with data, its pages the data
      // path's (fast_reg.h), never the decoder's.
      if (d.wr.opcode == vrdma::WrOpcode::kRegMr &&
          (!sl.fast_reg || sl.type == QpType::kUd || d.wr.num_sge != 0 ||
           d.wr.reg.pages != nullptr))
        abort();
    }
  } else {
    vrdma::engine::RecvQueueLimits rl{sl.max_sge, sl.elem_size};
    vrdma::RecvWr wr;
    const WcStatus st = vrdma::engine::DecodeRecvWqe({copy, size}, rl, &wr);
    if (size >= vrdma::engine::kRecvWqeHeaderBytes &&
        vrdma::engine::DecodeRecvFlush(
            std::span<const uint8_t, vrdma::engine::kRecvFlushBytes>(
                copy, vrdma::engine::kRecvFlushBytes))
                .wr_id != wr.wr_id)
      abort();
    if (st == WcStatus::kSuccess) {
      if (wr.num_sge > sl.max_sge) abort();
    }
  }
  free(copy);
  return 0;
}
