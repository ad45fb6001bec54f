// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Splitting a work request into pieces (docs/scheduler.md, "Split"): which
// WRs may be split, and the host WR that carries bytes [offset, offset +
// length) of a whole one. Pure functions: no state, no allocation.
#ifndef VRDMA_BACKEND_SCHEDULER_SPLIT_H_
#define VRDMA_BACKEND_SCHEDULER_SPLIT_H_

#include <cstdint>
#include <span>

#include "backend/rnic/rnic.h"

namespace vrdma::sched {

// Whether the opcode consumes a receive at the destination.
inline bool ConsumesReceive(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm ||
         op == WrOpcode::kSendWithInv || op == WrOpcode::kRdmaWriteWithImm;
}

// A WR may be split when it moves data through SGEs on a connected QP
// (RC/UC): WRITE and READ always, SEND and WRITE_WITH_IMM only when the
// receiving side reassembles them. Inline data, atomics, UD never.
bool Splittable(const SendWr& wr, QpType type, bool receiver_reassembles);

// Writes into *out the piece of `whole` that carries [offset, offset +
// length): its SGEs sliced from whole's, remote_addr advanced by offset,
// the fence only on the first piece, the immediate, solicited flag and
// WITH_IMM opcode only on the last. Signaling is left clear (the stage
// decides). offset + length must be within whole.total_length().
void BuildPiece(const SendWr& whole, uint32_t offset, uint32_t length,
                bool last, SendWr* out);

// Writes into out the SGEs covering bytes [offset, offset + length) of the
// list in (fewer bytes when the list is shorter); returns how many. Used
// for send pieces and for the receive slices they land in.
int SliceSges(std::span<const Sge> in, uint64_t offset, uint64_t length,
              std::span<Sge> out);

// The piece length for a policy's chunk_bytes on a QP whose RNIC prefers
// whole multiples of `granule` (Rnic::PieceGranule): chunk_bytes rounded
// down to one, unless it is below one granule (then kept: the policy
// wants smaller pieces than the granule more than it wants whole ones).
inline uint32_t PieceBytes(uint32_t chunk_bytes, uint32_t granule) {
  if (granule <= 1 || chunk_bytes < granule) return chunk_bytes;
  return chunk_bytes - chunk_bytes % granule;
}

// Copies a WR's meaningful fields (its used SGEs, not the whole array).
void CopyWr(const SendWr& src, SendWr* dst);

}  // namespace vrdma::sched

#endif  // VRDMA_BACKEND_SCHEDULER_SPLIT_H_
