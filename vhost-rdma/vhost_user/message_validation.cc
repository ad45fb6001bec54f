// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/message_validation.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>

namespace vrdma::vhost {
namespace {

constexpr uint32_t kU64 = sizeof(uint64_t);
constexpr uint32_t kState = sizeof(VhostUserVringState);

constexpr MessageRule Exact(uint32_t size, uint8_t min_fds = 0, uint8_t max_fds = 0,
                            bool reply = false) {
  return MessageRule{true, size, size, min_fds, max_fds, reply};
}

constexpr std::array<MessageRule, static_cast<size_t>(Request::kMax)> BuildTable() {
  std::array<MessageRule, static_cast<size_t>(Request::kMax)> t{};  // all unsupported
  auto at = [&t](Request r) -> MessageRule& { return t[static_cast<size_t>(r)]; };
  at(Request::kGetFeatures) = Exact(0, 0, 0, true);
  at(Request::kSetFeatures) = Exact(kU64);
  at(Request::kSetOwner) = Exact(0);
  at(Request::kResetOwner) = Exact(0);
  // 1..8 regions, one fd each (the exact match is checked with the payload).
  at(Request::kSetMemTable) = MessageRule{true, MemTablePayloadSize(1),
                                          MemTablePayloadSize(kMaxMemRegions), 1,
                                          static_cast<uint8_t>(kMaxFds), false};
  at(Request::kSetVringNum) = Exact(kState);
  at(Request::kSetVringAddr) = Exact(sizeof(VhostUserVringAddr));
  at(Request::kSetVringBase) = Exact(kState);
  at(Request::kGetVringBase) = Exact(kState, 0, 0, true);
  // An fd unless the payload has VHOST_USER_VRING_NOFD_MASK (checked later).
  at(Request::kSetVringKick) = Exact(kU64, 0, 1);
  at(Request::kSetVringCall) = Exact(kU64, 0, 1);
  at(Request::kSetVringErr) = Exact(kU64, 0, 1);
  at(Request::kGetProtocolFeatures) = Exact(0, 0, 0, true);
  at(Request::kSetProtocolFeatures) = Exact(kU64);
  at(Request::kGetQueueNum) = Exact(0, 0, 0, true);
  at(Request::kSetVringEnable) = Exact(kState);
  at(Request::kGetConfig) =
      MessageRule{true, ConfigPayloadSize(0), ConfigPayloadSize(kMaxConfigSize), 0, 0, true};
  at(Request::kSetConfig) =
      MessageRule{true, ConfigPayloadSize(0), ConfigPayloadSize(kMaxConfigSize), 0, 0, false};
  at(Request::kSetStatus) = Exact(kU64);
  at(Request::kGetStatus) = Exact(0, 0, 0, true);
  return t;
}

constexpr auto kTable = BuildTable();
constexpr MessageRule kUnsupported{};

}  // namespace

const MessageRule& RuleFor(uint32_t request) {
  if (request >= kTable.size()) return kUnsupported;
  return kTable[request];
}

Status CheckHeader(const VhostUserHeader& hdr) {
  if ((hdr.flags & kVersionMask) != kVhostUserVersion) return Status::kInvalid;
  if (hdr.flags & ~kKnownFlags) return Status::kInvalid;
  if (hdr.flags & kReplyMask) return Status::kInvalid;  // a request, not a reply
  const MessageRule& rule = RuleFor(hdr.request);
  if (!rule.supported) return Status::kUnsupported;
  if (hdr.size < rule.min_size || hdr.size > rule.max_size) return Status::kInvalid;
  return Status::kOk;
}

Status CheckFdCount(const VhostUserHeader& hdr, size_t num_fds) {
  const MessageRule& rule = RuleFor(hdr.request);
  if (num_fds < rule.min_fds || num_fds > rule.max_fds) return Status::kInvalid;
  return Status::kOk;
}

Status CheckEventFd(int fd) {
  // The kernel names every eventfd's anonymous inode this way; nothing the
  // peer controls (a file name, a socket path) can produce it.
  static constexpr char kEventFdLink[] = "anon_inode:[eventfd]";
  char path[40];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  char link[sizeof(kEventFdLink)];
  const ssize_t n = readlink(path, link, sizeof(link));
  if (n != static_cast<ssize_t>(sizeof(kEventFdLink) - 1) ||
      std::memcmp(link, kEventFdLink, sizeof(kEventFdLink) - 1) != 0) {
    return Status::kBadHandle;
  }
  // O_NONBLOCK lives in the open file description the frontend shares; it
  // creates its eventfds non-blocking too (QEMU's event notifiers do).
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return Status::kBadHandle;
  if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return Status::kIoError;
  }
  return Status::kOk;
}

bool WantsAck(const VhostUserHeader& hdr, uint64_t protocol_features) {
  return (hdr.flags & kNeedReplyMask) && (protocol_features & (1ull << kProtoReplyAck)) &&
         !RuleFor(hdr.request).has_reply;
}

}  // namespace vrdma::vhost
