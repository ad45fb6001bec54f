// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/lib/virtio_rdma_driver.h"

#include <linux/virtio_config.h>
#define VIRTIO_RING_NO_LEGACY
#include <linux/virtio_ring.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "guest-driver/lib/spin_wait.h"

namespace vrdma::guest {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kDeviceFeatures = (1ull << VIRTIO_RDMA_F_SRQ) |
                                     (1ull << VIRTIO_RDMA_F_UD) |
                                     (1ull << VIRTIO_RDMA_F_ATOMIC);
// Control scratch: header + request + response fit easily; page lists of
// up to (kCmdScratch - 1 KiB) / 8 pages. Larger lists get a temporary
// buffer.
constexpr uint64_t kCmdScratch = 64 * 1024;
constexpr uint64_t kCmdRespArea = 1024;
// How long a command may go unanswered before the driver kicks again. A
// time, not a number of idle polls: on a loaded host (or under ASan) a
// device that works may take milliseconds to answer, and a re-kick then
// would count as the device's fault (rekicks()).
constexpr int kRekickMs = 200;

// Deadline checks are cheap but not free: look at the clock every so often.
class Deadline {
 public:
  explicit Deadline(int timeout_ms)
      : end_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}
  bool Expired() {
    if ((++n_ & 0x3ff) != 0) return false;
    return Clock::now() > end_;
  }

 private:
  Clock::time_point end_;
  uint32_t n_ = 0;
};

}  // namespace

Result<std::unique_ptr<VirtioRdmaDriver>> VirtioRdmaDriver::Open(
    const std::string& socket_path, const DriverOptions& options) {
  std::unique_ptr<VirtioRdmaDriver> d(new VirtioRdmaDriver());
  if (Status s = d->Init(socket_path, options); s != Status::kOk) return s;
  return d;
}

VirtioRdmaDriver::~VirtioRdmaDriver() = default;

Status VirtioRdmaDriver::Init(const std::string& socket_path,
                              const DriverOptions& options) {
  options_ = options;
  auto fe = vhost::VhostUserFrontend::Connect(socket_path, options.ram_bytes);
  if (!fe.ok()) return fe.status();
  frontend_ = std::move(fe.value());
  VRDMA_RETURN_IF_ERROR(frontend_->Negotiate(kDeviceFeatures));

  // Take (almost) all guest RAM from the frontend's bump allocator once and
  // manage it with a free list, so objects can be destroyed and recreated.
  const uint64_t usable = (frontend_->ram_size() - 2 * kGuestPageSize) &
                          ~(kGuestPageSize - 1);
  auto base = frontend_->AllocGpa(usable, kGuestPageSize);
  if (!base.ok()) return base.status();
  ram_ = std::make_unique<GuestRamAllocator>(
      frontend_->GpaToHost(*base, usable), *base, usable);

  // The config space, read once.
  auto cfg = frontend_->GetConfig(0, sizeof(virtio_rdma_config));
  if (!cfg.ok()) return cfg.status();
  if (cfg->size() < sizeof(virtio_rdma_config)) return Status::kIoError;
  std::memcpy(&config_, cfg->data(), sizeof(config_));
  if (config_.abi_version != VIRTIO_RDMA_ABI_VERSION) return Status::kUnsupported;

  VRDMA_RETURN_IF_ERROR(frontend_->SetStatus(
      VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
      VIRTIO_CONFIG_S_FEATURES_OK));

  VRDMA_RETURN_IF_ERROR(SetupQueue(ctrl_, VIRTIO_RDMA_VQ_CTRL,
                                   options.ctrl_queue_size, 0));
  VRDMA_RETURN_IF_ERROR(SetupQueue(event_, VIRTIO_RDMA_VQ_EVENT,
                                   options.event_queue_size,
                                   sizeof(virtio_rdma_event)));
  uint32_t ndb = std::clamp<uint32_t>(options.doorbell_queues, 1,
                                      std::max<uint32_t>(1, config_.num_doorbell_queues));
  if (frontend_->queue_num() > VIRTIO_RDMA_VQ_DOORBELL0) {
    ndb = std::min<uint32_t>(ndb, frontend_->queue_num() - VIRTIO_RDMA_VQ_DOORBELL0);
  }
  for (uint32_t i = 0; i < ndb; ++i) {
    auto q = std::make_unique<Queue>();
    VRDMA_RETURN_IF_ERROR(SetupQueue(*q, VIRTIO_RDMA_VQ_DOORBELL0 + i,
                                     options.doorbell_queue_size,
                                     sizeof(virtio_rdma_doorbell)));
    doorbells_.push_back(std::move(q));
  }

  auto scratch = ram_->Allocate(kCmdScratch);
  if (!scratch) return Status::kNoResource;
  cmd_buf_ = *scratch;

  VRDMA_RETURN_IF_ERROR(frontend_->SetStatus(
      VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
      VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK));

  // Event buffers go up after DRIVER_OK, like a kernel driver's probe.
  for (uint16_t s = 0; s < event_.vq.size(); ++s) {
    VRDMA_RETURN_IF_ERROR(PostEventBuffer(s));
  }
  if (event_.vq.Publish()) Kick(event_);
  return Status::kOk;
}

Status VirtioRdmaDriver::SetupQueue(Queue& q, uint32_t index, uint16_t size,
                                    uint32_t slot_size) {
  q.index = index;
  auto ring = ram_->Allocate(DriverVirtqueue::RingBytes(size));
  if (!ring) return Status::kNoResource;
  q.ring = *ring;
  const bool event_idx =
      (frontend_->acked_features() & (1ull << VIRTIO_RING_F_EVENT_IDX)) != 0;
  if (!q.vq.Init(q.ring.host, q.ring.gpa, size, event_idx)) {
    return Status::kInvalid;
  }
  if (slot_size > 0) {
    auto slots = ram_->Allocate(uint64_t{slot_size} * size);
    if (!slots) return Status::kNoResource;
    q.slots = *slots;
    q.slot_size = slot_size;
    q.head_to_slot.assign(size, 0);
    q.free_slots.clear();
    for (int s = size - 1; s >= 0; --s) q.free_slots.push_back(static_cast<uint16_t>(s));
  }
  VRDMA_RETURN_IF_ERROR(frontend_->SetupQueue(index, size, q.vq.desc_gpa(),
                                              q.vq.avail_gpa(), q.vq.used_gpa()));
  return frontend_->EnableQueue(index, true);
}

void VirtioRdmaDriver::Kick(Queue& q) { (void)frontend_->Kick(q.index); }

Status VirtioRdmaDriver::PostEventBuffer(uint16_t slot) {
  std::memset(event_.SlotHost(slot), 0, event_.slot_size);
  const DriverBuf buf{event_.SlotGpa(slot), event_.slot_size, true};
  auto head = event_.vq.Add({&buf, 1});
  if (!head) return Status::kNoResource;
  event_.head_to_slot[*head] = slot;
  return Status::kOk;
}

Status VirtioRdmaDriver::Command(uint32_t cmd, std::span<const uint8_t> req,
                                 std::span<const uint64_t> pages,
                                 std::span<uint8_t> resp) {
  const uint64_t in_bytes = sizeof(virtio_rdma_cmd_hdr) + req.size() +
                            pages.size_bytes();
  const uint64_t out_bytes = sizeof(virtio_rdma_resp_hdr) + resp.size();
  if (out_bytes > kCmdRespArea) return Status::kInvalid;
  // Large page lists get their own buffer; the common case reuses scratch.
  GuestBuffer buf = cmd_buf_;
  std::optional<GuestBuffer> big;
  if (in_bytes + kCmdRespArea > cmd_buf_.size) {
    big = ram_->Allocate(in_bytes + kCmdRespArea);
    if (!big) return Status::kNoResource;
    buf = *big;
  }
  uint8_t* p = buf.host;
  virtio_rdma_cmd_hdr hdr{cmd, 0};
  std::memcpy(p, &hdr, sizeof(hdr));
  if (!req.empty()) std::memcpy(p + sizeof(hdr), req.data(), req.size());
  if (!pages.empty()) {
    std::memcpy(p + sizeof(hdr) + req.size(), pages.data(), pages.size_bytes());
  }
  const uint64_t resp_off = buf.size - kCmdRespArea;
  std::memset(p + resp_off, 0xff, out_bytes);  // catch a device that writes short
  // Two descriptors for the response, like a kernel driver that keeps the
  // header and the body in separate structs.
  DriverBuf bufs[3] = {
      {buf.gpa, static_cast<uint32_t>(in_bytes), false},
      {buf.gpa + resp_off, sizeof(virtio_rdma_resp_hdr), true},
      {buf.gpa + resp_off + sizeof(virtio_rdma_resp_hdr),
       static_cast<uint32_t>(resp.size()), true},
  };
  const size_t nbufs = resp.empty() ? 2 : 3;

  Status result = Status::kOk;
  auto head = ctrl_.vq.Add({bufs, nbufs});
  if (!head) {
    result = Status::kNoResource;  // a previous command never completed
  } else {
    if (ctrl_.vq.Publish()) Kick(ctrl_);
    SpinWait spin;
    Deadline deadline(options_.timeout_ms);
    Deadline rekick(kRekickMs);
    std::optional<UsedElem> used;
    while (!(used = ctrl_.vq.PollUsed())) {
      if (deadline.Expired()) {
        result = Status::kIoError;
        break;
      }
      // A device that never re-arms notifications (with EVENT_IDX it must
      // keep avail_event current) would leave the command unseen: kick
      // again after a while. Extra kicks are always harmless.
      if (rekick.Expired()) {
        ++rekicks_;
        Kick(ctrl_);
        rekick = Deadline(kRekickMs);
      }
      spin.Idle();
    }
    if (used) {
      if (used->head != *head || used->written < sizeof(virtio_rdma_resp_hdr)) {
        result = Status::kIoError;
      } else {
        virtio_rdma_resp_hdr rh;
        std::memcpy(&rh, p + resp_off, sizeof(rh));
        if (rh.status > static_cast<uint32_t>(Status::kAccess)) {
          result = Status::kIoError;
        } else {
          result = static_cast<Status>(rh.status);
          if (result == Status::kOk && !resp.empty()) {
            if (used->written < out_bytes) {
              result = Status::kIoError;
            } else {
              std::memcpy(resp.data(), p + resp_off + sizeof(rh), resp.size());
            }
          }
        }
      }
    }
  }
  // A timed-out command's buffer may still be written by the device: leak
  // the big buffer rather than hand it out again.
  if (big && result != Status::kIoError) ram_->Free(*big);
  return result;
}

Status VirtioRdmaDriver::Doorbell(uint8_t kind, uint32_t handle, uint32_t queue) {
  Queue& q = *doorbells_[queue % doorbells_.size()];
  // Recycle the records the device has consumed.
  while (auto used = q.vq.PollUsed()) {
    q.free_slots.push_back(q.head_to_slot[used->head]);
  }
  if (q.free_slots.empty()) {
    SpinWait spin;
    Deadline deadline(options_.timeout_ms);
    for (;;) {
      if (auto used = q.vq.PollUsed()) {
        q.free_slots.push_back(q.head_to_slot[used->head]);
        break;
      }
      if (deadline.Expired()) return Status::kIoError;
      spin.Idle();
    }
  }
  const uint16_t slot = q.free_slots.back();
  q.free_slots.pop_back();
  virtio_rdma_doorbell rec{};
  rec.handle = handle;
  rec.kind = kind;
  std::memcpy(q.SlotHost(slot), &rec, sizeof(rec));
  const DriverBuf buf{q.SlotGpa(slot), sizeof(rec), false};
  auto head = q.vq.Add({&buf, 1});
  if (!head) {  // cannot happen: one slot per descriptor
    q.free_slots.push_back(slot);
    return Status::kNoResource;
  }
  q.head_to_slot[*head] = slot;
  if (q.vq.Publish()) Kick(q);
  return Status::kOk;
}

std::optional<virtio_rdma_event> VirtioRdmaDriver::PollEvent() {
  auto used = event_.vq.PollUsed();
  if (!used) return std::nullopt;
  const uint16_t slot = event_.head_to_slot[used->head];
  virtio_rdma_event ev{};
  std::memcpy(&ev, event_.SlotHost(slot), sizeof(ev));
  ++events_seen_;
  if (PostEventBuffer(slot) == Status::kOk && event_.vq.Publish()) Kick(event_);
  if (used->written < sizeof(ev)) return std::nullopt;
  return ev;
}

}  // namespace vrdma::guest
