// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/rnic_model/pcie.h"

#include <algorithm>
#include <bit>

namespace vrdma::model {

namespace {
uint32_t Pow2AtLeast(uint32_t v, uint32_t lo) {
  return std::bit_ceil(std::max(v, lo));
}
}  // namespace

PcieLink::PcieLink(const PcieParams& p, Picos doorbell_ps, Picos read_rtt_ps, Picos write_ps)
    : p_(p), doorbell_ps_(doorbell_ps), read_rtt_ps_(read_rtt_ps), write_ps_(write_ps) {
  p_.mps_bytes = Pow2AtLeast(p.mps_bytes, 128);
  p_.mrrs_bytes = Pow2AtLeast(p.mrrs_bytes, 128);
  p_.rcb_bytes = Pow2AtLeast(p.rcb_bytes, 64);
  p_.completion_bytes =
      std::clamp(Pow2AtLeast(p.completion_bytes, 64), p_.rcb_bytes, p_.mps_bytes);
  p_.read_tags = std::max<uint32_t>(p.read_tags, 1);
  // Gen1/2 use 8b/10b, Gen3-5 128b/130b.
  const double encoding = p.gts <= 5.0 ? 0.8 : 128.0 / 130.0;
  gbps_ = p.gts * p.lanes * encoding * p.dllp_efficiency;
  if (gbps_ <= 0.0) gbps_ = 1.0;
  const double ps_per_byte = 8000.0 / gbps_;
  up_q16_ = down_q16_ = static_cast<uint64_t>(ps_per_byte * 65536.0 + 0.5);
  tags_.assign(p_.read_tags, TagBatch{});
  mps_shift_ = static_cast<uint32_t>(std::countr_zero(p_.mps_bytes));
  mrrs_shift_ = static_cast<uint32_t>(std::countr_zero(p_.mrrs_bytes));
  cpl_shift_ = static_cast<uint32_t>(std::countr_zero(p_.completion_bytes));
}

Picos PcieLink::Read(Picos now, uint64_t addr, uint32_t bytes, Picos after, bool streamed) {
  const uint32_t nreq = TlpCountShift(addr, bytes, mrrs_shift_);
  const uint32_t ncpl = TlpCountShift(addr, bytes, cpl_shift_);
  Picos t = now;
  // Each request needs a tag; with too few free, wait for the oldest reads
  // to complete. (A read of more than read_tags requests, e.g. a huge post
  // list, is counted as read_tags of them.)
  const uint32_t ntags = std::min(nreq, p_.read_tags);
  while (tags_in_use_ + ntags > p_.read_tags) {
    const TagBatch& oldest = tags_[tag_head_];
    if (oldest.release > t) {
      t = oldest.release;
      ++stats_.tag_waits;
    }
    tags_in_use_ -= oldest.n;
    tag_head_ = tag_head_ + 1 == p_.read_tags ? 0 : tag_head_ + 1;
    --tag_batches_;
  }
  const uint64_t up_bytes = uint64_t{nreq} * p_.mrd_header_bytes;
  const uint64_t down_bytes = uint64_t{ncpl} * p_.cpld_header_bytes + bytes;
  const Picos req_start = std::max(t, up_free_);
  up_free_ = req_start + UpTime(up_bytes);
  const Picos cpl_start = std::max(up_free_, down_free_);
  down_free_ = cpl_start + DownTime(down_bytes);
  // A dependent read cannot leave before `after`: its latency counts from
  // there (its bandwidth was reserved now).
  const Picos done = std::max(down_free_, after + DownTime(down_bytes)) +
                     (streamed ? 0 : read_rtt_ps_);
  uint32_t slot = tag_head_ + tag_batches_;
  if (slot >= p_.read_tags) slot -= p_.read_tags;
  tags_[slot] = TagBatch{done, ntags};
  ++tag_batches_;
  tags_in_use_ += ntags;
  ++stats_.reads;
  stats_.up.tlps += nreq;
  stats_.up.bytes += up_bytes;
  stats_.down.tlps += ncpl;
  stats_.down.bytes += down_bytes;
  stats_.down.payload_bytes += bytes;
  return done;
}

Picos PcieLink::Write(Picos now, uint64_t addr, uint32_t bytes, Picos* start, Picos after) {
  const uint32_t n = TlpCountShift(addr, bytes, mps_shift_);
  const uint64_t wire = uint64_t{n} * p_.mwr_header_bytes + bytes;
  const Picos s = std::max(now, up_free_);
  up_free_ = s + UpTime(wire);
  if (start != nullptr) *start = std::max(s, after);
  ++stats_.writes;
  stats_.up.tlps += n;
  stats_.up.bytes += wire;
  stats_.up.payload_bytes += bytes;
  return std::max(up_free_, after + UpTime(wire)) + write_ps_;
}

Picos PcieLink::Doorbell(Picos now) {
  const uint64_t wire = uint64_t{p_.mwr_header_bytes} + p_.doorbell_bytes;
  const Picos s = std::max(now, down_free_);
  down_free_ = s + DownTime(wire);
  ++stats_.doorbells;
  ++stats_.down.tlps;
  stats_.down.bytes += wire;
  stats_.down.payload_bytes += p_.doorbell_bytes;
  return down_free_ + doorbell_ps_;
}

}  // namespace vrdma::model
