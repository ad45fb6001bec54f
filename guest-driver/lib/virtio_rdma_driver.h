// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The transport half of the virtio-rdma guest driver, in-process: it plays
// QEMU (through vhost::VhostUserFrontend: socket, memfd guest RAM, feature
// negotiation, vring setup) and the guest kernel module's virtqueue logic:
//   - reads the config space once (every GET_CONFIG is a round trip);
//   - control queue: one synchronous command at a time (cmd_hdr + request +
//     page list readable, resp_hdr + response writable), completed by
//     polling the used ring;
//   - event queue: keeps device-writable event buffers posted;
//   - doorbell queues: 8-byte records, buffers recycled from the used ring,
//     a kick only when the device asks for one.
// Busy polling everywhere (the daemon polls too); loops back off with
// SpinWait and give up after a timeout so a dead daemon cannot hang a test.
//
// Not thread-safe: one thread drives a driver (and the verbs objects on it).
#ifndef VRDMA_GUEST_DRIVER_LIB_VIRTIO_RDMA_DRIVER_H_
#define VRDMA_GUEST_DRIVER_LIB_VIRTIO_RDMA_DRIVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/base/status.h"
#include "guest-driver/lib/driver_virtqueue.h"
#include "guest-driver/lib/guest_ram_allocator.h"
#include "vhost-rdma/abi/virtio_rdma.h"
#include "vhost-rdma/vhost_user/frontend.h"

namespace vrdma::guest {

struct DriverOptions {
  uint64_t ram_bytes = 64ull << 20;
  uint16_t ctrl_queue_size = 64;
  uint16_t event_queue_size = 64;
  uint16_t doorbell_queue_size = 256;
  // Doorbell queues to set up (clamped to what the device offers).
  uint32_t doorbell_queues = 1;
  // A command or doorbell slot that does not come back within this time
  // means the device is gone.
  int timeout_ms = 10000;
};

class VirtioRdmaDriver {
 public:
  static Result<std::unique_ptr<VirtioRdmaDriver>> Open(
      const std::string& socket_path, const DriverOptions& options = {});
  ~VirtioRdmaDriver();
  VirtioRdmaDriver(const VirtioRdmaDriver&) = delete;
  VirtioRdmaDriver& operator=(const VirtioRdmaDriver&) = delete;

  const virtio_rdma_config& config() const { return config_; }
  uint64_t features() const { return frontend_->acked_features(); }
  GuestRamAllocator& ram() { return *ram_; }
  uint32_t num_doorbell_queues() const {
    return static_cast<uint32_t>(doorbells_.size());
  }

  // Runs one control command. `req` is the request struct, `pages` the page
  // list that follows it (if any), `resp` receives the response struct.
  // Returns the device's status (virtio_rdma_status maps 1:1 onto Status),
  // kIoError when the device does not answer or answers short.
  Status Command(uint32_t cmd, std::span<const uint8_t> req,
                 std::span<const uint64_t> pages, std::span<uint8_t> resp);
  template <typename Req, typename Resp>
  Status Command(uint32_t cmd, const Req& req, Resp* resp,
                 std::span<const uint64_t> pages = {}) {
    return Command(cmd,
                   {reinterpret_cast<const uint8_t*>(&req), sizeof(Req)},
                   pages, {reinterpret_cast<uint8_t*>(resp), sizeof(Resp)});
  }

  // Posts a doorbell record on doorbell queue `queue` (modulo the number
  // set up). Returns kIoError only when the queue stays full past the
  // timeout (the device is gone).
  Status Doorbell(uint8_t kind, uint32_t handle, uint32_t queue = 0);

  // The next event the device wrote, if any (its buffer is reposted).
  std::optional<virtio_rdma_event> PollEvent();
  uint64_t events_seen() const { return events_seen_; }
  // Control commands that needed a second kick (the device did not ask for
  // one but did not answer either): a device notification bug if nonzero.
  uint64_t rekicks() const { return rekicks_; }

  vhost::VhostUserFrontend& frontend() { return *frontend_; }

 private:
  struct Queue {
    uint32_t index = 0;
    DriverVirtqueue vq;
    GuestBuffer ring;
    GuestBuffer slots;  // per-descriptor buffers (events, doorbells)
    uint32_t slot_size = 0;
    std::vector<uint16_t> free_slots;    // slots not on the ring
    std::vector<uint16_t> head_to_slot;  // descriptor head -> slot
    uint64_t SlotGpa(uint16_t s) const { return slots.gpa + uint64_t{s} * slot_size; }
    uint8_t* SlotHost(uint16_t s) const { return slots.host + uint64_t{s} * slot_size; }
  };

  VirtioRdmaDriver() = default;
  Status Init(const std::string& socket_path, const DriverOptions& options);
  Status SetupQueue(Queue& q, uint32_t index, uint16_t size,
                    uint32_t slot_size);
  void Kick(Queue& q);
  Status PostEventBuffer(uint16_t slot);

  DriverOptions options_;
  std::unique_ptr<vhost::VhostUserFrontend> frontend_;
  std::unique_ptr<GuestRamAllocator> ram_;
  virtio_rdma_config config_{};
  Queue ctrl_;
  Queue event_;
  std::vector<std::unique_ptr<Queue>> doorbells_;
  GuestBuffer cmd_buf_;  // request + page list + response scratch
  uint64_t events_seen_ = 0;
  uint64_t rekicks_ = 0;
};

}  // namespace vrdma::guest

#endif  // VRDMA_GUEST_DRIVER_LIB_VIRTIO_RDMA_DRIVER_H_
