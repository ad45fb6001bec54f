// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The guest side of the engine fuzzer (engine_fuzz_driver.h): one VM's RAM
// (a memfd), the memory tables the frontend may hand the engine, and the
// isolation check.
//
// Isolation model. Every VM's RAM starts as a VM-tagged pattern: each
// 16-byte chunk is [magic of the VM (4 bytes), file offset, hash], and
// nothing else the fuzzer writes contains the magic's first byte. The
// fuzzer keeps a shadow copy of what the guest itself wrote. After every
// step each byte that differs from the shadow must lie in what the VM
// handed the engine to write, by objects alive during the step:
//   - ring fields the device owns: an SQ/RQ/SRQ's consumer index, a CQ's
//     producer index and its CQE array;
//   - the whole range of an MR with REMOTE_WRITE or REMOTE_ATOMIC;
//   - in an MR with LOCAL_WRITE: only ranges the VM itself named in an SGE
//     (an lkey, iova, length triple) of a WQE it wrote into one of its
//     rings (receive buffers, READ and atomic targets). When a ring page of
//     the VM is also a page of a writable MR (ring bytes could then come
//     from the peer), every LOCAL_WRITE MR range counts instead.
// Bytes the device wrote into ring fields must never carry another VM's
// magic (CQEs carry no payload). Bytes that changed legitimately become the
// new shadow.
#ifndef VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_GUEST_H_
#define VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_GUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/memory/guest_memory.h"

namespace vrdma::engine::fuzz {

inline constexpr uint32_t kPage = 4096;
inline constexpr uint32_t kVmPages = 96;
inline constexpr uint64_t kVmBytes = uint64_t{kVmPages} * kPage;
inline constexpr uint8_t kMagic0 = 0xc3;  // first byte of every VM's magic

// Violations end the process: libFuzzer reports the input.
[[noreturn]] void Fail(const char* fmt, ...)
    __attribute__((format(printf, 1, 2)));

enum class RingKind : uint8_t { kCq, kSq, kRq, kSrq };

// A ring the engine accepted, by file pages (valid across memory tables).
struct RingRec {
  RingKind kind = RingKind::kCq;
  uint32_t log2_n = 0, log2_e = 0;
  std::vector<uint32_t> fpages;
  uint32_t mask() const { return (1u << log2_n) - 1; }
  uint32_t elem() const { return 1u << log2_e; }
  uint64_t bytes() const { return 384 + ((uint64_t{1} << log2_n) << log2_e); }
  uint64_t ElemOffset(uint32_t i) const {
    return 384 + (uint64_t{i & mask()} << log2_e);
  }
};

struct MrRec {
  uint32_t handle = 0, lkey = 0, rkey = 0, access = 0, pd = 0;
  uint32_t fpo = 0;
  uint64_t iova = 0, length = 0;
  std::vector<uint32_t> fpages;
  bool dead = false;  // deregistered during this step
};

// An SGE the guest wrote into one of its rings.
struct SgeRef {
  uint32_t lkey = 0;
  uint64_t addr = 0;
  uint32_t len = 0;
};

class FuzzGuest {
 public:
  // The VM's RAM, in its initial pattern. One per index and process,
  // reused by every input (no page faults, no pattern computing).
  static FuzzGuest* Get(uint8_t index);
  ~FuzzGuest();
  FuzzGuest(const FuzzGuest&) = delete;
  FuzzGuest& operator=(const FuzzGuest&) = delete;

  // Memory tables: 0 one region at 0x100000; 1 two regions (file pages
  // [48, 96) at 0x40000000 and [0, 40) at 0x100000; 40..47 unreachable);
  // 2 none (nullptr).
  static constexpr int kLayouts = 3;
  std::shared_ptr<const GuestMemory> MakeMemory(int layout) const;
  // File page of a guest-physical page under a layout, if mapped.
  static std::optional<uint32_t> FilePage(uint64_t gpa, int layout);
  // A gpa naming file page fp under layout (an unmapped one if none).
  static uint64_t Gpa(uint32_t fp, int layout);

  int fd() const { return fd_; }
  uint8_t index() const { return index_; }
  uint8_t* ram() { return ram_; }

  // The guest writes its own RAM (bytes of kMagic0 become kMagic0 - 1).
  void Write(uint64_t foff, std::span<const uint8_t> bytes);
  // Structured writes (WQE fields): exact bytes.
  void WriteExact(uint64_t foff, const void* p, size_t n);
  // Guest writes per page so far (a CQ whose pages the guest wrote, other
  // than its consumer index, holds entries the device did not write).
  uint64_t writes(uint32_t page) const { return writes_[page % kVmPages]; }
  uint32_t Load32(uint64_t foff) const;
  // Ring bytes (the ring's pages need not be contiguous in the file).
  void RingWrite(const RingRec& r, uint64_t off, const void* p, size_t n,
                 bool exact);
  // A CQ's consumer index: not counted in writes().
  void WriteCqConsumer(const RingRec& r, uint32_t c);
  void RingRead(const RingRec& r, uint64_t off, void* p, size_t n) const;
  uint64_t RingFileOffset(const RingRec& r, uint64_t off) const {
    return uint64_t{r.fpages[(off / kPage) % r.fpages.size()]} * kPage +
           off % kPage;
  }

  // The isolation check (see the file comment); `rings` and `mrs` are the
  // objects alive at some time during the step; refs the guest's SGEs.
  void CheckIsolation(const std::vector<const RingRec*>& rings,
                      const std::vector<const MrRec*>& mrs,
                      const std::vector<SgeRef>& refs, bool all_local,
                      const char* step);
  // Bytes the engine changed since the last check, in total (tests).
  uint64_t changed_bytes() const { return changed_bytes_; }

 private:
  explicit FuzzGuest(uint8_t index);
  uint8_t index_;
  int fd_ = -1;
  uint8_t* ram_ = nullptr;
  std::vector<uint8_t> shadow_;
  std::vector<uint64_t> writes_ = std::vector<uint64_t>(kVmPages);
  uint64_t changed_bytes_ = 0;
};

}  // namespace vrdma::engine::fuzz

#endif  // VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_GUEST_H_
