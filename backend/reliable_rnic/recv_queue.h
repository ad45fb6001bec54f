// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// RecvQueue: the guest's receives of an RC QP that may be framed
// (docs/reliability.md §2.1, §2.3; step 12). Once a peer link is attached
// the layer keeps every receive the guest posts to an RC QP without SRQ
// here, from CreateQp on, instead of posting it to the lower RC QP: a
// uc-mode QP's receives are never posted to a lower QP, the Receiver
// fills them by copy. When the QP turns out native (not framed at its RTR,
// or CONNECT_NATIVE) the held receives are posted to the lower RC QP in
// order (ReplayTo) and the queue passes everything through from then on.
//
// Receives are consumed in post order, one per receive-consuming message
// (its rcv_index); each completes (Finish) in that order and is reported
// to the virtual receive CQ's ring in order (Report): one that finds the
// ring full stays here until the engine polled. Sized at CreateQp (a
// control call); Post, Finish, Report allocate nothing.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_RECV_QUEUE_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_RECV_QUEUE_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>

#include "backend/base/status.h"
#include "backend/reliable_rnic/completion_ring.h"
#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

class RecvQueue {
 public:
  struct Entry {
    uint64_t wr_id = 0;
    uint8_t num_sge = 0;
    bool done = false;
    uint64_t length = 0;  // the SGEs' total
    Completion wc{};
  };

  RecvQueue(uint32_t depth, uint32_t max_sge)
      : depth_(std::max<uint32_t>(depth, 1)),
        mask_(std::bit_ceil(depth_) - 1),
        max_sge_(std::clamp<uint32_t>(max_sge, 1, kMaxSge)),
        entries_(std::make_unique<Entry[]>(uint64_t{mask_} + 1)),
        sges_(std::make_unique<Sge[]>((uint64_t{mask_} + 1) * max_sge_)) {}

  // The host bytes of a queue of depth x max_sge (§8: R x (16 + 16 r),
  // R rounded up to a power of two).
  static uint64_t HostBytes(uint32_t depth, uint32_t max_sge) {
    return sizeof(RecvQueue) +
           uint64_t{std::bit_ceil(std::max<uint32_t>(depth, 1))} *
               (sizeof(Entry) +
                sizeof(Sge) * std::clamp<uint32_t>(max_sge, 1, kMaxSge));
  }

  // True while the layer keeps the receives (before the QP's mode is
  // known, and in uc mode); false: they go to the lower RC QP.
  bool holding() const { return holding_; }
  uint32_t depth() const { return depth_; }

  // Data path: keeps wrs in order. kNoResource when the queue is full,
  // kInvalid for more SGEs than the QP's max_recv_sge. A QP in ERR
  // (error()) flushes each at once.
  int Post(std::span<const RecvWr> wrs, Status* first_error, uint32_t qpn,
           CompletionRing* ring) {
    int n = 0;
    for (const RecvWr& wr : wrs) {
      if (wr.num_sge > max_sge_) {
        if (first_error) *first_error = Status::kInvalid;
        return n;
      }
      if (tail_ - head_ == depth_) {
        if (first_error) *first_error = Status::kNoResource;
        return n;
      }
      const uint64_t seq = tail_++;
      Entry& e = At(seq);
      e = Entry{};
      e.wr_id = wr.wr_id;
      e.num_sge = wr.num_sge;
      Sge* s = Sges(seq);
      for (int i = 0; i < wr.num_sge; ++i) {
        s[i] = wr.sge[i];
        e.length += wr.sge[i].length;
      }
      if (error_) Finish(seq, Flushed(e, qpn));
      ++n;
    }
    if (error_) Report(ring);
    return n;
  }

  // Receives posted since the last Reset (absolute sequence numbers):
  // [head(), posted()) are kept, the oldest not yet reported first.
  uint64_t posted() const { return tail_; }
  uint64_t head() const { return head_; }
  bool Has(uint64_t seq) const { return seq >= head_ && seq < tail_; }
  Entry& At(uint64_t seq) { return entries_[seq & mask_]; }
  Sge* Sges(uint64_t seq) { return &sges_[(seq & mask_) * max_sge_]; }

  // Receive seq completed with c (reported by Report, in order).
  void Finish(uint64_t seq, const Completion& c) {
    if (!Has(seq)) return;
    Entry& e = At(seq);
    e.done = true;
    e.wc = c;
    e.wc.wr_id = e.wr_id;
  }
  // Pushes the completed receives, oldest first, while the ring takes them.
  void Report(CompletionRing* ring) {
    while (head_ < tail_ && At(head_).done) {
      if (ring == nullptr || !ring->Push(At(head_).wc)) return;
      ++head_;
    }
  }
  bool unreported() const {
    return head_ < tail_ && entries_[head_ & mask_].done;
  }

  // The QP went to ERR: every receive not completed completes
  // WR_FLUSH_ERR, and later posts too.
  void FlushAll(uint32_t qpn, CompletionRing* ring) {
    error_ = true;
    for (uint64_t s = head_; s < tail_; ++s) {
      if (!At(s).done) Finish(s, Flushed(At(s), qpn));
    }
    Report(ring);
  }
  bool error() const { return error_; }

  // Posts every receive kept (not completed) to the lower QP, in order,
  // and passes later ones through; returns how many the lower refused.
  // The ones posted stay recorded as shadows (below), packed in post order.
  uint32_t ReplayTo(Rnic& lower, RnicQp qp) {
    uint32_t refused = 0;
    uint64_t w = head_;
    base_ = head_;
    for (uint64_t s = head_; s < tail_; ++s) {
      if (At(s).done) continue;
      RecvWr r;
      r.wr_id = At(s).wr_id;
      r.num_sge = At(s).num_sge;
      std::copy_n(Sges(s), r.num_sge, r.sge.begin());
      Status st = Status::kOk;
      if (lower.PostRecv(qp, std::span(&r, 1), &st) != 1) {
        ++refused;
        continue;
      }
      if (w != s) {
        At(w) = At(s);
        std::copy_n(Sges(s), r.num_sge, Sges(w));
      }
      ++w;
    }
    tail_ = w;
    head_ = tail_;
    holding_ = false;
    return refused;
  }

  // Passing through (not holding), the live switch (§6) must be able to
  // post the receives still on the lower RC QP again: each one the lower
  // took is recorded here as a shadow, the last depth() of them kept (an
  // RC QP without SRQ consumes its receives in post order, so the ones a
  // flush returns are always the newest shadows). Data path, no
  // allocation.
  void Shadow(std::span<const RecvWr> taken) {
    for (const RecvWr& wr : taken) {
      const uint64_t seq = tail_++;
      Entry& e = At(seq);
      e = Entry{};
      e.wr_id = wr.wr_id;
      e.num_sge = std::min<uint8_t>(wr.num_sge, static_cast<uint8_t>(max_sge_));
      Sge* s = Sges(seq);
      for (int i = 0; i < e.num_sge; ++i) {
        s[i] = wr.sge[i];
        e.length += wr.sge[i].length;
      }
    }
    head_ = tail_;
  }
  // Shadows recorded and still in the ring (at most depth()).
  uint64_t shadows() const { return std::min<uint64_t>(tail_ - base_, depth_); }
  // The switch is taking the lower RC QP's receives back (it moved the QP
  // to ERR): from now on receives are held again, after the shadows.
  void BeginTakeBack() {
    mark_ = tail_;
    head_ = tail_;
    holding_ = true;
  }
  // The lower's flushes said n receives were still posted: the newest n
  // shadows before BeginTakeBack, held again in order before those
  // posted since.
  void TakeBack(uint64_t n) {
    n = std::min<uint64_t>(n, std::min<uint64_t>(mark_ - base_, depth_));
    head_ = mark_ - n;
    for (uint64_t s = head_; s < mark_; ++s) At(s).done = false;
    base_ = head_;
  }

  // The QP went to RESET: its receives are gone (no completion), and the
  // next RTR decides its mode again.
  void Reset() {
    head_ = tail_ = base_ = mark_ = 0;
    holding_ = true;
    error_ = false;
  }

 private:
  static Completion Flushed(const Entry& e, uint32_t qpn) {
    Completion c;
    c.wr_id = e.wr_id;
    c.status = WcStatus::kWrFlushErr;
    c.opcode = WcOpcode::kRecv;
    c.qpn = qpn;
    return c;
  }

  const uint32_t depth_;
  // The ring is rounded up to a power of two: a slot is seq & mask_.
  const uint32_t mask_;
  const uint32_t max_sge_;
  std::unique_ptr<Entry[]> entries_;
  std::unique_ptr<Sge[]> sges_;
  uint64_t head_ = 0, tail_ = 0;
  uint64_t base_ = 0;  // shadows: the first seq that may be one
  uint64_t mark_ = 0;  // BeginTakeBack's tail
  bool holding_ = true;
  bool error_ = false;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_RECV_QUEUE_H_
