// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The virtio-rdma device of one VM: the VhostUserDevice the protocol layer
// drives. It owns no RDMA state itself; the VM's objects live in the engine.
//
// Threads (docs/architecture.md):
//  - queue 0 (control) is served on the control loop: kick -> pop -> decode
//    -> engine -> response;
//  - queue 1 (events) and the doorbell queues are served on the data-path
//    loop. Registration and removal of their fds and pollers, and every
//    change of the state they use, run on the data-path thread through
//    Executor::RunSync, so after StopQueue returns the data path no longer
//    touches the Virtqueue.
//
// The engine's own PollOnce poller is NOT registered here: one engine serves
// every VM, so the daemon registers it once (RegisterEnginePoller below).
//
// Every public method except OnEvent is called on the control thread.
#ifndef VRDMA_VHOST_RDMA_DEVICE_RDMA_DEVICE_H_
#define VRDMA_VHOST_RDMA_DEVICE_RDMA_DEVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/base/executor.h"
#include "backend/engine/engine.h"
#include "vhost-rdma/abi/virtio_rdma.h"
#include "vhost-rdma/device/command_handler.h"
#include "vhost-rdma/device/control_quota.h"
#include "vhost-rdma/device/doorbell_queue.h"
#include "vhost-rdma/device/event_queue.h"
#include "vhost-rdma/vhost_user/device.h"

namespace vrdma::device {

struct RdmaDeviceOptions {
  uint32_t num_doorbell_queues = 1;  // 1 .. VIRTIO_RDMA_MAX_DOORBELL_QUEUES
  uint16_t max_queue_size = 256;     // power of two <= 1024
  // Page-list entries accepted for one ring (see DecodeLimits).
  uint32_t max_ring_pages = kMaxRingPagesByGeometry;
  // Control chains served per kick before yielding to other fds, and the
  // control-thread time after which it yields even sooner (DrainControlQueue).
  uint32_t control_budget = 64;
  uint64_t control_slice_ns = 500'000;
  // The VM's share of the control thread over time (ControlQuota): at most
  // control_share of it, control_burst_ns at once after a quiet period;
  // past that its commands wait (a timer brings them back). 0: no quota.
  double control_share = 0.5;
  uint64_t control_burst_ns = 100'000'000;
};

// Registers the engine's data-path turn (Engine::PollOnce) as a poller of
// the data-path loop. Call once per engine, not per device. Returns the
// poller id for EventLoop::RemovePoller.
uint64_t RegisterEnginePoller(EventLoop& datapath_loop, engine::Engine& engine);

class RdmaDevice final : public vhost::VhostUserDevice,
                         public engine::VmEventSink {
 public:
  // Attaches the VM to the engine with this device as its event sink. Fails
  // with the engine's status, or kInvalid for bad options.
  static Result<std::unique_ptr<RdmaDevice>> Create(
      engine::Engine& engine, const engine::VmConfig& config,
      EventLoop& control_loop, EventLoop& datapath_loop,
      Executor& datapath_executor, const RdmaDeviceOptions& options = {});
  // Stops every queue and detaches the VM.
  ~RdmaDevice() override;

  RdmaDevice(const RdmaDevice&) = delete;
  RdmaDevice& operator=(const RdmaDevice&) = delete;

  // VhostUserDevice.
  uint64_t device_features() const override;
  uint32_t num_queues() const override;
  uint16_t max_queue_size() const override;
  std::span<const uint8_t> config() const override;
  Status SetFeatures(uint64_t acked) override;
  void SetMemory(std::shared_ptr<const GuestMemory> memory) override;
  Status StartQueue(uint32_t index, vhost::Virtqueue& vq) override;
  void StopQueue(uint32_t index) override;
  // Status 0 after a non-zero status is a device reset: as Reset().
  void SetStatus(uint8_t status) override;
  // Stops every queue and detaches the VM: everything it owned is released.
  // A later StartQueue attaches a fresh VM (a rebooted guest).
  void Reset() override;

  // VmEventSink (data-path thread).
  void OnEvent(uint32_t type, uint32_t handle) override;
  void FlushEvents() override;

  // The operator's QoS for this VM: kept for later re-attachments (a
  // frontend reconnecting) and applied now when the VM is attached.
  Status SetQos(const policy::TenantQos& qos);
  const policy::TenantQos& qos() const { return vm_config_.qos; }

  // For the daemon's stats and for tests.
  std::optional<engine::VmId> vm() const { return vm_; }
  uint8_t status() const { return status_; }
  // Doorbell records that failed to decode (data path; read it through the
  // executor or when the data path is quiescent).
  uint64_t bad_doorbells() const;
  // Control-thread time this VM's commands took, and how often it yielded
  // the control thread with commands left (budget or time slice used up).
  // Control thread only.
  uint64_t control_ns() const { return control_ns_; }
  uint64_t control_yields() const { return control_yields_; }
  // Times its commands waited for its control-time quota (control thread).
  uint64_t control_throttles() const { return control_throttles_; }
  int control_timer_fd() const { return control_timer_fd_; }  // tests
  uint32_t lost_events() const { return events_.pending_lost(); }

 private:
  RdmaDevice(engine::Engine& engine, const engine::VmConfig& config,
             EventLoop& control_loop, EventLoop& datapath_loop,
             Executor& datapath_executor, const RdmaDeviceOptions& options);

  Status Attach();
  void Detach();
  void ServeControl();
  // The timer that brings a throttled VM's commands back (control thread).
  void ArmControlTimer(uint64_t after_ns);

  struct DoorbellSlot {
    std::optional<DoorbellQueue> queue;  // engaged while started
    uint64_t poller_id = 0;
    int kick_fd = -1;
  };

  engine::Engine& engine_;
  engine::VmConfig vm_config_;
  EventLoop& control_loop_;
  EventLoop& datapath_loop_;
  Executor& datapath_executor_;
  const RdmaDeviceOptions options_;
  DecodeLimits limits_{};
  virtio_rdma_config config_{};
  // The VM's device limits (its RNIC's, after its quotas): which of
  // F_ATOMIC and F_MW are offered.
  RnicLimits vm_limits_{};

  std::optional<engine::VmId> vm_;
  std::optional<CommandHandler> handler_;
  std::shared_ptr<const GuestMemory> memory_;
  uint64_t acked_features_ = 0;
  uint8_t status_ = 0;
  uint64_t bad_doorbells_of_stopped_ = 0;
  uint64_t control_ns_ = 0;
  uint64_t control_yields_ = 0;
  uint64_t control_throttles_ = 0;
  std::optional<ControlQuota> control_quota_;  // none with control_share 0
  int control_timer_fd_ = -1;                  // a timerfd, while started

  // Control queue (control thread).
  vhost::Virtqueue* control_vq_ = nullptr;
  int control_kick_fd_ = -1;
  std::vector<uint8_t> scratch_;

  // Event and doorbell queues (data-path thread after StartQueue).
  EventQueue events_;
  int event_kick_fd_ = -1;
  std::vector<DoorbellSlot> doorbells_;
};

}  // namespace vrdma::device

#endif  // VRDMA_VHOST_RDMA_DEVICE_RDMA_DEVICE_H_
