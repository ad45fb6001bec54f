// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vhost-user wire format (QEMU docs/interop/vhost-user.rst), shared by the
// backend (connection.cc) and the in-process frontend (frontend.cc). Every
// struct is exactly its wire layout (little-endian host assumed: x86-64).
// The *Check() helpers are the syntax stage of validation: they look only at
// the struct itself, never at device state.
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_MESSAGES_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_MESSAGES_H_

#include <cstddef>
#include <cstdint>

#include "backend/base/status.h"

namespace vrdma::vhost {

inline constexpr uint32_t kVhostUserVersion = 1;  // VHOST_USER_VERSION
inline constexpr uint32_t kVersionMask = 0x3;
inline constexpr uint32_t kReplyMask = 1u << 2;
inline constexpr uint32_t kNeedReplyMask = 1u << 3;
// Flags bits that may be set by a frontend request (version + need_reply).
inline constexpr uint32_t kKnownFlags = kVersionMask | kReplyMask | kNeedReplyMask;

// SET_VRING_KICK/CALL/ERR u64 payload.
inline constexpr uint64_t kVringIdxMask = 0xff;
inline constexpr uint64_t kVringNoFdMask = 1ull << 8;

// At most this many fds ride on one message (VHOST_MEMORY_BASELINE_NREGIONS).
inline constexpr size_t kMaxFds = 8;
inline constexpr size_t kMaxMemRegions = 8;
inline constexpr size_t kMaxConfigSize = 256;  // VHOST_USER_MAX_CONFIG_SIZE

// Virtio feature bits the protocol layer itself deals with.
inline constexpr uint64_t kFRingIndirectDesc = 1ull << 28;  // VIRTIO_RING_F_INDIRECT_DESC
inline constexpr uint64_t kFRingEventIdx = 1ull << 29;      // VIRTIO_RING_F_EVENT_IDX
inline constexpr uint64_t kFProtocolFeatures = 1ull << 30;  // VHOST_USER_F_PROTOCOL_FEATURES
inline constexpr uint64_t kFVersion1 = 1ull << 32;          // VIRTIO_F_VERSION_1

// Protocol feature bits (VHOST_USER_PROTOCOL_F_*).
enum ProtocolFeature : uint32_t {
  kProtoMq = 0,
  kProtoLogShmfd = 1,
  kProtoRarp = 2,
  kProtoReplyAck = 3,
  kProtoMtu = 4,
  kProtoBackendReq = 5,
  kProtoCrossEndian = 6,
  kProtoCryptoSession = 7,
  kProtoPagefault = 8,
  kProtoConfig = 9,
  kProtoBackendSendFd = 10,
  kProtoHostNotifier = 11,
  kProtoInflightShmfd = 12,
  kProtoResetDevice = 13,
  kProtoInbandNotifications = 14,
  kProtoConfigureMemSlots = 15,
  kProtoStatus = 16,
};

// Front-end request codes (VHOST_USER_*).
enum class Request : uint32_t {
  kNone = 0,
  kGetFeatures = 1,
  kSetFeatures = 2,
  kSetOwner = 3,
  kResetOwner = 4,
  kSetMemTable = 5,
  kSetLogBase = 6,
  kSetLogFd = 7,
  kSetVringNum = 8,
  kSetVringAddr = 9,
  kSetVringBase = 10,
  kGetVringBase = 11,
  kSetVringKick = 12,
  kSetVringCall = 13,
  kSetVringErr = 14,
  kGetProtocolFeatures = 15,
  kSetProtocolFeatures = 16,
  kGetQueueNum = 17,
  kSetVringEnable = 18,
  kSendRarp = 19,
  kNetSetMtu = 20,
  kSetBackendReqFd = 21,
  kIotlbMsg = 22,
  kSetVringEndian = 23,
  kGetConfig = 24,
  kSetConfig = 25,
  kCreateCryptoSession = 26,
  kCloseCryptoSession = 27,
  kPostcopyAdvise = 28,
  kPostcopyListen = 29,
  kPostcopyEnd = 30,
  kGetInflightFd = 31,
  kSetInflightFd = 32,
  kGpuSetSocket = 33,
  kResetDevice = 34,
  kVringKick = 35,
  kGetMaxMemSlots = 36,
  kAddMemReg = 37,
  kRemMemReg = 38,
  kSetStatus = 39,
  kGetStatus = 40,
  kMax = 41,  // one past the last known code
};

#pragma pack(push, 1)
struct VhostUserHeader {
  uint32_t request;
  uint32_t flags;
  uint32_t size;  // payload bytes that follow
};

struct VhostUserVringState {
  uint32_t index;
  uint32_t num;
};

struct VhostUserVringAddr {
  uint32_t index;
  uint32_t flags;  // bit 0: VHOST_VRING_F_LOG
  uint64_t desc_user_addr;
  uint64_t used_user_addr;
  uint64_t avail_user_addr;
  uint64_t log_guest_addr;
};

struct VhostUserMemoryRegion {
  uint64_t guest_phys_addr;
  uint64_t memory_size;
  uint64_t userspace_addr;
  uint64_t mmap_offset;
};

struct VhostUserMemory {
  uint32_t nregions;
  uint32_t padding;
  VhostUserMemoryRegion regions[kMaxMemRegions];
};

struct VhostUserConfig {
  uint32_t offset;
  uint32_t size;
  uint32_t flags;
  uint8_t payload[kMaxConfigSize];
};
#pragma pack(pop)

static_assert(sizeof(VhostUserHeader) == 12);
static_assert(sizeof(VhostUserVringState) == 8);
static_assert(sizeof(VhostUserVringAddr) == 40);
static_assert(sizeof(VhostUserMemoryRegion) == 32);
static_assert(sizeof(VhostUserMemory) == 8 + 8 * 32);
static_assert(sizeof(VhostUserConfig) == 12 + kMaxConfigSize);

// Bytes of a SET_MEM_TABLE payload carrying n regions (QEMU sends only the
// used regions: 8 + 32 * n).
constexpr uint32_t MemTablePayloadSize(uint32_t n) {
  return static_cast<uint32_t>(offsetof(VhostUserMemory, regions) +
                               n * sizeof(VhostUserMemoryRegion));
}
// Bytes of a GET/SET_CONFIG payload whose config slice is n bytes.
constexpr uint32_t ConfigPayloadSize(uint32_t n) {
  return static_cast<uint32_t>(offsetof(VhostUserConfig, payload) + n);
}

// Largest payload any supported request may carry.
inline constexpr uint32_t kMaxPayloadSize = sizeof(VhostUserConfig) > sizeof(VhostUserMemory)
                                                ? sizeof(VhostUserConfig)
                                                : sizeof(VhostUserMemory);

// --- Syntax checks (no device state beyond the limits passed in). ---

// index < num_queues.
[[nodiscard]] Status CheckVringIndex(uint32_t index, uint32_t num_queues);
// SET_VRING_NUM: index valid, 0 < num <= max_size, num a power of two.
[[nodiscard]] Status CheckVringState(const VhostUserVringState& s, uint32_t num_queues,
                                     uint32_t max_size);
// SET_VRING_BASE: index valid, num fits a 16-bit split-ring index.
[[nodiscard]] Status CheckVringBase(const VhostUserVringState& s, uint32_t num_queues);
// SET_VRING_ENABLE: index valid, num is 0 or 1.
[[nodiscard]] Status CheckVringEnable(const VhostUserVringState& s, uint32_t num_queues);
// SET_VRING_ADDR: index valid, no unknown flags, logging not requested,
// ring parts aligned (desc 16, avail 2, used 4).
[[nodiscard]] Status CheckVringAddr(const VhostUserVringAddr& a, uint32_t num_queues);
// SET_MEM_TABLE: 1 <= nregions <= 8, payload size matches nregions, every
// region non-empty and without address overflow.
[[nodiscard]] Status CheckMemory(const VhostUserMemory& m, uint32_t payload_size);
// GET/SET_CONFIG: offset + size <= 256 (overflow-checked) and the payload
// really holds `size` bytes.
[[nodiscard]] Status CheckConfig(const VhostUserConfig& c, uint32_t payload_size);
// SET_VRING_KICK/CALL/ERR u64: only index + NOFD bits, index valid.
[[nodiscard]] Status CheckVringFdPayload(uint64_t v, uint32_t num_queues);

const char* RequestName(uint32_t request);

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_MESSAGES_H_
