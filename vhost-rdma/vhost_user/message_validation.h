// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The framing stage of message validation: ONE table says, for every request
// code, whether this backend serves it, how big its payload may be and how
// many fds it may carry. connection.cc checks every header against it before
// reading the payload; a miss is a protocol violation (disconnect).
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_MESSAGE_VALIDATION_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_MESSAGE_VALIDATION_H_

#include <cstddef>
#include <cstdint>

#include "backend/base/status.h"
#include "vhost-rdma/vhost_user/messages.h"

namespace vrdma::vhost {

struct MessageRule {
  bool supported = false;
  uint32_t min_size = 0;  // payload bytes
  uint32_t max_size = 0;
  uint8_t min_fds = 0;
  uint8_t max_fds = 0;
  // The backend always answers (GET_*): NEED_REPLY adds no ack to these.
  bool has_reply = false;
};

// The rule for `request` (an unsupported rule for unknown codes).
const MessageRule& RuleFor(uint32_t request);

// Header checks that need no payload: version 1, no REPLY bit, no unknown
// flag bits, a supported request, size within the rule.
[[nodiscard]] Status CheckHeader(const VhostUserHeader& hdr);
// The number of fds received with the message is within the rule.
[[nodiscard]] Status CheckFdCount(const VhostUserHeader& hdr, size_t num_fds);

// The kind of a kick, call or err fd (SET_VRING_KICK/CALL/ERR): it must be
// an eventfd (kBadHandle otherwise: a pipe, a socket, a file), and it is
// made O_NONBLOCK, so no read or write of it can block this process: a
// write to a counter at its maximum fails with EAGAIN ("already
// signalled"), a read of a zero counter with EAGAIN ("no kick"). The
// caller closes a refused fd. The memory table's fds are checked by
// GuestMemory::Map.
[[nodiscard]] Status CheckEventFd(int fd);

// True when the frontend wants an ack (NEED_REPLY, REPLY_ACK negotiated,
// and the request has no reply of its own).
bool WantsAck(const VhostUserHeader& hdr, uint64_t protocol_features);

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_MESSAGE_VALIDATION_H_
