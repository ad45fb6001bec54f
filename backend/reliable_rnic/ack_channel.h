// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// AckChannel: the daemon's UD ACK QP (docs/reliability.md §3.3, §3.5,
// §4.3): its receives, its sends and the ACK CQ, which the layer polls
// before anything else in Progress (B §3.4.3). One per layer, in the
// layer's own PD, sending from the daemon's GID. Made by Open (a control
// call: it allocates its buffers and creates the lower objects); Send and
// Poll are data-path calls and allocate nothing.
//
// Buffers: one registered region of `recvs` receive slots of 320 bytes
// (the 40-byte GRH and an ACK of at most 240) and `sends` send slots of
// 256 bytes. A send slot is reused once the sends before it completed
// (every send is signaled, the SQ completes in order).
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_ACK_CHANNEL_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_ACK_CHANNEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "backend/base/status.h"
#include "backend/reliable_rnic/signal_every.h"
#include "backend/reliable_rnic/wire_format.h"
#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

// Slot counts are powers of two (a slot is a mask; Open refuses others).
struct AckChannelOptions {
  uint32_t recvs = 1024;  // §8: 4096 in a daemon; tests need fewer
  uint32_t sends = 256;
  uint32_t signal_every = 16;  // SignalEvery (at most sends / 2)
  uint32_t qkey = 0x52454c31;  // "REL1"
};

// Where an ACK goes: a peer daemon's ACK QP.
struct AckAddress {
  RnicAh ah{};
  uint32_t qpn = 0;
  uint32_t qkey = 0;
};

// One ACK received: its bytes (after the GRH) and who sent it.
struct AckArrival {
  std::span<const uint8_t> bytes;
  uint32_t src_qpn = 0;
  Gid sgid{};  // from the GRH
  WcStatus status = WcStatus::kSuccess;
};

class AckChannel {
 public:
  static constexpr uint32_t kRecvSlotBytes = 320;
  static constexpr uint32_t kSendSlotBytes = 256;

  AckChannel() = default;
  ~AckChannel();
  AckChannel(const AckChannel&) = delete;
  AckChannel& operator=(const AckChannel&) = delete;

  // Control path: the ACK CQ, the UD QP (brought to RTS), the region and
  // its MR in pd, every receive posted. gid must be one the lower has.
  Status Open(Rnic& lower, RnicPd pd, const Gid& gid,
              const AckChannelOptions& options);
  // Destroys what Open made (control path).
  void Close();
  bool open() const { return lower_ != nullptr; }

  uint32_t qpn() const { return qp_.qpn; }
  uint32_t cq_id() const { return cq_.id; }
  uint32_t qkey() const { return options_.qkey; }
  const Gid& gid() const { return gid_; }

  // Posts one ACK to `to`; false when every send slot is taken or the
  // lower refused (the caller keeps its entries and tries again).
  [[nodiscard]] bool Send(const AckAddress& to, const Ack& ack);

  // Polls the ACK CQ: each received ACK goes to on_ack(const AckArrival&),
  // after which its buffer is posted again; send completions free their
  // slots. Returns the completions taken.
  template <typename F>
  int Poll(F&& on_ack);

 private:
  void Repost(uint32_t slot);
  bool HandleCompletion(const Completion& c, AckArrival* out);

  Rnic* lower_ = nullptr;
  AckChannelOptions options_;
  Gid gid_{};
  RnicCq cq_{};
  RnicQp qp_{};
  RnicMr mr_{};
  std::unique_ptr<uint8_t[]> region_;
  uint64_t sends_posted_ = 0;
  uint64_t sends_done_ = 0;
  SignalEvery signal_{1, 2};  // Open sets it
  // Poll's buffer and the WRs of Repost and Send, cleared once (1.5 KB and
  // 600 bytes that would be cleared at every call); each post sets every
  // field its opcode reads.
  std::array<Completion, 32> batch_{};
  RecvWr recv_wr_{};
  SendWr send_wr_{};
};

template <typename F>
int AckChannel::Poll(F&& on_ack) {
  if (lower_ == nullptr) return 0;
  std::span<Completion> batch = batch_;
  const int n = lower_->PollCq(cq_, batch);
  for (int i = 0; i < n; ++i) {
    AckArrival a;
    if (HandleCompletion(batch[i], &a)) {
      on_ack(a);
      Repost(static_cast<uint32_t>(batch[i].wr_id));
    }
  }
  return n > 0 ? n : 0;
}

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_ACK_CHANNEL_H_
