// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// MrTable: the layer's record of every MR registered through it
// (docs/reliability.md §2.1, §2.4): the lower MR's id and keys, its PD,
// host address, iova, length and access, in a fixed table keyed by the
// lower MR's id. Written by RegMr and DeregMr (control calls); the checks
// of §2.3 and §3.6 that read it (rkey in the QP's PD, access, range) come
// with the framed modes (step 13), and with them an index by rkey.
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
  explicit MrTable(uint32_t capacity) : table_(capacity) {}

  uint32_t capacity() const { return table_.capacity(); }
  uint32_t live() const { return table_.live(); }

  // False when the table is full (or the id is recorded already).
  [[nodiscard]] bool Add(const MrRecord& r) {
    return table_.Insert(r.mr.id, r) != nullptr;
  }
  // False when mr is not recorded.
  bool Remove(RnicMr mr) { return table_.Erase(mr.id); }
  const MrRecord* Find(uint32_t mr_id) const { return table_.Find(mr_id); }

 private:
  IdTable<MrRecord> table_;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_MR_TABLE_H_
