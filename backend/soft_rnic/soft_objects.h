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

// The fabric responder's place in a UC message (net/net_responder.cc):
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
  NetRespState net{};  // with a fabric: the UC responder's message

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
