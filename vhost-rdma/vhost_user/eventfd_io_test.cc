// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The eventfds a frontend shares cannot block a daemon thread, whatever the
// frontend does to their file description.
#include "vhost-rdma/vhost_user/eventfd_io.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include "gtest/gtest.h"

namespace vrdma::vhost {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kFull = 0xfffffffffffffffeull;  // an eventfd's maximum

// Runs call on its own thread. If it has not returned after 2 s it is
// blocked: `unblock` frees it so the test can fail instead of hanging.
EventFdResult WithinTwoSeconds(const std::function<EventFdResult()>& call,
                               const std::function<void()>& unblock, bool* blocked) {
  auto f = std::async(std::launch::async, call);
  *blocked = f.wait_for(2s) != std::future_status::ready;
  if (*blocked) unblock();
  return f.get();
}

// What a hostile frontend does to a call fd: blocking again, counter full.
int BlockingFullEventFd() {
  const int fd = eventfd(0, EFD_CLOEXEC);  // no EFD_NONBLOCK
  const uint64_t full = kFull;
  EXPECT_EQ(write(fd, &full, sizeof(full)), 8);
  return fd;
}

void Drain(int fd) {
  uint64_t v;
  (void)read(fd, &v, sizeof(v));
}

TEST(EventFdIoTest, ConsumeKickTakesAPendingKickOnce) {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  const uint64_t three = 3;
  ASSERT_EQ(write(fd, &three, sizeof(three)), 8);
  EXPECT_EQ(ConsumeKick(fd), EventFdResult::kDone);
  EXPECT_EQ(ConsumeKick(fd), EventFdResult::kNothing);
  close(fd);
}

// The frontend cleared O_NONBLOCK and there is no kick: no watchdog needed.
TEST(EventFdIoTest, ConsumeKickDoesNotBlockOnABlockingEmptyFd) {
  const int fd = eventfd(0, EFD_CLOEXEC);
  bool blocked = false;
  const EventFdResult r = WithinTwoSeconds([fd] { return ConsumeKick(fd); },
                                           [fd] { (void)eventfd_write(fd, 1); }, &blocked);
  EXPECT_FALSE(blocked);
  EXPECT_EQ(r, EventFdResult::kNothing);
  close(fd);
}

TEST(EventFdIoTest, SignalDeliversAndAFullCounterCountsAsSignalled) {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  EXPECT_EQ(SignalEventFd(fd), EventFdResult::kDone);
  uint64_t v = 0;
  ASSERT_EQ(read(fd, &v, sizeof(v)), 8);
  EXPECT_EQ(v, 1u);
  const uint64_t full = kFull;
  ASSERT_EQ(write(fd, &full, sizeof(full)), 8);
  EXPECT_EQ(SignalEventFd(fd), EventFdResult::kNothing);
  close(fd);
}

// The rule that fires for a call fd the frontend made blocking and filled:
// the watchdog interrupts the write, which reports kStalled.
TEST(EventFdIoTest, TheWatchdogInterruptsAWriteThatWouldBlock) {
  auto watchdog = FdWatchdog::Start(5ms);
  ASSERT_NE(watchdog, nullptr);
  EXPECT_EQ(FdWatchdog::Start(5ms), nullptr);  // one per process
  const int fd = BlockingFullEventFd();
  bool blocked = false;
  const EventFdResult r = WithinTwoSeconds(
      [&] {
        watchdog->WatchThisThread();
        return SignalEventFd(fd);
      },
      [fd] { Drain(fd); }, &blocked);
  EXPECT_FALSE(blocked);
  EXPECT_EQ(r, EventFdResult::kStalled);
  EXPECT_GE(watchdog->interrupts(), 1u);
  close(fd);
}

// Without a watched thread the same write blocks: the test above can fail.
TEST(EventFdIoTest, AnUnwatchedWriteToSuchAnFdBlocks) {
  auto watchdog = FdWatchdog::Start(5ms);
  ASSERT_NE(watchdog, nullptr);
  const int fd = BlockingFullEventFd();
  bool blocked = false;
  const EventFdResult r =
      WithinTwoSeconds([fd] { return SignalEventFd(fd); }, [fd] { Drain(fd); }, &blocked);
  EXPECT_TRUE(blocked);
  EXPECT_EQ(r, EventFdResult::kDone);  // once the counter was drained
  EXPECT_EQ(watchdog->interrupts(), 0u);
  close(fd);
}

// Guarded calls that do not block are never reported stalled, however
// many, with a watchdog period far below a busy machine's preemption: a
// thread preempted inside the guarded region may get the signal, but a
// call that does not wait is not interrupted by it.
TEST(EventFdIoTest, QuickCallsAreNeverReportedStalled) {
  auto watchdog = FdWatchdog::Start(1ms);
  ASSERT_NE(watchdog, nullptr);
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  auto f = std::async(std::launch::async, [&] {
    watchdog->WatchThisThread();
    int stalled = 0;
    const auto end = std::chrono::steady_clock::now() + 50ms;
    while (std::chrono::steady_clock::now() < end) {
      if (SignalEventFd(fd) == EventFdResult::kStalled) ++stalled;
      if (ConsumeKick(fd) == EventFdResult::kStalled) ++stalled;
    }
    return stalled;
  });
  EXPECT_EQ(f.get(), 0);
  close(fd);
}

}  // namespace
}  // namespace vrdma::vhost
