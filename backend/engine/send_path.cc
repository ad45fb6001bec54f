// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SendPath (send_path.h): send queues -> scheduler stage -> RNIC, and the
// stage's reports -> guest CQEs. Data-path thread.
#include "backend/engine/send_path.h"

#include <cstring>

#include "backend/engine/fast_reg.h"
#include "backend/engine/local_access.h"
#include "backend/engine/mw_access.h"
#include "backend/engine/wqe_decoder.h"

namespace vrdma::engine {

WcStatus SendPath::CheckSendSemantics(const QpObj& qp, SendWr& wr,
                                      uint32_t ah_handle) const {
  const VmContext& vm = *qp.vm;
  if (qp.type == QpType::kUd) {
    const AhObj* ah = vm.ahs.Lookup(ah_handle);
    if (ah == nullptr || ah->pd != qp.pd) return WcStatus::kLocQpOpErr;
    wr.ah = ah->rnic;
  }
  // Window and registration operations carry no SGEs (the decoder saw to it).
  if (wr.opcode == WrOpcode::kBindMw) return CheckMwBind(vm, &wr.bind);
  if (wr.opcode == WrOpcode::kLocalInv) {
    return CheckLocalInvalidate(vm, qp.sq_limits.fast_reg, wr.invalidate_rkey);
  }
  if (wr.opcode == WrOpcode::kRegMr) return CheckFastReg(*qp.vm, qp, &wr.reg);
  if (wr.send_flags & kSendInline) return WcStatus::kSuccess;
  // READ and atomics write into the local buffers.
  const bool writes_local = wr.opcode == WrOpcode::kRdmaRead ||
                            wr.opcode == WrOpcode::kAtomicCmpSwp ||
                            wr.opcode == WrOpcode::kAtomicFetchAdd;
  return CheckLocalSges(vm, qp.pd, KernelRam(vm, &qp), writes_local, wr.sge.data(),
                        &wr.num_sge);
}

SendSlot& SendPath::TakeSlot(QpObj& qp, uint64_t guest_wr_id, WrOpcode op,
                             bool signaled) {
  SendSlot& slot = qp.slots[qp.sq_seq & qp.slot_mask];
  slot.guest_wr_id = guest_wr_id;
  slot.opcode = op;
  slot.signaled = signaled;
  ++qp.sq_seq;
  completions_.Expect(*qp.send_cq, 1);
  return slot;
}

bool SendPath::ProcessSq(QpObj& qp) {
  switch (qp.state) {
    case QpState::kRts:
      break;
    case QpState::kErr:
    case QpState::kSqe: {
      const ErrorFlush::SendFlush f = errors_.FlushSq(qp);
      if (f.done) Unschedule(qp);
      return f.did;
    }
    default:
      // Not ready to send (or draining): WQEs wait in the ring; the
      // transition to RTS puts the QP back on the list.
      Unschedule(qp);
      return false;
  }
  if (qp.sq_failing) {
    // A bad WQE waits in the stage behind the WRs before it; nothing after
    // it is taken (its failure moves the QP to ERR and flushes the ring).
    Unschedule(qp);
    return false;
  }
  uint32_t prod = 0;
  if (!qp.sq.LoadProducer(&prod)) {
    errors_.RingError(qp);
    return true;
  }
  VmContext& vm = *qp.vm;
  uint32_t head = qp.sq_head;
  uint32_t budget = options_.sq_budget;
  bool did = false;
  alignas(64) uint8_t header[kSendWqeHeaderBytes];
  const policy::Nanos now = head != prod ? turn_.Now() : 0;
  while (head != prod && budget > 0) {
    --budget;
    // The WQE is decoded straight into the stage's FIFO slot.
    sched::Stage::Slot slot = stage_.Reserve(qp.flow);
    if (slot.wr == nullptr) {
      stage_.Kick(qp.flow, now);  // post what the FIFO holds, then retry
      slot = stage_.Reserve(qp.flow);
      if (slot.wr == nullptr) break;  // full: take the rest next turn
    }
    SendWr& wr = *slot.wr;
    const uint8_t* elem = qp.sq.element(head);
    std::memcpy(header, elem, kSendWqeHeaderBytes);
    uint32_t ah_handle = 0, payload_bytes = 0;
    WcStatus st = DecodeSendHeaderInto(header, qp.sq_limits, &wr, &ah_handle,
                                       &payload_bytes);
    if (st == WcStatus::kSuccess) {
      // One read of the guest's payload: SGEs into the WR, inline bytes
      // into the slot's own buffer.
      uint8_t* dst = (wr.send_flags & kSendInline)
                         ? slot.inline_buf
                         : reinterpret_cast<uint8_t*>(wr.sge.data());
      if (payload_bytes > 0) {
        std::memcpy(dst, elem + kSendWqeHeaderBytes, payload_bytes);
      }
      st = DecodeSendPayloadInto(dst, qp.sq_limits, &wr);
    }
    if (st == WcStatus::kSuccess) st = CheckSendSemantics(qp, wr, ah_handle);
    const bool signaled = qp.sq_sig_all || (wr.send_flags & kSendSignaled);
    const uint32_t tag = qp.sq_seq & qp.slot_mask;
    if (st != WcStatus::kSuccess) {
      // It fails after every WR before it, as on a native QP: the stage
      // reports it (OnMarkerReached) once they are done.
      if (!stage_.SubmitMarker(qp.flow, tag, st, now)) break;  // next turn
      (void)TakeSlot(qp, wr.wr_id, wr.opcode, signaled);
      ++vm.stats.wqes_rejected;
      qp.sq_failing = true;
      head = qp.sq.Next(head);
      did = true;
      break;
    }
    const policy::WrInfo info{vm.id, qp.flow, sched::WrKindOf(wr.opcode),
                              static_cast<uint32_t>(wr.total_length()),
                              signaled};
    (void)TakeSlot(qp, wr.wr_id, wr.opcode, signaled);
    // The stage owns the wr_id from here (it sets it when posting).
    stage_.Commit(qp.flow, tag, info, now);
    ++vm.stats.wqes_posted;
    head = qp.sq.Next(head);
    did = true;
  }
  if (head != qp.sq_head) {
    qp.sq_head = head;
    qp.sq.StoreConsumer(head);  // release: the slots may be reused
  }
  if (qp.sq_failing) {
    Unschedule(qp);
  } else if (head == prod) {
    Drained(qp, did);
  }
  if (did) stage_.Kick(qp.flow, now);  // this QP's batch: one post list
  return did;
}

void SendPath::Drained(QpObj& qp, bool took) {
  if (took) {
    qp.sq_quiet_turns = 0;
  } else if (++qp.sq_quiet_turns >= options_.watch_turns) {
    Unschedule(qp);
    return;
  }
  if (qp.sq_watched) return;
  if (options_.watch_turns == 0 || qp.vm->sq_watched >= options_.watch_per_vm) {
    Unschedule(qp);
    return;
  }
  qp.sq_watched = true;
  ++qp.vm->sq_watched;
}

void SendPath::Unschedule(QpObj& qp) {
  pending_sq_.Remove(&qp);
  if (qp.sq_watched) {
    qp.sq_watched = false;
    --qp.vm->sq_watched;
  }
  qp.sq_quiet_turns = 0;
}

void SendPath::CloseSendWindow(QpObj& qp) {
  completions_.Retire(*qp.send_cq, qp.Unretired());
  qp.sq_done = qp.sq_seq;
  qp.sq_failing = false;
}

void SendPath::RetireOldest(QpObj& qp) {
  if (qp.Unretired() == 0) return;
  ++qp.sq_done;
  completions_.Retire(*qp.send_cq, 1);
}

// ------------------------------------------------- the stage's reports

void SendPath::OnWrDone(QpObj& qp, uint32_t tag, WcStatus status,
                        uint32_t byte_len) {
  // The stage reports WRs in the order they were consumed.
  const SendSlot& s = qp.slots[tag & qp.slot_mask];
  RetireOldest(qp);
  const bool ok = status == WcStatus::kSuccess;
  if (!ok && status != WcStatus::kWrFlushErr && qp.state != QpState::kErr) {
    errors_.NoteRnicError(qp);  // the RNIC moved its QP to ERR: flush next
  }
  // Unsignaled WRs stay silent unless they fail (errors and flushes are
  // always reported, as by an RNIC).
  if (ok && !s.signaled) return;
  ib_uverbs_wc wc{};
  wc.wr_id = s.guest_wr_id;
  wc.status = static_cast<uint32_t>(status);
  wc.opcode = static_cast<uint32_t>(SendCompletionOpcode(s.opcode));
  wc.byte_len = ok ? byte_len : 0;
  wc.qp_num = qp.qpn;
  wc.port_num = 1;
  (void)completions_.WriteCqe(*qp.send_cq, wc, /*solicited=*/!ok);
}

void SendPath::OnMarkerReached(QpObj& qp, uint32_t tag, WcStatus status) {
  const SendSlot s = qp.slots[tag & qp.slot_mask];
  // Every WR before the bad one has completed: now it fails, the QP goes
  // to ERR, and what follows in the ring is flushed (ErrorFlush::FlushSq).
  errors_.EnterError(qp);
  errors_.DrainSendSide(qp);
  RetireOldest(qp);
  completions_.WriteErrorCqe(*qp.send_cq, s.guest_wr_id, qp.qpn,
                             SendCompletionOpcode(s.opcode), status);
}

void SendPath::OnPostRefused(QpObj& qp) {
  // The RNIC left RTS on its own (an error it has not completed yet, or a
  // state change): treat it as an RNIC error; the flush reports every WR.
  if (qp.state != QpState::kErr) errors_.NoteRnicError(qp);
}

}  // namespace vrdma::engine
