// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// libFuzzer target: the fuzz input becomes the start of guest RAM (the
// descriptor table, the avail ring and anything descriptors point at), then
// the device pops, reads, writes and pushes until the ring is empty or
// broken. Any crash, sanitizer report or hang is a bug in Virtqueue.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/memory/guest_memory.h"
#include "vhost-rdma/vhost_user/virtqueue.h"

namespace {

constexpr uint64_t kRam = 64 * 1024;
constexpr uint64_t kDesc = 0;        // up to 256 * 16 bytes
constexpr uint64_t kAvail = 0x1000;  // fuzzed too
constexpr uint64_t kUsed = 0x2000;
constexpr uint64_t kUser = 0x10000000;

struct Ram {
  int fd;
  uint8_t* host;
  Ram() {
    fd = memfd_create("fuzz_ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, kRam) != 0) __builtin_trap();
    host = static_cast<uint8_t*>(
        mmap(nullptr, kRam, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (host == MAP_FAILED) __builtin_trap();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Ram ram;
  if (size < 4) return 0;
  // Control bytes: ring size, flags, starting index.
  const uint16_t ring_size = static_cast<uint16_t>(1u << (data[0] % 9));  // 1..256
  const bool event_idx = data[1] & 1;
  const uint16_t base = static_cast<uint16_t>(data[2] | (data[3] << 8));
  data += 4;
  size -= 4;
  std::memset(ram.host, 0, kRam);
  std::memcpy(ram.host, data, size < kRam ? size : kRam);

  auto mem = vrdma::GuestMemory::Map({{0, kRam, kUser, 0, dup(ram.fd)}}, {});
  if (!mem.ok()) __builtin_trap();
  vrdma::vhost::Virtqueue vq;
  const vrdma::vhost::VringAddrs addrs{kUser + kDesc, kUser + kAvail, kUser + kUsed, 0, 0};
  if (vq.Setup(*mem, ring_size, addrs, base, event_idx) != vrdma::Status::kOk) return 0;

  uint8_t scratch[512];
  // Bounded: at most ring_size chains are available in one pass.
  for (int i = 0; i < 2 * ring_size + 2; ++i) {
    auto got = vq.Pop();
    if (!got.has_value() || !got->ok()) break;
    const auto& chain = got->value();
    size_t n = chain.Read(0, scratch);
    chain.Write(n / 2, {scratch, n});
    vq.Push(chain.head, static_cast<uint32_t>(n));
    vq.SetKickEnabled(i & 1);
    vq.NotifyGuest();
  }
  return 0;
}
