// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// VerbsRnic's data path: posting, polling, async events and the completion
// channel. Nothing here allocates: work requests are built in the
// preallocated send_wrs_/recv_wrs_/sges_ arrays, a chunk at a time, and
// completions are polled into wcs_. The only locks are the provider's own
// per-queue ones (uncontended: one thread calls).
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "backend/verbs_rnic/verbs_rnic.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma {
namespace {

constexpr bool Same(uint32_t a, uint32_t b) { return a == b; }

static_assert(static_cast<int>(WrOpcode::kRdmaWrite) == IBV_WR_RDMA_WRITE &&
              static_cast<int>(WrOpcode::kRdmaWriteWithImm) ==
                  IBV_WR_RDMA_WRITE_WITH_IMM &&
              static_cast<int>(WrOpcode::kSend) == IBV_WR_SEND &&
              static_cast<int>(WrOpcode::kSendWithImm) == IBV_WR_SEND_WITH_IMM &&
              static_cast<int>(WrOpcode::kRdmaRead) == IBV_WR_RDMA_READ &&
              static_cast<int>(WrOpcode::kAtomicCmpSwp) ==
                  IBV_WR_ATOMIC_CMP_AND_SWP &&
              static_cast<int>(WrOpcode::kAtomicFetchAdd) ==
                  IBV_WR_ATOMIC_FETCH_AND_ADD &&
              static_cast<int>(WrOpcode::kLocalInv) == IBV_WR_LOCAL_INV &&
              static_cast<int>(WrOpcode::kBindMw) == IBV_WR_BIND_MW &&
              static_cast<int>(WrOpcode::kSendWithInv) == IBV_WR_SEND_WITH_INV);
static_assert(Same(kSendFence, IBV_SEND_FENCE) && Same(kSendSignaled, IBV_SEND_SIGNALED) &&
              Same(kSendSolicited, IBV_SEND_SOLICITED) && Same(kSendInline, IBV_SEND_INLINE));
static_assert(Same(kWcGrh, IBV_WC_GRH) && Same(kWcWithImm, IBV_WC_WITH_IMM) &&
              Same(kWcWithInv, IBV_WC_WITH_INV));

WcStatus MapWcStatus(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR: return WcStatus::kLocLenErr;
    case IBV_WC_LOC_QP_OP_ERR: return WcStatus::kLocQpOpErr;
    case IBV_WC_LOC_PROT_ERR: return WcStatus::kLocProtErr;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::kWrFlushErr;
    case IBV_WC_MW_BIND_ERR: return WcStatus::kMwBindErr;
    case IBV_WC_BAD_RESP_ERR: return WcStatus::kBadRespErr;
    case IBV_WC_LOC_ACCESS_ERR: return WcStatus::kLocAccessErr;
    case IBV_WC_REM_INV_REQ_ERR: return WcStatus::kRemInvReqErr;
    case IBV_WC_REM_ACCESS_ERR: return WcStatus::kRemAccessErr;
    case IBV_WC_REM_OP_ERR: return WcStatus::kRemOpErr;
    case IBV_WC_RETRY_EXC_ERR: return WcStatus::kRetryExcErr;
    case IBV_WC_RNR_RETRY_EXC_ERR: return WcStatus::kRnrRetryExcErr;
    case IBV_WC_FATAL_ERR: return WcStatus::kFatalErr;
    default: return WcStatus::kGeneralErr;
  }
}

WcOpcode MapWcOpcode(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND: return WcOpcode::kSend;
    case IBV_WC_RDMA_WRITE: return WcOpcode::kRdmaWrite;
    case IBV_WC_RDMA_READ: return WcOpcode::kRdmaRead;
    case IBV_WC_COMP_SWAP: return WcOpcode::kCompSwap;
    case IBV_WC_FETCH_ADD: return WcOpcode::kFetchAdd;
    case IBV_WC_BIND_MW: return WcOpcode::kBindMw;
    case IBV_WC_LOCAL_INV: return WcOpcode::kLocalInv;
    case IBV_WC_RECV: return WcOpcode::kRecv;
    case IBV_WC_RECV_RDMA_WITH_IMM: return WcOpcode::kRecvRdmaWithImm;
    default: return WcOpcode::kSend;
  }
}

// A refused post: ENOMEM is a full queue; EINVAL from a QP whose state
// does not allow posting is kBadState (rnic.h).
Status PostError(int err, const ibv_qp* qp, bool send) {
  if (err == EINVAL && qp != nullptr) {
    const bool ok_state = send ? (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD)
                               : qp->state != IBV_QPS_RESET;
    if (!ok_state) return Status::kBadState;
  }
  return StatusFromErrno(err);
}

void Note(Status* out, Status s) {
  if (out != nullptr) *out = s;
}

}  // namespace

Status VerbsRnic::ToSendWr(const SendWr& in, QpType type, ibv_send_wr* wr,
                           ibv_sge* sge) const {
  if (in.opcode > WrOpcode::kSendWithInv) return Status::kUnsupported;
  *wr = {};
  wr->wr_id = in.wr_id;
  wr->opcode = static_cast<ibv_wr_opcode>(in.opcode);
  wr->send_flags = in.send_flags &
                   (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |
                    IBV_SEND_INLINE);
  wr->imm_data = in.imm_data;
  wr->sg_list = sge;
  if (in.send_flags & kSendInline) {
    // The provider copies inline bytes before ibv_post_send returns.
    wr->num_sge = in.inline_len != 0 ? 1 : 0;
    sge[0] = {reinterpret_cast<uint64_t>(in.inline_data), in.inline_len, 0};
  } else {
    const int n = std::min<int>(in.num_sge, kMaxSge);
    wr->num_sge = n;
    for (int i = 0; i < n; ++i) {
      sge[i] = {in.sge[i].addr, in.sge[i].length, in.sge[i].lkey};
    }
  }
  switch (in.opcode) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
    case WrOpcode::kRdmaRead:
      wr->wr.rdma.remote_addr = in.remote_addr;
      wr->wr.rdma.rkey = in.rkey;
      break;
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd:
      wr->wr.atomic.remote_addr = in.remote_addr;
      wr->wr.atomic.rkey = in.rkey;
      wr->wr.atomic.compare_add = in.compare_add;
      wr->wr.atomic.swap = in.swap;
      break;
    case WrOpcode::kLocalInv:
    case WrOpcode::kSendWithInv:
      wr->invalidate_rkey = in.invalidate_rkey;  // shares imm_data's union
      break;
    case WrOpcode::kBindMw: {
      // The window and the MR by their ids (O(1) slot reads), checked
      // against the keys the engine resolved them from.
      const MwBind& b = in.bind;
      const Slot<ibv_mw>* mw = mws_.Get(b.mw_id);
      if (mw == nullptr || (mw->obj->rkey >> 8) != (b.mw_rkey >> 8)) {
        return Status::kInvalid;
      }
      ibv_mr* mr = nullptr;
      if (b.length > 0) {
        const Slot<ibv_mr>* m = mrs_.Get(b.mr_id);
        if (m == nullptr || m->obj->lkey != b.mr_lkey) return Status::kInvalid;
        mr = m->obj;
      }
      // Providers (librxe) read the window's current rkey from the ibv_mw:
      // the engine's is the truth after binds posted as WRs.
      mw->obj->rkey = b.mw_rkey;
      wr->bind_mw.mw = mw->obj;
      wr->bind_mw.rkey = (b.mw_rkey & ~0xffu) | (b.rkey & 0xffu);
      wr->bind_mw.bind_info.mr = mr;
      wr->bind_mw.bind_info.addr = b.addr;
      wr->bind_mw.bind_info.length = b.length;
      wr->bind_mw.bind_info.mw_access_flags = b.access;
      break;
    }
    default:
      break;
  }
  // wr.ud shares a union with wr.rdma and wr.atomic: only on UD QPs.
  if (type == QpType::kUd) {
    const Slot<ibv_ah>* ah = ahs_.Get(in.ah.id);
    if (ah == nullptr) return Status::kInvalid;
    wr->wr.ud.ah = ah->obj;
    wr->wr.ud.remote_qpn = in.remote_qpn;
    wr->wr.ud.remote_qkey = in.remote_qkey;
  }
  return Status::kOk;
}

int VerbsRnic::PostSend(RnicQp qp, std::span<const SendWr> wrs,
                        Status* first_error) {
  QpSlot* s = qps_.Get(qp.id);
  if (s == nullptr) {
    Note(first_error, Status::kBadHandle);
    return 0;
  }
  const int total = static_cast<int>(wrs.size());
  int posted = 0;
  while (posted < total) {
    int n = std::min(kChunk, total - posted);
    Status built = Status::kOk;
    for (int i = 0; i < n; ++i) {
      built = ToSendWr(wrs[posted + i], s->type, &send_wrs_[i], &sges_[i * kMaxSge]);
      if (built != Status::kOk) {
        n = i;  // post what came before it, then report it
        break;
      }
    }
    for (int i = 0; i < n; ++i) {
      send_wrs_[i].next = i + 1 < n ? &send_wrs_[i + 1] : nullptr;
    }
    if (n > 0) {
      ibv_send_wr* bad = nullptr;
      if (int e = ibv_post_send(s->obj, send_wrs_.data(), &bad); e != 0) {
        posted += bad != nullptr ? static_cast<int>(bad - send_wrs_.data()) : 0;
        Note(first_error, PostError(e, s->obj, true));
        return posted;
      }
      posted += n;
    }
    if (built != Status::kOk) {
      Note(first_error, built);
      return posted;
    }
  }
  return posted;
}

template <typename Post, typename Error>
int VerbsRnic::PostRecvChain(std::span<const RecvWr> wrs, Status* first_error, Post post,
                             Error error) {
  const int total = static_cast<int>(wrs.size());
  int posted = 0;
  while (posted < total) {
    const int n = std::min(kChunk, total - posted);
    for (int i = 0; i < n; ++i) {
      const RecvWr& in = wrs[posted + i];
      ibv_recv_wr& wr = recv_wrs_[i];
      ibv_sge* sge = &sges_[i * kMaxSge];
      wr.wr_id = in.wr_id;
      wr.num_sge = std::min<int>(in.num_sge, kMaxSge);
      wr.sg_list = sge;
      for (int k = 0; k < wr.num_sge; ++k) {
        sge[k] = {in.sge[k].addr, in.sge[k].length, in.sge[k].lkey};
      }
      wr.next = i + 1 < n ? &recv_wrs_[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (int e = post(recv_wrs_.data(), &bad); e != 0) {
      posted += bad != nullptr ? static_cast<int>(bad - recv_wrs_.data()) : 0;
      Note(first_error, error(e));
      return posted;
    }
    posted += n;
  }
  return posted;
}

int VerbsRnic::PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
                        Status* first_error) {
  QpSlot* s = qps_.Get(qp.id);
  if (s == nullptr) {
    Note(first_error, Status::kBadHandle);
    return 0;
  }
  return PostRecvChain(
      wrs, first_error,
      [s](ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(s->obj, wr, bad); },
      [s](int e) { return PostError(e, s->obj, false); });
}

int VerbsRnic::PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs,
                           Status* first_error) {
  Slot<ibv_srq>* s = srqs_.Get(srq.id);
  if (s == nullptr) {
    Note(first_error, Status::kBadHandle);
    return 0;
  }
  return PostRecvChain(
      wrs, first_error,
      [s](ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_srq_recv(s->obj, wr, bad); },
      [](int e) { return StatusFromErrno(e); });
}

int VerbsRnic::PollCq(RnicCq cq, std::span<Completion> out) {
  Slot<ibv_cq>* s = cqs_.Get(cq.id);
  if (s == nullptr) return 0;
  const int total = static_cast<int>(out.size());
  int got = 0;
  while (got < total) {
    const int want = std::min(kPollBatch, total - got);
    const int n = ibv_poll_cq(s->obj, want, wcs_.data());
    if (n <= 0) break;
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t now = uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wcs_[i];
      Completion& c = out[got + i];
      c.wr_id = w.wr_id;
      c.status = MapWcStatus(w.status);
      c.opcode = MapWcOpcode(w.opcode);
      c.byte_len = w.byte_len;
      // One union in ibv_wc as in Completion: the immediate or the
      // invalidated rkey, as the flag says.
      c.imm_data = (w.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)) ? w.imm_data : 0;
      c.qpn = w.qp_num;
      c.src_qpn = w.src_qp;
      c.wc_flags = w.wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM | IBV_WC_WITH_INV);
      c.timestamp_ns = now;
    }
    got += n;
    if (n < want) break;
  }
  return got;
}

bool VerbsRnic::PollAsyncEvent(AsyncEvent* ev) {
  // Events nobody maps are taken and dropped; a few per call at most.
  for (int i = 0; i < 8; ++i) {
    ibv_async_event e;
    if (ibv_get_async_event(ctx_, &e) != 0) return false;  // EAGAIN: none
    bool mapped = true;
    switch (e.event_type) {
      case IBV_EVENT_CQ_ERR:
        *ev = {AsyncEvent::Type::kCqError,
               static_cast<uint32_t>(reinterpret_cast<uintptr_t>(e.element.cq->cq_context)),
               0};
        break;
      case IBV_EVENT_QP_FATAL:
        *ev = {AsyncEvent::Type::kQpError, e.element.qp->qp_num, VIRTIO_RDMA_EV_QP_FATAL};
        break;
      case IBV_EVENT_QP_REQ_ERR:
        *ev = {AsyncEvent::Type::kQpError, e.element.qp->qp_num, VIRTIO_RDMA_EV_QP_REQ_ERR};
        break;
      case IBV_EVENT_QP_ACCESS_ERR:
        *ev = {AsyncEvent::Type::kQpError, e.element.qp->qp_num,
               VIRTIO_RDMA_EV_QP_ACCESS_ERR};
        break;
      case IBV_EVENT_PORT_ACTIVE:
        *ev = {AsyncEvent::Type::kPortActive, static_cast<uint32_t>(e.element.port_num), 0};
        break;
      case IBV_EVENT_PORT_ERR:
        *ev = {AsyncEvent::Type::kPortError, static_cast<uint32_t>(e.element.port_num), 0};
        break;
      case IBV_EVENT_GID_CHANGE:
        *ev = {AsyncEvent::Type::kGidChange, static_cast<uint32_t>(e.element.port_num), 0};
        break;
      default:
        mapped = false;
        break;
    }
    ibv_ack_async_event(&e);  // at once: a destroy never waits for it
    if (mapped) return true;
  }
  return false;
}

int VerbsRnic::completion_fd() const {
  return channel_ != nullptr ? channel_->fd : -1;
}

void VerbsRnic::ArmCompletions() {
  arm_passes_.fetch_add(1);  // odd: DestroyCq waits for the pass to end
  const uint32_t slots = arm_slots_.load();
  for (uint32_t i = 0; i < slots; ++i) {
    if (ibv_cq* cq = arm_cqs_[i].load()) (void)ibv_req_notify_cq(cq, 0);
  }
  arm_passes_.fetch_add(1);
}

void VerbsRnic::DrainCompletionFd() {
  // Bounded: the fd is non-blocking and each CQ fires once per arming.
  const uint32_t slots = arm_slots_.load();
  for (uint32_t i = 0; i <= slots; ++i) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &context) != 0) return;
    ibv_ack_cq_events(cq, 1);
  }
}

}  // namespace vrdma
