// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine fuzzer's data-path operations: WQEs written the way librxe
// writes them (well-formed, with real keys) or fuzzer bytes, doorbells,
// bounded polling and the guest's side of its CQs.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backend/engine/testing/engine_fuzz_state.h"
#include "backend/engine/testing/guest_env.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine::fuzz {
namespace {

constexpr uint32_t kProducer = 128;
constexpr uint32_t kConsumer = 256;

uint32_t RingIndex(const FuzzGuest& g, const RingRec& r, uint32_t off) {
  uint32_t v = 0;
  g.RingRead(r, off, &v, 4);
  return v;
}

}  // namespace

bool Driver::PollOnce() {
  ++stats_.polls;
  --poll_budget_;
  return engine_->PollOnce();
}

void Driver::AdvanceProducer(VmModel& vm, const RingRec& ring) {
  const uint32_t p = (RingIndex(*vm.guest, ring, kProducer) + 1) & ring.mask();
  vm.guest->RingWrite(ring, kProducer, &p, 4, true);
}

void Driver::ScanRefs(VmModel& vm, const RingRec& ring,
                      std::optional<uint32_t> elem) {
  if (ring.kind == RingKind::kCq) return;
  const uint32_t first =
      ring.kind == RingKind::kSq ? kSendWqeHeaderBytes : kRecvWqeHeaderBytes;
  const uint32_t lo = elem ? *elem : 0;
  const uint32_t hi = elem ? *elem + 1 : ring.mask() + 1;
  for (uint32_t e = lo; e < hi; ++e) {
    const uint64_t base = ring.ElemOffset(e);
    for (uint32_t o = first; o + 16 <= ring.elem(); o += 16) {
      uint8_t sge[16];
      vm.guest->RingRead(ring, base + o, sge, 16);
      SgeRef r;
      std::memcpy(&r.addr, sge, 8);
      std::memcpy(&r.len, sge + 8, 4);
      std::memcpy(&r.lkey, sge + 12, 4);
      // Only what could be a SoftRnic lkey (index << 8 | tag, small index).
      if (r.len == 0 || (r.lkey & 0xff) == 0 || (r.lkey >> 8) == 0 ||
          (r.lkey >> 8) > 64) {
        continue;
      }
      const bool known =
          std::any_of(vm.refs.begin(), vm.refs.end(), [&](const SgeRef& x) {
            return x.lkey == r.lkey && x.addr == r.addr && x.len == r.len;
          });
      if (!known) vm.refs.push_back(r);
    }
  }
}

void Driver::PostSend(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t b = in.U8();
  const uint8_t op_sel = in.U8();
  const uint8_t flags = in.U8();
  const uint8_t mr_sel = in.U8();
  const uint16_t off = in.U16();
  const uint16_t len_sel = in.U16();
  const uint8_t peer = in.U8();
  const uint8_t rmr_sel = in.U8();
  const uint16_t roff = in.U16();
  if (vm.qps.empty()) return;
  QpRec& qp = vm.qps[b % vm.qps.size()];
  static constexpr uint32_t kOps[] = {IB_UVERBS_WR_SEND,
                                      IB_UVERBS_WR_SEND_WITH_IMM,
                                      IB_UVERBS_WR_RDMA_WRITE,
                                      IB_UVERBS_WR_RDMA_WRITE_WITH_IMM,
                                      IB_UVERBS_WR_RDMA_READ,
                                      IB_UVERBS_WR_ATOMIC_CMP_AND_SWP,
                                      IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD};
  testing::GuestSend s;
  s.opcode = kOps[op_sel % 7];
  s.wr_id = vm.next_wr_id++;
  s.flags = (flags & 1) ? 0u : uint32_t{kSendSignaled};
  s.imm = 0x11223344;
  const bool atomic = s.opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
                      s.opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
  const bool reads = atomic || s.opcode == IB_UVERBS_WR_RDMA_READ;
  // Local buffer: one of the VM's MRs.
  Sge sge;
  if (!vm.mrs.empty()) {
    const MrRec& m = vm.mrs[mr_sel % vm.mrs.size()];
    const uint64_t o = atomic ? (off % m.length) & ~7ull : off % m.length;
    sge.addr = m.iova + o;
    sge.lkey = m.lkey;
    const uint64_t room = std::min<uint64_t>(m.length - o, 3 * kPage);
    sge.length = atomic ? 8 : static_cast<uint32_t>(len_sel % (room + 1));
  } else {
    sge = {off, len_sel, len_sel};
  }
  // Remote buffer: an MR of any VM, with its rkey and iova.
  const VmModel& pv = vm_[peer % kVms];
  if (!pv.mrs.empty()) {
    const MrRec& m = pv.mrs[rmr_sel % pv.mrs.size()];
    const uint64_t o = roff % m.length;
    s.remote_addr = m.iova + (atomic ? o & ~7ull : o);
    // Bit 4: guess the key the engine did not hand out (its lkey).
    s.rkey = (flags & 0x10) ? m.lkey : m.rkey;
  }
  s.compare_add = 1;
  s.swap = 2;
  if (qp.type == QpType::kUd) {
    s.ah = vm.ahs.empty() ? 1 : vm.ahs[rmr_sel % vm.ahs.size()].handle;
    s.ud_qpn = pv.qps.empty() ? roff : pv.qps[roff % pv.qps.size()].qpn;
    s.ud_qkey = (flags & 0x40) ? roff : kQkey;
  }
  if ((flags & 2) && !reads) {
    s.flags |= kSendInline;
    std::span<const uint8_t> d =
        in.Bytes(std::min<uint32_t>(len_sel % 160, 128));
    s.inline_data.assign(d.begin(), d.end());
    for (uint8_t& x : s.inline_data) {
      if (x == kMagic0) --x;
    }
  } else if (sge.length != 0 || (flags & 8)) {
    s.sges.push_back(sge);
    if (flags & 0x20) s.sges.push_back(sge);  // the same buffer twice
  }
  const bool empty_inline = (s.flags & kSendInline) && s.inline_data.empty();
  if (empty_inline) s.inline_data.push_back(0);  // WriteSendWqe copies it
  std::vector<uint8_t> wqe(std::max<uint32_t>(qp.sq.elem(), 1024), 0);
  testing::WriteSendWqe(wqe.data(), s);
  if (empty_inline) std::memset(wqe.data() + send_wqe::kDmaLength, 0, 4);
  const uint32_t p = RingIndex(*vm.guest, qp.sq, kProducer) & qp.sq.mask();
  vm.guest->RingWrite(qp.sq, qp.sq.ElemOffset(p), wqe.data(), qp.sq.elem(),
                      true);
  if (reads) ScanRefs(vm, qp.sq, p);
  AdvanceProducer(vm, qp.sq);
  if (flags & 4) engine_->Doorbell(vm.id, VIRTIO_RDMA_DB_SQ, qp.qpn);
}

void Driver::PostRecv(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t b = in.U8();
  const uint8_t mr_sel = in.U8();
  const uint16_t off = in.U16();
  const uint16_t len_sel = in.U16();
  const RingRec* ring = nullptr;
  uint8_t kind = VIRTIO_RDMA_DB_RQ;
  uint32_t handle = 0;
  if ((b & 0x80) && !vm.srqs.empty()) {
    const SrqRec& s = vm.srqs[(b & 0x1f) % vm.srqs.size()];
    ring = &s.ring;
    kind = VIRTIO_RDMA_DB_SRQ;
    handle = s.handle;
  } else if (!vm.qps.empty()) {
    const QpRec& q = vm.qps[(b & 0x1f) % vm.qps.size()];
    if (!q.rq) return;
    ring = &*q.rq;
    handle = q.qpn;
  } else {
    return;
  }
  std::vector<Sge> sges;
  if (!vm.mrs.empty()) {
    const MrRec& m = vm.mrs[mr_sel % vm.mrs.size()];
    const uint64_t o = off % m.length;
    const uint64_t room = std::min<uint64_t>(m.length - o, 3 * kPage);
    sges.push_back(
        {m.iova + o, static_cast<uint32_t>(len_sel % (room + 1)), m.lkey});
    if (b & 0x40) sges.push_back({m.iova, 64, m.lkey});
  }
  const uint32_t p = RingIndex(*vm.guest, *ring, kProducer) & ring->mask();
  std::vector<uint8_t> e(ring->elem(), 0);
  const uint64_t wr_id = vm.next_wr_id++;
  std::memcpy(e.data() + recv_wqe::kWrId, &wr_id, 8);
  const uint32_t n = static_cast<uint32_t>(sges.size());
  std::memcpy(e.data() + recv_wqe::kDmaNumSge, &n, 4);
  for (uint32_t i = 0; i < n && kRecvWqeHeaderBytes + 16 * (i + 1) <= e.size();
       ++i) {
    std::memcpy(e.data() + kRecvWqeHeaderBytes + i * 16, &sges[i], 16);
  }
  vm.guest->RingWrite(*ring, ring->ElemOffset(p), e.data(), e.size(), true);
  ScanRefs(vm, *ring, p);
  AdvanceProducer(vm, *ring);
  if (b & 0x20) engine_->Doorbell(vm.id, kind, handle);
}

void Driver::RawWqe(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t b = in.U8();
  const uint8_t how = in.U8();
  std::vector<RingRec*> rings;
  std::vector<CqRec*> cq_of;
  for (QpRec& q : vm.qps) {
    rings.push_back(&q.sq), cq_of.push_back(nullptr);
    if (q.rq) rings.push_back(&*q.rq), cq_of.push_back(nullptr);
  }
  for (SrqRec& s : vm.srqs) rings.push_back(&s.ring), cq_of.push_back(nullptr);
  for (CqRec& c : vm.cqs) rings.push_back(&c.ring), cq_of.push_back(&c);
  if (rings.empty()) return;
  const size_t i = b % rings.size();
  const RingRec& r = *rings[i];
  const uint32_t idx =
      (how & 0x80) ? in.U16() : RingIndex(*vm.guest, r, kProducer);
  std::span<const uint8_t> bytes =
      in.Bytes(std::min<uint32_t>(in.U8() * 4u, r.elem()));
  vm.guest->RingWrite(r, r.ElemOffset(idx), bytes.data(), bytes.size(), false);
  ScanRefs(vm, r, idx & r.mask());
  if (cq_of[i] != nullptr) {
    cq_of[i]->scribbled = true;
    // The guest owns a CQ's consumer index.
    if (how & 0x40) {
      const uint32_t c = in.U16();
      vm.guest->RingWrite(r, kConsumer, &c, 4, true);
    }
    return;
  }
  switch (how & 3) {
    case 0:
      AdvanceProducer(vm, r);
      break;
    case 1: {  // any value, even out of range
      const uint32_t p = in.U16() >> (in.U8() & 7);
      vm.guest->RingWrite(r, kProducer, &p, 4, true);
      break;
    }
    case 2: {  // the device-owned consumer index
      const uint32_t c = in.U16();
      vm.guest->RingWrite(r, kConsumer, &c, 4, true);
      break;
    }
    default:
      break;
  }
}

void Driver::RawWrite(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint64_t foff = in.U32() % kVmBytes;
  std::span<const uint8_t> bytes = in.Bytes(in.U8());
  vm.guest->Write(foff, bytes);
  const uint32_t p0 = static_cast<uint32_t>(foff / kPage);
  const uint32_t p1 = static_cast<uint32_t>((foff + bytes.size()) / kPage);
  auto touches = [&](const RingRec& r) {
    return std::any_of(r.fpages.begin(), r.fpages.end(),
                       [&](uint32_t p) { return p >= p0 && p <= p1; }) ||
           p1 >= kVmPages;  // wrapped around
  };
  for (QpRec& q : vm.qps) {
    if (touches(q.sq)) ScanRefs(vm, q.sq, std::nullopt);
    if (q.rq && touches(*q.rq)) ScanRefs(vm, *q.rq, std::nullopt);
  }
  for (SrqRec& s : vm.srqs) {
    if (touches(s.ring)) ScanRefs(vm, s.ring, std::nullopt);
  }
  for (CqRec& c : vm.cqs) c.scribbled |= touches(c.ring);
}

void Driver::Doorbell(ByteReader& in) {
  const uint8_t b = in.U8();
  const uint8_t kind = in.U8();
  VmModel& vm = vm_[b % kVms];
  VmId id = vm.id;
  if (b & 0x80) {
    id = in.U32();
  } else if (!vm.attached) {
    if (!vm.stale_id) return;
    id = *vm.stale_id;
  }
  const int v = b % kVms;
  uint32_t handle = 0;
  switch (kind % 7) {
    case VIRTIO_RDMA_DB_SQ:
    case VIRTIO_RDMA_DB_RQ:
      handle = PickHandle(
          v, &VmModel::qps, [](const QpRec& q) { return q.qpn; }, in);
      break;
    case VIRTIO_RDMA_DB_SRQ:
      handle = PickHandle(
          v, &VmModel::srqs, [](const SrqRec& s) { return s.handle; }, in);
      break;
    case VIRTIO_RDMA_DB_CQ_ARM:
    case VIRTIO_RDMA_DB_CQ_ARM_SOLICITED:
      handle = PickHandle(
          v, &VmModel::cqs, [](const CqRec& c) { return c.handle; }, in);
      break;
    default:
      handle = in.U32();
      break;
  }
  engine_->Doorbell(id, (kind & 0x80) ? kind : kind % 7, handle);
}

void Driver::Poll(ByteReader& in) {
  const uint8_t b = in.U8();
  static constexpr policy::Nanos kStep[] = {0, 1'000, 100'000, 10'000'000,
                                            1'000'000'000};
  const policy::Nanos step = kStep[(b >> 5) % 5];
  const int turns = (b & 0x1f) == 0x1f ? 300 : 1 + (b & 0x1f);
  for (int i = 0; i < turns && poll_budget_ > 0; ++i) {
    now_ += step;
    if (PollOnce()) continue;
    // Idle: a deadline already due would make the loop spin without work.
    const policy::Nanos d = engine_->NextDeadline();
    if (d != policy::kNever && d <= now_) {
      if (!PollOnce() && engine_->NextDeadline() <= now_) {
        Fail("idle data path reports deadline %llu at now %llu, twice",
             static_cast<unsigned long long>(d),
             static_cast<unsigned long long>(now_));
      }
    }
    if ((b & 0x1f) == 0x1f) break;  // "until idle"
  }
}

void Driver::DrainCq(int v, ByteReader& in) {
  VmModel& vm = vm_[v];
  const uint8_t b = in.U8();
  if (vm.cqs.empty()) return;
  CqRec& cq = vm.cqs[b % vm.cqs.size()];
  const RingRec& r = cq.ring;
  // The guest wrote into the ring (other ops on aliased pages): entries
  // and producer index may be its own bytes.
  cq.scribbled |= RingWrites(*vm.guest, r) != cq.writes;
  const uint32_t p = RingIndex(*vm.guest, r, kProducer);
  if (p > r.mask() && !vm.all_local && !cq.scribbled)
    Fail("CQ %#x of VM %d: producer index %u beyond mask %u", cq.handle, v, p,
         r.mask());
  // From the guest's own consumer index: every entry up to the producer
  // was written by the device (it starts at 0 and moves one by one).
  uint32_t c = cq.consumer & r.mask();
  if (trace_) {
    std::fprintf(stderr, "  CQ %#x: consumer %u producer %u mask %u\n",
                 cq.handle, c, p, r.mask());
  }
  for (uint32_t n = 0; c != (p & r.mask()) && n <= r.mask(); ++n) {
    ib_uverbs_wc wc;
    vm.guest->RingRead(r, r.ElemOffset(c), &wc, sizeof wc);
    if (!cq.scribbled && !vm.all_local &&
        std::find(vm.qpn_history.begin(), vm.qpn_history.end(), wc.qp_num) ==
            vm.qpn_history.end()) {
      Fail("CQ %#x of VM %d: CQE for qpn %#x, not one of its QPs", cq.handle, v,
           wc.qp_num);
    }
    if (trace_) {
      std::fprintf(
          stderr, "  CQE vm %d qpn %#x wr_id %llu status %u opcode %u len %u\n",
          v, wc.qp_num, static_cast<unsigned long long>(wc.wr_id), wc.status,
          wc.opcode, wc.byte_len);
    }
    if (wc.status == 0) {
      ++stats_.cqes_success;
      if (wc.opcode & static_cast<uint32_t>(WcOpcode::kRecv))
        ++stats_.recv_success;
    }
    c = (c + 1) & r.mask();
  }
  cq.consumer = c;
  vm.guest->WriteCqConsumer(r, c);
}

}  // namespace vrdma::engine::fuzz
