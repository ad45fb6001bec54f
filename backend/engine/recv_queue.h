// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Bookkeeping of one receive ring (RecvQueue, objects.h) that more than one
// part applies: RecvPath posts its WQEs, Completions completes them,
// ErrorFlush flushes them, and all of them advance the guest's consumer
// index the same way. Functions on the queue, no state of their own.
#ifndef VRDMA_BACKEND_ENGINE_RECV_QUEUE_H_
#define VRDMA_BACKEND_ENGINE_RECV_QUEUE_H_

#include <cstdint>

#include "backend/engine/engine.h"
#include "backend/engine/objects.h"
#include "backend/rnic/rnic.h"

namespace vrdma::engine {

// A new queue over ring (mapped by view): shadow state per ring slot, the
// RNIC depth (high watermark) and the sweep's low watermark. Control
// thread, before the queue is published.
void InitRecvQueue(RecvQueue& rq, const RingSpec& ring, uint32_t max_sge,
                   uint32_t rnic_max_wr, GuestPageView view);

// Slot finished (completed, flushed or skipped): the consumer index moves
// over the finished prefix, in ring order, so the guest never reuses a
// buffer the RNIC may still write into.
inline void MarkRecvDone(RecvQueue& rq, uint32_t slot) {
  rq.done[slot & rq.ring.mask()] = 1;
  uint32_t c = rq.consumer;
  while (c != rq.head && rq.done[c]) {
    rq.done[c] = 0;
    c = rq.ring.Next(c);
  }
  if (c != rq.consumer) {
    rq.consumer = c;
    rq.ring.StoreConsumer(c);  // release: the guest may reuse these slots
  }
}

// A slice of slot completed (c); true when the WQE is complete: wc's
// status and byte_len are then set and the slot is finished.
inline bool CompleteRecvSlice(RecvQueue& rq, uint32_t slot,
                              const Completion& c, ib_uverbs_wc* wc) {
  RecvSlot& s = rq.slots[slot];
  ++s.done;
  s.bytes += c.byte_len;
  if (c.status != WcStatus::kSuccess && s.status == 0) {
    s.status = static_cast<uint8_t>(c.status);
  }
  if (rq.posted > 0) --rq.posted;
  if (!s.closed || s.done < s.posted) return false;  // more slices to come
  wc->status = s.status;
  wc->byte_len = s.report_len != 0 ? s.report_len : s.bytes;
  s = RecvSlot{};
  MarkRecvDone(rq, slot);
  return true;
}

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RECV_QUEUE_H_
