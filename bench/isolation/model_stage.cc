// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/model_stage.h"

#include <algorithm>

namespace vrdma::bench {

using model::Op;

policy::FlowId ModelStage::AddFlow(policy::TenantId tenant, model::QpId qp) {
  Flow f;
  f.tenant = tenant;
  f.qp = qp;
  flows_.push_back(std::move(f));
  return static_cast<policy::FlowId>(flows_.size() - 1);
}

policy::WrInfo ModelStage::Info(const Flow& f, policy::FlowId id, const model::Wr& wr) {
  policy::WrInfo i;
  i.tenant = f.tenant;
  i.flow = id;
  i.kind = wr.op == Op::kRead ? policy::WrKind::kRead
           : (wr.op == Op::kSend || wr.op == Op::kSendImm) ? policy::WrKind::kSend
                                                            : policy::WrKind::kWrite;
  i.bytes = wr.bytes;
  i.signaled = wr.signaled;
  return i;
}

void ModelStage::PostNow(Flow& f, policy::FlowId id, std::span<const model::Wr> wrs) {
  if (wrs.empty()) return;
  const int n = sim_.PostSend(f.qp, wrs);
  const policy::Nanos now = now_ns();
  for (int i = 0; i < n; ++i) policy_.OnPosted(now, Info(f, id, wrs[i]), wrs[i].bytes);
}

void ModelStage::Submit(policy::FlowId id, std::span<const model::Wr> wrs) {
  Flow& f = flows_[id];
  const policy::Nanos now = now_ns();
  scratch_.clear();
  uint32_t room = sim_.sq_room(f.qp);
  for (const model::Wr& wr : wrs) {
    const policy::Verdict v = policy_.Admit(now, Info(f, id, wr));
    if (v == policy::Verdict::kPostNow && f.q.empty() && scratch_.size() < room) {
      scratch_.push_back(wr);  // same post list, same doorbell
      continue;
    }
    PostNow(f, id, scratch_);
    room -= static_cast<uint32_t>(scratch_.size());
    scratch_.clear();
    f.q.push_back(Entry{wr, v == policy::Verdict::kPostNow, 0});
    ++queued_total_;
  }
  PostNow(f, id, scratch_);
  scratch_.clear();
  if (queued_total_ > 0) {
    PostMarkedHeads(f, id);
    Pump();
  }
}

void ModelStage::PostMarkedHeads(Flow& f, policy::FlowId id) {
  uint32_t room = sim_.sq_room(f.qp);
  scratch_.clear();
  while (!f.q.empty() && f.q.front().post_at_head && scratch_.size() < room) {
    Entry& e = f.q.front();
    const bool splittable = e.wr.op == Op::kWrite || e.wr.op == Op::kRead;
    if (e.piece_bytes != 0 && e.piece_bytes < e.wr.bytes && splittable) {
      model::Wr piece = e.wr;
      piece.bytes = e.piece_bytes;
      piece.signaled = false;
      e.wr.bytes -= e.piece_bytes;
      e.post_at_head = false;  // the rest waits for another Next()
      e.piece_bytes = 0;
      scratch_.push_back(piece);
      break;
    }
    scratch_.push_back(f.q.pop_front().wr);
    --queued_total_;
  }
  PostNow(f, id, scratch_);
  scratch_.clear();
  if (!f.q.empty() && f.q.front().post_at_head && !retry_armed_) {
    // SQ full. Unsignaled WQEs retire without a CQE, so no completion may
    // come to wake us: look again shortly, as a polling data path would.
    retry_armed_ = true;
    sim_.ScheduleTimer(sim_.now() + model::NsToPs(kRetryNs), this, kRetryCookie);
  }
}

void ModelStage::Pump() {
  for (int guard = 0; guard < 4096 && queued_total_ > 0; ++guard) {
    const policy::Decision d = policy_.Next(now_ns());
    if (d.kind == policy::Decision::Kind::kPost) {
      if (d.flow >= flows_.size() || flows_[d.flow].q.empty()) continue;  // stale
      Flow& f = flows_[d.flow];
      Entry& e = f.q.front();
      e.post_at_head = true;
      e.piece_bytes = d.max_bytes;
      PostMarkedHeads(f, d.flow);
      continue;
    }
    if (d.kind == policy::Decision::Kind::kWait) {
      const model::Picos at = d.wake_at * model::kPicosPerNano;
      if (at < wake_armed_ || wake_armed_ <= sim_.now()) {
        wake_armed_ = at;
        sim_.ScheduleTimer(at, this, 0);
      }
    }
    return;
  }
}

void ModelStage::OnTimer(uint64_t cookie) {
  if (cookie == kRetryCookie) {
    retry_armed_ = false;
    for (policy::FlowId id = 0; id < flows_.size(); ++id) {
      if (!flows_[id].q.empty() && flows_[id].q.front().post_at_head) PostMarkedHeads(flows_[id], id);
    }
  } else {
    wake_armed_ = UINT64_MAX;
  }
  Pump();
}

void ModelStage::OnCompleted(policy::FlowId id, const model::Wr& wr,
                             model::Picos admitted_at) {
  Flow& f = flows_[id];
  const model::Picos now = sim_.now();
  policy_.OnCompleted(now / model::kPicosPerNano, Info(f, id, wr),
                      (now - std::min(now, admitted_at)) / model::kPicosPerNano);
  if (queued_total_ > 0) {
    PostMarkedHeads(flows_[id], id);  // the completion made SQ room
    Pump();
  }
}

}  // namespace vrdma::bench
