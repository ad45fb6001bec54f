// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// How the control thread runs work on the data-path thread (see
// docs/architecture.md, "Threads and ownership"), and the event loop each
// thread runs.
#ifndef VRDMA_BACKEND_BASE_EXECUTOR_H_
#define VRDMA_BACKEND_BASE_EXECUTOR_H_

#include <cstdint>
#include <functional>

namespace vrdma {

// Runs a closure on the thread that owns published objects and returns when
// it has run. RunSync never allocates; the closure runs exactly once.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual void RunSync(const std::function<void()>& fn) = 0;
};

// For tests and single-threaded tools: runs the closure on the caller.
class InlineExecutor final : public Executor {
 public:
  void RunSync(const std::function<void()>& fn) override { fn(); }
};

// A thread's loop: file descriptors watched with epoll, plus pollers that
// run on every turn while any of them reports work (busy polling). When all
// pollers have been idle for idle_spin_ns, the loop calls each poller's
// `arm` hook (e.g. re-enable guest kicks), re-polls once, then sleeps in
// epoll_wait until an fd fires or the earliest deadline a poller's
// `deadline` hook names (absolute CLOCK_MONOTONIC nanoseconds) passes.
class EventLoop {
 public:
  using FdHandler = std::function<void(uint32_t epoll_events)>;
  // Returns true when it did work.
  using Poller = std::function<bool()>;
  using ArmHook = std::function<void()>;
  // When the poller next has timed work; UINT64_MAX when none.
  using DeadlineHook = std::function<uint64_t()>;

  virtual ~EventLoop() = default;
  virtual bool AddFd(int fd, uint32_t epoll_events, FdHandler handler) = 0;
  virtual void RemoveFd(int fd) = 0;
  // Returns an id for RemovePoller.
  virtual uint64_t AddPoller(Poller poller, ArmHook arm = nullptr,
                             DeadlineHook deadline = nullptr) = 0;
  virtual void RemovePoller(uint64_t id) = 0;
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_BASE_EXECUTOR_H_
