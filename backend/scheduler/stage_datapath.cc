// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The stage's data path: WRs enter a flow's FIFO (Submit), leave it as
// whole WRs or pieces when the flow's controls allow (Plan, PostPlanned),
// and are reported to the owner when the RNIC completed their last piece
// (OnCompletion, Retire). Nothing here allocates. docs/scheduler.md.
#include <algorithm>
#include <cstring>

#include "backend/scheduler/split.h"
#include "backend/scheduler/stage.h"

namespace vrdma::sched {

Stage::Slot Stage::Reserve(FlowId flow) {
  FlowStorage* f = Get(flow);
  if (f == nullptr || f->q_count == f->capacity()) return Slot{};
  const uint32_t idx = f->at(f->q_count);
  return Slot{&f->wrs[idx],
              f->inline_arena.data() + size_t{idx} * f->spec.max_inline};
}

void Stage::Commit(FlowId flow, uint32_t tag, const policy::WrInfo& info,
                   Nanos now) {
  FlowStorage& f = *Get(flow);  // Reserve succeeded for it
  now_ = std::max(now_, now);
  const uint32_t idx = f.at(f.q_count);
  QueueEntry& e = f.entries[idx];
  e.tag = tag;
  e.total = info.bytes;
  e.offset = 0;
  e.chunk = 0;
  e.described = 0;
  e.arrival = now_;
  e.info = info;
  e.info.flow = f.id;
  e.info.tenant = f.spec.tenant;
  e.marker = false;
  ++f.q_count;
  policy::FlowAccount& a = f.account;
  ++a.wrs_arrived;
  a.bytes_arrived += e.total;
  ++a.queued_wrs;
  a.queued_bytes += e.total;
  policy_.OnArrival(now_, e.info);
  MakeReady(f);
}

bool Stage::Submit(FlowId flow, const SendWr& wr, uint32_t tag,
                   const policy::WrInfo& info, Nanos now) {
  const Slot slot = Reserve(flow);
  if (slot.wr == nullptr) return false;
  CopyWr(wr, slot.wr);
  if ((wr.send_flags & kSendInline) && wr.inline_len > 0) {
    // The owner checked inline_len against the QP's max_inline.
    const uint32_t n =
        std::min<uint32_t>(wr.inline_len, Get(flow)->spec.max_inline);
    std::memcpy(slot.inline_buf, wr.inline_data, n);
    slot.wr->inline_data = slot.inline_buf;
    slot.wr->inline_len = static_cast<uint16_t>(n);
  }
  policy::WrInfo i = info;
  i.bytes = static_cast<uint32_t>(slot.wr->total_length());
  Commit(flow, tag, i, now);
  return true;
}

bool Stage::SubmitMarker(FlowId flow, uint32_t tag, WcStatus status,
                         Nanos now) {
  FlowStorage* fp = Get(flow);
  if (fp == nullptr) return false;
  FlowStorage& f = *fp;
  now_ = std::max(now_, now);
  if (f.q_count == f.capacity()) return false;
  QueueEntry& e = f.entries[f.at(f.q_count)];
  e = QueueEntry{};
  e.tag = tag;
  e.arrival = now_;
  e.marker = true;
  e.marker_status = status;
  e.info.flow = f.id;
  e.info.tenant = f.spec.tenant;
  ++f.q_count;
  ++f.account.wrs_arrived;
  ++f.account.queued_wrs;
  MakeReady(f);
  return true;
}

void Stage::MakeReady(FlowStorage& f) {
  if (f.q_count > 0 && !f.failed) ready_.PushBack(&f);
}

void Stage::NoteBlocked(FlowStorage& f, bool blocked) {
  if (blocked == f.blocked) return;
  if (blocked) {
    f.blocked_since = now_;
  } else {
    f.account.held_ns += now_ - std::min(now_, f.blocked_since);
  }
  f.blocked = blocked;
}

bool Stage::Run(Nanos now) {
  now_ = std::max(now_, now);
  bool did = false;
  if (timers_.size() > 0) {
    timers_.Advance(now_, [&](TimerWheel::Entry* e) {
      FireTimer(e);
      did = true;
    });
  }
  PollOwnCq();
  for (FlowStorage* f = ready_.front(); f != nullptr;) {
    FlowStorage* next = decltype(ready_)::next(f);
    did |= ServeFlow(*f);
    f = next;
  }
  return did;
}

void Stage::Wake(FlowId flow) {
  if (FlowStorage* f = Get(flow)) MakeReady(*f);
}

bool Stage::Kick(FlowId flow, Nanos now) {
  FlowStorage* f = Get(flow);
  if (f == nullptr) return false;
  now_ = std::max(now_, now);
  return ServeFlow(*f);
}

Stage::Stop Stage::PlanNative(FlowStorage& f, uint32_t* count) {
  // The default controls (native RDMA, the pass-through policy, PeRF's
  // bypassed tenants): every WR whole, in order, as the records allow.
  const uint32_t ring = static_cast<uint32_t>(f.records.size());
  uint32_t unretired = f.unretired();
  uint32_t since_signal = f.since_signal;
  uint32_t n = 0;
  Stop stop = Stop::kEmpty;
  for (uint32_t i = 0; i < f.q_count; ++i) {
    if (n == kMaxPass) {
      stop = Stop::kPassFull;
      break;
    }
    const uint32_t idx = f.at(i);
    QueueEntry& e = f.entries[idx];
    SendWr& wr = f.wrs[idx];
    if (e.marker) {
      stop = Stop::kMarker;
      break;
    }
    if (unretired + 1 > ring) {
      stop = Stop::kRecords;
      break;
    }
    if (ConsumesReceive(wr.opcode) && e.described == 0) {
      ReceivePiece rp;
      rp.total = rp.length = e.total;
      rp.lands_in_buffer = wr.opcode != WrOpcode::kRdmaWriteWithImm;
      rp.remote_qpn = wr.remote_qpn;
      rp.qpn = f.spec.qp.qpn;
      rp.credited = holds_sends_;
      if (!owner_.PrepareReceive(f.spec.owner, rp)) {
        stop = Stop::kReceiver;
        break;
      }
      e.described = 1;
    }
    const bool signaled = e.info.signaled && SignalGuestWr(f, since_signal);
    const bool forced = !signaled && since_signal + 1 >= ring / 2;
    since_signal = signaled || forced ? 0 : since_signal + 1;
    Emit& em = emits_[n++];
    em.wr = &wr;
    em.entry = i;
    em.offset = 0;
    em.length = e.total;
    em.completes_entry = true;
    em.flags = static_cast<uint8_t>(
        kRecLast | (signaled || forced ? kRecRnicSignaled : 0) |
        (forced ? kRecForced : 0));
    ++unretired;
  }
  *count = n;
  return stop;
}

Stage::Stop Stage::Plan(FlowStorage& f, uint32_t* count) {
  const policy::FlowControl& c = f.control;
  if (f.native && f.release_at <= now_ &&
      (f.q_count == 0 || f.entries[f.at(0)].offset == 0)) {
    const Stop stop = PlanNative(f, count);
    FinishPlan(f, stop, count);
    return stop;
  }
  const uint32_t ring = static_cast<uint32_t>(f.records.size());
  uint32_t n = 0;
  uint32_t scratch = 0;
  uint64_t out_bytes = f.account.outstanding_bytes;
  uint32_t out_pieces = f.account.outstanding_pieces;
  uint32_t unretired = f.unretired();
  int64_t credit_bytes = f.credit_bytes;
  int64_t credit_pieces = f.credit_pieces;
  uint32_t since_signal = f.since_signal;
  uint64_t bytes_since = f.bytes_since_signal;
  uint32_t i = 0;  // FIFO position of the entry being planned
  uint32_t offset = f.q_count > 0 ? f.entries[f.at(0)].offset : 0;
  // A piece, its zero-count WAITs and a pause WAIT must fit an empty send
  // queue, an empty record ring and one pass, or the flow could never post
  // again (PeRF's sub_msg_size / zero_wait_unit easily asks for more WAITs
  // than a shallow QP has slots): fewer switch points, never a stuck flow.
  const uint32_t max_waits = std::min({uint32_t{c.interrupt_waits},
                                       std::max(f.spec.rnic_depth, 2u) - 2, ring - 2,
                                       kMaxPass - 2});
  Stop stop = Stop::kEmpty;
  for (;;) {
    if (i >= f.q_count) break;
    if (n + 1 + max_waits > kMaxPass) {
      stop = Stop::kPassFull;
      break;
    }
    const uint32_t idx = f.at(i);
    QueueEntry& e = f.entries[idx];
    SendWr& wr = f.wrs[idx];
    if (e.marker) {
      stop = Stop::kMarker;
      break;
    }
    if (c.held && f.rnic_ticket == 0) {
      stop = Stop::kHeld;
      break;
    }
    if (f.wait_pending && n == 0) {
      // Paused on the RNIC: the WAIT for its ticket goes first; the work
      // behind it waits in the RNIC until the ticket is released.
      SendWr& ws = scratch_[scratch];
      ws = SendWr{};
      ws.opcode = WrOpcode::kWait;
      ws.wait_cq = pc_.pcc;
      ws.wait_index = f.rnic_ticket;
      Emit& we = emits_[n++];
      we = Emit{};
      we.wr = &scratch_[scratch++];
      we.entry = i;
      we.flags = kRecControl | kRecPause;
      ++unretired;
      ++since_signal;
    }
    if (f.release_at > now_) {
      stop = Stop::kPaced;
      break;
    }
    // The piece: the whole WR, or the next chunk of it, in whole granules
    // of the RNIC's. A SEND's chunk is fixed by its first piece (the
    // receiver was told its slices).
    uint32_t chunk = e.chunk;
    if (chunk == 0 && c.chunk_bytes > 0 && e.total > c.chunk_bytes &&
        Splittable(wr, f.spec.type, f.reassembles)) {
      chunk = PieceBytes(c.chunk_bytes, rnic_.PieceGranule(f.spec.qp));
    }
    const bool split = chunk != 0;
    const uint32_t length = split ? std::min(e.total - offset, chunk)
                                  : e.total;
    const bool last = offset + length == e.total;
    const uint32_t waits = split && !last ? max_waits : 0;
    if (c.gated && (credit_pieces <= 0 || credit_bytes <= 0)) {
      stop = Stop::kCredit;
      break;
    }
    if ((c.window_bytes != 0 && out_bytes > 0 &&
         out_bytes + length > c.window_bytes) ||
        (c.window_wrs != 0 && out_pieces >= c.window_wrs)) {
      stop = Stop::kWindow;
      break;
    }
    if (unretired + 1 + waits > ring) {
      stop = Stop::kRecords;
      break;
    }
    // The receiving side learns of every receive-consuming piece before
    // it is posted, once (a refused post is not described again).
    const uint32_t piece = split ? offset / chunk : 0;
    if (ConsumesReceive(wr.opcode) && piece >= e.described) {
      const bool write_imm = wr.opcode == WrOpcode::kRdmaWriteWithImm;
      if (!write_imm || last) {
        ReceivePiece rp;
        rp.offset = write_imm ? 0 : offset;
        rp.length = write_imm ? e.total : length;
        rp.total = e.total;
        rp.first = write_imm || offset == 0;
        rp.last = last;
        rp.lands_in_buffer = !write_imm;
        rp.remote_qpn = wr.remote_qpn;
        rp.qpn = f.spec.qp.qpn;
        rp.credited = holds_sends_;
        if (!owner_.PrepareReceive(f.spec.owner, rp)) {
          stop = Stop::kReceiver;
          break;
        }
      }
      e.described = piece + 1;
    }
    if (split) e.chunk = chunk;

    Emit& em = emits_[n++];
    if (split) {
      BuildPiece(wr, offset, length, last, &scratch_[scratch]);
      em.wr = &scratch_[scratch++];
    } else {
      em.wr = &wr;
    }
    em.entry = i;
    em.offset = offset;
    em.length = length;
    em.completes_entry = last;
    bool signaled = last && e.info.signaled && SignalGuestWr(f, since_signal);
    bool forced = false;
    if (!signaled) {
      // Enough signals that the records always retire and the windows
      // always reopen (docs/scheduler.md, "Signals").
      forced = since_signal + 1 >= ring / 2 ||
               (c.window_wrs != 0 &&
                since_signal + 1 >= std::max<uint32_t>(1, c.window_wrs / 2)) ||
               (c.window_bytes != 0 &&
                bytes_since + length >= c.window_bytes / 2);
    }
    em.flags = static_cast<uint8_t>(
        (last ? kRecLast : 0) | (split ? kRecSplit : 0) |
        (signaled || forced ? kRecRnicSignaled : 0) | (forced ? kRecForced : 0));
    if (signaled || forced) {
      since_signal = 0;
      bytes_since = 0;
    } else {
      ++since_signal;
      bytes_since += length;
    }
    out_bytes += length;
    ++out_pieces;
    ++unretired;
    credit_bytes -= length;
    --credit_pieces;
    for (uint16_t w = 0; w < waits; ++w) {
      // Zero-count WAIT: completes at once and makes the RNIC serve
      // another QP before the next piece (PeRF §3.5.2).
      SendWr& ws = scratch_[scratch];
      ws = SendWr{};
      ws.opcode = WrOpcode::kWait;
      ws.wait_cq = f.spec.send_cq;
      ws.wait_index = 0;
      Emit& we = emits_[n++];
      we = Emit{};
      we.wr = &scratch_[scratch++];
      we.entry = i;
      we.flags = kRecControl;
      ++unretired;
      ++since_signal;
    }
    if (last) {
      ++i;
      offset = 0;
    } else {
      offset += length;
    }
  }
  *count = n;
  FinishPlan(f, stop, count);
  return stop;
}

void Stage::FinishPlan(FlowStorage& f, Stop stop, uint32_t* count) {
  const policy::FlowControl& c = f.control;
  const uint32_t ring = static_cast<uint32_t>(f.records.size());
  uint32_t n = *count;
  // When the flow stops for a control, or its policy watches what it has
  // outstanding, the last piece posted must come back visibly.
  const bool watched = c.window_bytes != 0 || c.window_wrs != 0 || c.gated ||
                       c.held;
  // So must the last of a plan in which a WR the guest signaled went
  // unsignaled (adaptive signaling): its CQE waits for a later signal.
  if (n > 0 && (((stop != Stop::kEmpty || watched) && stop != Stop::kPassFull) ||
                f.signal_owed)) {
    for (uint32_t k = n; k-- > 0;) {
      if (emits_[k].flags & kRecControl) continue;
      if (!(emits_[k].flags & kRecRnicSignaled)) {
        emits_[k].flags |= kRecRnicSignaled | kRecForced;
      }
      break;
    }
  }
  // A marker waits for the WRs before it. If the newest one on the RNIC
  // will not complete visibly, a signaled zero-length WRITE (no key, no
  // memory) behind it brings their completion back.
  if (stop == Stop::kMarker && n == 0 && f.unretired() > 0 &&
      f.spec.type != QpType::kUd &&
      !(f.records[(f.rec_tail - 1) & f.rec_mask].flags & kRecRnicSignaled) &&
      f.unretired() < ring) {
    SendWr& s = scratch_[0];  // nothing else was planned
    s = SendWr{};
    s.opcode = WrOpcode::kRdmaWrite;
    Emit& em = emits_[n++];
    em = Emit{};
    em.wr = &s;
    em.flags = kRecControl | kRecRnicSignaled | kRecForced;
  }
  *count = n;
}

void Stage::CommitEmit(FlowStorage& f, const Emit& em) {
  Record& r = f.records[f.rec_tail & f.rec_mask];
  r.flags = em.flags;
  r.bytes = em.length;
  if (!(em.flags & kRecControl)) {
    QueueEntry& e = f.entries[f.at(0)];
    r.tag = e.tag;
    policy::FlowAccount& a = f.account;
    ++a.pieces_posted;
    a.bytes_posted += em.length;
    if (f.paced) a.bytes_paced += em.length;
    a.queued_bytes -= em.length;
    ++a.outstanding_pieces;
    a.outstanding_bytes += em.length;
    if (f.control.gated) {  // credit means nothing to a flow not gated
      f.credit_bytes -= em.length;
      --f.credit_pieces;
    }
    if (em.completes_entry) {
      if (em.flags & kRecSplit) ++a.wrs_split;
      r.wr_bytes = e.total;
      r.arrival = e.arrival;
      r.info = e.info;
      f.q_head = f.at(1);
      --f.q_count;
      --a.queued_wrs;
    } else {
      e.offset += em.length;
    }
  }
  if (em.flags & kRecPause) f.wait_pending = false;
  r.posted = now_;
  if (em.flags & kRecRnicSignaled) {
    f.since_signal = 0;
    f.bytes_since_signal = 0;
    ++f.signaled_outstanding;
    ++signaled_outstanding_;
    ++rnic_signals_;
    f.signal_owed = false;
  } else {
    ++f.since_signal;
    f.bytes_since_signal += em.length;
  }
  ++f.rec_tail;
}

uint32_t Stage::PostPlanned(FlowStorage& f, uint32_t count, Status* refused) {
  uint32_t posted = 0;
  while (posted < count) {
    // A run: emits whose WRs are adjacent in memory (FIFO slots, or
    // pieces and WAITs built one after another) go in one post list.
    uint32_t run = 1;
    while (posted + run < count &&
           emits_[posted + run].wr == emits_[posted + run - 1].wr + 1) {
      ++run;
    }
    for (uint32_t k = 0; k < run; ++k) {
      const Emit& em = emits_[posted + k];
      SendWr* w = em.wr;
      if (em.flags & kRecRnicSignaled) {
        w->send_flags |= kSendSignaled;
      } else {
        w->send_flags &= ~uint32_t{kSendSignaled};
      }
      // Earlier runs are committed: rec_tail is this run's first record.
      w->wr_id = f.spec.cookie_base | ((f.rec_tail + k) & kRecordMask);
    }
    Status err = Status::kOk;
    const int n = rnic_.PostSend(
        f.spec.qp, std::span<const SendWr>(emits_[posted].wr, run), &err);
    const uint32_t accepted = n > 0 ? static_cast<uint32_t>(n) : 0;
    for (uint32_t k = 0; k < accepted; ++k) CommitEmit(f, emits_[posted + k]);
    posted += accepted;
    if (accepted < run) {
      *refused = err == Status::kOk ? Status::kIoError : err;
      break;
    }
  }
  return posted;
}

bool Stage::ServeFlow(FlowStorage& f) {
  if (f.failed || f.q_count == 0) {
    ready_.Remove(&f);
    NoteBlocked(f, false);
    return false;
  }
  uint32_t count = 0;
  const Stop stop = Plan(f, &count);
  if (stop == Stop::kMarker && count == 0 &&
      (f.unretired() == 0 || f.spec.type == QpType::kUd)) {
    // Every WR before the marker is done (on UD: posted; a UD send
    // cannot be waited for without a signal): the marker fails now.
    QueueEntry& e = f.entries[f.at(0)];
    const uint32_t tag = e.tag;
    const WcStatus status = e.marker_status;
    f.q_head = f.at(1);
    --f.q_count;
    --f.account.queued_wrs;
    ++f.account.wrs_completed;
    ready_.Remove(&f);
    NoteBlocked(f, false);
    owner_.OnMarkerReached(f.spec.owner, tag, status);  // last: may end f's work
    return true;
  }
  Status refused = Status::kOk;
  const uint32_t posted = count > 0 ? PostPlanned(f, count, &refused) : 0;
  if (posted > 0) {
    NoteBlocked(f, false);
    f.paced = false;  // what waited for the release time went
  }
  if (posted < count) {
    if (refused == Status::kNoResource) return posted > 0;  // retry next turn
    // The RNIC refused for another reason (its QP left RTS).
    ready_.Remove(&f);
    owner_.OnPostRefused(f.spec.owner, f.entries[f.at(0)].tag, refused);
    return true;
  }
  switch (stop) {
    case Stop::kPassFull:
      break;  // stays ready
    case Stop::kEmpty:
      ready_.Remove(&f);
      break;
    case Stop::kCredit:
      ready_.Remove(&f);
      NoteBlocked(f, true);
      if (!f.credit_asked) {
        f.credit_asked = true;
        policy_.OnCreditNeeded(now_, f.id);  // may Grant: MakeReady again
      }
      break;
    case Stop::kPaced:
      f.paced = true;
      [[fallthrough]];
    case Stop::kHeld:
    case Stop::kWindow:
      ready_.Remove(&f);
      NoteBlocked(f, true);
      break;
    case Stop::kRecords:
    case Stop::kMarker:
      ready_.Remove(&f);  // a completion brings it back
      break;
    case Stop::kReceiver:
      ready_.Remove(&f);  // the owner wakes it
      break;
  }
  return posted > 0;
}

void Stage::FinishWr(FlowStorage& f, uint32_t tag, const policy::WrInfo& info,
                     Nanos arrival, WcStatus status, uint32_t byte_len,
                     bool tell_policy) {
  const Nanos latency = now_ - std::min(now_, arrival);
  ++wrs_done_;
  policy::FlowAccount& a = f.account;
  ++a.wrs_completed;
  a.bytes_completed += info.bytes;
  a.latency_sum_ns += latency;
  a.latency_max_ns = std::max(a.latency_max_ns, latency);
  ++a.latency_hist[policy::LatencyBucket(latency)];
  if (tell_policy) {
    policy_.OnCompleted(now_, info, latency, status == WcStatus::kSuccess);
  }
  owner_.OnWrDone(f.spec.owner, tag, status, byte_len);
}

void Stage::Retire(FlowStorage& f, uint32_t upto, WcStatus status,
                   uint32_t byte_len) {
  policy::FlowAccount& a = f.account;
  uint64_t retired_bytes = 0;
  uint32_t retired_pieces = 0;
  while (f.rec_head != upto + 1) {
    const uint32_t seq = f.rec_head++;
    const Record& r = f.records[seq & f.rec_mask];
    if (r.flags & kRecRnicSignaled) {
      --f.signaled_outstanding;
      --signaled_outstanding_;
    }
    if (r.flags & kRecControl) continue;
    --a.outstanding_pieces;
    a.outstanding_bytes -= r.bytes;
    retired_bytes += r.bytes;
    ++retired_pieces;
    // Records before the completed one completed silently and well.
    if (seq == upto && status != WcStatus::kSuccess) {
      if (f.failed_reported && r.tag == f.failed_tag) continue;  // said once
      f.failed = true;
      if (!(r.flags & kRecLast)) {
        // A middle piece failed: its WR fails now; its other pieces are
        // flushed and not reported again.
        f.failed_reported = true;
        f.failed_tag = r.tag;
      }
      FinishWr(f, r.tag, r.info, r.arrival, status, 0);
      continue;
    }
    if (!(r.flags & kRecLast)) continue;
    if (f.failed_reported && r.tag == f.failed_tag) continue;  // said once
    const uint32_t len =
        seq == upto && !(r.flags & kRecSplit) ? byte_len : r.wr_bytes;
    FinishWr(f, r.tag, r.info, r.arrival, WcStatus::kSuccess, len);
  }
  if (retired_pieces > 0) policy_.OnRetired(now_, f.id, retired_bytes, retired_pieces);
}

void Stage::OnCompletion(FlowId flow, const Completion& c, Nanos now) {
  FlowStorage* fp = Get(flow);
  if (fp == nullptr) {
    ++stale_completions_;
    return;
  }
  FlowStorage& f = *fp;
  now_ = std::max(now_, now);
  const uint32_t bits = static_cast<uint32_t>(c.wr_id & kRecordMask);
  const uint32_t unretired = f.unretired();
  // The newest sequence number with these low bits.
  const uint32_t seq =
      f.rec_tail - 1 - ((f.rec_tail - 1 - bits) & static_cast<uint32_t>(kRecordMask));
  if (unretired == 0 || seq - f.rec_head >= unretired) {
    ++stale_completions_;  // retired already (flushed, reset) or bogus
    return;
  }
  if (options_.adaptive_signaling && c.status == WcStatus::kSuccess) {
    const Record& r = f.records[seq & f.rec_mask];
    if (!(r.flags & kRecControl)) AdaptSignalPeriod(f, r);
  }
  Retire(f, seq, c.status, c.byte_len);
  MakeReady(f);
}

bool Stage::SignalGuestWr(FlowStorage& f, uint32_t since_signal) {
  if (!options_.adaptive_signaling || since_signal + 1 >= f.signal_period) {
    return true;
  }
  f.signal_owed = true;
  return false;
}

void Stage::AdaptSignalPeriod(FlowStorage& f, const Record& r) {
  // A software RNIC completes within the data path's turn: below a
  // microsecond the reference means nothing, and signals cost more than
  // they tell.
  constexpr Nanos kLatencyFloor = 1000;
  const Nanos took = now_ - std::min(now_, r.posted);
  if (f.signal_period == 1) {
    f.normal_latency =
        f.normal_latency == 0 ? took : (7 * f.normal_latency + took) / 8;
  }
  const Nanos normal = std::max(f.normal_latency, kLatencyFloor);
  const uint32_t max_period =
      std::max<uint32_t>(1, static_cast<uint32_t>(f.records.size() / 4));
  // Conservatively up, radically down (TPL, section 4).
  if (took * 10 < normal * 18) {
    f.signal_period = std::min(f.signal_period + 1, max_period);
  } else if (took * 10 > normal * 25) {
    f.signal_period = std::max<uint32_t>(1, f.signal_period / 2);
  }
}

void Stage::EndFlowWork(FlowId flow, policy::FlowEnd how, Nanos now) {
  FlowStorage* fp = Get(flow);
  if (fp == nullptr) return;
  FlowStorage& f = *fp;
  now_ = std::max(now_, now);
  const bool report = how == policy::FlowEnd::kError;
  // What the RNIC still held, then what never left the FIFO, oldest first.
  while (f.rec_head != f.rec_tail) {
    const Record& r = f.records[f.rec_head++ & f.rec_mask];
    if ((r.flags & kRecControl) || !(r.flags & kRecLast) || !report) continue;
    if (f.failed_reported && r.tag == f.failed_tag) continue;
    FinishWr(f, r.tag, r.info, r.arrival, WcStatus::kWrFlushErr, 0);
  }
  while (f.q_count > 0) {
    const QueueEntry e = f.entries[f.at(0)];
    f.q_head = f.at(1);
    --f.q_count;
    if (!report || (f.failed_reported && e.tag == f.failed_tag)) continue;
    FinishWr(f, e.tag, e.info, e.arrival, WcStatus::kWrFlushErr, 0,
             /*tell_policy=*/!e.marker);
  }
  // Whatever was not reported was dropped (reset, destroy): it left too.
  policy::FlowAccount& a = f.account;
  a.outstanding_pieces = 0;
  a.outstanding_bytes = 0;
  a.queued_wrs = 0;
  a.queued_bytes = 0;
  a.wrs_completed = a.wrs_arrived;
  signaled_outstanding_ -= f.signaled_outstanding;
  f.signaled_outstanding = 0;
  // A pause WAIT went with the queue: it is posted again if still paused.
  f.wait_pending = f.rnic_ticket != 0;
  f.since_signal = 0;
  f.bytes_since_signal = 0;
  f.failed = false;
  f.failed_reported = false;
  f.credit_asked = false;
  ready_.Remove(&f);
  NoteBlocked(f, false);
  policy_.OnFlowEnded(now_, f.id, how);
}

}  // namespace vrdma::sched
