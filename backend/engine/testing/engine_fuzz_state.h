// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine fuzzer's interpreter state (engine_fuzz_driver.h): what each
// VM created and the engine accepted, the input reader, and the driver
// class shared by engine_fuzz_driver.cc (setup, control verbs, invariants)
// and engine_fuzz_datapath.cc (WQEs, doorbells, polling, CQEs).
#ifndef VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_STATE_H_
#define VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_STATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/base/executor.h"
#include "backend/engine/engine.h"
#include "backend/engine/testing/engine_fuzz_driver.h"
#include "backend/engine/testing/engine_fuzz_guest.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "policy/scheduler_policy.h"

namespace vrdma::engine::fuzz {

inline constexpr int kVms = 3;
inline constexpr uint32_t kQkey = 0x1111;

// GID i of VM slot v (every slot owns two).
inline Gid VmGid(int v, int i) {
  Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  g[14] = static_cast<uint8_t>(i);
  g[15] = static_cast<uint8_t>(0x10 + v);
  return g;
}

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> d) : d_(d) {}
  bool empty() const { return pos_ >= d_.size(); }
  uint8_t U8() { return pos_ < d_.size() ? d_[pos_++] : 0; }
  uint16_t U16() { return static_cast<uint16_t>(U8() | U8() << 8); }
  uint32_t U32() { return U16() | uint32_t{U16()} << 16; }
  uint64_t U64() { return U32() | uint64_t{U32()} << 32; }
  std::span<const uint8_t> Bytes(size_t n) {
    n = std::min(n, d_.size() - std::min(pos_, d_.size()));
    std::span<const uint8_t> s = d_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> d_;
  size_t pos_ = 0;
};

struct CqRec {
  uint32_t handle = 0;
  RingRec ring;
  bool scribbled = false;  // the guest wrote into its CQEs
  uint32_t consumer = 0;   // the guest's own (the header may be garbage)
  uint64_t writes = 0;     // guest writes to its pages when created
  bool dead = false;
};

struct QpRec {
  uint32_t qpn = 0;
  QpType type = QpType::kRc;
  uint32_t pd = 0, send_cq = 0, recv_cq = 0, srq = 0;
  QpCaps caps;
  RingRec sq;
  std::optional<RingRec> rq;
  QpState state = QpState::kReset;  // as last set by the guest
  bool dead = false;
};

struct SrqRec {
  uint32_t handle = 0, pd = 0, max_sge = 0;
  RingRec ring;
  bool dead = false;
};

struct AhRec {
  uint32_t handle = 0, pd = 0;
  bool dead = false;
};

// Guest writes so far to a ring's pages.
inline uint64_t RingWrites(const FuzzGuest& g, const RingRec& r) {
  uint64_t n = 0;
  for (uint32_t p : r.fpages) n += g.writes(p);
  return n;
}

struct PdRec {
  uint32_t handle = 0;
  bool dead = false;
};

struct VmModel {
  FuzzGuest* guest = nullptr;  // FuzzGuest::Get
  bool attached = false;
  VmId id = 0;
  std::optional<VmId> stale_id;
  std::vector<Gid> gids;
  Quotas quotas;
  int layout = 0;
  std::shared_ptr<const GuestMemory> memory;  // the frontend's table
  std::vector<PdRec> pds;
  std::vector<AhRec> ahs;
  std::vector<MrRec> mrs;
  std::vector<CqRec> cqs;
  std::vector<QpRec> qps;
  std::vector<SrqRec> srqs;
  std::vector<SgeRef> refs;
  bool all_local = false;  // see engine_fuzz_guest.h
  std::vector<uint32_t> qpn_history;
  uint32_t next_page = 0;
  uint64_t next_wr_id = 1;
};

class Driver {
 public:
  explicit Driver(uint8_t config);
  ~Driver();
  void Run(ByteReader& in);
  const FuzzRunStats& stats() const { return stats_; }

 private:
  // --- engine_fuzz_driver.cc ---
  void Step(Op op, ByteReader& in);
  void Attach(int v, uint8_t quota_sel);
  void Detach(int v);
  // Accounting always; the isolation scan when the engine ran.
  void CheckAll(const char* step, bool scan);
  void CheckAccounting(const char* step);
  void CheckMappings(int v, const char* step);
  void Purge();
  // Page lists: mode 0 fresh contiguous pages, 1 arbitrary pages of the
  // VM (aliasing), 2 raw gpas from the input, 3 gpas of another table.
  std::vector<uint64_t> Pages(VmModel& vm, size_t n, uint8_t mode,
                              ByteReader& in);
  // File pages of gpas the engine accepted; a violation if one is not in
  // the VM's memory.
  std::vector<uint32_t> Resolve(const VmModel& vm,
                                const std::vector<uint64_t>& gpas,
                                const char* what);
  void NoteAliasing(VmModel& vm);
  // Handle choice: own live (most), another VM's, or raw input.
  template <typename T, typename F>
  uint32_t PickHandle(int v, const std::vector<T> VmModel::*list, F handle,
                      ByteReader& in);
  bool OwnCreate(VmModel& vm, Status s, const char* what);
  void CreatePd(int v);
  void DestroyPd(int v, ByteReader& in);
  void RegMr(int v, ByteReader& in);
  void DeregMr(int v, ByteReader& in);
  std::optional<RingRec> MakeRing(VmModel& vm, RingKind kind, uint32_t log2_n,
                                  uint32_t log2_e, uint8_t mode, ByteReader& in,
                                  RingSpec* spec);
  void CreateCq(int v, ByteReader& in);
  void DestroyCq(int v, ByteReader& in);
  void CreateQp(int v, ByteReader& in);
  Status ModifyQp(int v, uint32_t qpn, QpState target, uint8_t flags,
                  int peer_vm, uint32_t peer_qpn, ByteReader& in);
  void ModifyQpOp(int v, ByteReader& in);
  void QueryQp(int v, ByteReader& in);
  void DestroyQp(int v, ByteReader& in);
  void CreateSrq(int v, ByteReader& in);
  void ModifySrq(int v, ByteReader& in);
  void DestroySrq(int v, ByteReader& in);
  void CreateAh(int v, ByteReader& in);
  void DestroyAh(int v, ByteReader& in);
  void Connect(ByteReader& in);
  void StaleVm(ByteReader& in);
  void SetQos(int v, ByteReader& in);

  // --- engine_fuzz_datapath.cc ---
  void PostSend(int v, ByteReader& in);
  void PostRecv(int v, ByteReader& in);
  void RawWqe(int v, ByteReader& in);
  void RawWrite(int v, ByteReader& in);
  void Doorbell(ByteReader& in);
  void Poll(ByteReader& in);
  void DrainCq(int v, ByteReader& in);
  // Records the SGE-shaped triples of the ring's elements (or one).
  void ScanRefs(VmModel& vm, const RingRec& ring, std::optional<uint32_t> elem);
  void AdvanceProducer(VmModel& vm, const RingRec& ring);
  bool PollOnce();

  VmModel vm_[kVms];
  policy::Nanos now_ = 1'000'000'000;
  SoftRnic rnic_;
  InlineExecutor exec_;
  std::unique_ptr<policy::SchedulerPolicy> policy_;
  std::unique_ptr<Engine> engine_;
  FuzzRunStats stats_;
  uint64_t poll_budget_ = 20000;  // PollOnce calls per input
  bool trace_ = false;            // VRDMA_FUZZ_TRACE: each step on stderr
  uint32_t mappings_charged_[kVms] = {};  // VmStats::mappings, last step
};

template <typename T, typename F>
inline uint32_t Driver::PickHandle(int v, const std::vector<T> VmModel::*list,
                                   F handle, ByteReader& in) {
  const uint8_t b = in.U8();
  const int from = (b >> 6) == 2 ? (v + 1 + (b & 1)) % kVms : v;
  const std::vector<T>& l = vm_[from].*list;
  if ((b >> 6) == 3 || l.empty()) return (b & 0x20) ? in.U32() : in.U8();
  return handle(l[b % l.size()]);
}

}  // namespace vrdma::engine::fuzz

#endif  // VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_STATE_H_
