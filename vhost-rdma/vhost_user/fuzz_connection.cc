// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// libFuzzer target: the fuzz input is the byte stream a frontend sends, fed
// to a Connection over a socketpair in fuzz-chosen chunks, after a valid
// SET_MEM_TABLE (a memfd as guest RAM) so queue setup paths are reachable.
// The fake device pops from every queue it is given. Any crash, sanitizer
// report or hang is a bug in the protocol layer.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "vhost-rdma/vhost_user/connection.h"
#include "vhost-rdma/vhost_user/socket_io.h"

namespace {

using namespace vrdma;
using namespace vrdma::vhost;

constexpr uint64_t kRam = 64 * 1024;

class PoppingDevice final : public VhostUserDevice {
 public:
  uint64_t device_features() const override { return 1ull << 5; }
  uint32_t num_queues() const override { return 3; }
  uint16_t max_queue_size() const override { return 256; }
  std::span<const uint8_t> config() const override { return config_; }
  Status SetFeatures(uint64_t) override { return Status::kOk; }
  void SetMemory(std::shared_ptr<const GuestMemory>) override {}
  Status StartQueue(uint32_t, Virtqueue& vq) override {
    for (int i = 0; i < 512; ++i) {
      auto c = vq.Pop();
      if (!c.has_value() || !c->ok()) break;
      vq.Push(c->value().head, 0);
    }
    return Status::kOk;
  }
  void StopQueue(uint32_t) override {}
  void SetStatus(uint8_t) override {}
  void Reset() override {}

 private:
  std::array<uint8_t, 40> config_{};
};

void Drain(int fd) {
  uint8_t buf[4096];
  while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  PoppingDevice device;
  {
    Connection conn(sv[0], &device);
    // A valid memory table first: one region, user address 0x10000000.
    int memfd = memfd_create("fuzz_ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0 || ftruncate(memfd, kRam) != 0) __builtin_trap();
    VhostUserMemory m{};
    m.nregions = 1;
    m.regions[0] = {0, kRam, 0x10000000, 0};
    VhostUserHeader h{static_cast<uint32_t>(Request::kSetMemTable), kVhostUserVersion,
                      MemTablePayloadSize(1)};
    if (SendMessage(sv[1], h, {reinterpret_cast<uint8_t*>(&m), MemTablePayloadSize(1)},
                    {&memfd, 1}) != Status::kOk) {
      __builtin_trap();
    }
    close(memfd);
    if (conn.HandleMessage() != Status::kOk) __builtin_trap();

    // The fuzz bytes: [chunk length byte][chunk]...
    size_t pos = 0;
    int idle = 0;
    while (!conn.closed() && idle < 4) {
      if (pos < size) {
        size_t len = 1 + data[pos++] % 64;
        if (len > size - pos) len = size - pos;
        if (len > 0 && send(sv[1], data + pos, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) break;
        pos += len;
      } else {
        ++idle;  // input exhausted: let the connection consume what is left
      }
      if (conn.HandleMessage() != Status::kOk) break;
      Drain(sv[1]);
    }
  }
  close(sv[1]);
  return 0;
}
