// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Receiver (receiver.h): the receiving side of a uc-mode virtual QP.
#include "backend/reliable_rnic/receiver.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "backend/reliable_rnic/connection.h"

namespace vrdma::reliable {

using policy::reliability::AckReason;
using policy::reliability::AckTrigger;
using policy::reliability::Arrival;

namespace {

uint32_t UnitsOf(uint64_t bytes) {
  return static_cast<uint32_t>((bytes + kUnitSize - 1) / kUnitSize);
}

// IBA table 45 (the RNR timer), in units of 10 us; entry 0 is 655.36 ms.
uint64_t RnrTimerNs(uint8_t encoded) {
  static constexpr uint32_t kTenUs[32] = {
      65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,   32,
      48,    64,   96,   128,  192,  256,   384,   512,   768,   1024, 1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return uint64_t{kTenUs[encoded & 31]} * 10'000;
}

// While a message waits for a guest receive, the peer hears so this often
// (its retry budget restarts at each, §2.3).
constexpr uint64_t kWaitAckNs = 200'000;
// A failed receive side repeats its NAK this often, this many times.
constexpr uint64_t kNakRepeatNs = 1'000'000;
constexpr uint32_t kNakRepeats = 8;
// A delivery that no arrival made (a hold's, a READ's or a receive's wait
// ended) is told in an ACK of its own, which nothing resends if it is lost
// (its pieces were acknowledged): it goes again after 0.2, 0.4, ... 3.2 ms
// unless a new piece arrives meanwhile (whose ACK carries deliv_mid and is
// recovered by the peer's retransmission when lost).
constexpr uint64_t kDeliveryRepeatNs = 200'000;
constexpr uint32_t kDeliveryRepeats = 5;

}  // namespace

Receiver::Receiver(Connection& conn, const ReceiverParams& params,
                   uint32_t path_mtu)
    : conn_(conn), p_(params), trigger_(path_mtu, 0, params.trigger) {}

void Receiver::Start(uint32_t first_mid, uint8_t peer_rnr_retry,
                     uint64_t peer_retry_budget_ns) {
  deliv_mid_ = first_mid;
  rq_ = conn_.init().rq;
  rcv_next_ = 0;
  rq_next_ = rq_ != nullptr ? rq_->head() : 0;
  nheld_ = 0;
  waiting_ = false;
  failed_ = false;
  naks_left_ = 0;
  rnr_forever_ = (peer_rnr_retry & 7) == 7;
  rnr_budget_ns_ = uint64_t{peer_rnr_retry & 7u} *
                   RnrTimerNs(conn_.init().attr.min_rnr_timer);
  trigger_ = AckTrigger(conn_.init().attr.path_mtu_bytes, first_mid, p_.trigger);
  npending_ = 0;
  read_pending_ = 0;
  read_stalled_ = false;
  delivery_held_ = false;
  delivery_repeats_left_ = 0;
  hold_ns_ = peer_retry_budget_ns == 0
                 ? p_.packet_lifetime_ns
                 : std::min(p_.packet_lifetime_ns, peer_retry_budget_ns / 2);
  for (Record& r : ring_) Reset(r);
}

RxContext Receiver::Context(const Record* rec) const {
  RxContext ctx;
  ctx.vqpn = conn_.vqpn();
  ctx.conn_token = conn_.my_token();
  ctx.deliv_mid = deliv_mid_;
  ctx.mid_window = kRxMessagesPerQp;
  if (rec != nullptr && rec->len_known) ctx.known_msg_len = rec->len;
  return ctx;
}

Receiver::Record* Receiver::Find(uint32_t mid) {
  if (mid - deliv_mid_ >= kRxMessagesPerQp) return nullptr;
  Record& r = ring_[mid % kRxMessagesPerQp];
  return r.used && r.mid == mid ? &r : nullptr;
}

Receiver::Record* Receiver::FindOrMake(uint32_t mid) {
  if (Record* r = Find(mid)) return r;
  Record& r = ring_[mid % kRxMessagesPerQp];
  Reset(r);
  r.used = true;
  r.mid = mid;
  return &r;
}

bool Receiver::Complete(const Record& r) {
  if (!r.len_known) return false;
  // A READ_REQ is one piece whatever the READ's length.
  const uint32_t units = r.len == 0 || r.is_read ? 1 : UnitsOf(r.len);
  return r.ranges.Exactly(units);
}

void Receiver::Deliver(uint64_t now_ns) {
  ReliabilityCounters& n = conn_.counters();
  delivery_held_ = false;
  while (Record* r = Find(deliv_mid_)) {
    if (failed_ && static_cast<int32_t>(deliv_mid_ - fail_mid_) >= 0) return;
    if (r->held > 0) return;
    if (r->err == WcStatus::kSuccess && !Complete(*r)) return;
    if (r->not_before_ns > now_ns) {
      // A late copy of its original WRITE chunk may still be on its way
      // (§4.2, "Late originals"): it lands before the guest owns the
      // bytes again. Pump delivers it when the hold ends.
      delivery_held_ = true;
      hold_until_ns_ = r->not_before_ns;
      return;
    }
    if (r->is_read) {
      // Served now, in MID order (every earlier WRITE is in place); the
      // rules again: the MR may have gone since the request arrived.
      uint32_t lkey = 0;
      if (r->len > 0) {
        const MrRecord* mr = nullptr;
        if (conn_.mrs().CheckRemote(r->rkey, conn_.init().pd.id, r->raddr,
                                    r->len, kAccessRemoteRead,
                                    &mr) != RemoteRule::kOk) {
          n.Count(WireCounter::kRxAccessNak);
          FailFrom(r->mid, NakCode::kRemoteAccess, false, now_ns);
          return;
        }
        lkey = mr->mr.lkey;
      }
      if (!conn_.sender().ServeRead(r->mid, r->raddr, r->len, lkey, now_ns)) {
        read_stalled_ = true;  // max_dest_rd_atomic READs being answered
        return;
      }
      read_stalled_ = false;
    }
    if (r->consumes) {
      // The QP is in ERR (the guest's ModifyQp): its receives flushed.
      if (rq_ != nullptr && rq_->error()) return;
      // Receives are consumed in message order (§1).
      if (rq_ == nullptr || r->rcv_index != rcv_next_ || !rq_->Has(rq_next_)) {
        n.Count(WireCounter::kRxBadRcvIndex);
        FailFrom(r->mid, NakCode::kInvalidRequest, true, now_ns);
        return;
      }
      Completion c;
      c.status = r->err;
      c.opcode = r->is_send ? WcOpcode::kRecv : WcOpcode::kRecvRdmaWithImm;
      c.qpn = conn_.vqpn();
      c.src_qpn = conn_.peer_vqpn();
      if (r->err == WcStatus::kSuccess) {
        c.byte_len = static_cast<uint32_t>(r->len);
        if (r->with_imm) {
          c.wc_flags = kWcWithImm;
          c.imm_data = r->imm_be;
        }
      }
      rq_->Finish(rq_next_, c);
      ++rq_next_;
      ++rcv_next_;
      rq_->Report(conn_.init().recv_ring);
      if (r->err != WcStatus::kSuccess) {
        // As a native responder: the receive completes in error, the QP
        // goes to ERR, the sender learns REM_INV_REQ_ERR (length) or
        // REM_OP_ERR (the receive's SGEs).
        ++n.recv_errors;
        FailFrom(r->mid,
                 r->err == WcStatus::kLocLenErr ? NakCode::kInvalidRequest
                                                : NakCode::kRemoteOperation,
                 true, now_ns);
        return;
      }
      ++n.recvs_completed;
    }
    r->used = false;
    ++deliv_mid_;
    ++n.messages_delivered;
  }
}

uint32_t Receiver::HoldMax() const {
  const uint32_t bounce = conn_.bounce_count();
  const uint32_t reserve = std::max<uint32_t>(1, bounce / 4);
  return std::min<uint32_t>(bounce > reserve ? bounce - reserve : 0,
                            static_cast<uint32_t>(held_.size()));
}

bool Receiver::ReceivePosted(uint32_t rcv_index) const {
  return rq_ != nullptr && SeqOf(rcv_index) < rq_->posted();
}

bool Receiver::BadRcvIndex(const DaemonHeader& h, const Record* rec) const {
  if (rq_ == nullptr) return true;
  // At most one receive per message from deliv_mid on.
  if (h.rcv_index - rcv_next_ > h.mid - deliv_mid_) return true;
  if (rec != nullptr && rec->consumes) return rec->rcv_index != h.rcv_index;
  for (const Record& r : ring_) {
    if (r.used && r.consumes && r.mid != h.mid && r.rcv_index == h.rcv_index) {
      return true;  // another message's receive
    }
  }
  return false;
}

NakCode Receiver::ReadRefused(uint32_t rkey, uint64_t addr, uint64_t len) {
  ReliabilityCounters& n = conn_.counters();
  const QpAttr& a = conn_.init().attr;
  // As a native responder: the QP must allow READ at all (SoftRnic,
  // rxe: an invalid request), then the key, unless the READ names no
  // memory (zero length checks no key).
  if ((a.access_flags & kAccessRemoteRead) == 0 || a.max_dest_rd_atomic == 0) {
    ++n.read_nak_qp;
    return NakCode::kInvalidRequest;
  }
  if (len == 0) return NakCode::kNone;
  const MrRecord* mr = nullptr;
  switch (conn_.mrs().CheckRemote(rkey, conn_.init().pd.id, addr, len,
                                  kAccessRemoteRead, &mr)) {
    case RemoteRule::kOk: return NakCode::kNone;
    case RemoteRule::kRkey: ++n.read_nak_rkey; break;
    case RemoteRule::kPd: ++n.read_nak_pd; break;
    case RemoteRule::kAccess: ++n.read_nak_access; break;
    case RemoteRule::kRange: ++n.read_nak_range; break;
  }
  return NakCode::kRemoteAccess;
}

void Receiver::OnReadResp(const DaemonHeader& h, std::span<const uint8_t> data,
                          uint64_t now_ns) {
  ReliabilityCounters& n = conn_.counters();
  const Pending entry{true, h.gseq, 0, now_ns};
  RxContext ctx = Context(nullptr);
  ctx.read_mid_begin = conn_.sender().read_mid_begin();
  ctx.read_mid_end = conn_.sender().next_mid();
  bool again = false;  // acknowledged again (nothing new)
  if (WireCheck c = CheckHeader(h, ctx)) {
    n.Count(*c);
    if (WireCounterAction(*c) != WireAction::kAckAgain) return;
    again = true;
  } else {
    switch (conn_.sender().OnReadResponse(h, now_ns, data)) {
      case ReadRespResult::kNew:
        break;
      case ReadRespResult::kDuplicate:
        n.Count(WireCounter::kRxDuplicate);
        again = true;
        break;
      case ReadRespResult::kNotARead:
        n.Count(WireCounter::kRxMidOutsideWindow);
        return;
      case ReadRespResult::kBadLength:
        n.Count(WireCounter::kRxBadOffset);
        return;
      case ReadRespResult::kRangesFull:
        n.Count(WireCounter::kRxRangesFull);
        return;
    }
  }
  // The ACK: at once for the last unit, a retransmission or a duplicate,
  // else after max_chunks entries or the trigger's timer (Pump).
  if (npending_ == kPendingMax && !Flush(now_ns)) return;
  pending_[npending_++] = entry;
  if (read_pending_++ == 0) read_since_ns_ = now_ns;
  if (again || (h.flags & kHdrHint) != 0 ||
      read_pending_ >= p_.trigger.max_chunks) {
    Flush(now_ns);
  }
}

const MrRecord* Receiver::WriteTarget(const DaemonHeader& h) const {
  const MrRecord* mr = nullptr;
  if ((conn_.init().attr.access_flags & kAccessRemoteWrite) == 0 ||
      conn_.mrs().CheckRemote(h.rkey, conn_.init().pd.id, h.remote_addr,
                              h.data_len, kAccessRemoteWrite,
                              &mr) != RemoteRule::kOk) {
    return nullptr;
  }
  return mr;
}

WcStatus Receiver::CopyToReceive(uint64_t seq, uint64_t off,
                                 const uint8_t* data, uint32_t len) const {
  const RecvQueue::Entry& e = rq_->At(seq);
  const Sge* sges = rq_->Sges(seq);
  for (int i = 0; i < e.num_sge && len > 0; ++i) {
    const Sge& s = sges[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    // The receive's SGE, by the RNIC's local rules (MrTable::LocalTarget).
    uint8_t* to = conn_.mrs().LocalTarget(s, conn_.init().pd.id);
    if (to == nullptr) return WcStatus::kLocProtErr;
    const uint32_t take =
        static_cast<uint32_t>(std::min<uint64_t>(s.length - off, len));
    std::memcpy(to + off, data, take);
    data += take;
    len -= take;
    off = 0;
  }
  return WcStatus::kSuccess;
}

void Receiver::Place(const DaemonHeader& h, std::span<const uint8_t> data,
                     Record& rec, uint64_t now_ns) {
  if (h.type == HeaderType::kSendData) {
    if (rec.err != WcStatus::kSuccess || rq_->error()) return;
    const uint64_t seq = SeqOf(h.rcv_index);
    if (h.msg_len > rq_->At(seq).length) {
      rec.err = WcStatus::kLocLenErr;  // nothing of it is placed
      return;
    }
    rec.err = CopyToReceive(seq, uint64_t{h.off_units} * kUnitSize, data.data(),
                            h.data_len);
  } else if (h.data_len > 0) {  // WRITE_TAIL, WRITE_RETX
    const MrRecord* mr = WriteTarget(h);
    if (mr == nullptr) {  // deregistered while the unit waited
      conn_.counters().Count(WireCounter::kRxAccessNak);
      FailFrom(h.mid, NakCode::kRemoteAccess, false, now_ns);
      return;
    }
    std::memcpy(mr->addr + (h.remote_addr - mr->iova), data.data(), h.data_len);
  }
  ++conn_.counters().units_copied;
}

void Receiver::Release(uint32_t bounce) {
  conn_.RepostBounce(bounce);
  ++credits;
}

void Receiver::FailFrom(uint32_t mid, NakCode code, bool flush,
                        uint64_t now_ns) {
  if (!failed_ || static_cast<int32_t>(mid - fail_mid_) < 0) {
    failed_ = true;
    fail_mid_ = mid;
    fail_code_ = code;
  }
  for (uint32_t i = 0; i < nheld_; ++i) Release(held_[i].bounce);
  nheld_ = 0;
  waiting_ = false;
  if (flush && rq_ != nullptr) {
    rq_->FlushAll(conn_.vqpn(), conn_.init().recv_ring);
    conn_.sender().Fail(WcStatus::kWrFlushErr);
    conn_.EnterError();
  }
  Nak(fail_code_, fail_mid_, now_ns);
  // The NAK travels on the unreliable ACK QP and the sender may have
  // nothing left to send again (every unit of the message was
  // acknowledged while it waited): it is repeated a few times.
  naks_left_ = kNakRepeats;
  next_nak_ns_ = now_ns + kNakRepeatNs;
}

void Receiver::RnrExpired(uint64_t now_ns) {
  // The oldest message waiting (receives are consumed in order, so every
  // held unit belongs to it or a later one).
  uint32_t mid = held_[0].mid;
  for (uint32_t i = 1; i < nheld_; ++i) {
    if (static_cast<int32_t>(held_[i].mid - mid) < 0) mid = held_[i].mid;
  }
  ++conn_.counters().rnr_naks;
  FailFrom(mid, NakCode::kRnrExceeded, false, now_ns);
}

void Receiver::OnRecvPosted(uint64_t now_ns) {
  conn_.WakeReceiver();
  if (nheld_ == 0 || failed_) return;
  uint32_t kept = 0;
  bool released = false;
  for (uint32_t i = 0; i < nheld_; ++i) {
    const Held hd = held_[i];
    const std::span<const uint8_t> bytes(conn_.bounce(hd.bounce), hd.bytes);
    DaemonHeader h;
    if (ParseHeader(bytes, &h) || !ReceivePosted(h.rcv_index)) {
      held_[kept++] = hd;
      continue;
    }
    if (Record* rec = Find(h.mid)) {
      --rec->held;
      Place(h, bytes.subspan(kHeaderSize), *rec, now_ns);
    }
    Release(hd.bounce);
    released = true;
    if (failed_) return;  // Place failed the QP: every held unit released
  }
  nheld_ = kept;
  if (!released) return;
  if (nheld_ == 0) {
    waiting_ = false;
  } else {
    wait_since_ns_ = now_ns;  // the next message's wait starts
  }
  const uint32_t before = deliv_mid_;
  Deliver(now_ns);
  if (deliv_mid_ != before) RepeatDeliveryAck(now_ns);
  Flush(now_ns);  // the credits given back, at once
}

void Receiver::RepeatDeliveryAck(uint64_t now_ns) {
  delivery_repeats_left_ = kDeliveryRepeats;
  next_delivery_repeat_ns_ = now_ns + kDeliveryRepeatNs;
}

void Receiver::OnChunk(uint32_t imm_data, uint32_t byte_len, uint64_t now_ns) {
  ReliabilityCounters& n = conn_.counters();
  const ChunkImm imm = DecodeChunkImm(ChunkImmFromImmData(imm_data));
  const uint32_t mid = ExpandMid(imm.mid14, deliv_mid_);
  Record* rec = Find(mid);
  const uint32_t units = UnitsOf(byte_len);
  const Arrival arrival{mid, imm.off, units, byte_len, imm.last, imm.hint,
                        false, false};
  const Pending entry{false, 0, ReliableNumber(mid, imm.off), now_ns};
  if (failed_ && static_cast<int32_t>(mid - fail_mid_) >= 0) {
    Nak(fail_code_, fail_mid_, now_ns);  // nothing from there on
    return;
  }
  if (WireCheck c = CheckChunk(imm, mid, byte_len, Context(rec))) {
    n.Count(*c);
    if (*c == WireCounter::kRxAfterDelivery && byte_len > 0) ++n.late_writes;
    if (WireCounterAction(*c) == WireAction::kAckAgain) {
      Arrival dup = arrival;
      dup.duplicate = true;
      Arrived(entry, dup, now_ns);
    }
    return;
  }
  const UnitRange u{imm.off, imm.off + std::max<uint32_t>(units, 1)};
  rec = FindOrMake(mid);
  if (rec->ranges.Covered(u)) {
    n.Count(WireCounter::kRxDuplicate);
    Arrival dup = arrival;
    dup.duplicate = true;
    Arrived(entry, dup, now_ns);
    return;
  }
  if (!rec->ranges.Insert(u, p_.max_ranges)) {
    n.Count(WireCounter::kRxRangesFull);
    return;
  }
  if (imm.last) {
    rec->len_known = true;
    rec->len = uint64_t{imm.off} * kUnitSize + byte_len;
  }
  ++n.chunks_received;
  Deliver(now_ns);
  Arrived(entry, arrival, now_ns);
}

bool Receiver::OnSend(std::span<const uint8_t> bytes, uint32_t bounce,
                      uint64_t now_ns) {
  ReliabilityCounters& n = conn_.counters();
  DaemonHeader h;
  if (WireCheck c = ParseHeader(bytes, &h)) {
    n.Count(*c);
    return false;
  }
  if (h.type == HeaderType::kReadResp) {
    OnReadResp(h, bytes.subspan(kHeaderSize), now_ns);
    return false;
  }
  // SEND_DATA and WRITE_TAIL consume the message's guest receive.
  const bool piece =
      h.type == HeaderType::kSendData || h.type == HeaderType::kWriteTail;
  Record* rec = Find(h.mid);
  const bool last = (h.flags & kHdrLast) != 0;
  const Arrival arrival{h.mid, h.off_units, h.data_len > 0 ? 1u : 0u,
                        bytes.size(), last, (h.flags & kHdrHint) != 0,
                        false, false};
  const Pending entry{true, h.gseq, 0, now_ns};
  RxContext ctx = Context(rec);
  ctx.rcv_next = rcv_next_;
  ctx.rcv_window = rq_ != nullptr ? rq_->depth() : 0;
  if (WireCheck c = CheckHeader(h, ctx)) {
    n.Count(*c);
    if (WireCounterAction(*c) == WireAction::kAckAgain) {
      Arrival dup = arrival;
      dup.duplicate = true;
      Arrived(entry, dup, now_ns);
    }
    return false;
  }
  if (failed_ && static_cast<int32_t>(h.mid - fail_mid_) >= 0) {
    Nak(fail_code_, fail_mid_, now_ns);  // nothing from there on
    return false;
  }
  if (piece && BadRcvIndex(h, rec)) {
    n.Count(WireCounter::kRxBadRcvIndex);
    return false;
  }
  // A unit that would wait while a quarter of the bounce receives (at
  // least one) are all that is left unheld is dropped unacknowledged, as
  // an RNR NAK would send it again later: the rest stay for units whose
  // receives are posted, among them the ones that complete the messages
  // before it (else a peer that sent ahead could hold every buffer while
  // an earlier message waits for one unit, and neither moves).
  if (piece && nheld_ >= HoldMax() && !ReceivePosted(h.rcv_index)) {
    ++n.hold_refused;
    return false;
  }
  // §3.6 rx_access_nak: the rkey in the QP's PD, with remote write, the
  // range inside the MR, and the QP's access flags.
  if ((h.type == HeaderType::kWriteTail || h.type == HeaderType::kWriteRetx) &&
      h.data_len > 0 && WriteTarget(h) == nullptr) {
    n.Count(WireCounter::kRxAccessNak);
    Nak(NakCode::kRemoteAccess, h.mid, now_ns);
    return false;
  }
  // A READ_REQ by the responder's rules (step 13); served at delivery.
  if (h.type == HeaderType::kReadReq) {
    if (const NakCode code = ReadRefused(h.rkey, h.remote_addr, h.msg_len);
        code != NakCode::kNone) {
      n.Count(WireCounter::kRxAccessNak);
      Nak(code, h.mid, now_ns);
      return false;
    }
  }
  const UnitRange u{h.off_units, h.off_units + 1};
  rec = FindOrMake(h.mid);
  if (rec->ranges.Covered(u)) {
    n.Count(WireCounter::kRxDuplicate);
    Arrival dup = arrival;
    dup.duplicate = true;
    Arrived(entry, dup, now_ns);
    return false;
  }
  if (!rec->ranges.Insert(u, p_.max_ranges)) {
    n.Count(WireCounter::kRxRangesFull);
    return false;
  }
  if (piece && !rec->consumes) {
    rec->consumes = true;
    rec->is_send = h.type == HeaderType::kSendData;
    rec->with_imm = (h.flags & kHdrWithImm) != 0;
    rec->rcv_index = h.rcv_index;
    rec->imm_be = h.guest_imm_be;
  }
  if (last) {
    rec->len_known = true;
    rec->len = h.msg_len;
  }
  if (h.type == HeaderType::kReadReq) {
    rec->is_read = true;
    rec->rkey = h.rkey;
    rec->raddr = h.remote_addr;
    Deliver(now_ns);
    Arrived(entry, arrival, now_ns);
    return false;
  }
  if (h.type == HeaderType::kWriteRetx) {
    ++n.retx_copied;
    if (hold_ns_ != 0 && rec->not_before_ns == 0) {
      rec->not_before_ns = now_ns + hold_ns_;
      ++n.delivery_holds;
    }
  }
  if (piece && !ReceivePosted(h.rcv_index)) {
    // No guest receive yet: the unit waits in its bounce buffer, which
    // holds back a credit (§2.3); the peer hears at once that it waits.
    held_[nheld_++] = Held{bounce, static_cast<uint32_t>(bytes.size()), h.mid};
    ++rec->held;
    if (!waiting_) {
      waiting_ = true;
      wait_since_ns_ = now_ns;
      next_wait_ack_ns_ = now_ns + kWaitAckNs;
      ++n.rnr_waits;
    }
    Arrived(entry, arrival, now_ns);
    Flush(now_ns);
    return true;
  }
  // Only while the MID is not delivered (CheckHeader: mid >= deliv_mid).
  Place(h, bytes.subspan(kHeaderSize), *rec, now_ns);
  Deliver(now_ns);
  Arrived(entry, arrival, now_ns);
  return false;
}

void Receiver::Arrived(const Pending& p, const Arrival& a, uint64_t now_ns) {
  if (!a.duplicate) delivery_repeats_left_ = 0;  // its ACK tells deliv_mid
  if (npending_ == kPendingMax && !Flush(now_ns)) return;
  pending_[npending_++] = p;
  if (trigger_.OnArrival(now_ns, a) != AckReason::kNone) Flush(now_ns);
}

void Receiver::Nak(NakCode code, uint32_t mid, uint64_t now_ns) {
  ++conn_.counters().naks_sent;
  Flush(now_ns, static_cast<uint8_t>(code), mid);
}

uint64_t Receiver::Pump(uint64_t now_ns) {
  if (failed_ && naks_left_ > 0 && now_ns >= next_nak_ns_) {
    --naks_left_;
    next_nak_ns_ = now_ns + kNakRepeatNs;
    Nak(fail_code_, fail_mid_, now_ns);
  }
  if (waiting_) {
    if (nheld_ == 0) {
      waiting_ = false;
    } else if (!rnr_forever_ && now_ns - wait_since_ns_ >= rnr_budget_ns_) {
      RnrExpired(now_ns);
    } else if (now_ns >= next_wait_ack_ns_) {
      flush_wanted_ = true;  // "still waiting": the peer's budget restarts
      next_wait_ack_ns_ = now_ns + kWaitAckNs;
    }
  }
  // A READ waiting for a responder record: one may have ended; a
  // message's packet-lifetime hold may have.
  if (read_stalled_ || (delivery_held_ && now_ns >= hold_until_ns_)) {
    const uint32_t before = deliv_mid_;
    Deliver(now_ns);
    if (deliv_mid_ != before) {
      flush_wanted_ = true;
      RepeatDeliveryAck(now_ns);
    }
  } else if (delivery_repeats_left_ > 0 && now_ns >= next_delivery_repeat_ns_) {
    --delivery_repeats_left_;
    next_delivery_repeat_ns_ =
        now_ns + (kDeliveryRepeatNs << (kDeliveryRepeats - delivery_repeats_left_));
    flush_wanted_ = true;
    ++conn_.counters().delivery_acks_repeated;
  }
  if (flush_wanted_ || trigger_.OnTimer(now_ns) != AckReason::kNone ||
      (read_pending_ > 0 && now_ns >= read_since_ns_ + p_.trigger.timer_ns)) {
    Flush(now_ns);
  }
  // Receives completed while the virtual CQ's ring was full.
  if (rq_ != nullptr && rq_->unreported()) rq_->Report(conn_.init().recv_ring);
  // What is pending, and when. A READ waiting for a responder record, an
  // ACK the ACK channel had no room for, receives the guest's CQ had no
  // room for: every turn (nothing wakes them).
  if (flush_wanted_ || read_stalled_ || (waiting_ && nheld_ == 0) ||
      (rq_ != nullptr && rq_->unreported())) {
    return 0;
  }
  uint64_t due = UINT64_MAX;
  if (std::optional<uint64_t> t = trigger_.DeadlineNs()) due = *t;
  if (read_pending_ > 0) due = std::min(due, read_since_ns_ + p_.trigger.timer_ns);
  if (npending_ > 0 && due == UINT64_MAX) due = 0;  // no timer row: at once
  if (waiting_) {
    due = std::min(due, next_wait_ack_ns_);
    if (!rnr_forever_) due = std::min(due, wait_since_ns_ + rnr_budget_ns_);
  }
  if (delivery_held_) due = std::min(due, hold_until_ns_);
  if (delivery_repeats_left_ > 0) due = std::min(due, next_delivery_repeat_ns_);
  if (failed_ && naks_left_ > 0) due = std::min(due, next_nak_ns_);
  return due;
}

bool Receiver::Flush(uint64_t now_ns, uint8_t nak_code, uint32_t nak_mid) {
  if (!conn_.has_ack_to) {
    flush_wanted_ = true;
    return false;
  }
  uint32_t done = 0;
  do {
    const uint32_t n = std::min(npending_ - done, kAckMaxEntries);
    Ack a;
    a.dst_vqpn = conn_.peer_vqpn();
    a.conn_token = conn_.peer_token();
    a.deliv_mid = deliv_mid_;
    a.credits = credits;
    if (nheld_ > 0) a.flags |= kAckWaitingReceive;
    uint64_t base = std::numeric_limits<uint64_t>::max();
    for (uint32_t i = 0; i < n; ++i) {
      if (pending_[done + i].is_send) base = std::min(base, pending_[done + i].gseq);
    }
    a.base_gseq = base == std::numeric_limits<uint64_t>::max() ? 0 : base;
    for (uint32_t i = 0; i < n; ++i) {
      const Pending& e = pending_[done + i];
      if (e.is_send) {
        a.entries[i] = static_cast<uint32_t>(e.gseq - a.base_gseq);
        a.send_bitmap |= uint64_t{1} << i;
      } else {
        a.entries[i] = e.number;
      }
    }
    a.n = static_cast<uint8_t>(n);
    if (n > 0) {
      a.flags |= kAckSampleValid;
      a.sample = static_cast<uint8_t>(n - 1);
      const uint64_t hold = now_ns - pending_[done + n - 1].t2_ns;
      a.hold_ns = static_cast<uint32_t>(
          std::min<uint64_t>(hold, std::numeric_limits<uint32_t>::max()));
    }
    if (nak_code != 0 && done + n == npending_) {
      a.flags |= kAckNak;
      a.nak_code = nak_code;
      a.nak_mid = nak_mid;
    }
    if (!conn_.acks().Send(conn_.ack_to, a)) {
      std::copy(pending_.begin() + done, pending_.begin() + npending_,
                pending_.begin());
      npending_ -= done;
      flush_wanted_ = true;
      return false;
    }
    ++conn_.counters().acks_sent;
    done += n;
  } while (done < npending_);
  npending_ = 0;
  read_pending_ = 0;
  trigger_.OnAckSent();
  flush_wanted_ = false;
  return true;
}

}  // namespace vrdma::reliable
