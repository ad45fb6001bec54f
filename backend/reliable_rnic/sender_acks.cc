// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Sender (sender.h), what comes back and what is sent again
// (docs/reliability.md §4): the peer's ACKs (their entries, the RTT sample,
// the window, credits, deliveries and NAKs), loss detection (RACK and
// RTOs, §4.4), the retry budget (§1) and the retransmission of lost units
// by SEND (§2.3's tail rule included). sender.cc posts, sends new chunks
// and completes; sender_read.cc has READ and atomics.
#include <algorithm>
#include <bit>

#include "backend/reliable_rnic/connection.h"
#include "backend/reliable_rnic/sender.h"
#include "backend/reliable_rnic/sender_records.h"

namespace vrdma::reliable {

using policy::reliability::AckedResult;
using policy::reliability::Lost;
using policy::reliability::LossReason;
using policy::reliability::RttSampleNs;

// ---- ACKs ------------------------------------------------------------------

void Sender::AckUnits(ChunkRec& c, uint16_t mask, uint64_t now_ns) {
  const uint16_t fresh = mask & c.full() & static_cast<uint16_t>(~c.acked);
  if (fresh == 0) return;
  c.acked |= fresh;
  if (c.resp) {
    RespUnitsAcked(c.msg_seq, static_cast<uint32_t>(std::popcount(fresh)));
    return;
  }
  if (c.msg_seq >= head_ && c.msg_seq < tail_) {
    Msg& m = MsgAt(c.msg_seq);
    if (m.mid == c.mid) {
      m.acked_units += std::popcount(fresh);
      m.t_budget_ns = now_ns;  // progress (§1)
    }
  }
}

void Sender::OnAck(const Ack& ack, uint64_t t4_ns) {
  ReliabilityCounters& n = conn_.counters();
  const AckContext ctx{conn_.my_token(), acked_mid_, sent_mid_end_, next_gseq_};
  if (WireCheck c = CheckAck(ack, ctx)) {
    n.Count(*c);
    return;
  }
  ++n.acks_received;
  rto_passes_ = 0;
  std::optional<uint64_t> t1;
  uint64_t acked_bytes = 0;
  bool progressed = false;  // acknowledged a transmission in flight
  std::optional<uint64_t> sample;
  for (uint32_t i = 0; i < ack.n; ++i) {
    AckEntry e;
    if (CheckAckEntry(ack, i, ctx, &e)) {
      n.Count(WireCounter::kAckUnknownNumber);
      continue;
    }
    uint64_t gseq = 0;
    if (e.is_send) {
      const Xmit& x = XmitAt(e.gseq);
      if (x.gseq != e.gseq || x.whole) {
        n.Count(WireCounter::kAckUnknownNumber);
        continue;
      }
      gseq = e.gseq;
      if (ChunkLive(x.cseq)) {
        AckUnits(ChunkAt(x.cseq), uint16_t(1u << x.unit), t4_ns);
      }
    } else {
      ChunkRec* c = FindChunk(e.mid, e.off);
      if (c == nullptr) {
        n.Count(WireCounter::kAckUnknownNumber);
        continue;
      }
      gseq = c->gseq;
      AckUnits(*c, c->full(), t4_ns);
    }
    Xmit& x = XmitAt(gseq);
    const bool known = x.gseq == gseq;
    if (known) UndoIfSpurious(x, t4_ns);
    if (loss_.OnAcked(gseq) == AckedResult::kAcked && known) {
      inflight_bytes_ -= std::min<uint64_t>(inflight_bytes_, x.bytes);
      --inflight_xmits_;
      acked_bytes += x.bytes;
      progressed = true;
    } else if (known && x.lost) {
      // Found lost, yet it arrived: it took a receive after all.
      x.lost = false;
      ++credit_used_;
    }
    if (known && i == ack.sample) t1 = x.t_sent_ns;
  }
  if (CheckAckSampleIndex(ack)) {
    n.Count(WireCounter::kAckBadSample);
  } else if ((ack.flags & kAckSampleValid) && t1) {
    if (std::optional<uint64_t> s = RttSampleNs(*t1, t4_ns, ack.hold_ns)) {
      rtt_.AddSample(t4_ns, *s);
      ++n.rtt_samples;
      sample = s;
    } else {
      n.Count(WireCounter::kAckBadSample);
    }
  }
  if (progressed) loss_.OnProgress(t4_ns);  // §4.4: the RTOs restart
  // The window (§4.5): the sample against base_rtt + 10 us; an ACK
  // without one restarts the RTO count only.
  window_.OnAck(t4_ns, acked_bytes, sample, rtt_.srtt(),
                rtt_.base_rtt(t4_ns));
  chunk_size_.OnAck(t4_ns, rtt_.srtt());
  // Credits (§3.2): the peer's bounce receives posted since connect,
  // wrapping; only a newer count is taken (Credits() caps the belief).
  if (static_cast<int32_t>(ack.credits - peer_credits_) > 0) {
    peer_credits_ = ack.credits;
  }
  // A message waits at the peer for a guest receive (§2.3): the peer
  // decides RNR, so the retry budget restarts while it says so.
  // Units the peer refused meanwhile (it holds a few in its bounce
  // receives, §2.3) were sent again by their RTO with its backoff; when
  // the wait ends they go at once, as a native RNR retry would.
  const bool waiting = (ack.flags & kAckWaitingReceive) != 0;
  if (waiting) {
    for (uint64_t s = head_; s < tail_; ++s) {
      Msg& m = MsgAt(s);
      if (m.state == MsgState::kQueued && m.started) m.t_budget_ns = t4_ns;
    }
  } else if (peer_waiting_) {
    DetectLosses(t4_ns, true);
  }
  peer_waiting_ = waiting;
  if (ack.flags & kAckNak) {
    WcStatus st = WcStatus::kRemOpErr;
    switch (static_cast<NakCode>(ack.nak_code)) {
      case NakCode::kRnrExceeded:
        st = WcStatus::kRnrRetryExcErr;
        ++n.rnr_exceeded;
        break;
      case NakCode::kRemoteAccess: st = WcStatus::kRemAccessErr; break;
      case NakCode::kInvalidRequest: st = WcStatus::kRemInvReqErr; break;
      default: break;
    }
    if (Msg* m = FindMsg(ack.nak_mid); m && m->state == MsgState::kQueued) {
      FailFrom(head_ + (ack.nak_mid - MsgAt(head_).mid), st);
    }
  }
  const uint32_t acked_mid = acked_mid_;
  Delivered(ack.deliv_mid);
  PopChunks();
  Complete();
  // Its reordering windows, a smaller srtt, a delivery (checks_at_).
  checks_at_ = std::min(checks_at_, loss_.NextCheckNs(rtt_.srtt()));
  if (acked_mid_ != acked_mid) BudgetHeadMoved();
  // What the ACK did is done (records popped, completions pushed): a pump
  // is owed at once only where it may send, else when its timers say (the
  // RTOs it restarted, the reordering windows it began). With 64 KiB
  // WRITEs on eight QPs, 45% of a sending host's pumps sent nothing: an
  // ACK had freed less room than the waiting WRITE needs to go whole.
  if (HasUnsent() && !WaitsForRoom(t4_ns)) {
    conn_.WakeSender();
  } else if (head_ != tail_ || inflight_xmits_ != 0) {
    conn_.WakeSenderAt(NextDueNs(t4_ns));
  }
}

bool Sender::StoppedForRoom() const {
  // Not failed_: the message is still queued (only a failure ends a
  // message that is not all sent).
  return room_wait_seq_ == send_from_ && send_from_ >= head_ &&
         send_from_ < tail_ && !failed_ && retx_head_ == retx_tail_ &&
         !tail_retx_any_ && resp_head_ == resp_tail_;
}

bool Sender::WaitsForRoom(uint64_t now_ns) {
  if (!StoppedForRoom()) return false;
  const Msg& m = MsgAt(room_wait_seq_);
  return !chunk_size_.Next(window_.cwnd(), inflight_bytes_, m.sent,
                           m.body - m.sent,
                           window_.TargetNs(rtt_.base_rtt(now_ns)),
                           rtt_.srtt());
}

void Sender::Delivered(uint32_t deliv_mid) {
  while (static_cast<int32_t>(deliv_mid - acked_mid_) > 0) {
    // A READ ends when its response is here, an atomic when the RC QP
    // completes it (sender_read.cc): their requests' delivery is not it.
    if (Msg* m = FindMsg(acked_mid_); m && m->state == MsgState::kQueued &&
                                      m->op != WrOpcode::kRdmaRead &&
                                      !IsAtomic(m->op)) {
      m->state = MsgState::kDelivered;
    }
    ++acked_mid_;
  }
}

void Sender::PopChunks() {
  while (chunk_head_ < chunk_tail_) {
    const ChunkRec& c = ChunkAt(chunk_head_);
    const bool msg_done =
        c.resp ? !RespLive(c.msg_seq) || RespAt(c.msg_seq).done
               : c.msg_seq < head_ || MsgAt(c.msg_seq).mid != c.mid ||
                     MsgAt(c.msg_seq).state != MsgState::kQueued;
    if (c.acked != c.full() && !msg_done) break;
    ++chunk_head_;
  }
}

// ---- Losses, budget, retransmissions ---------------------------------------

void Sender::QueueLostUnits(uint64_t cseq, uint16_t mask, uint32_t expiries) {
  for (uint16_t u = 0; u < 16; ++u) {
    if (!(mask & (1u << u))) continue;
    if (retx_tail_ - retx_head_ == retx_cap_) return;  // cannot happen: bounded
    retx_[retx_tail_++ & (retx_cap_ - 1)] = RetxUnit{cseq, u, expiries};
  }
}

void Sender::DetectLosses(uint64_t now_ns, bool all) {
  std::span<Lost> out = lost_buf_;
  // all: every transmission in flight counts as lost now, its backoff
  // reset (the end of a wait for a receive at the peer, below).
  const uint64_t at = all ? now_ns + (uint64_t{1} << 40) : now_ns;
  bool rack = false, rto = false;
  for (;;) {
    const size_t n = loss_.DetectLost(at, rtt_.srtt(), out);
    for (size_t i = 0; i < n; ++i) {
      Xmit& x = XmitAt(out[i].gseq);
      if (x.gseq != out[i].gseq) continue;
      inflight_bytes_ -= std::min<uint64_t>(inflight_bytes_, x.bytes);
      --inflight_xmits_;
      // It took no receive at the peer (or its ACK was lost: then the
      // belief is one too high, which the lower's drop corrects).
      x.lost = true;
      x.lost_rto = !all && out[i].reason == LossReason::kRto;
      --credit_used_;
      if (all) {
        ++conn_.counters().resent_after_wait;
      } else if (out[i].reason == LossReason::kRto) {
        ++conn_.counters().lost_rto;
        rto = true;
      } else {
        ++conn_.counters().lost_rack;
        rack = true;
      }
      if (!ChunkLive(x.cseq)) continue;
      ChunkRec& c = ChunkAt(x.cseq);
      if (c.resp) {  // a READ_RESP unit: sent again while its READ is answered
        if (!RespLive(c.msg_seq) || RespAt(c.msg_seq).done) continue;
      } else if (Msg* m = FindMsg(c.mid);
                 m == nullptr || m->state != MsgState::kQueued) {
        continue;
      }
      const uint16_t lost = x.whole ? c.full() : uint16_t(1u << x.unit);
      QueueLostUnits(x.cseq, lost & static_cast<uint16_t>(~c.acked),
                     all ? 0 : out[i].next_expiries());
    }
    if (n < out.size()) break;
  }
  // One reaction per pass (§4.1, §4.5): the losses one pass finds are one
  // event (a burst tail-dropped at a queue, a blackout's RTOs), so
  // max_chunk halves once and one pass's RTOs count as one expiry. The
  // end of a wait at the peer (all) is no loss of the network's.
  if (rack) {
    rto_undo_.OnRackLoss();
  } else if (rto) {
    rto_undo_.OnRto(next_gseq_, {chunk_size_.max_chunk(), window_.cwnd()});
  }
  if (rack || rto) {
    chunk_size_.OnLoss(now_ns);
    const bool reset = rto ? window_.OnRto(now_ns) : window_.OnLoss(now_ns);
    if (reset) ++conn_.counters().cwnd_resets;
  }
  // §5, last paragraph: two RTO passes in a row without an ACK move the
  // data QP to another path (a new flow label); the receiver's MID and
  // range checks deduplicate whatever the old path still delivers.
  if (rto && ++rto_passes_ >= 2) {
    rto_passes_ = 0;
    conn_.MovePath();
  }
}

void Sender::UndoIfSpurious(const Xmit& x, uint64_t t4_ns) {
  if (std::optional<policy::reliability::UndoState> before =
          rto_undo_.OnAcked(x.gseq, x.lost && x.lost_rto, t4_ns, x.t_sent_ns)) {
    chunk_size_.Undo(before->max_chunk);
    window_.Undo(before->cwnd);
    ++conn_.counters().rto_undone;
  }
}

uint64_t Sender::BudgetHead() {
  for (uint64_t s = head_; s < tail_; ++s) {
    const Msg& m = MsgAt(s);
    if (m.state != MsgState::kQueued) continue;
    // The oldest undelivered one started first; an atomic on the RC QP is
    // bounded by that QP's own retries.
    return m.started && !m.atomic_posted ? s : tail_;
  }
  return tail_;
}

void Sender::CheckBudget(uint64_t now_ns) {
  const uint64_t budget = conn_.retry_budget_ns();
  const uint64_t s = BudgetHead();
  if (budget == 0 || s == tail_) return;
  if (now_ns - MsgAt(s).t_budget_ns > budget) {
    ++conn_.counters().retry_exceeded;
    FailFrom(s, WcStatus::kRetryExcErr);
  }
}

void Sender::CheckHeld(uint64_t now_ns) {
  uint64_t oldest = tail_;
  for (uint64_t s = head_; s < tail_; ++s) {
    Msg& m = MsgAt(s);
    if (m.state != MsgState::kQueued) continue;
    if (m.t_budget_ns == 0) m.t_budget_ns = now_ns;
    if (oldest == tail_) oldest = s;
  }
  const uint64_t budget = conn_.retry_budget_ns();
  if (budget != 0 && oldest != tail_ &&
      now_ns - MsgAt(oldest).t_budget_ns > budget) {
    ++conn_.counters().retry_exceeded;
    FailFrom(oldest, WcStatus::kRetryExcErr);
  }
  Complete();
}

bool Sender::SendRetransmissions(uint64_t now_ns) {
  bool did = false;
  while (retx_head_ < retx_tail_) {
    const RetxUnit r = retx_[retx_head_ & (retx_cap_ - 1)];
    if (!ChunkLive(r.cseq)) {
      ++retx_head_;
      continue;
    }
    const ChunkRec& c = ChunkAt(r.cseq);
    if (c.resp) {
      if (!RespLive(c.msg_seq) || RespAt(c.msg_seq).done ||
          (c.acked & (1u << r.unit))) {
        ++retx_head_;
        continue;
      }
      if (!CanTransmit() || !WindowOpen(now_ns) ||
          !PostResp(c.msg_seq, c.off, r.cseq, r.unit, true, r.expiries,
                    now_ns)) {
        return did;
      }
      ++retx_head_;
      did = true;
      continue;
    }
    Msg* m = FindMsg(c.mid);
    if (m == nullptr || m->state != MsgState::kQueued ||
        (c.acked & (1u << r.unit))) {
      ++retx_head_;
      continue;
    }
    // The tail rule (§2.3): the unit holding the message's last byte goes
    // only after every other unit was acknowledged.
    if (m->units > 1 && m->op != WrOpcode::kSend &&
        m->op != WrOpcode::kSendWithImm && c.off + r.unit + 1u == m->units &&
        m->acked_units + 1 < m->units) {
      m->tail_retx = true;
      tail_retx_any_ = true;
      m->tail_cseq = r.cseq;
      m->tail_expiries = r.expiries;
      ++retx_head_;
      continue;
    }
    if (!CanTransmit() || !WindowOpen(now_ns) ||
        !PostRetx(r.cseq, r.unit, r.expiries, now_ns)) {
      return did;
    }
    ++retx_head_;
    did = true;
  }
  if (!tail_retx_any_) return did;
  bool waiting = false;
  for (uint64_t s = head_; s < tail_; ++s) {
    Msg& m = MsgAt(s);
    if (!m.tail_retx || m.state != MsgState::kQueued) continue;
    if (m.acked_units + 1 < m.units || !ChunkLive(m.tail_cseq)) {
      waiting = true;
      continue;
    }
    const ChunkRec& c = ChunkAt(m.tail_cseq);
    const uint16_t unit = static_cast<uint16_t>(m.units - 1 - c.off);
    if (c.acked & (1u << unit)) {
      m.tail_retx = false;
      continue;
    }
    if (!CanTransmit() || !WindowOpen(now_ns) ||
        !PostRetx(m.tail_cseq, unit, m.tail_expiries, now_ns)) {
      return did;  // tail_retx_any_ stays set
    }
    m.tail_retx = false;
    did = true;
  }
  tail_retx_any_ = waiting;
  return did;
}

}  // namespace vrdma::reliable
