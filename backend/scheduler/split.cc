// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/scheduler/split.h"

#include <algorithm>

namespace vrdma::sched {

bool Splittable(const SendWr& wr, QpType type, bool receiver_reassembles) {
  if (type == QpType::kUd || (wr.send_flags & kSendInline)) return false;
  switch (wr.opcode) {
    case WrOpcode::kRdmaWrite:
      return true;
    case WrOpcode::kRdmaRead:
      return type == QpType::kRc;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kRdmaWriteWithImm:
      return receiver_reassembles;
    default:
      return false;
  }
}

void CopyWr(const SendWr& src, SendWr* dst) {
  dst->wr_id = src.wr_id;
  dst->opcode = src.opcode;
  dst->send_flags = src.send_flags;
  dst->imm_data = src.imm_data;
  dst->num_sge = src.num_sge;
  dst->inline_len = src.inline_len;
  std::copy_n(src.sge.begin(), std::min<int>(src.num_sge, kMaxSge),
              dst->sge.begin());
  dst->inline_data = src.inline_data;
  dst->remote_addr = src.remote_addr;
  dst->rkey = src.rkey;
  dst->compare_add = src.compare_add;
  dst->swap = src.swap;
  dst->ah = src.ah;
  dst->remote_qpn = src.remote_qpn;
  dst->remote_qkey = src.remote_qkey;
  dst->wait_cq = src.wait_cq;
  dst->wait_index = src.wait_index;
  dst->enable_qp = src.enable_qp;
  dst->enable_count = src.enable_count;
  dst->invalidate_rkey = src.invalidate_rkey;
  dst->bind = src.bind;
  dst->reg = src.reg;
}

int SliceSges(std::span<const Sge> in, uint64_t offset, uint64_t length,
              std::span<Sge> out) {
  int n = 0;
  uint64_t pos = 0;  // byte position of in[i] in the list
  for (const Sge& s : in) {
    if (length == 0 || n == static_cast<int>(out.size())) break;
    const uint64_t end = pos + s.length;
    if (end > offset) {
      const uint64_t skip = offset > pos ? offset - pos : 0;
      const uint64_t take = std::min<uint64_t>(s.length - skip, length);
      out[n++] = Sge{s.addr + skip, static_cast<uint32_t>(take), s.lkey};
      offset += take;
      length -= take;
    }
    pos = end;
  }
  return n;
}

void BuildPiece(const SendWr& whole, uint32_t offset, uint32_t length,
                bool last, SendWr* out) {
  CopyWr(whole, out);
  const bool first = offset == 0;
  out->num_sge = static_cast<uint8_t>(
      SliceSges(std::span<const Sge>(whole.sge.data(), whole.num_sge), offset,
                length, out->sge));
  if (whole.opcode == WrOpcode::kRdmaWrite ||
      whole.opcode == WrOpcode::kRdmaWriteWithImm ||
      whole.opcode == WrOpcode::kRdmaRead) {
    out->remote_addr = whole.remote_addr + offset;
  }
  uint32_t flags = whole.send_flags & ~(kSendSignaled | kSendFence |
                                        kSendSolicited);
  if (first) flags |= whole.send_flags & kSendFence;
  if (last) flags |= whole.send_flags & kSendSolicited;
  out->send_flags = flags;
  if (!last) {
    if (whole.opcode == WrOpcode::kRdmaWriteWithImm) {
      out->opcode = WrOpcode::kRdmaWrite;
    } else if (whole.opcode == WrOpcode::kSendWithImm) {
      out->opcode = WrOpcode::kSend;
    }
    out->imm_data = 0;
  }
}

}  // namespace vrdma::sched
