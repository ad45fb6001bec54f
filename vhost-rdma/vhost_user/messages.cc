// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/messages.h"

namespace vrdma::vhost {

Status CheckVringIndex(uint32_t index, uint32_t num_queues) {
  return index < num_queues ? Status::kOk : Status::kInvalid;
}

Status CheckVringState(const VhostUserVringState& s, uint32_t num_queues, uint32_t max_size) {
  VRDMA_RETURN_IF_ERROR(CheckVringIndex(s.index, num_queues));
  if (s.num == 0 || s.num > max_size || (s.num & (s.num - 1)) != 0) return Status::kInvalid;
  return Status::kOk;
}

Status CheckVringBase(const VhostUserVringState& s, uint32_t num_queues) {
  VRDMA_RETURN_IF_ERROR(CheckVringIndex(s.index, num_queues));
  return s.num <= 0xffff ? Status::kOk : Status::kInvalid;
}

Status CheckVringEnable(const VhostUserVringState& s, uint32_t num_queues) {
  VRDMA_RETURN_IF_ERROR(CheckVringIndex(s.index, num_queues));
  return s.num <= 1 ? Status::kOk : Status::kInvalid;
}

Status CheckVringAddr(const VhostUserVringAddr& a, uint32_t num_queues) {
  VRDMA_RETURN_IF_ERROR(CheckVringIndex(a.index, num_queues));
  constexpr uint32_t kLogFlag = 1;  // VHOST_VRING_F_LOG
  if (a.flags & ~kLogFlag) return Status::kInvalid;
  if (a.flags & kLogFlag) return Status::kUnsupported;  // LOG_ALL never offered
  if (a.desc_user_addr % 16 != 0 || a.avail_user_addr % 2 != 0 || a.used_user_addr % 4 != 0) {
    return Status::kInvalid;
  }
  return Status::kOk;
}

Status CheckMemory(const VhostUserMemory& m, uint32_t payload_size) {
  if (m.nregions == 0 || m.nregions > kMaxMemRegions) return Status::kInvalid;
  if (payload_size < MemTablePayloadSize(m.nregions)) return Status::kInvalid;
  for (uint32_t i = 0; i < m.nregions; ++i) {
    const VhostUserMemoryRegion& r = m.regions[i];
    uint64_t end;
    if (r.memory_size == 0) return Status::kInvalid;
    if (__builtin_add_overflow(r.guest_phys_addr, r.memory_size, &end) ||
        __builtin_add_overflow(r.userspace_addr, r.memory_size, &end) ||
        __builtin_add_overflow(r.mmap_offset, r.memory_size, &end)) {
      return Status::kInvalid;
    }
  }
  return Status::kOk;
}

Status CheckConfig(const VhostUserConfig& c, uint32_t payload_size) {
  uint32_t end;
  if (__builtin_add_overflow(c.offset, c.size, &end) || end > kMaxConfigSize) {
    return Status::kInvalid;
  }
  if (payload_size < ConfigPayloadSize(c.size)) return Status::kInvalid;
  return Status::kOk;
}

Status CheckVringFdPayload(uint64_t v, uint32_t num_queues) {
  if (v & ~(kVringIdxMask | kVringNoFdMask)) return Status::kInvalid;
  return CheckVringIndex(static_cast<uint32_t>(v & kVringIdxMask), num_queues);
}

const char* RequestName(uint32_t request) {
  switch (static_cast<Request>(request)) {
    case Request::kGetFeatures: return "GET_FEATURES";
    case Request::kSetFeatures: return "SET_FEATURES";
    case Request::kSetOwner: return "SET_OWNER";
    case Request::kResetOwner: return "RESET_OWNER";
    case Request::kSetMemTable: return "SET_MEM_TABLE";
    case Request::kSetLogBase: return "SET_LOG_BASE";
    case Request::kSetLogFd: return "SET_LOG_FD";
    case Request::kSetVringNum: return "SET_VRING_NUM";
    case Request::kSetVringAddr: return "SET_VRING_ADDR";
    case Request::kSetVringBase: return "SET_VRING_BASE";
    case Request::kGetVringBase: return "GET_VRING_BASE";
    case Request::kSetVringKick: return "SET_VRING_KICK";
    case Request::kSetVringCall: return "SET_VRING_CALL";
    case Request::kSetVringErr: return "SET_VRING_ERR";
    case Request::kGetProtocolFeatures: return "GET_PROTOCOL_FEATURES";
    case Request::kSetProtocolFeatures: return "SET_PROTOCOL_FEATURES";
    case Request::kGetQueueNum: return "GET_QUEUE_NUM";
    case Request::kSetVringEnable: return "SET_VRING_ENABLE";
    case Request::kGetConfig: return "GET_CONFIG";
    case Request::kSetConfig: return "SET_CONFIG";
    case Request::kResetDevice: return "RESET_DEVICE";
    case Request::kSetStatus: return "SET_STATUS";
    case Request::kGetStatus: return "GET_STATUS";
    default: return "UNKNOWN";
  }
}

}  // namespace vrdma::vhost
