// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// An RNIC that moves no bytes: every control verb succeeds with fresh ids,
// every posted signaled send completes successfully at once (its completion
// is waiting in the CQ on the next PollCq). It isolates the engine's own
// cost per WQE (ring read, decode, checks, schedule, post, CQE write) from
// any transport. Data calls never allocate: CQs are fixed rings.
#ifndef VRDMA_BENCH_MICRO_NOOP_RNIC_H_
#define VRDMA_BENCH_MICRO_NOOP_RNIC_H_

#include <vector>

#include "backend/rnic/rnic.h"

namespace vrdma::bench {

class NoopRnic final : public Rnic {
 public:
  RnicLimits limits() const override {
    RnicLimits l;
    l.max_qp = 1024;
    l.max_qp_wr = 4096;
    l.max_sge = 32;
    l.max_cq = 1024;
    l.max_cqe = 65536;
    l.max_mr = 4096;
    l.max_mr_size = 1ull << 32;
    l.max_pd = 1024;
    l.max_srq = 64;
    l.max_srq_wr = 4096;
    l.max_inline_data = 256;
    l.max_msg_sz = 1u << 30;
    l.active_mtu_bytes = 4096;
    l.node_guid = 0x1234;
    return l;
  }
  Status AddGid(const Gid&) override { return Status::kOk; }
  Status RemoveGid(const Gid&) override { return Status::kOk; }
  Result<RnicPd> AllocPd() override { return RnicPd{++next_}; }
  Status DeallocPd(RnicPd) override { return Status::kOk; }
  Result<RnicMr> RegMr(RnicPd, uint8_t*, uint64_t, uint64_t, uint32_t) override {
    ++next_;
    return RnicMr{next_, next_, next_};
  }
  Status DeregMr(RnicMr) override { return Status::kOk; }
  Result<RnicCq> CreateCq(uint32_t depth) override {
    cqs_.push_back(CqRing{std::vector<Completion>(depth + 1), 0, 0});
    return RnicCq{static_cast<uint32_t>(cqs_.size() - 1)};
  }
  Status DestroyCq(RnicCq) override { return Status::kOk; }
  Result<RnicSrq> CreateSrq(RnicPd, uint32_t, uint32_t) override { return RnicSrq{++next_}; }
  Status DestroySrq(RnicSrq) override { return Status::kOk; }
  Result<RnicQp> CreateQp(const QpInit& init) override {
    qps_.push_back(QpInfo{init.send_cq.id, init.recv_cq.id, init.sq_sig_all, {}});
    const uint32_t id = static_cast<uint32_t>(qps_.size() - 1);
    return RnicQp{id, 0x100 + id};
  }
  Status ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) override {
    if (mask & kQpState) qps_[qp.id].attr.state = attr.state;
    return Status::kOk;
  }
  Result<QpAttr> QueryQp(RnicQp qp) const override { return qps_[qp.id].attr; }
  Status DestroyQp(RnicQp) override { return Status::kOk; }
  Result<RnicAh> CreateAh(RnicPd, const AddressVector&) override { return RnicAh{++next_}; }
  Status DestroyAh(RnicAh) override { return Status::kOk; }

  int PostSend(RnicQp qp, std::span<const SendWr> wrs, Status* first_error) override {
    const QpInfo& q = qps_[qp.id];
    int n = 0;
    for (const SendWr& wr : wrs) {
      if (q.sig_all || (wr.send_flags & kSendSignaled)) {
        Completion c;
        c.wr_id = wr.wr_id;
        c.opcode = wr.opcode == WrOpcode::kRdmaRead ? WcOpcode::kRdmaRead
                   : (wr.opcode == WrOpcode::kSend || wr.opcode == WrOpcode::kSendWithImm)
                       ? WcOpcode::kSend
                       : WcOpcode::kRdmaWrite;
        c.byte_len = static_cast<uint32_t>(wr.total_length());
        c.qpn = 0x100 + qp.id;
        if (!cqs_[q.send_cq].Push(c)) {
          if (first_error) *first_error = Status::kNoResource;
          return n;
        }
      }
      ++n;
    }
    return n;
  }
  int PostRecv(RnicQp, std::span<const RecvWr> wrs, Status*) override {
    return static_cast<int>(wrs.size());
  }
  int PostSrqRecv(RnicSrq, std::span<const RecvWr> wrs, Status*) override {
    return static_cast<int>(wrs.size());
  }
  int PollCq(RnicCq cq, std::span<Completion> out) override {
    CqRing& r = cqs_[cq.id];
    int n = 0;
    while (static_cast<size_t>(n) < out.size() && r.head != r.tail) {
      out[n++] = r.slots[r.head];
      r.head = (r.head + 1) % r.slots.size();
    }
    return n;
  }
  bool Progress() override { return false; }

 private:
  struct CqRing {
    std::vector<Completion> slots;
    size_t head, tail;
    bool Push(const Completion& c) {
      const size_t next = (tail + 1) % slots.size();
      if (next == head) return false;
      slots[tail] = c;
      tail = next;
      return true;
    }
  };
  struct QpInfo {
    uint32_t send_cq;
    uint32_t recv_cq;
    bool sig_all;
    QpAttr attr;
  };
  uint32_t next_ = 0;
  std::vector<CqRing> cqs_;
  std::vector<QpInfo> qps_;
};

}  // namespace vrdma::bench

#endif  // VRDMA_BENCH_MICRO_NOOP_RNIC_H_
