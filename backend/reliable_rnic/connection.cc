// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Connection (connection.h): one framed virtual QP's lower objects and
// its CONNECT state.
#include "backend/reliable_rnic/connection.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace vrdma::reliable {
namespace {

// One header slot per send the data QP may have posted (at most
// chunks_in_flight), rounded up to a power of two: a slot is a mask.
uint32_t HeaderSlots(const ConnectionParams& p) {
  return std::bit_ceil(std::max<uint32_t>(p.sender.chunks_in_flight, 1));
}

}  // namespace

uint64_t FramedQpHostBytes(const QpCaps& caps, const ConnectionParams& p,
                           const Rnic& lower) {
  const uint32_t chunks = p.sender.chunks_in_flight;
  const uint64_t region = uint64_t{p.bounce} * kBounceBytes +
                          uint64_t{HeaderSlots(p)} * kHeaderSize +
                          uint64_t{caps.max_send_wr} * caps.max_inline_data;
  const QpCaps data{chunks, p.bounce,
                    std::min<uint32_t>(caps.max_send_sge + 1, kMaxSge), 1, 0,
                    QpType::kUc};
  return sizeof(Connection) + Sender::HostBytes(p.sender, caps.max_send_wr) +
         RecvQueue::HostBytes(caps.max_recv_wr, caps.max_recv_sge) +
         sizeof(Receiver) + region + lower.QpHostBytes(data) +
         lower.CqHostBytes(chunks + p.bounce);
}

Connection::Connection(Rnic& lower, const ConnectionInit& init,
                       const ConnectionParams& params,
                       ReliabilityCounters* counters, const MrTable* mrs,
                       AckChannel* acks, ActiveSet* active)
    : lower_(lower),
      counters_(counters),
      acks_(acks),
      active_(active),
      init_(init),
      mrs_(mrs),
      params_(params) {}

Connection::~Connection() { Close(); }

uint8_t* Connection::header_slot(uint64_t post_seq) {
  return region_.get() + header_off_ +
         (post_seq & (header_slots_ - 1)) * kHeaderSize;
}

uint8_t* Connection::bounce(uint32_t index) {
  return region_.get() + uint64_t{index} * kBounceBytes;
}

Status Connection::Open() {
  header_slots_ = HeaderSlots(params_);
  header_off_ = uint64_t{params_.bounce} * kBounceBytes;
  inline_off_ = header_off_ + uint64_t{header_slots_} * kHeaderSize;
  region_bytes_ = inline_off_ + uint64_t{init_.sq_depth} * init_.max_inline;
  region_ = std::make_unique<uint8_t[]>(region_bytes_);
  Result<RnicMr> mr =
      lower_.RegMr(init_.pd, region_.get(), region_bytes_,
                   reinterpret_cast<uint64_t>(region_.get()), kAccessLocalWrite);
  if (!mr.ok()) return mr.status();
  region_mr_ = *mr;
  QpInit qi;
  qi.type = QpType::kUc;
  qi.pd = init_.pd;
  qi.send_cq = init_.transport_cq;
  qi.recv_cq = init_.transport_cq;
  qi.caps = QpCaps{params_.sender.chunks_in_flight, params_.bounce,
                   std::min<uint32_t>(init_.max_send_sge + 1, kMaxSge), 1, 0,
                   QpType::kUc};
  Result<RnicQp> qp = lower_.CreateQp(qi);
  if (!qp.ok()) {
    (void)lower_.DeregMr(region_mr_);
    region_mr_ = {};
    return qp.status();
  }
  data_qp_ = *qp;
  QpAttr a;
  a.state = QpState::kInit;
  // The guest QP's access flags: a chunk passes the lower's checks as a
  // native WRITE to the guest QP would.
  a.access_flags = init_.attr.access_flags;
  const Status st = lower_.ModifyQp(
      data_qp_, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
  if (st != Status::kOk) {
    Close();
    return st;
  }
  SenderParams sp = params_.sender;
  sp.max_xmits = std::min(sp.max_xmits, params_.bounce);
  sender_ = std::make_unique<Sender>(*this, sp, init_.sq_depth, init_.max_inline,
                                     region_.get() + inline_off_,
                                     region_mr_.lkey);
  receiver_ = std::make_unique<Receiver>(*this, params_.receiver,
                                         init_.attr.path_mtu_bytes);
  return Status::kOk;
}

Status Connection::OnPeerConnect(uint32_t peer_data_qpn, uint32_t peer_data_psn,
                                 uint32_t peer_token, uint8_t peer_rnr_retry,
                                 uint64_t peer_retry_budget_ns) {
  Wake();
  if (state_ == ConnState::kUc) {
    return peer_token == peer_token_ ? Status::kOk : Status::kBusy;
  }
  if (state_ != ConnState::kConnecting) return Status::kBadState;
  QpAttr a;
  a.state = QpState::kRtr;
  a.av = init_.attr.av;
  a.path_mtu_bytes = init_.attr.path_mtu_bytes;
  a.dest_qpn = peer_data_qpn;
  a.rq_psn = peer_data_psn;
  Status st = lower_.ModifyQp(
      data_qp_, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn);
  if (st == Status::kOk) {
    a.state = QpState::kRts;
    a.sq_psn = data_psn();
    st = lower_.ModifyQp(data_qp_, a, kQpState | kQpSqPsn);
  }
  if (st != Status::kOk) {
    state_ = ConnState::kFailed;
    return st;
  }
  for (uint32_t i = 0; i < params_.bounce; ++i) RepostBounce(i);
  peer_token_ = peer_token;
  peer_data_qpn_ = peer_data_qpn;
  sender_->Start(0, 0);
  receiver_->Start(0, peer_rnr_retry, peer_retry_budget_ns);
  receiver_->credits = params_.bounce;
  state_ = ConnState::kUc;
  return Status::kOk;
}

void Connection::Quiesce() {
  if (data_qp_.qpn == 0) return;
  QpAttr a;
  a.state = QpState::kErr;
  (void)lower_.ModifyQp(data_qp_, a, kQpState);
}

void Connection::Close() {
  if (data_qp_.qpn != 0) (void)lower_.DestroyQp(data_qp_);
  data_qp_ = {};
  if (region_mr_.lkey != 0 || region_mr_.id != 0) (void)lower_.DeregMr(region_mr_);
  region_mr_ = {};
}

void Connection::MovePath() {
  if (state_ != ConnState::kUc) return;
  ++path_;
  QpAttr a;
  a.state = QpState::kSqd;
  if (lower_.ModifyQp(data_qp_, a, kQpState) != Status::kOk) return;
  a.av = init_.attr.av;
  // Odd offsets: the rc backup of the same guest QP takes label + 1 once.
  a.av.flow_label = (init_.attr.av.flow_label + 2 * path_ + 1) & 0xfffff;
  (void)lower_.ModifyQp(data_qp_, a, kQpState | kQpAv);
  a.state = QpState::kRts;
  if (lower_.ModifyQp(data_qp_, a, kQpState) == Status::kOk) {
    ++counters_->uc_path_moves;
  }
}

void Connection::EnterError() {
  QpAttr a;
  a.state = QpState::kErr;
  (void)lower_.ModifyQp(init_.vqp, a, kQpState);
}

void Connection::RepostBounce(uint32_t index) {
  RecvWr& r = bounce_wr_;
  r.wr_id = DataWrId(init_.slot, WrKind::kBounce, index);
  r.num_sge = 1;
  r.sge[0] = Sge{reinterpret_cast<uint64_t>(bounce(index)), kBounceBytes,
                 region_mr_.lkey};
  Status st = Status::kOk;
  (void)lower_.PostRecv(data_qp_, std::span(&r, 1), &st);
}

bool Connection::PostData(const SendWr& wr) {
  Status st = Status::kOk;
  return lower_.PostSend(data_qp_, std::span(&wr, 1), &st) == 1;
}

bool Connection::PostLowerRc(const SendWr& wr) {
  Status st = Status::kOk;
  return lower_.PostSend(init_.vqp, std::span(&wr, 1), &st) == 1;
}

void Connection::OnTransportCompletion(const Completion& c, uint64_t now_ns) {
  switch (DataWrKind(c.wr_id)) {
    case WrKind::kChunk:
    case WrKind::kRetx:
      if (sender_) sender_->OnSendCompletion(c);  // wakes if it must
      return;
    case WrKind::kBounce: {
      WakeReceiver();
      const uint32_t index = DataWrIndex(c.wr_id);
      if (index >= params_.bounce || !receiver_) return;
      if (c.status != WcStatus::kSuccess) {
        // The lower's length or protection check; the flushes that follow
        // when it took the data QP to ERR are not counted again.
        if (c.status != WcStatus::kWrFlushErr) {
          counters_->Count(WireCounter::kRxLowerError);
          RepostBounce(index);
          ++receiver_->credits;
        }
        return;
      }
      if (c.opcode == WcOpcode::kRecvRdmaWithImm) {
        receiver_->OnChunk(c.imm_data, c.byte_len, now_ns);
      } else if (receiver_->OnSend(
                     std::span<const uint8_t>(
                         bounce(index),
                         std::min<uint32_t>(c.byte_len, kBounceBytes)),
                     index, now_ns)) {
        return;  // kept until its guest receive is posted
      }
      RepostBounce(index);
      ++receiver_->credits;
      return;
    }
  }
}

template <typename Half>
void Connection::PumpHalf(Half& half, uint64_t* due, uint64_t now_ns, bool all,
                          SweepTally* check) {
  const uint64_t was = *due;
  if (was <= now_ns) check = nullptr;  // due: no question
  if (!all && was > now_ns) return;  // (a check comes with all)
  ReliabilityCounters before;
  if (check != nullptr) before = *counters_;
  // A wake during its own pump makes it due at the next turn.
  *due = UINT64_MAX;
  const uint64_t d = half.Pump(now_ns);
  *due = std::min(*due, d);
  if (check == nullptr) return;
  if (was == UINT64_MAX) {
    if (d != UINT64_MAX) ++check->missed_wakes;
  } else if (std::memcmp(&before, counters_, sizeof before) != 0) {
    ++check->missed_deadlines;
  }
}

uint64_t Connection::Pump(uint64_t now_ns, SweepTally* sweep) {
  if (state_ != ConnState::kUc) {
    // Connecting, or the data QP could not be connected: held WRs wait
    // within their retry budget, checked every turn.
    if (state_ == ConnState::kNative || !sender_ || sender_->outstanding() == 0) {
      return UINT64_MAX;
    }
    sender_->CheckHeld(now_ns);
    return sender_->outstanding() > 0 ? 0 : UINT64_MAX;
  }
  const bool all = sweep != nullptr || active_ == nullptr;
  if (sweep != nullptr) sender_->CheckNow();
  // Only a half whose other half was due is checked here; the set checks
  // a connection that was idle or asleep as a whole (ActiveSet::Turn).
  SweepTally* check =
      sweep != nullptr && (rx_due_ <= now_ns || tx_due_ <= now_ns) ? sweep
                                                                    : nullptr;
  // The receiver first: a READ it delivers is the sender's to answer
  // (ServeRead wakes the sender).
  PumpHalf(*receiver_, &rx_due_, now_ns, all, check);
  PumpHalf(*sender_, &tx_due_, now_ns, all, check);
  return std::min(rx_due_, tx_due_);
}

}  // namespace vrdma::reliable
