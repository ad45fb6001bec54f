// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/vhost_user/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "vhost-rdma/vhost_user/message_validation.h"

namespace vrdma::vhost {
namespace {

// The 8-bit queue index of SET_VRING_KICK/CALL/ERR caps the queue count.
constexpr uint32_t kMaxQueues = 256;

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

template <typename T>
T Load(const uint8_t* payload) {
  T v;
  std::memcpy(&v, payload, sizeof(T));
  return v;
}

}  // namespace

Connection::Connection(int sock, VhostUserDevice* device, const ConnectionOptions& options)
    : sock_(sock),
      device_(device),
      options_(options),
      num_queues_(std::min(device->num_queues(), kMaxQueues)) {
  queues_.reserve(num_queues_);
  for (uint32_t i = 0; i < num_queues_; ++i) queues_.push_back(std::make_unique<Queue>());
  // Reads and replies never block (MSG_DONTWAIT); the send buffer is the
  // bound of unread output. Best effort: the default buffer is a bound too.
  (void)setsockopt(sock_, SOL_SOCKET, SO_SNDBUF, &kMaxOutputBytes, sizeof(kMaxOutputBytes));
}

Connection::~Connection() { Shutdown(); }

uint64_t Connection::offered_features() const {
  return device_->device_features() | kFVersion1 | kFProtocolFeatures | kFRingEventIdx |
         kFRingIndirectDesc;
}

bool Connection::queue_started(uint32_t index) const {
  return index < num_queues_ && queues_[index]->started;
}

void Connection::Shutdown() {
  if (sock_ < 0) return;
  rx_.fds.CloseAll();
  ResetQueues();
  device_->Reset();
  // The device keeps its table across Reset (a driver reset keeps the
  // connection and its table); a gone frontend takes it along, so no
  // reference outlives the connection and guest RAM is unmapped now.
  device_->SetMemory(nullptr);
  memory_.reset();
  close(sock_);
  sock_ = -1;
}

void Connection::StopQueue(uint32_t i) {
  Queue& q = *queues_[i];
  if (q.started) device_->StopQueue(i);
  q.started = false;
}

void Connection::ResetQueues() {
  for (uint32_t i = 0; i < num_queues_; ++i) StopQueue(i);
  for (auto& q : queues_) {
    CloseFd(q->vq.kick_fd);
    CloseFd(q->vq.call_fd);
    CloseFd(q->vq.err_fd);
    q = std::make_unique<Queue>();
  }
}

Status Connection::Receive(bool* complete) {
  *complete = false;
  auto* hdr = reinterpret_cast<uint8_t*>(&rx_.hdr);
  if (rx_.hdr_got < sizeof(rx_.hdr)) {
    auto n = RecvSome(sock_, {hdr + rx_.hdr_got, sizeof(rx_.hdr) - rx_.hdr_got}, &rx_.fds);
    if (!n.ok()) return n.status();
    rx_.hdr_got += *n;
    if (rx_.hdr_got < sizeof(rx_.hdr)) return Status::kOk;
    // Framing first: never read a payload whose size the table does not
    // allow.
    VRDMA_RETURN_IF_ERROR(CheckHeader(rx_.hdr));
  }
  if (rx_.payload_got < rx_.hdr.size) {
    auto n = RecvSome(sock_, {rx_.payload + rx_.payload_got, rx_.hdr.size - rx_.payload_got},
                      &rx_.fds);
    if (!n.ok()) return n.status();
    rx_.payload_got += *n;
    if (rx_.payload_got < rx_.hdr.size) return Status::kOk;
  }
  *complete = true;
  return Status::kOk;
}

Status Connection::HandleMessage() {
  if (sock_ < 0) return Status::kBadState;
  // A call fd that would have blocked the daemon (eventfd_io.h): only a
  // frontend that made it blocking again and filled it gets there.
  for (uint32_t i = 0; i < num_queues_; ++i) {
    if (queues_[i]->vq.call_stalled()) {
      Shutdown();
      return Status::kIoError;
    }
  }
  bool complete = false;
  Status st = Receive(&complete);
  if (st == Status::kOk && complete) {
    const VhostUserHeader hdr = rx_.hdr;
    st = CheckFdCount(hdr, rx_.fds.size());
    Status outcome = st;
    if (st == Status::kOk) {
      outcome = st = Dispatch(hdr, rx_.payload, rx_.fds);
      // kAccess: a refused but well-formed request (SET_CONFIG on a
      // read-only config, an unsealed memory table). Nack it and keep going.
      const bool refused = st == Status::kAccess;
      if (WantsAck(hdr, protocol_features_)) {
        Status ack = ReplyU64(hdr.request, st == Status::kOk ? 0 : 1);
        if (st == Status::kOk || refused) st = ack;
      } else if (refused) {
        st = Status::kOk;
      }
    }
    // The trace sees why a refused request was refused, also when the
    // connection goes on.
    if (trace_) trace_(hdr, st == Status::kOk ? outcome : st);
    // Ready for the next message; fds no handler took are closed.
    rx_.fds.CloseAll();
    std::memset(rx_.payload, 0, rx_.payload_got);
    rx_.hdr_got = 0;
    rx_.payload_got = 0;
  } else if (st != Status::kOk && rx_.hdr_got == sizeof(rx_.hdr) && trace_) {
    trace_(rx_.hdr, st);  // framing failure (bad header, EOF mid-payload)
  }
  if (st != Status::kOk) Shutdown();
  return st;
}

Status Connection::Reply(uint32_t request, const void* payload, uint32_t size) {
  VhostUserHeader hdr{request, kVhostUserVersion | kReplyMask, size};
  // A reply that does not fit: the frontend stopped reading (kNoResource);
  // the connection ends.
  return SendMessageNoWait(sock_, hdr, {static_cast<const uint8_t*>(payload), size});
}

Status Connection::ReplyU64(uint32_t request, uint64_t value) {
  return Reply(request, &value, sizeof(value));
}

Status Connection::Dispatch(const VhostUserHeader& hdr, const uint8_t* p, ReceivedFds& fds) {
  const auto request = static_cast<Request>(hdr.request);
  switch (request) {
    case Request::kGetFeatures:
      return ReplyU64(hdr.request, offered_features());
    case Request::kSetFeatures:
      return SetFeatures(Load<uint64_t>(p));
    case Request::kSetOwner:
      owner_ = true;
      return Status::kOk;
    case Request::kResetOwner:
      // Deprecated; QEMU sends it as "reset the device" when RESET_DEVICE
      // was not negotiated. Keep the memory table, drop everything else.
      ResetQueues();
      device_->Reset();
      acked_features_ = 0;
      status_ = 0;
      return Status::kOk;
    case Request::kGetProtocolFeatures:
      return ReplyU64(hdr.request, kProtocolFeatures);
    case Request::kSetProtocolFeatures: {
      const uint64_t v = Load<uint64_t>(p);
      if (v & ~kProtocolFeatures) return Status::kInvalid;
      protocol_features_ = v;
      return Status::kOk;
    }
    case Request::kGetQueueNum:
      return ReplyU64(hdr.request, num_queues_);
    case Request::kSetMemTable:
      return SetMemTable(p, hdr.size, fds);
    case Request::kSetVringNum: {
      const auto s = Load<VhostUserVringState>(p);
      VRDMA_RETURN_IF_ERROR(CheckVringState(s, num_queues_, device_->max_queue_size()));
      Queue& q = *queues_[s.index];
      if (q.started || q.configured) return Status::kBadState;
      q.num = static_cast<uint16_t>(s.num);
      q.has_num = true;
      return Status::kOk;
    }
    case Request::kSetVringBase: {
      const auto s = Load<VhostUserVringState>(p);
      VRDMA_RETURN_IF_ERROR(CheckVringBase(s, num_queues_));
      Queue& q = *queues_[s.index];
      if (q.started || q.configured) return Status::kBadState;
      q.base = static_cast<uint16_t>(s.num);
      return Status::kOk;
    }
    case Request::kSetVringAddr: {
      const auto a = Load<VhostUserVringAddr>(p);
      VRDMA_RETURN_IF_ERROR(CheckVringAddr(a, num_queues_));
      Queue& q = *queues_[a.index];
      if (q.started || q.configured) return Status::kBadState;
      q.addrs = VringAddrs{a.desc_user_addr, a.avail_user_addr, a.used_user_addr,
                           a.log_guest_addr, a.flags};
      q.has_addr = true;
      return MaybeStart(a.index);
    }
    case Request::kGetVringBase:
      return GetVringBase(Load<VhostUserVringState>(p));
    case Request::kSetVringKick:
    case Request::kSetVringCall:
    case Request::kSetVringErr:
      return SetVringFd(request, Load<uint64_t>(p), fds);
    case Request::kSetVringEnable: {
      const auto s = Load<VhostUserVringState>(p);
      // Only defined once PROTOCOL_FEATURES is negotiated (vhost-user.rst,
      // "Ring states").
      if (!protocol_features_acked()) return Status::kBadState;
      VRDMA_RETURN_IF_ERROR(CheckVringEnable(s, num_queues_));
      Queue& q = *queues_[s.index];
      q.enabled = s.num == 1;
      if (!q.enabled) {
        StopQueue(s.index);
        return Status::kOk;
      }
      return MaybeStart(s.index);
    }
    case Request::kGetConfig:
      return GetConfig(p, hdr.size);
    case Request::kSetConfig: {
      VRDMA_RETURN_IF_ERROR(CheckConfig(Load<VhostUserConfig>(p), hdr.size));
      return Status::kAccess;  // the config space is read-only
    }
    case Request::kSetStatus: {
      const uint64_t v = Load<uint64_t>(p);
      if (v > 0xff) return Status::kInvalid;
      status_ = static_cast<uint8_t>(v);
      device_->SetStatus(status_);
      return Status::kOk;
    }
    case Request::kGetStatus:
      return ReplyU64(hdr.request, status_);
    default:
      return Status::kUnsupported;  // not reachable: the table rejected it
  }
}

Status Connection::SetFeatures(uint64_t v) {
  if (v & ~offered_features()) return Status::kInvalid;
  // Changing ring features under running queues would change the ring
  // layout the data path uses.
  for (const auto& q : queues_) {
    if (q->started && ((v ^ acked_features_) & (kFRingEventIdx | kFRingIndirectDesc))) {
      return Status::kBadState;
    }
  }
  acked_features_ = v;
  return device_->SetFeatures(v);
}

Status Connection::SetMemTable(const uint8_t* payload, uint32_t size, ReceivedFds& fds) {
  VhostUserMemory m{};
  std::memcpy(&m, payload, std::min<size_t>(size, sizeof(m)));
  VRDMA_RETURN_IF_ERROR(CheckMemory(m, size));
  if (size != MemTablePayloadSize(m.nregions) || fds.size() != m.nregions) {
    return Status::kInvalid;
  }
  std::vector<GuestRegionSpec> specs;
  specs.reserve(m.nregions);
  for (uint32_t i = 0; i < m.nregions; ++i) {
    const auto& r = m.regions[i];
    specs.push_back({r.guest_phys_addr, r.memory_size, r.userspace_addr, r.mmap_offset,
                     fds.Take(i)});
  }
  auto mem = GuestMemory::Map(std::move(specs), options_.memory);
  if (!mem.ok()) return mem.status();

  // Swap the table whole. Running queues are paused across the swap so the
  // data path never sees a ring pointer into the old mapping after we drop
  // it; the device swaps its own reference in SetMemory.
  std::vector<uint32_t> running;
  for (uint32_t i = 0; i < num_queues_; ++i) {
    if (queues_[i]->started) {
      StopQueue(i);
      running.push_back(i);
    }
  }
  memory_ = std::move(mem.value());
  for (uint32_t i = 0; i < num_queues_; ++i) {
    Queue& q = *queues_[i];
    if (q.configured) VRDMA_RETURN_IF_ERROR(q.vq.Remap(memory_));
  }
  device_->SetMemory(memory_);
  for (uint32_t i : running) VRDMA_RETURN_IF_ERROR(MaybeStart(i));
  return Status::kOk;
}

template <typename F>
Status Connection::WithQueuePaused(uint32_t i, F change) {
  const bool was_started = queues_[i]->started;
  StopQueue(i);
  change(*queues_[i]);
  return was_started ? MaybeStart(i) : Status::kOk;
}

Status Connection::SetVringFd(Request request, uint64_t v, ReceivedFds& fds) {
  VRDMA_RETURN_IF_ERROR(CheckVringFdPayload(v, num_queues_));
  const bool nofd = v & kVringNoFdMask;
  if (fds.size() != (nofd ? 0u : 1u)) return Status::kInvalid;
  const uint32_t i = static_cast<uint32_t>(v & kVringIdxMask);
  int fd = nofd ? -1 : fds.Take(0);
  // Only a non-blocking eventfd is ever read or written by this process.
  if (fd >= 0) {
    if (Status st = CheckEventFd(fd); st != Status::kOk) {
      CloseFd(fd);
      return st;
    }
  }
  if (request == Request::kSetVringKick) {
    // A new kick fd (re)starts the ring (vhost-user.rst, "Ring states").
    VRDMA_RETURN_IF_ERROR(WithQueuePaused(i, [fd](Queue& q) {
      CloseFd(q.vq.kick_fd);
      q.vq.kick_fd = fd;
      q.has_kick = true;
    }));
    return MaybeStart(i);
  }
  // CALL may change under a running queue (QEMU masks interrupts this way):
  // pause the queue so the data path never writes to a closed fd.
  return WithQueuePaused(i, [request, fd](Queue& q) {
    int& slot = request == Request::kSetVringCall ? q.vq.call_fd : q.vq.err_fd;
    CloseFd(slot);
    slot = fd;
  });
}

Status Connection::GetVringBase(const VhostUserVringState& s) {
  VRDMA_RETURN_IF_ERROR(CheckVringIndex(s.index, num_queues_));
  Queue& q = *queues_[s.index];
  // The ring stops here: the device lets go of it before we answer, and it
  // only starts again after a new SET_VRING_KICK.
  StopQueue(s.index);
  if (q.configured) q.base = q.vq.last_avail_idx();
  q.configured = false;
  q.has_kick = false;
  CloseFd(q.vq.kick_fd);
  VhostUserVringState reply{s.index, q.base};
  return Reply(static_cast<uint32_t>(Request::kGetVringBase), &reply, sizeof(reply));
}

Status Connection::GetConfig(const uint8_t* payload, uint32_t size) {
  VhostUserConfig c{};
  std::memcpy(&c, payload, std::min<size_t>(size, sizeof(c)));
  VRDMA_RETURN_IF_ERROR(CheckConfig(c, size));
  // QEMU expects exactly the slice it asked for; bytes past the device's
  // config space read as zero.
  std::span<const uint8_t> cfg = device_->config();
  std::memset(c.payload, 0, sizeof(c.payload));
  for (uint32_t k = 0; k < c.size; ++k) {
    const uint32_t at = c.offset + k;
    if (at < cfg.size()) c.payload[k] = cfg[at];
  }
  return Reply(static_cast<uint32_t>(Request::kGetConfig), &c, ConfigPayloadSize(c.size));
}

Status Connection::MaybeStart(uint32_t i) {
  Queue& q = *queues_[i];
  // Without PROTOCOL_FEATURES a ring is enabled as soon as it starts.
  const bool enabled = protocol_features_acked() ? q.enabled : true;
  if (q.started || !enabled || !q.has_num || !q.has_addr || !q.has_kick || !memory_) {
    return Status::kOk;
  }
  if (!q.configured) {
    VRDMA_RETURN_IF_ERROR(q.vq.Setup(memory_, q.num, q.addrs, q.base,
                                     (acked_features_ & kFRingEventIdx) != 0));
    q.configured = true;
  }
  VRDMA_RETURN_IF_ERROR(device_->StartQueue(i, q.vq));
  q.started = true;
  return Status::kOk;
}

}  // namespace vrdma::vhost
