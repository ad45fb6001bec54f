// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/scheduler_stage.h"

#include <cstring>
#include <span>

namespace vrdma::engine {

Status SchedulerStage::Post(QpObj& qp, const SendWr& wr,
                            const policy::WrInfo& info, policy::Nanos now) {
  Status err = Status::kOk;
  int n = rnic_.PostSend(qp.rnic, std::span<const SendWr>(&wr, 1), &err);
  if (n == 1) {
    policy_.OnPosted(now, info, info.bytes);
    return Status::kOk;
  }
  return err == Status::kOk ? Status::kIoError : err;
}

void SchedulerStage::Enqueue(QpObj& qp, const SendWr& wr,
                             const policy::WrInfo& info, uint32_t slot,
                             bool post_at_head) {
  QueuedWr& e = qp.flow.PushBack();
  e.wr = wr;
  if ((wr.send_flags & kSendInline) && wr.inline_len > 0) {
    std::memcpy(e.inline_buf.data(), wr.inline_data, wr.inline_len);
    e.wr.inline_data = e.inline_buf.data();
  }
  e.info = info;
  e.slot = slot;
  e.post_at_head = post_at_head;
  queued_.PushBack(&qp);
}

Status SchedulerStage::Submit(QpObj& qp, const SendWr& wr,
                              const policy::WrInfo& info, uint32_t slot,
                              policy::Nanos now) {
  if (!qp.flow.empty()) {
    // Older WRs of this QP wait: keep order.
    if (qp.flow.full()) return Status::kNoResource;
    const policy::Verdict v = policy_.Admit(now, info);
    Enqueue(qp, wr, info, slot, v == policy::Verdict::kPostNow);
    return Status::kOk;
  }
  if (qp.flow.entries.empty())
    return Status::kNoResource;  // no FIFO: cannot happen
  const policy::Verdict v = policy_.Admit(now, info);
  if (v == policy::Verdict::kPostNow) {
    const Status s = Post(qp, wr, info, now);
    if (s != Status::kNoResource) return s;
    // RNIC send queue full: hold it at the head and retry next turn.
    Enqueue(qp, wr, info, slot, true);
    return Status::kOk;
  }
  Enqueue(qp, wr, info, slot, false);
  return Status::kOk;
}

bool SchedulerStage::PostMarkedHeads(QpObj& qp, policy::Nanos now) {
  bool did = false;
  while (!qp.flow.empty() && qp.flow.front().post_at_head) {
    QueuedWr& e = qp.flow.front();
    const Status s = Post(qp, e.wr, e.info, now);
    if (s == Status::kNoResource) break;
    const uint32_t slot = e.slot;
    qp.flow.PopFront();
    did = true;
    if (s != Status::kOk) {
      sink_.OnQueuedPostFailed(qp, slot, s);  // may flush the rest of qp.flow
    }
  }
  if (qp.flow.empty()) queued_.Remove(&qp);
  return did;
}

bool SchedulerStage::Drain(policy::Nanos now) {
  if (queued_.empty()) return false;
  bool did = false;
  for (QpObj* qp = queued_.front(); qp != nullptr;) {
    QpObj* next = decltype(queued_)::next(qp);
    did |= PostMarkedHeads(*qp, now);
    qp = next;
  }
  for (int i = 0; i < kMaxDecisionsPerTurn && !queued_.empty(); ++i) {
    const policy::Decision d = policy_.Next(now);
    if (d.kind != policy::Decision::Kind::kPost) break;  // kWait: ask next turn
    QpObj* qp = sink_.ResolveFlow(d.tenant, d.flow);
    if (qp == nullptr || qp->flow.empty()) {
      ++stale_decisions_;
      continue;
    }
    QueuedWr& e = qp->flow.front();
    if (d.max_bytes != 0 && d.max_bytes < e.info.bytes) ++splits_ignored_;
    // Released by the policy: from now on it only waits for RNIC room.
    e.post_at_head = true;
    did |= PostMarkedHeads(*qp, now);
  }
  return did;
}

}  // namespace vrdma::engine
