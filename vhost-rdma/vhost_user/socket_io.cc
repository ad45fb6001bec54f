// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/socket_io.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

namespace vrdma::vhost {

int ReceivedFds::Take(size_t i) {
  if (i >= n_) return -1;
  int fd = fds_[i];
  fds_[i] = -1;
  return fd;
}

void ReceivedFds::CloseAll() {
  for (size_t i = 0; i < n_; ++i) {
    if (fds_[i] >= 0) close(fds_[i]);
  }
  n_ = 0;
}

bool ReceivedFds::Add(int fd) {
  if (n_ == fds_.size()) {
    close(fd);
    return false;
  }
  fds_[n_++] = fd;
  return true;
}

Status SendMessage(int sock, const VhostUserHeader& hdr, std::span<const uint8_t> payload,
                   std::span<const int> fds) {
  if (hdr.size != payload.size() || fds.size() > kMaxFds) return Status::kInvalid;
  iovec iov[2] = {
      {const_cast<VhostUserHeader*>(&hdr), sizeof(hdr)},
      {const_cast<uint8_t*>(payload.data()), payload.size()},
  };
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = payload.empty() ? 1 : 2;
  if (!fds.empty()) {
    std::memset(control, 0, sizeof(control));
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  size_t total = sizeof(hdr) + payload.size();
  size_t sent = 0;
  while (sent < total) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::kIoError;
    }
    sent += static_cast<size_t>(n);
    if (sent == total) break;
    // Partial send (rare on unix sockets): the fds went with the first
    // byte; send the rest plainly.
    msg.msg_control = nullptr;
    msg.msg_controllen = 0;
    size_t skip = static_cast<size_t>(n);
    while (msg.msg_iovlen > 0 && skip >= msg.msg_iov[0].iov_len) {
      skip -= msg.msg_iov[0].iov_len;
      ++msg.msg_iov;
      --msg.msg_iovlen;
    }
    if (msg.msg_iovlen > 0) {
      msg.msg_iov[0].iov_base = static_cast<char*>(msg.msg_iov[0].iov_base) + skip;
      msg.msg_iov[0].iov_len -= skip;
    }
  }
  return Status::kOk;
}

Status SendMessageNoWait(int sock, const VhostUserHeader& hdr,
                         std::span<const uint8_t> payload) {
  if (hdr.size != payload.size()) return Status::kInvalid;
  iovec iov[2] = {
      {const_cast<VhostUserHeader*>(&hdr), sizeof(hdr)},
      {const_cast<uint8_t*>(payload.data()), payload.size()},
  };
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = payload.empty() ? 1 : 2;
  const size_t total = sizeof(hdr) + payload.size();
  for (;;) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::kNoResource;
    if (n < 0) return Status::kIoError;
    return static_cast<size_t>(n) == total ? Status::kOk : Status::kNoResource;
  }
}

namespace {

// One recvmsg; takes ownership of every fd that came with it before judging
// the message. Returns bytes read, or -1 with errno for would-block and
// errors, or -2 for protocol-level failures (EOF, truncation, too many fds).
ssize_t RecvOnce(int sock, std::span<uint8_t> buf, ReceivedFds* fds, int flags) {
  iovec iov{buf.data(), buf.size()};
  // Room for more fds than any message may carry, so "too many" is seen
  // as such rather than silently truncated.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds * 2)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
  if (n < 0) return -1;
  bool ok = n > 0 && !(msg.msg_flags & MSG_CTRUNC);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fds == nullptr) {
        close(fd);
      } else if (!fds->Add(fd)) {
        ok = false;
      }
    }
  }
  return ok ? n : -2;
}

}  // namespace

Status RecvExact(int sock, std::span<uint8_t> buf, ReceivedFds* fds) {
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = RecvOnce(sock, buf.subspan(got), fds, 0);
    if (n == -1 && errno == EINTR) continue;
    if (n < 0) return Status::kIoError;  // includes a timeout (EAGAIN)
    got += static_cast<size_t>(n);
  }
  return Status::kOk;
}

Result<size_t> RecvSome(int sock, std::span<uint8_t> buf, ReceivedFds* fds) {
  if (buf.empty()) return size_t{0};
  for (;;) {
    ssize_t n = RecvOnce(sock, buf, fds, MSG_DONTWAIT);
    if (n == -1 && errno == EINTR) continue;
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) return size_t{0};
    if (n < 0) return Status::kIoError;
    return static_cast<size_t>(n);
  }
}

Status SetSocketTimeouts(int sock, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return Status::kIoError;
  }
  return Status::kOk;
}

}  // namespace vrdma::vhost
