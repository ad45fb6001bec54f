// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/qp_attr_check.h"

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {
namespace {

constexpr uint32_t kState = VIRTIO_RDMA_QP_STATE;
constexpr uint32_t kCur = VIRTIO_RDMA_QP_CUR_STATE;
constexpr uint32_t kSqdNotify = VIRTIO_RDMA_QP_EN_SQD_ASYNC_NOTIFY;
constexpr uint32_t kAccess = VIRTIO_RDMA_QP_ACCESS_FLAGS;
constexpr uint32_t kPkey = VIRTIO_RDMA_QP_PKEY_INDEX;
constexpr uint32_t kPort = VIRTIO_RDMA_QP_PORT;
constexpr uint32_t kQkey = VIRTIO_RDMA_QP_QKEY;
constexpr uint32_t kAv = VIRTIO_RDMA_QP_AV;
constexpr uint32_t kMtu = VIRTIO_RDMA_QP_PATH_MTU;
constexpr uint32_t kTimeout = VIRTIO_RDMA_QP_TIMEOUT;
constexpr uint32_t kRetry = VIRTIO_RDMA_QP_RETRY_CNT;
constexpr uint32_t kRnrRetry = VIRTIO_RDMA_QP_RNR_RETRY;
constexpr uint32_t kRqPsn = VIRTIO_RDMA_QP_RQ_PSN;
constexpr uint32_t kMaxRd = VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
constexpr uint32_t kAlt = VIRTIO_RDMA_QP_ALT_PATH;
constexpr uint32_t kMinRnr = VIRTIO_RDMA_QP_MIN_RNR_TIMER;
constexpr uint32_t kSqPsn = VIRTIO_RDMA_QP_SQ_PSN;
constexpr uint32_t kMaxDestRd = VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC;
constexpr uint32_t kMig = VIRTIO_RDMA_QP_PATH_MIG_STATE;
constexpr uint32_t kCap = VIRTIO_RDMA_QP_CAP;
constexpr uint32_t kDestQpn = VIRTIO_RDMA_QP_DEST_QPN;

struct Rule {
  bool valid = false;
  uint32_t req[4] = {0, 0, 0, 0};  // by type: RC, UC, UD, GSI
  uint32_t opt[4] = {0, 0, 0, 0};
};

int TypeIndex(QpType t) {
  switch (t) {
    case QpType::kRc:
      return 0;
    case QpType::kUc:
      return 1;
    case QpType::kUd:
      return 2;
    case QpType::kGsi:
      return 3;
  }
  return 0;
}

constexpr int kNumStates = 7;

// The IB transition table (Linux drivers/infiniband/core/verbs.c,
// qp_state_table), restricted to RC, UC, UD and GSI.
Rule TransitionRule(QpState from, QpState to);

// GSI takes UD's rules, except that it has no port to set (QP1 is the
// port's): RESET -> INIT and INIT -> INIT name pkey index and Q_Key only.
Rule WithGsi(Rule r, QpState from, QpState to) {
  r.req[3] = r.req[2];
  r.opt[3] = r.opt[2];
  if (from == QpState::kReset && to == QpState::kInit) {
    r.req[3] = kPkey | kQkey;
  } else if (from == QpState::kInit && to == QpState::kInit) {
    r.opt[3] = kPkey | kQkey;
  }
  return r;
}

Rule TransitionRule(QpState from, QpState to) {
  using S = QpState;
  Rule r;
  // Any state may go to RESET or ERR with no attributes.
  if (to == S::kReset || to == S::kErr) {
    r.valid = true;
    return r;
  }
  switch (from) {
    case S::kReset:
      if (to == S::kInit) {
        r.valid = true;
        r.req[0] = r.req[1] = kPkey | kPort | kAccess;
        r.req[2] = kPkey | kPort | kQkey;
      }
      break;
    case S::kInit:
      if (to == S::kInit) {
        r.valid = true;
        r.opt[0] = r.opt[1] = kPkey | kPort | kAccess;
        r.opt[2] = kPkey | kPort | kQkey;
      } else if (to == S::kRtr) {
        r.valid = true;
        r.req[1] = kAv | kMtu | kDestQpn | kRqPsn;
        r.req[0] = r.req[1] | kMaxDestRd | kMinRnr;
        r.opt[0] = r.opt[1] = kAlt | kAccess | kPkey;
        r.opt[2] = kPkey | kQkey;
      }
      break;
    case S::kRtr:
      if (to == S::kRts) {
        r.valid = true;
        r.req[0] = kTimeout | kRetry | kRnrRetry | kSqPsn | kMaxRd;
        r.req[1] = r.req[2] = kSqPsn;
        r.opt[0] = kCur | kAlt | kAccess | kMinRnr | kMig;
        r.opt[1] = kCur | kAlt | kAccess | kMig;
        r.opt[2] = kCur | kQkey;
      }
      break;
    case S::kRts:
      if (to == S::kRts) {
        r.valid = true;
        r.opt[0] = kCur | kAccess | kAlt | kMig | kMinRnr;
        r.opt[1] = kCur | kAccess | kAlt | kMig;
        r.opt[2] = kCur | kQkey;
      } else if (to == S::kSqd) {
        r.valid = true;
        r.opt[0] = r.opt[1] = r.opt[2] = kSqdNotify;
      }
      break;
    case S::kSqd:
      if (to == S::kRts) {
        r.valid = true;
        r.opt[0] = kCur | kAccess | kAlt | kMig | kMinRnr;
        r.opt[1] = kCur | kAccess | kAlt | kMig;
        r.opt[2] = kCur | kQkey;
      } else if (to == S::kSqd) {
        r.valid = true;
        r.opt[0] = kAv | kAlt | kAccess | kPkey | kMig | kTimeout | kRetry |
                   kRnrRetry | kMaxRd | kMaxDestRd | kMinRnr;
        r.opt[1] = kAv | kAlt | kAccess | kPkey | kMig;
        r.opt[2] = kPkey | kQkey;
      }
      break;
    case S::kSqe:
      if (to == S::kRts) {
        r.valid = true;
        r.opt[1] = kCur | kAccess;
        r.opt[2] = kCur | kQkey;
        // RC has no SQE state (a send error moves an RC QP to ERR); the
        // caller rejects RC in SQE.
      }
      break;
    case S::kErr:
      break;
  }
  return r;
}

bool Fits24(uint32_t v) { return v <= 0xffffff; }

}  // namespace

Status CheckAh(const GuestAh& ah, uint32_t num_gids) {
  if (ah.sgid_index >= num_gids) return Status::kInvalid;  // not its GID
  if (!ah.is_global) return Status::kInvalid;               // RoCE needs a GRH
  if (ah.port_num != 1) return Status::kInvalid;
  if (ah.flow_label > 0xfffff) return Status::kInvalid;
  if (ah.sl > 15) return Status::kInvalid;
  return Status::kOk;
}

void RecordQpAttrs(const ModifyQpRequest& req, ModifyQpRequest* attrs) {
  ModifyQpRequest& a = *attrs;
  const uint32_t m = req.mask;
  if (m & kAccess) a.access_flags = req.access_flags;
  if (m & kPkey) a.pkey_index = req.pkey_index;
  if (m & kPort) a.port_num = req.port_num;
  if (m & kQkey) a.qkey = req.qkey;
  if (m & kAv) a.ah = req.ah;
  if (m & kMtu) a.path_mtu_bytes = req.path_mtu_bytes;
  if (m & kTimeout) a.timeout = req.timeout;
  if (m & kRetry) a.retry_cnt = req.retry_cnt;
  if (m & kRnrRetry) a.rnr_retry = req.rnr_retry;
  if (m & kMinRnr) a.min_rnr_timer = req.min_rnr_timer;
  if (m & kMaxRd) a.max_rd_atomic = req.max_rd_atomic;
  if (m & kMaxDestRd) a.max_dest_rd_atomic = req.max_dest_rd_atomic;
  if (m & kRqPsn) a.rq_psn = req.rq_psn;
  if (m & kSqPsn) a.sq_psn = req.sq_psn;
  if (m & kDestQpn) a.dest_qpn = req.dest_qpn;
  a.mask |= m & ~(kCur | kSqdNotify);
}

QueryQpResult QueryQpAnswer(const ModifyQpRequest& attrs, uint32_t qpn,
                            QpState state, const QpCaps& caps) {
  QueryQpResult res;
  res.attr = attrs;
  res.attr.qpn = qpn;
  res.attr.state = state;
  res.attr.cur_state = state;
  res.attr.mask = attrs.mask | kState | kCap;
  res.cap = caps;
  return res;
}

bool IsValidMtu(uint32_t bytes) {
  return bytes == 256 || bytes == 512 || bytes == 1024 || bytes == 2048 ||
         bytes == 4096;
}

Status CheckModifyQp(const ModifyQpRequest& req, const QpCheckContext& ctx,
                     QpState* next_state) {
  const uint32_t mask = req.mask;
  if (mask & ~uint32_t{VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED})
    return Status::kInvalid;
  if (mask & (kAlt | kMig | kCap)) return Status::kUnsupported;
  if ((mask & kCur) && static_cast<int>(req.cur_state) >= kNumStates)
    return Status::kInvalid;
  if ((mask & kCur) && req.cur_state != ctx.current) return Status::kBadState;

  QpState to = ctx.current;
  if (mask & kState) {
    if (static_cast<int>(req.state) >= kNumStates) return Status::kInvalid;
    to = req.state;
  }
  // Without STATE this is current -> current: only attributes the state
  // allows to change in place.
  const Rule rule = WithGsi(TransitionRule(ctx.current, to), ctx.current, to);
  if (!rule.valid) return Status::kBadState;
  if (ctx.type == QpType::kRc && ctx.current == QpState::kSqe)
    return Status::kBadState;
  const int t = TypeIndex(ctx.type);
  const uint32_t attrs = mask & ~(kState | kCur);
  if ((attrs & rule.req[t]) != rule.req[t]) return Status::kInvalid;
  if (attrs & ~(rule.req[t] | rule.opt[t] | kSqdNotify))
    return Status::kInvalid;

  // Value ranges of the attributes present.
  if ((mask & kAccess) &&
      (req.access_flags & ~uint32_t{VIRTIO_RDMA_ACCESS_SUPPORTED})) {
    return Status::kInvalid;
  }
  if ((mask & kPkey) && req.pkey_index != 0)
    return Status::kInvalid;  // one pkey
  if ((mask & kPort) && req.port_num != 1) return Status::kInvalid;
  if (mask & kAv) VRDMA_RETURN_IF_ERROR(CheckAh(req.ah, ctx.num_gids));
  if (mask & kMtu) {
    if (!IsValidMtu(req.path_mtu_bytes) ||
        req.path_mtu_bytes > ctx.active_mtu_bytes) {
      return Status::kInvalid;
    }
  }
  if ((mask & kTimeout) && req.timeout > 31) return Status::kInvalid;
  if ((mask & kRetry) && req.retry_cnt > 7) return Status::kInvalid;
  if ((mask & kRnrRetry) && req.rnr_retry > 7) return Status::kInvalid;
  if ((mask & kMinRnr) && req.min_rnr_timer > 31) return Status::kInvalid;
  if ((mask & kMaxRd) && req.max_rd_atomic > kMaxQpRdAtom)
    return Status::kInvalid;
  if ((mask & kMaxDestRd) && req.max_dest_rd_atomic > kMaxQpRdAtom)
    return Status::kInvalid;
  if ((mask & kRqPsn) && !Fits24(req.rq_psn)) return Status::kInvalid;
  if ((mask & kSqPsn) && !Fits24(req.sq_psn)) return Status::kInvalid;
  if ((mask & kDestQpn) && !Fits24(req.dest_qpn)) return Status::kInvalid;
  *next_state = to;
  return Status::kOk;
}

}  // namespace vrdma::engine
