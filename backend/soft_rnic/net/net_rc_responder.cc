// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The RC responder on a fabric (docs/reliability.md §7.1, rxe's resp.c):
// requests are executed in PSN order only (rq_psn, the expected PSN, which
// QueryQp reports).
//  - A gap (a PSN ahead of rq_psn) is NAKed once (PSN sequence error,
//    naming rq_psn) and every packet until rq_psn arrives is dropped.
//  - A duplicate (behind rq_psn) is never executed again: a SEND or WRITE
//    packet is ACKed again (rq_psn - 1), a READ is served again from
//    memory, an atomic is answered from the saved result of its PSN (the
//    last max_dest_rd_atomic are kept; an older one is dropped).
//  - In order: the loopback's checks, each failure a NAK (invalid request,
//    remote access, remote operation; the QP to ERR); a SEND's first packet
//    or a WRITE_WITH_IMM's last that finds no receive WQE is RNR-NAKed with
//    the QP's min_rnr_timer and not executed. ACKs: at a packet that asks
//    for one (every message's last), else every 64 packets.
#include <algorithm>
#include <cstring>

#include "backend/soft_rnic/net/packet.h"
#include "backend/soft_rnic/qp_state.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

namespace net = soft::net;

constexpr uint32_t kPsnMask = 0xffffff;
// Packets without an ACK request after which the responder ACKs anyway.
constexpr uint32_t kAckEvery = 64;

int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}

using Kind = soft::NetRespState::Kind;

}  // namespace

void SoftRnic::NetSendAck(soft::Qp* d, uint8_t syndrome, uint32_t psn,
                          uint64_t orig, bool atomic, uint64_t now) {
  net::Header h;
  h.opcode = net::kRc | (atomic ? net::kAtomicAcknowledge : net::kAcknowledge);
  h.syndrome = syndrome;
  h.psn = psn & kPsnMask;
  h.compare_add = orig;
  h.dest_qpn = d->attr.dest_qpn & kPsnMask;
  h.src_qpn = d->qpn;
  h.dgid = d->attr.av.dgid;
  h.sgid = d->attr.av.sgid;
  h.traffic_class = d->attr.av.traffic_class;
  h.hop_limit = d->attr.av.hop_limit;
  h.flow_label = d->attr.av.flow_label & 0xfffff;
  NetTransmit(h, 0, d->attr.av.dgid, now);
  if ((syndrome & net::kSyndromeKindMask) ==
      (net::kSyndromeAck & net::kSyndromeKindMask)) {
    ++net_stats_.acks_sent;
  } else {
    ++net_stats_.naks_sent;
  }
  d->net.unacked = 0;
}

void SoftRnic::NetNakError(soft::Qp* d, uint8_t code, uint32_t psn,
                           uint64_t now) {
  NetSendAck(d, net::kSyndromeNak | code, psn, 0, false, now);
  EnterError(d);
}

bool SoftRnic::NetServeRead(soft::Qp* d, const soft::net::Header& req,
                            uint64_t now) {
  if ((d->attr.access_flags & kAccessRemoteRead) == 0 ||
      d->attr.max_dest_rd_atomic == 0 || req.dma_len > limits_.max_msg_sz) {
    NetNakError(d, net::kNakInvalidRequest, req.psn, now);
    return false;
  }
  const uint64_t len = req.dma_len;
  Seg src{};
  if (len > 0 && !ResolveRemote(d, req.rkey, req.remote_addr, len,
                                kAccessRemoteRead, &src)) {
    NetNakError(d, net::kNakRemoteAccess, req.psn, now);
    return false;
  }
  const uint32_t mtu = d->attr.path_mtu_bytes;
  const uint32_t npsn = len == 0 ? 1 : static_cast<uint32_t>((len + mtu - 1) / mtu);
  net::Header h;
  h.dest_qpn = d->attr.dest_qpn & kPsnMask;
  h.src_qpn = d->qpn;
  h.dgid = d->attr.av.dgid;
  h.sgid = d->attr.av.sgid;
  h.traffic_class = d->attr.av.traffic_class;
  h.hop_limit = d->attr.av.hop_limit;
  h.flow_label = d->attr.av.flow_label & 0xfffff;
  for (uint32_t i = 0; i < npsn; ++i) {
    const bool first = i == 0, last = i + 1 == npsn;
    h.opcode = net::kRc | (first && last ? net::kReadResponseOnly
                           : first       ? net::kReadResponseFirst
                           : last        ? net::kReadResponseLast
                                         : net::kReadResponseMiddle);
    h.psn = (req.psn + i) & kPsnMask;
    const uint64_t off = uint64_t{i} * mtu;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(mtu, len - off));
    if (n > 0) {
      Read(std::span<const Seg>(&src, 1), off,
           tx_packet_.data() + net::kHeaderBytes, n);
    }
    NetTransmit(h, n, d->attr.av.dgid, now);
  }
  ++net_stats_.reads_served;
  d->net.unacked = 0;
  return true;
}

void SoftRnic::NetReceiveRc(soft::Qp* d, const soft::net::Header& h,
                            const uint8_t* payload, uint64_t now) {
  if (d->attr.dest_qpn != h.src_qpn || d->attr.av.dgid != h.sgid ||
      d->attr.av.sgid != h.dgid) {
    return NetDropped(NetDrop::kNotConnected);
  }
  soft::NetRespState& rs = d->net;
  const net::OpInfo info = net::OpInfoOf(h.opcode);
  const uint8_t op = h.opcode & ~net::kTransportMask;
  const bool read = op == net::kReadRequest;
  const bool atomic = op == net::kCmpSwap || op == net::kFetchAdd;
  const int32_t diff = PsnDiff(h.psn, d->attr.rq_psn);

  if (diff > 0) {  // packets were lost before this one
    if (!rs.nak_sent) {
      rs.nak_sent = true;
      NetSendAck(d, net::kSyndromeNak | net::kNakPsnSequence, d->attr.rq_psn, 0,
                 false, now);
    }
    return NetDropped(NetDrop::kSequence);
  }
  if (diff < 0) {  // executed before: answer, never execute again
    ++net_stats_.duplicates;
    if (read) {
      NetServeRead(d, h, now);
    } else if (atomic) {
      for (const auto& a : rs.atomics) {
        if (a.valid && a.psn == h.psn) {
          NetSendAck(d, net::kSyndromeAck, h.psn, a.orig, true, now);
          ++net_stats_.atomics_replayed;
          return;
        }
      }
      NetDropped(NetDrop::kSequence);  // too old to answer
    } else {
      NetSendAck(d, net::kSyndromeAck, d->attr.rq_psn - 1, 0, false, now);
    }
    return;
  }
  rs.nak_sent = false;
  // A READ or an atomic inside a SEND or WRITE breaks the op sequence.
  if ((read || atomic) && rs.in_msg != Kind::kNone) {
    NetDropped(NetDrop::kSequence);
    return NetNakError(d, net::kNakInvalidRequest, h.psn, now);
  }

  if (read) {
    if (!NetServeRead(d, h, now)) return;
    const uint32_t mtu = d->attr.path_mtu_bytes;
    const uint32_t npsn =
        h.dma_len == 0 ? 1 : static_cast<uint32_t>((uint64_t{h.dma_len} + mtu - 1) / mtu);
    d->attr.rq_psn = (h.psn + npsn) & kPsnMask;
    return;
  }
  if (atomic) {
    if ((d->attr.access_flags & kAccessRemoteAtomic) == 0 ||
        d->attr.max_dest_rd_atomic == 0 || (h.remote_addr & 7) != 0) {
      return NetNakError(d, net::kNakInvalidRequest, h.psn, now);
    }
    // 8 aligned bytes never cross a page: host bytes (ResolveRemote).
    Seg seg;
    if (!ResolveRemote(d, h.rkey, h.remote_addr, 8, kAccessRemoteAtomic,
                       &seg)) {
      return NetNakError(d, net::kNakRemoteAccess, h.psn, now);
    }
    uint8_t* target = seg.ptr;
    uint64_t orig;
    std::memcpy(&orig, target, 8);
    const uint64_t next = op == net::kFetchAdd     ? orig + h.compare_add
                          : orig == h.compare_add ? h.swap
                                                  : orig;
    std::memcpy(target, &next, 8);
    const uint32_t keep =
        std::clamp<uint32_t>(d->attr.max_dest_rd_atomic, 1, rs.atomics.size());
    rs.atomics[rs.next_atomic % keep] = {true, h.psn, orig};
    ++rs.next_atomic;
    d->attr.rq_psn = (h.psn + 1) & kPsnMask;
    NetSendAck(d, net::kSyndromeAck, h.psn, orig, true, now);
    return;
  }

  // SEND and WRITE packets, in sequence within their message.
  const Kind kind = info.send ? Kind::kSend : Kind::kWrite;
  if (info.first ? rs.in_msg != Kind::kNone : rs.in_msg != kind) {
    NetDropped(NetDrop::kSequence);
    return NetNakError(d, net::kNakInvalidRequest, h.psn, now);
  }
  const uint32_t mtu = d->attr.path_mtu_bytes;
  const uint32_t n = h.payload_len;
  if (info.last ? n > mtu : n != mtu) {
    NetDropped(NetDrop::kMtu);
    return NetNakError(d, net::kNakInvalidRequest, h.psn, now);
  }
  if (info.first) {
    if (kind == Kind::kWrite) {
      if ((d->attr.access_flags & kAccessRemoteWrite) == 0) {
        return NetNakError(d, net::kNakInvalidRequest, h.psn, now);
      }
      Seg range;
      if (h.dma_len > 0 && !ResolveRemote(d, h.rkey, h.remote_addr, h.dma_len,
                                          kAccessRemoteWrite, &range)) {
        return NetNakError(d, net::kNakRemoteAccess, h.psn, now);
      }
      rs.remote_addr = h.remote_addr;
      rs.rkey = h.rkey;
      rs.dma_len = h.dma_len;
    } else if (!NetTakeWqe(d)) {
      // Not executed: the requester sends it again after the timer.
      return NetSendAck(d, net::kSyndromeRnr | (d->attr.min_rnr_timer & 0x1f),
                        h.psn, 0, false, now);
    }
    rs.offset = 0;
  }
  if (kind == Kind::kWrite) {
    if (rs.offset + n > rs.dma_len || (info.last && rs.offset + n != rs.dma_len)) {
      NetDropped(NetDrop::kMtu);
      return NetNakError(d, net::kNakInvalidRequest, h.psn, now);
    }
    if (info.imm && !NetTakeWqe(d)) {
      // Checked before any byte of this packet lands, so the resent packet
      // finds the message where it was.
      if (info.first) rs.in_msg = Kind::kNone;
      return NetSendAck(d, net::kSyndromeRnr | (d->attr.min_rnr_timer & 0x1f),
                        h.psn, 0, false, now);
    }
    if (n > 0) {
      Seg dst;
      if (!ResolveRemote(d, rs.rkey, rs.remote_addr + rs.offset, n,
                         kAccessRemoteWrite, &dst)) {
        return NetNakError(d, net::kNakRemoteAccess, h.psn, now);
      }
      Write(std::span<const Seg>(&dst, 1), 0, payload, n);
    }
  } else {
    SegList rsegs;
    const soft::Pd* rpd = d->srq ? d->srq->pd : d->pd;
    WcStatus st = ResolveLocal(rpd, rs.wqe_sge.data(), rs.wqe_num_sge,
                               kAccessLocalWrite, &rsegs);
    if (st == WcStatus::kSuccess && rs.offset + n > rsegs.total) {
      st = WcStatus::kLocLenErr;
    }
    if (st != WcStatus::kSuccess) {
      rs.has_wqe = false;
      CompleteRecv(d, rs.wqe_id, st, WcOpcode::kRecv, 0, 0, 0, h.src_qpn, now);
      return NetNakError(d,
                         st == WcStatus::kLocLenErr ? net::kNakInvalidRequest
                                                    : net::kNakRemoteOperation,
                         h.psn, now);
    }
    CopyInto(rsegs, rs.offset, payload, n);
  }
  rs.offset += n;
  rs.in_msg = info.last ? Kind::kNone : kind;
  d->attr.rq_psn = (h.psn + 1) & kPsnMask;
  ++rs.unacked;

  bool broke = false;
  if (info.last && (info.send || info.imm)) {
    rs.has_wqe = false;
    uint32_t flags = info.imm ? uint32_t{kWcWithImm} : 0u;
    uint32_t imm = info.imm ? h.imm : 0;
    WcStatus st = WcStatus::kSuccess;
    if (info.inv) {
      // After placing the data; acknowledged even if it fails (class J).
      if (Invalidate(h.imm, d->pd, false)) {
        flags |= kWcWithInv;
        imm = h.imm;
      } else {
        st = WcStatus::kRemInvReqErr;
        broke = true;
      }
    }
    const bool ok = st == WcStatus::kSuccess;
    CompleteRecv(d, rs.wqe_id, st,
                 info.send ? WcOpcode::kRecv : WcOpcode::kRecvRdmaWithImm,
                 ok ? static_cast<uint32_t>(info.send ? rs.offset : rs.dma_len) : 0,
                 ok ? flags : 0, ok ? imm : 0, h.src_qpn, now);
  }
  if ((info.last && (h.flags & net::kFlagAckReq)) || rs.unacked >= kAckEvery) {
    NetSendAck(d, net::kSyndromeAck, h.psn, 0, false, now);
  }
  if (broke) EnterError(d);
}

}  // namespace vrdma
