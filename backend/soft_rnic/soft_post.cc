// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Posting: checks a real RNIC makes at post time (QP state, queue space,
// opcode for the service type, SGE count, inline size), then a copy of the
// WR into a preallocated ring slot. Nothing executes here: Progress() does.
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

bool OpcodeAllowed(QpType type, WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return type != QpType::kUd;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd:
      return type == QpType::kRc;
    // Memory windows (§4.7): connected QPs (rxe binds on RC and UC; LOCAL_INV
    // is local to the QP and goes with it).
    case WrOpcode::kLocalInv:
    case WrOpcode::kBindMw:
    case WrOpcode::kSendWithInv:
    // Fast registration (§4.8): RC and UC, as rxe.
    case WrOpcode::kRegMr:
      return type == QpType::kRc || type == QpType::kUc;
    case WrOpcode::kWait:
    case WrOpcode::kEnable:
      return false;  // cross-channel: RnicLimits::cross_channel is false here
  }
  return false;
}

// Whether the RNIC has what op needs: windows for a bind, fast
// registration for kRegMr, either for an invalidation (of a window or of
// a fast-registration MR).
bool Supported(const RnicLimits& l, WrOpcode op) {
  switch (op) {
    case WrOpcode::kBindMw:
      return l.max_mw > 0;
    case WrOpcode::kRegMr:
      return l.max_fr_mr > 0;
    case WrOpcode::kLocalInv:
    case WrOpcode::kSendWithInv:
      return l.max_mw > 0 || l.max_fr_mr > 0;
    default:
      return true;
  }
}

bool IsAtomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
}

// Copies wr but its unused SGE slots: a SendWr is 612 bytes, 512 of them
// room for kMaxSge SGEs, and copying it whole was two thirds of PostSend's
// time for a one-SGE WR. Nothing reads a slot's SGEs past num_sge.
void CopyUsedPart(const SendWr& wr, SendWr* to) {
  static_assert(std::is_trivially_copyable_v<SendWr> &&
                std::is_standard_layout_v<SendWr>);
  constexpr size_t kHead = offsetof(SendWr, sge);
  constexpr size_t kTail = offsetof(SendWr, inline_data);
  std::memcpy(static_cast<void*>(to), &wr, kHead);
  std::memcpy(to->sge.data(), wr.sge.data(), wr.num_sge * sizeof(Sge));
  std::memcpy(reinterpret_cast<uint8_t*>(to) + kTail,
              reinterpret_cast<const uint8_t*>(&wr) + kTail,
              sizeof(SendWr) - kTail);
}

// Posting is allowed from RTS on (SQD queues, SQE/ERR flush).
bool SendPostable(QpState s) {
  return s == QpState::kRts || s == QpState::kSqd || s == QpState::kSqe ||
         s == QpState::kErr;
}

}  // namespace

int SoftRnic::PostSend(RnicQp qp, std::span<const SendWr> wrs,
                       Status* first_error) {
  Status err = Status::kOk;
  int posted = 0;
  soft::Qp* q = qps_.Get(qp.id);
  if (q == nullptr) {
    err = Status::kBadHandle;
  } else if (!SendPostable(q->state)) {
    err = Status::kBadState;
  }
  // With a line rate a message may go on the wire from the time it was
  // posted (the clock is read only then).
  const uint64_t now = err == Status::kOk && wire_.limited() ? Now() : 0;
  for (; err == Status::kOk && posted < static_cast<int>(wrs.size());
       ++posted) {
    const SendWr& wr = wrs[posted];
    bool is_inline = (wr.send_flags & kSendInline) != 0;
    if (!OpcodeAllowed(q->type, wr.opcode) ||
        wr.num_sge > q->caps.max_send_sge ||
        !Supported(limits_, wr.opcode)) {
      err = Status::kInvalid;
      break;
    }
    // A bind, a registration or an invalidation moves no bytes.
    if (IsLocalOp(wr.opcode) && (wr.num_sge != 0 || is_inline)) {
      err = Status::kInvalid;
      break;
    }
    if (is_inline &&
        (wr.inline_len > q->caps.max_inline_data ||
         (wr.inline_len > 0 && wr.inline_data == nullptr) ||
         wr.opcode == WrOpcode::kRdmaRead || IsAtomic(wr.opcode))) {
      err = Status::kInvalid;
      break;
    }
    // Atomics operate on exactly one 8-byte local buffer.
    if (IsAtomic(wr.opcode) && (wr.num_sge != 1 || wr.sge[0].length != 8)) {
      err = Status::kInvalid;
      break;
    }
    const soft::Ah* ah = nullptr;
    if (q->type == QpType::kUd) {
      ah = ahs_.Get(wr.ah.id);
      if (ah == nullptr || ah->pd != q->pd) {
        err = Status::kInvalid;
        break;
      }
    }
    if (q->sq.full()) {
      err = Status::kNoResource;
      break;
    }
    uint32_t pos = q->sq.next_position();
    soft::SqSlot* slot = q->sq.Push();
    CopyUsedPart(wr, &slot->wr);  // num_sge <= max_send_sge <= kMaxSge
    if (is_inline) {
      // The caller's pointer dies when PostSend returns: keep the bytes.
      uint8_t* buf = q->inline_pool.data() +
                     static_cast<size_t>(pos) * q->caps.max_inline_data;
      if (wr.inline_len > 0) std::memcpy(buf, wr.inline_data, wr.inline_len);
      slot->wr.inline_data = buf;
    } else {
      slot->wr.inline_data = nullptr;
    }
    if (ah != nullptr) slot->ud_av = ah->av;
    slot->posted_ns = now;
    slot->sent = false;
  }
  if (posted > 0) {
    // An RC QP on a fabric waiting for ACKs keeps sending new work (its
    // window, net/net_rc_requester.cc); an RNR wait holds it.
    if (q->list == soft::Qp::List::kTimer && !q->nreq.rnr_wait &&
        IsNetRc(q)) {
      Deactivate(q);
    }
    Activate(q);
  }
  if (first_error != nullptr) *first_error = err;
  return posted;
}

int SoftRnic::PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
                       Status* first_error) {
  Status err = Status::kOk;
  int posted = 0;
  soft::Qp* q = qps_.Get(qp.id);
  if (q == nullptr) {
    err = Status::kBadHandle;
  } else if (q->srq != nullptr) {
    err = Status::kInvalid;  // receives go to the SRQ
  } else if (q->state == QpState::kReset) {
    err = Status::kBadState;
  }
  for (; err == Status::kOk && posted < static_cast<int>(wrs.size());
       ++posted) {
    const RecvWr& wr = wrs[posted];
    if (wr.num_sge > q->caps.max_recv_sge) {
      err = Status::kInvalid;
      break;
    }
    if (!q->rq.Push(wr)) {
      err = Status::kNoResource;
      break;
    }
  }
  // A QP in ERR flushes new receives too (in Progress, asynchronously).
  if (posted > 0 && q->state == QpState::kErr) Activate(q);
  if (first_error != nullptr) *first_error = err;
  return posted;
}

int SoftRnic::PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs,
                          Status* first_error) {
  Status err = Status::kOk;
  int posted = 0;
  soft::Srq* s = srqs_.Get(srq.id);
  if (s == nullptr) err = Status::kBadHandle;
  for (; err == Status::kOk && posted < static_cast<int>(wrs.size());
       ++posted) {
    const RecvWr& wr = wrs[posted];
    if (wr.num_sge > s->max_sge) {
      err = Status::kInvalid;
      break;
    }
    if (!s->ring.Push(wr)) {
      err = Status::kNoResource;
      break;
    }
  }
  if (first_error != nullptr) *first_error = err;
  return posted;
}

}  // namespace vrdma
