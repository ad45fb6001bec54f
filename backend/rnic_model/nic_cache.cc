// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/rnic_model/nic_cache.h"

#include <algorithm>
#include <bit>

namespace vrdma::model {

void SetAssocLru::Init(uint32_t entries, uint32_t ways) {
  keys_.clear();
  stamps_.clear();
  clock_ = 0;
  if (entries == 0) return;
  ways_ = std::clamp<uint32_t>(ways, 1, entries);
  const uint32_t sets = std::bit_floor(std::max<uint32_t>(entries / ways_, 1));
  set_bits_ = static_cast<uint32_t>(std::countr_zero(sets));
  keys_.assign(size_t{sets} * ways_, kEmpty);
  stamps_.assign(keys_.size(), 0);
}

bool SetAssocLru::Access(uint64_t key) {
  if (keys_.empty()) return true;
  // Fibonacci hashing: spreads consecutive QP numbers and MTT lines.
  const uint64_t h = key * 0x9E3779B97F4A7C15ull;
  const size_t set = set_bits_ == 0 ? 0 : static_cast<size_t>(h >> (64 - set_bits_));
  const size_t base = set * ways_;
  ++clock_;
  size_t victim = base;
  for (size_t i = base; i < base + ways_; ++i) {
    if (keys_[i] == key) {
      stamps_[i] = clock_;
      return true;
    }
    if (stamps_[i] < stamps_[victim]) victim = i;  // empty slots have stamp 0
  }
  keys_[victim] = key;
  stamps_[victim] = clock_;
  return false;
}

void NicMemory::Init(const NicParams& p) {
  pcie = PcieLink(p.pcie, p.doorbell_ps, p.wqe_fetch_ps, p.cqe_write_ps);
  const CacheParams& c = p.cache;
  qpc.Init(c.qpc_entries, c.ways);
  mpt.Init(c.mpt_entries, c.ways);
  const uint32_t per_line = std::max<uint32_t>(c.mtt_line_bytes / std::max<uint32_t>(c.mtt_entry_bytes, 1), 1);
  mtt.Init(c.mtt_entries / per_line, c.ways);
  mtt_line_shift = static_cast<uint32_t>(std::bit_width(per_line) - 1);
  wqe.Init(c.wqe_qps, c.ways);
  fills.Init(c.fill_slots);
  pu_busy_until.assign(p.num_pus, 0);
}

}  // namespace vrdma::model
