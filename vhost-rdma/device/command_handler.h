// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Runs one control-queue request of one VM: decode (command_decoder), gate
// on the negotiated feature bits, call the engine, encode the response
// (command_encoder). Knows nothing of virtqueues: control_queue.cc feeds it
// the bytes of a chain and writes back what it returns.
//
// Control thread only.
#ifndef VRDMA_VHOST_RDMA_DEVICE_COMMAND_HANDLER_H_
#define VRDMA_VHOST_RDMA_DEVICE_COMMAND_HANDLER_H_

#include <array>
#include <cstdint>
#include <span>

#include "backend/base/status.h"
#include "backend/engine/engine.h"
#include "vhost-rdma/abi/virtio_rdma.h"
#include "vhost-rdma/device/command_decoder.h"

namespace vrdma::device {

// The largest response body (QUERY_DEVICE and QUERY_QP are the big ones).
inline constexpr size_t kMaxResponseBody = sizeof(virtio_rdma_resp_query_qp);
static_assert(kMaxResponseBody >= sizeof(virtio_rdma_resp_query_device));

struct CommandResponse {
  Status status = Status::kInvalid;
  // Valid only when status is kOk; body_len bytes of the command's response
  // struct (0 for commands without one).
  uint32_t body_len = 0;
  std::array<uint8_t, kMaxResponseBody> body{};
};

class CommandHandler {
 public:
  // num_gids: how many GIDs the VM was given (QUERY_PORT's gid_tbl_len).
  CommandHandler(engine::Engine& engine, engine::VmId vm,
                 const DecodeLimits& limits, uint32_t num_gids);

  // Negotiated device feature bits: without VIRTIO_RDMA_F_SRQ the SRQ
  // commands (and CREATE_QP with an SRQ) are kUnsupported; without
  // VIRTIO_RDMA_F_UD so are UD QPs and the AH commands.
  void set_acked_features(uint64_t features) { features_ = features; }
  const DecodeLimits& limits() const { return limits_; }

  // Decodes and executes the readable bytes of one chain.
  CommandResponse Handle(std::span<const uint8_t> request);
  // Executes an already decoded command.
  CommandResponse Execute(const Command& cmd);

 private:
  bool has(uint32_t feature_bit) const {
    return (features_ >> feature_bit) & 1;
  }

  engine::Engine& engine_;
  const engine::VmId vm_;
  const DecodeLimits limits_;
  const uint32_t num_gids_;
  uint64_t features_ = 0;
};

}  // namespace vrdma::device

#endif  // VRDMA_VHOST_RDMA_DEVICE_COMMAND_HANDLER_H_
