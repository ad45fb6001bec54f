// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// THE RNIC test double (its real twins are SoftRnic and the RNIC model):
// a scriptable fake for unit tests (engine, scheduler stage), the engine's
// allocation test and the engine micro-benchmark. It records every call,
// moves no bytes and flushes on ERR like a real RNIC. Posted sends complete
//   - when the test says so (CompleteSend, CompleteRecv, ...; the default),
//   - on Progress (auto_complete), or
//   - at once in PostSend, recording nothing (complete_at_post: a no-op
//     RNIC that isolates the engine's own cost per WQE).
// With deliver, a completed SEND / SEND_WITH_IMM / WRITE_WITH_IMM also
// completes the oldest receive posted to its destination QP on this fake
// (RC/UC: the QP's dest_qpn, UD: the WR's remote_qpn; its SRQ if it has
// one), so a QP that sends to itself is a loopback.
//
// Queues are Fifos that reuse their storage: once they have grown to the
// work in flight, data calls (Post*, PollCq, Progress) never allocate, so
// the allocation test can count the engine's allocations on top of it.
// Control calls allocate (it is a test double). Small enough to read in a
// few minutes; keep it in step with rnic.h.
#ifndef VRDMA_BACKEND_RNIC_TESTING_FAKE_RNIC_H_
#define VRDMA_BACKEND_RNIC_TESTING_FAKE_RNIC_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "backend/rnic/rnic.h"

namespace vrdma::testing {

// A FIFO on a ring that doubles when full and otherwise reuses its slots
// (std::deque allocates as it goes).
template <typename T>
class Fifo {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  const T& operator[](size_t i) const {
    return buf_[(head_ + i) & (buf_.size() - 1)];
  }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  void push_back(const T& v) {
    if (size_ == buf_.size()) Grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
  }
  void clear() { head_ = size_ = 0; }

 private:
  void Grow() {
    std::vector<T> b(std::max<size_t>(8, buf_.size() * 2));
    for (size_t i = 0; i < size_; ++i) b[i] = (*this)[i];
    buf_ = std::move(b);
    head_ = 0;
  }
  std::vector<T> buf_;  // size: 0 or a power of two
  size_t head_ = 0, size_ = 0;
};

class FakeRnic final : public Rnic {
 public:
  struct Mr {
    uint32_t pd;
    uint8_t* addr;
    uint64_t length;
    uint64_t iova;
    uint32_t access;
  };
  struct Qp {
    QpInit init;
    QpAttr attr;
    uint32_t last_mask = 0;
    Fifo<SendWr> sends;  // posted, not completed
    Fifo<RecvWr> recvs;
    std::vector<std::vector<uint8_t>> inline_copies;
  };
  struct Srq {
    Fifo<RecvWr> recvs;
  };
  struct Mw {
    uint32_t pd;
    uint8_t type;
  };

  // The script (see the top of the file).
  RnicLimits lim;
  bool auto_complete = false;
  bool complete_at_post = false;
  bool deliver = false;
  uint32_t sq_capacity = 1u << 20;  // PostSend says kNoResource beyond
  bool resize_supported = true;
  uint32_t piece_granule = 1;  // what PieceGranule says for every QP
  // Slow control calls (rnic.h): `beside` is what control_beside_data_path
  // says. With slow_call set, every control call but the GIDs'
  // hands its bookkeeping to slow_call(work) on the calling thread: a test may
  // hold that thread there, as a physical RNIC's registration does, then
  // run `work` on the thread that owns this fake (it is not thread-safe).
  bool beside = false;
  std::function<void(const std::function<void()>& work)> slow_call;

  // What it recorded.
  std::set<Gid> gids;
  std::map<uint32_t, Mr> mrs;  // by lkey
  std::map<uint32_t, Mw> mws;  // by id; rkey: id | 0x400000
  std::map<uint32_t, Qp> qps;  // by qpn (== id)
  std::map<uint32_t, Fifo<Completion>> cqs;
  std::map<uint32_t, uint32_t> cq_depths;  // by CQ id: created or resized
  std::map<uint32_t, uint64_t> polls;      // PollCq calls by CQ id
  std::map<uint32_t, Srq> srqs;
  std::set<uint32_t> pds, ahs;
  std::map<uint32_t, AddressVector> ah_avs;
  std::set<uint32_t> failed_cqs;
  std::deque<AsyncEvent> async_events;
  uint64_t posts = 0;       // WRs accepted
  uint64_t post_calls = 0;  // PostSend calls (doorbells)

  FakeRnic() {
    lim.max_qp = 1024;
    lim.max_qp_wr = 4096;
    lim.max_sge = 16;
    lim.max_cq = 1024;
    lim.max_cqe = 65535;
    lim.max_mr = 4096;
    lim.max_mr_size = 1ull << 32;
    lim.max_mw = 1024;
    lim.max_pd = 1024;
    lim.max_srq = 64;
    lim.max_srq_wr = 4096;
    lim.max_inline_data = 256;
    lim.max_msg_sz = 1u << 30;
    lim.active_mtu_bytes = 4096;
  }

  RnicLimits limits() const override { return lim; }
  bool control_beside_data_path() const override { return beside; }
  Status AddGid(const Gid& g) override {
    return gids.insert(g).second ? Status::kOk : Status::kInvalid;
  }
  Status RemoveGid(const Gid& g) override {
    return gids.erase(g) ? Status::kOk : Status::kInvalid;
  }
  Result<RnicPd> AllocPd() override {
    Result<RnicPd> out = Status::kIoError;
    Slow([&] {
      pds.insert(next_);
      out = RnicPd{next_++};
    });
    return out;
  }
  Status DeallocPd(RnicPd pd) override {
    Status out = Status::kIoError;
    Slow([&] { out = pds.erase(pd.id) ? Status::kOk : Status::kBadHandle; });
    return out;
  }
  Result<RnicMr> RegMr(RnicPd pd, uint8_t* addr, uint64_t length, uint64_t iova,
                       uint32_t access) override {
    Result<RnicMr> out = Status::kIoError;
    Slow([&] {
      uint32_t key = next_++;
      mrs[key] = Mr{pd.id, addr, length, iova, access};
      out = RnicMr{key, key, key | 0x800000};
    });
    return out;
  }
  Status DeregMr(RnicMr mr) override {
    Status out = Status::kIoError;
    Slow([&] { out = mrs.erase(mr.lkey) ? Status::kOk : Status::kBadHandle; });
    return out;
  }
  Result<RnicMw> AllocMw(RnicPd pd, uint8_t type) override {
    Result<RnicMw> out = Status::kIoError;
    Slow([&] {
      if (lim.max_mw == 0) {
        out = Status::kUnsupported;
      } else if (!pds.count(pd.id)) {
        out = Status::kBadHandle;
      } else if (type != 1 && type != 2) {
        out = Status::kInvalid;
      } else if (mws.size() >= lim.max_mw) {
        out = Status::kNoResource;
      } else {
        uint32_t id = next_++;
        mws[id] = Mw{pd.id, type};
        out = RnicMw{id, id | 0x400000};
      }
    });
    return out;
  }
  Status DeallocMw(RnicMw mw) override {
    Status out = Status::kIoError;
    Slow([&] { out = mws.erase(mw.id) ? Status::kOk : Status::kBadHandle; });
    return out;
  }
  Result<RnicCq> CreateCq(uint32_t depth) override {
    Result<RnicCq> out = Status::kIoError;
    Slow([&] {
      cqs[next_];
      cq_depths[next_] = depth;
      out = RnicCq{next_++};
    });
    return out;
  }
  Status ResizeCq(RnicCq cq, uint32_t depth) override {
    Status out = Status::kIoError;
    Slow([&] { out = ResizeCqNow(cq, depth); });
    return out;
  }
  Status ResizeCqNow(RnicCq cq, uint32_t depth) {
    if (!resize_supported) return Status::kUnsupported;
    if (depth > lim.max_cqe) return Status::kInvalid;
    auto it = cq_depths.find(cq.id);
    if (it == cq_depths.end()) return Status::kBadHandle;
    it->second = std::max(it->second, depth);
    return Status::kOk;
  }
  Status DestroyCq(RnicCq cq) override {
    Status out = Status::kIoError;
    Slow([&] { out = cqs.erase(cq.id) ? Status::kOk : Status::kBadHandle; });
    return out;
  }
  Result<RnicSrq> CreateSrq(RnicPd, uint32_t, uint32_t) override {
    Result<RnicSrq> out = Status::kIoError;
    Slow([&] {
      srqs[next_];
      out = RnicSrq{next_++};
    });
    return out;
  }
  Status DestroySrq(RnicSrq s) override {
    Status out = Status::kIoError;
    Slow([&] { out = srqs.erase(s.id) ? Status::kOk : Status::kBadHandle; });
    return out;
  }
  Result<RnicQp> CreateQp(const QpInit& init) override {
    Result<RnicQp> out = Status::kIoError;
    Slow([&] {
      uint32_t n = next_++;
      qps[n].init = init;
      out = RnicQp{n, n};
    });
    return out;
  }
  Status ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) override {
    Status out = Status::kIoError;
    Slow([&] { out = ModifyQpNow(qp, attr, mask); });
    return out;
  }
  Status ModifyQpNow(RnicQp qp, const QpAttr& attr, uint32_t mask) {
    auto it = qps.find(qp.id);
    if (it == qps.end()) return Status::kBadHandle;
    Qp& q = it->second;
    q.last_mask = mask;
    if (mask & kQpAv) q.attr.av = attr.av;
    if (mask & kQpDestQpn) q.attr.dest_qpn = attr.dest_qpn;
    if (mask & kQpState) {
      q.attr.state = attr.state;
      if (attr.state == QpState::kErr) Flush(qp.id);
      if (attr.state == QpState::kReset) {
        q.sends.clear();
        q.recvs.clear();
      }
    }
    return Status::kOk;
  }
  Result<QpAttr> QueryQp(RnicQp qp) const override {
    auto it = qps.find(qp.id);
    if (it == qps.end()) return Status::kBadHandle;
    return it->second.attr;
  }
  Status DestroyQp(RnicQp qp) override {
    Status out = Status::kIoError;
    Slow([&] { out = qps.erase(qp.id) ? Status::kOk : Status::kBadHandle; });
    return out;
  }
  Result<RnicAh> CreateAh(RnicPd, const AddressVector& av) override {
    Result<RnicAh> out = Status::kIoError;
    Slow([&] {
      ahs.insert(next_);
      ah_avs[next_] = av;
      out = RnicAh{next_++};
    });
    return out;
  }
  Status DestroyAh(RnicAh ah) override {
    Status out = Status::kIoError;
    Slow([&] { out = ahs.erase(ah.id) ? Status::kOk : Status::kBadHandle; });
    return out;
  }

  uint32_t PieceGranule(RnicQp) const override { return piece_granule; }

  int PostSend(RnicQp qp, std::span<const SendWr> wrs, Status* err) override {
    Qp& q = qps.at(qp.id);
    ++post_calls;
    int n = 0;
    for (const SendWr& wr : wrs) {
      if (q.attr.state != QpState::kRts) {
        *err = Status::kBadState;
        break;
      }
      if (complete_at_post) {
        Complete(qp.id, q, wr);
      } else if (q.sends.size() >= sq_capacity) {
        *err = Status::kNoResource;
        break;
      } else {
        q.sends.push_back(wr);
        if (wr.send_flags & kSendInline) {
          q.inline_copies.emplace_back(wr.inline_data,
                                       wr.inline_data + wr.inline_len);
        }
      }
      ++n;
      ++posts;
    }
    return n;
  }
  int PostRecv(RnicQp qp, std::span<const RecvWr> wrs, Status*) override {
    Qp& q = qps.at(qp.id);
    for (const RecvWr& wr : wrs) q.recvs.push_back(wr);
    return static_cast<int>(wrs.size());
  }
  int PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs, Status*) override {
    for (const RecvWr& wr : wrs) srqs.at(srq.id).recvs.push_back(wr);
    return static_cast<int>(wrs.size());
  }
  int PollCq(RnicCq cq, std::span<Completion> out) override {
    ++polls[cq.id];
    Fifo<Completion>& q = cqs.at(cq.id);
    if (!failed_cqs.empty() && failed_cqs.count(cq.id)) {
      q.clear();  // a CQ in error loses everything
      return 0;
    }
    int n = 0;
    while (n < static_cast<int>(out.size()) && !q.empty()) {
      out[n++] = q.front();
      q.pop_front();
    }
    return n;
  }
  bool PollAsyncEvent(AsyncEvent* ev) override {
    if (async_events.empty()) return false;
    *ev = async_events.front();
    async_events.pop_front();
    return true;
  }
  bool Progress() override {
    if (!auto_complete) return false;
    bool did = false;
    for (auto& [qpn, q] : qps) {
      while (!q.sends.empty()) {
        did = true;
        const SendWr wr = q.sends.front();
        q.sends.pop_front();
        Complete(qpn, q, wr);
      }
    }
    return did;
  }

  // Test controls.
  // Completes the oldest posted send of qpn (signaled or not: a test can
  // also complete an unsignaled one to check how the engine treats it).
  void CompleteSend(uint32_t qpn, WcStatus status = WcStatus::kSuccess) {
    Qp& q = qps.at(qpn);
    SendWr wr = q.sends.front();
    q.sends.pop_front();
    Completion c = SendCompletion(qpn, wr);
    c.status = status;
    cqs.at(q.init.send_cq.id).push_back(c);
    if (status != WcStatus::kSuccess) {
      q.attr.state = QpState::kErr;
      Flush(qpn);
    }
  }
  // A message arrived for the oldest posted receive of qpn.
  void CompleteRecv(uint32_t qpn, uint32_t byte_len, uint32_t src_qpn = 0) {
    Qp& q = qps.at(qpn);
    RecvWr wr = q.recvs.front();
    q.recvs.pop_front();
    Completion c;
    c.wr_id = wr.wr_id;
    c.opcode = WcOpcode::kRecv;
    c.qpn = qpn;
    c.byte_len = byte_len;
    c.src_qpn = src_qpn;
    cqs.at(q.init.recv_cq.id).push_back(c);
  }
  // A message arrived for qpn, which takes the oldest receive of its SRQ.
  void CompleteSrqRecv(uint32_t qpn, uint32_t byte_len) {
    Qp& q = qps.at(qpn);
    Srq& srq = srqs.at(q.init.srq.id);
    RecvWr wr = srq.recvs.front();
    srq.recvs.pop_front();
    Completion c;
    c.wr_id = wr.wr_id;
    c.opcode = WcOpcode::kRecv;
    c.qpn = qpn;
    c.byte_len = byte_len;
    cqs.at(q.init.recv_cq.id).push_back(c);
  }
  // The CQ overflowed on the RNIC: what it holds and will hold is lost,
  // and kCqError is reported through PollAsyncEvent.
  void FailCq(uint32_t cq_id) {
    failed_cqs.insert(cq_id);
    cqs.at(cq_id).clear();
    async_events.push_back(AsyncEvent{AsyncEvent::Type::kCqError, cq_id});
  }

 private:
  void Slow(const std::function<void()>& work) {
    if (slow_call) {
      slow_call(work);
    } else {
      work();
    }
  }
  static Completion SendCompletion(uint32_t qpn, const SendWr& wr) {
    Completion c;
    c.wr_id = wr.wr_id;
    c.opcode = SendCompletionOpcode(wr.opcode);
    c.qpn = qpn;
    c.byte_len = static_cast<uint32_t>(wr.total_length());
    return c;
  }
  // wr succeeded: its CQE when signaled, its message when delivering.
  void Complete(uint32_t qpn, Qp& q, const SendWr& wr) {
    if ((wr.send_flags & kSendSignaled) || q.init.sq_sig_all) {
      cqs.at(q.init.send_cq.id).push_back(SendCompletion(qpn, wr));
    }
    if (deliver) Deliver(qpn, q, wr);
  }
  void Deliver(uint32_t src_qpn, const Qp& src, const SendWr& wr) {
    const bool write_imm = wr.opcode == WrOpcode::kRdmaWriteWithImm;
    if (wr.opcode != WrOpcode::kSend && wr.opcode != WrOpcode::kSendWithImm &&
        !write_imm) {
      return;  // consumes no receive
    }
    const uint32_t dest = src.init.type == QpType::kUd ? wr.remote_qpn
                                                       : src.attr.dest_qpn;
    auto it = qps.find(dest);
    if (it == qps.end()) return;  // not on this fake: nobody receives
    Qp& d = it->second;
    Fifo<RecvWr>& recvs = d.init.has_srq ? srqs.at(d.init.srq.id).recvs
                                         : d.recvs;
    if (recvs.empty()) return;  // dropped (no RNR on a fake)
    Completion c;
    c.wr_id = recvs.front().wr_id;
    recvs.pop_front();
    c.opcode = write_imm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
    c.qpn = dest;
    c.src_qpn = src_qpn;
    c.byte_len = write_imm ? 0 : static_cast<uint32_t>(wr.total_length());
    if (wr.opcode != WrOpcode::kSend) {
      c.imm_data = wr.imm_data;
      c.wc_flags = kWcWithImm;
    }
    cqs.at(d.init.recv_cq.id).push_back(c);
  }
  void Flush(uint32_t qpn) {
    Qp& q = qps.at(qpn);
    for (size_t i = 0; i < q.sends.size(); ++i) {
      Completion c = SendCompletion(qpn, q.sends[i]);
      c.status = WcStatus::kWrFlushErr;
      c.byte_len = 0;
      cqs.at(q.init.send_cq.id).push_back(c);
    }
    q.sends.clear();
    for (size_t i = 0; i < q.recvs.size(); ++i) {
      Completion c;
      c.wr_id = q.recvs[i].wr_id;
      c.status = WcStatus::kWrFlushErr;
      c.opcode = WcOpcode::kRecv;
      c.qpn = qpn;
      cqs.at(q.init.recv_cq.id).push_back(c);
    }
    q.recvs.clear();
  }
  uint32_t next_ = 0x11;
};

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_RNIC_TESTING_FAKE_RNIC_H_
