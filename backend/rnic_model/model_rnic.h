// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The RNIC timing MODEL behind the engine's vrdma::Rnic interface, so the
// engine (or any Rnic user) can run on virtual time. One ModelWorld holds
// the simulator; each ModelRnic is one host's card in it. QPNs are global in
// the world, so ModifyQp(RTR, dest_qpn) connects to a QP of any ModelRnic.
//
// Virtual time: Post* act at the current virtual time; Progress() advances
// it by progress_quantum and runs what happened meanwhile; PollCq() returns
// CQEs that became visible, with the virtual time as hardware timestamp.
//
// It is a timing model: it moves no payload and does not check keys, access
// rights or lengths (backend/soft_rnic is the functional twin), except what
// a ReliableRnic above it needs (docs/reliability.md §9): the immediate of
// WRITE_WITH_IMM/SEND_WITH_IMM reaches the receive completion, and the
// first 256 bytes of a SEND are read from the sender's registered memory
// at post and written into the posted receive's SGEs (registered memory)
// when it completes; a UD receive gets the 40-byte RoCE GRH first and its
// byte_len counts it. ResizeCq succeeds (the model's CQs have no depth).
// RegMr
// registers a model MR (4 KiB pages) on this card: a SendWr whose first
// SGE's lkey (and, for RDMA, whose rkey) names one gets the MR's MPT/MTT
// cache behaviour with offset = addr - iova; any other key means the
// always-hot region. kSendInline WRs carry their data in the WQE. It offers
// the cross-channel operations (kWait, kEnable, managed QPs) that PeRF's
// own preemption uses (limits().cross_channel), atomics (CAS/FAA) and the
// retry attributes (retry_cnt, rnr_retry, min_rnr_timer): an exhausted count
// completes the WR with kRetryExcErr/kRnrRetryExcErr, flushes the rest
// (kWrFlushErr) and QueryQp reports kErr.
// UD: the world maps every GID a card registered (AddGid) to that card's
// host; CreateAh resolves the address vector's dgid to a host there (an
// unknown dgid, or an sgid this card did not register, is kInvalid), and a
// UD SEND names its destination by that AH and remote_qpn (a QPN of any
// card). Receive completions carry the sender's QPN (src_qpn).
// Not modelled behind this interface: SRQ, Q_Key checks, flush of
// outstanding work on a ModifyQp to kErr (posting then fails with
// kBadState, but no kWrFlushErr completions are generated).
#ifndef VRDMA_BACKEND_RNIC_MODEL_MODEL_RNIC_H_
#define VRDMA_BACKEND_RNIC_MODEL_MODEL_RNIC_H_

#include <array>
#include <deque>
#include <map>
#include <vector>

#include "backend/rnic/rnic.h"
#include "backend/rnic_model/simulator.h"

namespace vrdma::model {

class ModelWorld {
 public:
  ModelWorld(const FabricParams& fabric, uint64_t seed) : sim_(fabric, seed) {}
  Simulator& sim() { return sim_; }
  const Simulator& sim() const { return sim_; }

  // MRs registered through any ModelRnic of this world, by model MR id:
  // their iova (to turn addresses into offsets). lkey = id << 8 | 1,
  // rkey = id << 8 | 2.
  void set_mr_iova(MrId mr, uint64_t iova) {
    if (mr_iova_.size() <= mr) mr_iova_.resize(mr + 1, kNoIova);
    mr_iova_[mr] = iova;
  }
  // kNoMr unless `key` (with `tag` 1 = lkey, 2 = rkey) names a live MR.
  MrId MrOfKey(uint32_t key, uint32_t tag, uint64_t* iova) const {
    const MrId mr = key >> 8;
    if ((key & 0xff) != tag || mr == kNoMr || mr >= mr_iova_.size() ||
        mr_iova_[mr] == kNoIova) {
      return kNoMr;
    }
    *iova = mr_iova_[mr];
    return mr;
  }
  void clear_mr(MrId mr) {
    if (mr < mr_iova_.size()) mr_iova_[mr] = kNoIova;
    if (mr < mr_mem_.size()) mr_mem_[mr] = MrMemory{};
  }
  // The host memory behind an MR (RegMr's addr and length), so the few
  // bytes the model carries (below) can be read and written.
  void set_mr_memory(MrId mr, uint8_t* addr, uint64_t length) {
    if (mr_mem_.size() <= mr) mr_mem_.resize(mr + 1);
    mr_mem_[mr] = MrMemory{addr, length};
  }
  // The host bytes of [addr, addr + len) under lkey (tag 1) or rkey (tag
  // 2); nullptr unless a live MR with memory holds the whole range.
  uint8_t* HostBytes(uint32_t key, uint32_t tag, uint64_t addr, uint64_t len) const;

  // What the model carries besides timing (docs/rnic-model.md, "Bytes the
  // model carries"): the first kCarryBytes of a SEND (after, for UD, the
  // 40-byte GRH the receiver gets), snapshot at post. Held in a ring of
  // kCarrySlots: a snapshot is found by the tag Wr::carry brought to the
  // receive completion while its slot was not reused (else
  // carry_overwritten counts it and the receive gets no bytes).
  static constexpr uint32_t kCarryBytes = 256;
  static constexpr uint32_t kCarrySlots = 16384;
  static constexpr uint32_t kCarryGrh = 40;
  struct Carried {
    uint32_t tag = 0;  // 0: free
    uint32_t len = 0;  // bytes in data (GRH included)
    std::array<uint8_t, kCarryGrh + kCarryBytes> data{};
  };
  // A slot for a new snapshot; its tag (never 0) goes in Wr::carry.
  Carried& NewCarried();
  // The snapshot of tag, nullptr when overwritten (counted) or tag is 0.
  const Carried* FindCarried(uint32_t tag);
  uint64_t carry_overwritten() const { return carry_overwritten_; }
  uint64_t carried() const { return carried_; }
  // GIDs of the world's cards (ModelRnic::AddGid): which host each names.
  // Add: false when the GID is already some card's.
  bool AddGid(const Gid& gid, HostId host) { return gids_.emplace(gid, host).second; }
  // False when the GID is not host's.
  bool RemoveGid(const Gid& gid, HostId host);
  // The host that registered gid; false when none did.
  bool HostOfGid(const Gid& gid, HostId* host) const;

 private:
  static constexpr uint64_t kNoIova = ~uint64_t{0};
  struct MrMemory {
    uint8_t* addr = nullptr;
    uint64_t length = 0;
  };
  Simulator sim_;
  std::vector<uint64_t> mr_iova_;
  std::vector<MrMemory> mr_mem_;
  std::vector<Carried> carry_;  // kCarrySlots once the first is taken
  uint32_t next_carry_ = 0;
  uint64_t carry_overwritten_ = 0;
  uint64_t carried_ = 0;
  std::map<Gid, HostId> gids_;
};

// The rnic.h opcode a model operation stands for (the inverse of the
// translation in ModelRnic::ToModelWr; kWait and kEnable included).
WrOpcode WrOpcodeOf(Op op);

class ModelRnic final : public Rnic {
 public:
  // QPN = the simulator's QP id + kFirstQpn: QPNs 0 and 1 are the SMI's
  // and the GSI's on every port.
  static constexpr uint32_t kFirstQpn = 2;
  static uint32_t SimQp(uint32_t qpn) { return qpn - kFirstQpn; }

  ModelRnic(ModelWorld& world, const NicParams& nic);

  HostId host() const { return host_; }
  // 0: Progress() leaves virtual time alone (a user that runs the world
  // itself, as the bench's hosts do under a ReliableRnic, which calls its
  // lower's Progress() on every turn).
  void set_progress_quantum(Picos q) { quantum_ = q; }

  RnicLimits limits() const override;
  Status AddGid(const Gid& gid) override;
  Status RemoveGid(const Gid& gid) override;
  Result<RnicPd> AllocPd() override;
  Status DeallocPd(RnicPd pd) override;
  Result<RnicMr> RegMr(RnicPd pd, uint8_t* addr, uint64_t length, uint64_t iova,
                       uint32_t access) override;
  Status DeregMr(RnicMr mr) override;
  Result<RnicCq> CreateCq(uint32_t depth) override;
  Status DestroyCq(RnicCq cq) override;
  // The model's CQs have no fixed depth: a resize of a live CQ succeeds.
  Status ResizeCq(RnicCq cq, uint32_t depth) override;
  Result<RnicSrq> CreateSrq(RnicPd pd, uint32_t max_wr, uint32_t max_sge) override;
  Status DestroySrq(RnicSrq srq) override;
  Result<RnicQp> CreateQp(const QpInit& init) override;
  Status ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) override;
  Result<QpAttr> QueryQp(RnicQp qp) const override;
  Status DestroyQp(RnicQp qp) override;
  Result<RnicAh> CreateAh(RnicPd pd, const AddressVector& av) override;
  Status DestroyAh(RnicAh ah) override;
  int PostSend(RnicQp qp, std::span<const SendWr> wrs, Status* first_error) override;
  int PostRecv(RnicQp qp, std::span<const RecvWr> wrs, Status* first_error) override;
  int PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs, Status* first_error) override;
  int PollCq(RnicCq cq, std::span<Completion> out) override;
  uint64_t CqProduced(RnicCq cq) const override;
  bool Progress() override;

  // CQs created on this card so far (RnicCq ids 1..num_cqs()).
  uint32_t num_cqs() const { return static_cast<uint32_t>(cqs_.size()); }
  // The model's id of a CQ of this card (kNoCq when it is not one).
  static constexpr CqId kNoCq = UINT32_MAX;
  CqId model_cq(RnicCq cq) const {
    return cq.id >= 1 && cq.id <= cqs_.size() ? cqs_[cq.id - 1] : kNoCq;
  }

  // Translation used by PostSend; exposed so tests can check that the
  // adapter and the bench's direct use of the simulator agree. A WR naming
  // an AH (UD) gets the AH's host and remote_qpn's model QP; false for a
  // stale AH or an opcode the model lacks.
  bool ToModelWr(const SendWr& in, Wr* out) const;
  static Completion ToCompletion(const Cqe& c);

 private:
  struct QpEntry {
    bool live = false;
    QpId model = 0;
    QpAttr attr;
    QpType type = QpType::kRc;
    // Receives posted and not completed, in post order: where carried
    // bytes go (the model consumes receives in order).
    std::deque<RecvWr> recvs;
  };
  struct AhEntry {
    bool live = false;
    HostId host = 0;  // the card the AH's dgid names
    AddressVector av;  // for the GRH a UD receiver gets
  };
  // Snapshots what the model carries of a WR (imm, a SEND's first bytes).
  void Carry(const QpEntry& e, const SendWr& in, Wr* w);
  // A receive completion of this card: its receive's bytes, imm, length.
  void Land(const Cqe& c, Completion* o);
  QpEntry* Find(RnicQp qp);
  const QpEntry* Find(RnicQp qp) const;

  ModelWorld& world_;
  HostId host_ = 0;
  Picos quantum_ = NsToPs(1000);
  uint32_t next_pd_ = 1;
  std::vector<CqId> cqs_;          // RnicCq.id - 1 -> model CQ
  std::vector<QpEntry> qps_;       // RnicQp.id - 1
  std::vector<AhEntry> ahs_;       // RnicAh.id - 1
  std::map<QpId, uint32_t> by_model_;  // model QP -> RnicQp.id - 1
};

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_MODEL_RNIC_H_
