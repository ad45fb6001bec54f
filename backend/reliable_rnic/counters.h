// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliabilityCounters: what the layer counts (docs/reliability.md §3.6,
// §9): one counter per check of §3.6 (wire_format.h's WireCounter, in its
// order), the peer channel's checks, and the protocol's events. One set per
// VM (step 18: what its connections and rc paths count) and one of the
// layer's own (what no VM owns); the daemon-wide figures are their sum
// (operator+=). Written by the data-path thread only; plain integers (a
// reader on another thread sees them late). Every field is a uint64_t.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_COUNTERS_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_COUNTERS_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/wire_format.h"

namespace vrdma::reliable {

struct ReliabilityCounters {
  // §3.6, indexed by WireCounter.
  std::array<uint64_t, kWireCounterCount> wire{};
  // The peer channel's codec checks (peer_message.h), and messages that
  // decoded but named nothing of this layer (an unknown QP, a stale token).
  peer::PeerCheckCounters peer;
  uint64_t peer_unmatched = 0;
  // HELLOs of a new peer id from a known ACK GID: a peer daemon restarted
  // and took its old entry again.
  uint64_t peer_restarts = 0;
  // Asynchronous events of the layer's own lower QPs and CQs, kept from
  // the engine (it knows none of them).
  uint64_t layer_async_events = 0;

  // Connections (§3.5).
  uint64_t connects_sent = 0;
  uint64_t connects_uc = 0;      // connections that run uc
  uint64_t connects_native = 0;  // fell back to native (CONNECT_NATIVE)

  // Sender.
  uint64_t messages_posted = 0;
  uint64_t messages_completed = 0;  // completed with success
  uint64_t messages_failed = 0;     // completed with an error (not flushes)
  uint64_t chunks_sent = 0;         // WRITE_WITH_IMM chunks
  uint64_t chunk_bytes_sent = 0;
  uint64_t retx_sent = 0;           // WRITE_RETX units
  uint64_t lost_rack = 0;           // transmissions found lost by a later ACK
  uint64_t lost_rto = 0;            // transmissions whose RTO expired
  uint64_t rto_undone = 0;          // RTOs proven spurious, reaction undone (§4.4)
  uint64_t cwnd_resets = 0;         // losses that set the window to its minimum (§4.5)
  uint64_t uc_path_moves = 0;       // data QP moved to a new flow label (§5)
  uint64_t acks_received = 0;       // ACKs used (every check passed)
  uint64_t rtt_samples = 0;
  uint64_t retry_exceeded = 0;      // WRs failed RETRY_EXC_ERR
  uint64_t tail_waits = 0;          // an L chunk held for the tail rule
  uint64_t sends_sent = 0;          // SEND_DATA, WRITE_TAIL originals
  uint64_t rnr_exceeded = 0;        // WRs failed RNR_RETRY_EXC_ERR

  // Receiver.
  uint64_t chunks_received = 0;     // chunks placed (new units)
  // WRITE chunks (with bytes) that arrived after their message was
  // delivered: the lower RNIC placed them in guest memory the guest owned
  // again (a late original or a duplicate; §11 question 9). Also counted
  // in rx_after_delivery, with the harmless late SENDs.
  uint64_t late_writes = 0;
  uint64_t retx_copied = 0;         // WRITE_RETX units copied into place
  // Messages whose delivery waited for the packet lifetime (§4.2).
  uint64_t delivery_holds = 0;
  // ACKs sent again for a delivery that no arrival made (§4.3).
  uint64_t delivery_acks_repeated = 0;
  // Connections the periodic sweep found with work that nothing had woken
  // (§2.1 "Turns"): a bug, 0 in every test.
  uint64_t missed_wakes = 0;
  // Connections the sweep found, asleep until a timer, with work already
  // (§2.1 "Turns"): a deadline computed too late, a bug, 0 in every test.
  uint64_t missed_deadlines = 0;
  uint64_t messages_delivered = 0;
  uint64_t acks_sent = 0;
  uint64_t naks_sent = 0;
  uint64_t units_copied = 0;     // SEND_DATA, WRITE_TAIL units copied
  uint64_t recvs_completed = 0;  // guest receives completed (success)
  uint64_t recv_errors = 0;      // ... in error (LOC_LEN_ERR, LOC_PROT_ERR)
  uint64_t rnr_waits = 0;        // messages that waited for a guest receive
  uint64_t rnr_naks = 0;         // ... and were dropped, NAKed RNR
  uint64_t hold_refused = 0;     // units dropped: too many held already
  uint64_t resent_after_wait = 0;  // sent again when a wait at the peer ended

  // READ and atomics (step 13). Requester:
  uint64_t reads_sent = 0;           // READ_REQs (originals)
  uint64_t reads_completed = 0;      // READs whose every unit arrived
  uint64_t read_units_received = 0;  // READ_RESP units copied (new)
  uint64_t atomics_posted = 0;       // on the lower RC QP
  uint64_t atomics_completed = 0;    // ... with success
  // Responder:
  uint64_t reads_served = 0;         // READ_REQs delivered and answered
  uint64_t read_records_peak = 0;    // most READs answered at once
  uint64_t read_units_sent = 0;      // READ_RESP units (originals)
  uint64_t read_units_resent = 0;    // ... sent again (lost)
  uint64_t read_responses_dropped = 0;  // unacknowledged past the budget
  // READ_REQs refused (each also rx_access_nak), by the rule that fired:
  // the QP (no REMOTE_READ, or max_dest_rd_atomic 0: REM_INV_REQ_ERR), then
  // the MR table's (REM_ACCESS_ERR): no such rkey, another PD's MR, an MR
  // without REMOTE_READ, a range outside the MR.
  uint64_t read_nak_qp = 0;
  uint64_t read_nak_rkey = 0;
  uint64_t read_nak_pd = 0;
  uint64_t read_nak_access = 0;
  uint64_t read_nak_range = 0;

  // rc mode (§5, step 16): backups connected, recoveries started (this
  // end's failure or the peer's RECOVER), takeovers, WRs completed because
  // the peer's epsn was past them (B A.2.1) and WRs posted again on the
  // backup, failed pairs reset, failures that went to the guest (no backup
  // back yet, the budget passed, a lower error), atomics that executed on
  // the failed QP (RETRY_EXC_ERR), RECOVER and RECOVERED that named
  // nothing (forged, stale: dropped), the last takeover's time from the
  // failure to the resubmission.
  uint64_t rc_connects = 0;
  uint64_t rc_recoveries = 0;
  uint64_t rc_takeovers = 0;
  uint64_t rc_completed_below_epsn = 0;
  uint64_t rc_resubmitted = 0;
  uint64_t rc_resets = 0;
  uint64_t rc_failed_to_guest = 0;
  uint64_t rc_atomics_lost = 0;
  uint64_t rc_recover_bad = 0;
  uint64_t rc_recovered_bad = 0;
  uint64_t rc_takeover_ns_last = 0;

  // The live switch (§6, step 17): switches asked by this end (SWITCH
  // sent), begun (both ends asked the same mode), completed, failed to the
  // guest (the peer stopped answering past the budget), guest WRs held
  // meanwhile; and SWITCH, DRAINED, READY that named nothing of a QP's
  // switch (another daemon than its peer, no such QP, a state that does
  // not take it, twice, a replayed token): counted and dropped.
  uint64_t switches_asked = 0;
  uint64_t switches_begun = 0;
  uint64_t switches_done = 0;
  uint64_t switches_failed = 0;
  uint64_t switch_wrs_held = 0;
  uint64_t switch_bad = 0;
  uint64_t drained_bad = 0;
  uint64_t ready_bad = 0;

  uint64_t& operator[](WireCounter c) { return wire[static_cast<size_t>(c)]; }
  uint64_t operator[](WireCounter c) const {
    return wire[static_cast<size_t>(c)];
  }
  void Count(WireCounter c) { ++wire[static_cast<size_t>(c)]; }
};

// Adds b's counts to a's (the daemon-wide sum); read_records_peak and
// rc_takeover_ns_last take the larger.
inline ReliabilityCounters& operator+=(ReliabilityCounters& a,
                                       const ReliabilityCounters& b) {
  using Words =
      std::array<uint64_t, sizeof(ReliabilityCounters) / sizeof(uint64_t)>;
  static_assert(sizeof(ReliabilityCounters) % sizeof(uint64_t) == 0 &&
                std::is_trivially_copyable_v<ReliabilityCounters>);
  const uint64_t peak = std::max(a.read_records_peak, b.read_records_peak);
  const uint64_t last = std::max(a.rc_takeover_ns_last, b.rc_takeover_ns_last);
  Words w = std::bit_cast<Words>(a);
  const Words v = std::bit_cast<Words>(b);
  for (size_t i = 0; i < w.size(); ++i) w[i] += v[i];
  a = std::bit_cast<ReliabilityCounters>(w);
  a.read_records_peak = peak;
  a.rc_takeover_ns_last = last;
  return a;
}

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_COUNTERS_H_
