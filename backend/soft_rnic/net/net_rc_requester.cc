// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The RC requester on a fabric (docs/reliability.md §7.1, rxe's req.c and
// comp.c): WQEs go out in SQ order, each given its PSNs when first sent
// (its packets; a READ its response packets; an atomic one), several in
// flight at once (READs and atomics: at most max_rd_atomic). The last
// packet of each message asks for an ACK. Completions come in order: an
// ACK of PSN p completes every SEND or WRITE that ends at or before p; a
// READ completes with its last response packet, an atomic with its atomic
// ACK (which also acknowledge what came before them). Recovery is
// go-back-N from the oldest unacknowledged PSN: on a PSN sequence NAK from
// the PSN it names; on a READ response beyond the one expected, from the
// READ; on the ACK timeout (4.096 us << timeout) from the
// first packet of the oldest WQE in flight that no ACK covered, retry_cnt
// times before kRetryExcErr; an RNR NAK waits the responder's timer,
// rnr_retry times (7: forever) before kRnrRetryExcErr; an error NAK fails
// its WQE with the matching status and the QP goes to ERR. Both counters
// start again whenever an ACK acknowledges something new.
#include <algorithm>

#include "backend/soft_rnic/net/net_wire.h"
#include "backend/soft_rnic/net/packet.h"
#include "backend/soft_rnic/qp_state.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {
namespace {

namespace net = soft::net;

// WQEs one QP may send per Progress() call, as in loopback.
constexpr int kQpBudget = 32;
constexpr uint32_t kPsnMask = 0xffffff;

// a - b in the 24-bit PSN space, signed.
int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a + b < a ? ~uint64_t{0} : a + b;
}

bool IsAtomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
}

// Completes with its response, not with an ACK.
bool HasResponse(WrOpcode op) {
  return op == WrOpcode::kRdmaRead || IsAtomic(op);
}

uint32_t PsnsOf(const SendWr& wr, uint64_t len, uint32_t mtu) {
  if (IsAtomic(wr.opcode) || len == 0) return 1;
  return static_cast<uint32_t>((len + mtu - 1) / mtu);
}

WcStatus NakStatus(uint8_t code) {
  switch (code) {
    case net::kNakInvalidRequest: return WcStatus::kRemInvReqErr;
    case net::kNakRemoteAccess: return WcStatus::kRemAccessErr;
    default: return WcStatus::kRemOpErr;
  }
}

}  // namespace

bool SoftRnic::IsNetRc(const soft::Qp* q) const {
  return fabric_ != nullptr && q->type == QpType::kRc &&
         GidRegistered(q->attr.av.sgid) && !GidRegistered(q->attr.av.dgid);
}

bool SoftRnic::RunNetRc(soft::Qp* q, uint64_t now) {
  soft::NetReqState& n = q->nreq;
  if (!n.started) {
    n.started = true;
    n.retry_left = q->attr.retry_cnt;
    n.rnr_left = q->attr.rnr_retry;
  }
  bool did = false;
  if (n.rnr_wait && now >= n.rnr_until_ns) n.rnr_wait = false;
  if (n.next > 0 && now >= n.ack_deadline_ns) {
    if (n.retry_left == 0) {
      FailHead(q, WcStatus::kRetryExcErr, now);
      return true;
    }
    --n.retry_left;
    ++net_stats_.timeouts;
    // From the oldest PSN not acknowledged (an ACK may have covered the
    // front message's first packets).
    NetGoBack(q, (q->sq.front().first_psn + n.front_acked) & kPsnMask);
    did = true;
  }
  bool blocked = false;
  for (int budget = kQpBudget; budget > 0 && q->state == QpState::kRts &&
                               n.next < q->sq.size() && !n.rnr_wait;
       --budget) {
    // A busy wire (a line rate) ends the turn; Progress keeps the QP first.
    if (wire_.Busy(now)) break;
    soft::SqSlot& slot = q->sq.at(n.next);
    const SendWr& wr = slot.wr;
    if (IsLocalOp(wr.opcode)) {
      // Local: in SQ order, once everything before it completed.
      if (n.next != 0) {
        blocked = true;
        break;
      }
      const WcStatus st = ExecuteLocalOp(q, wr);
      RetireHead(q, st, now);
      did = true;
      if (st != WcStatus::kSuccess) {
        EnterError(q);
        return true;
      }
      continue;
    }
    const uint64_t len = wr.total_length();
    SegList local;
    WcStatus st = WcStatus::kSuccess;
    if (len > limits_.max_msg_sz) {
      st = WcStatus::kLocLenErr;
    } else if (wr.send_flags & kSendInline) {
      if (len > 0) {
        local.segs[0] = Seg{const_cast<uint8_t*>(wr.inline_data),
                            static_cast<uint32_t>(len)};
        local.n = 1;
        local.total = len;
      }
    } else {
      const uint32_t need = HasResponse(wr.opcode)
                                ? uint32_t{kAccessLocalWrite}
                                : 0u;
      st = ResolveLocal(q->pd, wr.sge.data(), wr.num_sge, need, &local);
    }
    if (st != WcStatus::kSuccess) {
      // It fails when it is the oldest (what is before it completes first).
      if (n.next != 0) {
        blocked = true;
        break;
      }
      FailHead(q, st, now);
      return true;
    }
    if (HasResponse(wr.opcode) && n.next > 0) {
      // At most max_rd_atomic READs and atomics in flight (the responder
      // keeps results for its max_dest_rd_atomic).
      uint32_t reads = 0;
      for (uint32_t i = 0; i < n.next; ++i) {
        if (HasResponse(q->sq.at(i).wr.opcode)) ++reads;
      }
      if (reads >= std::max<uint32_t>(q->attr.max_rd_atomic, 1)) {
        blocked = true;
        break;
      }
    }
    if (n.next == 0) {
      // The oldest WQE in flight starts the ACK timer.
      n.ack_deadline_ns = SaturatingAdd(now, soft::AckTimeoutNs(q->attr.timeout));
    }
    NetSendRc(q, slot, local, n.from_pkt, now);
    n.from_pkt = 0;
    ++n.next;
    did = true;
  }
  NetSchedule(q, !blocked);
  return did;
}

void SoftRnic::NetSendRc(soft::Qp* q, soft::SqSlot& slot,
                         const SegList& local, uint32_t from_pkt,
                         uint64_t now) {
  const SendWr& wr = slot.wr;
  const uint32_t mtu = q->attr.path_mtu_bytes;
  const uint64_t len = local.total;
  const bool resend = slot.sent;
  if (!slot.sent) {
    slot.sent = true;
    slot.first_psn = q->attr.sq_psn & kPsnMask;
    slot.npsn = PsnsOf(wr, len, mtu);
    q->attr.sq_psn = (q->attr.sq_psn + slot.npsn) & kPsnMask;
  }
  const AddressVector& av = q->attr.av;
  net::Header h;
  h.traffic_class = av.traffic_class;
  h.hop_limit = av.hop_limit;
  h.flow_label = av.flow_label & 0xfffff;
  h.dest_qpn = q->attr.dest_qpn & kPsnMask;
  h.src_qpn = q->qpn;
  h.dgid = av.dgid;
  h.sgid = av.sgid;
  h.psn = slot.first_psn;
  if (wr.opcode == WrOpcode::kRdmaRead || IsAtomic(wr.opcode)) {
    // One request packet; a READ's responses take its npsn PSNs.
    h.opcode = net::kRc | (wr.opcode == WrOpcode::kRdmaRead ? net::kReadRequest
                           : wr.opcode == WrOpcode::kAtomicCmpSwp
                               ? net::kCmpSwap
                               : net::kFetchAdd);
    h.flags = net::kFlagAckReq;
    h.remote_addr = wr.remote_addr;
    h.rkey = wr.rkey;
    h.dma_len = static_cast<uint32_t>(IsAtomic(wr.opcode) ? 8 : len);
    h.compare_add = wr.compare_add;
    h.swap = wr.swap;
    NetTransmit(h, 0, av.dgid, now);
    if (resend) ++net_stats_.retransmitted;
    return;
  }
  for (uint32_t p = from_pkt; p < slot.npsn; ++p) {
    const bool first = p == 0;
    const bool last = p + 1 == slot.npsn;
    const net::Op op = net::RequestOp(wr.opcode, first, last);
    const net::OpInfo info = net::OpInfoOf(net::kRc | op);
    const uint64_t off = uint64_t{p} * mtu;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(mtu, len - off));
    h.opcode = net::kRc | op;
    h.psn = (slot.first_psn + p) & kPsnMask;
    h.flags = (last ? net::kFlagAckReq : 0) |
              ((last && (wr.send_flags & kSendSolicited)) ? net::kFlagSolicited
                                                          : 0);
    h.imm = info.imm ? wr.imm_data : info.inv ? wr.invalidate_rkey : 0;
    h.remote_addr = info.reth ? wr.remote_addr : 0;
    h.rkey = info.reth ? wr.rkey : 0;
    h.dma_len = info.reth ? static_cast<uint32_t>(len) : 0;
    CopyOutAt(local, off, tx_packet_.data() + net::kHeaderBytes, n);
    NetTransmit(h, n, av.dgid, now);
    if (resend) ++net_stats_.retransmitted;
  }
}

void SoftRnic::NetTransmit(soft::net::Header& h, uint32_t payload_len,
                           const Gid& dgid, uint64_t ready_ns) {
  h.payload_len = static_cast<uint16_t>(payload_len);
  soft::net::EncodeHeader(h, tx_packet_.data());
  const uint64_t depart = soft::net::DepartPacket(wire_, ready_ns, payload_len);
  fabric_->Send({tx_packet_.data(), soft::net::kHeaderBytes + payload_len},
                dgid, depart);
  ++net_stats_.tx_packets;
}

void SoftRnic::NetRetireFront(soft::Qp* q, WcStatus status, uint64_t now) {
  soft::NetReqState& n = q->nreq;
  RetireHead(q, status, now);
  if (n.next > 0) {
    --n.next;
  } else {
    n.from_pkt = 0;
  }
  n.resp_pkts = 0;
  n.front_acked = 0;
  n.read_gap = false;
}

bool SoftRnic::NetAcknowledge(soft::Qp* q, uint32_t psn, uint64_t now) {
  soft::NetReqState& n = q->nreq;
  bool any = false;
  while (!q->sq.empty()) {
    const soft::SqSlot& s = q->sq.front();
    if (!s.sent || HasResponse(s.wr.opcode) ||
        PsnDiff((s.first_psn + s.npsn - 1) & kPsnMask, psn) > 0) {
      break;
    }
    NetRetireFront(q, WcStatus::kSuccess, now);
    any = true;
  }
  // An ACK inside the front SEND or WRITE (every 64 packets, or a
  // duplicate's) acknowledges its packets up to psn: progress too.
  if (!q->sq.empty()) {
    const soft::SqSlot& s = q->sq.front();
    const int32_t d = PsnDiff(psn, s.first_psn);
    if (s.sent && !HasResponse(s.wr.opcode) && d >= 0 &&
        d < static_cast<int32_t>(s.npsn) &&
        static_cast<uint32_t>(d) + 1 > n.front_acked) {
      n.front_acked = static_cast<uint32_t>(d) + 1;
      any = true;
    }
  }
  if (any) {
    n.retry_left = q->attr.retry_cnt;
    n.rnr_left = q->attr.rnr_retry;
    n.ack_deadline_ns = SaturatingAdd(now, soft::AckTimeoutNs(q->attr.timeout));
  }
  return any;
}

void SoftRnic::NetGoBack(soft::Qp* q, uint32_t psn) {
  soft::NetReqState& n = q->nreq;
  for (uint32_t i = 0; i < q->sq.size(); ++i) {
    const soft::SqSlot& s = q->sq.at(i);
    if (!s.sent) break;
    const int32_t d = PsnDiff(psn, s.first_psn);
    if (d >= 0 && d < static_cast<int32_t>(s.npsn)) {
      n.next = i;
      // A READ or an atomic is one request: it goes again whole (the READ's
      // responses already placed are not placed again).
      n.from_pkt = HasResponse(s.wr.opcode) ? 0 : static_cast<uint32_t>(d);
      return;
    }
  }
  // psn names nothing in flight (all of it acknowledged): nothing to resend.
}

void SoftRnic::NetSchedule(soft::Qp* q, bool may_send) {
  const soft::NetReqState& n = q->nreq;
  Deactivate(q);
  if (q->state != QpState::kRts && q->state != QpState::kSqd) return;
  if (n.rnr_wait) {
    q->req.wait_until_ns = n.rnr_until_ns;
    Park(q);
    return;
  }
  if (may_send && q->state == QpState::kRts && n.next < q->sq.size()) {
    Activate(q);
    return;
  }
  if (n.next > 0 && n.ack_deadline_ns != ~uint64_t{0}) {
    q->req.wait_until_ns = n.ack_deadline_ns;
    Park(q);
  }
  // Otherwise: nothing in flight (PostSend activates it), or an infinite
  // ACK timeout (the next response activates it).
}

void SoftRnic::NetRcResponse(soft::Qp* q, const soft::net::Header& h,
                             const uint8_t* payload, uint64_t now) {
  if (q->attr.dest_qpn != h.src_qpn || q->attr.av.dgid != h.sgid ||
      q->attr.av.sgid != h.dgid) {
    return NetDropped(NetDrop::kNotConnected);
  }
  soft::NetReqState& n = q->nreq;
  const uint32_t psn = h.psn;
  const uint32_t before = (psn - 1) & kPsnMask;
  const uint8_t op = h.opcode & ~net::kTransportMask;
  // The front WQE, when it is in flight and psn is one of its PSNs.
  auto front_has = [&](uint32_t p) {
    if (q->sq.empty()) return false;
    const soft::SqSlot& s = q->sq.front();
    const int32_t d = PsnDiff(p, s.first_psn);
    return s.sent && d >= 0 && d < static_cast<int32_t>(s.npsn);
  };
  if (op == net::kAcknowledge) {
    const uint8_t kind = h.syndrome & net::kSyndromeKindMask;
    if (kind == (net::kSyndromeAck & net::kSyndromeKindMask)) {
      NetAcknowledge(q, psn, now);  // an old ACK completes nothing: fine
    } else if (kind == net::kSyndromeRnr || kind == net::kSyndromeNak) {
      NetAcknowledge(q, before, now);  // everything before psn arrived
      if (!front_has(psn)) return NetDropped(NetDrop::kResponse);
      const uint8_t code = h.syndrome & ~net::kSyndromeKindMask;
      if (kind == net::kSyndromeRnr) {
        if (q->attr.rnr_retry != soft::kInfiniteRnrRetry) {
          if (n.rnr_left == 0) {
            FailHead(q, WcStatus::kRnrRetryExcErr, now);
            return;
          }
          --n.rnr_left;
        }
        NetGoBack(q, psn);
        n.rnr_wait = true;
        n.rnr_until_ns = SaturatingAdd(now, soft::RnrTimerNs(code));
      } else if (code == net::kNakPsnSequence) {
        NetGoBack(q, psn);
      } else {
        FailHead(q, NakStatus(code), now);
        return;
      }
    } else {
      return NetDropped(NetDrop::kResponse);
    }
  } else if (op == net::kAtomicAcknowledge) {
    NetAcknowledge(q, before, now);
    if (!front_has(psn) || !IsAtomic(q->sq.front().wr.opcode)) {
      return NetDropped(NetDrop::kResponse);
    }
    SegList local;
    const SendWr& wr = q->sq.front().wr;
    if (ResolveLocal(q->pd, wr.sge.data(), wr.num_sge, kAccessLocalWrite,
                     &local) != WcStatus::kSuccess) {
      FailHead(q, WcStatus::kLocProtErr, now);
      return;
    }
    CopyInto(local, 0, reinterpret_cast<const uint8_t*>(&h.compare_add), 8);
    NetRetireFront(q, WcStatus::kSuccess, now);
    // Progress: the counters start again.
    n.retry_left = q->attr.retry_cnt;
    n.rnr_left = q->attr.rnr_retry;
    n.ack_deadline_ns = SaturatingAdd(now, soft::AckTimeoutNs(q->attr.timeout));
  } else {
    // READ response data: the next packet the front READ expects.
    NetAcknowledge(q, before, now);
    if (!front_has(psn) || q->sq.front().wr.opcode != WrOpcode::kRdmaRead) {
      return NetDropped(NetDrop::kResponse);
    }
    const soft::SqSlot& s = q->sq.front();
    const uint32_t k = static_cast<uint32_t>(PsnDiff(psn, s.first_psn));
    if (k != n.resp_pkts) {
      // Below: a duplicate. Beyond: responses were lost; as rxe does, the
      // READ goes again at once (once per gap) rather than at the timeout.
      if (k > n.resp_pkts && !n.read_gap) {
        n.read_gap = true;
        NetGoBack(q, s.first_psn);
        NetSchedule(q, true);
      }
      return NetDropped(NetDrop::kResponse);
    }
    n.read_gap = false;
    const net::OpInfo info = net::OpInfoOf(h.opcode);
    const bool last = k + 1 == s.npsn;
    if (info.first != (k == 0) || info.last != last) {
      return NetDropped(NetDrop::kResponse);
    }
    const uint32_t mtu = q->attr.path_mtu_bytes;
    const uint64_t len = s.wr.total_length();
    const uint64_t off = uint64_t{k} * mtu;
    if (h.payload_len != std::min<uint64_t>(mtu, len - off)) {
      return NetDropped(NetDrop::kMtu);
    }
    SegList local;
    if (ResolveLocal(q->pd, s.wr.sge.data(), s.wr.num_sge, kAccessLocalWrite,
                     &local) != WcStatus::kSuccess) {
      FailHead(q, WcStatus::kLocProtErr, now);
      return;
    }
    CopyInto(local, off, payload, h.payload_len);
    ++n.resp_pkts;
    n.retry_left = q->attr.retry_cnt;
    n.ack_deadline_ns = SaturatingAdd(now, soft::AckTimeoutNs(q->attr.timeout));
    if (last) NetRetireFront(q, WcStatus::kSuccess, now);
  }
  NetSchedule(q, true);
}

}  // namespace vrdma
