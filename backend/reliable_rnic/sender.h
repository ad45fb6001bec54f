// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Sender: the sending side of one uc-mode virtual QP (docs/reliability.md
// §4.1, §4.4): the message table (one record per guest WR, SQ depth), the
// chunk table (the original WRITE chunks in flight, a ring of
// chunks_in_flight), the transmissions in flight (one per gseq, beside
// policy/reliability's LossDetector), chunking (chunk_size.h), the tail
// rule (§2.3), retransmission of lost units as WRITE_RETX SENDs, the
// retry budget, and guest completions in post order, once, when the
// peer's deliv_mid passes the message.
//
// As built (steps 11-13): WRITE, WRITE_WITH_IMM (chunks for the body, a
// WRITE_TAIL under the tail rule), SEND and SEND_WITH_IMM (SEND_DATA
// units), READ (a READ_REQ; the READ_RESP units come back to this end's
// receiver, which hands them to OnReadResponse) and atomics (on the
// virtual QP's lower RC QP, sender_read.cc); as the responder of the
// peer's READs, the READ_RESP units (ServeRead). The window is SwiftWindow's (§4.5, step 14: delay-based AIMD,
// pacing below one unit), within at most max_xmits transmissions in
// flight and the peer's credits (§3.2: every chunk and daemon-header SEND
// consumes one of its bounce receives). Every table is sized by the
// constructor (a control call); Post, OnAck, OnSendCompletion and Pump
// allocate nothing.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_SENDER_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_SENDER_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "backend/base/status.h"
#include "backend/reliable_rnic/signal_every.h"
#include "backend/reliable_rnic/unit_ranges.h"
#include "backend/reliable_rnic/wire_format.h"
#include "backend/rnic/rnic.h"
#include "policy/reliability/chunk_size.h"
#include "policy/reliability/loss_detector.h"
#include "policy/reliability/rto.h"
#include "policy/reliability/rto_undo.h"
#include "policy/reliability/rtt_estimator.h"
#include "policy/reliability/swift_window.h"

namespace vrdma::reliable {

class Connection;

// READs and atomics in flight per QP, either way (max_rd_atomic,
// max_dest_rd_atomic): SoftRnic's and IBA's usual cap, so the tables are
// fixed (step 13).
inline constexpr uint32_t kMaxRdAtomic = 16;

// What a READ_RESP unit that passed CheckHeader was to its READ.
enum class ReadRespResult : uint8_t {
  kNew,          // copied into the READ's local SGEs: acknowledge it
  kDuplicate,    // already here, or its READ already ended: acknowledge again
  kNotARead,     // the MID is not a READ of this end (rx_mid_outside_window)
  kBadLength,    // msg_len is not the READ's (rx_bad_offset)
  kRangesFull,   // a 17th range (rx_ranges_full): dropped, sent again later
};

struct SenderParams {
  uint32_t chunks_in_flight = 256;   // §4.1: chunk table and gseq ring
  uint32_t max_xmits = 32;           // the peer's bounce receives
  // The data QP's sends are signaled one in signal_every (SignalEvery; at
  // most chunks_in_flight / 2).
  uint32_t signal_every = 16;
  // The congestion window (§4.5, step 14).
  policy::reliability::SwiftWindowParams window{};
  policy::reliability::RtoParams rto{};
  policy::reliability::ChunkSizeParams chunk{};
};

class Sender {
 public:
  // sq_depth: the guest's SQ depth (message table); max_inline: its
  // max_inline_data (inline bytes are copied into `inline_area`, a part
  // of the connection's registered region, sq_depth x max_inline bytes,
  // whose lkey is region_lkey).
  Sender(Connection& conn, const SenderParams& params, uint32_t sq_depth,
         uint32_t max_inline, uint8_t* inline_area, uint32_t region_lkey);
  ~Sender();
  Sender(const Sender&) = delete;
  // The host bytes of a Sender's tables for an SQ of sq_depth (§8).
  static uint64_t HostBytes(const SenderParams& params, uint32_t sq_depth);
  Sender& operator=(const Sender&) = delete;

  // The first MID and gseq of this direction (CONNECT).
  void Start(uint32_t first_mid, uint64_t first_gseq);

  // Guest WRs, in order (PostSend's contract): returns how many were
  // taken; *first_error says why the next one was not (kNoResource: the
  // message table is full; kInvalid: an opcode uc mode does not carry,
  // inline READ or atomic, an atomic not of one 8-byte SGE, or more than
  // 256 MiB).
  int Post(std::span<const SendWr> wrs, Status* first_error);

  // An ACK that passed ParseAck and the QP lookup, polled at t4_ns.
  void OnAck(const Ack& ack, uint64_t t4_ns);
  // A completion of a send of the data QP (chunk or WRITE_RETX); wakes
  // the connection only when it lets more go (or failed the QP: Fail).
  void OnSendCompletion(const Completion& c);
  // Loss detection, the retry budget, retransmissions, new chunks, guest
  // completions. Returns when this side is next due (docs/reliability.md
  // §2.1 "Turns"): 0 at once, a time when only its timers are pending
  // (an RTO or RACK's window, the retry budget, pacing), UINT64_MAX when
  // nothing is queued or in flight. Whatever else can let it go on (an
  // ACK, a post, a completion) wakes the connection.
  uint64_t Pump(uint64_t now_ns);
  // The next Pump runs the loss and budget checks whatever checks_at_
  // says: the layer's sweep, whose early pumps must find what a wrong
  // checks_at_ would have hidden (a missed deadline).
  void CheckNow() { checks_at_ = 0; }

  // While connecting: the retry budget of WRs held since they were first
  // seen here (a peer that never answers fails them RETRY_EXC_ERR, as a
  // native RC QP towards nobody would).
  void CheckHeld(uint64_t now_ns);

  // The QP failed (its guest moved it to ERR, or a lower error): every WR
  // not yet completed completes with status (the first) and
  // WR_FLUSH_ERR (the rest), in order.
  void Fail(WcStatus status);

  // Messages posted but not yet completed, and whether the replay to the
  // lower RC QP took all (a CONNECT_NATIVE answer: uc was not agreed).
  uint32_t outstanding() const { return static_cast<uint32_t>(tail_ - head_); }
  // Posts every held WR to the lower RC QP, in order, and empties the
  // table; returns the number the lower refused (completed in error).
  uint32_t ReplayNative(Rnic& lower, RnicQp qp);

  // ---- READ and atomics (step 13, sender_read.cc) ----
  // Responder: the peer's READ of MID req_mid was delivered here: len
  // bytes at iova addr of the MR whose lower lkey is lkey go back as
  // READ_RESP units, sliced from guest memory. False while
  // max_dest_rd_atomic READs are being answered, or the QP failed (the
  // delivery waits).
  bool ServeRead(uint32_t req_mid, uint64_t addr, uint64_t len, uint32_t lkey,
                 uint64_t now_ns);
  // Responder records in use (never above max_dest_rd_atomic).
  uint32_t responses_in_use() const {
    return static_cast<uint32_t>(resp_tail_ - resp_head_);
  }
  // Requester: a READ_RESP unit (CheckHeader passed, with the window
  // [read_mid_begin(), next_mid())).
  ReadRespResult OnReadResponse(const DaemonHeader& h, uint64_t now_ns,
                                std::span<const uint8_t> data);
  uint32_t read_mid_begin() const;
  // A completion of the virtual QP's lower RC QP, where only atomics are
  // posted in uc mode.
  void OnAtomicCompletion(const Completion& c);
  // READs and atomics of this end in flight (max_rd_atomic bounds it).
  uint32_t rd_outstanding() const { return rd_outstanding_; }

  uint64_t srtt_ns() const { return rtt_.srtt(); }
  // The congestion window (bytes), bytes in flight, the delay target
  // (ns) at now_ns, and the unscaled max_chunk (§4.1, §4.5).
  uint64_t cwnd() const { return window_.cwnd(); }
  uint64_t inflight_bytes() const { return inflight_bytes_; }
  uint64_t target_ns(uint64_t now_ns) const {
    return window_.TargetNs(rtt_.base_rtt(now_ns));
  }
  uint64_t max_chunk() const { return chunk_size_.max_chunk(); }
  uint32_t acked_mid() const { return acked_mid_; }
  uint32_t next_mid() const { return next_mid_; }
  bool failed() const { return failed_; }

 private:
  enum class MsgState : uint8_t { kQueued, kDelivered, kFailed };
  struct MsgFields;
  struct Msg;
  struct ChunkRec;
  struct Xmit;
  struct RetxUnit {
    uint64_t cseq = 0;
    uint16_t unit = 0;
    uint32_t expiries = 0;
  };

  // A READ of this end in flight: its READ_RESP units so far.
  struct ReadRec {
    bool used = false;
    uint64_t msg_seq = 0;
    uint32_t units = 1;  // max(1, ceil(len / 4096))
    UnitRanges got;
  };
  // A READ of the peer's being answered.
  struct RespRec {
    uint32_t req_mid = 0;
    uint64_t addr = 0;  // iova in the MR of lkey
    uint64_t len = 0;
    uint32_t lkey = 0;
    uint32_t units = 1;
    uint32_t sent = 0;   // units sent once
    uint32_t acked = 0;  // units acknowledged
    uint64_t t_first_ns = 0;
    bool done = false;   // every unit acknowledged, or given up
  };

  Msg& MsgAt(uint64_t seq);
  Msg* FindMsg(uint32_t mid);
  ChunkRec& ChunkAt(uint64_t cseq);
  Xmit& XmitAt(uint64_t gseq);
  ChunkRec* FindChunk(uint32_t mid, uint16_t off);
  // Marks units of a chunk acked; true when any was new.
  void AckUnits(ChunkRec& c, uint16_t mask, uint64_t now_ns);
  void DetectLosses(uint64_t now_ns, bool all = false);
  // An ACK entry of gseq proving an RTO spurious undoes its reaction.
  void UndoIfSpurious(const Xmit& x, uint64_t t4_ns);
  void QueueLostUnits(uint64_t cseq, uint16_t mask, uint32_t expiries);
  bool SendRetransmissions(uint64_t now_ns);
  bool SendNewChunks(uint64_t now_ns);
  // One pass of SendNewChunks over the queue; *tail_held: an L chunk
  // waited for the tail rule.
  bool SendNewChunksPass(uint64_t now_ns, uint64_t srtt, uint64_t target,
                         bool* tail_held);
  // Everything SendNewChunks sends for m went out (for good: a message's
  // sent bytes, tail_sent and end only grow).
  static bool AllPosted(const Msg& m);
  bool PostChunk(uint64_t seq, uint64_t bytes, bool last, bool hint,
                 uint64_t now_ns);
  bool PostRetx(uint64_t cseq, uint16_t unit, uint32_t expiries,
                uint64_t now_ns);
  // One unit abs_unit of message seq as a daemon-header SEND: SEND_DATA
  // (SENDs), WRITE_TAIL (a WRITE_WITH_IMM's last unit) or WRITE_RETX.
  // retx: unit `unit` of chunk cseq sent again; else an original piece,
  // which takes a chunk record of its own.
  bool PostPiece(uint64_t seq, uint32_t abs_unit, uint64_t cseq, uint16_t unit,
                 uint32_t expiries, bool retx, bool hint, uint64_t now_ns);
  // Receives the peer has posted that this end has not used (§3.2): never
  // more than its bounce count.
  uint32_t Credits() const;
  bool ChunkLive(uint64_t cseq) const {
    return cseq >= chunk_head_ && cseq < chunk_tail_;
  }
  bool CanTransmit() const;
  // Pacing (§4.5): false while cwnd < one unit and the next transmission's
  // time has not come; Paced records one of `bytes` that left at now_ns.
  bool PaceOpen(uint64_t now_ns) const;
  // Room in the window (inflight < cwnd, so one unit always fits while
  // nothing is in flight) and the pacing time has come: every
  // transmission, retransmissions included, waits for both.
  bool WindowOpen(uint64_t now_ns) const;
  void Paced(uint64_t now_ns, uint64_t bytes);
  // A layer SEND of h (§3.2) in the next header slot: h's destination,
  // gseq, token and credits filled in, the header its first SGE (num_sge
  // 1, in header_wr_); the caller adds the payload's SGEs.
  SendWr& HeaderSend(DaemonHeader& h, bool retx);
  // A new chunk record (resp: of a READ_RESP unit, msg_seq its RespRec)
  // for the transmission about to be booked; its sequence number.
  uint64_t NewChunk(uint64_t msg_seq, uint32_t mid, uint16_t off, uint16_t nunits,
                    uint64_t bytes, bool resp);
  // Books a transmission just posted (whole: a chunk's original WRITE,
  // else its `unit`): its gseq and Xmit, the loss detector's timer, the
  // peer's credit, pacing, the bytes in flight.
  void Transmitted(uint64_t cseq, uint16_t unit, bool whole, uint64_t bytes,
                   uint32_t expiries, uint64_t now_ns);
  // Slices [off, off + len) of m's data into out; returns the SGE count.
  int Slice(const Msg& m, uint64_t off, uint64_t len, Sge* out,
            int room) const;
  // READ and atomics (sender_read.cc).
  bool RespLive(uint64_t rseq) const {
    return rseq >= resp_head_ && rseq < resp_tail_;
  }
  RespRec& RespAt(uint64_t rseq) { return resps_[rseq % kMaxRdAtomic]; }
  uint32_t MaxRdAtomic() const;
  // A READ or atomic message at seq in SendNewChunks' walk: sends what it
  // may; false when nothing after it may go now.
  bool SendReadOrAtomic(uint64_t seq, uint64_t now_ns, bool* did);
  bool SendResponses(uint64_t now_ns);
  bool PostResp(uint64_t rseq, uint32_t unit, uint64_t cseq, uint16_t cunit,
                bool retx, uint32_t expiries, uint64_t now_ns);
  void RespUnitsAcked(uint64_t rseq, uint32_t n);
  void PopResponses(uint64_t now_ns);
  // Copies a READ_RESP unit into m's local SGEs (the MR table's local
  // rules); false on a protection error.
  bool CopyToLocal(const Msg& m, uint64_t off, std::span<const uint8_t> data);
  // A READ or atomic ended (complete, failed): its record and count freed.
  void ReleaseRd(Msg& m);
  void Delivered(uint32_t deliv_mid);
  void CheckBudget(uint64_t now_ns);
  void FailFrom(uint64_t seq, WcStatus status);
  void Complete();
  void PopChunks();
  // Pump's answer when something is pending (Pump).
  uint64_t NextDueNs(uint64_t now_ns);
  // Something may wait to be sent: a retransmission, a READ's response, a
  // message from send_from_ on (it may be AllPosted since the last
  // SendNewChunks: then true for nothing, which costs a pump).
  bool HasUnsent() const;
  // The last SendNewChunks pass stopped at the first unsent message, a
  // WRITE, because the window refused its chunk (room_wait_seq_), and
  // nothing else waits to be sent: only more room (an ACK, a loss) lets
  // anything go, a message posted behind it included.
  bool StoppedForRoom() const;
  // StoppedForRoom, and the window still refuses that chunk
  // (ChunkSize::Next): a pump would send nothing.
  bool WaitsForRoom(uint64_t now_ns);
  // The message whose retry budget CheckBudget watches (§1): the oldest
  // undelivered, if it started and is no atomic on the RC QP; else tail_.
  uint64_t BudgetHead();
  // When CheckBudget would fail the budget head (UINT64_MAX: none).
  uint64_t BudgetDueNs();
  // m's first transmission: its budget starts (checks_at_ follows).
  void Started(Msg& m, uint64_t now_ns);
  // The budget head may be another message now (the one before it was
  // delivered or ended: a later message can have made no progress since
  // it started): checks_at_ follows.
  void BudgetHeadMoved() { checks_at_ = std::min(checks_at_, BudgetDueNs()); }

  // The members in the order a pump and an ACK use them, the ones both
  // touch in the first lines: with eight busy QPs a connection's state is
  // out of L1 between two of its turns, and each line it spans is a miss
  // (docs/benchmarks.md "What eight QPs add").
  Connection& conn_;
  // From SenderParams, the two a pump reads (the rest went to the window,
  // RTO, chunk size and signaling objects that the constructor built).
  const uint32_t chunks_in_flight_;
  const uint32_t max_xmits_;
  const uint32_t sq_depth_;
  const uint32_t max_inline_;
  // The rings' sizes are powers of two (at least sq_depth_ and
  // chunks_in_flight): a slot is seq & mask, not a division (some twenty
  // per WR).
  const uint64_t msg_mask_;
  const uint64_t chunk_mask_;
  uint8_t* const inline_area_;
  const uint32_t region_lkey_;

  // Message table: records [head_, tail_) by sequence (slot seq & mask).
  std::unique_ptr<Msg[]> msgs_;
  uint64_t head_ = 0, tail_ = 0;
  // Every message before it is AllPosted: SendNewChunks starts there, not
  // at head_ (32 WRs in flight were 32 records read at every turn).
  uint64_t send_from_ = 0;
  // The message at which SendNewChunks' last pass stopped because the
  // window refused its chunk, every message before it AllPosted (it is
  // send_from_ then) and no tail rule holding one (UINT64_MAX: the pass
  // stopped for another reason). StoppedForRoom.
  uint64_t room_wait_seq_ = UINT64_MAX;
  // Before this, DetectLosses and CheckBudget find nothing, so a pump
  // skips them (with eight busy QPs nearly every WR is a pump of its own,
  // and the two were ~170 of its instructions). A lower bound: set by
  // the checks (the loss detector's next check, BudgetDueNs), lowered by
  // what brings a check nearer (a transmission's RTO, an ACK's reordering
  // window or smaller srtt, a message's start, a new budget head), 0 at
  // Start and for the sweep (CheckNow).
  uint64_t checks_at_ = 0;
  uint32_t next_mid_ = 0;   // MID of the next WR posted
  uint32_t acked_mid_ = 0;  // the peer's deliv_mid: MIDs below delivered
  uint32_t sent_mid_end_ = 0;  // one past the newest MID with a chunk sent
  uint32_t next_rcv_ = 0;      // rcv_index of the next receive-consuming WR
  // Credits: the peer's count of bounce receives posted (from its ACKs),
  // and this end's transmissions that took one (less those found lost).
  uint32_t peer_credits_ = 0;
  uint32_t credit_used_ = 0;
  uint32_t rto_passes_ = 0;  // RTO passes since the last ACK (MovePath)
  uint32_t inflight_xmits_ = 0;
  uint32_t rd_outstanding_ = 0;
  // Some message may have its tail unit waiting (Msg::tail_retx): cleared
  // by the SendRetransmissions pass that finds none.
  bool tail_retx_any_ = false;
  bool peer_waiting_ = false;  // the peer's last ACK: a message waits there
  bool failed_ = false;
  WcStatus fail_status_ = WcStatus::kSuccess;

  // Chunk table: originals [chunk_head_, chunk_tail_).
  std::unique_ptr<ChunkRec[]> chunks_;
  uint64_t chunk_head_ = 0, chunk_tail_ = 0;
  uint64_t find_from_ = 0;  // FindChunk's next start: after its last find
  // Transmissions by gseq (slot gseq & chunk_mask_).
  std::unique_ptr<Xmit[]> xmits_;
  uint64_t next_gseq_ = 0;
  uint64_t inflight_bytes_ = 0;
  // Units waiting to be sent again (ring).
  std::unique_ptr<RetxUnit[]> retx_;
  uint32_t retx_cap_ = 0;
  uint64_t retx_head_ = 0, retx_tail_ = 0;
  // Data-QP sends posted and completed (the SQ, and header slots); which
  // of them are signaled.
  uint64_t posts_ = 0, posts_done_ = 0;
  SignalEvery signal_;
  uint64_t last_send_ns_ = 0;  // pacing: the newest transmission's time
  uint64_t last_send_bytes_ = 0;  // and its bytes
  // The peer's READs being answered: [resp_head_, resp_tail_) of resps_
  // (below); this end's READs and atomics in flight (rd_outstanding_).
  uint64_t resp_head_ = 0, resp_tail_ = 0;

  policy::reliability::LossDetector loss_;
  policy::reliability::RttEstimator rtt_;
  policy::reliability::SwiftWindow window_;
  policy::reliability::ChunkSize chunk_size_;
  policy::reliability::Rto rto_;
  policy::reliability::RtoUndo rto_undo_;
  // READ and atomics (step 13): this end's READs in flight, the peer's
  // READs being answered (a ring, in request order). The arrays come
  // last, after the fields every pump reads (fewer cache lines a pump of
  // a connection that others' pumps evicted misses on).
  std::array<ReadRec, kMaxRdAtomic> reads_{};
  std::array<RespRec, kMaxRdAtomic> resps_{};
  std::array<policy::reliability::Lost, 32> lost_buf_{};  // DetectLosses'
  // The layer's posts on the data QP, built once (a SendWr is 600 bytes to
  // clear): each post sets every field its opcode reads.
  SendWr chunk_wr_{};   // WRITE_WITH_IMM
  SendWr header_wr_{};  // SEND: a daemon header, then payload
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_SENDER_H_
