// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The FRONTEND (QEMU's role) of a vhost-user connection, in-process. Used by
// the test guest (guest-driver/) and by protocol tests: it owns "guest RAM"
// (one memfd, guest-physical addresses [0, ram_size)), shares it with the
// backend through SET_MEM_TABLE, and sets up split virtqueues whose rings the
// caller lays out in that RAM. Blocking socket I/O with a receive timeout;
// control path only, not thread-safe.
//
// Typical use (what QEMU does, in this order):
//   auto fe = VhostUserFrontend::Connect("/run/vm1.sock", 64 << 20);
//   fe->Negotiate(wanted_device_features);       // features, protocol, owner,
//                                                // queue count, mem table
//   auto cfg = fe->GetConfig(0, sizeof(my_config));
//   uint64_t ring = fe->AllocGpa(VringBytes(256), 4096);
//   fe->SetupQueue(0, 256, ring);                // desc/avail/used in one block
//   fe->EnableQueue(0, true);
//   fe->SetStatus(ACK | DRIVER | FEATURES_OK | DRIVER_OK);
//   ... write descriptors at fe->GpaToHost(...), fe->Kick(0),
//       fe->WaitCall(0, 1000) ...
//   fe->GetVringBase(0);                         // stops the queue
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_FRONTEND_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_FRONTEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/base/status.h"
#include "vhost-rdma/vhost_user/messages.h"

namespace vrdma::vhost {

// Bytes of a split ring of `size` entries laid out as the virtio spec's
// legacy vring_init does: desc (16*size), avail (6+2*size), then used
// (6+8*size) aligned to 4096. SetupQueue(index, size, base_gpa) uses this
// layout; DescGpa/AvailGpa/UsedGpa give the parts.
uint64_t VringBytes(uint16_t size);
uint64_t VringAvailOffset(uint16_t size);
uint64_t VringUsedOffset(uint16_t size);

class VhostUserFrontend {
 public:
  // Connects to the backend's unix socket and creates guest RAM of
  // `guest_ram_bytes` (rounded up to 4096), zero-filled. Sends nothing yet.
  static Result<std::unique_ptr<VhostUserFrontend>> Connect(const std::string& socket_path,
                                                            uint64_t guest_ram_bytes);
  ~VhostUserFrontend();  // closes socket, eventfds, memfd, unmaps RAM
  VhostUserFrontend(const VhostUserFrontend&) = delete;
  VhostUserFrontend& operator=(const VhostUserFrontend&) = delete;

  // GET_FEATURES, SET_FEATURES(offered & (wanted | VERSION_1 |
  // PROTOCOL_FEATURES | ring features)), GET/SET_PROTOCOL_FEATURES (takes
  // MQ, REPLY_ACK, CONFIG, STATUS if offered), SET_OWNER, GET_QUEUE_NUM,
  // SET_MEM_TABLE. After this the backend knows the whole guest RAM.
  Status Negotiate(uint64_t wanted_device_features);

  uint64_t offered_features() const { return offered_features_; }
  uint64_t acked_features() const { return acked_features_; }
  uint64_t protocol_features() const { return protocol_features_; }
  uint32_t queue_num() const { return queue_num_; }

  // --- Guest RAM ("guest physical" = offset into the memfd). ---
  uint8_t* guest_ram() const { return ram_; }
  uint64_t ram_size() const { return ram_size_; }
  // Host pointer for [gpa, gpa+len), nullptr when out of range.
  uint8_t* GpaToHost(uint64_t gpa, uint64_t len) const;
  // A bump allocator over guest RAM for tests and the test guest: returns a
  // GPA aligned to `align` (power of two), or kNoResource when RAM is full.
  // GPA 0 is never returned (the first page is kept unused).
  Result<uint64_t> AllocGpa(uint64_t bytes, uint64_t align = 4096);

  // --- Device config / status. ---
  Result<std::vector<uint8_t>> GetConfig(uint32_t offset, uint32_t size);
  Status SetStatus(uint8_t status);
  Result<uint8_t> GetStatus();

  // --- Queues. ---
  // SET_VRING_NUM, SET_VRING_BASE(base), SET_VRING_ADDR (user addresses =
  // this process's mapping of the GPAs, as QEMU passes them), and creates
  // the queue's kick and call eventfds (SET_VRING_CALL, SET_VRING_KICK).
  Status SetupQueue(uint32_t index, uint16_t size, uint64_t desc_gpa, uint64_t avail_gpa,
                    uint64_t used_gpa, uint16_t base = 0);
  // The same with the standard layout at ring_gpa (see VringBytes).
  Status SetupQueue(uint32_t index, uint16_t size, uint64_t ring_gpa);
  // SET_VRING_ENABLE (only meaningful when PROTOCOL_FEATURES was acked;
  // without it queues start enabled).
  Status EnableQueue(uint32_t index, bool enable);
  // GET_VRING_BASE: stops the queue in the backend, returns its next avail
  // index.
  Result<uint16_t> GetVringBase(uint32_t index);
  // Writes 1 to the queue's kick eventfd.
  Status Kick(uint32_t index);
  int kick_fd(uint32_t index) const;
  int call_fd(uint32_t index) const;
  // Waits up to timeout_ms for the backend to signal call_fd(index) and
  // consumes the signal. kOk when signalled, kBusy on timeout.
  Status WaitCall(uint32_t index, int timeout_ms);

  // --- Raw access for protocol tests. ---
  // Sends one message (header built from request/flags/payload) with fds.
  Status SendRaw(uint32_t request, uint32_t flags, std::span<const uint8_t> payload,
                 std::span<const int> fds = {});
  // Receives one reply; returns its payload (header checked: REPLY flag,
  // request code == expected_request).
  Result<std::vector<uint8_t>> ReceiveReply(uint32_t expected_request);
  // Sends a request and, when REPLY_ACK was negotiated, asks for and checks
  // the ack. Used by every setter above.
  Status Request(uint32_t request, std::span<const uint8_t> payload,
                 std::span<const int> fds = {});
  // SET_MEM_TABLE describing the whole guest RAM as one region (again).
  Status SendMemTable();
  int socket_fd() const { return sock_; }
  // The guest RAM's memfd (created with MFD_ALLOW_SEALING, not sealed by
  // the frontend: the backend adds F_SEAL_SHRINK at SET_MEM_TABLE).
  int memfd() const { return memfd_; }
  // Closes the socket (the backend sees a disconnect).
  void Disconnect();

 private:
  struct QueueFds {
    int kick = -1;
    int call = -1;
  };
  VhostUserFrontend() = default;
  Result<uint64_t> GetU64(uint32_t request);

  int sock_ = -1;
  int memfd_ = -1;
  uint8_t* ram_ = nullptr;
  uint64_t ram_size_ = 0;
  uint64_t next_gpa_ = 4096;
  uint64_t offered_features_ = 0;
  uint64_t acked_features_ = 0;
  uint64_t protocol_features_ = 0;
  uint32_t queue_num_ = 0;
  std::vector<QueueFds> queues_;
};

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_FRONTEND_H_
