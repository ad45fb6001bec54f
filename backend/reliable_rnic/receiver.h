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
// As built (steps 11-13): WRITE chunks, WRITE_RETX, SEND_DATA,
// WRITE_TAIL, READ_REQ (checked at arrival by the responder's rules,
// served at delivery through the connection's Sender, which answers with
// READ_RESP units; delivery waits while max_dest_rd_atomic READs are being
// answered) and READ_RESP (this end's READs' units: the window is its
// Sender's READs in flight, the copy is the Sender's, the ACK this
// receiver's, on a timer of its own so that the other direction's MIDs do
// not disturb the trigger's order). A
// SEND_DATA unit is copied into the guest receive its rcv_index names (the
// connection's RecvQueue) when it arrives if that receive is posted; else
// its bounce buffer is kept (no credit goes back, so the sender stops)
// until the guest posts it, or until rnr_retry x min_rnr_timer passed: then
// the message is dropped and NAKed RNR (§2.3, "Receive credits and RNR").
// A WRITE_TAIL's bytes go into place like a WRITE_RETX's, under the same
// wait. At delivery the receive completes with the message's length and
// immediate; a SEND longer than its receive completes it LOC_LEN_ERR (a bad
// receive SGE LOC_PROT_ERR) and the QP's receive side fails, as a native
// responder goes to ERR. Fixed tables, sized by the constructor (a control
// call). With a packet lifetime, a message that a WRITE_RETX unit
// completed waits that long before delivery (§4.2, "Late originals").
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_RECEIVER_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_RECEIVER_H_

#include <array>
#include <cstdint>
#include <span>

#include "backend/reliable_rnic/recv_queue.h"
#include "backend/reliable_rnic/unit_ranges.h"
#include "backend/reliable_rnic/wire_format.h"
#include "backend/rnic/rnic.h"
#include "policy/reliability/ack_trigger.h"

namespace vrdma::reliable {

class Connection;

struct ReceiverParams {
  policy::reliability::AckTriggerParams trigger{};
  uint32_t max_ranges = 16;  // §4.2, at most 16
  // The fabric's bound on a packet's lifetime (§4.2, "Late originals";
  // --reliability-packet-lifetime-us): a message that a WRITE_RETX unit
  // completed is delivered no earlier than this after that unit's
  // arrival, so that a copy of its original WRITE chunk, only late, lands
  // before the delivery rather than after. 0: no hold.
  uint64_t packet_lifetime_ns = 0;
};

class Receiver {
 public:
  static constexpr uint32_t kMaxRanges = UnitRanges::kMaxRanges;
  static constexpr uint32_t kPendingMax = 2 * kAckMaxEntries;

  Receiver(Connection& conn, const ReceiverParams& params, uint32_t path_mtu);

  // The first MID the peer sends, the peer's rnr_retry (CONNECT; 7: wait
  // for a receive forever) and its QP's retry budget (0 or ~0: never); a
  // packet-lifetime hold lasts at most half the budget, so that the held
  // message's WR does not fail RETRY_EXC_ERR at the peer.
  void Start(uint32_t first_mid, uint8_t peer_rnr_retry = 7,
             uint64_t peer_retry_budget_ns = 0);

  // A chunk (the data QP's WRITE_WITH_IMM receive completion), polled at
  // now_ns (T2).
  void OnChunk(uint32_t imm_data, uint32_t byte_len, uint64_t now_ns);
  // A SEND into bounce buffer `bounce`: bytes is what arrived (byte_len).
  // True when the receiver keeps the buffer (a unit waiting for its guest
  // receive): it reposts it itself later. False: repost it now.
  bool OnSend(std::span<const uint8_t> bytes, uint32_t bounce, uint64_t now_ns);
  // The guest posted receives (the RecvQueue has them): units waiting for
  // them are copied, their buffers reposted, and the credits told.
  void OnRecvPosted(uint64_t now_ns);
  // Units held in bounce buffers, waiting for a guest receive.
  uint32_t held() const { return nheld_; }
  bool failed() const { return failed_; }
  // The ACK timer; sends what is pending when due. Returns when this side
  // is next due (Sender::Pump): 0 at once, a time when only its timers
  // are pending (the ACK timer, a hold, a repeat, the RNR budget, NAK
  // repeats), UINT64_MAX when nothing is.
  uint64_t Pump(uint64_t now_ns);

  uint32_t deliv_mid() const { return deliv_mid_; }
  // Bounce receives posted since the connection started (credits, §3.2).
  uint32_t credits = 0;

 private:
  // A message's record but its ranges: what FindOrMake clears, one cache
  // line (the ranges' 128 bytes are only written as far as they are used;
  // with eight QPs the record is out of L1 when its message begins, and
  // clearing the whole was three lines written per WR).
  struct RecordFields {
    bool used = false;
    bool consumes = false;  // SEND_DATA or WRITE_TAIL seen: a receive
    bool is_send = false;
    bool with_imm = false;
    bool len_known = false;
    // READ_REQ (step 13): the READ's source, served at delivery.
    bool is_read = false;
    WcStatus err = WcStatus::kSuccess;  // the receive's error, if any
    uint32_t rcv_index = 0;
    uint32_t imm_be = 0;
    uint32_t held = 0;                  // its units held in bounce buffers
    uint32_t mid = 0;
    uint32_t rkey = 0;
    uint64_t len = 0;
    uint64_t raddr = 0;
    // Not delivered before (packet_lifetime_ns after its first WRITE_RETX
    // unit); 0: no hold.
    uint64_t not_before_ns = 0;
  };
  struct alignas(64) Record : RecordFields {
    static_assert(sizeof(RecordFields) + sizeof(uint32_t) <= 64,
                  "what FindOrMake clears, and the ranges' count: a line");
    // Emptied by its count (UnitRanges::Clear): entries past the count
    // are stale and never read.
    UnitRanges ranges;
  };
  // Makes r a new message's record.
  static void Reset(Record& r) {
    static_cast<RecordFields&>(r) = RecordFields{};
    r.ranges.Clear();
  }
  struct Pending {
    bool is_send = false;
    uint64_t gseq = 0;    // is_send
    uint32_t number = 0;  // a WRITE chunk's reliable number
    uint64_t t2_ns = 0;   // its arrival
  };

  struct Held {
    uint32_t bounce = 0;
    uint32_t bytes = 0;
    uint32_t mid = 0;
  };

  RxContext Context(const Record* rec) const;
  // The RecvQueue sequence of receive rcv_index, and whether it is posted.
  uint64_t SeqOf(uint32_t rcv_index) const {
    return rq_next_ + (rcv_index - rcv_next_);
  }
  bool ReceivePosted(uint32_t rcv_index) const;
  // The most units held at once: the bounce receives less a reserve.
  uint32_t HoldMax() const;
  bool BadRcvIndex(const DaemonHeader& h, const Record* rec) const;
  // The MR a WRITE_TAIL or WRITE_RETX writes, if every §3.6 access rule
  // holds (rx_access_nak otherwise).
  const struct MrRecord* WriteTarget(const DaemonHeader& h) const;
  // A READ_REQ against the responder's rules (step 13): the QP's (no
  // REMOTE_READ, max_dest_rd_atomic 0: kInvalidRequest), then the MR
  // table's (kRemoteAccess); kNone when it may be served. Counts the rule.
  NakCode ReadRefused(uint32_t rkey, uint64_t addr, uint64_t len);
  // A READ_RESP unit of one of this end's READs.
  void OnReadResp(const DaemonHeader& h, std::span<const uint8_t> data,
                  uint64_t now_ns);
  // Copies a unit into its place: the guest receive (SEND_DATA) or the MR
  // (WRITE_TAIL); a receive error is kept in the record.
  void Place(const DaemonHeader& h, std::span<const uint8_t> data, Record& rec,
             uint64_t now_ns);
  WcStatus CopyToReceive(uint64_t seq, uint64_t off, const uint8_t* data,
                         uint32_t len) const;
  void Release(uint32_t bounce);
  // The receive side fails from mid on (an RNR give-up, a receive error):
  // held units dropped, NAKed; flush: the QP's receives flush (ERR).
  void FailFrom(uint32_t mid, NakCode code, bool flush, uint64_t now_ns);
  void RnrExpired(uint64_t now_ns);
  Record* Find(uint32_t mid);
  Record* FindOrMake(uint32_t mid);
  static bool Complete(const Record& r);
  void Deliver(uint64_t now_ns);
  // deliv_mid moved without an arrival (a wait ended): the ACK that tells
  // it goes again while nothing new arrives (§4.3).
  void RepeatDeliveryAck(uint64_t now_ns);
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
  // READ_RESP entries pending, and the oldest one's arrival (their timer).
  uint32_t read_pending_ = 0;
  uint64_t read_since_ns_ = 0;
  // A READ_REQ at deliv_mid waits for a responder record.
  bool read_stalled_ = false;
  // The message at deliv_mid waits for its packet-lifetime hold, until
  // hold_until_ns_.
  bool delivery_held_ = false;
  uint64_t hold_until_ns_ = 0;
  uint64_t hold_ns_ = 0;  // packet_lifetime_ns, at most half the peer's budget
  // Repeats still to send of the ACK of a delivery no arrival made.
  uint32_t delivery_repeats_left_ = 0;
  uint64_t next_delivery_repeat_ns_ = 0;

  // Receives (step 12).
  RecvQueue* rq_ = nullptr;
  uint32_t rcv_next_ = 0;         // rcv_index of the next receive to complete
  uint64_t rq_next_ = 0;          // its RecvQueue sequence
  std::array<Held, 256> held_{};  // at most the bounce receives
  uint32_t nheld_ = 0;
  bool waiting_ = false;
  uint64_t wait_since_ns_ = 0;
  uint64_t next_wait_ack_ns_ = 0;
  uint64_t rnr_budget_ns_ = 0;  // rnr_retry x min_rnr_timer
  bool rnr_forever_ = true;     // rnr_retry 7
  bool failed_ = false;
  uint32_t fail_mid_ = 0;
  NakCode fail_code_ = NakCode::kNone;
  uint32_t naks_left_ = 0;  // repeats of the NAK still to send
  uint64_t next_nak_ns_ = 0;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_RECEIVER_H_
