// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A flow's state inside the scheduler stage (internal to backend/scheduler;
// owners see only FlowId). Allocated whole by Stage::PrepareFlow, so the
// data path never allocates:
//   - the FIFO: guest WRs not yet fully posted, in order (SendWr copies,
//     their inline bytes in an arena, a QueueEntry beside each);
//   - the records: one per piece on the RNIC, by a free-running sequence
//     number whose low bits travel in the wr_id; a completion retires its
//     record and every older one (an RNIC completes a send queue in order).
#ifndef VRDMA_BACKEND_SCHEDULER_FLOW_H_
#define VRDMA_BACKEND_SCHEDULER_FLOW_H_

#include <cstdint>
#include <vector>

#include "backend/base/intrusive_list.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage_types.h"
#include "backend/scheduler/timer_wheel.h"
#include "policy/scheduler_policy.h"

namespace vrdma::sched {

// What a policy sees of a work request's opcode (the one WR -> WrKind
// table: the engine's and the bench's WRs alike). Host-only opcodes
// (WAIT, ENABLE) never reach a policy; they read as SEND.
constexpr policy::WrKind WrKindOf(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return policy::WrKind::kWrite;
    case WrOpcode::kRdmaRead:
      return policy::WrKind::kRead;
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd:
      return policy::WrKind::kAtomic;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv:
    case WrOpcode::kLocalInv:  // windows (§4.7): local, no data; as a SEND of 0
    case WrOpcode::kBindMw:
    case WrOpcode::kRegMr:  // fast registration (§4.8): the same
    case WrOpcode::kWait:
    case WrOpcode::kEnable:
      break;
  }
  return policy::WrKind::kSend;
}

struct QueueEntry {
  uint32_t tag = 0;
  uint32_t total = 0;      // bytes of the WR
  uint32_t offset = 0;     // bytes already posted as pieces
  uint32_t chunk = 0;      // piece size, fixed by the first piece
  uint32_t described = 0;  // pieces already described by PrepareReceive
  Nanos arrival = 0;
  policy::WrInfo info;
  bool marker = false;     // a failed WR (SubmitMarker)
  WcStatus marker_status = WcStatus::kSuccess;
};

enum RecordFlags : uint8_t {
  kRecLast = 1,           // the last piece of its WR
  kRecRnicSignaled = 2,   // the RNIC will complete it visibly
  kRecForced = 4,         // signaled by the stage, not by the guest
  kRecControl = 8,        // a WAIT or sentinel, not guest data
  kRecSplit = 16,         // its WR was posted in pieces
  kRecPause = 32,         // the WAIT that pauses the flow on the RNIC
};

struct Record {
  uint32_t tag = 0;
  uint32_t bytes = 0;      // this piece
  uint32_t wr_bytes = 0;   // the whole WR (last pieces)
  Nanos arrival = 0;       // last pieces
  Nanos posted = 0;        // when it went to the RNIC
  policy::WrInfo info;     // last pieces
  uint8_t flags = 0;
};

struct FlowStorage;
struct FlowTimer : TimerWheel::Entry {
  FlowStorage* flow = nullptr;
};

struct StageTenant;

struct FlowStorage {
  FlowSpec spec;
  FlowId id = kNoFlow;
  StageTenant* tenant = nullptr;
  policy::FlowControl control;
  bool native = true;  // control is the default and no RNIC pause
  policy::FlowAccount account;

  // FIFO (capacity = spec.queue_capacity).
  std::vector<SendWr> wrs;
  std::vector<QueueEntry> entries;
  std::vector<uint8_t> inline_arena;  // capacity * spec.max_inline
  uint32_t q_head = 0;
  uint32_t q_count = 0;
  uint32_t capacity() const { return static_cast<uint32_t>(entries.size()); }
  // Host memory it holds (what its owner is charged for it).
  uint64_t host_bytes() const {
    return sizeof(*this) + wrs.capacity() * sizeof(SendWr) +
           entries.capacity() * sizeof(QueueEntry) + inline_arena.capacity() +
           records.capacity() * sizeof(Record);
  }
  uint32_t at(uint32_t i) const { return (q_head + i) % capacity(); }

  // Records (a power of two >= the RNIC depth).
  std::vector<Record> records;
  uint32_t rec_mask = 0;
  uint32_t rec_head = 0;  // oldest unretired sequence number
  uint32_t rec_tail = 0;  // next sequence number
  uint32_t unretired() const { return rec_tail - rec_head; }
  uint32_t since_signal = 0;       // records posted since a signaled one
  uint64_t bytes_since_signal = 0;
  uint32_t signaled_outstanding = 0;  // kRecRnicSignaled, not retired
  // Adaptive signaling (StageOptions): guest-signaled WRs are posted
  // signaled every signal_period records; normal_latency is the EWMA of a
  // signaled piece's post-to-completion time at period 1.
  uint32_t signal_period = 1;
  Nanos normal_latency = 0;
  // A WR the guest signaled was planned unsignaled and no signaled piece
  // has been committed since: the plan's last piece is signaled, and if the
  // RNIC refused it (the rest of the post list), the next plan's is.
  bool signal_owed = false;

  // Credit (gated flows) and pacing.
  // Signed: a piece larger than the credit left may post while any is
  // left, and the debt is paid from later grants.
  int64_t credit_bytes = 0;
  int64_t credit_pieces = 0;
  bool credit_asked = false;
  Nanos release_at = 0;
  FlowTimer release_timer;
  bool paced = false;  // stopped for release_at; its next pass is paced

  // PAUSE on the RNIC: the pcc completion that releases the flow's WAIT
  // (0: not paused there), and whether the WAIT is still to be posted.
  uint64_t rnic_ticket = 0;
  bool wait_pending = false;
  bool reassembles = false;  // SEND / WRITE_WITH_IMM may be split
  bool failed = false;       // an error completion; until EndFlowWork
  bool failed_reported = false;
  uint32_t failed_tag = 0;   // the WR reported with that error
  bool blocked = false;      // queued work the controls keep back
  Nanos blocked_since = 0;
  ListHook<FlowStorage> ready_hook;
  ListHook<FlowStorage> tenant_hook;  // the tenant's flows
};

// A tenant's account is summed from its flows when asked (control path,
// policy timers): the data path updates only the flow's. What removed flows
// did is kept in `retired`.
struct StageTenant {
  TenantId id = 0;
  policy::TenantQos qos;
  uint32_t flows = 0;
  policy::FlowAccount retired;
  policy::TenantAccount sum;  // the last tenant_account() answer
  bool removed = false;
  IntrusiveList<FlowStorage, &FlowStorage::tenant_hook> live;
};

}  // namespace vrdma::sched

#endif  // VRDMA_BACKEND_SCHEDULER_FLOW_H_
