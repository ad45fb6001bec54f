// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Queue memory that SoftRnic hands between threads, so that its control
// calls, which the engine runs on the data-path thread, neither allocate
// nor free queue storage there (Rnic::Prepare*, Rnic::Reclaim):
//  - the control thread builds a QueueMemory of the shape the next
//    CreateQp / CreateCq / ResizeCq / CreateSrq will need (its vectors
//    allocated and zeroed there) and leaves it in a PreparedSlot;
//  - that call takes it (one atomic exchange) and moves the vectors into
//    the object; without a match it allocates as before;
//  - Destroy* and ResizeCq move the queues they drop into a QueueMemory and
//    push it on the Graveyard (lock-free); the control thread frees them.
#ifndef VRDMA_BACKEND_SOFT_RNIC_QUEUE_MEMORY_H_
#define VRDMA_BACKEND_SOFT_RNIC_QUEUE_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/rnic/rnic.h"
#include "backend/soft_rnic/fixed_ring.h"
#include "backend/soft_rnic/recv_ring.h"
#include "backend/soft_rnic/soft_objects.h"

namespace vrdma::soft {

struct QueueMemory {
  // The shape it was prepared for (what Create* compares).
  enum class Kind : uint8_t { kQp, kCq, kSrq } kind = Kind::kQp;
  QpCaps caps{};       // kQp
  uint32_t depth = 0;  // kCq
  uint32_t max_wr = 0, max_sge = 0;  // kSrq

  FixedRing<SqSlot> sq;
  std::vector<uint8_t> inline_pool;
  RecvRing rq;
  FixedRing<Completion> cq;

  QueueMemory* next = nullptr;  // Graveyard link

  static std::unique_ptr<QueueMemory> ForQp(const QpCaps& c) {
    auto m = std::make_unique<QueueMemory>();
    m->kind = Kind::kQp;
    m->caps = c;
    m->sq.Init(c.max_send_wr);
    m->inline_pool.assign(size_t{c.max_send_wr} * c.max_inline_data, 0);
    m->rq.Init(c.max_recv_wr, c.max_recv_sge);
    return m;
  }
  static std::unique_ptr<QueueMemory> ForCq(uint32_t depth) {
    auto m = std::make_unique<QueueMemory>();
    m->kind = Kind::kCq;
    m->depth = depth;
    m->cq.Init(depth);
    return m;
  }
  static std::unique_ptr<QueueMemory> ForSrq(uint32_t max_wr, uint32_t max_sge) {
    auto m = std::make_unique<QueueMemory>();
    m->kind = Kind::kSrq;
    m->max_wr = max_wr;
    m->max_sge = max_sge;
    m->rq.Init(max_wr, max_sge);
    return m;
  }
};

// Memory dropped on the data-path thread, freed by the control thread.
// Many producers are fine (push is a CAS loop); one thread drains.
class Graveyard {
 public:
  ~Graveyard() { Free(); }
  void Push(std::unique_ptr<QueueMemory> m) {
    QueueMemory* node = m.release();
    node->next = head_.load(std::memory_order_relaxed);
    while (!head_.compare_exchange_weak(node->next, node, std::memory_order_release,
                                        std::memory_order_relaxed)) {
    }
  }
  // Frees everything pushed so far; returns how many.
  uint32_t Free() {
    QueueMemory* n = head_.exchange(nullptr, std::memory_order_acquire);
    uint32_t count = 0;
    while (n != nullptr) {
      std::unique_ptr<QueueMemory> dead(n);
      n = n->next;
      ++count;
    }
    return count;
  }

 private:
  std::atomic<QueueMemory*> head_{nullptr};
};

// One prepared QueueMemory, left by the control thread for the next
// matching create on the data-path thread.
class PreparedSlot {
 public:
  ~PreparedSlot() { delete slot_.exchange(nullptr); }
  // Control thread: replaces what was there (freed here).
  void Put(std::unique_ptr<QueueMemory> m) {
    std::unique_ptr<QueueMemory> old(slot_.exchange(m.release(), std::memory_order_acq_rel));
  }
  // Any thread: takes it when match(memory) holds; otherwise leaves it.
  template <typename Match>
  std::unique_ptr<QueueMemory> Take(Match match) {
    QueueMemory* m = slot_.exchange(nullptr, std::memory_order_acq_rel);
    if (m == nullptr) return nullptr;
    if (match(*m)) return std::unique_ptr<QueueMemory>(m);
    QueueMemory* expected = nullptr;  // put it back unless replaced meanwhile
    if (!slot_.compare_exchange_strong(expected, m, std::memory_order_acq_rel)) delete m;
    return nullptr;
  }

 private:
  std::atomic<QueueMemory*> slot_{nullptr};
};

}  // namespace vrdma::soft

#endif  // VRDMA_BACKEND_SOFT_RNIC_QUEUE_MEMORY_H_
