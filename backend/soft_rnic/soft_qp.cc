// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// QPs: creation, the state machine (transition rules in qp_state.cc) and the
// side effects of states: RESET empties the queues silently, ERR flushes
// every outstanding WQE with kWrFlushErr, SQE flushes the send queue.
#include "backend/soft_rnic/qp_state.h"
#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma {

Result<RnicQp> SoftRnic::CreateQp(const QpInit& init) {
  if (init.type != QpType::kRc && init.type != QpType::kUc &&
      init.type != QpType::kUd) {
    return Status::kInvalid;
  }
  soft::Pd* pd = pds_.Get(init.pd.id);
  soft::Cq* scq = cqs_.Get(init.send_cq.id);
  soft::Cq* rcq = cqs_.Get(init.recv_cq.id);
  if (pd == nullptr || scq == nullptr || rcq == nullptr) {
    return Status::kBadHandle;
  }
  soft::Srq* srq = nullptr;
  if (init.has_srq) {
    srq = srqs_.Get(init.srq.id);
    if (srq == nullptr) return Status::kBadHandle;
  }
  const QpCaps& c = init.caps;
  if (c.max_send_wr > limits_.max_qp_wr || c.max_send_sge > limits_.max_sge ||
      c.max_inline_data > limits_.max_inline_data ||
      (srq == nullptr && (c.max_recv_wr > limits_.max_qp_wr ||
                          c.max_recv_sge > limits_.max_sge))) {
    return Status::kInvalid;
  }
  uint32_t h = 0;
  soft::Qp* q = qps_.Create(&h);
  if (q == nullptr) return Status::kNoResource;
  q->qpn = h;
  q->type = init.type;
  q->pd = pd;
  q->send_cq = scq;
  q->recv_cq = rcq;
  q->srq = srq;
  q->caps = c;
  if (srq != nullptr) {
    q->caps.max_recv_wr = 0;
    q->caps.max_recv_sge = 0;
  }
  q->sq_sig_all = init.sq_sig_all;
  const QpCaps& qc = q->caps;
  std::unique_ptr<soft::QueueMemory> m =
      prepared_qp_.Take([&](const soft::QueueMemory& p) {
        return p.kind == soft::QueueMemory::Kind::kQp &&
               p.caps.max_send_wr == qc.max_send_wr &&
               p.caps.max_inline_data == qc.max_inline_data &&
               p.caps.max_recv_wr == qc.max_recv_wr &&
               p.caps.max_recv_sge == qc.max_recv_sge;
      });
  if (m != nullptr) {  // prepared on the control thread: no allocation here
    q->sq = std::move(m->sq);
    q->inline_pool = std::move(m->inline_pool);
    q->rq = std::move(m->rq);
    graveyard_.Push(std::move(m));  // the empty shell
  } else {
    q->sq.Init(qc.max_send_wr);
    q->inline_pool.assign(size_t{qc.max_send_wr} * qc.max_inline_data, 0);
    q->rq.Init(qc.max_recv_wr, qc.max_recv_sge);
  }
  ++pd->refs;
  ++scq->refs;
  ++rcq->refs;
  if (srq != nullptr) ++srq->refs;
  return RnicQp{h, h};
}

Status SoftRnic::ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) {
  soft::Qp* q = qps_.Get(qp.id);
  if (q == nullptr) return Status::kBadHandle;
  QpState next = (mask & kQpState) ? attr.state : q->state;
  VRDMA_RETURN_IF_ERROR(soft::CheckQpTransition(q->type, q->state, next, mask));
  VRDMA_RETURN_IF_ERROR(
      soft::CheckQpAttrValues(attr, mask, limits_.active_mtu_bytes));
  // The source GID selects the port GID the QP sends from: it must exist.
  if ((mask & kQpAv) && !GidRegistered(attr.av.sgid)) return Status::kInvalid;

  QpAttr& a = q->attr;
  if (mask & kQpAccessFlags) a.access_flags = attr.access_flags;
  if (mask & kQpQkey) a.qkey = attr.qkey;
  if (mask & kQpAv) a.av = attr.av;
  if (mask & kQpPathMtu) a.path_mtu_bytes = attr.path_mtu_bytes;
  if (mask & kQpTimeout) a.timeout = attr.timeout;
  if (mask & kQpRetryCnt) a.retry_cnt = attr.retry_cnt;
  if (mask & kQpRnrRetry) a.rnr_retry = attr.rnr_retry;
  if (mask & kQpMinRnrTimer) a.min_rnr_timer = attr.min_rnr_timer;
  if (mask & kQpMaxQpRdAtomic) a.max_rd_atomic = attr.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & kQpRqPsn) a.rq_psn = attr.rq_psn;
  if (mask & kQpSqPsn) a.sq_psn = attr.sq_psn;
  if (mask & kQpDestQpn) a.dest_qpn = attr.dest_qpn;

  switch (next) {
    case QpState::kReset:
      // IB: the queues are emptied without completions.
      q->sq.Clear();
      q->rq.Clear();
      q->req = {};
      q->net = {};
      q->nreq = {};
      q->state = next;
      Deactivate(q);
      break;
    case QpState::kErr:
      EnterError(q);
      break;
    case QpState::kRts:
      q->state = next;
      if (!q->sq.empty()) Activate(q);
      break;
    default:
      q->state = next;
      break;
  }
  a.state = q->state;
  return Status::kOk;
}

Result<QpAttr> SoftRnic::QueryQp(RnicQp qp) const {
  const soft::Qp* q = qps_.Get(qp.id);
  if (q == nullptr) return Status::kBadHandle;
  QpAttr a = q->attr;
  a.state = q->state;
  return a;
}

Status SoftRnic::DestroyQp(RnicQp qp) {
  soft::Qp* q = qps_.Get(qp.id);
  if (q == nullptr) return Status::kBadHandle;
  // Peers still sending to this QPN find no destination from now on;
  // completions already in the CQs stay there (as on hardware).
  Deactivate(q);
  --q->pd->refs;
  --q->send_cq->refs;
  --q->recv_cq->refs;
  if (q->srq != nullptr) --q->srq->refs;
  // The queues are freed on the control thread (Reclaim).
  auto dead = std::make_unique<soft::QueueMemory>();
  dead->sq = std::move(q->sq);
  dead->inline_pool = std::move(q->inline_pool);
  dead->rq = std::move(q->rq);
  graveyard_.Push(std::move(dead));
  qps_.Destroy(qp.id);
  return Status::kOk;
}

void SoftRnic::FlushSq(soft::Qp* q) {
  uint64_t now = Now();
  while (!q->sq.empty()) {
    const soft::SqSlot& s = q->sq.front();
    Completion c;
    c.wr_id = s.wr.wr_id;
    c.status = WcStatus::kWrFlushErr;
    c.opcode = SendCompletionOpcode(s.wr.opcode);
    c.qpn = q->qpn;
    c.timestamp_ns = now;
    PushCompletion(q->send_cq, c);
    q->sq.Pop();
  }
  q->req = {};
  q->nreq = {};
}

void SoftRnic::FlushRq(soft::Qp* q) {
  uint64_t now = Now();
  // A receive the fabric responder took (from the RQ or the SRQ) and kept
  // for the next message is the oldest: it flushes first.
  if (q->net.has_wqe) {
    Completion c;
    c.wr_id = q->net.wqe_id;
    c.status = WcStatus::kWrFlushErr;
    c.opcode = WcOpcode::kRecv;
    c.qpn = q->qpn;
    c.timestamp_ns = now;
    PushCompletion(q->recv_cq, c);
  }
  q->net = {};
  while (!q->rq.empty()) {
    Completion c;
    c.wr_id = q->rq.front().wr_id;
    c.status = WcStatus::kWrFlushErr;
    c.opcode = WcOpcode::kRecv;
    c.qpn = q->qpn;
    c.timestamp_ns = now;
    PushCompletion(q->recv_cq, c);
    q->rq.Pop();
  }
}

void SoftRnic::EnterError(soft::Qp* q) {
  q->state = QpState::kErr;
  q->attr.state = QpState::kErr;
  // Receives posted to an SRQ belong to the SRQ, not to this QP.
  FlushSq(q);
  FlushRq(q);
  Deactivate(q);
}

void SoftRnic::EnterSqError(soft::Qp* q) {
  q->state = QpState::kSqe;
  q->attr.state = QpState::kSqe;
  FlushSq(q);
  Deactivate(q);
}

void SoftRnic::Activate(soft::Qp* q) {
  if (q->list != soft::Qp::List::kNone) return;
  q->list = soft::Qp::List::kActive;
  active_.PushBack(q);
}

void SoftRnic::Park(soft::Qp* q) {
  Deactivate(q);
  q->list = soft::Qp::List::kTimer;
  timers_.PushBack(q);
  if (q->req.wait_until_ns < next_deadline_ns_) {
    next_deadline_ns_ = q->req.wait_until_ns;
  }
}

void SoftRnic::Deactivate(soft::Qp* q) {
  switch (q->list) {
    case soft::Qp::List::kActive:
      active_.Remove(q);
      break;
    case soft::Qp::List::kTimer:
      timers_.Remove(q);
      if (timers_.count == 0) next_deadline_ns_ = kNever;
      break;
    case soft::Qp::List::kNone:
      break;
  }
  q->list = soft::Qp::List::kNone;
}

}  // namespace vrdma
