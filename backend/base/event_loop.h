// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// EpollEventLoop: the EventLoop of executor.h on epoll. One thread runs it
// (Run); it busy-polls its pollers while they report work, and after
// idle_spin_ns without work it calls every poller's arm hook, polls once
// more (closing the race with a kick that arrived while arming) and sleeps
// in epoll_wait until an fd fires.
//
// Threading: AddFd/RemoveFd/AddPoller/RemovePoller are for the loop's own
// thread (or before Run starts); other threads go through an Executor
// (executor_mailbox.h). Only Stop() is safe from any thread. Handlers and
// pollers may add or remove fds and pollers, including themselves.
#ifndef VRDMA_BACKEND_BASE_EVENT_LOOP_H_
#define VRDMA_BACKEND_BASE_EVENT_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/base/executor.h"

namespace vrdma {

class EpollEventLoop final : public EventLoop {
 public:
  struct Options {
    // How long pollers may report no work before the loop arms and sleeps.
    uint64_t idle_spin_ns = 50'000;
    // Busy turns check fds every fd_check_interval turns; idle turns read
    // the clock that often and check fds at most every fd_check_ns. An
    // epoll_wait(0) is a system call (1.1 us on this machine's VM); made on
    // the first idle turn after work, as it once was, it sat between the
    // guest's next WQE and its pickup on every ping-pong. What fds bring
    // while the loop spins (control closures, kicks of queues that are
    // not polled) waits at most fd_check_ns.
    uint32_t fd_check_interval = 32;
    uint64_t fd_check_ns = 20'000;
    // While spinning idle, sched_yield() after this many consecutive turns
    // without work (0: never). When the pollers' peers (guest processes)
    // share the cores with this thread, a spinning loop that never yields
    // keeps the very peer it waits for off the CPU until the scheduler
    // preempts it: on 2 cores with 3 busy pollers every ping-pong hop then
    // costs the whole idle spin. A yield with nobody else runnable is a
    // cheap system call.
    uint32_t idle_yield_turns = 0;
  };

  // nullptr when epoll or the wake eventfd cannot be created.
  static std::unique_ptr<EpollEventLoop> Create(Options options);
  static std::unique_ptr<EpollEventLoop> Create() { return Create(Options{}); }
  ~EpollEventLoop() override;

  bool AddFd(int fd, uint32_t epoll_events, FdHandler handler) override;
  void RemoveFd(int fd) override;
  uint64_t AddPoller(Poller poller, ArmHook arm = nullptr,
                     DeadlineHook deadline = nullptr) override;
  void RemovePoller(uint64_t id) override;

  // Runs on the calling thread until Stop().
  void Run();
  // One turn: runs pollers once and handles ready fds, waiting up to
  // timeout_ms for them (0: do not wait). Returns true when anything ran.
  bool RunOnce(int timeout_ms);
  // From any thread: makes Run() return soon (wakes a sleeping loop).
  void Stop();
  // Wakes a sleeping loop without stopping it (any thread).
  void Wake();

  // True on the thread currently inside Run()/RunOnce().
  bool InLoopThread() const;
  // Number of times the loop went to sleep in epoll_wait (tests, stats).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  // Number of sleeps a poller's deadline ended (tests, stats).
  uint64_t deadline_wakeups() const {
    return deadline_wakeups_.load(std::memory_order_relaxed);
  }

 private:
  struct FdEntry {
    uint32_t generation;
    FdHandler handler;
  };
  struct PollerEntry {
    uint64_t id;
    Poller poller;
    ArmHook arm;
    DeadlineHook deadline;
    bool removed;
  };

  explicit EpollEventLoop(Options options) : options_(options) {}
  bool RunPollers();
  void ArmPollers();
  // Arms the timer fd for the earliest poller deadline (or disarms it).
  void ArmDeadline();
  // Returns true when a handler ran.
  bool DispatchFds(int timeout_ms);
  void CompactPollers();

  Options options_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int timer_fd_ = -1;  // wakes a sleeping loop at a poller's deadline
  std::atomic<bool> stop_{false};
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> deadline_wakeups_{0};
  uint32_t next_generation_ = 1;
  std::unordered_map<int, std::shared_ptr<FdEntry>> fds_;
  std::vector<PollerEntry> pollers_;
  uint64_t next_poller_id_ = 1;
  bool pollers_dirty_ = false;
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_BASE_EVENT_LOOP_H_
