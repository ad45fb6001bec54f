// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A minimal vhost-user backend in a thread, for tests and benchmarks of the
// in-process guest: it listens on a unix socket, runs the real protocol
// layer (vhost::Connection) for one frontend at a time, and hands every
// chain popped from a started queue to a handler on a busy-polling thread.
// The handler decides what to write and when to Push (it may keep a chain,
// e.g. an event buffer, and push it later from Tick).
//
// Test code: a mutex guards queue start/stop against the polling thread.
#ifndef VRDMA_GUEST_DRIVER_LIB_TESTING_FAKE_VHOST_BACKEND_H_
#define VRDMA_GUEST_DRIVER_LIB_TESTING_FAKE_VHOST_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/base/status.h"
#include "guest-driver/lib/spin_wait.h"
#include "vhost-rdma/vhost_user/device.h"
#include "vhost-rdma/vhost_user/virtqueue.h"

namespace vrdma::guest::testing {

class FakeVhostBackend final : public vhost::VhostUserDevice {
 public:
  // Runs on the polling thread for each chain popped from queue `index`.
  using Handler = std::function<void(uint32_t index, vhost::Virtqueue& vq,
                                     const vhost::DescChain& chain)>;
  // Runs on the polling thread once per turn, with the started queues
  // (nullptr for a stopped one).
  using Tick = std::function<void(std::vector<vhost::Virtqueue*>& queues)>;

  struct Options {
    std::string socket_path;
    uint32_t num_queues = 1;
    uint16_t max_queue_size = 1024;
    uint64_t device_features = 0;
    std::vector<uint8_t> config;  // served by GET_CONFIG
    bool kicks = false;           // false: ask the driver not to kick (we poll)
    // The polling thread's back-off (spin_wait.h).
    uint32_t spins_before_yield = SpinWait::kDefaultSpinsBeforeYield;
  };

  FakeVhostBackend(Options options, Handler handler, Tick tick = nullptr);
  ~FakeVhostBackend() override;

  // Binds the socket and starts the connection and polling threads.
  Status Start();
  void Stop();

  // Guest memory of the current connection (nullptr before SET_MEM_TABLE).
  std::shared_ptr<const GuestMemory> memory() const;
  uint8_t last_status() const { return status_.load(); }
  uint64_t acked_features() const { return acked_.load(); }

  // vhost::VhostUserDevice.
  uint64_t device_features() const override { return options_.device_features; }
  uint32_t num_queues() const override { return options_.num_queues; }
  uint16_t max_queue_size() const override { return options_.max_queue_size; }
  std::span<const uint8_t> config() const override { return options_.config; }
  Status SetFeatures(uint64_t acked) override;
  void SetMemory(std::shared_ptr<const GuestMemory> memory) override;
  Status StartQueue(uint32_t index, vhost::Virtqueue& vq) override;
  void StopQueue(uint32_t index) override;
  void SetStatus(uint8_t status) override { status_ = status; }
  void Reset() override;

 private:
  void ConnectionLoop();
  void PollLoop();

  Options options_;
  Handler handler_;
  Tick tick_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<uint8_t> status_{0};
  std::atomic<uint64_t> acked_{0};
  mutable std::mutex mu_;
  std::vector<vhost::Virtqueue*> queues_;  // guarded by mu_
  std::shared_ptr<const GuestMemory> memory_;  // guarded by mu_
  std::thread conn_thread_;
  std::thread poll_thread_;
};

}  // namespace vrdma::guest::testing

#endif  // VRDMA_GUEST_DRIVER_LIB_TESTING_FAKE_VHOST_BACKEND_H_
