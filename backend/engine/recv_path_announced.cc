// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Receives a local sender announced, and how a split SEND is put back
// together (docs/scheduler.md, "Split SEND").
//
// When every message a receive queue can get comes from a QP of this
// engine (an RC or UC QP whose peer is local), the queue is fed
// "announced": its sender's scheduler stage describes each receive-
// consuming piece (a whole SEND, a SEND piece, the last piece of a
// WRITE_WITH_IMM) just before it posts it, and each description becomes
// exactly one RNIC receive, posted in that order: a slice of the guest WQE
// the piece lands in (the first piece of a message takes the next WQE of
// the ring). The RNIC matches messages to receives in order, so piece k of
// a SEND lands at its offset in the guest's buffer; the WQE completes once
// (RecvSlot) when its last slice is posted and every slice has completed,
// with the message's length, the last piece's immediate and the first
// error. A description that finds no guest WQE waits in the plan until the
// guest posts one (the sender's piece meanwhile meets RNR, as natively);
// a full plan makes the sender wait (PrepareReceive returns false) until
// descriptions are posted. Flush or reset drops the plan (ErrorFlush,
// RecvPath::Reset); slices complete through recv_queue.h.
#include <cstring>

#include "backend/engine/recv_path.h"
#include "backend/engine/recv_queue.h"
#include "backend/scheduler/split.h"

namespace vrdma::engine {

QpObj* RecvPath::LocalPeer(const QpObj& qp) const {
  if (qp.type == QpType::kUd || !(qp.attrs.mask & kQpDestQpn)) return nullptr;
  VmContext* vm = nullptr;
  QpObj* peer = vms_.FindAnyQp(qp.attrs.dest_qpn, &vm);
  if (peer == nullptr || peer == &qp || peer->type != qp.type) return nullptr;
  // The QPN alone could be a remote host's: the destination GID must be
  // one of the peer VM's own.
  for (const Gid& g : vm->config.gids) {
    if (g == qp.attrs.ah.dgid) return peer;
  }
  return nullptr;
}

void RecvPath::ChooseReceiveMode(QpObj& qp) {
  RecvQueue& rq = qp.rq;
  if (qp.srq != nullptr) return;
  // At RTR, before any receive is posted (Replenish posts none in RESET or
  // INIT): an RC/UC QP accepts messages only from its destination QP, so a
  // local destination is the only sender there can be.
  QpObj* sender = LocalPeer(qp);
  rq.announced = sender != nullptr;
  rq.sender = sender ? sender->flow : sched::kNoFlow;
  if (sender != nullptr) UpdateReassembly(*sender);
}

void RecvPath::UpdateReassembly(QpObj& sender) {
  QpObj* dest = LocalPeer(sender);
  const bool yes = dest != nullptr && dest->srq == nullptr &&
                   dest->rq.announced && dest->rq.sender == sender.flow;
  stage_.SetReceiverReassembles(sender.flow, yes);
}

bool RecvPath::GuestWqeWaits(const RecvQueue& rq) const {
  if (rq.plan_count != 0) return false;  // earlier messages wait for WQEs
  uint32_t prod = 0;
  // An unreadable ring: let the piece go; PostAnnounced fails the QP.
  if (!rq.ring.LoadProducer(&prod)) return true;
  return prod != rq.head;
}

bool RecvPath::AnnounceReceive(RecvQueue& rq, const sched::ReceivePiece& piece,
                               bool hold) {
  if (rq.plan_count == RecvQueue::kPlanCapacity ||
      (hold && piece.first && !GuestWqeWaits(rq))) {
    // Woken by PostAnnounced once descriptions are posted or, held, once
    // the guest has posted a WQE (the sweep looks, as for a plan).
    rq.sender_waits = true;
    sweep_rq_.PushBack(&rq);
    return false;
  }
  AnnouncedPiece& p =
      rq.plan[(rq.plan_head + rq.plan_count) % RecvQueue::kPlanCapacity];
  p.offset = piece.offset;
  p.length = piece.length;
  p.total = piece.total;
  p.first = piece.first;
  p.last = piece.last;
  p.lands = piece.lands_in_buffer;
  ++rq.plan_count;
  (void)PostAnnounced(rq);
  return true;
}

bool RecvPath::PostAnnounced(RecvQueue& rq) {
  QpObj& qp = *rq.qp;
  const VmContext& vm = *qp.vm;
  bool did = false;
  alignas(64) uint8_t header[kRecvWqeHeaderBytes];
  alignas(64) uint8_t payload[kMaxRecvPayloadBytes];
  while (rq.plan_count > 0 && rq.posted < rq.depth) {
    const AnnouncedPiece& p = rq.plan[rq.plan_head];
    if (p.first) {
      // The message's WQE: the next one of the ring, read once.
      uint32_t prod = 0;
      if (!rq.ring.LoadProducer(&prod)) {
        errors_.RingError(qp);
        return true;
      }
      if (rq.head == prod) break;  // the guest has not posted it yet
      const uint32_t slot = rq.head;
      const uint8_t* elem = rq.ring.element(slot);
      std::memcpy(header, elem, kRecvWqeHeaderBytes);
      RecvWr& wr = rq.open_wqe;
      uint32_t payload_bytes = 0;
      WcStatus st = DecodeRecvHeader(header, rq.limits, &wr, &payload_bytes);
      if (st == WcStatus::kSuccess) {
        std::memcpy(payload, elem + kRecvWqeHeaderBytes, payload_bytes);
        st = DecodeRecvPayload(payload, &wr);
        if (st == WcStatus::kSuccess) st = CheckRecvSemantics(qp.pd, &qp, vm, wr);
      }
      if (st != WcStatus::kSuccess) {
        FailRecv(rq, slot, wr.wr_id, st);  // QP to ERR; the plan goes
        return true;
      }
      rq.wr_ids[slot] = wr.wr_id;
      rq.slots[slot] = RecvSlot{};
      rq.open_slot = slot;
      rq.open = true;
      rq.head = rq.ring.Next(slot);
    }
    if (!rq.open) {  // a piece of a message whose WQE failed: nothing to fill
      rq.plan_head = (rq.plan_head + 1) % RecvQueue::kPlanCapacity;
      --rq.plan_count;
      continue;
    }
    RecvWr& slice = recv_batch_[0];
    slice.wr_id = MakeCookie(qp.handle, CookieKind::kRecv, rq.open_slot);
    slice.num_sge = 0;
    if (p.lands) {
      slice.num_sge = static_cast<uint8_t>(sched::SliceSges(
          std::span<const Sge>(rq.open_wqe.sge.data(), rq.open_wqe.num_sge),
          p.offset, p.length, slice.sge));
    } else {
      // WRITE_WITH_IMM: no bytes land in the buffer; the WQE as it is.
      slice.num_sge = rq.open_wqe.num_sge;
      slice.sge = rq.open_wqe.sge;
    }
    Status err = Status::kOk;
    if (rnic_.PostRecv(qp.rnic, std::span<const RecvWr>(&slice, 1), &err) !=
        1) {
      break;  // the RNIC refused (its QP left RTR/RTS): the flush follows
    }
    ++rq.posted;
    completions_.Expect(*qp.recv_cq, 1);
    RecvSlot& s = rq.slots[rq.open_slot];
    ++s.posted;
    if (p.last) {
      s.closed = true;
      s.report_len = p.lands ? 0 : p.total;
      rq.open = false;
    }
    rq.plan_head = (rq.plan_head + 1) % RecvQueue::kPlanCapacity;
    --rq.plan_count;
    did = true;
  }
  if (rq.sender_waits && (did || GuestWqeWaits(rq))) {
    rq.sender_waits = false;
    stage_.Wake(rq.sender);
  }
  // Descriptions waiting for the guest's WQE, or a sender held for one: the
  // sweep looks again (a guest posts receives without a doorbell).
  if (rq.plan_count > 0 || rq.sender_waits) {
    sweep_rq_.PushBack(&rq);
  } else {
    sweep_rq_.Remove(&rq);
  }
  return did;
}

}  // namespace vrdma::engine
