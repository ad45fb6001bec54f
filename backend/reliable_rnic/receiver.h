// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Receiver: the receiving side of one uc-mode virtual QP
// (docs/reliability.md §4.2, §4.3): the ring of message records for MIDs
// [deliv_mid, deliv_mid + 64), each with up to 16 received unit ranges;
// the checks of §3.6 on every chunk (CheckChunk) and WRITE_RETX
// (ParseHeader, CheckHeader, then the MR table's access rules); the copy
// of a WRITE_RETX unit into place only while its MID is not delivered;
// delivery in MID order; and the ACKs (ack_trigger.h decides when; up to
// 48 entries each, with the hold time of the newest arrival, §4.4).
//
// As built (step 11): WRITE chunks and WRITE_RETX; SEND_DATA, WRITE_TAIL
// and the READ types are counted rx_malformed until steps 12-13 carry
// them. Fixed tables, sized by the constructor (a control call).
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_RECEIVER_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_RECEIVER_H_

#include <array>
#include <cstdint>
#include <span>

#include "backend/reliable_rnic/wire_format.h"
#include "backend/rnic/rnic.h"
#include "policy/reliability/ack_trigger.h"

namespace vrdma::reliable {

class Connection;

struct ReceiverParams {
  policy::reliability::AckTriggerParams trigger{};
  uint32_t max_ranges = 16;  // §4.2, at most 16
};

class Receiver {
 public:
  static constexpr uint32_t kMaxRanges = 16;
  static constexpr uint32_t kPendingMax = 2 * kAckMaxEntries;

  Receiver(Connection& conn, const ReceiverParams& params, uint32_t path_mtu);

  // The first MID the peer sends (CONNECT).
  void Start(uint32_t first_mid);

  // A chunk (the data QP's WRITE_WITH_IMM receive completion), polled at
  // now_ns (T2).
  void OnChunk(uint32_t imm_data, uint32_t byte_len, uint64_t now_ns);
  // A SEND into a bounce buffer: bytes is what arrived (byte_len).
  void OnSend(std::span<const uint8_t> bytes, uint64_t now_ns);
  // The ACK timer; sends what is pending when due. True while anything is
  // pending.
  bool Pump(uint64_t now_ns);

  uint32_t deliv_mid() const { return deliv_mid_; }
  // Bounce receives posted since the connection started (credits, §3.2).
  uint32_t credits = 0;

 private:
  struct Range {
    uint32_t begin = 0, end = 0;  // units [begin, end)
  };
  struct Record {
    bool used = false;
    uint32_t mid = 0;
    bool len_known = false;
    uint64_t len = 0;
    uint32_t nranges = 0;
    std::array<Range, kMaxRanges> ranges{};
  };
  struct Pending {
    bool is_send = false;
    uint64_t gseq = 0;    // is_send
    uint32_t number = 0;  // a WRITE chunk's reliable number
    uint64_t t2_ns = 0;   // its arrival
  };

  RxContext Context(const Record* rec) const;
  Record* Find(uint32_t mid);
  Record* FindOrMake(uint32_t mid);
  static bool Covered(const Record& r, Range u);
  // Inserts u (merging); false when it would need a 17th range.
  bool Insert(Record& r, Range u) const;
  static bool Complete(const Record& r);
  void Deliver();
  void Arrived(const Pending& p, const policy::reliability::Arrival& a,
               uint64_t now_ns);
  void Nak(NakCode code, uint32_t mid, uint64_t now_ns);
  // Sends every pending entry (several ACKs beyond 48); false when the
  // ACK channel had no room (they stay pending).
  bool Flush(uint64_t now_ns, uint8_t nak_code = 0, uint32_t nak_mid = 0);

  Connection& conn_;
  const ReceiverParams p_;
  policy::reliability::AckTrigger trigger_;
  uint32_t deliv_mid_ = 0;
  std::array<Record, kRxMessagesPerQp> ring_{};
  std::array<Pending, kPendingMax> pending_{};
  uint32_t npending_ = 0;
  bool flush_wanted_ = false;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_RECEIVER_H_
