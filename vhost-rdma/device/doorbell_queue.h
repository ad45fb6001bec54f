// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// One doorbell virtqueue (queues 2 ..): each buffer is one 8-byte record
// (struct virtio_rdma_doorbell) handed to Engine::Doorbell.
//
// Notification: while records keep arriving the data-path loop busy-polls
// Poll() and guest kicks are off (VRING_USED_F_NO_NOTIFY / avail event), so
// a doorbell costs the guest no VM exit. When the loop goes idle it calls
// Arm(): kicks are re-enabled and the loop polls once more before sleeping,
// which closes the race with a record published just before the re-enable.
//
// Data-path thread only. Allocates nothing.
#ifndef VRDMA_VHOST_RDMA_DEVICE_DOORBELL_QUEUE_H_
#define VRDMA_VHOST_RDMA_DEVICE_DOORBELL_QUEUE_H_

#include <atomic>
#include <cstdint>

#include "backend/engine/engine.h"
#include "vhost-rdma/vhost_user/virtqueue.h"

namespace vrdma::device {

class DoorbellQueue {
 public:
  DoorbellQueue(vhost::Virtqueue& vq, engine::Engine& engine,
                engine::VmId vm)
      : vq_(vq), engine_(engine), vm_(vm) {}

  // Serves at most one ring's worth of records; true when it did work.
  bool Poll();
  // The loop is about to sleep: ask the guest to kick again. Arm must not
  // poll itself: a record found here would turn kicks off again right
  // before the loop sleeps. The loop's own poll after arming (EventLoop
  // contract) catches a record published before the re-enable, and keeps
  // the loop busy if it finds one.
  void Arm();

  // Readable from any thread (the daemon's stats).
  uint64_t records() const { return records_.load(std::memory_order_relaxed); }
  uint64_t bad_records() const {
    return bad_records_.load(std::memory_order_relaxed);
  }
  bool kicks_enabled() const { return kicks_enabled_; }

 private:
  vhost::Virtqueue& vq_;
  engine::Engine& engine_;
  const engine::VmId vm_;
  bool kicks_enabled_ = true;
  // Single writer (the data path): plain load + store, no locked RMW.
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> bad_records_{0};  // wrong size or kind: skipped
};

}  // namespace vrdma::device

#endif  // VRDMA_VHOST_RDMA_DEVICE_DOORBELL_QUEUE_H_
