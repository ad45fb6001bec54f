// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/soft_rnic/qp_state.h"

#include <limits>

namespace vrdma::soft {
namespace {

constexpr int kNumStates = 7;

struct Rule {
  bool valid = false;
  // Indexed by service: 0 = UD, 1 = UC, 2 = RC.
  uint32_t req[3] = {0, 0, 0};
  uint32_t opt[3] = {0, 0, 0};
};

int ServiceIndex(QpType t) {
  switch (t) {
    case QpType::kUd:
      return 0;
    case QpType::kUc:
      return 1;
    case QpType::kRc:
      return 2;
  }
  return -1;
}

struct Table {
  Rule r[kNumStates][kNumStates];
};

constexpr Table BuildTable() {
  Table t{};
  constexpr int kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kSqd = 4, kSqe = 5,
                kErr = 6;
  // Any state may go to RESET and ERR with no attributes.
  for (int s = 0; s < kNumStates; ++s) {
    t.r[s][kReset].valid = true;
    t.r[s][kErr].valid = true;
  }
  // RESET -> INIT
  {
    Rule& x = t.r[kReset][kInit];
    x.valid = true;
    x.req[0] = kQpPkeyIndex | kQpPort | kQpQkey;
    x.req[1] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
    x.req[2] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  }
  // INIT -> INIT
  {
    Rule& x = t.r[kInit][kInit];
    x.valid = true;
    x.opt[0] = kQpPkeyIndex | kQpPort | kQpQkey;
    x.opt[1] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
    x.opt[2] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  }
  // INIT -> RTR
  {
    Rule& x = t.r[kInit][kRtr];
    x.valid = true;
    x.req[1] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    x.req[2] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
               kQpMinRnrTimer;
    x.opt[0] = kQpPkeyIndex | kQpQkey;
    x.opt[1] = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
    x.opt[2] = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
  }
  // RTR -> RTS
  {
    Rule& x = t.r[kRtr][kRts];
    x.valid = true;
    x.req[0] = kQpSqPsn;
    x.req[1] = kQpSqPsn;
    x.req[2] =
        kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic;
    x.opt[0] = kQpCurState | kQpQkey;
    x.opt[1] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState;
    x.opt[2] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer |
               kQpPathMigState;
  }
  // RTS -> RTS and SQD -> RTS share their optional sets.
  for (int from : {kRts, kSqd}) {
    Rule& x = t.r[from][kRts];
    x.valid = true;
    x.opt[0] = kQpCurState | kQpQkey;
    x.opt[1] = kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState;
    x.opt[2] = kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState |
               kQpMinRnrTimer;
  }
  // SQE -> RTS (UD and UC only: an RC QP never enters SQE).
  {
    Rule& x = t.r[kSqe][kRts];
    x.valid = true;
    x.opt[0] = kQpCurState | kQpQkey;
    x.opt[1] = kQpCurState | kQpAccessFlags;
  }
  // RTS -> SQD
  {
    Rule& x = t.r[kRts][kSqd];
    x.valid = true;
    for (int i = 0; i < 3; ++i) x.opt[i] = kQpEnSqdAsyncNotify;
  }
  // SQD -> SQD
  {
    Rule& x = t.r[kSqd][kSqd];
    x.valid = true;
    x.opt[0] = kQpPkeyIndex | kQpQkey;
    x.opt[1] =
        kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState;
    x.opt[2] = kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
               kQpMaxQpRdAtomic | kQpMaxDestRdAtomic | kQpAltPath |
               kQpAccessFlags | kQpPkeyIndex | kQpMinRnrTimer | kQpPathMigState;
  }
  return t;
}

constexpr Table kTable = BuildTable();

}  // namespace

Status CheckQpTransition(QpType type, QpState cur, QpState next,
                         uint32_t mask) {
  int c = static_cast<int>(cur), n = static_cast<int>(next);
  int svc = ServiceIndex(type);
  if (c < 0 || c >= kNumStates || n < 0 || n >= kNumStates || svc < 0) {
    return Status::kInvalid;
  }
  const Rule& rule = kTable.r[c][n];
  if (!rule.valid) return Status::kBadState;
  // RC QPs have no SQE state (their send errors go straight to ERR).
  if (type == QpType::kRc && (cur == QpState::kSqe || next == QpState::kSqe) &&
      next != QpState::kReset && next != QpState::kErr) {
    return Status::kBadState;
  }
  uint32_t req = rule.req[svc];
  uint32_t opt = rule.opt[svc];
  if ((mask & req) != req) return Status::kInvalid;
  if (mask & ~(req | opt | kQpState)) return Status::kInvalid;
  return Status::kOk;
}

Status CheckQpAttrValues(const QpAttr& attr, uint32_t mask,
                         uint32_t active_mtu_bytes) {
  if (mask & kQpAccessFlags) {
    constexpr uint32_t kKnown = kAccessLocalWrite | kAccessRemoteWrite |
                                kAccessRemoteRead | kAccessRemoteAtomic;
    if (attr.access_flags & ~kKnown) return Status::kInvalid;
  }
  if (mask & kQpPathMtu) {
    uint32_t m = attr.path_mtu_bytes;
    bool pow2 = m >= 256 && m <= 4096 && (m & (m - 1)) == 0;
    if (!pow2 || m > active_mtu_bytes) return Status::kInvalid;
  }
  if ((mask & kQpTimeout) && attr.timeout > 31) return Status::kInvalid;
  if ((mask & kQpRetryCnt) && attr.retry_cnt > 7) return Status::kInvalid;
  if ((mask & kQpRnrRetry) && attr.rnr_retry > 7) return Status::kInvalid;
  if ((mask & kQpMinRnrTimer) && attr.min_rnr_timer > 31) {
    return Status::kInvalid;
  }
  if ((mask & kQpRqPsn) && attr.rq_psn > 0xffffff) return Status::kInvalid;
  if ((mask & kQpSqPsn) && attr.sq_psn > 0xffffff) return Status::kInvalid;
  if ((mask & kQpDestQpn) && attr.dest_qpn > 0xffffff) return Status::kInvalid;
  if ((mask & kQpMaxQpRdAtomic) && attr.max_rd_atomic > 16) {
    return Status::kInvalid;
  }
  if ((mask & kQpMaxDestRdAtomic) && attr.max_dest_rd_atomic > 16) {
    return Status::kInvalid;
  }
  return Status::kOk;
}

uint64_t RnrTimerNs(uint8_t encoded) {
  // IBA table 45, in units of 10 us (0.01 ms); entry 0 is 655.36 ms.
  // clang-format off
  static constexpr uint32_t kTable10us[32] = {
      65536, 1,    2,    3,     4,     6,     8,     12,
      16,    24,   32,   48,    64,    96,    128,   192,
      256,   384,  512,  768,   1024,  1536,  2048,  3072,
      4096,  6144, 8192, 12288, 16384, 24576, 32768, 49152};
  // clang-format on
  return static_cast<uint64_t>(kTable10us[encoded & 31]) * 10000;
}

uint64_t AckTimeoutNs(uint8_t timeout) {
  if (timeout == 0) return std::numeric_limits<uint64_t>::max();
  return uint64_t{4096} << (timeout & 31);
}

}  // namespace vrdma::soft
