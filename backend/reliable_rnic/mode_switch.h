// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ModeSwitch: the live switch of one virtual RC QP between reliability
// modes (docs/reliability.md §6 "As built"; step 17). The record and the
// guest WRs it holds; the steps themselves are the layer's
// (reliable_rnic_switch.cc), which owns the lower QPs and the peer link.
//
// A record is made by ReliableRnic::SetMode (a control call) for each
// connected RC QP of the VM, with everything the switch will need: its
// hold queue (the QP's SQ depth, each WR's inline bytes copied) and, to
// uc, the new Connection already opened (its data QP in INIT, bounce
// receives posted). Nothing is allocated once the switch runs.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_MODE_SWITCH_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_MODE_SWITCH_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "backend/base/status.h"
#include "backend/reliable_rnic/completion_ring.h"
#include "backend/reliable_rnic/connection.h"
#include "backend/reliable_rnic/rc_backup.h"
#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

// §1: (retry_cnt + 1) x 4.096 us x 2^timeout; timeout 0: never.
inline uint64_t RetryBudgetNs(const QpAttr& a) {
  if (a.timeout == 0) return 0;
  const uint32_t t = a.timeout > 31 ? 31 : a.timeout;
  return (uint64_t{a.retry_cnt} + 1) * (uint64_t{4096} << t);
}

// The guest's send WRs posted while a QP switches (§6 step 2): kept in
// post order, up to the SQ's depth, inline bytes copied (the guest's
// pointer is valid only during PostSend).
class HoldQueue {
 public:
  HoldQueue(uint32_t depth, uint32_t max_inline)
      : depth_(std::max<uint32_t>(depth, 1)),
        max_inline_(max_inline),
        wrs_(std::make_unique<SendWr[]>(depth_)),
        since_(std::make_unique<uint64_t[]>(depth_)),
        inline_(std::make_unique<uint8_t[]>(
            uint64_t{depth_} * std::max<uint32_t>(max_inline, 1))) {}

  static uint64_t HostBytes(uint32_t depth, uint32_t max_inline) {
    const uint64_t d = std::max<uint32_t>(depth, 1);
    return sizeof(HoldQueue) + d * (sizeof(SendWr) + sizeof(uint64_t)) +
           d * std::max<uint32_t>(max_inline, 1);
  }

  // Data path: keeps wrs (at now_ns); kNoResource when full, kInvalid for
  // inline data above max_inline.
  int Hold(std::span<const SendWr> wrs, Status* first_error, uint64_t now_ns) {
    int n = 0;
    for (const SendWr& wr : wrs) {
      if (tail_ - head_ == depth_) {
        if (first_error) *first_error = Status::kNoResource;
        return n;
      }
      if ((wr.send_flags & kSendInline) && wr.inline_len > max_inline_) {
        if (first_error) *first_error = Status::kInvalid;
        return n;
      }
      const uint64_t seq = tail_++;
      SendWr& w = wrs_[seq % depth_];
      w = wr;
      if (wr.send_flags & kSendInline) {
        uint8_t* dst =
            &inline_[(seq % depth_) * std::max<uint32_t>(max_inline_, 1)];
        if (wr.inline_len > 0) std::memcpy(dst, wr.inline_data, wr.inline_len);
        w.inline_data = dst;
      }
      since_[seq % depth_] = now_ns;
      ++n;
    }
    return n;
  }

  bool empty() const { return head_ == tail_; }
  uint32_t size() const { return static_cast<uint32_t>(tail_ - head_); }
  const SendWr& front() const { return wrs_[head_ % depth_]; }
  uint64_t front_since_ns() const { return since_[head_ % depth_]; }
  void pop() { ++head_; }

 private:
  const uint32_t depth_;
  const uint32_t max_inline_;
  std::unique_ptr<SendWr[]> wrs_;
  std::unique_ptr<uint64_t[]> since_;
  std::unique_ptr<uint8_t[]> inline_;
  uint64_t head_ = 0, tail_ = 0;
};

// The mode of a connected QP as the switch sees it (peer::Mode's values).
enum class QpMode : uint8_t { kNative = 0, kRc = 1, kUc = 2 };

// The peer's newest SWITCH for a QP (kept in the QP's record, so that
// one arriving before this end's SetMode needs no allocation).
struct PeerAsk {
  bool asked = false;  // not yet used by a switch
  QpMode to = QpMode::kNative;
  uint32_t token = 0;  // the newest one seen (a replay is refused)
  uint32_t data_qpn = 0, data_psn = 0;  // its new uc data QP (to uc)
  uint32_t rc_psn = 0;  // its lower RC QP's next sq_psn (from native)
};

struct ModeSwitch {
  enum class State : uint8_t {
    kIdle,      // no switch asked by this end (a peer's SWITCH may be kept)
    kAsked,     // SWITCH sent; the old path runs until the peer asks alike
    kDraining,  // both asked: posts held, this end's old sending side drains
    kDrained,   // DRAINED sent; waiting for the peer's
    kTakeBack,  // from native: the lower RC QP in ERR, its flushes eaten
    kReady,     // the new path is built, READY sent; waiting for the peer's
    kFailed,    // the peer stopped answering past the budget: the QP is in ERR
  };

  ModeSwitch(uint32_t sq_depth, uint32_t max_inline)
      : held(sq_depth, max_inline) {}

  // The guest's send posts wait in `held` (both ends agreed, or failed).
  bool holding() const {
    return state == State::kDraining || state == State::kDrained ||
           state == State::kTakeBack || state == State::kReady ||
           state == State::kFailed;
  }
  // Agreed and not ended.
  bool running() const { return holding() && state != State::kFailed; }

  State state = State::kIdle;
  // The switch's last progress (a step taken, or the old path's work left
  // shrinking while it drains) and that work then: a held WR's budget
  // counts from the later of its hold and this (§6).
  uint64_t progress_ns = 0;
  uint64_t work_left = 0;
  QpMode from = QpMode::kNative;
  QpMode to = QpMode::kNative;
  uint32_t my_token = 0;  // this end's SWITCH token (a new one per ask)
  // The ask went again, once, to a peer QP that connected after it.
  bool ask_resent = false;
  // The peer's SWITCH this switch runs with (from PeerAsk).
  uint32_t peer_token = 0;
  uint32_t peer_data_qpn = 0, peer_data_psn = 0, peer_rc_psn = 0;
  bool drained_mine = false;  // this end's old sending side is drained
  bool flushes_done = false;  // from native: the marker receive's flush seen
  bool peer_drained = false;
  uint32_t peer_next_mid = 0, peer_rcv_sent = 0;
  bool peer_ready = false;
  // From native: the marker WRITE that drains the send side and the
  // marker receive that ends the flushes (random wr_ids: a guest cannot
  // know them), whether each is posted, and the receive flushes eaten.
  uint64_t send_marker = 0, recv_marker = 0;
  bool send_marker_posted = false;
  bool recv_marker_posted = false;
  uint64_t flushes = 0;
  uint64_t flushes_expected = 0;  // when the marker receive was refused
  WcStatus fail_status = WcStatus::kSuccess;  // the first failed held WR's
  // A held WR the new path refused (FinishSwitch): the QP goes to ERR once
  // the WRs posted before it completed.
  bool err_pending = false;
  // To uc: the new connection, opened by SetMode, in the layer's table;
  // from uc: the old one, kept until a control call frees it.
  Connection* next_conn = nullptr;
  std::unique_ptr<Connection> retired;
  // To rc: the new path, opened by SetMode (its backup in INIT); from rc:
  // the old one, kept until a control call frees it.
  RcPath* next_rc = nullptr;
  std::unique_ptr<RcPath> retired_rc;
  uint8_t markers_left = 0;  // from rc: marker receives not yet flushed
  HoldQueue held;
};

// The counts of a VM's connected virtual RC QPs by mode (the daemon's
// stats: qps_native, qps_rc, qps_uc, qps_switching).
struct QpModeCounts {
  uint32_t native = 0, rc = 0, uc = 0, switching = 0;
  bool operator==(const QpModeCounts&) const = default;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_MODE_SWITCH_H_
