// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test helper: guest RAM in a memfd, mapped once as the backend's
// GuestMemory (GPA 0, user address kUserBase) and once for the test, which
// plays the driver and writes split rings directly.
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_TEST_GUEST_RAM_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_TEST_GUEST_RAM_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "backend/memory/guest_memory.h"
#include "vhost-rdma/vhost_user/virtqueue.h"
#include "vhost-rdma/vhost_user/vring.h"

namespace vrdma::vhost::testing {

class TestGuestRam {
 public:
  static constexpr uint64_t kUserBase = 0x7f00'0000'0000;  // the "frontend's" address

  explicit TestGuestRam(uint64_t bytes) : bytes_(bytes) {
    fd_ = memfd_create("test_guest_ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(bytes)) != 0) return;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p != MAP_FAILED) ram_ = static_cast<uint8_t*>(p);
  }
  ~TestGuestRam() {
    if (ram_ != nullptr) munmap(ram_, bytes_);
    if (fd_ >= 0) close(fd_);
  }

  // A fresh GuestMemory over the same file (dup'd fd).
  std::shared_ptr<const GuestMemory> Memory() const {
    auto m = GuestMemory::Map({{0, bytes_, kUserBase, 0, dup(fd_)}}, GuestMemoryOptions{});
    return m.ok() ? *m : nullptr;
  }
  uint8_t* at(uint64_t gpa) const { return ram_ + gpa; }
  uint64_t bytes() const { return bytes_; }
  int fd() const { return fd_; }

 private:
  uint64_t bytes_;
  int fd_ = -1;
  uint8_t* ram_ = nullptr;
};

// The driver side of one split ring inside a TestGuestRam.
class TestRing {
 public:
  TestRing(TestGuestRam& ram, uint16_t size, uint64_t desc_gpa, uint64_t avail_gpa,
           uint64_t used_gpa)
      : ram_(ram), size_(size), desc_gpa_(desc_gpa), avail_gpa_(avail_gpa), used_gpa_(used_gpa) {}

  VringAddrs addrs() const {
    return {TestGuestRam::kUserBase + desc_gpa_, TestGuestRam::kUserBase + avail_gpa_,
            TestGuestRam::kUserBase + used_gpa_, 0, 0};
  }
  VringDesc* desc() const { return reinterpret_cast<VringDesc*>(ram_.at(desc_gpa_)); }
  VringAvail* avail() const { return reinterpret_cast<VringAvail*>(ram_.at(avail_gpa_)); }
  VringUsed* used() const { return reinterpret_cast<VringUsed*>(ram_.at(used_gpa_)); }
  uint16_t* used_event() const { return &avail()->ring[size_]; }
  uint16_t* avail_event() const {
    return reinterpret_cast<uint16_t*>(&used()->ring[size_]);
  }

  void SetDesc(uint16_t i, uint64_t addr, uint32_t len, uint16_t flags = 0, uint16_t next = 0) {
    desc()[i] = VringDesc{addr, len, flags, next};
  }
  // Makes `head` available and publishes the new index.
  void Publish(uint16_t head) {
    VringAvail* a = avail();
    a->ring[a->idx % size_] = head;
    __atomic_store_n(&a->idx, static_cast<uint16_t>(a->idx + 1), __ATOMIC_RELEASE);
  }

 private:
  TestGuestRam& ram_;
  uint16_t size_;
  uint64_t desc_gpa_, avail_gpa_, used_gpa_;
};

}  // namespace vrdma::vhost::testing

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_TEST_GUEST_RAM_H_
