// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// MrTable: the layer's record of every MR registered through it
// (docs/reliability.md §2.1, §2.4): the lower MR's id and keys, its PD,
// host address, iova, length and access, in a fixed table keyed by the
// lower MR's id, and indexed by rkey for the responder's checks of §3.6
// (a WRITE_RETX's rkey in the QP's PD, access, range: receiver.cc; READ is
// step 13), and by lkey for the copies into guest receives (step 12).
// Written by RegMr and DeregMr (control calls).
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_MR_TABLE_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_MR_TABLE_H_

#include <cstdint>

#include "backend/reliable_rnic/id_table.h"
#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

struct MrRecord {
  RnicMr mr{};  // the lower MR: id, lkey, rkey
  RnicPd pd{};
  uint8_t* addr = nullptr;  // host address of iova
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t access = 0;  // AccessFlags
};

class MrTable {
 public:
  explicit MrTable(uint32_t capacity)
      : table_(capacity), by_rkey_(capacity), by_lkey_(capacity) {}

  uint32_t capacity() const { return table_.capacity(); }
  uint32_t live() const { return table_.live(); }

  // False when the table is full (or the id is recorded already).
  [[nodiscard]] bool Add(const MrRecord& r) {
    if (table_.Insert(r.mr.id, r) == nullptr) return false;
    (void)by_rkey_.Insert(r.mr.rkey, r.mr.id);  // keys are unique per RNIC
    (void)by_lkey_.Insert(r.mr.lkey, r.mr.id);
    return true;
  }
  // False when mr is not recorded.
  bool Remove(RnicMr mr) {
    const MrRecord* r = table_.Find(mr.id);
    if (r != nullptr) {
      const uint32_t* id = by_rkey_.Find(r->mr.rkey);
      if (id != nullptr && *id == mr.id) by_rkey_.Erase(r->mr.rkey);
      id = by_lkey_.Find(r->mr.lkey);
      if (id != nullptr && *id == mr.id) by_lkey_.Erase(r->mr.lkey);
    }
    return table_.Erase(mr.id);
  }
  const MrRecord* Find(uint32_t mr_id) const { return table_.Find(mr_id); }
  // The MR whose rkey is rkey; nullptr when none is recorded.
  const MrRecord* FindByRkey(uint32_t rkey) const {
    const uint32_t* id = by_rkey_.Find(rkey);
    return id != nullptr ? table_.Find(*id) : nullptr;
  }
  // The MR whose lkey is lkey (a guest receive's SGE, step 12).
  const MrRecord* FindByLkey(uint32_t lkey) const {
    const uint32_t* id = by_lkey_.Find(lkey);
    return id != nullptr ? table_.Find(*id) : nullptr;
  }

 private:
  IdTable<MrRecord> table_;
  IdTable<uint32_t> by_rkey_;  // rkey -> the MR's id
  IdTable<uint32_t> by_lkey_;  // lkey -> the MR's id
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_MR_TABLE_H_
