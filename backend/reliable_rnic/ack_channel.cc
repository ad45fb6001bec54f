// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// AckChannel (ack_channel.h): the daemon's UD ACK QP.
#include "backend/reliable_rnic/ack_channel.h"

#include <bit>
#include <cstring>

#include "backend/rnic/roce_grh.h"

namespace vrdma::reliable {
namespace {

constexpr uint64_t kSendTag = uint64_t{1} << 63;

// The source GID of a GRH as BuildRoceGrh writes it: an IPv4 header after
// 20 zero bytes between two IPv4-mapped GIDs, else an IPv6 header.
Gid GrhSource(const uint8_t* g) {
  Gid gid{};
  if (g[0] >> 4 == 6) {
    std::memcpy(gid.data(), g + 8, 16);
  } else {
    gid[10] = 0xff;
    gid[11] = 0xff;
    std::memcpy(gid.data() + 12, g + 20 + 12, 4);
  }
  return gid;
}

}  // namespace

AckChannel::~AckChannel() { Close(); }

Status AckChannel::Open(Rnic& lower, RnicPd pd, const Gid& gid,
                        const AckChannelOptions& options) {
  if (lower_ != nullptr) return Status::kBusy;
  if (!std::has_single_bit(options.recvs) || !std::has_single_bit(options.sends)) {
    return Status::kInvalid;
  }
  options_ = options;
  signal_ = SignalEvery(options.signal_every, options.sends);
  sends_posted_ = sends_done_ = 0;  // a new QP
  gid_ = gid;
  const uint64_t bytes = uint64_t{options.recvs} * kRecvSlotBytes +
                         uint64_t{options.sends} * kSendSlotBytes;
  region_ = std::make_unique<uint8_t[]>(bytes);
  Result<RnicCq> cq = lower.CreateCq(options.recvs + options.sends);
  if (!cq.ok()) return cq.status();
  cq_ = *cq;
  QpInit init;
  init.type = QpType::kUd;
  init.pd = pd;
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.caps = QpCaps{options.sends, options.recvs, 1, 1, 0, QpType::kUd};
  Result<RnicQp> qp = lower.CreateQp(init);
  if (!qp.ok()) {
    (void)lower.DestroyCq(cq_);
    return qp.status();
  }
  qp_ = *qp;
  Result<RnicMr> mr = lower.RegMr(pd, region_.get(), bytes,
                                  reinterpret_cast<uint64_t>(region_.get()),
                                  kAccessLocalWrite);
  if (!mr.ok()) {
    (void)lower.DestroyQp(qp_);
    (void)lower.DestroyCq(cq_);
    return mr.status();
  }
  mr_ = *mr;
  lower_ = &lower;
  QpAttr a;
  a.state = QpState::kInit;
  a.qkey = options.qkey;
  Status st = lower.ModifyQp(qp_, a, kQpState | kQpPkeyIndex | kQpPort | kQpQkey);
  if (st == Status::kOk) {
    a.state = QpState::kRtr;
    st = lower.ModifyQp(qp_, a, kQpState);
  }
  if (st == Status::kOk) {
    a.state = QpState::kRts;
    st = lower.ModifyQp(qp_, a, kQpState | kQpSqPsn);
  }
  if (st != Status::kOk) {
    Close();
    return st;
  }
  for (uint32_t i = 0; i < options.recvs; ++i) Repost(i);
  return Status::kOk;
}

void AckChannel::Close() {
  if (lower_ == nullptr) return;
  (void)lower_->DestroyQp(qp_);
  (void)lower_->DeregMr(mr_);
  (void)lower_->DestroyCq(cq_);
  lower_ = nullptr;
  region_.reset();
}

void AckChannel::Repost(uint32_t slot) {
  RecvWr& r = recv_wr_;
  r.wr_id = slot;
  r.num_sge = 1;
  r.sge[0] = Sge{reinterpret_cast<uint64_t>(region_.get()) +
                     uint64_t{slot} * kRecvSlotBytes,
                 kRecvSlotBytes, mr_.lkey};
  Status st = Status::kOk;
  (void)lower_->PostRecv(qp_, std::span(&r, 1), &st);
}

bool AckChannel::Send(const AckAddress& to, const Ack& ack) {
  if (lower_ == nullptr || sends_posted_ - sends_done_ >= options_.sends) {
    return false;
  }
  const uint32_t slot =
      static_cast<uint32_t>(sends_posted_ & (options_.sends - 1));
  uint8_t* buf = region_.get() + uint64_t{options_.recvs} * kRecvSlotBytes +
                 uint64_t{slot} * kSendSlotBytes;
  const size_t len = EncodeAck(ack, std::span(buf, kSendSlotBytes));
  if (len == 0) return false;
  SendWr& w = send_wr_;
  // The low 32 bits: the post's sequence (HandleCompletion).
  w.wr_id = kSendTag | static_cast<uint32_t>(sends_posted_);
  w.opcode = WrOpcode::kSend;
  w.send_flags = signal_.Flags();
  w.num_sge = 1;
  w.sge[0] = Sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(len),
                 mr_.lkey};
  w.ah = to.ah;
  w.remote_qpn = to.qpn;
  w.remote_qkey = to.qkey;
  Status st = Status::kOk;
  if (lower_->PostSend(qp_, std::span(&w, 1), &st) != 1) return false;
  ++sends_posted_;
  return true;
}

bool AckChannel::HandleCompletion(const Completion& c, AckArrival* out) {
  if (c.wr_id & kSendTag) {  // every send up to it is done (SignalEvery)
    sends_done_ += SignalEvery::Ends(sends_done_, sends_posted_,
                                     static_cast<uint32_t>(c.wr_id),
                                     UINT32_MAX);
    return false;
  }
  const uint8_t* buf =
      region_.get() + (c.wr_id & (options_.recvs - 1)) * kRecvSlotBytes;
  out->status = c.status;
  out->src_qpn = c.src_qpn;
  if (c.status != WcStatus::kSuccess || c.byte_len < kGrhBytes ||
      c.byte_len > kRecvSlotBytes) {
    out->status = c.status == WcStatus::kSuccess ? WcStatus::kLocLenErr
                                                 : c.status;
    out->bytes = {};
    return true;
  }
  out->sgid = GrhSource(buf);
  out->bytes = std::span(buf + kGrhBytes, c.byte_len - kGrhBytes);
  return true;
}

}  // namespace vrdma::reliable
