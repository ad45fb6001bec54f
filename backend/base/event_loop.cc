// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/base/event_loop.h"

#include <errno.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace vrdma {
namespace {

constexpr int kMaxEvents = 64;
constexpr uint32_t kWakeGeneration = 0;  // the loop's own wake and timer fds

uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t Pack(int fd, uint32_t generation) {
  return static_cast<uint32_t>(fd) | (static_cast<uint64_t>(generation) << 32);
}

}  // namespace

std::unique_ptr<EpollEventLoop> EpollEventLoop::Create(Options options) {
  std::unique_ptr<EpollEventLoop> loop(new EpollEventLoop(options));
  loop->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  loop->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  loop->timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (loop->epoll_fd_ < 0 || loop->wake_fd_ < 0 || loop->timer_fd_ < 0) return nullptr;
  for (int fd : {loop->wake_fd_, loop->timer_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = Pack(fd, kWakeGeneration);
    if (epoll_ctl(loop->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return nullptr;
  }
  return loop;
}

EpollEventLoop::~EpollEventLoop() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (timer_fd_ >= 0) close(timer_fd_);
}

bool EpollEventLoop::AddFd(int fd, uint32_t epoll_events, FdHandler handler) {
  if (fd < 0 || fd == wake_fd_ || fd == timer_fd_ || fds_.count(fd) != 0 || !handler) {
    return false;
  }
  // A generation per registration, so an event for a removed fd whose number
  // was reused within the same epoll batch is not delivered to the new one.
  uint32_t gen = next_generation_++;
  if (next_generation_ == kWakeGeneration) ++next_generation_;
  epoll_event ev{};
  ev.events = epoll_events;
  ev.data.u64 = Pack(fd, gen);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
  fds_[fd] = std::make_shared<FdEntry>(FdEntry{gen, std::move(handler)});
  return true;
}

void EpollEventLoop::RemoveFd(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  fds_.erase(it);
}

uint64_t EpollEventLoop::AddPoller(Poller poller, ArmHook arm, DeadlineHook deadline) {
  const uint64_t id = next_poller_id_++;
  pollers_.push_back(
      PollerEntry{id, std::move(poller), std::move(arm), std::move(deadline), false});
  return id;
}

void EpollEventLoop::RemovePoller(uint64_t id) {
  // Marked here, erased between turns: a poller may remove itself.
  for (auto& p : pollers_) {
    if (p.id == id) {
      p.removed = true;
      pollers_dirty_ = true;
    }
  }
}

void EpollEventLoop::CompactPollers() {
  if (!pollers_dirty_) return;
  std::erase_if(pollers_, [](const PollerEntry& p) { return p.removed; });
  pollers_dirty_ = false;
}

bool EpollEventLoop::RunPollers() {
  bool did = false;
  // Index loop: a poller may add pollers (push_back may reallocate).
  for (size_t i = 0; i < pollers_.size(); ++i) {
    if (pollers_[i].removed) continue;
    Poller& p = pollers_[i].poller;
    if (p()) did = true;
  }
  CompactPollers();
  return did;
}

void EpollEventLoop::ArmPollers() {
  for (size_t i = 0; i < pollers_.size(); ++i) {
    if (!pollers_[i].removed && pollers_[i].arm) {
      ArmHook& arm = pollers_[i].arm;
      arm();
    }
  }
  CompactPollers();
}

void EpollEventLoop::ArmDeadline() {
  uint64_t earliest = UINT64_MAX;
  for (const PollerEntry& p : pollers_) {
    if (!p.removed && p.deadline) earliest = std::min(earliest, p.deadline());
  }
  itimerspec spec{};  // zero: disarmed
  if (earliest != UINT64_MAX) {
    // An absolute time already past would disarm: at least 1 ns.
    earliest = std::max<uint64_t>(earliest, 1);
    spec.it_value.tv_sec = static_cast<time_t>(earliest / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(earliest % 1'000'000'000);
  }
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

bool EpollEventLoop::DispatchFds(int timeout_ms) {
  epoll_event events[kMaxEvents];
  int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
  if (n <= 0) return false;  // timeout or EINTR
  bool did = false;
  for (int i = 0; i < n; ++i) {
    const int fd = static_cast<int>(events[i].data.u64 & 0xffffffffu);
    const uint32_t gen = static_cast<uint32_t>(events[i].data.u64 >> 32);
    if ((fd == wake_fd_ || fd == timer_fd_) && gen == kWakeGeneration) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = read(fd, &v, sizeof(v));
      if (fd == timer_fd_) deadline_wakeups_.fetch_add(1, std::memory_order_relaxed);
      did = true;
      continue;
    }
    auto it = fds_.find(fd);
    if (it == fds_.end() || it->second->generation != gen) continue;  // removed meanwhile
    // Keep the entry alive while its handler runs (it may remove itself).
    std::shared_ptr<FdEntry> entry = it->second;
    entry->handler(events[i].events);
    did = true;
  }
  return did;
}

bool EpollEventLoop::InLoopThread() const {
  return loop_thread_.load(std::memory_order_acquire) == std::this_thread::get_id();
}

bool EpollEventLoop::RunOnce(int timeout_ms) {
  loop_thread_.store(std::this_thread::get_id(), std::memory_order_release);
  bool did = RunPollers();
  if (DispatchFds(did ? 0 : timeout_ms)) did = true;
  return did;
}

void EpollEventLoop::Run() {
  loop_thread_.store(std::this_thread::get_id(), std::memory_order_release);
  const uint32_t fd_every = std::max<uint32_t>(1, options_.fd_check_interval);
  uint64_t idle_since = 0;
  uint32_t turns = 0;
  uint32_t idle_turns = 0;  // consecutive turns without work
  uint64_t last_fd_check = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    if (RunPollers()) {
      idle_turns = 0;
      if (++turns % fd_every == 0) DispatchFds(0);
      continue;
    }
    // An idle turn. Its cost is the time from new work to its pickup, so it
    // makes no system call it does not need (Options::fd_check_ns): it
    // notes the time on the first idle turn and reads the clock every
    // fd_check_interval turns (idle_spin_ns is honoured to that precision).
    const uint32_t idle = ++idle_turns;
    if (idle == 1) idle_since = NowNs();
    if (idle % fd_every == 0) {
      const uint64_t now = NowNs();
      if (now - last_fd_check >= options_.fd_check_ns) {
        last_fd_check = now;
        if (DispatchFds(0)) {
          idle_turns = 0;
          continue;
        }
      }
      if (now - idle_since >= options_.idle_spin_ns) {
        // Idle long enough: arm (re-enable kicks), poll once more to catch
        // work that arrived before arming took effect, then sleep.
        idle_turns = 0;
        ArmPollers();
        if (RunPollers()) continue;
        if (stop_.load(std::memory_order_acquire)) break;
        // Timed work (a paced release, a policy timer) wakes the loop; it
        // costs no busy core until then.
        ArmDeadline();
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        DispatchFds(-1);
        last_fd_check = NowNs();
        continue;
      }
    }
    if (options_.idle_yield_turns != 0 && idle % options_.idle_yield_turns == 0) {
      sched_yield();
    }
  }
  stop_.store(false, std::memory_order_relaxed);  // Run may be called again
}

void EpollEventLoop::Stop() {
  stop_.store(true, std::memory_order_release);
  Wake();
}

void EpollEventLoop::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(wake_fd_, &one, sizeof(one));
}

}  // namespace vrdma
