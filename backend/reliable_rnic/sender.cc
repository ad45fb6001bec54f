// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Sender (sender.h): the sending side of a uc-mode virtual QP: posting,
// new chunks, completions and the turn (Pump). sender_acks.cc has the
// ACKs, losses and retransmissions; sender_read.cc READ and atomics.
#include "backend/reliable_rnic/sender.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "backend/reliable_rnic/connection.h"
#include "backend/reliable_rnic/sender_records.h"

namespace vrdma::reliable {

namespace {

// A chunk covers at most 16 units (64 KiB): its units' acks fit a mask.
constexpr uint64_t kMaxChunkBytes = 16 * kUnitSize;

bool ConsumesReceive(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm ||
         op == WrOpcode::kRdmaWriteWithImm;
}

policy::reliability::ChunkSizeParams Clamped(
    policy::reliability::ChunkSizeParams p) {
  p.max_chunk = std::min(p.max_chunk, kMaxChunkBytes);
  return p;
}

}  // namespace

Sender::Sender(Connection& conn, const SenderParams& params, uint32_t sq_depth,
               uint32_t max_inline, uint8_t* inline_area, uint32_t region_lkey)
    : conn_(conn),
      chunks_in_flight_(params.chunks_in_flight),
      max_xmits_(params.max_xmits),
      sq_depth_(std::max<uint32_t>(sq_depth, 1)),
      max_inline_(max_inline),
      msg_mask_(std::bit_ceil(sq_depth_) - 1),
      chunk_mask_(std::bit_ceil(std::max<uint32_t>(params.chunks_in_flight, 1)) - 1),
      inline_area_(inline_area),
      region_lkey_(region_lkey),
      msgs_(std::make_unique<Msg[]>(msg_mask_ + 1)),
      chunks_(std::make_unique<ChunkRec[]>(chunk_mask_ + 1)),
      xmits_(std::make_unique<Xmit[]>(chunk_mask_ + 1)),
      retx_(std::make_unique<RetxUnit[]>((chunk_mask_ + 1) * 16)),
      retx_cap_((chunk_mask_ + 1) * 16),
      signal_(params.signal_every, params.chunks_in_flight),
      loss_(0, {.capacity = params.chunks_in_flight}),
      window_(params.window),
      chunk_size_(Clamped(params.chunk)),
      rto_(params.rto) {
  static_assert(sizeof(ChunkRec) == 32 && sizeof(Xmit) == 32,
                "half a line each (sender_records.h)");
}

Sender::~Sender() = default;

uint64_t Sender::HostBytes(const SenderParams& p, uint32_t sq_depth) {
  // The rings are rounded up to powers of two (Sender::msg_mask_); the
  // loss detector's has one entry of 24 bytes per transmission.
  const uint64_t c = std::bit_ceil(std::max<uint32_t>(p.chunks_in_flight, 1));
  return sizeof(Sender) +
         uint64_t{std::bit_ceil(std::max<uint32_t>(sq_depth, 1))} * sizeof(Msg) +
         c * (sizeof(ChunkRec) + sizeof(Xmit) + 16 * sizeof(RetxUnit) + 24);
}

void Sender::Start(uint32_t first_mid, uint64_t first_gseq) {
  // Messages posted while connecting keep their order; they take MIDs
  // from first_mid on.
  for (uint64_t s = head_; s < tail_; ++s) MsgAt(s).mid = first_mid + (s - head_);
  next_mid_ = first_mid + static_cast<uint32_t>(tail_ - head_);
  acked_mid_ = first_mid;
  sent_mid_end_ = first_mid;
  next_gseq_ = first_gseq;
  peer_credits_ = max_xmits_;  // the peer's bounce receives at connect
  credit_used_ = 0;
  room_wait_seq_ = UINT64_MAX;  // the next pass says
  checks_at_ = 0;
  // The constructor's detector is kept while nothing was sent (no
  // allocation when the live switch connects a connection made earlier).
  if (first_gseq != 0 || posts_ != 0) {
    loss_ = policy::reliability::LossDetector(
        first_gseq, {.capacity = chunks_in_flight_});
  }
}

Sender::Msg& Sender::MsgAt(uint64_t seq) { return msgs_[seq & msg_mask_]; }
Sender::ChunkRec& Sender::ChunkAt(uint64_t cseq) {
  return chunks_[cseq & chunk_mask_];
}
Sender::Xmit& Sender::XmitAt(uint64_t gseq) {
  return xmits_[gseq & chunk_mask_];
}

Sender::Msg* Sender::FindMsg(uint32_t mid) {
  if (head_ == tail_) return nullptr;
  const uint32_t d = mid - MsgAt(head_).mid;
  return d < tail_ - head_ ? &MsgAt(head_ + d) : nullptr;
}

Sender::ChunkRec* Sender::FindChunk(uint32_t mid, uint16_t off) {
  // An ACK names chunks mostly in the order they went: the search starts
  // after the last one found and wraps (a live chunk's (mid, off) is
  // unique: a message's original pieces never overlap).
  const uint64_t live = chunk_tail_ - chunk_head_;
  uint64_t s = find_from_ >= chunk_head_ && find_from_ < chunk_tail_
                   ? find_from_
                   : chunk_head_;
  for (uint64_t i = 0; i < live; ++i, ++s) {
    if (s == chunk_tail_) s = chunk_head_;
    ChunkRec& c = ChunkAt(s);
    if (!c.resp && c.mid == mid && c.off == off && c.acked != c.full()) {
      find_from_ = s + 1;
      return &c;
    }
  }
  return nullptr;
}

// ---- Posting ---------------------------------------------------------------

int Sender::Post(std::span<const SendWr> wrs, Status* first_error) {
  // Behind a WRITE that waits for room a new message waits too: the ACK
  // or loss that makes room wakes the connection.
  if (!StoppedForRoom()) conn_.WakeSender();
  int n = 0;
  for (const SendWr& wr : wrs) {
    const bool read = wr.opcode == WrOpcode::kRdmaRead;
    const bool atomic = IsAtomic(wr.opcode);
    if (wr.opcode != WrOpcode::kRdmaWrite &&
        wr.opcode != WrOpcode::kRdmaWriteWithImm &&
        wr.opcode != WrOpcode::kSend && wr.opcode != WrOpcode::kSendWithImm &&
        !read && !atomic) {
      if (first_error) *first_error = Status::kInvalid;
      return n;
    }
    const uint64_t len = wr.total_length();
    const bool inl = (wr.send_flags & kSendInline) != 0;
    if (len > kMidBytes || (inl && len > max_inline_) ||
        (!inl && wr.num_sge > kMaxSge - 1) || ((read || atomic) && inl) ||
        (atomic && (wr.num_sge != 1 || len != 8))) {
      if (first_error) *first_error = Status::kInvalid;
      return n;
    }
    if (tail_ - head_ == sq_depth_) {
      if (first_error) *first_error = Status::kNoResource;
      return n;
    }
    const uint64_t seq = tail_;
    Msg& m = MsgAt(seq);
    static_cast<MsgFields&>(m) = MsgFields{};
    m.wr_id = wr.wr_id;
    m.send_flags = wr.send_flags;
    m.signaled = (wr.send_flags & kSendSignaled) != 0 || conn_.init().sq_sig_all;
    m.mid = next_mid_++;
    m.len = len;
    m.remote_addr = wr.remote_addr;
    m.rkey = wr.rkey;
    m.units = UnitsOf(len);
    m.op = wr.opcode;
    m.wr_len = len;
    // §2.3, step 13: a READ is one READ_REQ (one piece); an atomic goes
    // on the lower RC QP, and its MID travels as a zero-length WRITE_RETX
    // (nothing written, delivered in order) so the peer's MIDs stay dense.
    if (read) m.units = 1;
    if (atomic) {
      m.len = 0;
      m.units = 1;
      m.compare_add = wr.compare_add;
      m.swap = wr.swap;
    }
    m.imm = wr.imm_data;
    if (ConsumesReceive(wr.opcode)) m.rcv_index = next_rcv_++;
    // §2.3: a WRITE is chunks; a WRITE_WITH_IMM chunks for [0, len - t)
    // and its tail t (the last unit, whole or not) a WRITE_TAIL; a SEND is
    // SEND_DATA units only.
    if (wr.opcode == WrOpcode::kRdmaWrite) {
      m.body = len;
    } else if (wr.opcode == WrOpcode::kRdmaWriteWithImm) {
      m.body = len == 0 ? 0 : (len - 1) / kUnitSize * kUnitSize;
    }
    if (inl) {
      // The inline area has sq_depth_ slots (Connection::Open).
      uint8_t* copy = inline_area_ + (seq % sq_depth_) * max_inline_;
      if (len > 0) std::memcpy(copy, wr.inline_data, len);
      m.num_sge = len > 0 ? 1 : 0;
      m.sge[0] = Sge{reinterpret_cast<uint64_t>(copy),
                     static_cast<uint32_t>(len), region_lkey_};
    } else {
      m.num_sge = wr.num_sge;
      std::copy_n(wr.sge.begin(), wr.num_sge, m.sge.begin());
    }
    if (failed_) {  // the QP failed: flushed, in order
      m.state = MsgState::kFailed;
      m.status = WcStatus::kWrFlushErr;
    }
    ++tail_;
    ++conn_.counters().messages_posted;
    ++n;
  }
  return n;
}

int Sender::Slice(const Msg& m, uint64_t off, uint64_t len, Sge* out,
                  int room) const {
  int n = 0;
  for (int i = 0; i < m.num_sge && len > 0; ++i) {
    const Sge& s = m.sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(s.length - off, len);
    if (n == room) return -1;
    out[n++] = Sge{s.addr + off, static_cast<uint32_t>(take), s.lkey};
    len -= take;
    off = 0;
  }
  return n;
}

uint32_t Sender::Credits() const {
  const int32_t c = static_cast<int32_t>(peer_credits_ - credit_used_);
  return c <= 0 ? 0
                : std::min<uint32_t>(static_cast<uint32_t>(c), max_xmits_);
}

bool Sender::CanTransmit() const {
  return inflight_xmits_ < max_xmits_ && Credits() > 0 &&
         loss_.occupied() < chunks_in_flight_ &&
         posts_ - posts_done_ < chunks_in_flight_;
}

SendWr& Sender::HeaderSend(DaemonHeader& h, bool retx) {
  h.dst_vqpn = conn_.peer_vqpn();
  h.gseq = next_gseq_;
  h.conn_token = conn_.peer_token();
  h.credits = conn_.receiver().credits;
  uint8_t* slot = conn_.header_slot(posts_);
  (void)EncodeHeader(h, std::span(slot, kHeaderSize));
  SendWr& w = header_wr_;
  w.opcode = WrOpcode::kSend;
  w.send_flags = signal_.Flags();
  w.wr_id = DataWrId(conn_.init().slot, retx ? WrKind::kRetx : WrKind::kChunk,
                     static_cast<uint32_t>(posts_));
  w.sge[0] = Sge{reinterpret_cast<uint64_t>(slot), kHeaderSize, conn_.region_lkey()};
  w.num_sge = 1;
  return w;
}

uint64_t Sender::NewChunk(uint64_t msg_seq, uint32_t mid, uint16_t off,
                          uint16_t nunits, uint64_t bytes, bool resp) {
  const uint64_t cseq = chunk_tail_++;
  ChunkRec& c = ChunkAt(cseq);
  c = ChunkRec{};
  c.msg_seq = msg_seq;
  c.mid = mid;
  c.off = off;
  c.nunits = nunits;
  c.bytes = static_cast<uint32_t>(bytes);
  c.gseq = next_gseq_;  // the transmission about to be booked
  c.resp = resp;
  return cseq;
}

void Sender::Transmitted(uint64_t cseq, uint16_t unit, bool whole, uint64_t bytes,
                         uint32_t expiries, uint64_t now_ns) {
  XmitAt(next_gseq_) = Xmit{next_gseq_, cseq, now_ns, static_cast<uint32_t>(bytes),
                            static_cast<uint8_t>(unit), whole};
  (void)loss_.OnSent(next_gseq_, now_ns,
                     rto_.TimeoutNs(rtt_, expiries, rto_undo_.FloorNs(now_ns)),
                     expiries);
  ++next_gseq_;
  ++posts_;
  ++credit_used_;
  Paced(now_ns, bytes);
  inflight_bytes_ += bytes;
  ++inflight_xmits_;
}

void Sender::Paced(uint64_t now_ns, uint64_t bytes) {
  last_send_ns_ = now_ns;
  last_send_bytes_ = bytes;
}

bool Sender::PaceOpen(uint64_t now_ns) const {
  const uint64_t iv = window_.PacingIntervalNs(rtt_.srtt(), last_send_bytes_);
  return iv == 0 || now_ns >= last_send_ns_ + iv;
}

bool Sender::WindowOpen(uint64_t now_ns) const {
  return inflight_bytes_ < window_.cwnd() && PaceOpen(now_ns);
}

bool Sender::PostChunk(uint64_t seq, uint64_t bytes, bool last, bool hint,
                       uint64_t now_ns) {
  Msg& m = MsgAt(seq);
  if (chunk_tail_ - chunk_head_ == chunks_in_flight_) return false;
  const uint16_t off = static_cast<uint16_t>(m.sent / kUnitSize);
  SendWr& w = chunk_wr_;
  w.opcode = WrOpcode::kRdmaWriteWithImm;
  w.send_flags = signal_.Flags();
  w.wr_id = DataWrId(conn_.init().slot, WrKind::kChunk,
                     static_cast<uint32_t>(posts_));
  w.remote_addr = m.remote_addr + m.sent;
  w.rkey = m.rkey;
  w.imm_data = ChunkImmToImmData(EncodeChunkImm(ChunkImm{
      .hint = hint, .last = last, .mid14 = static_cast<uint16_t>(m.mid & kMidLowMask),
      .off = off}));
  const int nsge = Slice(m, m.sent, bytes, w.sge.data(), kMaxSge);
  if (nsge < 0) return false;
  w.num_sge = static_cast<uint8_t>(nsge);
  if (!conn_.PostData(w)) return false;

  const uint64_t cseq =
      NewChunk(seq, m.mid, off, static_cast<uint16_t>(UnitsOf(bytes)), bytes, false);
  Transmitted(cseq, 0, true, bytes, 0, now_ns);
  if (!m.started) Started(m, now_ns);
  m.sent += bytes;
  if (static_cast<int32_t>(m.mid + 1 - sent_mid_end_) > 0) sent_mid_end_ = m.mid + 1;
  ++conn_.counters().chunks_sent;
  conn_.counters().chunk_bytes_sent += bytes;
  return true;
}

bool Sender::PostRetx(uint64_t cseq, uint16_t unit, uint32_t expiries,
                      uint64_t now_ns) {
  const ChunkRec& c = ChunkAt(cseq);
  Msg* m = FindMsg(c.mid);
  if (m == nullptr) return true;  // delivered meanwhile: nothing to send
  return PostPiece(head_ + (m->mid - MsgAt(head_).mid), c.off + unit, cseq,
                   unit, expiries, true, true, now_ns);
}

bool Sender::PostPiece(uint64_t seq, uint32_t abs_unit, uint64_t cseq,
                       uint16_t unit, uint32_t expiries, bool retx, bool hint,
                       uint64_t now_ns) {
  if (!retx && chunk_tail_ - chunk_head_ == chunks_in_flight_) return false;
  Msg& m = MsgAt(seq);
  const uint64_t off = uint64_t{abs_unit} * kUnitSize;
  const uint64_t len =
      m.len > off && m.op != WrOpcode::kRdmaRead
          ? std::min<uint64_t>(kUnitSize, m.len - off)
          : 0;
  const bool last = abs_unit + 1 == m.units;
  DaemonHeader h;
  const bool read = m.op == WrOpcode::kRdmaRead;
  if (read) {
    h.type = HeaderType::kReadReq;  // no data; msg_len is the READ's
  } else if (m.op == WrOpcode::kSend || m.op == WrOpcode::kSendWithImm) {
    h.type = HeaderType::kSendData;
  } else if (m.op == WrOpcode::kRdmaWriteWithImm && last) {
    h.type = HeaderType::kWriteTail;
  } else {
    h.type = HeaderType::kWriteRetx;
  }
  const bool consumes =
      h.type == HeaderType::kSendData || h.type == HeaderType::kWriteTail;
  h.flags = static_cast<uint8_t>(
      (hint ? kHdrHint : 0) | (last ? kHdrLast : 0) |
      (retx ? kHdrRetransmission : 0) |
      (consumes && (m.send_flags & kSendSolicited) ? kHdrSolicited : 0) |
      (consumes && m.op != WrOpcode::kSend ? kHdrWithImm : 0));
  h.mid = m.mid;
  h.off_units = abs_unit;
  h.data_len = static_cast<uint32_t>(len);
  h.msg_len = m.len;
  if (consumes) {
    h.rcv_index = m.rcv_index;
    if (m.op != WrOpcode::kSend) h.guest_imm_be = m.imm;
  }
  if (h.type != HeaderType::kSendData) {
    h.remote_addr = m.remote_addr + off;
    h.rkey = m.rkey;
  }
  SendWr& w = HeaderSend(h, retx);
  const int nsge = Slice(m, off, len, w.sge.data() + 1, kMaxSge - 1);
  if (nsge < 0) return false;
  w.num_sge = static_cast<uint8_t>(1 + nsge);
  if (!conn_.PostData(w)) return false;

  if (!retx) {  // an original piece: a chunk record of its one unit
    cseq = NewChunk(seq, m.mid, static_cast<uint16_t>(abs_unit), 1, len, false);
    unit = 0;
  }
  Transmitted(cseq, unit, false, len, expiries, now_ns);
  if (retx) {
    ++conn_.counters().retx_sent;
  } else {
    ++conn_.counters().sends_sent;
    if (!m.started) Started(m, now_ns);
    m.sent = off + len;
    if (static_cast<int32_t>(m.mid + 1 - sent_mid_end_) > 0)
      sent_mid_end_ = m.mid + 1;
  }
  return true;
}

void Sender::OnSendCompletion(const Completion& c) {
  // A send's end matters only where the data QP's send queue was full
  // (CanTransmit): the connection is woken then, not at every chunk.
  if (posts_ - posts_done_ >= chunks_in_flight_) conn_.WakeSender();
  // Every post up to this one is done (SignalEvery).
  posts_done_ += SignalEvery::Ends(posts_done_, posts_, DataWrIndex(c.wr_id),
                                   kDataWrIndexMask);
  if (c.status != WcStatus::kSuccess && c.status != WcStatus::kWrFlushErr) {
    Fail(c.status);  // a local error of the data QP: it is in ERR now
  }
}

bool Sender::AllPosted(const Msg& m) {
  if (m.state != MsgState::kQueued) return true;
  switch (m.op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return m.sent >= m.len && (m.len != 0 || m.started);
    case WrOpcode::kRdmaWrite:
      return m.sent >= m.body && (m.len != 0 || m.started);
    case WrOpcode::kRdmaWriteWithImm:
      return m.sent >= m.body && m.tail_sent;
    case WrOpcode::kRdmaRead:
      return m.started;
    default:  // an atomic waits for its turn at the head
      return false;
  }
}

bool Sender::SendNewChunks(uint64_t now_ns) {
  const uint64_t srtt = rtt_.srtt();
  const uint64_t target = window_.TargetNs(rtt_.base_rtt(now_ns));
  send_from_ = std::max(send_from_, head_);
  while (send_from_ < tail_ && AllPosted(MsgAt(send_from_))) ++send_from_;
  // A message's L chunk held by the tail rule depends on the window's
  // room, which later messages' sends then take: one pass more, until a
  // pass sends nothing, so that the pump leaves nothing a pump at once
  // would send (its connection may sleep until a timer).
  bool did = false;
  for (;;) {
    const uint64_t posts_before = posts_;
    bool tail_held = false;
    did |= SendNewChunksPass(now_ns, srtt, target, &tail_held);
    if (!tail_held || posts_ == posts_before) return did;
  }
}

bool Sender::SendNewChunksPass(uint64_t now_ns, uint64_t srtt, uint64_t target,
                               bool* tail_held) {
  bool did = false;
  room_wait_seq_ = UINT64_MAX;
  for (uint64_t s = send_from_; s < tail_; ++s) {
    Msg& m = MsgAt(s);
    if (m.state != MsgState::kQueued) continue;
    // The receiver keeps records for 64 MIDs from its deliv_mid (§3.4).
    // (A READ or an atomic may be below it: delivered, not yet ended.)
    if (static_cast<int32_t>(m.mid - acked_mid_) >=
        static_cast<int32_t>(kRxMessagesPerQp)) {
      break;
    }
    // A fenced WR waits for every READ and atomic before it (IBA 10.8.3.3).
    if ((m.send_flags & kSendFence) && !m.started && rd_outstanding_ > 0) break;
    if (m.op == WrOpcode::kRdmaRead || IsAtomic(m.op)) {
      if (!SendReadOrAtomic(s, now_ns, &did)) return did;
      continue;
    }
    const bool send = m.op == WrOpcode::kSend || m.op == WrOpcode::kSendWithImm;
    if (send) {
      // SEND_DATA units, one SEND each (§2.3).
      while (m.sent < m.len || (m.len == 0 && !m.started)) {
        if (!CanTransmit() || !WindowOpen(now_ns)) return did;
        const uint32_t unit = static_cast<uint32_t>(m.sent / kUnitSize);
        const bool hint =
            Credits() == 1 || (unit + 1 == m.units && s + 1 == tail_);
        if (!PostPiece(s, unit, 0, 0, 0, false, hint, now_ns)) return did;
        did = true;
      }
      continue;
    }
    // WRITE chunks: the whole of a WRITE, the body of a WRITE_WITH_IMM.
    const bool with_imm = m.op == WrOpcode::kRdmaWriteWithImm;
    while (m.sent < m.body || (!with_imm && m.len == 0 && !m.started)) {
      if (!CanTransmit() || !PaceOpen(now_ns)) return did;
      const uint64_t cwnd = window_.cwnd();
      std::optional<policy::reliability::Chunk> ch = chunk_size_.Next(
          cwnd, inflight_bytes_, m.sent, m.body - m.sent, target, srtt);
      if (!ch) {  // the window is full
        // The messages before it went whole in this pass (their records
        // are in cache now): StoppedForRoom reads no record.
        while (send_from_ < s && AllPosted(MsgAt(send_from_))) ++send_from_;
        if (!*tail_held && send_from_ == s) room_wait_seq_ = s;
        return did;
      }
      // The tail rule (§2.3): a message's L chunk goes after every chunk
      // before it was acknowledged.
      if (!with_imm && ch->last && m.sent > 0 &&
          m.acked_units < m.sent / kUnitSize) {
        if (!m.tail_counted) ++conn_.counters().tail_waits;
        m.tail_counted = true;
        *tail_held = true;
        break;
      }
      const bool last = ch->last && !with_imm;
      const bool hint =
          Credits() == 1 ||
          policy::reliability::ChunkSize::Hint(
              cwnd, inflight_bytes_ + ch->bytes, last && s + 1 == tail_);
      if (!PostChunk(s, ch->bytes, last, hint, now_ns)) return did;
      did = true;
    }
    if (!with_imm || m.sent < m.body || m.tail_sent) continue;
    // The WRITE_TAIL, under the tail rule: after every body chunk was
    // acknowledged.
    if (m.body > 0 && m.acked_units < m.body / kUnitSize) {
      if (!m.tail_counted) ++conn_.counters().tail_waits;
      m.tail_counted = true;
      continue;
    }
    if (!CanTransmit() || !WindowOpen(now_ns)) return did;
    if (!PostPiece(s, m.units - 1, 0, 0, 0, false, true, now_ns)) return did;
    m.tail_sent = true;
    did = true;
  }
  return did;
}

// ---- Completions -----------------------------------------------------------

void Sender::FailFrom(uint64_t seq, WcStatus status) {
  for (uint64_t s = seq; s < tail_; ++s) {
    Msg& m = MsgAt(s);
    if (m.state != MsgState::kQueued) continue;
    m.state = MsgState::kFailed;
    m.status = s == seq ? status : WcStatus::kWrFlushErr;
    ReleaseRd(m);
    if (s == seq && status != WcStatus::kWrFlushErr) {
      ++conn_.counters().messages_failed;
    }
  }
  failed_ = true;
  fail_status_ = status;
}

void Sender::Fail(WcStatus status) {
  conn_.Wake();
  for (uint64_t s = head_; s < tail_; ++s) {
    if (MsgAt(s).state == MsgState::kQueued) {
      FailFrom(s, status);
      break;
    }
  }
  failed_ = true;
  // A QP in ERR answers no READ either (step 13).
  for (uint64_t s = resp_head_; s < resp_tail_; ++s) RespAt(s).done = true;
  Complete();
}

void Sender::Complete() {
  CompletionRing* ring = conn_.init().send_ring;
  while (head_ < tail_) {
    Msg& m = MsgAt(head_);
    if (m.state == MsgState::kQueued) break;
    const WcStatus st =
        m.state == MsgState::kDelivered ? WcStatus::kSuccess : m.status;
    if (m.signaled || st != WcStatus::kSuccess) {
      Completion c;
      c.wr_id = m.wr_id;
      c.status = st;
      c.opcode = SendCompletionOpcode(m.op);
      c.qpn = conn_.vqpn();
      if (m.op == WrOpcode::kRdmaRead || IsAtomic(m.op)) {
        c.byte_len = static_cast<uint32_t>(m.wr_len);
      }
      if (ring == nullptr || !ring->Push(c)) break;  // again after a poll
    }
    if (st == WcStatus::kSuccess) ++conn_.counters().messages_completed;
    ++head_;
  }
}

uint64_t Sender::Pump(uint64_t now_ns) {
  // Nothing posted, in flight, to resend or to answer, and no record left
  // to pop: every step below would do nothing (most of a receiving host's
  // senders, pumped for their receivers).
  if (head_ == tail_ && inflight_xmits_ == 0 && resp_head_ == resp_tail_ &&
      chunk_head_ == chunk_tail_ && retx_head_ == retx_tail_ &&
      !tail_retx_any_) {
    return UINT64_MAX;
  }
  if (now_ns >= checks_at_) {
    DetectLosses(now_ns);
    CheckBudget(now_ns);
    checks_at_ = std::min(loss_.NextCheckNs(rtt_.srtt()), BudgetDueNs());
  }
  SendRetransmissions(now_ns);
  SendResponses(now_ns);  // a responder answers before it asks (step 13)
  SendNewChunks(now_ns);
  // The RTOs of what went (a message's start lowered it for its budget).
  checks_at_ = std::min(checks_at_, loss_.NextCheckNs(rtt_.srtt()));
  // What this pump freed (chunk and READ records, the head message: an
  // atomic is posted only at the head) is the next turn's to use.
  const uint64_t heads = head_ + chunk_head_ + resp_head_;
  PopChunks();
  PopResponses(now_ns);
  Complete();
  if (head_ == tail_ && inflight_xmits_ == 0 && resp_head_ == resp_tail_) {
    return UINT64_MAX;
  }
  if (head_ + chunk_head_ + resp_head_ != heads) return 0;
  return NextDueNs(now_ns);
}

void Sender::Started(Msg& m, uint64_t now_ns) {
  m.started = true;
  m.t_budget_ns = now_ns;
  if (const uint64_t budget = conn_.retry_budget_ns(); budget != 0) {
    checks_at_ = std::min(checks_at_, now_ns + budget + 1);
  }
}

uint64_t Sender::BudgetDueNs() {
  const uint64_t budget = conn_.retry_budget_ns();
  if (budget == 0) return UINT64_MAX;
  const uint64_t s = BudgetHead();
  return s == tail_ ? UINT64_MAX : MsgAt(s).t_budget_ns + budget + 1;
}

bool Sender::HasUnsent() const {
  return retx_head_ < retx_tail_ || tail_retx_any_ || send_from_ < tail_ ||
         resp_head_ < resp_tail_;
}

uint64_t Sender::NextDueNs(uint64_t now_ns) {
  // Guest completions waiting for room in the virtual CQ's ring: the
  // guest's poll wakes nobody, so every turn tries again.
  if (head_ < tail_ && MsgAt(head_).state != MsgState::kQueued) return 0;
  // DetectLosses and CheckBudget: the next RTO or end of a reordering
  // window, the retry budgets.
  uint64_t due = checks_at_;
  const uint64_t budget = conn_.retry_budget_ns();
  if (budget != 0) {
    // PopResponses: a READ answered past the budget is dropped.
    for (uint64_t s = resp_head_; s < resp_tail_; ++s) {
      const RespRec& r = RespAt(s);
      if (!r.done) due = std::min(due, r.t_first_ns + budget + 1);
    }
  }
  // Pacing: something waits to be sent while the window and the data QP
  // have room. Anything else that holds a send (the window, credits, the
  // tail rule, a READ or an atomic before it, the peer's 64 MIDs) ends
  // with an ACK, a loss (above) or a completion, each of which wakes.
  if (HasUnsent() && CanTransmit() && inflight_bytes_ < window_.cwnd() &&
      !PaceOpen(now_ns)) {
    due = std::min(due, last_send_ns_ + window_.PacingIntervalNs(
                                            rtt_.srtt(), last_send_bytes_));
  }
  return due;
}

uint32_t Sender::ReplayNative(Rnic& lower, RnicQp qp) {
  uint32_t refused = 0;
  for (uint64_t s = head_; s < tail_; ++s) {
    const Msg& m = MsgAt(s);
    SendWr w;
    w.wr_id = m.wr_id;
    w.opcode = m.op;
    w.imm_data = m.imm;
    w.send_flags = m.send_flags & ~uint32_t{kSendInline};
    w.remote_addr = m.remote_addr;
    w.rkey = m.rkey;
    w.compare_add = m.compare_add;
    w.swap = m.swap;
    w.num_sge = m.num_sge;
    std::copy_n(m.sge.begin(), m.num_sge, w.sge.begin());
    Status st = Status::kOk;
    if (lower.PostSend(qp, std::span(&w, 1), &st) != 1) ++refused;
  }
  head_ = tail_;
  return refused;
}

}  // namespace vrdma::reliable
