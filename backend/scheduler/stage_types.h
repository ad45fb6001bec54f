// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What an owner of the scheduler stage hands it and gets back: a flow's
// description, the receive-side description of a message piece, the
// stage's probe paths, and the owner's callbacks. See stage.h.
#ifndef VRDMA_BACKEND_SCHEDULER_STAGE_TYPES_H_
#define VRDMA_BACKEND_SCHEDULER_STAGE_TYPES_H_

#include <algorithm>
#include <cstdint>

#include "backend/base/status.h"
#include "backend/rnic/rnic.h"
#include "policy/scheduler_policy.h"

namespace vrdma::sched {

using policy::DestId;
using policy::FlowId;
using policy::TenantId;
using Nanos = policy::Nanos;

inline constexpr FlowId kNoFlow = UINT32_MAX;
// The stage owns the low kRecordBits of every wr_id it posts for a flow.
inline constexpr uint32_t kRecordBits = 30;
inline constexpr uint64_t kRecordMask = (uint64_t{1} << kRecordBits) - 1;

// The host send queue's depth for a guest send queue of guest_depth WRs,
// the RNIC allowing at most rnic_max: never below kMinHostSqDepth. The
// stage may split a WR into pieces, and a flow needs several pieces on the
// card per round trip to keep the line busy; a guest SQ of depth 1 with
// 1 MiB WRs gave a host QP of depth 1 and two pieces per round trip
// (b1m_vs_b1g: 40 of 98 Gb/s). The guest's ring still bounds its own WRs.
inline constexpr uint32_t kMinHostSqDepth = 16;
inline uint32_t HostSqDepth(uint32_t guest_depth, uint32_t rnic_max) {
  return std::min(std::max(guest_depth, kMinHostSqDepth), rnic_max);
}

struct FlowSpec {
  TenantId tenant = 0;
  void* owner = nullptr;          // passed back in StageOwner calls
  RnicQp qp;
  QpType type = QpType::kRc;
  RnicCq send_cq;                 // the QP's send CQ (zero-count WAITs)
  uint32_t rnic_depth = 1;        // the host send queue's depth
  uint32_t queue_capacity = 32;   // guest WRs the stage may hold
  uint32_t max_inline = 0;        // inline bytes a WR may carry
  uint64_t cookie_base = 0;       // wr_id = cookie_base | record bits
  DestId dest = 0;
};

// One message piece that consumes a receive at the destination, described
// to the owner just before it is posted (docs/scheduler.md, "Split SEND").
struct ReceivePiece {
  uint32_t offset = 0;  // of the piece in the message
  uint32_t length = 0;  // bytes it carries
  uint32_t total = 0;   // the whole message
  bool first = true;
  bool last = true;
  bool lands_in_buffer = true;  // SEND: yes; WRITE_WITH_IMM: no (only its
                                // last piece consumes a receive)
  uint32_t remote_qpn = 0;      // UD: the WR's destination QP
  uint32_t qpn = 0;             // the sending QP
  // The policy holds receive-consuming messages that no advertised receive
  // waits for (SchedulerPolicy::HoldsSendsWithoutReceive).
  bool credited = false;
};

// The stage's own QP towards one destination, for probes: RC, connected,
// its send CQ the one given to SetOwnCq; probes are 10-byte inline WRITEs
// to [remote_addr, +10) under rkey.
struct ProbePath {
  RnicQp qp;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
};

// PeRF's preemption control queue (§3.5.1), on an RNIC with cross-channel
// operations: a managed QP (pcq) whose send CQ is pcc, connected to a
// sink; and an ordinary connected QP (enabler) that carries ENABLEs. The
// stage keeps pcq stocked with zero-byte signaled WRITEs (invisible until
// enabled); a paused flow's QP carries a WAIT for the n-th pcc completion;
// resuming it enables pcq WRITEs until that completion comes.
struct PreemptionControl {
  RnicCq pcc;
  RnicQp pcq;
  uint32_t pcq_depth = 0;
  RnicQp enabler;
};

class StageOwner {
 public:
  virtual ~StageOwner() = default;
  // A guest WR left the stage for good: completed (kSuccess), failed with
  // its first error, or flushed (kWrFlushErr). byte_len as its completion
  // reports it.
  virtual void OnWrDone(void* owner, uint32_t tag, WcStatus status,
                        uint32_t byte_len) = 0;
  // An error marker (SubmitMarker) reached the head of its flow and every
  // WR before it is done: the owner now fails the QP.
  virtual void OnMarkerReached(void* owner, uint32_t tag, WcStatus status) = 0;
  // The RNIC refused a post for another reason than a full queue (the QP
  // left RTS on its own). The WR stays at the head; the owner fails the QP.
  virtual void OnPostRefused(void* owner, uint32_t tag, Status status) = 0;
  // A piece that consumes a receive at the destination is posted next.
  // false: the destination cannot take its description now; the flow
  // waits until the owner wakes it (Stage::Wake).
  virtual bool PrepareReceive(void* owner, const ReceivePiece& piece) = 0;
  // Carries a peer message to dest's daemon; false when there is no way.
  virtual bool SendPeerMessage(DestId dest, const policy::PeerMessage& m) = 0;
  // The policy probes dest and the stage has no path there yet: the owner
  // may build one now (AddProbePath). false: none can be built.
  virtual bool OpenProbePath(DestId) { return false; }
};

}  // namespace vrdma::sched

#endif  // VRDMA_BACKEND_SCHEDULER_STAGE_TYPES_H_
