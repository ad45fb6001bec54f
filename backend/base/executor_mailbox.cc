// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/base/executor_mailbox.h"

// DPDK's headers expect their build configuration first.
#include <rte_config.h>
#include <rte_ring.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace vrdma {
namespace {

// Producers are serialised and each waits for its request, so at most one
// request is in flight; a few slots spare are free.
constexpr unsigned kRingSize = 16;
constexpr unsigned kDrainBurst = 8;

}  // namespace

struct MailboxExecutor::Request {
  const std::function<void()>* fn;
  uint32_t seq;
};

std::unique_ptr<MailboxExecutor> MailboxExecutor::Create(EpollEventLoop& loop) {
  std::unique_ptr<MailboxExecutor> ex(new MailboxExecutor(loop));
  const ssize_t bytes = rte_ring_get_memsize(kRingSize);
  if (bytes < 0) return nullptr;
  // rte_ring wants cache-line aligned memory; aligned_alloc needs a size
  // that is a multiple of the alignment.
  const size_t size = (static_cast<size_t>(bytes) + 63) & ~size_t{63};
  ex->ring_mem_ = std::aligned_alloc(64, size);
  if (ex->ring_mem_ == nullptr) return nullptr;
  ex->ring_ = static_cast<rte_ring*>(ex->ring_mem_);
  if (rte_ring_init(ex->ring_, "vrdma-mailbox", kRingSize, RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) {
    return nullptr;
  }
  ex->event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ex->event_fd_ < 0) return nullptr;
  MailboxExecutor* self = ex.get();
  // The poller drains while the loop busy-polls; the eventfd wakes a
  // sleeping loop (its handler clears the counter, then drains).
  ex->poller_id_ = loop.AddPoller([self] { return self->Drain(); });
  if (!loop.AddFd(ex->event_fd_, EPOLLIN, [self](uint32_t) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(self->event_fd_, &v, sizeof(v));
        self->Drain();
      })) {
    loop.RemovePoller(ex->poller_id_);
    return nullptr;
  }
  return ex;
}

MailboxExecutor::~MailboxExecutor() {
  if (poller_id_ != 0) loop_.RemovePoller(poller_id_);
  if (event_fd_ >= 0) {
    loop_.RemoveFd(event_fd_);
    close(event_fd_);
  }
  std::free(ring_mem_);
}

void MailboxExecutor::RunSync(const std::function<void()>& fn) {
  if (loop_.InLoopThread()) {
    fn();  // the data path calling itself: waiting would deadlock
    executed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Request req{&fn, 0};
  {
    std::lock_guard<std::mutex> lock(producer_mu_);
    req.seq = ++issued_;
    void* obj = &req;
    while (rte_ring_sp_enqueue(ring_, obj) != 0) {
      // Cannot happen with one request in flight; yield rather than spin hot.
      std::this_thread::yield();
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(event_fd_, &one, sizeof(one));
    // Wait (futex) until the data path has run the closure. Holding the
    // mutex keeps requests strictly ordered. The completion counter lives in
    // the executor, not in `req`, so the data path never touches the
    // caller's stack after the caller may have returned.
    for (uint32_t v; (v = completed_.load(std::memory_order_acquire)) != req.seq;) {
      completed_.wait(v, std::memory_order_acquire);
    }
  }
}

bool MailboxExecutor::Drain() {
  void* objs[kDrainBurst];
  bool did = false;
  for (;;) {
    const unsigned n = rte_ring_sc_dequeue_burst(ring_, objs, kDrainBurst, nullptr);
    if (n == 0) return did;
    did = true;
    for (unsigned i = 0; i < n; ++i) {
      const auto* req = static_cast<const Request*>(objs[i]);
      const uint32_t seq = req->seq;
      (*req->fn)();
      executed_.fetch_add(1, std::memory_order_relaxed);
      // From here the caller may return and its `req` is gone.
      completed_.store(seq, std::memory_order_release);
      completed_.notify_all();
    }
  }
}

}  // namespace vrdma
