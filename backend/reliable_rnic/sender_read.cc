// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Sender (sender.h), READ and atomics (docs/reliability.md §2.3, step 13):
//
// Requester. A READ takes a MID like every WR and goes as one READ_REQ
// (a header-only SEND: rkey, address, length), held while max_rd_atomic
// READs and atomics are in flight (everything after it waits too, in
// order). Its READ_RESP units come back to this end's receiver, which hands
// them here (OnReadResponse): each new unit is copied into the READ's local
// SGEs; the READ ends when its units cover the length, and completes in
// post order. A lost READ_REQ is sent again like any unit.
//
// Responder. The peer's READ_REQ is checked by the receiver and served at
// its delivery (MID order: every earlier WRITE of the peer is in place):
// ServeRead takes one of max_dest_rd_atomic records, and the READ_RESP
// units (header + the guest's bytes, sliced from its MR: no copy) go
// through this end's window and the peer's credits, before new chunks. A
// lost unit is sent again from the record (sliced again: a WRITE the peer
// posted after its READ may show, as IBA allows without a fence). The
// record ends when every unit was acknowledged, or after the QP's retry
// budget (the requester gave up).
//
// Atomics. A CMP_SWP or FETCH_ADD takes a MID, sent as a zero-length
// WRITE_RETX (a marker: nothing written, delivered in order), and is
// posted on the virtual QP's lower RC QP (connected to the peer's by the
// guest's own ModifyQp calls) once the marker is delivered and every
// earlier WR completed; nothing after it goes until its completion, which
// the layer's PollCq hands to OnAtomicCompletion. The RNIC executes it
// once (its RC retries, its saved results).
#include <algorithm>
#include <bit>
#include <cstring>

#include "backend/reliable_rnic/connection.h"
#include "backend/reliable_rnic/sender.h"
#include "backend/reliable_rnic/sender_records.h"

namespace vrdma::reliable {

uint32_t Sender::MaxRdAtomic() const {
  const uint32_t n = conn_.init().attr.max_rd_atomic;
  return std::clamp<uint32_t>(n, 1, kMaxRdAtomic);  // 0: one at a time
}

uint32_t Sender::read_mid_begin() const {
  return head_ == tail_ ? next_mid_ : msgs_[head_ & msg_mask_].mid;
}

void Sender::ReleaseRd(Msg& m) {
  if (!m.rd_held) return;
  m.rd_held = false;
  --rd_outstanding_;
  if (m.op == WrOpcode::kRdmaRead) reads_[m.read_slot].used = false;
}

// ---- Requester -------------------------------------------------------------

bool Sender::SendReadOrAtomic(uint64_t seq, uint64_t now_ns, bool* did) {
  Msg& m = MsgAt(seq);
  if (m.op == WrOpcode::kRdmaRead) {
    if (m.started) return true;  // in flight: later WRs go meanwhile
    if (rd_outstanding_ >= MaxRdAtomic()) return false;
    uint32_t slot = 0;
    while (slot < kMaxRdAtomic && reads_[slot].used) ++slot;
    if (slot == kMaxRdAtomic) return false;
    if (!CanTransmit() || !WindowOpen(now_ns)) return false;
    if (!PostPiece(seq, 0, 0, 0, 0, false, true, now_ns)) return false;
    ReadRec& r = reads_[slot];
    r.used = true;
    r.msg_seq = seq;
    r.units = UnitsOf(m.wr_len);
    r.got.Clear();
    m.read_slot = static_cast<uint8_t>(slot);
    m.rd_held = true;
    ++rd_outstanding_;
    ++conn_.counters().reads_sent;
    *did = true;
    return true;
  }
  // An atomic: its marker first (dropped by no one: zero length).
  if (!m.started) {
    if (!CanTransmit() || !WindowOpen(now_ns)) return false;
    if (!PostPiece(seq, 0, 0, 0, 0, false, true, now_ns)) return false;
    *did = true;
  }
  const bool marker_delivered = static_cast<int32_t>(acked_mid_ - m.mid) > 0;
  if (!m.atomic_posted && marker_delivered && seq == head_ &&
      rd_outstanding_ < MaxRdAtomic()) {
    SendWr w;
    w.wr_id = seq;
    w.opcode = m.op;
    w.send_flags = kSendSignaled;  // the layer must see it end
    w.num_sge = 1;
    w.sge[0] = m.sge[0];
    w.remote_addr = m.remote_addr;
    w.rkey = m.rkey;
    w.compare_add = m.compare_add;
    w.swap = m.swap;
    if (!conn_.PostLowerRc(w)) {
      FailFrom(seq, WcStatus::kLocQpOpErr);
      return false;
    }
    m.atomic_posted = true;
    m.rd_held = true;
    ++rd_outstanding_;
    ++conn_.counters().atomics_posted;
    *did = true;
  }
  return false;  // nothing after it until it completes
}

void Sender::OnAtomicCompletion(const Completion& c) {
  conn_.WakeSender();
  // Only the head can be a posted atomic (it waits for every earlier WR,
  // and nothing later goes): anything else is a flush of a failed QP.
  if (head_ == tail_) return;
  Msg& m = MsgAt(head_);
  if (!m.atomic_posted || m.state != MsgState::kQueued || c.wr_id != head_) {
    return;
  }
  ReleaseRd(m);
  if (c.status == WcStatus::kSuccess) {
    m.state = MsgState::kDelivered;
    ++conn_.counters().atomics_completed;
  } else {
    FailFrom(head_, c.status);
  }
  Complete();
  BudgetHeadMoved();
}

bool Sender::CopyToLocal(const Msg& m, uint64_t off,
                         std::span<const uint8_t> data) {
  uint64_t len = data.size();
  const uint8_t* from = data.data();
  for (int i = 0; i < m.num_sge && len > 0; ++i) {
    const Sge& s = m.sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    uint8_t* to = conn_.mrs().LocalTarget(s, conn_.init().pd.id);
    if (to == nullptr) return false;
    const uint64_t take = std::min<uint64_t>(s.length - off, len);
    std::memcpy(to + off, from, take);
    from += take;
    len -= take;
    off = 0;
  }
  return true;
}

ReadRespResult Sender::OnReadResponse(const DaemonHeader& h, uint64_t now_ns,
                                      std::span<const uint8_t> data) {
  Msg* m = FindMsg(h.mid);
  if (m == nullptr || m->op != WrOpcode::kRdmaRead || !m->started) {
    return ReadRespResult::kNotARead;
  }
  if (m->state != MsgState::kQueued || !m->rd_held) {
    return ReadRespResult::kDuplicate;  // it ended (failed): nothing placed
  }
  if (h.msg_len != m->wr_len) return ReadRespResult::kBadLength;
  conn_.WakeSender();  // a READ ending frees what a later WR may wait for
  ReadRec& r = reads_[m->read_slot];
  const UnitRange u{h.off_units, h.off_units + 1};
  if (r.got.Covered(u)) return ReadRespResult::kDuplicate;
  if (!r.got.Insert(u)) return ReadRespResult::kRangesFull;
  ReliabilityCounters& n = conn_.counters();
  ++n.read_units_received;
  m->t_budget_ns = now_ns;  // progress (§1)
  const uint64_t seq = head_ + (h.mid - MsgAt(head_).mid);
  if (!CopyToLocal(*m, uint64_t{h.off_units} * kUnitSize, data)) {
    FailFrom(seq, WcStatus::kLocProtErr);  // as the RNIC's local check
    Complete();
    return ReadRespResult::kNew;
  }
  if (r.got.Exactly(r.units)) {
    ReleaseRd(*m);
    m->state = MsgState::kDelivered;
    ++n.reads_completed;
    Complete();
    BudgetHeadMoved();
  }
  return ReadRespResult::kNew;
}

// ---- Responder -------------------------------------------------------------

bool Sender::ServeRead(uint32_t req_mid, uint64_t addr, uint64_t len,
                       uint32_t lkey, uint64_t now_ns) {
  const uint32_t max = std::min<uint32_t>(
      std::max<uint32_t>(conn_.init().attr.max_dest_rd_atomic, 1),
      kMaxRdAtomic);
  if (failed_ || resp_tail_ - resp_head_ >= max) return false;
  conn_.WakeSender();  // to send the response
  RespRec& r = RespAt(resp_tail_++);
  r = RespRec{};
  r.req_mid = req_mid;
  r.addr = addr;
  r.len = len;
  r.lkey = lkey;
  r.units = UnitsOf(len);
  r.t_first_ns = now_ns;
  ReliabilityCounters& n = conn_.counters();
  ++n.reads_served;
  n.read_records_peak =
      std::max<uint64_t>(n.read_records_peak, resp_tail_ - resp_head_);
  return true;
}

bool Sender::SendResponses(uint64_t now_ns) {
  bool did = false;
  for (uint64_t s = resp_head_; s < resp_tail_; ++s) {
    RespRec& r = RespAt(s);
    while (!r.done && r.sent < r.units) {
      if (!CanTransmit() || !WindowOpen(now_ns)) return did;
      if (chunk_tail_ - chunk_head_ == chunks_in_flight_) return did;
      if (!PostResp(s, r.sent, 0, 0, false, 0, now_ns)) return did;
      ++r.sent;
      did = true;
    }
  }
  return did;
}

bool Sender::PostResp(uint64_t rseq, uint32_t unit, uint64_t cseq,
                      uint16_t cunit, bool retx, uint32_t expiries,
                      uint64_t now_ns) {
  const RespRec& r = RespAt(rseq);
  const uint64_t off = uint64_t{unit} * kUnitSize;
  const uint64_t len =
      r.len > off ? std::min<uint64_t>(kUnitSize, r.len - off) : 0;
  const bool last = unit + 1 == r.units;
  DaemonHeader h;
  h.type = HeaderType::kReadResp;
  h.flags = static_cast<uint8_t>((last || retx ? kHdrHint : 0) |
                                 (last ? kHdrLast : 0) |
                                 (retx ? kHdrRetransmission : 0));
  h.mid = r.req_mid;
  h.off_units = unit;
  h.data_len = static_cast<uint32_t>(len);
  h.msg_len = r.len;
  SendWr& w = HeaderSend(h, retx);
  if (len > 0) {  // the guest's bytes, from its MR (the data QP is in its PD)
    w.sge[1] = Sge{r.addr + off, static_cast<uint32_t>(len), r.lkey};
    w.num_sge = 2;
  }
  if (!conn_.PostData(w)) return false;
  if (!retx) {  // an original unit: a chunk record of its own
    cseq = NewChunk(rseq, r.req_mid, static_cast<uint16_t>(unit), 1, len, true);
    cunit = 0;
  }
  Transmitted(cseq, cunit, false, len, expiries, now_ns);
  ++(retx ? conn_.counters().read_units_resent
          : conn_.counters().read_units_sent);
  return true;
}

void Sender::RespUnitsAcked(uint64_t rseq, uint32_t n) {
  if (!RespLive(rseq)) return;
  RespRec& r = RespAt(rseq);
  r.acked += n;
  if (r.acked >= r.units) r.done = true;
}

void Sender::PopResponses(uint64_t now_ns) {
  const uint64_t budget = conn_.retry_budget_ns();
  for (uint64_t s = resp_head_; s < resp_tail_; ++s) {
    RespRec& r = RespAt(s);
    if (!r.done && budget != 0 && now_ns - r.t_first_ns > budget) {
      r.done = true;  // the requester stopped acknowledging: it gave up
      ++conn_.counters().read_responses_dropped;
    }
  }
  while (resp_head_ < resp_tail_ && RespAt(resp_head_).done) ++resp_head_;
}

}  // namespace vrdma::reliable
