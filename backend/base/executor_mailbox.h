// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// MailboxExecutor: the Executor that carries RunSync requests from the
// control thread to the data-path thread (docs/architecture.md, "Threads and
// ownership"). A request is a pointer to a stack object of the caller,
// passed through a single-producer single-consumer DPDK rte_ring (no EAL);
// the caller then writes an eventfd so a sleeping loop wakes up, and waits
// until the data path marks the request done. Nothing is allocated per
// request.
//
// Memory ordering: rte_ring's enqueue is a release and its dequeue an
// acquire, so the data path sees the caller's closure and everything the
// caller wrote before RunSync; the completion counter is stored with release
// and loaded with acquire, so the caller sees everything the closure wrote.
#ifndef VRDMA_BACKEND_BASE_EXECUTOR_MAILBOX_H_
#define VRDMA_BACKEND_BASE_EXECUTOR_MAILBOX_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "backend/base/event_loop.h"
#include "backend/base/executor.h"

struct rte_ring;

namespace vrdma {

class MailboxExecutor final : public Executor {
 public:
  // Registers the mailbox's poller and eventfd with `loop`; call on the
  // loop's thread or before it runs. `loop` must outlive the executor, and
  // the executor must be destroyed on the loop's thread or after it stopped.
  static std::unique_ptr<MailboxExecutor> Create(EpollEventLoop& loop);
  ~MailboxExecutor() override;

  // Runs fn on the loop's thread and returns when it has run. Any number of
  // threads may call it (producers are serialised by a control-path mutex,
  // which keeps the ring single-producer); called on the loop's own thread
  // it runs fn inline. The loop must be running (or be run by someone), or
  // this waits forever.
  void RunSync(const std::function<void()>& fn) override;

  // Requests executed so far (tests, stats).
  uint64_t executed() const { return executed_.load(std::memory_order_relaxed); }

 private:
  struct Request;
  explicit MailboxExecutor(EpollEventLoop& loop) : loop_(loop) {}
  // Data path: runs every queued request. True when any ran.
  bool Drain();

  EpollEventLoop& loop_;
  rte_ring* ring_ = nullptr;
  void* ring_mem_ = nullptr;
  int event_fd_ = -1;
  uint64_t poller_id_ = 0;
  std::mutex producer_mu_;  // control path only: keeps the ring SP
  uint32_t issued_ = 0;                  // guarded by producer_mu_
  std::atomic<uint32_t> completed_{0};   // seq of the last finished request
  std::atomic<uint64_t> executed_{0};
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_BASE_EXECUTOR_MAILBOX_H_
