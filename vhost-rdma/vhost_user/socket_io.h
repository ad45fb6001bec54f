// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vhost-user message I/O on a unix stream socket: one sendmsg per message
// with its fds as SCM_RIGHTS, and a receive path that owns every fd the peer
// sends (closing whatever it does not hand on), so a misbehaving peer can
// never leak fds into this process. Used by both sides.
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_SOCKET_IO_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_SOCKET_IO_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/base/status.h"
#include "vhost-rdma/vhost_user/messages.h"

namespace vrdma::vhost {

// Up to kMaxFds received fds; closes those not taken.
class ReceivedFds {
 public:
  ReceivedFds() = default;
  ReceivedFds(const ReceivedFds&) = delete;
  ReceivedFds& operator=(const ReceivedFds&) = delete;
  ~ReceivedFds() { CloseAll(); }

  size_t size() const { return n_; }
  // Hands fd i to the caller (-1 if already taken or out of range).
  int Take(size_t i);
  void CloseAll();
  // Returns false (and closes fd) when full.
  bool Add(int fd);

 private:
  std::array<int, kMaxFds> fds_{};
  size_t n_ = 0;
};

// Sends the header and payload (hdr.size must equal payload.size()) with fds.
// Blocks while the socket's send buffer is full (up to SO_SNDTIMEO).
[[nodiscard]] Status SendMessage(int sock, const VhostUserHeader& hdr,
                                 std::span<const uint8_t> payload, std::span<const int> fds);

// The same without ever blocking: the whole message goes into the socket's
// send buffer now, or kNoResource when it does not fit (the peer stopped
// reading: what is left of its output bound, SO_SNDBUF, is too small). A
// message only partly sent also fails with kNoResource: the stream is then
// out of step and the caller must close the socket.
[[nodiscard]] Status SendMessageNoWait(int sock, const VhostUserHeader& hdr,
                                       std::span<const uint8_t> payload);

// Reads exactly buf.size() bytes, collecting any fds that ride along into
// *fds (nullptr: close them; more than kMaxFds in total: error). Returns
// kIoError on EOF, a socket error, a timeout (SO_RCVTIMEO) or truncated
// control data.
[[nodiscard]] Status RecvExact(int sock, std::span<uint8_t> buf, ReceivedFds* fds);

// One nonblocking read of up to buf.size() bytes (fds as for RecvExact).
// Returns the bytes read, 0 when nothing is available yet; kIoError on EOF,
// a socket error or truncated control data.
[[nodiscard]] Result<size_t> RecvSome(int sock, std::span<uint8_t> buf, ReceivedFds* fds);

// Sets SO_RCVTIMEO and SO_SNDTIMEO so a stalled peer cannot block a thread
// forever.
[[nodiscard]] Status SetSocketTimeouts(int sock, int timeout_ms);

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_SOCKET_IO_H_
