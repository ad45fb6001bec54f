// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// write_lat, send_lat (ping-pong: half the round trip is reported) and
// read_lat (one read at a time: the whole read is reported). One QP.
// Direction tags for the pattern: client->server messages use qp tag 0,
// server->client tag 1; the read source holds tag 0, iteration 0.
#include <array>
#include <atomic>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <vector>

#include "guest-driver/lib/spin_wait.h"
#include "guest-driver/perftest/pattern.h"
#include "guest-driver/perftest/report.h"
#include "guest-driver/perftest/runners.h"

namespace vrdma::perftest {
namespace {

using Clock = std::chrono::steady_clock;

// Pattern with the sequence byte in the last position.
void FillLat(uint8_t* p, uint64_t size, uint32_t tag, uint64_t i) {
  FillPattern(p, size, tag, i);
  p[size - 1] = SeqByte(i);
}

bool CheckLat(const uint8_t* p, uint64_t size, uint32_t tag, uint64_t i) {
  if (size > 1 && CheckPattern(p, size - 1, tag, i) != size - 1) return false;
  return p[size - 1] == SeqByte(i);
}

// Waits for something while watching the TCP channel (the peer may end the
// run) and a time limit (a lost message must not hang a test forever).
class Waiter {
 public:
  Waiter(TcpChannel* ch, uint32_t spins_before_yield)
      : ch_(ch), start_(Clock::now()), spin_(spins_before_yield) {}
  // false: give up (peer finished, or 30 s without progress).
  bool Continue() {
    spin_.Idle();
    if ((++n_ & 0xfff) != 0) return true;
    if (ch_ != nullptr && ch_->Readable()) {
      peer_done_ = true;
      return false;
    }
    return Clock::now() - start_ < std::chrono::seconds(30);
  }
  bool peer_done() const { return peer_done_; }

 private:
  TcpChannel* ch_;
  Clock::time_point start_;
  guest::SpinWait spin_;
  uint32_t n_ = 0;
  bool peer_done_ = false;
};

struct Side {
  Context& ctx;
  QpContext& qc;
  std::array<ib_uverbs_wc, 16> wcs;
  std::string error;

  // Reaps send completions; false on an error completion.
  bool Reap() {
    int n;
    while ((n = ctx.send_cq->Poll(wcs)) > 0) {
      for (int k = 0; k < n; ++k) {
        if (wcs[k].status != 0) {
          error = "send completion error: status " + std::to_string(wcs[k].status);
          return false;
        }
        ++qc.completed;
      }
    }
    return true;
  }
  Status Post(uint32_t opcode, uint64_t local_slot, uint64_t remote_slot) {
    guest::SendWr wr;
    wr.wr_id = qc.posted++;
    wr.opcode = opcode;
    wr.send_flags = guest::kSendSignaled;
    wr.num_sge = 1;
    wr.sge[0] = {reinterpret_cast<uint64_t>(ctx.Slot(0, local_slot)),
                 static_cast<uint32_t>(ctx.opts.size), qc.mr->lkey()};
    if (opcode != IB_UVERBS_WR_SEND) {
      wr.remote_addr = ctx.RemoteSlot(0, remote_slot);
      wr.rkey = qc.remote.rkey;
    }
    return qc.qp->PostSend(wr);
  }
  Status PostRecv(uint64_t slot) {
    guest::RecvWr wr;
    wr.wr_id = slot;
    wr.num_sge = 1;
    wr.sge[0] = {reinterpret_cast<uint64_t>(ctx.Slot(0, slot)),
                 static_cast<uint32_t>(ctx.opts.size), qc.mr->lkey()};
    return qc.qp->PostRecv(wr);
  }
  // Waits for one receive completion; returns its slot or -1.
  int64_t WaitRecv(Waiter& w) {
    ib_uverbs_wc wc;
    while (ctx.recv_cq->Poll({&wc, 1}) == 0) {
      if (!Reap() || !w.Continue()) return -1;
    }
    if (wc.status != 0) {
      error = "recv completion error: status " + std::to_string(wc.status);
      return -1;
    }
    if (wc.byte_len != ctx.opts.size || wc.wr_id == 0 || wc.wr_id > kSendLatRecvSlots) {
      error = "unexpected receive (len " + std::to_string(wc.byte_len) + ")";
      return -1;
    }
    return static_cast<int64_t>(wc.wr_id);
  }
  // Waits for the incoming slot's sequence byte (write_lat).
  bool WaitWrite(Waiter& w, uint64_t i) {
    volatile uint8_t* last = ctx.Slot(0, 1) + ctx.opts.size - 1;
    while (*last != SeqByte(i)) {
      if (!Reap() || !w.Continue()) return false;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    return true;
  }
};

// Checks with a short grace period: a payload may become visible slightly
// after its last byte when the RNIC does not copy in address order.
bool VerifyIncoming(const uint8_t* p, uint64_t size, uint32_t tag, uint64_t i) {
  const auto end = Clock::now() + std::chrono::milliseconds(10);
  while (!CheckLat(p, size, tag, i)) {
    if (Clock::now() > end) return false;
    guest::CpuRelax();
  }
  return true;
}

RunResult LatClient(Context& ctx, TcpChannel& ch) {
  RunResult res;
  const Options& o = ctx.opts;
  Side side{ctx, ctx.qps[0], {}, {}};
  const bool timed = o.duration_s > 0;
  std::vector<double> samples;
  samples.reserve(timed ? 1 << 16 : o.iters);
  if (o.test == TestKind::kSendLat) {
    for (uint64_t s = 1; s <= kSendLatRecvSlots; ++s) {
      if (Status st = side.PostRecv(s); st != Status::kOk) {
        res.error = std::string("post_recv: ") + StatusName(st);
        return res;
      }
    }
    if (!ch.Barrier()) return {false, "barrier failed", 0, nullptr};
  }
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(o.duration_s);
  for (uint64_t i = 0; timed ? Clock::now() < deadline : i < o.iters; ++i) {
    Waiter w(nullptr, o.spins_before_yield);
    if (o.test == TestKind::kReadLat && o.verify) std::memset(ctx.Slot(0, 1), 0, o.size);
    const auto t0 = Clock::now();
    bool ok = true;
    switch (o.test) {
      case TestKind::kWriteLat: {
        FillLat(ctx.Slot(0, 0), o.size, 0, i);
        ok = side.Post(IB_UVERBS_WR_RDMA_WRITE, 0, 1) == Status::kOk && side.WaitWrite(w, i);
        if (ok && o.verify && !VerifyIncoming(ctx.Slot(0, 1), o.size, 1, i)) ++res.verify_errors;
        break;
      }
      case TestKind::kSendLat: {
        FillLat(ctx.Slot(0, 0), o.size, 0, i);
        ok = side.Post(IB_UVERBS_WR_SEND, 0, 0) == Status::kOk;
        int64_t slot = ok ? side.WaitRecv(w) : -1;
        ok = slot > 0;
        if (ok && o.verify && !CheckLat(ctx.Slot(0, slot), o.size, 1, i)) ++res.verify_errors;
        if (ok) ok = side.PostRecv(static_cast<uint64_t>(slot)) == Status::kOk;
        break;
      }
      default: {  // read_lat: read the server's slot 0 into our slot 1
        const uint64_t before = side.qc.completed;
        ok = side.Post(IB_UVERBS_WR_RDMA_READ, 1, 0) == Status::kOk;
        while (ok && side.qc.completed == before) {
          ok = side.Reap() && w.Continue();
        }
        if (ok && o.verify && CheckPattern(ctx.Slot(0, 1), o.size, 0, 0) != o.size) {
          ++res.verify_errors;
        }
      }
    }
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!ok) {
      res.error = side.error.empty() ? "iteration " + std::to_string(i) + " timed out"
                                     : side.error;
      return res;
    }
    samples.push_back(o.test == TestKind::kReadLat ? us : us / 2);
  }
  if (!side.Reap()) {
    res.error = side.error;
    return res;
  }
  std::vector<uint64_t> counts{samples.size()};
  uint64_t server_errors = 0;
  if (!ch.SendVec(counts) || !ch.Recv(&server_errors, sizeof(server_errors))) {
    res.error = "end-of-test exchange failed";
    return res;
  }
  res.verify_errors += server_errors;
  LatResult r = ComputeLat(o.size, samples);
  PrintLatHeader(stdout);
  PrintLat(stdout, r);
  res.json = ToJson(TestName(o.test), r);
  res.ok = true;
  return res;
}

RunResult LatServer(Context& ctx, TcpChannel& ch) {
  RunResult res;
  const Options& o = ctx.opts;
  Side side{ctx, ctx.qps[0], {}, {}};
  if (o.test == TestKind::kSendLat) {
    for (uint64_t s = 1; s <= kSendLatRecvSlots; ++s) {
      if (Status st = side.PostRecv(s); st != Status::kOk) {
        res.error = std::string("post_recv: ") + StatusName(st);
        return res;
      }
    }
    if (!ch.Barrier()) return {false, "barrier failed", 0, nullptr};
  }
  if (o.test != TestKind::kReadLat) {
    // Echo until the client has done its iterations (it then reports on TCP).
    for (uint64_t i = 0;; ++i) {
      Waiter w(&ch, o.spins_before_yield);
      bool ok;
      if (o.test == TestKind::kWriteLat) {
        ok = side.WaitWrite(w, i);
        if (!ok) break;
        if (o.verify && !VerifyIncoming(ctx.Slot(0, 1), o.size, 0, i)) ++res.verify_errors;
        FillLat(ctx.Slot(0, 0), o.size, 1, i);
        ok = side.Post(IB_UVERBS_WR_RDMA_WRITE, 0, 1) == Status::kOk;
      } else {
        const int64_t slot = side.WaitRecv(w);
        if (slot <= 0) {
          if (!w.peer_done() && !side.error.empty()) {
            res.error = side.error;
            return res;
          }
          break;
        }
        if (o.verify && !CheckLat(ctx.Slot(0, slot), o.size, 0, i)) ++res.verify_errors;
        ok = side.PostRecv(static_cast<uint64_t>(slot)) == Status::kOk;
        FillLat(ctx.Slot(0, 0), o.size, 1, i);
        // The previous echo must have left our slot 0 before we overwrite
        // it: the client's receipt of it proves that (it is why we got i).
        ok = ok && side.Post(IB_UVERBS_WR_SEND, 0, 0) == Status::kOk;
      }
      if (!ok) {
        res.error = side.error.empty() ? "post failed" : side.error;
        return res;
      }
      if (!w.peer_done() && !side.Reap()) {
        res.error = side.error;
        return res;
      }
    }
  }
  std::vector<uint64_t> counts;
  if (!ch.RecvVec(&counts, 64) ||
      !ch.Send(&res.verify_errors, sizeof(res.verify_errors))) {
    res.error = "end-of-test exchange failed";
    return res;
  }
  res.ok = true;
  return res;
}

}  // namespace

RunResult RunLat(Context& ctx, TcpChannel& ch) {
  return ctx.opts.is_server() ? LatServer(ctx, ch) : LatClient(ctx, ch);
}

}  // namespace vrdma::perftest
