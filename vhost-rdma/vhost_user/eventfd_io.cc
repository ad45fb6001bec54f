// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/eventfd_io.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

namespace vrdma::vhost {
namespace {

constexpr int kSignal = SIGURG;  // default action: ignore (a late one is harmless)

// The running watchdog and its generation: a thread's slot is valid only
// for the watchdog that handed it out.
std::atomic<FdWatchdog*> g_watchdog{nullptr};
std::atomic<uint64_t> g_generation{0};
thread_local FdWatchdog::Slot* tls_slot = nullptr;
thread_local uint64_t tls_generation = 0;

void OnSignal(int) {}  // only there to interrupt a blocked call

FdWatchdog::Slot* MySlot() {
  if (tls_slot == nullptr) return nullptr;
  if (g_watchdog.load(std::memory_order_acquire) == nullptr ||
      g_generation.load(std::memory_order_acquire) != tls_generation) {
    tls_slot = nullptr;
    return nullptr;
  }
  return tls_slot;
}

// Runs one read or write of 8 bytes under the thread's slot.
EventFdResult Guarded(int fd, bool write_call, uint64_t* value) {
  FdWatchdog::Slot* slot = MySlot();
  uint64_t seq = 0;
  if (slot != nullptr) seq = slot->seq.fetch_add(1, std::memory_order_acq_rel) + 1;
  EventFdResult result = EventFdResult::kNothing;
  for (;;) {
    const ssize_t n = write_call ? write(fd, value, sizeof(*value)) : read(fd, value, sizeof(*value));
    if (n == static_cast<ssize_t>(sizeof(*value))) {
      result = EventFdResult::kDone;
      break;
    }
    if (n < 0 && errno == EINTR) {
      // The watchdog's signal for this very call, or someone else's.
      if (slot != nullptr && slot->fired.load(std::memory_order_acquire) == seq) {
        result = EventFdResult::kStalled;
        break;
      }
      continue;
    }
    break;  // EAGAIN: empty kick / full counter; anything else: nothing to do
  }
  if (slot != nullptr) slot->seq.fetch_add(1, std::memory_order_acq_rel);
  return result;
}

}  // namespace

EventFdResult ConsumeKick(int fd) {
  uint64_t v;
  iovec io{&v, sizeof(v)};
  const ssize_t n = preadv2(fd, &io, 1, -1, RWF_NOWAIT);
  if (n == static_cast<ssize_t>(sizeof(v))) return EventFdResult::kDone;
  if (n < 0 && errno != EOPNOTSUPP && errno != EINVAL) return EventFdResult::kNothing;
  // An eventfd without RWF_NOWAIT support (older kernels): a readiness
  // check, and the read guarded in case the frontend drains it between.
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) return EventFdResult::kNothing;
  return Guarded(fd, /*write_call=*/false, &v);
}

EventFdResult SignalEventFd(int fd) {
  uint64_t one = 1;
  return Guarded(fd, /*write_call=*/true, &one);
}

std::unique_ptr<FdWatchdog> FdWatchdog::Start(std::chrono::microseconds period) {
  std::unique_ptr<FdWatchdog> w(new FdWatchdog(period));
  FdWatchdog* expected = nullptr;
  if (!g_watchdog.compare_exchange_strong(expected, w.get())) return nullptr;
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the blocked call returns EINTR
  sigaction(kSignal, &sa, nullptr);
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

FdWatchdog::~FdWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  FdWatchdog* self = this;  // a refused second watchdog owns nothing
  g_watchdog.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
}

bool FdWatchdog::WatchThisThread() {
  for (Slot& s : slots_) {
    bool expected = false;
    if (s.used.compare_exchange_strong(expected, true)) {
      s.thread = pthread_self();
      tls_slot = &s;
      tls_generation = g_generation.load(std::memory_order_acquire);
      return true;
    }
  }
  return false;
}

void FdWatchdog::Run() {
  uint64_t seen[kMaxThreads] = {};
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period_, [this] { return stop_; })) {
    for (int i = 0; i < kMaxThreads; ++i) {
      Slot& s = slots_[i];
      if (!s.used.load(std::memory_order_acquire)) continue;
      const uint64_t v = s.seq.load(std::memory_order_acquire);
      // Inside the same guarded call as one period ago: interrupt it (again
      // each period: a signal that landed just before the call blocked
      // interrupted nothing).
      if ((v & 1) != 0 && v == seen[i]) {
        // Counted before `fired` is published: the interrupted thread reads
        // `fired` with acquire, so it (and who it returns to) sees the count.
        interrupts_.fetch_add(1, std::memory_order_relaxed);
        s.fired.store(v, std::memory_order_release);
        pthread_kill(s.thread, kSignal);
      }
      seen[i] = v;
    }
  }
}

}  // namespace vrdma::vhost
