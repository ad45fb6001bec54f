// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The requester's side of a fabric (docs/reliability.md §7.1): a UC
// message to another host goes out as FIRST, MIDDLE..., LAST packets of
// exactly the path MTU but the last (ONLY when it fits one; zero bytes:
// one ONLY), each with the QP's next PSN; a UD message is one SEND_ONLY.
// Sent once: UC and UD complete when the last packet is sent (with a line
// rate, net_wire.h says when each leaves). RC: net_rc_requester.cc.
#include <algorithm>

#include "backend/soft_rnic/net/packet.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {

bool SoftRnic::OnFabric(const soft::Qp* q, const soft::SqSlot& slot) const {
  if (fabric_ == nullptr || q->type == QpType::kRc) return false;
  const bool ud = q->type == QpType::kUd;
  const AddressVector& av = ud ? slot.ud_av : q->attr.av;
  return GidRegistered(av.sgid) && !GidRegistered(av.dgid);
}

void SoftRnic::NetSend(soft::Qp* q, const soft::SqSlot& slot,
                       const SegList& local, uint64_t ready_ns) {
  namespace net = soft::net;
  const SendWr& wr = slot.wr;
  const bool ud = q->type == QpType::kUd;
  const AddressVector& av = ud ? slot.ud_av : q->attr.av;
  // UD messages are at most the active MTU (checked before); a connected
  // QP's path MTU is one of IB's five sizes (qp_state.cc).
  const uint64_t mtu = ud ? limits_.active_mtu_bytes : q->attr.path_mtu_bytes;
  const uint64_t len = local.total;
  const uint64_t packets = len == 0 ? 1 : (len + mtu - 1) / mtu;

  net::Header h;
  h.flags = (wr.send_flags & kSendSolicited) ? net::kFlagSolicited : 0;
  h.traffic_class = av.traffic_class;
  h.hop_limit = av.hop_limit;
  h.flow_label = av.flow_label & 0xfffff;
  h.dest_qpn = (ud ? wr.remote_qpn : q->attr.dest_qpn) & 0xffffff;
  h.src_qpn = q->qpn;
  h.dgid = av.dgid;
  h.sgid = av.sgid;
  if (ud) {
    // A WR Q_Key with the high bit set means the QP's own (IBA 10.2.5).
    h.qkey = (wr.remote_qkey & 0x80000000u) ? q->attr.qkey : wr.remote_qkey;
  }
  const uint8_t transport = ud ? net::kUd : net::kUc;

  uint64_t off = 0;
  for (uint64_t p = 0; p < packets; ++p) {
    const bool first = p == 0;
    const bool last = p + 1 == packets;
    const net::Op op = net::RequestOp(wr.opcode, first, last);
    const net::OpInfo info = net::OpInfoOf(transport | op);
    const uint32_t n = static_cast<uint32_t>(std::min(mtu, len - off));
    h.opcode = transport | op;
    h.psn = q->attr.sq_psn & 0xffffff;
    q->attr.sq_psn = (q->attr.sq_psn + 1) & 0xffffff;
    h.imm = 0;
    if (info.imm) h.imm = wr.imm_data;
    if (info.inv) h.imm = wr.invalidate_rkey;
    h.remote_addr = 0;
    h.rkey = 0;
    h.dma_len = 0;
    if (info.reth) {
      h.remote_addr = wr.remote_addr;
      h.rkey = wr.rkey;
      h.dma_len = static_cast<uint32_t>(len);  // max_msg_sz < 2^32
    }
    CopyOutAt(local, off, tx_packet_.data() + net::kHeaderBytes, n);
    off += n;
    NetTransmit(h, n, av.dgid, ready_ns);
  }
}

}  // namespace vrdma
