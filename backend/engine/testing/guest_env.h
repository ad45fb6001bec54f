// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A guest for engine tests: a memfd as guest RAM (mapped by the test and
// handed to GuestMemory like SET_MEM_TABLE would), a bump allocator of
// guest pages, and librxe-style ring helpers (rdma_user_rxe.h layouts) so a
// test writes WQEs and reads CQEs the way the guest's librxe would.
#ifndef VRDMA_BACKEND_ENGINE_TESTING_GUEST_ENV_H_
#define VRDMA_BACKEND_ENGINE_TESTING_GUEST_ENV_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend/engine/engine.h"
#include "backend/engine/wqe_decoder.h"
#include "backend/memory/guest_memory.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine::testing {

class GuestEnv {
 public:
  explicit GuestEnv(uint64_t bytes = 8u << 20, uint64_t gpa_base = 0x100000)
      : bytes_(bytes), base_gpa_(gpa_base), next_gpa_(gpa_base) {
    fd_ = memfd_create("guest-ram", MFD_ALLOW_SEALING);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(bytes)) != 0) abort();
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) abort();
    ram_ = static_cast<uint8_t*>(p);
    GuestRegionSpec spec;
    spec.guest_phys_addr = gpa_base;
    spec.size = bytes;
    spec.user_addr = 0x7f0000000000ull;
    spec.mmap_offset = 0;
    spec.fd = dup(fd_);
    Result<std::shared_ptr<const GuestMemory>> m = GuestMemory::Map({spec}, GuestMemoryOptions{});
    if (!m.ok()) abort();
    memory_ = *m;
  }
  ~GuestEnv() {
    munmap(ram_, bytes_);
    close(fd_);
  }

  const std::shared_ptr<const GuestMemory>& memory() const { return memory_; }
  uint8_t* host(uint64_t gpa) const { return ram_ + (gpa - base_gpa_); }
  uint64_t end_gpa() const { return base_gpa_ + bytes_; }
  int fd() const { return fd_; }  // the guest RAM's memfd

  // n contiguous zeroed pages; returns the first gpa.
  uint64_t AllocPages(size_t n) {
    uint64_t gpa = next_gpa_;
    next_gpa_ += n * 4096;
    if (next_gpa_ > end_gpa()) abort();
    std::memset(host(gpa), 0, n * 4096);
    return gpa;
  }
  static std::vector<uint64_t> Pages(uint64_t gpa, size_t n) {
    std::vector<uint64_t> v;
    for (size_t i = 0; i < n; ++i) v.push_back(gpa + i * 4096);
    return v;
  }

 private:
  uint64_t bytes_;
  uint64_t base_gpa_;
  uint64_t next_gpa_;
  int fd_ = -1;
  uint8_t* ram_ = nullptr;
  std::shared_ptr<const GuestMemory> memory_;
};

// The guest's side of one ring (contiguous guest pages).
class GuestRingRef {
 public:
  GuestRingRef() = default;
  GuestRingRef(GuestEnv& env, uint32_t log2_n, uint32_t log2_e) {
    spec.log2_num_elem = log2_n;
    spec.log2_elem_size = log2_e;
    const uint64_t bytes =
        VIRTIO_RDMA_RING_HDR_SIZE + ((uint64_t{1} << log2_n) << log2_e);
    const size_t pages = (bytes + 4095) / 4096;
    uint64_t gpa = env.AllocPages(pages);
    spec.pages = GuestEnv::Pages(gpa, pages);
    base = env.host(gpa);
    mask = (1u << log2_n) - 1;
    elem_size = 1u << log2_e;
    // librxe initializes the header; the device must not trust it.
    Set32(0, log2_e);
    Set32(4, mask);
  }
  uint32_t producer() const { return Load(128); }
  uint32_t consumer() const { return Load(256); }
  void set_producer(uint32_t v) {
    __atomic_store_n(reinterpret_cast<uint32_t*>(base + 128), v,
                     __ATOMIC_RELEASE);
  }
  void set_consumer(uint32_t v) {
    __atomic_store_n(reinterpret_cast<uint32_t*>(base + 256), v,
                     __ATOMIC_RELEASE);
  }
  uint8_t* elem(uint32_t i) const {
    return base + VIRTIO_RDMA_RING_HDR_SIZE + uint64_t{i & mask} * elem_size;
  }
  void Set32(uint32_t off, uint32_t v) { std::memcpy(base + off, &v, 4); }

  RingSpec spec;
  uint8_t* base = nullptr;
  uint32_t mask = 0;
  uint32_t elem_size = 0;

 private:
  uint32_t Load(uint32_t off) const {
    return __atomic_load_n(reinterpret_cast<uint32_t*>(base + off),
                           __ATOMIC_ACQUIRE);
  }
};

// What librxe's post_send writes for one WR.
struct GuestSend {
  uint64_t wr_id = 0;
  uint32_t opcode = IB_UVERBS_WR_SEND;
  uint32_t flags = kSendSignaled;
  uint32_t imm = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0, swap = 0;
  uint32_t ud_qpn = 0, ud_qkey = 0, ah = 0;
  // IB_UVERBS_WR_BIND_MW, and VIRTIO_RDMA_WR_REG_MR in the same layout
  // (mr_lkey, addr = the new iova, length, rkey = the new key byte, access;
  // mw_rkey unused). LOCAL_INV, SEND_WITH_INV: imm is the rkey.
  MwBind bind{};
  std::vector<Sge> sges;
  std::vector<uint8_t> inline_data;
};

inline void WriteSendWqe(uint8_t* e, const GuestSend& s) {
  auto p32 = [&](uint32_t off, uint32_t v) { std::memcpy(e + off, &v, 4); };
  auto p64 = [&](uint32_t off, uint64_t v) { std::memcpy(e + off, &v, 8); };
  std::memset(e, 0, kSendWqeHeaderBytes);
  p64(send_wqe::kWrId, s.wr_id);
  p32(send_wqe::kOpcode, s.opcode);
  p32(send_wqe::kSendFlags, s.flags);
  p32(send_wqe::kImmData, s.imm);
  if (s.opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
      s.opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD) {
    p64(send_wqe::kAtomicRemoteAddr, s.remote_addr);
    p64(send_wqe::kAtomicCompareAdd, s.compare_add);
    p64(send_wqe::kAtomicSwap, s.swap);
    p32(send_wqe::kAtomicRkey, s.rkey);
  } else if (s.opcode == IB_UVERBS_WR_BIND_MW || s.opcode == VIRTIO_RDMA_WR_REG_MR) {
    p64(send_wqe::kMwAddr, s.bind.addr);
    p64(send_wqe::kMwLength, s.bind.length);
    p32(send_wqe::kMwMrLkey, s.bind.mr_lkey);
    p32(send_wqe::kMwMwRkey, s.bind.mw_rkey);
    p32(send_wqe::kMwRkey, s.bind.rkey);
    p32(send_wqe::kMwAccess, s.bind.access);
  } else if (s.ah != 0) {
    p32(send_wqe::kUdRemoteQpn, s.ud_qpn);
    p32(send_wqe::kUdRemoteQkey, s.ud_qkey);
    p32(send_wqe::kUdAhNum, s.ah);
  } else {
    p64(send_wqe::kRdmaRemoteAddr, s.remote_addr);
    p32(send_wqe::kRdmaRkey, s.rkey);
  }
  if (s.flags & kSendInline) {
    p32(send_wqe::kDmaLength, static_cast<uint32_t>(s.inline_data.size()));
    p32(send_wqe::kDmaNumSge, 1);
    if (!s.inline_data.empty()) {  // memcpy from a null pointer is UB
      std::memcpy(e + kSendWqeHeaderBytes, s.inline_data.data(), s.inline_data.size());
    }
  } else {
    uint32_t total = 0;
    for (size_t i = 0; i < s.sges.size(); ++i) {
      p64(kSendWqeHeaderBytes + i * 16, s.sges[i].addr);
      p32(kSendWqeHeaderBytes + i * 16 + 8, s.sges[i].length);
      p32(kSendWqeHeaderBytes + i * 16 + 12, s.sges[i].lkey);
      total += s.sges[i].length;
    }
    p32(send_wqe::kDmaLength, total);
    p32(send_wqe::kDmaNumSge, static_cast<uint32_t>(s.sges.size()));
  }
}

// Posts at the guest's producer index and advances it (like librxe).
inline void PostSend(GuestRingRef& sq, const GuestSend& s) {
  uint32_t p = sq.producer();
  WriteSendWqe(sq.elem(p), s);
  sq.set_producer((p + 1) & sq.mask);
}

inline void PostRecv(GuestRingRef& rq, uint64_t wr_id,
                     const std::vector<Sge>& sges) {
  uint32_t p = rq.producer();
  uint8_t* e = rq.elem(p);
  std::memset(e, 0, kRecvWqeHeaderBytes);
  std::memcpy(e + recv_wqe::kWrId, &wr_id, 8);
  uint32_t n = static_cast<uint32_t>(sges.size());
  std::memcpy(e + recv_wqe::kDmaNumSge, &n, 4);
  for (uint32_t i = 0; i < n; ++i) {
    std::memcpy(e + kRecvWqeHeaderBytes + i * 16, &sges[i].addr, 8);
    std::memcpy(e + kRecvWqeHeaderBytes + i * 16 + 8, &sges[i].length, 4);
    std::memcpy(e + kRecvWqeHeaderBytes + i * 16 + 12, &sges[i].lkey, 4);
  }
  rq.set_producer((p + 1) & rq.mask);
}

// Pops every CQE the device published (the guest consumes them).
inline std::vector<ib_uverbs_wc> DrainCq(GuestRingRef& cq) {
  std::vector<ib_uverbs_wc> out;
  uint32_t c = cq.consumer();
  const uint32_t p = cq.producer();
  while (c != p) {
    ib_uverbs_wc wc;
    std::memcpy(&wc, cq.elem(c), sizeof(wc));
    out.push_back(wc);
    c = (c + 1) & cq.mask;
  }
  cq.set_consumer(c);
  return out;
}

class RecordingSink : public VmEventSink {
 public:
  void OnEvent(uint32_t type, uint32_t handle) override {
    events.push_back({type, handle});
  }
  void FlushEvents() override { ++flushes; }
  int flushes = 0;
  int Count(uint32_t type) const {
    int n = 0;
    for (auto& e : events) n += e.first == type;
    return n;
  }
  std::vector<std::pair<uint32_t, uint32_t>> events;
};

}  // namespace vrdma::engine::testing

#endif  // VRDMA_BACKEND_ENGINE_TESTING_GUEST_ENV_H_
