// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The responder side of one message, in the order of rxe's resp.c: QP state
// -> (UD) Q_Key -> operation allowed by the QP -> receive resources -> rkey,
// access and range -> receive buffer checks -> execute. Every check runs
// before any byte moves. RC turns failures into NAKs (and the responder QP
// into ERR); UC and UD drop the message silently.
#include <cstring>

#include "backend/rnic/roce_grh.h"
#include "backend/soft_rnic/qp_state.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {


uint32_t RemoteAccessFor(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return kAccessRemoteWrite;
    case WrOpcode::kRdmaRead:
      return kAccessRemoteRead;
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd:
      return kAccessRemoteAtomic;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv:
    case WrOpcode::kLocalInv:  // local: the requester executes them
    case WrOpcode::kBindMw:
    case WrOpcode::kRegMr:
    case WrOpcode::kWait:    // never posted: PostSend refuses cross-channel
    case WrOpcode::kEnable:  // opcodes (soft_post.cc)
      return 0;
  }
  return 0;
}


}  // namespace

std::optional<soft::RecvEntry> SoftRnic::PeekReceive(const soft::Qp* d) {
  const soft::RecvRing& ring = d->srq ? d->srq->ring : d->rq;
  if (ring.empty()) return std::nullopt;
  return ring.front();
}

void SoftRnic::PopReceive(soft::Qp* d) {
  if (d->srq != nullptr) {
    d->srq->ring.Pop();
  } else {
    d->rq.Pop();
  }
}

void SoftRnic::CompleteRecv(soft::Qp* d, uint64_t wr_id, WcStatus status,
                            WcOpcode opcode, uint32_t byte_len, uint32_t flags,
                            uint32_t imm, uint32_t src_qpn, uint64_t now) {
  Completion c;
  c.wr_id = wr_id;
  c.status = status;
  c.opcode = opcode;
  c.byte_len = byte_len;
  c.imm_data = imm;
  c.qpn = d->qpn;
  c.src_qpn = src_qpn;
  c.wc_flags = flags;
  c.timestamp_ns = now;
  PushCompletion(d->recv_cq, c);
}

SoftRnic::ExecResult SoftRnic::Respond(soft::Qp* q, const soft::SqSlot& slot,
                                       soft::Qp* d, const SegList& local,
                                       uint64_t now) {
  const SendWr& wr = slot.wr;
  const bool rc = q->type == QpType::kRc;
  const bool ud = q->type == QpType::kUd;
  const WrOpcode op = wr.opcode;
  const bool is_send = op == WrOpcode::kSend || op == WrOpcode::kSendWithImm ||
                       op == WrOpcode::kSendWithInv;
  const bool is_atomic =
      op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
  const bool has_imm =
      op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
  const bool needs_recv = is_send || op == WrOpcode::kRdmaWriteWithImm;
  const uint64_t len = local.total;
  const ExecResult drop{Reply::kAck, false};

  // 1. A QP that is not receiving does not answer (RC times out).
  if (!soft::Receiving(d->state)) return ExecResult{Reply::kNoResponse, false};

  // 2. UD: the Q_Key must match (a WR Q_Key with the high bit set means
  // "use the sending QP's Q_Key").
  if (ud) {
    uint32_t qkey =
        (wr.remote_qkey & 0x80000000u) ? q->attr.qkey : wr.remote_qkey;
    if (qkey != d->attr.qkey) return drop;
  }

  // 3. The responder QP must allow the operation at all.
  const uint32_t remote_access = RemoteAccessFor(op);
  if ((d->attr.access_flags & remote_access) != remote_access ||
      ((op == WrOpcode::kRdmaRead || is_atomic) &&
       d->attr.max_dest_rd_atomic == 0)) {
    return rc ? ExecResult{Reply::kNakInvReq, true} : drop;
  }

  // 4. Receive resources.
  std::optional<soft::RecvEntry> rwr;
  if (needs_recv) {
    rwr = PeekReceive(d);
    if (!rwr) return rc ? ExecResult{Reply::kRnr, false} : drop;
  }

  // 5. Remote key, access and range; atomics need an aligned target. A
  // zero-length RDMA names no memory and checks no key (as in rxe).
  Seg remote{};
  if (remote_access != 0) {
    if (is_atomic && (wr.remote_addr & 7) != 0) {
      return ExecResult{Reply::kNakInvReq, true};
    }
    uint64_t rlen = is_atomic ? 8 : len;
    if (rlen > 0 &&
        !ResolveRemote(d, wr.rkey, wr.remote_addr, rlen, remote_access,
                       &remote)) {
      return rc ? ExecResult{Reply::kNakAccess, true} : drop;
    }
  }

  // 6. The receive buffer of a SEND: keys, then room (UD also needs room for
  // the GRH). WRITE_WITH_IMM consumes a WQE but never touches its buffers,
  // so its SGEs are not looked at (applications post zero-SGE receives).
  SegList rsegs;
  const uint64_t recv_wr_id = rwr ? rwr->wr_id : 0;
  if (is_send) {
    const soft::Pd* rpd = d->srq ? d->srq->pd : d->pd;
    WcStatus st = ResolveLocal(rpd, rwr->sge.data(),
                               static_cast<int>(rwr->sge.size()),
                               kAccessLocalWrite, &rsegs);
    if (st == WcStatus::kSuccess && len + (ud ? kGrhBytes : 0) > rsegs.total) {
      st = WcStatus::kLocLenErr;
    }
    if (st != WcStatus::kSuccess) {
      PopReceive(d);
      CompleteRecv(d, recv_wr_id, st, WcOpcode::kRecv, 0, 0, 0, q->qpn, now);
      Reply reply =
          st == WcStatus::kLocLenErr ? Reply::kNakInvReq : Reply::kNakRemOp;
      // A UD QP hears from anyone: a sender's oversized message costs the
      // receiver one WQE, not its QP. Its own bad WQE still breaks it.
      bool responder_error = !(ud && st == WcStatus::kLocLenErr);
      return ExecResult{rc ? reply : Reply::kAck, responder_error};
    }
  }

  // 7. Execute.
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv: {
      uint64_t off = 0;
      if (ud) {
        uint8_t grh[kGrhBytes];
        BuildRoceGrh(slot.ud_av, static_cast<uint32_t>(len), grh);
        CopyInto(rsegs, 0, grh, kGrhBytes);
        off = kGrhBytes;
      }
      Copy(rsegs.span(), off, local.span(), len);
      off += len;
      PopReceive(d);
      uint32_t flags =
          (ud ? uint32_t{kWcGrh} : 0u) | (has_imm ? uint32_t{kWcWithImm} : 0u);
      uint32_t imm = has_imm ? wr.imm_data : 0;
      if (op == WrOpcode::kSendWithInv) {
        // After placing the data (rxe's execute): a bound type 2 window or
        // a valid fast-registration MR of this QP's PD, else the receive
        // fails and the QP breaks (class J: the requester was
        // acknowledged).
        if (!Invalidate(wr.invalidate_rkey, d->pd, false)) {
          CompleteRecv(d, recv_wr_id, WcStatus::kRemInvReqErr, WcOpcode::kRecv,
                       0, 0, 0, q->qpn, now);
          return ExecResult{Reply::kAck, true};
        }
        flags |= kWcWithInv;
        imm = wr.invalidate_rkey;
      }
      CompleteRecv(d, recv_wr_id, WcStatus::kSuccess, WcOpcode::kRecv,
                   static_cast<uint32_t>(off), flags, imm, q->qpn, now);
      break;
    }
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      if (len > 0) {
        Copy(std::span<const Seg>(&remote, 1), 0, local.span(), len);
      }
      if (op == WrOpcode::kRdmaWriteWithImm) {
        PopReceive(d);
        CompleteRecv(d, recv_wr_id, WcStatus::kSuccess,
                     WcOpcode::kRecvRdmaWithImm, static_cast<uint32_t>(len),
                     kWcWithImm, wr.imm_data, q->qpn, now);
      }
      break;
    case WrOpcode::kRdmaRead:
      if (len > 0) {
        Copy(local.span(), 0, std::span<const Seg>(&remote, 1), len);
      }
      break;
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd: {
      // 8 aligned bytes never cross a page: host bytes (ResolveRemote).
      uint64_t orig;
      std::memcpy(&orig, remote.ptr, 8);
      uint64_t next = op == WrOpcode::kAtomicFetchAdd ? orig + wr.compare_add
                      : orig == wr.compare_add        ? wr.swap
                                                      : orig;
      std::memcpy(remote.ptr, &next, 8);
      CopyInto(local, 0, reinterpret_cast<const uint8_t*>(&orig), 8);
      break;
    }
    case WrOpcode::kLocalInv:  // executed by the requester
    case WrOpcode::kBindMw:
    case WrOpcode::kRegMr:
    case WrOpcode::kWait:  // never posted (soft_post.cc)
    case WrOpcode::kEnable:
      break;
  }
  return ExecResult{Reply::kAck, false};
}

}  // namespace vrdma
