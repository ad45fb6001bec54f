// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/device/rdma_device.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "vhost-rdma/device/command_encoder.h"
#include "vhost-rdma/device/control_queue.h"
#include "vhost-rdma/vhost_user/eventfd_io.h"

namespace vrdma::device {
namespace {

constexpr uint64_t kBaseFeatures =
    (uint64_t{1} << VIRTIO_RDMA_F_SRQ) | (uint64_t{1} << VIRTIO_RDMA_F_UD);
// RoCE v2 needs the VM's NIC: offered only when the operator named it.
// Atomics: when the RNIC has them. Memory windows: when the RNIC has them
// and the VM's quota allows any (limits are the VM's, after its quotas).
// Kernel consumers: when the RNIC has fast registration and the operator
// allowed them (the engine's limits then have max_fr_mr > 0).
uint64_t OfferedFeatures(const engine::VmConfig& vm, const RnicLimits& limits) {
  return kBaseFeatures | (vm.mac ? uint64_t{1} << VIRTIO_RDMA_F_ROCE : 0) |
         (limits.atomics ? uint64_t{1} << VIRTIO_RDMA_F_ATOMIC : 0) |
         (limits.max_mw > 0 ? uint64_t{1} << VIRTIO_RDMA_F_MW : 0) |
         (limits.max_fr_mr > 0 ? uint64_t{1} << VIRTIO_RDMA_F_KERNEL : 0);
}
// Virtio reserves feature bits 0..23 for the device type.
constexpr uint64_t kDeviceFeatureMask = (uint64_t{1} << 24) - 1;

// Consumes a kick without blocking, whatever the frontend did to the fd.
void DrainEventFd(int fd) { (void)vhost::ConsumeKick(fd); }

}  // namespace

uint64_t RegisterEnginePoller(EventLoop& datapath_loop,
                              engine::Engine& engine) {
  return datapath_loop.AddPoller(
      [&engine] { return engine.PollOnce(); }, nullptr,
      [&engine] { return engine.NextDeadline(); });
}

Result<std::unique_ptr<RdmaDevice>> RdmaDevice::Create(
    engine::Engine& engine, const engine::VmConfig& config,
    EventLoop& control_loop, EventLoop& datapath_loop,
    Executor& datapath_executor, const RdmaDeviceOptions& options) {
  const uint16_t qs = options.max_queue_size;
  if (options.num_doorbell_queues < 1 ||
      options.num_doorbell_queues > VIRTIO_RDMA_MAX_DOORBELL_QUEUES ||
      qs == 0 || (qs & (qs - 1)) != 0 || qs > VIRTIO_RDMA_MAX_QUEUE_SIZE ||
      options.control_budget == 0 || !(options.control_share >= 0) ||
      options.control_share > 1 ||
      (options.control_share > 0 && options.control_burst_ns == 0)) {
    return Status::kInvalid;
  }
  std::unique_ptr<RdmaDevice> dev(new RdmaDevice(
      engine, config, control_loop, datapath_loop, datapath_executor, options));
  VRDMA_RETURN_IF_ERROR(dev->Attach());
  return dev;
}

RdmaDevice::RdmaDevice(engine::Engine& engine, const engine::VmConfig& config,
                       EventLoop& control_loop, EventLoop& datapath_loop,
                       Executor& datapath_executor,
                       const RdmaDeviceOptions& options)
    : engine_(engine),
      vm_config_(config),
      control_loop_(control_loop),
      datapath_loop_(datapath_loop),
      datapath_executor_(datapath_executor),
      options_(options),
      doorbells_(options.num_doorbell_queues) {
  if (options.control_share > 0) {
    control_quota_.emplace(options.control_share, options.control_burst_ns);
  }
}

RdmaDevice::~RdmaDevice() { Reset(); }

Status RdmaDevice::Attach() {
  if (vm_.has_value()) return Status::kOk;
  Result<engine::VmId> vm = engine_.AttachVm(vm_config_, this);
  if (!vm.ok()) return vm.status();
  Result<engine::DeviceAttr> attr = engine_.QueryDevice(*vm);
  if (!attr.ok()) {
    engine_.DetachVm(*vm);
    return attr.status();
  }
  vm_ = *vm;
  vm_limits_ = attr->limits;
  limits_.max_mr_pages = attr->max_mr_pages;
  limits_.max_ring_pages = options_.max_ring_pages;
  config_ = EncodeConfig(*attr, vm_config_, options_.num_doorbell_queues);
  const uint32_t num_gids = static_cast<uint32_t>(
      std::min<size_t>(vm_config_.gids.size(), VIRTIO_RDMA_MAX_GIDS));
  handler_.emplace(engine_, *vm_, limits_, num_gids);
  handler_->set_acked_features(acked_features_);
  if (memory_ != nullptr) engine_.SetGuestMemory(*vm_, memory_);
  return Status::kOk;
}

void RdmaDevice::Detach() {
  if (!vm_.has_value()) return;
  handler_.reset();
  engine_.DetachVm(*vm_);
  vm_.reset();
}

uint64_t RdmaDevice::device_features() const {
  return OfferedFeatures(vm_config_, vm_limits_);
}

uint32_t RdmaDevice::num_queues() const {
  return VIRTIO_RDMA_VQ_DOORBELL0 + options_.num_doorbell_queues;
}

uint16_t RdmaDevice::max_queue_size() const { return options_.max_queue_size; }

std::span<const uint8_t> RdmaDevice::config() const {
  return {reinterpret_cast<const uint8_t*>(&config_), sizeof(config_)};
}

Status RdmaDevice::SetFeatures(uint64_t acked) {
  if ((acked & kDeviceFeatureMask) & ~device_features()) return Status::kInvalid;
  acked_features_ = acked & kDeviceFeatureMask;
  if (handler_.has_value()) handler_->set_acked_features(acked_features_);
  return Status::kOk;
}

void RdmaDevice::SetMemory(std::shared_ptr<const GuestMemory> memory) {
  memory_ = std::move(memory);
  if (vm_.has_value()) engine_.SetGuestMemory(*vm_, memory_);
}

Status RdmaDevice::StartQueue(uint32_t index, vhost::Virtqueue& vq) {
  if (index >= num_queues()) return Status::kInvalid;
  if (vq.kick_fd < 0) return Status::kInvalid;  // this device needs kicks
  StopQueue(index);
  VRDMA_RETURN_IF_ERROR(Attach());  // after a Reset: a fresh VM

  if (index == VIRTIO_RDMA_VQ_CTRL) {
    if (control_quota_.has_value()) {
      control_timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
      if (control_timer_fd_ < 0) return Status::kIoError;
      if (!control_loop_.AddFd(control_timer_fd_, EPOLLIN, [this](uint32_t) {
            uint64_t expirations = 0;  // our own timerfd: never blocks
            (void)!read(control_timer_fd_, &expirations, sizeof(expirations));
            ServeControl();
          })) {
        close(control_timer_fd_);
        control_timer_fd_ = -1;
        return Status::kIoError;
      }
    }
    if (!control_loop_.AddFd(vq.kick_fd, EPOLLIN, [this](uint32_t) {
          DrainEventFd(control_kick_fd_);
          ServeControl();
        })) {
      StopQueue(VIRTIO_RDMA_VQ_CTRL);  // the timer
      return Status::kIoError;
    }
    control_vq_ = &vq;
    control_kick_fd_ = vq.kick_fd;
    ServeControl();  // commands queued before the queue was started
    return Status::kOk;
  }

  bool added = false;
  if (index == VIRTIO_RDMA_VQ_EVENT) {
    // Kicks on the event queue only say "buffers added": drain them (a
    // level-triggered fd left readable would spin the loop).
    datapath_executor_.RunSync([&] {
      const int fd = vq.kick_fd;
      added = datapath_loop_.AddFd(fd, EPOLLIN,
                                   [fd](uint32_t) { DrainEventFd(fd); });
      if (added) {
        events_.Attach(&vq);
        event_kick_fd_ = fd;
      }
    });
    return added ? Status::kOk : Status::kIoError;
  }

  DoorbellSlot& slot = doorbells_[index - VIRTIO_RDMA_VQ_DOORBELL0];
  const engine::VmId vm = *vm_;
  datapath_executor_.RunSync([&] {
    DoorbellQueue& q = slot.queue.emplace(vq, engine_, vm);
    const int fd = vq.kick_fd;
    added = datapath_loop_.AddFd(fd, EPOLLIN, [fd, &q](uint32_t) {
      DrainEventFd(fd);
      q.Poll();
    });
    if (!added) {
      slot.queue.reset();
      return;
    }
    slot.kick_fd = fd;
    slot.poller_id = datapath_loop_.AddPoller([&q] { return q.Poll(); },
                                              [&q] { q.Arm(); });
    q.Poll();  // records queued before the queue was started
  });
  return added ? Status::kOk : Status::kIoError;
}

void RdmaDevice::StopQueue(uint32_t index) {
  if (index >= num_queues()) return;
  if (index == VIRTIO_RDMA_VQ_CTRL) {
    if (control_timer_fd_ >= 0) {
      control_loop_.RemoveFd(control_timer_fd_);
      close(control_timer_fd_);
      control_timer_fd_ = -1;
    }
    if (control_vq_ == nullptr) return;
    control_loop_.RemoveFd(control_kick_fd_);
    control_vq_ = nullptr;
    control_kick_fd_ = -1;
    return;
  }
  if (index == VIRTIO_RDMA_VQ_EVENT) {
    datapath_executor_.RunSync([this] {
      if (event_kick_fd_ < 0) return;
      datapath_loop_.RemoveFd(event_kick_fd_);
      events_.Attach(nullptr);
      event_kick_fd_ = -1;
    });
    return;
  }
  DoorbellSlot& slot = doorbells_[index - VIRTIO_RDMA_VQ_DOORBELL0];
  datapath_executor_.RunSync([this, &slot] {
    if (!slot.queue.has_value()) return;
    datapath_loop_.RemoveFd(slot.kick_fd);
    datapath_loop_.RemovePoller(slot.poller_id);
    bad_doorbells_of_stopped_ += slot.queue->bad_records();
    slot.queue.reset();
    slot.kick_fd = -1;
    slot.poller_id = 0;
  });
}

void RdmaDevice::SetStatus(uint8_t status) {
  // A driver writing 0 resets the device (virtio 1.x, 2.1): a rebooted or
  // reloaded guest keeps the same vhost-user connection, so this is where
  // the objects of the previous driver instance are released (their MR and
  // ring pages are the new kernel's memory now).
  if (status == 0 && status_ != 0) Reset();
  status_ = status;
}

void RdmaDevice::Reset() {
  for (uint32_t i = 0; i < num_queues(); ++i) StopQueue(i);
  Detach();
  acked_features_ = 0;
  status_ = 0;
}

void RdmaDevice::OnEvent(uint32_t type, uint32_t handle) {
  events_.Post(type, handle);
}

void RdmaDevice::FlushEvents() { events_.Flush(); }

Status RdmaDevice::SetQos(const policy::TenantQos& qos) {
  if (vm_.has_value()) VRDMA_RETURN_IF_ERROR(engine_.SetQos(*vm_, qos));
  vm_config_.qos = qos;
  return Status::kOk;
}

uint64_t RdmaDevice::bad_doorbells() const {
  uint64_t n = bad_doorbells_of_stopped_;
  for (const DoorbellSlot& s : doorbells_)
    if (s.queue.has_value()) n += s.queue->bad_records();
  return n;
}

void RdmaDevice::ServeControl() {
  if (control_vq_ == nullptr || !handler_.has_value()) return;
  if (control_quota_.has_value()) {
    uint64_t wait_ns = 0;
    const uint64_t now = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count());
    if (!control_quota_->Allowed(now, &wait_ns)) {
      // Its quota is spent: its commands wait in its ring (the guest sees
      // them slow, not failed), the other VMs' go on.
      ++control_throttles_;
      ArmControlTimer(wait_ns);
      return;
    }
  }
  const DrainResult r = DrainControlQueue(*control_vq_, *handler_, &scratch_,
                                          options_.control_budget, options_.control_slice_ns);
  control_ns_ += r.busy_ns;
  if (control_quota_.has_value()) control_quota_->Charge(r.busy_ns);
  if (r.more) {
    ++control_yields_;
    // Yield to the other fds of the control loop (other VMs' queues and
    // sockets) and come back: re-signal our own kick. A counter the
    // frontend filled leaves the fd readable, which is all this needs.
    (void)vhost::SignalEventFd(control_kick_fd_);
  }
}

void RdmaDevice::ArmControlTimer(uint64_t after_ns) {
  itimerspec t{};
  t.it_value.tv_sec = static_cast<time_t>(after_ns / 1'000'000'000);
  t.it_value.tv_nsec = static_cast<long>(after_ns % 1'000'000'000);  // NOLINT(runtime/int)
  (void)timerfd_settime(control_timer_fd_, 0, &t, nullptr);
}

}  // namespace vrdma::device
