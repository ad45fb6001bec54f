// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Connection: one framed virtual QP (docs/reliability.md §2.3, §3.5): its
// CONNECT state and tokens, its lower UC data QP and layer region, and its
// Sender and Receiver. Made by the layer at the virtual QP's RTR when the
// QP is framed (ReliableRnic::ModifyQp, a control call: every table and
// buffer is allocated there); connected when the peer's CONNECT or
// CONNECT_OK gives its data QP (OnPeerConnect, on the data-path thread:
// the data QP's ModifyQp runs inline, which the layer allows only over a
// lower whose control calls share the data-path thread).
//
// The layer region, one MR in the virtual QP's PD with local write only
// (no guest can name its lkey, §2.3): `bounce` receive buffers of 4160
// bytes (a header and a unit), a 64-byte header slot per data-QP send, and
// the inline bytes of each guest WR (sq_depth x max_inline_data), so every
// WR's data is SGEs.
//
// Lower wr_ids on the data QP (the transport CQ): slot << 32 | kind << 28
// | index (kind: WrKind). The layer's slot number carries a generation in
// its high 16 bits, so that a completion of a destroyed connection's data
// QP still in the transport CQ never reaches the next one in its slot.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_CONNECTION_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "backend/base/status.h"
#include "backend/reliable_rnic/ack_channel.h"
#include "backend/reliable_rnic/active_set.h"
#include "backend/reliable_rnic/completion_ring.h"
#include "backend/reliable_rnic/counters.h"
#include "backend/reliable_rnic/mr_table.h"
#include "backend/reliable_rnic/receiver.h"
#include "backend/reliable_rnic/recv_queue.h"
#include "backend/reliable_rnic/sender.h"
#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

inline constexpr uint32_t kBounceBytes = kHeaderSize + kUnitSize;  // 4160

enum class WrKind : uint8_t { kChunk = 1, kRetx = 2, kBounce = 3 };

// A data-QP post's index (Sender: the post's sequence) keeps 28 bits.
inline constexpr uint32_t kDataWrIndexMask = 0x0fffffff;
inline uint64_t DataWrId(uint32_t slot, WrKind kind, uint32_t index) {
  return uint64_t{slot} << 32 | uint64_t{static_cast<uint8_t>(kind)} << 28 |
         (index & kDataWrIndexMask);
}
inline uint32_t DataWrSlot(uint64_t wr_id) {
  return static_cast<uint32_t>(wr_id >> 32);
}
inline WrKind DataWrKind(uint64_t wr_id) {
  return static_cast<WrKind>((wr_id >> 28) & 0xf);
}
inline uint32_t DataWrIndex(uint64_t wr_id) {
  return static_cast<uint32_t>(wr_id & kDataWrIndexMask);
}

struct ConnectionParams {
  uint32_t bounce = 32;  // §2.3 bounce_per_qp
  SenderParams sender{};
  ReceiverParams receiver{};
};

enum class ConnState : uint8_t {
  kConnecting,  // CONNECT sent, the peer's data QP not known yet
  kUc,          // the data QP is connected: the framed mode runs
  kNative,      // the peer answered CONNECT_NATIVE: passed through
  kFailed,      // the data QP could not be connected
};

// What the layer knows of the virtual QP when it frames it.
struct ConnectionInit {
  // What every WR's ACK or completion reads first, in one line.
  uint32_t slot = 0;      // the layer's slot (low 16 bits), generation
  uint32_t my_token = 0;  // the one the peer must send us
  uint64_t peer_daemon = 0;
  CompletionRing* send_ring = nullptr;  // the virtual send CQ's ring
  CompletionRing* recv_ring = nullptr;  // the virtual receive CQ's ring
  RecvQueue* rq = nullptr;              // the guest's receives (step 12)
  RnicQp vqp{};           // the virtual QP (its lower RC QP)
  RnicPd pd{};
  RnicCq transport_cq{};  // the layer's: the data QP's both CQs
  uint32_t sq_depth = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_inline = 0;
  bool sq_sig_all = false;
  uint64_t retry_budget_ns = 0;  // 0: never
  QpAttr attr{};          // the virtual QP's at RTR: av, MTU, access, dest
};

// The host bytes a framed QP of caps costs beyond its lower RC QP (§8):
// its Sender's and Receiver's tables, its layer region, its data QP on
// the lower, and the transport CQ's growth for it.
uint64_t FramedQpHostBytes(const QpCaps& caps, const ConnectionParams& params,
                           const Rnic& lower);

class Connection {
 public:
  using Clock = std::function<uint64_t()>;

  // active: the layer's set of connections with work (Wake); nullptr:
  // none (the caller pumps it every turn).
  Connection(Rnic& lower, const ConnectionInit& init,
             const ConnectionParams& params, ReliabilityCounters* counters,
             const MrTable* mrs, AckChannel* acks,
             ActiveSet* active = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Control path: the data QP (to INIT), the region and its MR, the
  // bounce receives. On failure nothing is left on the lower.
  Status Open();
  // The peer's CONNECT or CONNECT_OK: connects the data QP to the peer's
  // (RTR, RTS) and starts both directions; kUc on success. The peer's
  // rnr_retry and retry budget (0: never) bound what its WRs wait here.
  Status OnPeerConnect(uint32_t peer_data_qpn, uint32_t peer_data_psn,
                       uint32_t peer_token, uint8_t peer_rnr_retry = 7,
                       uint64_t peer_retry_budget_ns = 0);
  // Destroys the lower objects (control path).
  void Close();
  // The live switch retired this connection (§6): its data QP goes to
  // ERR, inline (as EnterError), so that a late or duplicated chunk can no
  // longer be written into guest memory; its flushes carry this slot's
  // generation and are dropped.
  void Quiesce();

  // A completion of the transport CQ for this connection.
  void OnTransportCompletion(const Completion& c, uint64_t now_ns);
  // Something gave this connection work: the layer pumps it at the next
  // turn, and then when its Pump says it is due (ActiveSet). Every entry
  // point that gives it work from outside its own Pump calls one of
  // these, for the half it gave work to (a pump touches only the halves
  // that are due: with eight busy QPs, pumping a sending host's idle
  // receivers and a receiving host's idle senders was an eighth of the
  // layer's L1 misses). The sender: its Post, OnAck, OnSendCompletion
  // (where the send queue was full), OnAtomicCompletion, and the
  // receiver's READ requests and responses (ServeRead, OnReadResponse);
  // the receiver: this class's bounce receive completions and its
  // OnRecvPosted; both: OnPeerConnect, a failure (Sender::Fail), the
  // layer when it starts a CONNECT.
  void Wake() {
    tx_due_ = rx_due_ = 0;
    if (active_ != nullptr) active_->Add(init_.slot & 0xffff);
  }
  void WakeSender() {
    tx_due_ = 0;
    if (active_ != nullptr) active_->Add(init_.slot & 0xffff);
  }
  void WakeReceiver() {
    rx_due_ = 0;
    if (active_ != nullptr) active_->Add(init_.slot & 0xffff);
  }
  // As WakeSender, but due at `at` (ActiveSet::AddAt): its pump would do
  // nothing before then (Sender::OnAck).
  void WakeSenderAt(uint64_t at) {
    tx_due_ = std::min(tx_due_, at);
    if (active_ != nullptr) active_->AddAt(init_.slot & 0xffff, at);
  }
  // What a sweep's pumps found (the layer adds them to its counters).
  struct SweepTally {
    uint64_t missed_wakes = 0, missed_deadlines = 0;
  };
  // Sender and receiver work, of each half that is due; when the
  // connection is next due (0 at once, UINT64_MAX: nothing pending;
  // Sender::Pump). With `sweep` (the layer's periodic sweep; also without
  // an ActiveSet) every half is pumped, and where the other half was due
  // (the layer's set cannot see the halves then) a half that was idle and
  // has work is a missed wake, one asleep that did something a missed
  // deadline.
  uint64_t Pump(uint64_t now_ns, SweepTally* sweep = nullptr);

  // The receive side failed as a native responder's QP would (a receive
  // error): the virtual QP's lower RC QP goes to ERR, so QueryQp says so.
  // A control call on the lower, inline: uc mode runs only where control
  // calls share the data-path thread (AttachPeerLink).
  void EnterError();
  // §5's uc backup: moves the data QP to another path (a new flow label:
  // RTS, SQD, the new address vector, RTS), inline (a control call, as
  // EnterError). The sender calls it after two RTO passes without an ACK.
  void MovePath();
  uint32_t path() const { return path_; }
  // Posts bounce receive `index` again.
  void RepostBounce(uint32_t index);
  // Posts one send on the data QP (sender); false when the lower refused.
  bool PostData(const SendWr& wr);
  // Posts one WR on the virtual QP's lower RC QP (an atomic, step 13).
  bool PostLowerRc(const SendWr& wr);

  const ConnectionInit& init() const { return init_; }
  uint32_t vqpn() const { return init_.vqp.qpn; }
  uint32_t peer_vqpn() const { return init_.attr.dest_qpn; }
  uint32_t data_qpn() const { return data_qp_.qpn; }
  uint32_t data_psn() const { return init_.my_token & 0xffffff; }
  uint32_t my_token() const { return init_.my_token; }
  uint32_t peer_token() const { return peer_token_; }
  uint32_t peer_data_qpn() const { return peer_data_qpn_; }
  ConnState state() const { return state_; }
  // The guest's retry budget (§1), from its RTS attributes; 0: never.
  uint64_t retry_budget_ns() const { return init_.retry_budget_ns; }
  void set_retry_budget_ns(uint64_t ns) { init_.retry_budget_ns = ns; }
  void set_state(ConnState s) { state_ = s; }
  void set_rnr_retry(uint8_t r) { init_.attr.rnr_retry = r; }
  void set_max_rd_atomic(uint8_t n) { init_.attr.max_rd_atomic = n; }
  bool connect_sent = false;     // the first CONNECT went (at RTS)
  uint64_t next_connect_ns = 0;  // the layer's CONNECT timer
  uint32_t connects_left = 0;    // repeats before it stops asking

  // Where ACKs to the peer go (the layer fills it from the peer's HELLO).
  AckAddress ack_to{};
  bool has_ack_to = false;

  Rnic& lower() { return lower_; }
  ReliabilityCounters& counters() { return *counters_; }
  const MrTable& mrs() const { return *mrs_; }
  AckChannel& acks() { return *acks_; }
  uint8_t* header_slot(uint64_t post_seq);
  uint8_t* bounce(uint32_t index);
  uint32_t bounce_count() const { return params_.bounce; }
  uint32_t region_lkey() const { return region_mr_.lkey; }
  Sender& sender() { return *sender_; }
  Receiver& receiver() { return *receiver_; }

 private:
  // One half's pump (Pump): *due is its due time, kept.
  template <typename Half>
  void PumpHalf(Half& half, uint64_t* due, uint64_t now_ns, bool all,
                SweepTally* check);

  // The members in the order a WR's steps use them (with eight busy QPs a
  // connection is out of L1 between its turns: each line is a miss), the
  // parameters and the bounce WR's 528 bytes last.
  Rnic& lower_;
  ReliabilityCounters* counters_;
  AckChannel* acks_;
  ActiveSet* active_;
  std::unique_ptr<Sender> sender_;
  std::unique_ptr<Receiver> receiver_;
  // When each half is next due (Pump): 0 at once, UINT64_MAX idle.
  uint64_t tx_due_ = 0, rx_due_ = 0;
  ConnState state_ = ConnState::kConnecting;
  uint32_t peer_token_ = 0;
  uint32_t peer_data_qpn_ = 0;
  uint32_t path_ = 0;  // MovePath calls so far
  RnicQp data_qp_{};
  RnicMr region_mr_{};
  std::unique_ptr<uint8_t[]> region_;
  uint64_t header_off_ = 0, inline_off_ = 0;
  uint32_t header_slots_ = 0;
  uint64_t region_bytes_ = 0;
  ConnectionInit init_;
  const MrTable* mrs_;
  ConnectionParams params_;
  RecvWr bounce_wr_{};  // RepostBounce's, cleared once
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_CONNECTION_H_
