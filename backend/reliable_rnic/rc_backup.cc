// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RcPath (rc_backup.h): rc mode's copies, PSN accounting, RECOVER /
// RECOVERED and the takeover (docs/reliability.md §5).
#include "backend/reliable_rnic/rc_backup.h"

#include <algorithm>
#include <bit>

namespace vrdma::reliable {
namespace {

constexpr uint32_t kPsnMask = 0xffffff;

int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}

bool IsAtomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
}

bool IsRecv(WcOpcode op) {
  return op == WcOpcode::kRecv || op == WcOpcode::kRecvRdmaWithImm;
}

// §1: (retry_cnt + 1) x 4.096 us x 2^timeout; timeout 0: never.
uint64_t BudgetNs(const QpAttr& a) {
  if (a.timeout == 0) return 0;
  const uint32_t t = a.timeout > 31 ? 31 : a.timeout;
  return (uint64_t{a.retry_cnt} + 1) * (uint64_t{4096} << t);
}

}  // namespace

RcPath::RcPath(Rnic& lower, const RcPathInit& init,
               ReliabilityCounters* counters)
    : lower_(lower), init_(init), counters_(counters) {}

RcPath::~RcPath() {
  if (qps_[1].id != 0) (void)lower_.DestroyQp(qps_[1]);
}

uint64_t RcPath::HostBytes(const QpCaps& caps, const Rnic& lower) {
  // The copies' ring is rounded up to a power of two (Slot).
  const uint64_t depth = std::bit_ceil(std::max<uint32_t>(caps.max_send_wr, 1));
  const uint64_t sge = std::clamp<uint32_t>(caps.max_send_sge, 1, kMaxSge);
  return sizeof(RcPath) +
         depth * (sizeof(Copy) + sge * sizeof(Sge) + caps.max_inline_data) +
         lower.QpHostBytes(caps);
}

Status RcPath::Open() {
  const QpCaps& caps = init_.qp_init.caps;
  depth_ = std::max<uint32_t>(caps.max_send_wr, 1);
  mask_ = std::bit_ceil(depth_) - 1;
  max_sge_ = std::clamp<uint32_t>(caps.max_send_sge, 1, kMaxSge);
  max_inline_ = std::min<uint32_t>(caps.max_inline_data, kMaxInline);
  const uint64_t slots = uint64_t{mask_} + 1;
  copies_ = std::make_unique<Copy[]>(slots);
  sges_ = std::make_unique<Sge[]>(slots * max_sge_);
  if (max_inline_ > 0) {
    inline_ = std::make_unique<uint8_t[]>(slots * max_inline_);
  }
  qps_[0] = init_.vqp;
  Result<RnicQp> b = lower_.CreateQp(init_.qp_init);
  if (!b.ok()) return b.status();
  qps_[1] = *b;
  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = init_.attr.access_flags;
  if (Status st = lower_.ModifyQp(
          qps_[1], a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
      st != Status::kOk) {
    (void)lower_.DestroyQp(qps_[1]);
    qps_[1] = RnicQp{};
    return st;
  }
  first_psn_[1] = next_psn_[1] = NextPsn(init_.my_token, 1);
  peer_qpn_[0] = init_.attr.dest_qpn;
  return Status::kOk;
}

// The first PSN of this end's QP of pair q in incarnation n (the peer
// computes it from the token it got in CONNECT).
uint32_t RcPath::NextPsn(uint32_t token, uint32_t salt) const {
  return (token * 0x9E3779B1u + salt * 0x7F4A7Du) & kPsnMask;
}

void RcPath::OnRts(const QpAttr& guest) {
  Wake();
  if (rts_.state == QpState::kRts) return;  // RTS -> RTS: ModifyRts
  rts_ = guest;
  budget_ns_ = BudgetNs(guest);
  first_psn_[0] = next_psn_[0] = guest.sq_psn & kPsnMask;
  // The backup is connected once both the peer's CONNECT and this RTS are
  // known (its RTS needs the guest's timeout and rnr_retry).
  if (state_ == State::kConnecting && peer_qpn_[1] != 0) {
    (void)OnPeerConnect(peer_qpn_[1], peer_backup_psn_, peer_token_);
  }
}

Status RcPath::ModifyRts(const QpAttr& attr, uint32_t mask) {
  Wake();
  if (mask & kQpAccessFlags) init_.attr.access_flags = attr.access_flags;
  if (mask & kQpMinRnrTimer) init_.attr.min_rnr_timer = attr.min_rnr_timer;
  for (uint8_t q = 0; q < 2; ++q) {
    if (qps_[q].id == 0) continue;
    Result<QpAttr> now = lower_.QueryQp(qps_[q]);
    if (!now.ok() || now->state != QpState::kRts) continue;
    const Status st = lower_.ModifyQp(qps_[q], attr, mask);
    if (st != Status::kOk && q == scur_) return st;
  }
  return Status::kOk;
}

Status RcPath::Connect(uint8_t q, uint32_t dest_qpn, uint32_t rq_psn,
                       uint32_t sq_psn, uint32_t flow_label) {
  QpAttr a;
  a.state = QpState::kRtr;
  a.av = init_.attr.av;
  a.av.flow_label = flow_label & 0xfffff;
  a.path_mtu_bytes = init_.attr.path_mtu_bytes;
  a.dest_qpn = dest_qpn;
  a.rq_psn = rq_psn & kPsnMask;
  a.max_dest_rd_atomic = init_.attr.max_dest_rd_atomic;
  a.min_rnr_timer = init_.attr.min_rnr_timer;
  VRDMA_RETURN_IF_ERROR(
      lower_.ModifyQp(qps_[q], a,
                      kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                          kQpMaxDestRdAtomic | kQpMinRnrTimer));
  a.state = QpState::kRts;
  a.sq_psn = sq_psn & kPsnMask;
  a.timeout = rts_.timeout;
  a.retry_cnt = std::min(rts_.retry_cnt, kRcLowerRetryCnt);
  a.rnr_retry = rts_.rnr_retry;
  a.max_rd_atomic = rts_.max_rd_atomic;
  VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(qps_[q], a,
                                        kQpState | kQpSqPsn | kQpTimeout |
                                            kQpRetryCnt | kQpRnrRetry |
                                            kQpMaxQpRdAtomic));
  first_psn_[q] = next_psn_[q] = a.sq_psn;
  return Status::kOk;
}

Status RcPath::OnPeerConnect(uint32_t peer_backup_qpn, uint32_t peer_backup_psn,
                             uint32_t peer_token) {
  Wake();
  if (state_ != State::kConnecting) {
    return peer_token == peer_token_ ? Status::kOk : Status::kInvalid;
  }
  peer_qpn_[1] = peer_backup_qpn;
  peer_backup_psn_ = peer_backup_psn;
  peer_token_ = peer_token;
  if (rts_.state != QpState::kRts) return Status::kOk;  // at OnRts
  // Another flow label: another ECMP path (B A.3).
  VRDMA_RETURN_IF_ERROR(Connect(1, peer_backup_qpn, peer_backup_psn,
                                first_psn_[1], init_.attr.av.flow_label + 1));
  state_ = State::kReady;
  spare_ready_ = true;
  ++counters_->rc_connects;
  return Status::kOk;
}

Status RcPath::ResetPair(uint8_t q) {
  QpAttr a;
  a.state = QpState::kReset;
  VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(qps_[q], a, kQpState));
  a.state = QpState::kInit;
  a.access_flags = init_.attr.access_flags;
  VRDMA_RETURN_IF_ERROR(lower_.ModifyQp(
      qps_[q], a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags));
  ++incarnation_;
  const uint32_t salt = 2 + 2 * incarnation_ + q;
  return Connect(q, peer_qpn_[q], NextPsn(peer_token_, salt),
                 NextPsn(init_.my_token, salt),
                 init_.attr.av.flow_label + 2 * incarnation_ + q);
}

void RcPath::EnterError(bool with_vqp) {
  state_ = State::kFailed;
  reset_pending_ = false;
  QpAttr a;
  a.state = QpState::kErr;
  for (const RnicQp& q : qps_) {
    if (q.id != 0 && (with_vqp || q.id != init_.vqp.id)) {
      (void)lower_.ModifyQp(q, a, kQpState);
    }
  }
}

// ---- Data path ----------------------------------------------------------

SendWr RcPath::Build(uint64_t seq) {
  const Copy& c = At(seq);
  SendWr w;
  w.wr_id = seq;
  w.opcode = c.opcode;
  w.send_flags = c.send_flags;
  w.imm_data = c.imm_data;
  w.num_sge = c.num_sge;
  std::copy_n(&sges_[Slot(seq) * max_sge_], c.num_sge, w.sge.begin());
  w.inline_len = c.inline_len;
  if (c.send_flags & kSendInline) {
    w.inline_data = &inline_[Slot(seq) * max_inline_];
  }
  w.remote_addr = c.remote_addr;
  w.rkey = c.rkey;
  w.compare_add = c.compare_add;
  w.swap = c.swap;
  return w;
}

bool RcPath::PostCopy(uint64_t seq, uint8_t q) {
  Copy& c = At(seq);
  uint64_t len = c.inline_len;
  if (!(c.send_flags & kSendInline)) {
    len = 0;
    const Sge* s = &sges_[Slot(seq) * max_sge_];
    for (int i = 0; i < c.num_sge; ++i) len += s[i].length;
  }
  const uint32_t mtu = std::max<uint32_t>(init_.attr.path_mtu_bytes, 256);
  const uint32_t npsn = IsAtomic(c.opcode) || len == 0
                            ? 1
                            : static_cast<uint32_t>((len + mtu - 1) / mtu);
  const SendWr w = Build(seq);
  Status st = Status::kOk;
  if (lower_.PostSend(qps_[q], std::span(&w, 1), &st) != 1) return false;
  c.first_psn = next_psn_[q];
  c.npsn = npsn;
  next_psn_[q] = (next_psn_[q] + npsn) & kPsnMask;
  c.qp = q;
  c.posted = true;
  return true;
}

int RcPath::Post(std::span<const SendWr> wrs, Status* first_error,
                 uint64_t now) {
  Wake();
  int n = 0;
  for (const SendWr& wr : wrs) {
    Status err = Status::kOk;
    switch (wr.opcode) {
      case WrOpcode::kSend:
      case WrOpcode::kSendWithImm:
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaWriteWithImm:
      case WrOpcode::kRdmaRead:
      case WrOpcode::kAtomicCmpSwp:
      case WrOpcode::kAtomicFetchAdd:
        break;
      default:
        err = Status::kInvalid;  // memory windows, cross-channel: native only
    }
    const bool inl = (wr.send_flags & kSendInline) != 0;
    if (wr.num_sge > max_sge_ || (inl && wr.inline_len > max_inline_)) {
      err = Status::kInvalid;
    }
    if (err == Status::kOk && tail_ - head_ == depth_)
      err = Status::kNoResource;
    if (err != Status::kOk) {
      if (first_error) *first_error = err;
      return n;
    }
    const uint64_t seq = tail_;
    Copy& c = At(seq);
    c = Copy{};
    c.wr_id = wr.wr_id;
    c.opcode = wr.opcode;
    c.send_flags = wr.send_flags;
    c.imm_data = wr.imm_data;
    c.num_sge = wr.num_sge;
    c.inline_len = inl ? wr.inline_len : 0;
    c.remote_addr = wr.remote_addr;
    c.rkey = wr.rkey;
    c.compare_add = wr.compare_add;
    c.swap = wr.swap;
    c.first_post_ns = now;
    c.report = (wr.send_flags & kSendSignaled) || init_.qp_init.sq_sig_all;
    std::copy_n(wr.sge.begin(), wr.num_sge, &sges_[Slot(seq) * max_sge_]);
    if (inl && wr.inline_len > 0) {
      std::copy_n(wr.inline_data, wr.inline_len,
                  &inline_[Slot(seq) * max_inline_]);
    }
    ++tail_;
    // While recovering the WR waits for the takeover (held, in order).
    if (state_ != State::kRecovering && !PostCopy(seq, scur_)) {
      --tail_;
      if (first_error) *first_error = Status::kNoResource;
      return n;
    }
    ++n;
  }
  if (first_error) *first_error = Status::kOk;
  return n;
}

void RcPath::OnRecvPosted() {
  Wake();
  RecvQueue& rq = *init_.rq;
  if (state_ == State::kRecovering && !recv_moved_) return;  // held
  for (uint64_t s = std::max(rq_next_, rq.head()); s < rq.posted(); ++s) {
    if (rq.At(s).done) continue;
    RecvWr r;
    r.wr_id = s;
    r.num_sge = rq.At(s).num_sge;
    std::copy_n(rq.Sges(s), r.num_sge, r.sge.begin());
    Status st = Status::kOk;
    (void)lower_.PostRecv(qps_[rcur_], std::span(&r, 1), &st);
  }
  rq_next_ = rq.posted();
}

void RcPath::Done(uint64_t seq, const Completion& c, bool report) {
  Copy& e = At(seq);
  if (e.done) return;
  e.done = true;
  e.report = report;
  e.wc = c;
  e.wc.wr_id = e.wr_id;
  e.wc.qpn = init_.vqp.qpn;
}

// Every WR up to upto (included) completed with success; the lower
// reported only the signaled ones.
void RcPath::DoneSuccess(uint64_t upto) {
  for (uint64_t s = head_; s <= upto && s < tail_; ++s) {
    Copy& e = At(s);
    if (e.done) continue;
    Completion c;
    c.status = WcStatus::kSuccess;
    c.opcode = SendCompletionOpcode(e.opcode);
    if (e.opcode == WrOpcode::kRdmaRead) {
      uint64_t len = 0;
      const Sge* g = &sges_[Slot(s) * max_sge_];
      for (int i = 0; i < e.num_sge; ++i) len += g[i].length;
      c.byte_len = static_cast<uint32_t>(len);
    } else if (IsAtomic(e.opcode)) {
      c.byte_len = 8;
    }
    Done(s, c, e.report);
  }
}

void RcPath::ReportSends() {
  while (head_ < tail_ && At(head_).done) {
    Copy& e = At(head_);
    if (e.report) {
      if (init_.send_ring == nullptr || !init_.send_ring->Push(e.wc)) return;
    }
    ++head_;
  }
}

void RcPath::FailFrom(uint64_t seq, WcStatus first) {
  for (uint64_t s = seq; s < tail_; ++s) {
    if (At(s).done) continue;
    Completion c;
    c.status = s == seq ? first : WcStatus::kWrFlushErr;
    c.opcode = SendCompletionOpcode(At(s).opcode);
    Done(s, c, true);
  }
  ++counters_->rc_failed_to_guest;
  // Receives whose flushes a recovery ate are posted again, to a QP in
  // ERR: each completes once, flushed (a second flush finds it done).
  if (state_ == State::kRecovering && !recv_moved_) rq_next_ = 0;
  EnterError(/*with_vqp=*/true);
  OnRecvPosted();  // receives held meanwhile go to a QP in ERR: flushed
  ReportSends();
}

void RcPath::OnCompletion(const Completion& c, uint64_t now) {
  Wake();
  if (c.wr_id & kMarker) {
    // A marker posted after this end's ERR: every completion of the failed
    // QP before it (its receives', or its sends') has been seen.
    if (state_ != State::kRecovering) return;
    if (c.wr_id & 2) {
      send_drained_ = true;
      if (has_epsn_ && !took_over_) TakeOver(now);
    } else {
      recv_drained_ = true;
      MaybeRepostRecvs();
    }
    return;
  }
  const int q = Which(c.qpn);
  if (q < 0) return;
  const bool failing = state_ == State::kRecovering && q == failing_;
  if (IsRecv(c.opcode)) {
    if (failing && c.status == WcStatus::kWrFlushErr) return;  // reposted
    Completion w = c;
    w.qpn = init_.vqp.qpn;
    init_.rq->Finish(c.wr_id, w);
    init_.rq->Report(init_.recv_ring);
    return;
  }
  const uint64_t seq = c.wr_id;
  if (seq < head_ || seq >= tail_) return;
  if (c.status == WcStatus::kSuccess) {
    if (seq > head_) DoneSuccess(seq - 1);
    Done(seq, c, At(seq).report);
  } else if (failing || At(seq).qp != q || At(seq).done) {
    // The failed QP's flushes (its WRs are resubmitted), or a QP that no
    // longer carries this WR.
  } else if (c.status == WcStatus::kRetryExcErr && state_ == State::kReady) {
    if (seq > head_) DoneSuccess(seq - 1);
    if (spare_ready_ &&
        (budget_ns_ == 0 || now - At(seq).first_post_ns < budget_ns_)) {
      StartRecovery(now, /*send_drained=*/true);
    } else {
      FailFrom(seq, WcStatus::kRetryExcErr);
    }
  } else {
    // Any other error goes to the guest as natively; the lower QP is in
    // ERR and flushes the rest.
    if (seq > head_) DoneSuccess(seq - 1);
    Done(seq, c, true);
    if (c.status != WcStatus::kWrFlushErr && state_ != State::kFailed) {
      ++counters_->rc_failed_to_guest;
      state_ = State::kFailed;
    }
  }
  ReportSends();
}

void RcPath::StartRecovery(uint64_t now, bool send_drained) {
  state_ = State::kRecovering;
  failing_ = scur_;
  recovery_started_ns_ = now;
  send_drained_ = send_drained;
  recv_drained_ = recv_moved_ = answered_ = took_over_ = has_epsn_ = false;
  got_recover_ = false;
  QpAttr a;
  a.state = QpState::kErr;
  (void)lower_.ModifyQp(qps_[failing_], a, kQpState);
  // No packet executes on it from here: its expected PSN is final.
  Result<QpAttr> qa = lower_.QueryQp(qps_[failing_]);
  my_epsn_ = qa.ok() ? qa->rq_psn & kPsnMask : 0;
  RecvWr r;
  r.wr_id = kMarker | failing_;
  Status st = Status::kOk;
  if (lower_.PostRecv(qps_[failing_], std::span(&r, 1), &st) != 1) {
    recv_drained_ = true;  // nothing can come: the RQ was full of flushes
  }
  if (!send_drained_) {
    SendWr w;
    w.wr_id = kMarker | 2 | failing_;
    w.opcode = WrOpcode::kRdmaWrite;
    w.send_flags = kSendSignaled;
    if (lower_.PostSend(qps_[failing_], std::span(&w, 1), &st) != 1) {
      send_drained_ = true;
    }
  }
  want_recover_ = true;
  ++counters_->rc_recoveries;
  MaybeRepostRecvs();
}

void RcPath::MaybeRepostRecvs() {
  if (state_ != State::kRecovering || !recv_drained_ || recv_moved_) return;
  rcur_ = static_cast<uint8_t>(1 - failing_);
  rq_next_ = 0;  // from the oldest receive not completed, in order
  recv_moved_ = true;
  OnRecvPosted();
  MaybeAnswer();
}

void RcPath::MaybeAnswer() {
  if (!got_recover_ || !recv_moved_ || answered_) return;
  want_recovered_ = true;
  answered_ = true;
  if (took_over_) Finish();
}

bool RcPath::OnRecover(uint32_t failed_qpn, uint64_t now) {
  Wake();
  if (state_ == State::kReady && failed_qpn == peer_qpn_[scur_]) {
    if (!spare_ready_) {
      if (!reset_pending_ || ResetPair(1 - scur_) != Status::kOk) return false;
      reset_pending_ = false;
      spare_ready_ = true;
      ++counters_->rc_resets;
    }
    StartRecovery(now, /*send_drained=*/false);
    got_recover_ = true;
    MaybeAnswer();
    return true;
  }
  if (state_ == State::kRecovering && failed_qpn == peer_qpn_[failing_] &&
      !got_recover_) {
    got_recover_ = true;
    MaybeAnswer();
    return true;
  }
  return false;
}

bool RcPath::OnRecovered(uint32_t epsn, uint64_t now) {
  Wake();
  if (state_ != State::kRecovering || want_recover_ || has_epsn_ ||
      took_over_ || epsn > kPsnMask) {
    return false;
  }
  // epsn lies between the first PSN of the oldest WR in flight on the
  // failed QP and the next PSN it would have given.
  uint32_t lo = next_psn_[failing_];
  for (uint64_t s = head_; s < tail_; ++s) {
    const Copy& e = At(s);
    if (!e.done && e.posted && e.qp == failing_) {
      lo = e.first_psn;
      break;
    }
  }
  if (PsnDiff(epsn, lo) < 0 || PsnDiff(next_psn_[failing_], epsn) < 0) {
    return false;
  }
  epsn_ = epsn;
  has_epsn_ = true;
  if (send_drained_) TakeOver(now);
  return true;
}

void RcPath::TakeOver(uint64_t now) {
  const uint8_t to = static_cast<uint8_t>(1 - failing_);
  took_over_ = true;
  scur_ = to;
  for (uint64_t s = head_; s < tail_; ++s) {
    Copy& e = At(s);
    if (e.done) continue;
    if (e.posted && e.qp == failing_) {
      const uint32_t last = (e.first_psn + e.npsn - 1) & kPsnMask;
      const bool executed = PsnDiff(last, epsn_) < 0;
      if (IsAtomic(e.opcode) && executed) {
        // Its effect happened once; its result is lost (§1, §5).
        ++counters_->rc_atomics_lost;
        FailFrom(s, WcStatus::kRetryExcErr);
        return;
      }
      if (executed && e.opcode != WrOpcode::kRdmaRead) {
        // Executed; only its ACK was lost (B A.2.1).
        Completion c;
        c.status = WcStatus::kSuccess;
        c.opcode = SendCompletionOpcode(e.opcode);
        Done(s, c, e.report);
        ++counters_->rc_completed_below_epsn;
        continue;
      }
      ++counters_->rc_resubmitted;
    }
    if (!PostCopy(s, to)) {
      FailFrom(s, WcStatus::kRetryExcErr);
      return;
    }
  }
  ++counters_->rc_takeovers;
  counters_->rc_takeover_ns_last = now - recovery_started_ns_;
  if (answered_) Finish();
  ReportSends();
}

void RcPath::Finish() {
  state_ = State::kReady;
  spare_ready_ = false;
  reset_pending_ = true;
  reset_at_ns_ = 0;  // set by the next Pump
}

bool RcPath::Pump(uint64_t now) {
  if (reset_pending_ && state_ == State::kReady) {
    if (reset_at_ns_ == 0) reset_at_ns_ = now + init_.reset_delay_ns;
    if (now >= reset_at_ns_) {
      reset_pending_ = false;
      if (ResetPair(failing_) == Status::kOk) {
        spare_ready_ = true;
        ++counters_->rc_resets;
      }
    }
  }
  if (state_ == State::kRecovering && budget_ns_ != 0) {
    // The peer does not answer: the oldest WR's budget (§1) decides.
    for (uint64_t s = head_; s < tail_; ++s) {
      if (At(s).done) continue;
      if (now - At(s).first_post_ns >= budget_ns_) {
        FailFrom(s, WcStatus::kRetryExcErr);
      }
      break;
    }
  }
  ReportSends();
  init_.rq->Report(init_.recv_ring);
  return reset_pending_ || state_ == State::kRecovering;
}

}  // namespace vrdma::reliable
