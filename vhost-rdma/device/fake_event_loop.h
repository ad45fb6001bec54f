// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test-only helpers for the device tests: an EventLoop whose registrations
// the test fires by hand.
#ifndef VRDMA_VHOST_RDMA_DEVICE_FAKE_EVENT_LOOP_H_
#define VRDMA_VHOST_RDMA_DEVICE_FAKE_EVENT_LOOP_H_

#include <sys/epoll.h>

#include <cstdint>
#include <map>
#include <utility>

#include "backend/base/executor.h"

namespace vrdma::device::testing {

// Records registrations; the test fires them.
class FakeLoop : public EventLoop {
 public:
  bool AddFd(int fd, uint32_t, FdHandler handler) override {
    if (fds.count(fd)) return false;
    fds[fd] = std::move(handler);
    return true;
  }
  void RemoveFd(int fd) override { fds.erase(fd); }
  uint64_t AddPoller(Poller poller, ArmHook arm, DeadlineHook) override {
    pollers[++next_id] = {std::move(poller), std::move(arm)};
    return next_id;
  }
  void RemovePoller(uint64_t id) override { pollers.erase(id); }

  void Fire(int fd) { fds.at(fd)(EPOLLIN); }
  bool PollAll() {
    bool any = false;
    for (auto& [id, p] : pollers) any |= p.first();
    return any;
  }
  void ArmAll() {
    for (auto& [id, p] : pollers)
      if (p.second) p.second();
  }

  std::map<int, FdHandler> fds;
  std::map<uint64_t, std::pair<Poller, ArmHook>> pollers;
  uint64_t next_id = 0;
};

}  // namespace vrdma::device::testing

#endif  // VRDMA_VHOST_RDMA_DEVICE_FAKE_EVENT_LOOP_H_
