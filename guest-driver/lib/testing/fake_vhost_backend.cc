// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/lib/testing/fake_vhost_backend.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "guest-driver/lib/spin_wait.h"
#include "vhost-rdma/vhost_user/connection.h"

namespace vrdma::guest::testing {

FakeVhostBackend::FakeVhostBackend(Options options, Handler handler, Tick tick)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      tick_(std::move(tick)),
      queues_(options_.num_queues, nullptr) {}

FakeVhostBackend::~FakeVhostBackend() { Stop(); }

Status FakeVhostBackend::Start() {
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::kIoError;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options_.socket_path.size() >= sizeof(addr.sun_path)) return Status::kInvalid;
  std::strcpy(addr.sun_path, options_.socket_path.c_str());
  unlink(addr.sun_path);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 4) != 0) {
    return Status::kIoError;
  }
  conn_thread_ = std::thread([this] { ConnectionLoop(); });
  poll_thread_ = std::thread([this] { PollLoop(); });
  return Status::kOk;
}

void FakeVhostBackend::Stop() {
  stop_ = true;
  if (conn_thread_.joinable()) conn_thread_.join();
  if (poll_thread_.joinable()) poll_thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    unlink(options_.socket_path.c_str());
  }
}

void FakeVhostBackend::ConnectionLoop() {
  while (!stop_) {
    pollfd pl{listen_fd_, POLLIN, 0};
    if (poll(&pl, 1, 50) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    vhost::Connection conn(fd, this);
    while (!stop_ && !conn.closed()) {
      pollfd p{conn.fd(), POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      if (conn.HandleMessage() != Status::kOk) break;
    }
    conn.Shutdown();
  }
}

void FakeVhostBackend::PollLoop() {
  SpinWait spin(options_.spins_before_yield);
  std::vector<vhost::Virtqueue*> snapshot;
  while (!stop_) {
    bool worked = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (uint32_t i = 0; i < queues_.size(); ++i) {
        vhost::Virtqueue* vq = queues_[i];
        if (vq == nullptr || vq->broken()) continue;
        // Bounded per turn so one busy queue cannot starve the others.
        for (int n = 0; n < 64; ++n) {
          auto chain = vq->Pop();
          if (!chain) break;
          worked = true;
          if (!chain->ok()) break;
          handler_(i, *vq, chain->value());
        }
      }
      if (tick_) {
        snapshot = queues_;
        tick_(snapshot);
      }
    }
    if (worked) {
      spin.Reset();
    } else {
      spin.Idle();
    }
  }
}

Status FakeVhostBackend::SetFeatures(uint64_t acked) {
  acked_ = acked;
  return Status::kOk;
}

void FakeVhostBackend::SetMemory(std::shared_ptr<const GuestMemory> memory) {
  std::lock_guard<std::mutex> lock(mu_);
  memory_ = std::move(memory);
}

std::shared_ptr<const GuestMemory> FakeVhostBackend::memory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return memory_;
}

Status FakeVhostBackend::StartQueue(uint32_t index, vhost::Virtqueue& vq) {
  if (index >= queues_.size()) return Status::kInvalid;
  vq.SetKickEnabled(options_.kicks);
  std::lock_guard<std::mutex> lock(mu_);
  queues_[index] = &vq;
  return Status::kOk;
}

void FakeVhostBackend::StopQueue(uint32_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index < queues_.size()) queues_[index] = nullptr;
}

void FakeVhostBackend::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& q : queues_) q = nullptr;
  memory_.reset();
}

}  // namespace vrdma::guest::testing
