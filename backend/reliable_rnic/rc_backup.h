// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RcPath: one virtual RC QP in rc mode (docs/reliability.md §5; step 16;
// Bifröst §3.4.2 B, A.2-A.3). The guest's WRs run natively (no framing)
// on a lower RC QP with a small retry count (2); at CONNECT a second lower
// RC QP, the backup, is connected to the peer's backup on another flow
// label. The path keeps a copy of every send WR (with its PSNs, counted as
// the lower counts them: max(1, ceil(len / mtu)), an atomic 1) and every
// receive (the QP's RecvQueue) until it completes, and reports every
// completion itself, in post order, through the virtual CQs' rings.
//
// Recovery: a RETRY_EXC_ERR on the QP carrying the sends (or the peer's
// RECOVER naming it) moves this end of the failed pair to ERR and sends
// RECOVER; each end answers the other's RECOVER with RECOVERED{epsn} (its
// failed QP's rq_psn, read after ERR) once its receives are reposted on
// the backup in order (after a marker receive's flush: every receive
// completion of the failed QP has been seen). On RECOVERED the send side
// completes every SEND or WRITE whose last PSN is below epsn (it
// executed; its ACK was lost: B A.2.1), fails an atomic that executed
// (RETRY_EXC_ERR: its result is lost, its effect happened once), and
// resubmits everything else in order on the backup, which becomes the
// primary. The failed pair is reset `reset_delay_ns` later (RESET, INIT,
// RTR, RTS with PSNs and a flow label of its next incarnation, which both
// ends compute alike) and is the next backup; a failure before that, or
// once the oldest WR's retry budget (§1) has passed, goes to the guest.
//
// Threads: everything on the data-path thread. The lower control calls
// (ModifyQp, QueryQp) run inline: rc mode runs only over a lower whose
// control calls share that thread (SoftRnic; ReliableRnic::AttachPeerLink).
// The tables are allocated by Open (a control call); nothing after.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_RC_BACKUP_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_RC_BACKUP_H_

#include <cstdint>
#include <memory>
#include <span>

#include "backend/base/status.h"
#include "backend/reliable_rnic/active_set.h"
#include "backend/reliable_rnic/completion_ring.h"
#include "backend/reliable_rnic/counters.h"
#include "backend/reliable_rnic/recv_queue.h"
#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

inline constexpr uint8_t kRcLowerRetryCnt = 2;  // §5: the lower's retry_cnt

struct RcPathInit {
  QpInit qp_init{};  // the virtual QP's: the backup is made like it
  RnicQp vqp{};      // the virtual QP's own lower RC QP (first primary)
  QpAttr attr{};     // the guest's attributes at RTR
  CompletionRing* send_ring = nullptr;
  CompletionRing* recv_ring = nullptr;
  RecvQueue* rq = nullptr;  // the guest's receives (the copies)
  uint64_t peer_daemon = 0;
  uint32_t my_token = 0;
  uint64_t reset_delay_ns = 1'000'000;  // the failed pair's background reset
  // The layer's set of rc paths with work, and this path's slot in it
  // (Wake); nullptr: none (the caller pumps it every turn).
  ActiveSet* active = nullptr;
  uint32_t slot = 0;
};

class RcPath {
 public:
  enum class State : uint8_t {
    kConnecting,  // the backup is not connected yet: failures go to the guest
    kReady,       // a backup (or the reset pair) is connected
    kRecovering,  // RECOVER sent, takeover pending
    kNoBackup,    // the peer answered CONNECT_NATIVE, or reset pending
    kFailed,      // an error went to the guest: everything passes as natively
  };

  RcPath(Rnic& lower, const RcPathInit& init, ReliabilityCounters* counters);
  ~RcPath();
  RcPath(const RcPath&) = delete;
  RcPath& operator=(const RcPath&) = delete;

  // The host bytes of a path for caps (§8): its copies and a backup QP.
  static uint64_t HostBytes(const QpCaps& caps, const Rnic& lower);

  // Control path: the copy tables and the backup QP (to INIT).
  Status Open();
  // The guest's RTS: the primary's first PSN, the retry budget, and what
  // the backup needs (timeout, rnr_retry, max_rd_atomic).
  void OnRts(const QpAttr& guest);
  // The guest's RTS -> RTS (access flags, min_rnr_timer): applied to each
  // of the path's QPs in RTS and kept for the next reset; the error of the
  // QP carrying the sends, if any.
  Status ModifyRts(const QpAttr& attr, uint32_t mask);
  // The peer's CONNECT or CONNECT_OK (rc): connects the backup.
  Status OnPeerConnect(uint32_t peer_backup_qpn, uint32_t peer_backup_psn,
                       uint32_t peer_token);
  void OnConnectNative() {
    Wake();
    state_ = State::kNoBackup;
  }
  // The guest moved the virtual QP to ERR: every lower QP of the path too.
  void OnGuestError() {
    Wake();
    EnterError(/*with_vqp=*/false);
  }

  // Data path.
  int Post(std::span<const SendWr> wrs, Status* first_error, uint64_t now);
  // Posts the receives the guest added to the RecvQueue.
  void OnRecvPosted();
  // A completion of one of the path's lower QPs.
  void OnCompletion(const Completion& c, uint64_t now);
  // The peer's RECOVER and RECOVERED; false: it names nothing of this
  // path's state (forged or stale: the caller counts it).
  [[nodiscard]] bool OnRecover(uint32_t failed_qpn, uint64_t now);
  [[nodiscard]] bool OnRecovered(uint32_t epsn, uint64_t now);
  // Timers (the background reset, the budget of a recovery), reports;
  // true while anything is pending.
  bool Pump(uint64_t now);
  // Something gave this path work: the layer pumps it from the next turn
  // on, until a Pump finds nothing pending (ActiveSet; docs/reliability.md
  // §2.1 "Turns"). Every public call that changes the path's state from
  // outside its Pump calls it (OnRts, ModifyRts, OnPeerConnect,
  // OnConnectNative, OnGuestError, Post, OnRecvPosted, OnCompletion,
  // OnRecover, OnRecovered), and the layer when it starts a CONNECT.
  void Wake() {
    if (init_.active != nullptr) init_.active->Add(init_.slot);
  }

  // Peer messages the layer sends for the path (then it calls Sent*).
  bool want_recover() const { return want_recover_; }
  bool want_recovered() const { return want_recovered_; }
  uint32_t recover_qpn() const { return qps_[failing_].qpn; }
  uint32_t recovered_epsn() const { return my_epsn_; }
  void SentRecover() { want_recover_ = false; }
  void SentRecovered() { want_recovered_ = false; }

  bool Owns(uint32_t qpn) const {
    return qpn == qps_[0].qpn || (qps_[1].id != 0 && qpn == qps_[1].qpn);
  }
  uint32_t backup_qpn() const { return qps_[1].qpn; }
  RnicQp backup_qp() const { return qps_[1]; }
  uint32_t peer_backup_qpn() const { return peer_qpn_[1]; }
  const Gid& dgid() const { return init_.attr.av.dgid; }
  uint32_t backup_psn() const { return first_psn_[1]; }
  uint32_t send_qpn() const { return qps_[scur_].qpn; }
  RnicQp send_qp() const { return qps_[scur_]; }
  uint32_t my_token() const { return init_.my_token; }
  uint32_t peer_token() const { return peer_token_; }
  uint64_t peer_daemon() const { return init_.peer_daemon; }
  // Its VM's counters (the layer's own for a VM it does not know).
  ReliabilityCounters& counters() { return *counters_; }
  uint32_t vqpn() const { return init_.vqp.qpn; }
  uint32_t peer_vqpn() const { return init_.attr.dest_qpn; }
  State state() const { return state_; }
  // Every send WR completed and reported, no recovery running (the live
  // switch's drain, §6).
  bool drained() const {
    return head_ == tail_ && state_ != State::kRecovering;
  }
  // Send WRs not yet completed and reported.
  uint64_t in_flight() const { return tail_ - head_; }
  bool spare_ready() const { return spare_ready_; }
  uint64_t retry_budget_ns() const { return budget_ns_; }
  uint8_t rnr_retry() const { return rts_.rnr_retry; }
  bool connect_sent = false;
  uint64_t next_connect_ns = 0;
  uint32_t connects_left = 0;

 private:
  struct Copy {
    uint64_t wr_id = 0;
    uint64_t remote_addr = 0;
    uint64_t compare_add = 0, swap = 0;
    uint64_t first_post_ns = 0;
    uint32_t send_flags = 0;
    uint32_t imm_data = 0;
    uint32_t rkey = 0;
    uint32_t first_psn = 0, npsn = 0;
    uint16_t inline_len = 0;
    WrOpcode opcode = WrOpcode::kSend;
    uint8_t num_sge = 0;
    uint8_t qp = 0;       // the lower QP it was posted on
    bool posted = false;  // on a lower QP (else held)
    bool done = false;
    bool report = false;  // push wc when reported (signaled, or an error)
    Completion wc{};
  };
  static constexpr uint64_t kMarker = uint64_t{1} << 63;

  // The ring is rounded up to a power of two: a slot is a mask.
  uint64_t Slot(uint64_t seq) const { return seq & mask_; }
  Copy& At(uint64_t seq) { return copies_[Slot(seq)]; }
  SendWr Build(uint64_t seq);
  bool PostCopy(uint64_t seq, uint8_t q);
  void Done(uint64_t seq, const Completion& c, bool report);
  void DoneSuccess(uint64_t upto_incl);
  void ReportSends();
  void FailFrom(uint64_t seq, WcStatus first);
  void EnterError(bool with_vqp);
  void StartRecovery(uint64_t now, bool send_drained);
  void MaybeRepostRecvs();
  void MaybeAnswer();
  void TakeOver(uint64_t now);
  void Finish();
  Status ResetPair(uint8_t q);
  Status Connect(uint8_t q, uint32_t dest_qpn, uint32_t rq_psn, uint32_t sq_psn,
                 uint32_t flow_label);
  uint32_t NextPsn(uint32_t token, uint32_t incarnation) const;
  int Which(uint32_t qpn) const {
    return qpn == qps_[0].qpn
               ? 0
               : (qps_[1].id != 0 && qpn == qps_[1].qpn ? 1 : -1);
  }

  Rnic& lower_;
  RcPathInit init_;
  ReliabilityCounters* counters_;  // its VM's
  State state_ = State::kConnecting;
  QpAttr rts_{};  // the guest's RTS attributes
  uint64_t budget_ns_ = 0;
  RnicQp qps_[2]{};  // [0] the virtual QP's own lower QP, [1] the backup
  uint32_t peer_qpn_[2]{};
  uint32_t first_psn_[2]{};   // each QP's sq_psn at its (re)connect
  uint32_t next_psn_[2]{};    // the next PSN a post on it takes
  uint32_t incarnation_ = 0;  // resets so far (both ends count alike)
  uint32_t peer_token_ = 0;
  uint32_t peer_backup_psn_ = 0;
  uint8_t scur_ = 0, rcur_ = 0;  // the QP carrying sends, receives
  uint8_t failing_ = 0;
  bool spare_ready_ = false;
  uint64_t reset_at_ns_ = 0;
  bool reset_pending_ = false;

  // Send copies: [head_, tail_) kept, [head_, posted_) on a lower QP.
  uint32_t depth_ = 0, mask_ = 0, max_sge_ = 0, max_inline_ = 0;
  std::unique_ptr<Copy[]> copies_;
  std::unique_ptr<Sge[]> sges_;
  std::unique_ptr<uint8_t[]> inline_;
  uint64_t head_ = 0, tail_ = 0;

  // Receives: [rq_posted_begin_, rq_next_) of the RecvQueue are on rcur_.
  uint64_t rq_next_ = 0;

  // The recovery in progress.
  bool send_drained_ = false;  // every send completion of failing_ seen
  bool recv_drained_ = false;  // every receive completion of failing_ seen
  bool recv_moved_ = false;    // the receives are on the new QP
  bool got_recover_ = false;   // the peer's RECOVER
  bool answered_ = false;      // RECOVERED sent (or queued)
  bool took_over_ = false;     // the peer's RECOVERED used
  bool want_recover_ = false, want_recovered_ = false;
  uint32_t my_epsn_ = 0;
  uint32_t epsn_ = 0;  // the peer's RECOVERED
  bool has_epsn_ = false;
  uint64_t recovery_started_ns_ = 0;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_RC_BACKUP_H_
