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
  int n = sim_.PostSend(f.qp, wrs);
  const policy::Nanos now = now_ns();
  for (int i = 0; i < n; ++i) policy_.OnPosted(now, Info(f, id, wrs[i]), wrs[i].bytes);
  // The bench never exceeds the SQ depth; anything refused waits at the head.
  for (size_t i = n; i < wrs.size(); ++i) {
    f.q.push_back(Entry{wrs[i], true});
    ++queued_total_;
  }
}

void ModelStage::Submit(policy::FlowId id, std::span<const model::Wr> wrs) {
  Flow& f = flows_[id];
  const policy::Nanos now = now_ns();
  scratch_.clear();
  for (const model::Wr& wr : wrs) {
    const policy::Verdict v = policy_.Admit(now, Info(f, id, wr));
    if (v == policy::Verdict::kPostNow && f.q.empty()) {
      scratch_.push_back(wr);  // same post list, same doorbell
      continue;
    }
    PostNow(f, id, scratch_);
    scratch_.clear();
    f.q.push_back(Entry{wr, v == policy::Verdict::kPostNow});
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
  scratch_.clear();
  while (!f.q.empty() && f.q.front().post_at_head) {
    scratch_.push_back(f.q.pop_front().wr);
    --queued_total_;
  }
  PostNow(f, id, scratch_);
  scratch_.clear();
}

void ModelStage::Pump() {
  for (int guard = 0; guard < 4096 && queued_total_ > 0; ++guard) {
    const policy::Decision d = policy_.Next(now_ns());
    if (d.kind == policy::Decision::Kind::kPost) {
      if (d.flow >= flows_.size() || flows_[d.flow].q.empty()) continue;
      Flow& f = flows_[d.flow];
      Entry& e = f.q.front();
      model::Wr piece = e.wr;
      const bool splittable = e.wr.op == Op::kWrite || e.wr.op == Op::kRead;
      if (d.max_bytes != 0 && d.max_bytes < e.wr.bytes && splittable) {
        piece.bytes = d.max_bytes;
        piece.signaled = false;
        e.wr.bytes -= d.max_bytes;
      } else {
        f.q.pop_front();
        --queued_total_;
      }
      PostNow(f, d.flow, {&piece, 1});
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

void ModelStage::OnTimer(uint64_t) {
  wake_armed_ = UINT64_MAX;
  Pump();
}

void ModelStage::OnCompleted(policy::FlowId id, const model::Wr& wr,
                             model::Picos admitted_at) {
  const Flow& f = flows_[id];
  const model::Picos now = sim_.now();
  policy_.OnCompleted(now / model::kPicosPerNano, Info(f, id, wr),
                      (now - std::min(now, admitted_at)) / model::kPicosPerNano);
  if (queued_total_ > 0) Pump();
}

}  // namespace vrdma::bench
