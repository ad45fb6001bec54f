// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Receive credits between daemons (docs/scheduler.md, "Receive credits"):
// no SEND goes where no receive waits, so a sender cannot start an RNR storm
// at a receiver that has posted nothing.
//
// The receiving daemon counts the receives its guest posted on a QP since
// RTR and advertises the count to the daemon of the QP's only sender
// (CreditAdvertiser). The sending daemon lets a receive-consuming message
// of that QP go only while the count is ahead of what it let go
// (CreditedSender), and otherwise holds it: forever where the RNIC would
// retry RNR forever (rnr_retry 7), else for as long as its retries would
// last, after which the message goes and meets RNR as natively. Counts are
// 32 bits and wrap. Pure arithmetic: no allocation, no I/O.
#ifndef VRDMA_BACKEND_SCHEDULER_RECEIVE_CREDIT_H_
#define VRDMA_BACKEND_SCHEDULER_RECEIVE_CREDIT_H_

#include <cstdint>

#include "policy/scheduler_policy.h"

namespace vrdma::sched {

// How long a held message may wait: what the sender's RNR retries would
// take natively (rnr_retry 7: forever, kNever).
inline policy::Nanos CreditHoldNs(uint8_t rnr_retry, policy::Nanos rnr_timer_ns) {
  if (rnr_retry >= 7) return policy::kNever;
  return (policy::Nanos{rnr_retry} + 1) * rnr_timer_ns;
}

// The sending side of one QP.
class CreditedSender {
 public:
  // The receiver is a daemon that advertises: from now on nothing goes
  // beyond what it advertised (none yet), held for at most hold_ns.
  void Expect(policy::Nanos hold_ns) {
    known_ = true;
    hold_ns_ = hold_ns;
  }
  // The receiver's latest count. A count behind one already seen (a
  // reordered or lying update) changes nothing.
  void Advertise(uint32_t posted) {
    if (!advertised_ || static_cast<int32_t>(posted - posted_) > 0) posted_ = posted;
    advertised_ = known_ = true;
  }
  bool known() const { return known_; }
  uint32_t advertised() const { return posted_; }
  // Whether one more receive-consuming message may go now; counts it when
  // it may. A receiver that never advertised: always (it is not a
  // vhost-rdma daemon, or the QP's receives are an SRQ's).
  bool Take(policy::Nanos now) {
    if (known_ && static_cast<int32_t>(posted_ - consumed_) <= 0) {
      if (blocked_since_ == policy::kNever) blocked_since_ = now;
      if (hold_ns_ == policy::kNever || now - blocked_since_ < hold_ns_) return false;
      ++expired_;  // as long as native retries would last: it meets RNR
    }
    ++consumed_;
    blocked_since_ = policy::kNever;
    return true;
  }
  bool blocked() const { return blocked_since_ != policy::kNever; }
  // When a held message may go whatever the credits (kNever: only a credit
  // frees it).
  policy::Nanos HoldEndsAt() const {
    if (!blocked() || hold_ns_ == policy::kNever) return policy::kNever;
    return blocked_since_ + hold_ns_;
  }
  uint64_t expired() const { return expired_; }

 private:
  bool known_ = false;       // the receiver advertises
  bool advertised_ = false;  // ... and has
  uint32_t posted_ = 0;      // as last advertised
  uint32_t consumed_ = 0;  // receive-consuming messages let go
  policy::Nanos blocked_since_ = policy::kNever;
  policy::Nanos hold_ns_ = policy::kNever;
  uint64_t expired_ = 0;   // let go when a hold ran out
};

// The receiving side of one QP: what to advertise, and when.
class CreditAdvertiser {
 public:
  // The guest posted n more receives.
  void Posted(uint32_t n) { posted_ += n; }
  // The count to send now, if any: whenever it moved since the last one.
  // The caller sends at most one per turn of its data path, so a burst of
  // reposts is one message.
  bool Due(uint32_t* posted) {
    if (sent_ && posted_ == advertised_) return false;
    sent_ = true;
    advertised_ = posted_;
    *posted = posted_;
    return true;
  }

 private:
  uint32_t posted_ = 0;
  uint32_t advertised_ = 0;
  bool sent_ = false;  // the first count (0 included) tells the sender we advertise
};

}  // namespace vrdma::sched

#endif  // VRDMA_BACKEND_SCHEDULER_RECEIVE_CREDIT_H_
