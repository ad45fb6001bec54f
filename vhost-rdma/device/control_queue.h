// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The control virtqueue (queue 0): each chain is one command. The readable
// part is copied out of guest memory once, into a host buffer, and only the
// copy is decoded; the response is written into the writable part.
//
// Control thread only.
#ifndef VRDMA_VHOST_RDMA_DEVICE_CONTROL_QUEUE_H_
#define VRDMA_VHOST_RDMA_DEVICE_CONTROL_QUEUE_H_

#include <cstdint>
#include <vector>

#include "vhost-rdma/device/command_handler.h"
#include "vhost-rdma/vhost_user/virtqueue.h"

namespace vrdma::device {

// Serves one chain and returns the bytes written into its writable part:
//  - writable part < sizeof(virtio_rdma_resp_hdr): nothing is executed,
//    0 bytes are written (there is no way to report an error);
//  - readable part larger than MaxCommandBytes(limits), or a writable part
//    too small for the command's response struct: ERR_INVALID, the command
//    is not executed (a create whose handle the guest cannot learn would
//    leak the object);
//  - otherwise the handler's status; the response struct follows only on OK.
// `scratch` is reused between calls to avoid reallocating.
uint32_t ServeControlChain(const vhost::DescChain& chain,
                           CommandHandler& handler,
                           std::vector<uint8_t>* scratch);

struct DrainResult {
  uint32_t served = 0;
  uint64_t busy_ns = 0;  // control-thread time spent serving them
  bool more = false;     // budget or slice used up with chains still available
  bool broken = false;   // the guest broke the ring: the queue is stopped
};

// Pops, serves and pushes chains until `budget` chains are served or
// `slice_ns` of time is spent (a command is never cut: the slice is checked
// between commands), then notifies the guest. The time slice is what makes
// the control thread fair between VMs: one whose commands are expensive
// (REG_MR of scattered pages) yields as soon as one whose commands are cheap.
DrainResult DrainControlQueue(vhost::Virtqueue& vq, CommandHandler& handler,
                              std::vector<uint8_t>* scratch, uint32_t budget,
                              uint64_t slice_ns);

}  // namespace vrdma::device

#endif  // VRDMA_VHOST_RDMA_DEVICE_CONTROL_QUEUE_H_
