// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Reads and writes of the eventfds a frontend passes (kick, call). The
// frontend shares their open file descriptions, so CheckEventFd making them
// non-blocking is not enough: the frontend can clear O_NONBLOCK again, read a
// kick away between a readiness check and the daemon's read, or leave a
// call counter at its maximum. None of that may block a daemon thread
// (docs/security.md, "Fds"):
//
// - A kick is consumed with preadv2(RWF_NOWAIT), which does not block
//   whatever the description's flags. Kernels whose eventfds do not take
//   RWF_NOWAIT get a readiness check and read() under the watchdog below.
// - A call (or a re-kick) is written with write(), which can block only on a
//   full counter of a description the frontend made blocking. A thread that
//   writes them calls FdWatchdog::WatchThisThread(); the watchdog interrupts
//   a guarded call that is still running one period later with a signal
//   whose handler does not restart system calls, and the call reports
//   kStalled. Its caller stops using the fd (the frontend's queue, not the
//   daemon, pays).
//
// A guarded call costs two atomic increments of a per-thread counter; the
// watchdog thread wakes once per period and reads one counter per thread.
// A thread preempted for a whole period inside a guarded call that does not
// wait may get the signal too: harmless, since only a waiting call returns
// EINTR, and that is the one reported kStalled.
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_EVENTFD_IO_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_EVENTFD_IO_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

namespace vrdma::vhost {

enum class EventFdResult : uint8_t {
  kDone,     // a kick consumed, or a signal delivered
  kNothing,  // no kick pending; or the counter is full (already signalled)
  kStalled,  // the call would have blocked: the watchdog interrupted it
};

EventFdResult ConsumeKick(int fd);
EventFdResult SignalEventFd(int fd);

class FdWatchdog {
 public:
  static constexpr int kMaxThreads = 8;

  // Starts the watchdog thread and installs its signal handler (SIGURG,
  // without SA_RESTART). At most one watchdog runs in a process; nullptr
  // when one already runs or the thread cannot start.
  static std::unique_ptr<FdWatchdog> Start(std::chrono::microseconds period);
  ~FdWatchdog();
  FdWatchdog(const FdWatchdog&) = delete;
  FdWatchdog& operator=(const FdWatchdog&) = delete;

  // Guards the calling thread's eventfd calls from now on, until the
  // watchdog is destroyed. False when kMaxThreads threads are watched.
  bool WatchThisThread();

  // Guarded calls interrupted so far.
  uint64_t interrupts() const { return interrupts_.load(std::memory_order_relaxed); }

  // One watched thread. seq is odd while the thread is inside a guarded
  // call; fired is the seq of a call the watchdog interrupted.
  struct Slot {
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> fired{0};
    std::atomic<bool> used{false};
    pthread_t thread{};
  };

 private:
  explicit FdWatchdog(std::chrono::microseconds period) : period_(period) {}
  void Run();

  const std::chrono::microseconds period_;
  Slot slots_[kMaxThreads];
  std::atomic<uint64_t> interrupts_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_EVENTFD_IO_H_
