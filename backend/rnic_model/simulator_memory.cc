// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The simulator's memory side: memory regions, the hooks by which the send
// engine, the receive side and the completion path use the PCIe link
// (pcie.h) and the on-NIC caches (nic_cache.h).
//
//   post      doorbell (MMIO) then one DMA read of the post list's WQEs
//   WQE start QPC lookup, WQE-cache lookup (refetch on a miss), MPT lookup
//             of the local MR (WRITE/SEND) or, for a READ response, of the
//             responder's MR; misses are dependent DMA reads and the PU
//             waits for them
//   packet    MTT lookups of the payload's pages (the PU waits for misses),
//             then the payload DMA read; the packet holds its TX FIFO slot
//             and may not go on the link before the payload has arrived
//   receive   QPC lookup; for WRITE data and READ responses MPT + MTT of
//             the target MR and the payload DMA write (posted: a busy link
//             delays the receive); misses occupy one of the RX PUs
//   CQE       a DMA write, visible cqe_write_ps after it leaves
//
// Every context miss (QPC, MPT, MTT; TX and RX) is a fill through the card's
// miss handler (ContextFillUnit, cache.fill_slots in flight): when its slots
// are busy the miss waits, and so does the PU that missed.
#include <algorithm>
#include <bit>

#include "backend/rnic_model/simulator.h"

namespace vrdma::model {

namespace {

bool CarriesPayload(Op op) {
  return op == Op::kWrite || op == Op::kWriteImm || op == Op::kSend || op == Op::kSendImm;
}

bool IsInline(const Wr& wr, const NicParams& p) {
  return CarriesPayload(wr.op) &&
         (wr.inline_data || wr.bytes <= p.pcie.inline_threshold_bytes);
}

// WQE size in the SQ: mlx5 WQEBBs of 64 B; an inline WRITE/SEND carries
// ctrl (16) + remote address (16) + inline header (4) + the data.
uint32_t WqeBytes(const Wr& wr, const NicParams& p) {
  const uint32_t bb = p.pcie.wqe_bytes;
  if (!IsInline(wr, p)) return bb;
  return (36 + wr.bytes + bb - 1) / bb * bb;
}

}  // namespace

MrId Simulator::RegisterMr(HostId host, uint64_t bytes, uint32_t page_bytes) {
  MemoryRegion mr;
  mr.host = host;
  mr.bytes = bytes;
  mr.page_shift = static_cast<uint32_t>(std::bit_width(std::max<uint32_t>(page_bytes, 4096)) - 1);
  mr.live = true;
  mrs_.push_back(mr);
  NicMemory& m = mem_[host];
  m.command_free = std::max(now_, m.command_free) + hosts_[host].p.cache.mr_command_ps;
  ++m.stats.mr_commands;
  return static_cast<MrId>(mrs_.size() - 1);
}

bool Simulator::DeregisterMr(MrId id) {
  if (id == kNoMr || id >= mrs_.size() || !mrs_[id].live) return false;
  MemoryRegion& mr = mrs_[id];
  mr.live = false;
  NicMemory& m = mem_[mr.host];
  m.stats.invalidations += m.mpt.InvalidateIf([id](uint64_t k) { return k == id; });
  m.stats.invalidations += m.mtt.InvalidateIf([id](uint64_t k) { return (k >> 36) == id; });
  m.command_free = std::max(now_, m.command_free) + hosts_[mr.host].p.cache.mr_command_ps;
  ++m.stats.mr_commands;
  return true;
}

Picos Simulator::MissRead(HostId h, uint32_t bytes, Picos after) {
  NicMemory& m = mem_[h];
  const Picos ready = std::max(now_, after);
  const Picos start = m.fills.Start(ready);
  const Picos done = m.pcie.Read(now_, 0, bytes, start);
  m.fills.Done(done);
  ++m.stats.fills;
  m.stats.fill_wait_ps += start - ready;
  return done;
}

Picos Simulator::Translate(HostId h, MrId id, uint64_t addr, uint32_t len, bool mpt,
                           Picos from) {
  Picos t = std::max(now_, from);
  if (id == kNoMr || id >= mrs_.size()) return t;
  NicMemory& m = mem_[h];
  const CacheParams& c = hosts_[h].p.cache;
  if (mpt) {
    const bool hit = m.mpt.Access(id);
    m.stats.mpt.Count(hit);
    if (!hit) t = MissRead(h, c.mpt_bytes, t);
  }
  const uint32_t shift = mrs_[id].page_shift;
  const uint64_t first = addr >> shift >> m.mtt_line_shift;
  const uint64_t last = (addr + std::max<uint32_t>(len, 1) - 1) >> shift >> m.mtt_line_shift;
  for (uint64_t line = first; line <= last; ++line) {
    const bool hit = m.mtt.Access(NicMemory::MttKey(id, line));
    m.stats.mtt.Count(hit);
    if (!hit) t = MissRead(h, c.mtt_line_bytes, t);
  }
  return t;
}

Picos Simulator::PostFetchDone(QpId qpid, uint64_t from, uint64_t to) {
  Qp& q = qps_[qpid];
  const NicParams& p = hosts_[q.host].p;
  // The doorbell's fetch reads at most one prefetch window.
  QpMemory& qm = qp_mem_[qpid];
  from = std::max(from, qm.wqe_end);
  to = std::min(to, std::max(from, q.proc) + p.cache.wqe_prefetch);
  uint32_t bytes = 0;
  for (uint64_t i = from; i < to; ++i) bytes += WqeBytes(WqeAt(q, i).wr, p);
  PcieLink& link = mem_[q.host].pcie;
  const Picos doorbell = link.Doorbell(now_);
  if (bytes == 0) return doorbell;  // the window is full: nothing to read yet
  const Picos done = link.Read(now_, (from & q.mask) * p.pcie.wqe_bytes, bytes, doorbell);
  qm.wqe_end = to;
  qm.wqe_pending = from;
  qm.wqe_ready = done;
  return done;
}

Picos Simulator::WqeStartStall(HostId h, uint32_t flow) {
  NicMemory& m = mem_[h];
  const CacheParams& c = hosts_[h].p.cache;
  const QpId qpid = flow / 2;
  Qp& q = qps_[qpid];
  Picos t = now_;
  bool hit = m.qpc.Access(qpid);
  m.stats.qpc.Count(hit);
  if (!hit) t = MissRead(h, c.qpc_bytes, t);
  if (flow & 1) {
    // READ response: the responder checks the rkey (MPT) of the requester's
    // remote MR; translations come per packet.
    const Wqe& w = WqeAt(qps_[q.peer], q.resp.front().wqe);
    if (w.wr.remote_mr != kNoMr) {
      hit = m.mpt.Access(w.wr.remote_mr);
      m.stats.mpt.Count(hit);
      if (!hit) t = MissRead(h, c.mpt_bytes, t);
    }
  } else {
    t = std::max(t, now_ + WqeWindowStall(h, qpid));
    const Wqe& w = WqeAt(q, q.proc);
    if (w.wr.local_mr != kNoMr && CarriesPayload(w.wr.op) && !IsInline(w.wr, hosts_[h].p)) {
      hit = m.mpt.Access(w.wr.local_mr);
      m.stats.mpt.Count(hit);
      if (!hit) t = MissRead(h, c.mpt_bytes, t);
    }
  }
  m.stats.stall_ps += t - now_;
  return t - now_;
}

void Simulator::TxPayloadDma(HostId h, uint32_t pu, Packet& pk) {
  NicMemory& m = mem_[h];
  m.pu_busy_until[pu] = now_;
  if (pk.payload == 0) return;
  const uint32_t mtu = hosts_[h].p.mtu_bytes;
  MrId mr;
  uint64_t addr;
  if (pk.type == kReadResp) {
    // Responder: the data comes from the requester's remote MR.
    const Wqe& w = WqeAt(qps_[pk.dst_qp], pk.wqe);
    mr = w.wr.remote_mr;
    addr = w.wr.remote_offset + uint64_t{pk.idx} * mtu;
  } else {
    const Wqe& w = WqeAt(qps_[pk.src_qp], pk.wqe);
    if (IsInline(w.wr, hosts_[h].p)) return;  // came with the WQE
    mr = w.wr.local_mr;
    addr = w.wr.local_offset + uint64_t{pk.psn - w.first_psn} * mtu;
  }
  const Picos translated = Translate(h, mr, addr, pk.payload, false);
  m.pu_busy_until[pu] = translated;
  m.stats.stall_ps += translated - now_;
  const bool first = pk.type == kReadResp ? pk.idx == 0 : pk.first;
  pk.dma_ready = m.pcie.Read(now_, addr, pk.payload, translated, !first);
}

void Simulator::WqesFetched(QpId qpid, uint64_t upto) {
  (void)upto;
  mem_[qps_[qpid].host].wqe.Access(qpid);  // insert (not counted)
}

Picos Simulator::WqeWindowStall(HostId h, QpId qpid) {
  NicMemory& m = mem_[h];
  Qp& q = qps_[qpid];
  QpMemory& qm = qp_mem_[qpid];
  const NicParams& p = hosts_[h].p;
  const uint32_t window = std::max<uint32_t>(p.cache.wqe_prefetch, 1);
  // The window's bytes, from index `from` (at most up to what is fetched).
  auto window_bytes = [&](uint64_t from, uint64_t* end) {
    *end = std::min(q.fetched, from + window);
    uint32_t bytes = 0;
    for (uint64_t i = from; i < *end; ++i) bytes += WqeBytes(WqeAt(q, i).wr, p);
    return std::max<uint32_t>(bytes, p.pcie.wqe_bytes);
  };
  Picos t = now_;
  const bool hit = m.wqe.Access(qpid) && q.proc < qm.wqe_end;
  m.stats.wqe.Count(hit);
  if (!hit) {
    // Evicted or never prefetched: read the window now, the PU waits.
    uint64_t end;
    const uint32_t bytes = window_bytes(q.proc, &end);
    t = m.pcie.Read(now_, (q.proc & q.mask) * p.pcie.wqe_bytes, bytes);
    qm.wqe_end = end;
    qm.wqe_pending = q.proc;
    qm.wqe_ready = t;
  } else if (q.proc >= qm.wqe_pending) {
    t = std::max(t, qm.wqe_ready);  // a background prefetch still on its way
  }
  // Half the window used: prefetch the next one in the background.
  if (qm.wqe_end < q.fetched && qm.wqe_end - q.proc <= window / 2) {
    uint64_t end;
    const uint32_t bytes = window_bytes(qm.wqe_end, &end);
    qm.wqe_ready = m.pcie.Read(now_, (qm.wqe_end & q.mask) * p.pcie.wqe_bytes, bytes);
    qm.wqe_pending = qm.wqe_end;
    qm.wqe_end = end;
  }
  return t - now_;
}

// The TX FIFO's head still waits for its payload: the first packet whose
// payload is on the NIC goes first, unless an earlier packet of its QP
// still waits (a QP's packets leave in order). True when the front is now
// a ready packet; otherwise the link sleeps until the earliest payload.
bool Simulator::TakeReadyPacket(HostId hid) {
  Host& h = hosts_[hid];
  Picos earliest = pkts_[h.fifo.front()].dma_ready;
  const size_t n = h.fifo.size();
  for (size_t i = 1; i < n; ++i) {
    const Packet& pk = pkts_[h.fifo.at(i)];
    if (pk.dma_ready > now_) {
      earliest = std::min(earliest, pk.dma_ready);
      continue;
    }
    bool blocked = false;
    for (size_t j = 0; j < i && !blocked; ++j) {
      const Packet& e = pkts_[h.fifo.at(j)];
      blocked = e.src_qp == pk.src_qp && e.type == pk.type;
    }
    if (blocked) continue;
    h.fifo.move_to_front(i);
    return true;
  }
  NicMemory& m = mem_[hid];
  if (m.link_wake_at == 0 || earliest < m.link_wake_at) {
    m.link_wake_at = earliest;
    Schedule(earliest, kLinkWake, hid, 0, hid);
  }
  return false;
}

Picos Simulator::PuFreeAt(HostId h, uint32_t pu) const {
  return std::max(now_, mem_[h].pu_busy_until[pu]);
}

Picos Simulator::RxDone(HostId hid, uint32_t id, Picos start) {
  Host& h = hosts_[hid];
  NicMemory& m = mem_[hid];
  const Packet& pk = pkts_[id];
  // The lookups start when an RX PU takes the packet (its fills cannot
  // take the miss handler's slots before).
  Picos t = start;
  const bool hit = m.qpc.Access(pk.dst_qp);
  m.stats.qpc.Count(hit);
  if (!hit) t = MissRead(hid, h.p.cache.qpc_bytes, t);
  Picos gate = 0;  // the payload write's turn on the link
  if (pk.payload > 0 && (pk.type == kData || pk.type == kReadResp)) {
    MrId mr = kNoMr;
    uint64_t addr = 0;
    const uint32_t mtu = h.p.mtu_bytes;
    if (pk.type == kReadResp) {
      const Wqe& w = WqeAt(qps_[pk.dst_qp], pk.wqe);
      mr = w.wr.local_mr;
      addr = w.wr.local_offset + uint64_t{pk.idx} * mtu;
    } else if (pk.op == Op::kWrite || pk.op == Op::kWriteImm) {
      const Wqe& w = WqeAt(qps_[pk.src_qp], pk.wqe);
      mr = w.wr.remote_mr;
      addr = w.wr.remote_offset + uint64_t{pk.psn - w.first_psn} * mtu;
    }
    // SEND: the receive buffer is the hot region (no receive-WQE MRs yet).
    if (mr != kNoMr) {
      const bool first = pk.type == kReadResp ? pk.idx == 0 : pk.first;
      // The MPT is checked once per message, the MTT per page.
      const Picos tr = Translate(hid, mr, addr, pk.payload, first, start);
      t = std::max(t, tr);
    }
    m.pcie.Write(now_, addr, pk.payload, &gate, t);
  }
  const Picos stall = t - start;
  m.stats.stall_ps += stall;
  // One of num_rx_pus PUs waits for the misses: the RX server loses
  // stall / num_rx_pus of capacity, this packet the whole stall.
  h.rx_free = start + (h.p.rx_cost_ps + stall) / h.p.num_rx_pus;
  Picos done = std::max(start + h.p.rx_cost_ps / h.p.num_rx_pus + stall, gate);
  // A QP's packets stay in order.
  done = std::max(done, qp_mem_[pk.dst_qp].rx_done);
  qp_mem_[pk.dst_qp].rx_done = done;
  return done;
}

Picos Simulator::CqeVisibleAt(HostId h) {
  return mem_[h].pcie.Write(now_, 0, hosts_[h].p.pcie.cqe_bytes);
}

}  // namespace vrdma::model
