// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// VerbsRnic: vrdma::Rnic on a physical (or Soft-RoCE) RNIC through
// libibverbs. Design: docs/verbs-rnic.md. The engine has checked everything
// it passes; this class translates one to one to verbs and reports what the
// device decides as a Status (control path) or a completion (data path).
//
// Objects live in fixed-capacity slot tables sized at Open; an object is
// named by its slot (id = index + 1). A create takes a slot only after the
// verbs call succeeded, so a failed call leaves nothing behind.
//
// Threading: rnic.h's contract (one thread at a time for control and data
// calls, except that the control calls but the GIDs' run beside the data
// path: control_beside_data_path). HasGid only reads the device
// and may run on any thread. The data
// path (Post*, PollCq, PollAsyncEvent, ArmCompletions, DrainCompletionFd)
// allocates nothing; it builds verbs work requests in preallocated arrays.
#ifndef VRDMA_BACKEND_VERBS_RNIC_VERBS_RNIC_H_
#define VRDMA_BACKEND_VERBS_RNIC_VERBS_RNIC_H_

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/base/status.h"
#include "backend/rnic/rnic.h"

namespace vrdma {

// errno of a failed verbs call -> Status (docs/verbs-rnic.md, "Errors").
Status StatusFromErrno(int err);

// A fixed-capacity table of verbs objects: slot index + 1 is the id. Insert
// and Erase on the control path; Get is O(1) for the data path.
template <typename T>
class VerbsSlots {
 public:
  void Init(uint32_t capacity) {
    slots_.assign(capacity, T{});
    free_.clear();
    free_.reserve(capacity);
    for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
  }
  bool full() const { return free_.empty(); }
  // Takes a free slot for v; 0 when full (callers check full() first).
  uint32_t Insert(const T& v) {
    if (free_.empty()) return 0;
    const uint32_t i = free_.back();
    free_.pop_back();
    slots_[i] = v;
    return i + 1;
  }
  T* Get(uint32_t id) {
    if (id == 0 || id > slots_.size() || !slots_[id - 1].live()) return nullptr;
    return &slots_[id - 1];
  }
  const T* Get(uint32_t id) const {
    return const_cast<VerbsSlots*>(this)->Get(id);
  }
  void Erase(uint32_t id) {
    slots_[id - 1] = T{};
    free_.push_back(id - 1);
  }
  uint32_t live() const {
    return static_cast<uint32_t>(slots_.size() - free_.size());
  }
  template <typename F>
  void ForEach(F f) {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].live()) f(i + 1, slots_[i]);
    }
  }

 private:
  std::vector<T> slots_;
  std::vector<uint32_t> free_;
};

class VerbsRnic final : public Rnic {
 public:
  struct Options {
    std::string device;  // ibv_get_device_name, e.g. "mlx5_0", "rxe0"
    uint8_t port = 1;
    // Upper bound of each object table (the device's limit when lower).
    uint32_t max_objects = 65535;
  };

  // Opens the device. On failure returns nullptr and says why in *error
  // (for the operator: no such device, port not active, ...).
  static std::unique_ptr<VerbsRnic> Open(const Options& options,
                                         std::string* error);
  ~VerbsRnic() override;
  VerbsRnic(const VerbsRnic&) = delete;
  VerbsRnic& operator=(const VerbsRnic&) = delete;

  // The GIDs of the port's table that HasGid would accept (RoCE v2 entries
  // first where the port lists a GID twice), for messages and tests.
  std::vector<Gid> PortGids() const;
  const std::string& device_name() const { return options_.device; }
  uint8_t port() const { return options_.port; }
  // Objects held, for leak checks in tests.
  uint32_t live_objects() const;

  RnicLimits limits() const override { return limits_; }
  // The calls it allows beside the data path touch only their own tables'
  // slots (the data path reads others' slots) and libibverbs, which is
  // thread-safe; a CQ's also its arming slot (arm_cqs_), with a grace
  // period before a destroy. AddGid and RemoveGid only edit a table.
  bool control_beside_data_path() const override { return true; }
  Status AddGid(const Gid& gid) override;
  Status RemoveGid(const Gid& gid) override;
  bool HasGid(const Gid& gid) const override { return FindPortGid(gid) >= 0; }

  Result<RnicPd> AllocPd() override;
  Status DeallocPd(RnicPd pd) override;
  Result<RnicMr> RegMr(RnicPd pd, uint8_t* addr, uint64_t length, uint64_t iova,
                       uint32_t access) override;
  Status DeregMr(RnicMr mr) override;
  // ibv_alloc_mw / ibv_dealloc_mw (max_mw from ibv_query_device).
  Result<RnicMw> AllocMw(RnicPd pd, uint8_t type) override;
  Status DeallocMw(RnicMw mw) override;
  Result<RnicCq> CreateCq(uint32_t depth) override;
  Status ResizeCq(RnicCq cq, uint32_t depth) override;
  Status DestroyCq(RnicCq cq) override;
  Result<RnicSrq> CreateSrq(RnicPd pd, uint32_t max_wr,
                            uint32_t max_sge) override;
  Status DestroySrq(RnicSrq srq) override;
  Result<RnicQp> CreateQp(const QpInit& init) override;
  Status ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) override;
  Result<QpAttr> QueryQp(RnicQp qp) const override;
  Status DestroyQp(RnicQp qp) override;
  Result<RnicAh> CreateAh(RnicPd pd, const AddressVector& av) override;
  Status DestroyAh(RnicAh ah) override;

  int PostSend(RnicQp qp, std::span<const SendWr> wrs,
               Status* first_error) override;
  int PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
               Status* first_error) override;
  int PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs,
                  Status* first_error) override;
  int PollCq(RnicCq cq, std::span<Completion> out) override;
  bool PollAsyncEvent(AsyncEvent* ev) override;
  bool Progress() override { return false; }

  int completion_fd() const override;
  void ArmCompletions() override;
  void DrainCompletionFd() override;

 private:
  // Work requests built per verbs call; longer spans go in chunks.
  static constexpr int kChunk = 16;
  static constexpr int kPollBatch = 32;
  static constexpr int kMaxGids = 256;

  template <typename V>
  struct Slot {
    V* obj = nullptr;
    bool live() const { return obj != nullptr; }
  };
  struct QpSlot {
    ibv_qp* obj = nullptr;
    QpType type = QpType::kRc;
    bool live() const { return obj != nullptr; }
  };
  struct GidEntry {
    Gid gid{};
    int index = -1;
  };

  explicit VerbsRnic(const Options& options) : options_(options) {}
  Status Init(std::string* error);
  // The port's GID table index of gid (RoCE v2 preferred), -1 if absent.
  int FindPortGid(const Gid& gid) const;
  // The host GID index the engine registered gid under, -1 if none.
  int RegisteredGidIndex(const Gid& gid) const;
  // AV -> ibv_ah_attr (GRH with the registered source GID's index).
  Status ToAhAttr(const AddressVector& av, ibv_ah_attr* out) const;
  Status ToSendWr(const SendWr& in, QpType type, ibv_send_wr* wr,
                  ibv_sge* sge) const;
  // Posts wrs in chunks of receives built in the scratch arrays; post is
  // ibv_post_recv or ibv_post_srq_recv on the object, error its errno ->
  // Status. Returns how many were posted.
  template <typename Post, typename Error>
  int PostRecvChain(std::span<const RecvWr> wrs, Status* first_error, Post post,
                    Error error);

  Options options_;
  ibv_context* ctx_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  RnicLimits limits_{};
  int gid_table_len_ = 0;
  VerbsSlots<Slot<ibv_pd>> pds_;
  VerbsSlots<Slot<ibv_mr>> mrs_;
  VerbsSlots<Slot<ibv_mw>> mws_;
  VerbsSlots<Slot<ibv_cq>> cqs_;
  VerbsSlots<Slot<ibv_srq>> srqs_;
  VerbsSlots<QpSlot> qps_;
  VerbsSlots<Slot<ibv_ah>> ahs_;
  // Every live CQ by its slot, for ArmCompletions on the data path:
  // CreateCq and DestroyCq (beside it) set and clear their slot. A pass of
  // ArmCompletions makes arm_passes_ odd while it runs, and DestroyCq waits
  // out a pass that may still hold the CQ it cleared (a grace period).
  std::unique_ptr<std::atomic<ibv_cq*>[]> arm_cqs_;
  std::atomic<uint32_t> arm_slots_{0};  // slots ever used: the passes' bound
  std::atomic<uint64_t> arm_passes_{0};
  std::array<GidEntry, kMaxGids> gids_{};
  int num_gids_ = 0;

  // Data-path scratch, preallocated.
  std::array<ibv_send_wr, kChunk> send_wrs_{};
  std::array<ibv_recv_wr, kChunk> recv_wrs_{};
  std::array<ibv_sge, kChunk * kMaxSge> sges_{};
  std::array<ibv_wc, kPollBatch> wcs_{};
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_VERBS_RNIC_VERBS_RNIC_H_
