// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/frontend.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "vhost-rdma/vhost_user/socket_io.h"

namespace vrdma::vhost {
namespace {

constexpr uint64_t kPage = 4096;
constexpr int kReplyTimeoutMs = 5000;
constexpr uint64_t kWantedProtocol = (1ull << kProtoMq) | (1ull << kProtoReplyAck) |
                                     (1ull << kProtoConfig) | (1ull << kProtoStatus);

constexpr uint32_t Code(vhost::Request r) { return static_cast<uint32_t>(r); }

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

template <typename T>
std::span<const uint8_t> Bytes(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof(T)};
}

}  // namespace

uint64_t VringAvailOffset(uint16_t size) { return 16ull * size; }
uint64_t VringUsedOffset(uint16_t size) {
  return AlignUp(VringAvailOffset(size) + 6 + 2ull * size, kPage);
}
uint64_t VringBytes(uint16_t size) { return VringUsedOffset(size) + 6 + 8ull * size; }

Result<std::unique_ptr<VhostUserFrontend>> VhostUserFrontend::Connect(
    const std::string& socket_path, uint64_t guest_ram_bytes) {
  if (guest_ram_bytes == 0 || guest_ram_bytes > (1ull << 40)) return Status::kInvalid;
  std::unique_ptr<VhostUserFrontend> fe(new VhostUserFrontend());
  fe->ram_size_ = AlignUp(guest_ram_bytes, kPage);
  // Sealable, as QEMU's memory-backend-memfd: the backend refuses guest RAM
  // that could shrink under its mapping and adds F_SEAL_SHRINK itself.
  fe->memfd_ = memfd_create("vrdma-guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fe->memfd_ < 0 || ftruncate(fe->memfd_, static_cast<off_t>(fe->ram_size_)) != 0) {
    return Status::kIoError;
  }
  void* p = mmap(nullptr, fe->ram_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fe->memfd_, 0);
  if (p == MAP_FAILED) return Status::kIoError;
  fe->ram_ = static_cast<uint8_t*>(p);

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) return Status::kInvalid;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  fe->sock_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fe->sock_ < 0) return Status::kIoError;
  if (connect(fe->sock_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::kIoError;
  }
  VRDMA_RETURN_IF_ERROR(SetSocketTimeouts(fe->sock_, kReplyTimeoutMs));
  return fe;
}

VhostUserFrontend::~VhostUserFrontend() {
  Disconnect();
  for (auto& q : queues_) {
    if (q.kick >= 0) close(q.kick);
    if (q.call >= 0) close(q.call);
  }
  if (ram_ != nullptr) munmap(ram_, ram_size_);
  if (memfd_ >= 0) close(memfd_);
}

void VhostUserFrontend::Disconnect() {
  if (sock_ >= 0) close(sock_);
  sock_ = -1;
}

uint8_t* VhostUserFrontend::GpaToHost(uint64_t gpa, uint64_t len) const {
  if (gpa > ram_size_ || len > ram_size_ - gpa) return nullptr;
  return ram_ + gpa;
}

Result<uint64_t> VhostUserFrontend::AllocGpa(uint64_t bytes, uint64_t align) {
  if (align == 0 || (align & (align - 1)) != 0) return Status::kInvalid;
  const uint64_t at = AlignUp(next_gpa_, align);
  if (at > ram_size_ || bytes > ram_size_ - at) return Status::kNoResource;
  next_gpa_ = at + bytes;
  return at;
}

Status VhostUserFrontend::SendRaw(uint32_t request, uint32_t flags,
                                  std::span<const uint8_t> payload, std::span<const int> fds) {
  if (sock_ < 0) return Status::kBadState;
  VhostUserHeader hdr{request, flags, static_cast<uint32_t>(payload.size())};
  return SendMessage(sock_, hdr, payload, fds);
}

Result<std::vector<uint8_t>> VhostUserFrontend::ReceiveReply(uint32_t expected_request) {
  if (sock_ < 0) return Status::kBadState;
  VhostUserHeader hdr{};
  VRDMA_RETURN_IF_ERROR(RecvExact(sock_, {reinterpret_cast<uint8_t*>(&hdr), sizeof(hdr)}, nullptr));
  if (hdr.request != expected_request || !(hdr.flags & kReplyMask) ||
      (hdr.flags & kVersionMask) != kVhostUserVersion || hdr.size > kMaxPayloadSize) {
    return Status::kInvalid;
  }
  std::vector<uint8_t> payload(hdr.size);
  VRDMA_RETURN_IF_ERROR(RecvExact(sock_, payload, nullptr));
  return payload;
}

Status VhostUserFrontend::Request(uint32_t request, std::span<const uint8_t> payload,
                                  std::span<const int> fds) {
  const bool ack = protocol_features_ & (1ull << kProtoReplyAck);
  VRDMA_RETURN_IF_ERROR(
      SendRaw(request, kVhostUserVersion | (ack ? kNeedReplyMask : 0), payload, fds));
  if (!ack) return Status::kOk;
  auto reply = ReceiveReply(request);
  if (!reply.ok()) return reply.status();
  uint64_t v = 1;
  if (reply->size() != sizeof(v)) return Status::kInvalid;
  std::memcpy(&v, reply->data(), sizeof(v));
  return v == 0 ? Status::kOk : Status::kIoError;
}

Result<uint64_t> VhostUserFrontend::GetU64(uint32_t request) {
  VRDMA_RETURN_IF_ERROR(SendRaw(request, kVhostUserVersion, {}));
  auto reply = ReceiveReply(request);
  if (!reply.ok()) return reply.status();
  uint64_t v;
  if (reply->size() != sizeof(v)) return Status::kInvalid;
  std::memcpy(&v, reply->data(), sizeof(v));
  return v;
}

Status VhostUserFrontend::Negotiate(uint64_t wanted_device_features) {
  auto offered = GetU64(Code(vhost::Request::kGetFeatures));
  if (!offered.ok()) return offered.status();
  offered_features_ = *offered;
  const uint64_t want = wanted_device_features | kFVersion1 | kFProtocolFeatures |
                        kFRingEventIdx | kFRingIndirectDesc;
  if (offered_features_ & kFProtocolFeatures) {
    auto proto = GetU64(Code(vhost::Request::kGetProtocolFeatures));
    if (!proto.ok()) return proto.status();
    const uint64_t p = *proto & kWantedProtocol;
    // Sent before protocol_features_ is set: no ack expected for this one.
    VRDMA_RETURN_IF_ERROR(Request(Code(vhost::Request::kSetProtocolFeatures),
                                  std::span<const uint8_t>(Bytes(p))));
    protocol_features_ = p;
  }
  VRDMA_RETURN_IF_ERROR(Request(Code(vhost::Request::kSetOwner), {}));
  acked_features_ = offered_features_ & want;
  VRDMA_RETURN_IF_ERROR(Request(Code(vhost::Request::kSetFeatures),
                                Bytes(acked_features_)));
  auto qn = GetU64(Code(vhost::Request::kGetQueueNum));
  if (!qn.ok()) return qn.status();
  queue_num_ = static_cast<uint32_t>(*qn);
  if (queue_num_ == 0 || queue_num_ > 256) return Status::kInvalid;
  queues_.assign(queue_num_, QueueFds{});
  return SendMemTable();
}

Status VhostUserFrontend::SendMemTable() {
  VhostUserMemory m{};
  m.nregions = 1;
  m.regions[0] = {0, ram_size_, reinterpret_cast<uint64_t>(ram_), 0};
  const int fds[] = {memfd_};
  return Request(Code(vhost::Request::kSetMemTable),
                 {reinterpret_cast<const uint8_t*>(&m), MemTablePayloadSize(1)}, fds);
}

Result<std::vector<uint8_t>> VhostUserFrontend::GetConfig(uint32_t offset, uint32_t size) {
  if (size > kMaxConfigSize) return Status::kInvalid;
  VhostUserConfig c{};
  c.offset = offset;
  c.size = size;
  const uint32_t req = Code(vhost::Request::kGetConfig);
  VRDMA_RETURN_IF_ERROR(
      SendRaw(req, kVhostUserVersion, {reinterpret_cast<const uint8_t*>(&c), ConfigPayloadSize(size)}));
  auto reply = ReceiveReply(req);
  if (!reply.ok()) return reply.status();
  if (reply->size() != ConfigPayloadSize(size)) return Status::kInvalid;
  std::memcpy(&c, reply->data(), reply->size());
  if (c.size != size || c.offset != offset) return Status::kInvalid;
  return std::vector<uint8_t>(c.payload, c.payload + size);
}

Status VhostUserFrontend::SetStatus(uint8_t status) {
  const uint64_t v = status;
  return Request(Code(vhost::Request::kSetStatus), Bytes(v));
}

Result<uint8_t> VhostUserFrontend::GetStatus() {
  auto v = GetU64(Code(vhost::Request::kGetStatus));
  if (!v.ok()) return v.status();
  return static_cast<uint8_t>(*v);
}

Status VhostUserFrontend::SetupQueue(uint32_t index, uint16_t size, uint64_t desc_gpa,
                                     uint64_t avail_gpa, uint64_t used_gpa, uint16_t base) {
  if (index >= queues_.size()) return Status::kInvalid;
  uint8_t* desc = GpaToHost(desc_gpa, 16ull * size);
  uint8_t* avail = GpaToHost(avail_gpa, 6 + 2ull * size);
  uint8_t* used = GpaToHost(used_gpa, 6 + 8ull * size);
  if (desc == nullptr || avail == nullptr || used == nullptr) return Status::kFault;

  const VhostUserVringState num{index, size};
  VRDMA_RETURN_IF_ERROR(Request(Code(vhost::Request::kSetVringNum), Bytes(num)));
  const VhostUserVringState b{index, base};
  VRDMA_RETURN_IF_ERROR(Request(Code(vhost::Request::kSetVringBase), Bytes(b)));
  // Like QEMU: ring addresses are in the frontend's own address space.
  const VhostUserVringAddr addr{index, 0, reinterpret_cast<uint64_t>(desc),
                                reinterpret_cast<uint64_t>(used),
                                reinterpret_cast<uint64_t>(avail), 0};
  VRDMA_RETURN_IF_ERROR(Request(Code(vhost::Request::kSetVringAddr), Bytes(addr)));

  QueueFds& q = queues_[index];
  if (q.call < 0) q.call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (q.kick < 0) q.kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (q.call < 0 || q.kick < 0) return Status::kIoError;
  const uint64_t idx = index;
  const int call[] = {q.call};
  VRDMA_RETURN_IF_ERROR(Request(Code(vhost::Request::kSetVringCall), Bytes(idx), call));
  const int kick[] = {q.kick};
  return Request(Code(vhost::Request::kSetVringKick), Bytes(idx), kick);
}

Status VhostUserFrontend::SetupQueue(uint32_t index, uint16_t size, uint64_t ring_gpa) {
  return SetupQueue(index, size, ring_gpa, ring_gpa + VringAvailOffset(size),
                    ring_gpa + VringUsedOffset(size));
}

Status VhostUserFrontend::EnableQueue(uint32_t index, bool enable) {
  const VhostUserVringState s{index, enable ? 1u : 0u};
  return Request(Code(vhost::Request::kSetVringEnable), Bytes(s));
}

Result<uint16_t> VhostUserFrontend::GetVringBase(uint32_t index) {
  const VhostUserVringState s{index, 0};
  const uint32_t req = Code(vhost::Request::kGetVringBase);
  VRDMA_RETURN_IF_ERROR(SendRaw(req, kVhostUserVersion, Bytes(s)));
  auto reply = ReceiveReply(req);
  if (!reply.ok()) return reply.status();
  VhostUserVringState r;
  if (reply->size() != sizeof(r)) return Status::kInvalid;
  std::memcpy(&r, reply->data(), sizeof(r));
  if (r.index != index || r.num > 0xffff) return Status::kInvalid;
  return static_cast<uint16_t>(r.num);
}

int VhostUserFrontend::kick_fd(uint32_t index) const {
  return index < queues_.size() ? queues_[index].kick : -1;
}

int VhostUserFrontend::call_fd(uint32_t index) const {
  return index < queues_.size() ? queues_[index].call : -1;
}

Status VhostUserFrontend::Kick(uint32_t index) {
  const int fd = kick_fd(index);
  if (fd < 0) return Status::kBadState;
  const uint64_t one = 1;
  return write(fd, &one, sizeof(one)) == sizeof(one) ? Status::kOk : Status::kIoError;
}

Status VhostUserFrontend::WaitCall(uint32_t index, int timeout_ms) {
  const int fd = call_fd(index);
  if (fd < 0) return Status::kBadState;
  pollfd p{fd, POLLIN, 0};
  int r = poll(&p, 1, timeout_ms);
  if (r < 0) return Status::kIoError;
  if (r == 0) return Status::kBusy;
  uint64_t v;
  return read(fd, &v, sizeof(v)) == sizeof(v) ? Status::kOk : Status::kIoError;
}

}  // namespace vrdma::vhost
