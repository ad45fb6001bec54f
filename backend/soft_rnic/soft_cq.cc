// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Completion queues: a ring sized at creation (grown by ResizeCq on the
// control path). On overflow the CQ enters an error state like hardware: the
// completion is lost and so is every later one; they are counted so the
// loss is visible, and the CQ is reported once as an asynchronous kCqError
// (IBV_EVENT_CQ_ERR) through PollAsyncEvent.
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {

Result<RnicCq> SoftRnic::CreateCq(uint32_t depth) {
  if (depth == 0 || depth > limits_.max_cqe) return Status::kInvalid;
  uint32_t h = 0;
  soft::Cq* cq = cqs_.Create(&h);
  if (cq == nullptr) return Status::kNoResource;
  cq->handle = h;
  cq->ring = TakeCqRing(depth);
  if (cq->ring.capacity() != depth) cq->ring.Init(depth);
  return RnicCq{h};
}

soft::FixedRing<Completion> SoftRnic::TakeCqRing(uint32_t depth) {
  for (soft::PreparedSlot& slot : prepared_cq_) {
    std::unique_ptr<soft::QueueMemory> m = slot.Take(
        [&](const soft::QueueMemory& p) { return p.kind == soft::QueueMemory::Kind::kCq && p.depth == depth; });
    if (m != nullptr) {
      soft::FixedRing<Completion> ring = std::move(m->cq);
      graveyard_.Push(std::move(m));
      return ring;
    }
  }
  return {};
}

void SoftRnic::Bury(soft::FixedRing<Completion> ring) {
  auto dead = std::make_unique<soft::QueueMemory>();
  dead->cq = std::move(ring);
  graveyard_.Push(std::move(dead));
}

Status SoftRnic::ResizeCq(RnicCq cq, uint32_t depth) {
  soft::Cq* c = cqs_.Get(cq.id);
  if (c == nullptr) return Status::kBadHandle;
  if (depth == 0 || depth > limits_.max_cqe || depth < c->ring.size()) {
    return Status::kInvalid;
  }
  if (depth <= c->ring.capacity()) return Status::kOk;  // never shrinks
  soft::FixedRing<Completion> grown = TakeCqRing(depth);
  if (grown.capacity() != depth) grown.Init(depth);
  while (!c->ring.empty()) {
    *grown.Push() = c->ring.front();
    c->ring.Pop();
  }
  Bury(std::exchange(c->ring, std::move(grown)));
  return Status::kOk;
}

Status SoftRnic::DestroyCq(RnicCq cq) {
  soft::Cq* c = cqs_.Get(cq.id);
  if (c == nullptr) return Status::kBadHandle;
  if (c->refs != 0) return Status::kBusy;
  Bury(std::move(c->ring));
  cqs_.Destroy(cq.id);
  return Status::kOk;
}

void SoftRnic::PushCompletion(soft::Cq* cq, const Completion& c) {
  if (cq->overflowed) {
    ++cq->dropped;
    return;
  }
  Completion* slot = cq->ring.Push();
  if (slot == nullptr) {
    cq->overflowed = true;
    ++cq->dropped;
    if (uint32_t* ev = async_cq_errors_.Push()) *ev = cq->handle;
    return;
  }
  *slot = c;
}

int SoftRnic::PollCq(RnicCq cq, std::span<Completion> out) {
  soft::Cq* c = cqs_.Get(cq.id);
  if (c == nullptr) return 0;
  int n = 0;
  while (n < static_cast<int>(out.size()) && !c->ring.empty()) {
    out[n++] = c->ring.front();
    c->ring.Pop();
  }
  return n;
}

bool SoftRnic::PollAsyncEvent(AsyncEvent* ev) {
  while (!async_cq_errors_.empty()) {
    const uint32_t id = async_cq_errors_.front();
    async_cq_errors_.Pop();
    const soft::Cq* c = cqs_.Get(id);
    if (c == nullptr || !c->overflowed) continue;  // destroyed since
    *ev = AsyncEvent{AsyncEvent::Type::kCqError, id};
    return true;
  }
  return false;
}

Result<SoftCqStats> SoftRnic::QueryCqStats(RnicCq cq) const {
  const soft::Cq* c = cqs_.Get(cq.id);
  if (c == nullptr) return Status::kBadHandle;
  return SoftCqStats{c->overflowed, c->dropped};
}

}  // namespace vrdma
