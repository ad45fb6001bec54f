// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// write_bw, send_bw, read_bw. Every WR is signaled (completions double as
// flow control and as the --verify hook for reads); each QP keeps up to
// tx_depth WRs in flight, posted in batches with one doorbell per batch.
#include <array>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "guest-driver/lib/spin_wait.h"
#include "guest-driver/perftest/pattern.h"
#include "guest-driver/perftest/report.h"
#include "guest-driver/perftest/runners.h"

namespace vrdma::perftest {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBatch = 16;
constexpr int kPollBatch = 32;

uint64_t NowNs(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

std::string WcError(const ib_uverbs_wc& wc) {
  return "completion error: status " + std::to_string(wc.status) + " opcode " +
         std::to_string(wc.opcode) + " qp " + std::to_string(wc.qp_num);
}

RunResult BwClient(Context& ctx, TcpChannel& ch) {
  RunResult res;
  const Options& o = ctx.opts;
  const uint32_t nq = static_cast<uint32_t>(ctx.qps.size());
  const bool timed = o.duration_s > 0;
  const uint64_t total_target = timed ? ~0ull : o.iters * nq;
  std::vector<BwSample> samples;
  samples.reserve(64);
  // A window shorter than the pipeline depth measures completion bursts,
  // not bandwidth: every window spans at least tx_depth messages per QP.
  const uint64_t sample_every = std::max<uint64_t>(
      uint64_t{o.tx_depth} * nq, timed ? 256 : total_target / 50);
  std::array<guest::SendWr, kBatch> wrs;
  std::array<ib_uverbs_wc, kPollBatch> wcs;
  guest::SpinWait spin(o.spins_before_yield);
  uint64_t done_total = 0;
  bool stop_posting = false;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(o.duration_s);
  samples.push_back({0, 0});
  while (true) {
    if (timed && !stop_posting && Clock::now() >= deadline) stop_posting = true;
    bool all_done = true;
    for (uint32_t q = 0; q < nq; ++q) {
      QpContext& qc = ctx.qps[q];
      const uint64_t target = timed ? (stop_posting ? qc.posted : ~0ull) : o.iters;
      if (qc.completed < target) all_done = false;
      int n = 0;
      while (n < kBatch && qc.posted < target && qc.posted - qc.completed < o.tx_depth) {
        const uint64_t i = qc.posted++;
        const uint64_t slot = i % ctx.slots;
        guest::SendWr& wr = wrs[n++];
        wr = guest::SendWr{};
        wr.wr_id = (uint64_t{q} << 48) | i;
        wr.send_flags = guest::kSendSignaled;
        wr.num_sge = 1;
        wr.sge[0] = {reinterpret_cast<uint64_t>(ctx.Slot(q, slot)),
                     static_cast<uint32_t>(o.size), qc.mr->lkey()};
        switch (o.test) {
          case TestKind::kWriteBw:
            wr.opcode = IB_UVERBS_WR_RDMA_WRITE;
            break;
          case TestKind::kReadBw:
            wr.opcode = IB_UVERBS_WR_RDMA_READ;
            break;
          default:
            wr.opcode = IB_UVERBS_WR_SEND;
        }
        if (o.test != TestKind::kSendBw) {
          wr.remote_addr = ctx.RemoteSlot(q, slot);
          wr.rkey = qc.remote.rkey;
        }
        if (o.verify && o.test != TestKind::kReadBw) {
          FillPattern(ctx.Slot(q, slot), o.size, q, i);
        }
      }
      if (n > 0) {
        if (Status s = qc.qp->PostSend({wrs.data(), static_cast<size_t>(n)}); s != Status::kOk) {
          res.error = std::string("post_send: ") + StatusName(s);
          return res;
        }
      }
    }
    if (all_done) break;
    const int got = ctx.send_cq->Poll(wcs);
    if (got == 0) {
      spin.Idle();
      continue;
    }
    spin.Reset();
    for (int k = 0; k < got; ++k) {
      const ib_uverbs_wc& wc = wcs[k];
      if (wc.status != 0) {
        res.error = WcError(wc);
        return res;
      }
      const uint32_t q = static_cast<uint32_t>(wc.wr_id >> 48);
      const uint64_t i = wc.wr_id & ((1ull << 48) - 1);
      if (q >= nq) {
        res.error = "completion for an unknown wr_id";
        return res;
      }
      // Every WR is signaled and a QP completes its sends in post order:
      // one out of order is a lost or a repeated completion.
      if (i != ctx.qps[q].completed) {
        res.error = "qp " + std::to_string(q) + ": completion of iteration " +
                    std::to_string(i) + " where " + std::to_string(ctx.qps[q].completed) +
                    " was due (a completion lost, repeated or out of order)";
        return res;
      }
      ++ctx.qps[q].completed;
      if (o.verify && o.test == TestKind::kReadBw) {
        const uint64_t slot = i % ctx.slots;
        const size_t bad = CheckPattern(ctx.Slot(q, slot), o.size, q, slot);
        if (bad != o.size) {
          if (res.verify_errors++ < 5) {
            std::fprintf(stderr, "verify: read qp %u iter %lu: byte %zu differs\n", q,
                         static_cast<unsigned long>(i), bad);
          }
        }
      }
      if (++done_total % sample_every == 0) samples.push_back({NowNs(start), done_total});
    }
  }
  const uint64_t total_ns = NowNs(start);
  samples.push_back({total_ns, done_total});

  // Tell the server how far each QP got; it verifies and answers.
  std::vector<uint64_t> counts;
  for (auto& q : ctx.qps) counts.push_back(q.completed);
  uint64_t server_errors = 0;
  if (!ch.SendVec(counts) || !ch.Recv(&server_errors, sizeof(server_errors))) {
    res.error = "end-of-test exchange failed";
    return res;
  }
  res.verify_errors += server_errors;
  BwResult r = ComputeBw(o.size, done_total, total_ns, samples, o.report_gbits);
  PrintBwHeader(stdout, o.report_gbits);
  PrintBw(stdout, r);
  res.json = ToJson(TestName(o.test), r);
  res.ok = true;
  return res;
}

// write_bw / read_bw server: passive until the client reports its counts.
RunResult BwPassiveServer(Context& ctx, TcpChannel& ch) {
  RunResult res;
  const Options& o = ctx.opts;
  std::vector<uint64_t> counts;
  if (!ch.RecvVec(&counts, 64) || counts.size() != ctx.qps.size()) {
    res.error = "end-of-test exchange failed";
    return res;
  }
  if (o.verify && o.test == TestKind::kWriteBw) {
    // Slot s holds the last iteration i < count with i % slots == s.
    auto check = [&](bool report) {
      uint64_t errors = 0;
      for (uint32_t q = 0; q < counts.size(); ++q) {
        for (uint64_t s = 0; s < ctx.slots && s < counts[q]; ++s) {
          const uint64_t last = s + ((counts[q] - 1 - s) / ctx.slots) * ctx.slots;
          const size_t bad = CheckPattern(ctx.Slot(q, s), o.size, q, last);
          if (bad == o.size) continue;
          if (report && errors < 5) {
            std::fprintf(stderr, "verify: write qp %u slot %lu (iter %lu): byte %zu differs\n",
                         q, static_cast<unsigned long>(s), static_cast<unsigned long>(last), bad);
          }
          ++errors;
        }
      }
      return errors;
    };
    // UC writes complete at the sender without an ACK: the last ones may
    // still be landing when the client reports. Give them a moment.
    const auto end = Clock::now() + std::chrono::milliseconds(o.uc ? 500 : 0);
    while (check(false) != 0 && Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    res.verify_errors = check(true);
  }
  if (!ch.Send(&res.verify_errors, sizeof(res.verify_errors))) {
    res.error = "end-of-test exchange failed";
    return res;
  }
  res.ok = true;
  return res;
}

// send_bw server: keeps receives posted, checks every message.
RunResult SendBwServer(Context& ctx, TcpChannel& ch) {
  RunResult res;
  const Options& o = ctx.opts;
  const uint32_t nq = static_cast<uint32_t>(ctx.qps.size());
  std::vector<uint64_t> received(nq, 0);
  auto post_recv = [&](uint32_t q, uint64_t slot) {
    guest::RecvWr wr;
    wr.wr_id = (uint64_t{q} << 48) | slot;
    wr.num_sge = 1;
    wr.sge[0] = {reinterpret_cast<uint64_t>(ctx.Slot(q, slot)), static_cast<uint32_t>(o.size),
                 ctx.qps[q].mr->lkey()};
    return ctx.qps[q].qp->PostRecv(wr);
  };
  for (uint32_t q = 0; q < nq; ++q) {
    for (uint64_t s = 0; s < ctx.slots; ++s) {
      if (Status st = post_recv(q, s); st != Status::kOk) {
        res.error = std::string("post_recv: ") + StatusName(st);
        return res;
      }
    }
  }
  // The client starts only after this barrier, so every receive is posted.
  if (!ch.Barrier()) {
    res.error = "barrier failed";
    return res;
  }
  std::vector<uint64_t> expected;
  bool have_expected = false;
  if (o.duration_s == 0) {
    expected.assign(nq, o.iters);
    have_expected = true;
  }
  std::array<ib_uverbs_wc, kPollBatch> wcs;
  guest::SpinWait spin(o.spins_before_yield);
  uint64_t total = 0;
  std::vector<BwSample> samples;
  Clock::time_point start{};
  uint32_t idle = 0;
  while (true) {
    if (have_expected) {
      bool done = true;
      for (uint32_t q = 0; q < nq; ++q) done &= received[q] >= expected[q];
      if (done) break;
    } else if ((++idle & 0xfff) == 0 && ch.Readable()) {
      if (!ch.RecvVec(&expected, 64) || expected.size() != nq) {
        res.error = "end-of-test exchange failed";
        return res;
      }
      have_expected = true;
      continue;
    }
    const int got = ctx.recv_cq->Poll(wcs);
    if (got == 0) {
      spin.Idle();
      continue;
    }
    spin.Reset();
    if (total == 0) {
      start = Clock::now();
      samples.push_back({0, 0});
    }
    for (int k = 0; k < got; ++k) {
      const ib_uverbs_wc& wc = wcs[k];
      if (wc.status != 0) {
        res.error = WcError(wc);
        return res;
      }
      const uint32_t q = static_cast<uint32_t>(wc.wr_id >> 48);
      const uint64_t slot = wc.wr_id & 0xffff;
      if (q >= nq || slot >= ctx.slots) {
        res.error = "completion for an unknown wr_id";
        return res;
      }
      const uint64_t i = received[q]++;
      if (o.verify) {
        const size_t bad = wc.byte_len != o.size
                               ? 0
                               : CheckPattern(ctx.Slot(q, slot), o.size, q, i);
        if (bad != o.size && res.verify_errors++ < 5) {
          std::fprintf(stderr, "verify: send qp %u msg %lu (len %u): byte %zu differs\n", q,
                       static_cast<unsigned long>(i), wc.byte_len, bad);
        }
      }
      if (Status st = post_recv(q, slot); st != Status::kOk) {
        res.error = std::string("post_recv: ") + StatusName(st);
        return res;
      }
      ++total;
      if (total % std::max<uint64_t>(256, uint64_t{o.tx_depth} * nq) == 0) {
        samples.push_back({NowNs(start), total});
      }
    }
  }
  const uint64_t total_ns = total > 0 ? NowNs(start) : 0;
  samples.push_back({total_ns, total});
  if (o.duration_s == 0) {
    // Consume the client's report (its counts equal ours by construction).
    std::vector<uint64_t> counts;
    if (!ch.RecvVec(&counts, 64)) {
      res.error = "end-of-test exchange failed";
      return res;
    }
  }
  if (!ch.Send(&res.verify_errors, sizeof(res.verify_errors))) {
    res.error = "end-of-test exchange failed";
    return res;
  }
  BwResult r = ComputeBw(o.size, total, total_ns, samples, o.report_gbits);
  PrintBwHeader(stdout, o.report_gbits);
  PrintBw(stdout, r);
  res.json = ToJson(TestName(o.test), r);
  res.ok = true;
  return res;
}

}  // namespace

RunResult RunBw(Context& ctx, TcpChannel& ch) {
  if (ctx.opts.test == TestKind::kSendBw) {
    if (ctx.opts.is_server()) return SendBwServer(ctx, ch);
    // Wait until the server has posted its receives.
    if (!ch.Barrier()) return RunResult{false, "barrier failed", 0, nullptr};
    return BwClient(ctx, ch);
  }
  return ctx.opts.is_server() ? BwPassiveServer(ctx, ch) : BwClient(ctx, ch);
}

}  // namespace vrdma::perftest
