// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Spurious RTOs (docs/reliability.md §4.4): Eifel's detection (RFC 3522)
// and response (RFC 4015) with gseqs instead of timestamps. Every
// transmission has its own gseq, a retransmission a new one (§3.4, B
// A.1.1), so an ACK naming a transmission that an RTO declared lost proves
// it was not: it arrived late. Where daemons share cores with busy
// pollers, that is a data path that did not run for a scheduler's time
// slice, milliseconds, while the RTT samples (one per ACK, its newest
// entry, the receiver's hold taken out) say a fraction of it.
//
// The response, two parts:
// - the reaction to that RTO is undone: max_chunk and the window as they
//   were before it;
// - the RTO's floor becomes 5/4 of the late round trip (the silence the
//   host showed), kept while such proofs keep coming and forgotten
//   `floor_hold_ns` (10 s, base_rtt's horizon) after the last one. RFC
//   4015 raises srtt instead, which the next eight samples decay: the same
//   stall then expires the RTO again on the next round (measured: an RTO
//   pass every 8 ms of a bulk transfer on this host, each proven spurious).
//
// An episode opens at an RTO pass and keeps the state before its first
// reaction (further RTO passes in it change nothing here). It closes:
// proven spurious by an ACK of a transmission it declared lost, sent
// before it; inconclusive by an ACK of anything sent after it first (the
// retransmission, or new data, overtook the proof), or by a loss found by
// a later ACK (RACK: a real one). Pure: no clock, no allocation.
#ifndef VRDMA_POLICY_RELIABILITY_RTO_UNDO_H_
#define VRDMA_POLICY_RELIABILITY_RTO_UNDO_H_

#include <algorithm>
#include <cstdint>
#include <optional>

namespace vrdma::policy::reliability {

struct RtoUndoParams {
  uint64_t floor_hold_ns = 10'000'000'000;  // §4.5's base_rtt horizon
};

// What an RTO's reaction changed, as it was before.
struct UndoState {
  uint64_t max_chunk = 0;  // ChunkSize::max_chunk()
  uint64_t cwnd = 0;       // SwiftWindow::cwnd()
};

class RtoUndo {
 public:
  explicit RtoUndo(const RtoUndoParams& params = {}) : p_(params) {}

  // An RTO pass found losses. next_gseq: the first gseq sent after it;
  // before: the state before the pass reacted.
  void OnRto(uint64_t next_gseq, const UndoState& before) {
    if (open_) return;  // the episode's first state is the one to restore
    open_ = true;
    first_after_ = next_gseq;
    before_ = before;
  }

  // A loss found by a later ACK: a real one. The episode closes.
  void OnRackLoss() { open_ = false; }

  // One ACK entry at now_ns naming gseq, a transmission posted at
  // t_sent_ns; was_lost: an RTO had declared it lost. The state to restore
  // when it proves the episode spurious (the floor is raised then).
  [[nodiscard]] std::optional<UndoState> OnAcked(uint64_t gseq, bool was_lost,
                                                 uint64_t now_ns,
                                                 uint64_t t_sent_ns) {
    if (!open_) return std::nullopt;
    if (gseq >= first_after_) {
      open_ = false;  // sent after the RTO, acknowledged before any proof
      return std::nullopt;
    }
    if (!was_lost) return std::nullopt;  // an older one, acknowledged late
    open_ = false;
    const uint64_t late = now_ns - std::min(now_ns, t_sent_ns);
    const uint64_t floor = late + late / 4;
    floor_ns_ = FloorNs(now_ns) > floor ? floor_ns_ : floor;
    proven_ns_ = now_ns;
    return before_;
  }

  // The least RTO at now_ns: 5/4 of the longest late round trip proven
  // since the floor last rose, for floor_hold_ns after the newest proof;
  // 0 without one.
  [[nodiscard]] uint64_t FloorNs(uint64_t now_ns) const {
    if (floor_ns_ == 0 || now_ns >= proven_ns_ + p_.floor_hold_ns) return 0;
    return floor_ns_;
  }

  [[nodiscard]] bool open() const { return open_; }

 private:
  RtoUndoParams p_;
  bool open_ = false;
  uint64_t first_after_ = 0;
  UndoState before_;
  uint64_t floor_ns_ = 0;
  uint64_t proven_ns_ = 0;
};

}  // namespace vrdma::policy::reliability

#endif  // VRDMA_POLICY_RELIABILITY_RTO_UNDO_H_
