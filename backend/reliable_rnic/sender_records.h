// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The Sender's records (sender.h), shared by its three files: sender.cc
// (messages, chunks, completions), sender_acks.cc (ACKs, losses,
// retransmissions) and sender_read.cc (READ and atomics, step 13). Not
// for anyone else.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_SENDER_RECORDS_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_SENDER_RECORDS_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "backend/reliable_rnic/sender.h"

namespace vrdma::reliable {

inline bool IsAtomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
}

// Bookkeeping units of a length: a zero-length message is one unit.
inline uint32_t UnitsOf(uint64_t bytes) {
  return bytes == 0
             ? 1
             : static_cast<uint32_t>((bytes + kUnitSize - 1) / kUnitSize);
}

// A message's record but its SGEs: what Post clears (the SGEs are 512
// bytes it only overwrites, [0, num_sge)). The fields a WR's every step
// reads or writes (post, new chunks, ACKs, delivery, completion) come
// first, in the record's first cache line (alignas below): with eight
// QPs of 32 WRs each a message's record is out of L1 between two of its
// steps, and the fields these steps used were spread over three lines
// (Post, which clears them, now writes two).
struct Sender::MsgFields {
  // -- hot: one cache line
  MsgState state = MsgState::kQueued;
  WrOpcode op = WrOpcode::kRdmaWrite;
  bool tail_sent = false;  // WRITE_WITH_IMM: its WRITE_TAIL went out
  bool signaled = false;
  bool started = false;    // a first chunk went out
  bool tail_retx = false;  // the tail unit waits for every other (§2.3)
  bool tail_counted = false;
  bool atomic_posted = false;
  uint32_t send_flags = 0;
  uint32_t mid = 0;
  uint32_t units = 1;  // bookkeeping units: max(1, ceil(len / 4096))
  uint32_t acked_units = 0;
  uint64_t len = 0;
  uint64_t body = 0;  // bytes carried by WRITE chunks (§2.3)
  uint64_t sent = 0;  // bytes sent as new chunks
  // The retry budget's start (§1): the first transmission, restarted by
  // every unit of it the peer acknowledges (or, for a READ, answers), as
  // an RC QP's transport timer restarts at each ACK that makes progress.
  uint64_t t_budget_ns = 0;
  uint64_t wr_id = 0;
  // -- the rest (a post's, a chunk's, READ and atomics): the second line
  uint64_t remote_addr = 0;
  uint64_t tail_cseq = 0;
  uint64_t wr_len = 0;  // the guest's length (the completion's byte_len)
  uint64_t compare_add = 0, swap = 0;
  uint32_t imm = 0;        // the guest's immediate (network order)
  uint32_t rcv_index = 0;  // receive-consuming messages (§3.2)
  uint32_t rkey = 0;
  uint32_t tail_expiries = 0;
  WcStatus status = WcStatus::kSuccess;
  uint8_t num_sge = 0;
  uint8_t read_slot = 0;  // READ: its ReadRec, while rd_held
  bool rd_held = false;   // holds one of max_rd_atomic
};

struct alignas(64) Sender::Msg : MsgFields {
  static_assert(offsetof(MsgFields, wr_id) + sizeof(uint64_t) <= 64,
                "the hot fields fill the record's first cache line");
  static_assert(sizeof(MsgFields) <= 128, "what Post clears: two lines");
  std::array<Sge, kMaxSge> sge{};  // [0, num_sge)
};

// The chunk and transmission records are half a cache line each, aligned:
// one line touched per record at each step (at 40 and 48 bytes, most
// straddled two).
struct alignas(32) Sender::ChunkRec {
  uint64_t msg_seq = 0;
  uint64_t gseq = 0;   // the original WRITE's
  uint32_t mid = 0;
  uint32_t bytes = 0;
  uint16_t off = 0;     // first unit in the message
  uint16_t nunits = 1;  // bookkeeping units (a zero-length chunk: 1)
  uint16_t acked = 0;  // mask of units acked
  bool resp = false;   // a READ_RESP unit: msg_seq is its RespRec
  uint16_t full() const { return static_cast<uint16_t>((1u << nunits) - 1); }
};

struct alignas(32) Sender::Xmit {
  uint64_t gseq = ~uint64_t{0};
  uint64_t cseq = 0;
  uint64_t t_sent_ns = 0;
  uint32_t bytes = 0;
  uint8_t unit = 0;   // !whole: the unit of the chunk (< 16: acked's bits)
  bool whole = true;  // the original WRITE of the chunk
  bool lost = false;  // found lost (its credit given back)
  bool lost_rto = false;  // ... by its RTO (rto_undo.h)
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_SENDER_RECORDS_H_
