// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Which transmissions of one direction of a virtual QP are lost
// (docs/reliability.md §4.4), RACK-like so that reordering is not loss: a
// transmission is lost when one sent after it (a larger gseq) was
// acknowledged and now - t_sent > srtt + srtt / 4 (no srtt yet: only the
// RTO), or when its own RTO expired: now >= max(t_sent, the last ACK that
// acknowledged anything) + rto, the rto given at OnSent (Rto::TimeoutNs
// with its chunk's consecutive expiries). As TCP restarts its timer at
// every ACK of new data (RFC 6298 §5.3), the RTO measures a silence, not
// a queue: a burst the lower RNIC serializes acknowledges its chunks one
// after another, long past the last one's send plus its RTO, and a loss
// among them is RACK's to find. Entries
// live in a ring sized at construction (the chunk table's 256), in gseq
// order: gseqs are given consecutively, one per transmission (§3.4), so an
// ACK finds its entry in O(1); an entry leaves the ring once it and every
// older one were acknowledged or reported lost. Each lost entry is reported
// once; its retransmission is a new entry. DetectLost scans the ring only
// when something may be lost: an RTO may have come (a lower bound of every
// entry's, kept as they are sent) or the oldest entry in flight is lost to
// RACK (transmissions are sent in time order, so none after it is when it
// is not). Pure: no clock, no allocation after construction.
#ifndef VRDMA_POLICY_RELIABILITY_LOSS_DETECTOR_H_
#define VRDMA_POLICY_RELIABILITY_LOSS_DETECTOR_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace vrdma::policy::reliability {

struct LossDetectorParams {
  uint32_t capacity = 256;       // §4.1: chunks_in_flight
  uint32_t reorder_divisor = 4;  // reordering window srtt / 4
};

enum class LossReason : uint8_t { kRack, kRto };

struct Lost {
  uint64_t gseq = 0;
  LossReason reason = LossReason::kRack;
  uint32_t expiries = 0;  // consecutive RTO expiries before this one
  // The expiries its retransmissions carry: one more after an RTO, none
  // after a loss detected by a later ACK (§4.4's doubling).
  [[nodiscard]] uint32_t next_expiries() const {
    return reason == LossReason::kRto ? expiries + 1 : 0;
  }
};

enum class SentResult : uint8_t { kOk, kFull, kNotNext };

enum class AckedResult : uint8_t {
  kAcked,        // was in flight
  kNotInFlight,  // already acknowledged or reported lost (a late ACK)
  kNeverSent,    // beyond every gseq sent
};

class LossDetector {
 public:
  // first_gseq: the gseq of this direction's first transmission.
  explicit LossDetector(uint64_t first_gseq,
                        const LossDetectorParams& params = {})
      : p_(params),
        ring_(std::bit_ceil(std::max<uint32_t>(params.capacity, 1))),
        head_(first_gseq),
        next_(first_gseq) {}

  // A transmission posted at t_sent_ns whose timeout is rto_ns; expiries:
  // consecutive RTO expiries of the chunk it retransmits (0: first
  // transmission). gseq must be the next one; kFull when the ring is.
  [[nodiscard]] SentResult OnSent(uint64_t gseq, uint64_t t_sent_ns,
                                  uint64_t rto_ns, uint32_t expiries) {
    if (gseq != next_) return SentResult::kNotNext;
    if (next_ - head_ >= std::max<uint32_t>(p_.capacity, 1)) {
      return SentResult::kFull;
    }
    ring_[Slot(gseq)] = Entry{t_sent_ns, rto_ns, expiries, State::kInFlight};
    ++next_;
    rto_floor_ns_ =
        std::min(rto_floor_ns_, std::max(t_sent_ns, progress_ns_) + rto_ns);
    in_time_order_ = in_time_order_ && t_sent_ns >= last_sent_ns_;
    last_sent_ns_ = t_sent_ns;
    return SentResult::kOk;
  }

  // One ACK entry naming gseq. Only an entry in flight counts: an ACK of
  // one already reported lost changes nothing here (its retransmission is
  // in flight; the caller's chunk table knows its units arrived).
  [[nodiscard]] AckedResult OnAcked(uint64_t gseq) {
    if (gseq >= next_) return AckedResult::kNeverSent;
    if (gseq < head_) return AckedResult::kNotInFlight;
    Entry& e = ring_[Slot(gseq)];
    if (e.state != State::kInFlight) return AckedResult::kNotInFlight;
    e.state = State::kAcked;
    if (!any_acked_ || gseq > highest_acked_) highest_acked_ = gseq;
    any_acked_ = true;
    Pop();
    return AckedResult::kAcked;
  }

  // An ACK at now_ns acknowledged something in flight: every RTO restarts
  // from it.
  void OnProgress(uint64_t now_ns) {
    progress_ns_ = std::max(progress_ns_, now_ns);
  }

  // The transmissions lost at now_ns, oldest first, at most out.size() of
  // them (the rest on the next call); returns how many were written.
  [[nodiscard]] size_t DetectLost(uint64_t now_ns, uint64_t srtt_ns,
                                  std::span<Lost> out) {
    if (head_ == next_ || out.empty()) return 0;
    if (now_ns < rto_floor_ns_ && in_time_order_ &&
        !RackLost(head_, ring_[Slot(head_)], now_ns, srtt_ns)) {
      return 0;  // Pop() left head_ in flight: nothing is lost yet
    }
    size_t n = 0;
    uint64_t floor = UINT64_MAX;
    uint64_t g = head_;
    for (; g < next_ && n < out.size(); ++g) {
      Entry& e = ring_[Slot(g)];
      if (e.state != State::kInFlight) continue;
      std::optional<LossReason> why;
      if (now_ns >= RtoAt(e)) {
        why = LossReason::kRto;
      } else if (RackLost(g, e, now_ns, srtt_ns)) {
        why = LossReason::kRack;
      }
      if (!why) {
        floor = std::min(floor, RtoAt(e));
        continue;
      }
      e.state = State::kLost;
      out[n++] = Lost{g, *why, e.expiries};
    }
    // Entries not visited (out was full): the next call scans again.
    rto_floor_ns_ = g < next_ ? 0 : floor;
    Pop();
    return n;
  }

  // When DetectLost will next find something if no ACK comes first: the
  // earliest RTO, or reordering window end; nullopt with nothing in flight.
  [[nodiscard]] std::optional<uint64_t> NextDeadlineNs(uint64_t srtt_ns) const {
    std::optional<uint64_t> at;
    for (uint64_t g = head_; g < next_; ++g) {
      const Entry& e = ring_[Slot(g)];
      if (e.state != State::kInFlight) continue;
      uint64_t t = RtoAt(e);
      if (srtt_ns > 0 && any_acked_ && g < highest_acked_) {
        t = std::min(t, e.t_sent_ns + ReorderWindowNs(srtt_ns) + 1);
      }
      at = std::min(at.value_or(t), t);
    }
    return at;
  }

  // Before this, DetectLost(now, srtt_ns) finds nothing and changes
  // nothing (its shortcut holds): the earliest RTO the detector knows of
  // and the oldest entry's end of its reordering window; 0 (at once) when
  // it must scan; UINT64_MAX with nothing in flight. A lower bound, O(1):
  // the caller's timer (docs/reliability.md §2.1 "Turns").
  [[nodiscard]] uint64_t NextCheckNs(uint64_t srtt_ns) const {
    if (head_ == next_) return UINT64_MAX;
    if (!in_time_order_) return 0;
    uint64_t at = rto_floor_ns_;
    if (srtt_ns > 0 && any_acked_ && head_ < highest_acked_) {
      at = std::min(at,
                    ring_[Slot(head_)].t_sent_ns + ReorderWindowNs(srtt_ns) + 1);
    }
    return at;
  }

  // srtt + srtt / 4: how long past its send a reordered entry may arrive.
  [[nodiscard]] uint64_t ReorderWindowNs(uint64_t srtt_ns) const {
    return srtt_ns + srtt_ns / std::max<uint32_t>(p_.reorder_divisor, 1);
  }

  // Entries in the ring (from the oldest not yet done to the newest sent).
  [[nodiscard]] uint64_t occupied() const { return next_ - head_; }
  [[nodiscard]] uint64_t next_gseq() const { return next_; }

 private:
  enum class State : uint8_t { kInFlight, kAcked, kLost };
  struct Entry {
    uint64_t t_sent_ns = 0;
    uint64_t rto_ns = 0;
    uint32_t expiries = 0;
    State state = State::kAcked;
  };

  // The ring's size is a power of two: a slot is a mask, not a division.
  size_t Slot(uint64_t gseq) const { return gseq & (ring_.size() - 1); }
  uint64_t RtoAt(const Entry& e) const {
    return std::max(e.t_sent_ns, progress_ns_) + e.rto_ns;
  }
  bool RackLost(uint64_t g, const Entry& e, uint64_t now_ns,
                uint64_t srtt_ns) const {
    return srtt_ns > 0 && any_acked_ && g < highest_acked_ &&
           now_ns > e.t_sent_ns &&
           now_ns - e.t_sent_ns > ReorderWindowNs(srtt_ns);
  }
  void Pop() {
    while (head_ < next_ && ring_[Slot(head_)].state != State::kInFlight) {
      ++head_;
    }
  }

  LossDetectorParams p_;
  std::vector<Entry> ring_;  // sized once: capacity rounded up to 2^k
  uint64_t head_;            // oldest gseq not yet acked or lost
  uint64_t next_;            // the next gseq to be sent
  bool any_acked_ = false;
  uint64_t highest_acked_ = 0;
  uint64_t progress_ns_ = 0;  // the last ACK that acknowledged anything
  // No entry in flight has its RTO before this (an entry's RTO only moves
  // later, with progress_ns_); exact after a whole scan.
  uint64_t rto_floor_ns_ = UINT64_MAX;
  // Every entry was sent no earlier than the one before it (false once a
  // test's clock went back: then every call scans).
  bool in_time_order_ = true;
  uint64_t last_sent_ns_ = 0;
};

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_LOSS_DETECTOR_H_
