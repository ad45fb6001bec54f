// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The packet responder (docs/reliability.md §7.1): packets from the fabric
// are untrusted. Each goes through the checks in order (rxe's resp.c):
// syntax (net::Decode) -> a GID of this RNIC -> the QP and its transport ->
// its state -> (UC) the peer is this QP's -> (UD) Q_Key -> (UC) sequence ->
// MTU and length -> resources (receive WQE) and keys -> execute; the first
// check that fails drops the packet and counts its NetDrop.
//
// UC (IBA 9.7.5.1, rxe's check_psn and check_op_seq for UC): a FIRST or
// ONLY packet starts a message whatever its PSN (resynchronising); any
// other packet must carry the expected PSN and continue the message in
// progress, or the message is dropped whole (uc_messages_dropped) with
// every packet until the next FIRST or ONLY. A dropped message leaves its
// receive WQE unconsumed for the next message; bytes a dropped WRITE
// placed stay placed, as on an RNIC. Receive-side errors of a message
// that arrives (its receive SGEs, a SEND longer than the receive) complete
// the receive with an error and take the UC QP to ERR, as in loopback.
// UD: one SEND_ONLY per message, with the loopback's rules. RC:
// net_rc_responder.cc (requests) and net_rc_requester.cc (responses).
#include <cstring>

#include "backend/rnic/roce_grh.h"
#include "backend/soft_rnic/net/packet.h"
#include "backend/soft_rnic/qp_state.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

// Batches of packets one Progress() call executes at most, so a flood
// from the fabric does not starve the send queues.
constexpr int kRxBatches = 8;

using Kind = soft::NetRespState::Kind;

}  // namespace

bool SoftRnic::PollFabric(uint64_t now) {
  if (fabric_ == nullptr) return false;
  bool did = false;
  for (int b = 0; b < kRxBatches; ++b) {
    const int n = fabric_->Poll(rx_batch_, now);
    for (int i = 0; i < n; ++i) NetReceive(rx_batch_[i].bytes(), now);
    if (n > 0) did = true;
    if (n < static_cast<int>(rx_batch_.size())) break;
  }
  return did;
}

void SoftRnic::NetReceive(std::span<const uint8_t> packet, uint64_t now) {
  namespace net = soft::net;
  ++net_stats_.rx_packets;
  net::Header h;
  switch (net::Decode(packet, &h)) {
    case net::Check::kOk:
      break;
    case net::Check::kShort:
      return NetDropped(NetDrop::kShort);
    case net::Check::kVersion:
      return NetDropped(NetDrop::kVersion);
    case net::Check::kLength:
      return NetDropped(NetDrop::kLength);
    case net::Check::kOpcode:
      return NetDropped(NetDrop::kOpcode);
    case net::Check::kField:
      return NetDropped(NetDrop::kField);
  }
  if (!GidRegistered(h.dgid)) return NetDropped(NetDrop::kUnknownGid);
  const uint8_t transport = h.opcode & net::kTransportMask;
  const QpType type = transport == net::kUd   ? QpType::kUd
                      : transport == net::kUc ? QpType::kUc
                                              : QpType::kRc;
  soft::Qp* d = qps_.Get(h.dest_qpn);
  if (d == nullptr || d->type != type) return NetDropped(NetDrop::kUnknownQp);
  if (!soft::Receiving(d->state)) return NetDropped(NetDrop::kState);
  const uint8_t* payload = packet.data() + net::kHeaderBytes;
  switch (type) {
    case QpType::kUd:
      return NetReceiveUd(d, h, payload, now);
    case QpType::kUc:
      return NetReceiveUc(d, h, payload, now);
    default:
      // RC: responses go to the requester, requests to the responder.
      if (net::IsResponse(h.opcode)) return NetRcResponse(d, h, payload, now);
      return NetReceiveRc(d, h, payload, now);
  }
}

bool SoftRnic::NetTakeWqe(soft::Qp* d) {
  soft::NetRespState& rs = d->net;
  if (rs.has_wqe) return true;
  std::optional<soft::RecvEntry> e = PeekReceive(d);
  if (!e) return false;
  rs.has_wqe = true;
  rs.wqe_id = e->wr_id;
  rs.wqe_num_sge = static_cast<uint8_t>(e->sge.size());
  std::memcpy(rs.wqe_sge.data(), e->sge.data(), e->sge.size() * sizeof(Sge));
  // Taken now: an SRQ's next packet of another QP must not find it.
  PopReceive(d);
  return true;
}

void SoftRnic::NetAbort(soft::Qp* d) {
  if (d->net.in_msg != Kind::kNone) ++net_stats_.uc_messages_dropped;
  d->net.in_msg = Kind::kNone;
  d->net.offset = 0;
}

void SoftRnic::NetReceiveUc(soft::Qp* d, const soft::net::Header& h,
                            const uint8_t* payload, uint64_t now) {
  const soft::net::OpInfo info = soft::net::OpInfoOf(h.opcode);
  soft::NetRespState& rs = d->net;
  // Only the QP's own peer, on its path.
  if (d->attr.dest_qpn != h.src_qpn || d->attr.av.dgid != h.sgid ||
      d->attr.av.sgid != h.dgid) {
    return NetDropped(NetDrop::kNotConnected);
  }
  const Kind kind = info.send ? Kind::kSend : Kind::kWrite;
  if (info.first) {
    NetAbort(d);  // a message in progress lost its end
  } else if (rs.in_msg != kind || h.psn != d->attr.rq_psn) {
    NetAbort(d);
    return NetDropped(NetDrop::kSequence);
  }
  d->attr.rq_psn = (h.psn + 1) & 0xffffff;

  // FIRST and MIDDLE carry exactly the path MTU, LAST and ONLY at most.
  const uint32_t mtu = d->attr.path_mtu_bytes;
  const uint32_t n = h.payload_len;
  if (info.last ? n > mtu : n != mtu) {
    NetAbort(d);
    return NetDropped(NetDrop::kMtu);
  }

  if (info.first) {
    rs.offset = 0;
    if (kind == Kind::kWrite) {
      // The QP must allow remote writes, and a non-empty RETH range must
      // be inside a key that allows them (checked again per packet: the
      // MR may go meanwhile).
      Seg range;
      if ((d->attr.access_flags & kAccessRemoteWrite) == 0 ||
          (h.dma_len > 0 &&
           !ResolveRemote(d, h.rkey, h.remote_addr, h.dma_len,
                          kAccessRemoteWrite, &range))) {
        return NetDropped(NetDrop::kAccess);
      }
      rs.remote_addr = h.remote_addr;
      rs.rkey = h.rkey;
      rs.dma_len = h.dma_len;
    } else if (!NetTakeWqe(d)) {
      return NetDropped(NetDrop::kNoReceive);
    }
    rs.in_msg = kind;
  }

  if (kind == Kind::kWrite) {
    if (rs.offset + n > rs.dma_len || (info.last && rs.offset + n != rs.dma_len)) {
      NetAbort(d);
      return NetDropped(NetDrop::kMtu);
    }
    if (n > 0) {
      Seg dst;
      if (!ResolveRemote(d, rs.rkey, rs.remote_addr + rs.offset, n,
                         kAccessRemoteWrite, &dst)) {
        NetAbort(d);
        return NetDropped(NetDrop::kAccess);
      }
      Write(std::span<const Seg>(&dst, 1), 0, payload, n);
    }
    rs.offset += n;
    if (!info.last) return;
    rs.in_msg = Kind::kNone;
    if (info.imm) {
      if (!NetTakeWqe(d)) return NetDropped(NetDrop::kNoReceive);
      rs.has_wqe = false;
      CompleteRecv(d, rs.wqe_id, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm,
                   rs.dma_len, kWcWithImm, h.imm, h.src_qpn, now);
    }
    return;
  }

  // A SEND: into the receive WQE its first packet took.
  SegList rsegs;
  const soft::Pd* rpd = d->srq ? d->srq->pd : d->pd;
  WcStatus st = ResolveLocal(rpd, rs.wqe_sge.data(), rs.wqe_num_sge,
                             kAccessLocalWrite, &rsegs);
  if (st == WcStatus::kSuccess && rs.offset + n > rsegs.total) {
    st = WcStatus::kLocLenErr;
  }
  if (st != WcStatus::kSuccess) {
    rs.has_wqe = false;
    rs.in_msg = Kind::kNone;
    CompleteRecv(d, rs.wqe_id, st, WcOpcode::kRecv, 0, 0, 0, h.src_qpn, now);
    EnterError(d);
    return;
  }
  CopyInto(rsegs, rs.offset, payload, n);
  rs.offset += n;
  if (!info.last) return;
  rs.in_msg = Kind::kNone;
  rs.has_wqe = false;
  uint32_t flags = info.imm ? uint32_t{kWcWithImm} : 0u;
  uint32_t imm = info.imm ? h.imm : 0;
  if (info.inv) {
    // After placing the data, as in loopback (rxe's class J).
    if (!Invalidate(h.imm, d->pd, false)) {
      CompleteRecv(d, rs.wqe_id, WcStatus::kRemInvReqErr, WcOpcode::kRecv, 0,
                   0, 0, h.src_qpn, now);
      EnterError(d);
      return;
    }
    flags |= kWcWithInv;
    imm = h.imm;
  }
  CompleteRecv(d, rs.wqe_id, WcStatus::kSuccess, WcOpcode::kRecv,
               static_cast<uint32_t>(rs.offset), flags, imm, h.src_qpn, now);
}

void SoftRnic::NetReceiveUd(soft::Qp* d, const soft::net::Header& h,
                            const uint8_t* payload, uint64_t now) {
  const soft::net::OpInfo info = soft::net::OpInfoOf(h.opcode);
  if (h.qkey != d->attr.qkey) return NetDropped(NetDrop::kQkey);
  const uint32_t n = h.payload_len;
  if (n > limits_.active_mtu_bytes) return NetDropped(NetDrop::kMtu);
  std::optional<soft::RecvEntry> rwr = PeekReceive(d);
  if (!rwr) return NetDropped(NetDrop::kNoReceive);
  SegList rsegs;
  const soft::Pd* rpd = d->srq ? d->srq->pd : d->pd;
  WcStatus st = ResolveLocal(rpd, rwr->sge.data(),
                             static_cast<int>(rwr->sge.size()),
                             kAccessLocalWrite, &rsegs);
  if (st == WcStatus::kSuccess && n + kGrhBytes > rsegs.total) {
    st = WcStatus::kLocLenErr;
  }
  const uint64_t wr_id = rwr->wr_id;
  if (st != WcStatus::kSuccess) {
    PopReceive(d);
    CompleteRecv(d, wr_id, st, WcOpcode::kRecv, 0, 0, 0, h.src_qpn, now);
    // A sender's oversized datagram costs one WQE; a bad WQE of the QP's
    // own breaks it (as in loopback).
    if (st != WcStatus::kLocLenErr) EnterError(d);
    return;
  }
  // The GRH as the sender's address vector gives it.
  AddressVector av;
  av.dgid = h.dgid;
  av.sgid = h.sgid;
  av.flow_label = h.flow_label;
  av.hop_limit = h.hop_limit;
  av.traffic_class = h.traffic_class;
  uint8_t grh[kGrhBytes];
  BuildRoceGrh(av, n, grh);
  CopyInto(rsegs, 0, grh, kGrhBytes);
  CopyInto(rsegs, kGrhBytes, payload, n);
  PopReceive(d);
  const uint32_t flags = kWcGrh | (info.imm ? uint32_t{kWcWithImm} : 0u);
  CompleteRecv(d, wr_id, WcStatus::kSuccess, WcOpcode::kRecv, kGrhBytes + n,
               flags, info.imm ? h.imm : 0, h.src_qpn, now);
}

}  // namespace vrdma
