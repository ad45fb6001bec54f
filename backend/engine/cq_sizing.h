// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The host CQ sizing rule: a host (RNIC) CQ can never overflow for the work
// the engine allows in flight on the QPs that complete into it.
//
// What a QP can have in a host CQ at once (completed on the RNIC, not yet
// polled by the engine):
//   - send side: every WR or piece the scheduler stage posts keeps one of
//     its flow's records until a completion at or after it is polled
//     (sched::Stage::RecordCapacity: twice the QP's host SQ depth), and
//     each can produce one completion (a signaled success, an error, a
//     flush). So at most RecordCapacity completions.
//   - receive side: the receives the engine has posted and not seen
//     complete: at most the RQ's RNIC depth (RecvQueue::depth). An SRQ's
//     receives complete into the CQ of whichever QP takes them: its depth
//     counts once per CQ, however many of the CQ's QPs use it.
// A CQ's committed demand is the sum over its QPs. CreateQp grows the host
// CQ (Rnic::ResizeCq) to the new sum, or refuses the QP (kNoResource) when
// the RNIC cannot resize or the sum exceeds max_cqe; DestroyQp gives the
// demand back (the CQ keeps its size).
#ifndef VRDMA_BACKEND_ENGINE_CQ_SIZING_H_
#define VRDMA_BACKEND_ENGINE_CQ_SIZING_H_

#include <cstdint>

namespace vrdma::engine {

// The completions one QP adds to a host CQ in the worst case.
//   sends_here:    the CQ is the QP's send CQ; stage_records its flow's
//                  record capacity.
//   recv_depth:    when the CQ is its receive CQ: its RQ's RNIC depth, or
//                  its SRQ's depth when no other QP of this CQ uses that
//                  SRQ yet (0 otherwise).
inline uint64_t QpCqDemand(bool sends_here, uint32_t stage_records,
                           uint32_t recv_depth) {
  return (sends_here ? uint64_t{stage_records} : 0) + recv_depth;
}

// The host depth a CQ needs to hold committed + added completions: current
// when it already does, 0 when it cannot (beyond max_cqe: refuse).
inline uint32_t RequiredCqDepth(uint64_t committed, uint64_t added,
                                uint32_t current, uint32_t max_cqe) {
  const uint64_t need = committed + added;
  if (need <= current) return current;
  if (need > max_cqe) return 0;
  return static_cast<uint32_t>(need);
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_CQ_SIZING_H_
