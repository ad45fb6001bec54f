// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine's per-VM objects. Each is built on the control thread (page
// views mapped there), then published into its VM's tables inside
// Executor::RunSync, after which only the data-path thread touches it (the
// control thread changes or removes it with RunSync again). Pointers
// between objects (QP -> CQ, PD, SRQ) stay valid because a referenced
// object cannot be destroyed (kBusy) while it has referrers.
//
// Which part of the engine (README.md, "Parts") writes what: the fields
// set at creation, references, demand and charges: Resources, QpControl
// (in their RunSync closures) and Teardown; the rest as noted per field
// group below. Every other part only reads them.
#ifndef VRDMA_BACKEND_ENGINE_OBJECTS_H_
#define VRDMA_BACKEND_ENGINE_OBJECTS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backend/engine/engine.h"
#include "backend/engine/guest_ring.h"
#include "backend/base/intrusive_list.h"
#include "backend/engine/key_map.h"
#include "backend/engine/ram_mrs.h"
#include "backend/engine/quota.h"
#include "backend/engine/resource_table.h"
#include "backend/engine/wqe_decoder.h"
#include "backend/memory/guest_memory.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"
#include "policy/scheduler_policy.h"

namespace vrdma::engine {

struct VmContext;
struct QpObj;
struct SrqObj;

struct PdObj {
  RnicPd rnic;
  uint32_t refs = 0;  // MRs, QPs, AHs, SRQs in this PD
  // Its RAM MRs once it has had a kernel QP (ram_mrs.h); they go with it.
  RamMrs ram;
};

struct MrObj {
  uint32_t pd = 0;
  RnicMr rnic;
  GuestPageView view;
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  Charge charge;  // what it costs its VM (quota.h)
  // A fast-registration MR (ALLOC_MR, docs/virtio-rdma.md §4.8) has no view,
  // iova, length or access of its own: they are the RNIC's, set by REG_MR
  // WQEs in SQ order. It has the guest's page list address and the pages
  // the last REG_MR WQE named (fast_reg.h), which the RNIC reads (FrReg).
  std::unique_ptr<FrPage[]> fr_pages;
  uint32_t fr_capacity = 0;   // entries in fr_pages (>= fr_max_pages)
  uint32_t fr_max_pages = 0;
  uint64_t fr_page_list = 0;  // guest-physical
  bool fast_reg() const { return fr_pages != nullptr; }
};

// A fast-registration MR's page array once the MR is gone (VmContext::
// fr_page_pool).
struct FrPageArray {
  std::unique_ptr<FrPage[]> pages;
  uint32_t capacity = 0;
};

// A memory window (docs/virtio-rdma.md §4.7). Its state (bound or not, to
// what, its current key byte) is the RNIC's: binds and invalidations run
// in SQ order there. The engine knows whose it is (mw_access.h).
struct MwObj {
  uint32_t pd = 0;
  RnicMw rnic;
  uint8_t type = 0;  // 1 or 2
  Charge charge;     // the engine's object (quota.h)
};

struct AhObj {
  uint32_t pd = 0;
  RnicAh rnic;
  GuestAh guest;
};

struct CqObj {
  VmContext* vm = nullptr;
  uint32_t handle = 0;
  RnicCq rnic;
  GuestPageView view;
  GuestRing ring;
  uint32_t depth = 0;          // usable entries reported to the guest
  // Completions: prod, consumer_seen/turn, armed (also Doorbell/ReqNotifyCq), overflowed,
  // expected, dropped, active_hook, unpublished_hook.
  uint32_t prod = 0;           // host-owned producer index
  // The guest's consumer index as last read, in turn consumer_turn.
  uint32_t consumer_seen = 0;
  uint64_t consumer_turn = ~uint64_t{0};
  uint8_t armed = 0;           // 0, kArmNext, kArmSolicited
  bool overflowed = false;     // CQ_ERR reported; CQEs dropped since
  uint32_t refs = 0;           // QPs using it
  uint32_t srq_listeners = 0;  // QPs with an SRQ receiving into it
  // Host CQ sizing (cq_sizing.h): the RNIC CQ's depth and the worst-case
  // completions its QPs may leave in it; SRQs receiving into it, with the
  // number of its QPs using each (their depth counts once).
  uint32_t host_depth = 0;
  uint64_t demand = 0;
  std::vector<std::pair<const SrqObj*, uint32_t>> srq_users;
  // The RNIC reported the host CQ in error (overflow): its QPs are in ERR
  // and no QP may use it again. Written by ErrorFlush.
  bool rnic_failed = false;
  uint64_t expected = 0;       // WRs on the RNIC that complete here
  uint64_t dropped = 0;
  Charge charge;  // grows when a QP's demand grows the host CQ
  ListHook<CqObj> active_hook;
  // CQEs written past the producer index the guest sees (Completions).
  ListHook<CqObj> unpublished_hook;
  static constexpr uint8_t kArmNext = 1;
  static constexpr uint8_t kArmSolicited = 2;
};

// A guest receive WQE in the RNIC's hands: one RNIC receive, or several
// slices of it when a local sender split its message (docs/scheduler.md,
// "Split SEND"). Its CQE is written when its last slice is posted
// (closed) and every posted slice has completed.
struct RecvSlot {
  uint32_t bytes = 0;       // received by the completed slices
  uint32_t report_len = 0;  // WRITE_WITH_IMM: the message's length
  uint16_t posted = 0;
  uint16_t done = 0;
  uint8_t status = 0;       // the first error (WcStatus), 0 if none
  bool closed = false;
};

// A receive-consuming piece a local sender announced before posting it.
struct AnnouncedPiece {
  uint32_t offset = 0;
  uint32_t length = 0;
  uint32_t total = 0;
  bool first = true;
  bool last = true;
  bool lands = true;  // its bytes land in the receive buffer (SEND)
};

// A receive ring (a QP's RQ or an SRQ) and what of it is on the RNIC.
// head: next ring index to post to the RNIC; consumer: the host-owned
// consumer index, advanced over completed WQEs in ring order (done[]), so
// the guest never reuses a slot the RNIC may still write into.
//
// Two ways to feed the RNIC: ahead (receives are pulled from the ring and
// posted whole, up to the depth) or, when every sender is a local QP whose
// stage describes its pieces first, announced: each described piece
// becomes one RNIC receive, a slice of the WQE it lands in.
//
// Written by RecvPath (posting, the plan, sweep_hook/ready_hook), by
// Completions (a slice or WQE completing, recv_queue.h) and by ErrorFlush
// (flushing the ring, closing the plan, flush_hook); ring bookkeeping all
// three share is in recv_queue.h.
struct RecvQueue {
  QpObj* qp = nullptr;  // exactly one of qp / srq
  SrqObj* srq = nullptr;
  GuestPageView view;
  GuestRing ring;
  RecvQueueLimits limits;
  uint32_t depth = 0;  // RNIC receive queue depth (high watermark)
  uint32_t low_watermark = 0;
  uint32_t head = 0;
  uint32_t consumer = 0;
  uint32_t posted = 0;             // on the RNIC, not completed
  std::vector<uint64_t> wr_ids;    // guest wr_id by ring slot
  std::vector<uint8_t> done;       // completed, consumer not yet past it
  std::vector<RecvSlot> slots;     // by ring slot, while on the RNIC
  // Announced mode.
  static constexpr uint32_t kPlanCapacity = 64;
  bool announced = false;
  sched::FlowId sender = sched::kNoFlow;  // the local sender's flow
  bool sender_waits = false;              // it found the plan full
  std::array<AnnouncedPiece, kPlanCapacity> plan{};
  uint32_t plan_head = 0;
  uint32_t plan_count = 0;
  RecvWr open_wqe;                        // the WQE its slices come from
  uint32_t open_slot = 0;
  bool open = false;
  ListHook<RecvQueue> sweep_hook;  // posted < low_watermark
  ListHook<RecvQueue> ready_hook;  // replenish on this turn
  ListHook<RecvQueue> flush_hook;  // flush left for the next turn
};

// Host bytes of a receive queue's shadow state (per ring slot).
inline uint64_t ShadowBytes(const RecvQueue& rq) {
  return rq.wr_ids.capacity() * sizeof(uint64_t) + rq.done.capacity() +
         rq.slots.capacity() * sizeof(RecvSlot);
}

struct SrqObj {
  VmContext* vm = nullptr;
  uint32_t handle = 0;
  uint32_t pd = 0;
  RnicSrq rnic;
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t limit = 0;  // 0: not armed
  uint32_t refs = 0;   // QPs attached
  Charge charge;
  RecvQueue rq;
};

// What the engine remembers of a send WQE it consumed, by sequence number
// (slots[seq & slot_mask]; the slot index is the WR's tag in the stage).
struct SendSlot {
  uint64_t guest_wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  bool signaled = false;
};

struct QpObj {
  VmContext* vm = nullptr;
  uint32_t handle = 0;
  uint32_t qpn = 0;
  QpType type = QpType::kRc;
  uint32_t pd = 0;
  CqObj* send_cq = nullptr;
  CqObj* recv_cq = nullptr;
  SrqObj* srq = nullptr;
  RnicQp rnic;
  QpCaps caps;  // as granted to the guest
  bool sq_sig_all = false;
  // VIRTIO_RDMA_QP_F_KERNEL: its SGEs may name the local DMA lkey,
  // resolved against its PD's RAM MRs (local_access.h).
  bool kernel = false;
  // Its worst-case completions in send_cq / recv_cq (cq_sizing.h), given
  // back when it is destroyed.
  uint64_t send_cq_demand = 0;
  uint64_t recv_cq_demand = 0;
  Charge charge;  // ring pages and mappings, shadow state, RNIC queues
  // Mirror of the RNIC's: QpControl (ModifyQp), ErrorFlush (to ERR).
  QpState state = QpState::kReset;
  // Last attributes set (QUERY_QP answers from these and the RNIC).
  ModifyQpRequest attrs;
  // Send queue: SendPath (sq_head, sq_seq, sq_done, slots, sq_failing,
  // pending_hook); ErrorFlush advances sq_head when it flushes the ring and
  // clears sq_failing when it drains the send side.
  GuestPageView sq_view;
  GuestRing sq;
  SendQueueLimits sq_limits;
  uint32_t sq_head = 0;    // next WQE to consume == guest consumer index
  uint32_t sq_window = 0;  // RNIC send queue depth
  // Consumed WQEs by sequence number (free-running 32-bit counters):
  // [sq_done, sq_seq) are consumed and not yet reported done by the stage
  // (which reports them in order). slots has room for every WR the stage
  // can hold (its FIFO and its records), so a slot is never reused while
  // its WR is live.
  uint32_t sq_seq = 0;
  uint32_t sq_done = 0;
  uint32_t slot_mask = 0;
  std::vector<SendSlot> slots;
  uint32_t Unretired() const { return sq_seq - sq_done; }
  // A WQE failed the checks: nothing after it is consumed until the stage
  // has finished the WRs before it and the QP has gone to ERR.
  bool sq_failing = false;
  ListHook<QpObj> pending_hook;
  // Watched on pending_hook after its ring drained (EngineOptions::
  // sq_watch_turns): turns since it last gave a WQE.
  bool sq_watched = false;
  uint32_t sq_quiet_turns = 0;
  // The QP's flow in the scheduler stage, and its storage once removed
  // (freed with the QP, off the data path).
  sched::FlowId flow = sched::kNoFlow;
  std::unique_ptr<sched::FlowStorage> flow_storage;
  // Receive queue (unused with an SRQ).
  RecvQueue rq;
};

// A VM's GSI QP (QP1), which the engine carries itself (gsi.h,
// docs/virtio-rdma.md §4.6): never an RNIC QP. Written by Gsi, on the
// data-path thread after it is published.
struct GsiQp {
  VmContext* vm = nullptr;
  uint32_t pd = 0;
  CqObj* send_cq = nullptr;
  CqObj* recv_cq = nullptr;
  QpCaps caps;
  bool sq_sig_all = false;
  QpState state = QpState::kReset;
  ModifyQpRequest attrs;  // last set (QUERY_QP)
  GuestPageView sq_view;
  GuestPageView rq_view;
  GuestRing sq;
  GuestRing rq;
  SendQueueLimits sq_limits;
  RecvQueueLimits rq_limits;
  // The host's consumer index of each ring (the next WQE to take).
  uint32_t sq_head = 0;
  uint32_t rq_head = 0;
  Charge charge;  // ring pages and mappings, the object
  ListHook<GsiQp> pending_hook;  // Gsi::Run has sends or flushes to do
  // The VM's datagram budget (Gsi::kRatePerSec, kBurst), refilled when
  // Run looks at it.
  double tokens = 0;
  policy::Nanos refilled_at = 0;
};

struct VmContext {
  explicit VmContext(const Quotas& q)
      : pds(q.max_pd),
        mrs(q.max_mr),
        cqs(q.max_cq),
        qps(q.max_qp),
        ahs(q.max_ah),
        srqs(q.max_srq),
        mws(q.max_mw),
        qpn_to_qp(q.max_qp > kMaxTableCapacity ? kMaxTableCapacity : q.max_qp),
        lkey_to_mr(q.max_mr > kMaxTableCapacity ? kMaxTableCapacity
                                                : q.max_mr),
        mw_index_to_mw(q.max_mw > kMaxTableCapacity ? kMaxTableCapacity : q.max_mw),
        fr_index_to_mr(q.max_fr_mr > kMaxTableCapacity ? kMaxTableCapacity : q.max_fr_mr) {}

  VmId id = 0;
  VmConfig config;
  VmEventSink* sink = nullptr;
  std::shared_ptr<const GuestMemory> memory;  // control thread only
  // The same memory table for the data path (GSI's guest-physical SGEs):
  // replaced only inside RunSync, so a turn never sees it unmapped.
  std::shared_ptr<const GuestMemory> datapath_memory;
  ResourceTable<PdObj> pds;
  ResourceTable<MrObj> mrs;
  ResourceTable<CqObj> cqs;
  ResourceTable<QpObj> qps;
  ResourceTable<AhObj> ahs;
  ResourceTable<SrqObj> srqs;
  ResourceTable<MwObj> mws;
  KeyMap qpn_to_qp;   // guest-visible qpn -> QP handle
  KeyMap lkey_to_mr;  // lkey -> MR handle
  // A window's rkey without its key byte (MwIndex) -> MW handle.
  KeyMap mw_index_to_mw;
  // A fast-registration MR's key without its key byte (REG_MR changes it)
  // -> MR handle; these MRs are not in lkey_to_mr.
  KeyMap fr_index_to_mr;
  // The page arrays of its deregistered fast-registration MRs. A REG_MR WR
  // that the scheduler stage or the RNIC still holds points into its MR's
  // array (rnic.h, FrReg), so an array lives, charged to the VM, until the
  // VM is detached; ALLOC_MR takes one from here before it allocates
  // (fast_reg.cc). Its capacity covers every live FR MR, so Teardown's
  // return of an array never allocates.
  std::vector<FrPageArray> fr_page_pool;
  std::unique_ptr<GsiQp> gsi;  // its QP1, if it made one (Gsi)
  // Counts and charges: Resources, QpControl, Teardown; wqes_posted and
  // wqes_rejected: SendPath, RecvPath; cqes_written: Completions;
  // rnic_cq_errors, flush_deferred: ErrorFlush.
  VmStats stats;
  uint64_t doorbells_ignored = 0;  // the facade (Doorbell)
  uint32_t sq_watched = 0;  // its QPs SendPath watches
  // Flush budget (EngineOptions::flush_budget) left in turn flush_turn
  // (ErrorFlush).
  uint64_t flush_turn = ~uint64_t{0};
  uint32_t flush_left = 0;
  // Completions: raised events this turn, not flushed.
  ListHook<VmContext> events_hook;
};

// Engine cookies: the wr_id the RNIC sees. [63:32] handle of the QP (send,
// recv) or SRQ, [31:30] kind, [29:0] ring slot.
enum class CookieKind : uint32_t { kSend = 0, kRecv = 1, kSrqRecv = 2 };
inline uint64_t MakeCookie(uint32_t handle, CookieKind kind, uint32_t slot) {
  return (uint64_t{handle} << 32) |
         (uint64_t{static_cast<uint32_t>(kind)} << 30) | slot;
}
inline uint32_t CookieHandle(uint64_t c) {
  return static_cast<uint32_t>(c >> 32);
}
inline CookieKind CookieKindOf(uint64_t c) {
  return static_cast<CookieKind>((c >> 30) & 3);
}
inline uint32_t CookieSlot(uint64_t c) {
  return static_cast<uint32_t>(c & 0x3fffffff);
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_OBJECTS_H_
