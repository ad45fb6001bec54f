// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/device/doorbell_queue.h"

#include <array>

#include "vhost-rdma/abi/virtio_rdma.h"
#include "vhost-rdma/device/command_decoder.h"

namespace vrdma::device {
namespace {

void Bump(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

bool DoorbellQueue::Poll() {
  if (!vq_.ready() || vq_.broken()) return false;
  uint32_t served = 0;
  // Bounded by the ring size so a guest that keeps refilling cannot keep
  // the data-path thread here.
  while (served < vq_.size()) {
    auto next = vq_.Pop();
    if (!next.has_value()) break;
    if (!next->ok()) break;  // broken ring: the queue stays stopped
    const vhost::DescChain& chain = next->value();
    std::array<uint8_t, sizeof(virtio_rdma_doorbell)> rec;
    Result<DoorbellRecord> db = Status::kInvalid;
    if (chain.readable_bytes() == rec.size() &&
        chain.Read(0, {rec.data(), rec.size()}) == rec.size()) {
      db = DecodeDoorbell(rec);
    }
    // The record is copied: the buffer goes back to the guest at once.
    vq_.Push(chain.head, 0);
    ++served;
    if (db.ok()) {
      Bump(records_);
      engine_.Doorbell(vm_, db->kind, db->handle);
    } else {
      Bump(bad_records_);
    }
  }
  if (served == 0) return false;
  if (kicks_enabled_) {
    vq_.SetKickEnabled(false);
    kicks_enabled_ = false;
  }
  vq_.NotifyGuest();
  return true;
}

void DoorbellQueue::Arm() {
  if (!vq_.ready()) return;
  vq_.SetKickEnabled(true);
  kicks_enabled_ = true;
}

}  // namespace vrdma::device
