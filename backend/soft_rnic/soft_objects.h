// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The objects a SoftRnic keeps, in one place so every concern file (MRs,
// QP states, requester, responder, CQs) sees the same layout. All queue
// storage is sized at creation; nothing here grows on the data path.
#ifndef VRDMA_BACKEND_SOFT_RNIC_SOFT_OBJECTS_H_
#define VRDMA_BACKEND_SOFT_RNIC_SOFT_OBJECTS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "backend/rnic/rnic.h"
#include "backend/soft_rnic/fixed_ring.h"
#include "backend/soft_rnic/recv_ring.h"

namespace vrdma::soft {

struct Pd {
  uint32_t handle = 0;
  uint32_t refs = 0;  // MRs, QPs, SRQs and AHs using it
};

struct Mr {
  Pd* pd = nullptr;
  uint8_t* host = nullptr;  // host address of iova
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;  // 0 when no remote access was granted
  uint32_t num_mw = 0;  // windows bound to it (DeregMr refuses while > 0)
};

// A fast-registration MR (rxe_mr.c's IB_MR_TYPE_MEM_REG): invalid until a
// kRegMr maps it onto pages of ordinary MRs of its PD, invalid again after
// an invalidation. The page list is copied when the kRegMr runs into room
// sized at AllocFrMr; each page's lkey is resolved again at every access
// (SoftRnic::FrPageHost), so a backing MR deregistered since fails the
// access, not the registration.
struct FrMr {
  Pd* pd = nullptr;
  uint32_t key = 0;        // lkey == rkey: index << 8 | the last key byte
  bool valid = false;
  uint64_t iova = 0;       // valid: [iova, iova + length) ...
  uint64_t length = 0;
  uint32_t access = 0;     // ... with these rights
  uint32_t num_pages = 0;  // pages[0..num_pages): page i holds the iova
                           // bytes from (iova & ~4095) + 4096 * i
  std::vector<FrPage> pages;  // max_pages entries, allocated at AllocFrMr
};

// A memory window (rxe_mw.c's states): type 1 is always valid and bound
// when length > 0; type 2 is free or valid (bound, to the QP bound_qpn).
struct Mw {
  enum class State : uint8_t { kFree, kValid };
  Pd* pd = nullptr;
  uint8_t type = 1;
  State state = State::kValid;
  uint32_t rkey = 0;       // index << 8 | the last bind's key byte
  Mr* mr = nullptr;        // while bound (length > 0)
  uint64_t addr = 0;       // iova, inside mr
  uint64_t length = 0;
  uint32_t access = 0;     // kAccessRemote*
  uint32_t bound_qpn = 0;  // type 2: the only QP remote access may use
};

struct Cq {
  uint32_t handle = 0;
  FixedRing<Completion> ring;
  uint32_t refs = 0;  // QPs completing here
  // A real CQ that overflows goes to an error state and stops accepting
  // completions; the consumer has lost work and must find out.
  bool overflowed = false;
  uint64_t dropped = 0;
};

struct Srq {
  uint32_t handle = 0;
  Pd* pd = nullptr;
  uint32_t max_sge = 0;
  RecvRing ring;
  uint32_t refs = 0;  // QPs attached
};

struct Ah {
  Pd* pd = nullptr;
  AddressVector av{};
};

// One send queue entry: a copy of the posted WR, plus what must be
// captured at post time because it may change or vanish later (the AH's
// address vector; inline bytes live in Qp::inline_pool at the same ring
// position).
struct SqSlot {
  SendWr wr{};
  AddressVector ud_av{};
  uint64_t posted_ns = 0;  // with a line rate: when it was posted
  // RC on a fabric: the PSNs it was given when first sent ([first_psn,
  // first_psn + npsn): its packets, or a READ's response packets).
  bool sent = false;
  uint32_t first_psn = 0;
  uint32_t npsn = 0;
};

// The requester of an RC QP on a fabric (net/net_rc_requester.cc): several
// WQEs in flight, acknowledged in order, resent go-back-N.
struct NetReqState {
  uint32_t next = 0;       // WQEs from the SQ front sent (a go-back rewinds it)
  uint32_t from_pkt = 0;   // the packet of WQE `next` to send from
  uint32_t resp_pkts = 0;  // response packets of the front READ placed
  uint32_t front_acked = 0;  // packets of the front SEND/WRITE acknowledged
  bool read_gap = false;     // the front READ was sent again for a gap
  uint8_t retry_left = 0;  // both reset when an ACK makes progress
  uint8_t rnr_left = 0;
  bool started = false;    // retry_left and rnr_left set
  bool rnr_wait = false;   // an RNR NAK: nothing is sent before rnr_until_ns
  uint64_t rnr_until_ns = 0;
  uint64_t ack_deadline_ns = 0;  // with WQEs in flight: the ACK timeout
};

// Requester progress of the WQE at the head of the SQ.
struct RequesterState {
  enum class Wait : uint8_t { kNone, kRnr, kAckTimeout };
  bool started = false;  // counters below initialised for this WQE
  uint8_t rnr_left = 0;
  uint8_t retry_left = 0;
  Wait wait = Wait::kNone;
  uint64_t wait_until_ns = 0;
};

// The fabric responder's place in a message (net/net_responder.cc):
// packets arrive one at a time, so what a message's first packet set up
// (its receive WQE, a WRITE's RETH) waits here for the rest.
struct NetRespState {
  enum class Kind : uint8_t { kNone, kSend, kWrite };
  Kind in_msg = Kind::kNone;  // a message in progress
  uint64_t offset = 0;        // its bytes placed so far
  // A WRITE's RETH, from its first packet.
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  // A receive WQE a SEND's first packet took from the RQ or SRQ. A UC
  // message that is dropped does not consume it (IBA 9.7.5.1): it stays
  // here for the QP's next message, and is flushed with the RQ.
  bool has_wqe = false;
  uint8_t wqe_num_sge = 0;
  uint64_t wqe_id = 0;
  std::array<Sge, kMaxSge> wqe_sge{};
  // RC (net/net_rc_responder.cc).
  bool nak_sent = false;    // a PSN sequence NAK for the current gap
  uint32_t unacked = 0;     // packets executed since the last ACK
  // Atomics executed, so a duplicate is answered, never executed again
  // (max_dest_rd_atomic of them, the newest kept).
  struct SavedAtomic {
    bool valid = false;
    uint32_t psn = 0;
    uint64_t orig = 0;
  };
  std::array<SavedAtomic, 16> atomics{};
  uint32_t next_atomic = 0;
};

struct Qp {
  uint32_t qpn = 0;  // also the handle
  QpType type = QpType::kRc;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  QpCaps caps{};
  bool sq_sig_all = false;

  QpState state = QpState::kReset;
  QpAttr attr{};

  FixedRing<SqSlot> sq;
  std::vector<uint8_t> inline_pool;  // caps.max_inline_data per SQ slot
  RecvRing rq;
  RequesterState req{};
  NetRespState net{};   // with a fabric: the responder's message
  NetReqState nreq{};   // with a fabric, RC: the requester's window

  // Which scheduling list of the SoftRnic the QP is on (at most one).
  enum class List : uint8_t { kNone, kActive, kTimer };
  List list = List::kNone;
  Qp* prev = nullptr;
  Qp* next = nullptr;
};

// An intrusive doubly linked list of QPs: O(1) insert and removal, so a
// QP destroyed or moved to ERR leaves its list at once.
struct QpList {
  Qp* head = nullptr;
  Qp* tail = nullptr;
  uint32_t count = 0;

  void PushBack(Qp* q) {
    q->next = nullptr;
    q->prev = tail;
    if (tail != nullptr) {
      tail->next = q;
    } else {
      head = q;
    }
    tail = q;
    ++count;
  }
  void Remove(Qp* q) {
    if (q->prev != nullptr) {
      q->prev->next = q->next;
    } else {
      head = q->next;
    }
    if (q->next != nullptr) {
      q->next->prev = q->prev;
    } else {
      tail = q->prev;
    }
    q->prev = q->next = nullptr;
    --count;
  }
};

}  // namespace vrdma::soft

#endif  // VRDMA_BACKEND_SOFT_RNIC_SOFT_OBJECTS_H_
