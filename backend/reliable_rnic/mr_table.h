// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// MrTable: the layer's record of every MR registered through it
// (docs/reliability.md §2.1, §2.4): the lower MR's id and keys, its PD,
// host address, iova, length and access, in a fixed table keyed by the
// lower MR's id, and indexed by rkey for the responder's checks of §3.6
// (a WRITE_RETX's, WRITE_TAIL's or READ_REQ's rkey in the QP's PD,
// access, range: CheckRemote), and by lkey for the copies into guest
// receives (step 12) and READs' local SGEs (step 13): LocalTarget.
// Written by RegMr and DeregMr (control calls).
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_MR_TABLE_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_MR_TABLE_H_

#include <cstdint>

#include "backend/reliable_rnic/id_table.h"
#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

// The responder's rules for a remote access (§3.6 rx_access_nak), in the
// order CheckRemote applies them: the first one broken.
enum class RemoteRule : uint8_t {
  kOk,
  kRkey,    // no MR has the rkey
  kPd,      // the MR is another PD's than the QP's
  kAccess,  // the MR lacks the access (REMOTE_WRITE, REMOTE_READ)
  kRange,   // [addr, addr + len) is not inside the MR
};

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
  // The responder's rules: the MR of rkey, in pd, with access, covering
  // [addr, addr + len); *out is that MR when kOk.
  RemoteRule CheckRemote(uint32_t rkey, uint32_t pd_id, uint64_t addr,
                         uint64_t len, uint32_t access,
                         const MrRecord** out) const {
    const MrRecord* mr = FindByRkey(rkey);
    if (mr == nullptr) return RemoteRule::kRkey;
    if (mr->pd.id != pd_id) return RemoteRule::kPd;
    if ((mr->access & access) != access) return RemoteRule::kAccess;
    if (addr < mr->iova || addr - mr->iova > mr->length ||
        len > mr->length - (addr - mr->iova)) {
      return RemoteRule::kRange;
    }
    *out = mr;
    return RemoteRule::kOk;
  }
  // The host address of a local SGE the layer writes into (a guest
  // receive's, a READ's), by the RNIC's local rules: an MR of pd_id with
  // local write covering it; nullptr otherwise (LOC_PROT_ERR).
  uint8_t* LocalTarget(const Sge& s, uint32_t pd_id) const {
    const MrRecord* mr = FindByLkey(s.lkey);
    if (mr == nullptr || mr->pd.id != pd_id ||
        (mr->access & kAccessLocalWrite) == 0 || s.addr < mr->iova ||
        s.addr - mr->iova > mr->length ||
        s.length > mr->length - (s.addr - mr->iova)) {
      return nullptr;
    }
    return mr->addr + (s.addr - mr->iova);
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
