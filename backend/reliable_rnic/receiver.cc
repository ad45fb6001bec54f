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

}  // namespace

Receiver::Receiver(Connection& conn, const ReceiverParams& params,
                   uint32_t path_mtu)
    : conn_(conn), p_(params), trigger_(path_mtu, 0, params.trigger) {}

void Receiver::Start(uint32_t first_mid) {
  deliv_mid_ = first_mid;
  trigger_ = AckTrigger(conn_.init().attr.path_mtu_bytes, first_mid, p_.trigger);
  npending_ = 0;
  for (Record& r : ring_) r = Record{};
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
  r = Record{};
  r.used = true;
  r.mid = mid;
  return &r;
}

bool Receiver::Covered(const Record& r, Range u) {
  for (uint32_t i = 0; i < r.nranges; ++i) {
    if (r.ranges[i].begin <= u.begin && u.end <= r.ranges[i].end) return true;
  }
  return false;
}

bool Receiver::Insert(Record& r, Range u) const {
  // Ranges are sorted and disjoint, not touching; merge u with every one
  // it overlaps or touches.
  std::array<Range, kMaxRanges + 1> out;
  uint32_t n = 0;
  bool placed = false;
  for (uint32_t i = 0; i < r.nranges; ++i) {
    const Range& x = r.ranges[i];
    if (x.end < u.begin) {
      out[n++] = x;
    } else if (u.end < x.begin) {
      if (!placed) {
        out[n++] = u;
        placed = true;
      }
      out[n++] = x;
    } else {
      u.begin = std::min(u.begin, x.begin);
      u.end = std::max(u.end, x.end);
    }
  }
  if (!placed) out[n++] = u;
  if (n > std::min(p_.max_ranges, kMaxRanges)) return false;
  std::copy_n(out.begin(), n, r.ranges.begin());
  r.nranges = n;
  return true;
}

bool Receiver::Complete(const Record& r) {
  if (!r.len_known) return false;
  const uint32_t units = r.len == 0 ? 1 : UnitsOf(r.len);
  return r.nranges == 1 && r.ranges[0].begin == 0 && r.ranges[0].end == units;
}

void Receiver::Deliver() {
  while (Record* r = Find(deliv_mid_)) {
    if (!Complete(*r)) return;
    r->used = false;
    ++deliv_mid_;
    ++conn_.counters().messages_delivered;
  }
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
  if (WireCheck c = CheckChunk(imm, mid, byte_len, Context(rec))) {
    n.Count(*c);
    if (WireCounterAction(*c) == WireAction::kAckAgain) {
      Arrival dup = arrival;
      dup.duplicate = true;
      Arrived(entry, dup, now_ns);
    }
    return;
  }
  const Range u{imm.off, imm.off + std::max<uint32_t>(units, 1)};
  rec = FindOrMake(mid);
  if (Covered(*rec, u)) {
    n.Count(WireCounter::kRxDuplicate);
    Arrival dup = arrival;
    dup.duplicate = true;
    Arrived(entry, dup, now_ns);
    return;
  }
  if (!Insert(*rec, u)) {
    n.Count(WireCounter::kRxRangesFull);
    return;
  }
  if (imm.last) {
    rec->len_known = true;
    rec->len = uint64_t{imm.off} * kUnitSize + byte_len;
  }
  ++n.chunks_received;
  Deliver();
  Arrived(entry, arrival, now_ns);
}

void Receiver::OnSend(std::span<const uint8_t> bytes, uint64_t now_ns) {
  ReliabilityCounters& n = conn_.counters();
  DaemonHeader h;
  if (WireCheck c = ParseHeader(bytes, &h)) {
    n.Count(*c);
    return;
  }
  if (h.type != HeaderType::kWriteRetx) {
    n.Count(WireCounter::kRxMalformed);  // steps 12-13 carry the others
    return;
  }
  Record* rec = Find(h.mid);
  const bool last = (h.flags & kHdrLast) != 0;
  const Arrival arrival{h.mid, h.off_units, h.data_len > 0 ? 1u : 0u,
                        bytes.size(), last, (h.flags & kHdrHint) != 0,
                        false, false};
  const Pending entry{true, h.gseq, 0, now_ns};
  if (WireCheck c = CheckHeader(h, Context(rec))) {
    n.Count(*c);
    if (WireCounterAction(*c) == WireAction::kAckAgain) {
      Arrival dup = arrival;
      dup.duplicate = true;
      Arrived(entry, dup, now_ns);
    }
    return;
  }
  // §3.6 rx_access_nak: the rkey in the QP's PD, with remote write, the
  // range inside the MR, and the QP's access flags.
  const MrRecord* mr = nullptr;
  if (h.data_len > 0) {
    mr = conn_.mrs().FindByRkey(h.rkey);
    const bool ok =
        mr != nullptr && mr->pd.id == conn_.init().pd.id &&
        (mr->access & kAccessRemoteWrite) != 0 &&
        (conn_.init().attr.access_flags & kAccessRemoteWrite) != 0 &&
        h.remote_addr >= mr->iova &&
        h.remote_addr - mr->iova <= mr->length &&
        h.data_len <= mr->length - (h.remote_addr - mr->iova);
    if (!ok) {
      n.Count(WireCounter::kRxAccessNak);
      Nak(NakCode::kRemoteAccess, h.mid, now_ns);
      return;
    }
  }
  const Range u{h.off_units, h.off_units + 1};
  rec = FindOrMake(h.mid);
  if (Covered(*rec, u)) {
    n.Count(WireCounter::kRxDuplicate);
    Arrival dup = arrival;
    dup.duplicate = true;
    Arrived(entry, dup, now_ns);
    return;
  }
  if (!Insert(*rec, u)) {
    n.Count(WireCounter::kRxRangesFull);
    return;
  }
  // Only while the MID is not delivered (CheckHeader: mid >= deliv_mid).
  if (mr != nullptr) {
    std::memcpy(mr->addr + (h.remote_addr - mr->iova), bytes.data() + kHeaderSize,
                h.data_len);
  }
  if (last) {
    rec->len_known = true;
    rec->len = h.msg_len;
  }
  ++n.retx_copied;
  Deliver();
  Arrived(entry, arrival, now_ns);
}

void Receiver::Arrived(const Pending& p, const Arrival& a, uint64_t now_ns) {
  if (npending_ == kPendingMax && !Flush(now_ns)) return;
  pending_[npending_++] = p;
  if (trigger_.OnArrival(now_ns, a) != AckReason::kNone) Flush(now_ns);
}

void Receiver::Nak(NakCode code, uint32_t mid, uint64_t now_ns) {
  ++conn_.counters().naks_sent;
  Flush(now_ns, static_cast<uint8_t>(code), mid);
}

bool Receiver::Pump(uint64_t now_ns) {
  if (flush_wanted_ || trigger_.OnTimer(now_ns) != AckReason::kNone) {
    Flush(now_ns);
  }
  return npending_ > 0 || flush_wanted_;
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
  trigger_.OnAckSent();
  flush_wanted_ = false;
  return true;
}

}  // namespace vrdma::reliable
