// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The fixture of ReliableSwitchTest (reliable_switch_test.cc) and
// ReliableSwitchAllocTest (reliable_switch_alloc_test.cc): the two daemons
// of reliable_uc_test_util.h, one RC QP each towards the other, and a
// Stream of guest traffic each way (WRITE, SEND into receives the other
// end keeps posted, READ; every WR signaled, sizes 0..8 KiB) that checks
// every completion as it comes: one per WR, in post order, success, and
// the bytes in place (a WRITE's and a READ's at their completion, a
// SEND's at its receive's completion, whose order, length and buffer are
// checked too).
//
// Each 8 MiB buffer: [0, 1 MiB) the source of this end's WRITEs and SENDs
// and of the peer's READs (a pattern, never written); [2, 4 MiB) the
// peer's WRITEs land, [4, 6 MiB) its SENDs (receive buffers), [6, 8 MiB)
// this end's READs: 8 KiB a WR, each place used once.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_SWITCH_TEST_UTIL_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_SWITCH_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/reliable_rnic/reliable_uc_test_util.h"

namespace vrdma::testing {

inline constexpr uint64_t kSlot = 8192;
inline constexpr uint64_t kWriteDst = 2 << 20;
inline constexpr uint64_t kRecvDst = 4 << 20;
inline constexpr uint64_t kReadDst = 6 << 20;
inline constexpr uint32_t kMaxOpsPerKind = 256;

// One direction's guest traffic: posted on `qp` of layer `l` (VM `me`)
// towards the peer's QP `pqp` on layer `pl` (VM `peer`).
struct Stream {
  struct Op {
    uint64_t wr_id;
    WrOpcode op;
    uint64_t local, remote;  // WRITE/SEND: src, dst; READ: dst, src
    uint32_t len;
  };
  ReliableRnic* l = nullptr;
  RnicQp qp{};
  UcVm* me = nullptr;
  ReliableRnic* pl = nullptr;
  RnicQp pqp{};
  UcVm* peer = nullptr;
  std::mt19937_64 rng{1};
  std::vector<Op> ops;        // posted, in order
  size_t completed = 0;       // send completions checked
  std::vector<size_t> sends;  // indexes of SENDs in ops, in order
  size_t recvs_done = 0;      // the peer's receive completions checked
  uint32_t recvs_posted = 0;  // receives the peer posted for us
  uint32_t writes = 0, reads = 0;
  std::vector<std::string> errors;

  // Posts up to `window` outstanding WRs until `total` are posted; the
  // peer keeps 16 receives ahead. read_ok: READs are mixed in.
  void Feed(size_t total, size_t window, bool read_ok = true) {
    while (recvs_posted < sends.size() + 16 && recvs_posted < kMaxOpsPerKind) {
      RecvWr r;
      r.wr_id = 0x5000'0000u + recvs_posted;
      r.num_sge = 1;
      r.sge[0] = Sge{peer->at(kRecvDst + recvs_posted * kSlot),
                     static_cast<uint32_t>(kSlot), peer->mr.lkey};
      Status st = Status::kOk;
      if (pl->PostRecv(pqp, std::span(&r, 1), &st) != 1) break;
      ++recvs_posted;
    }
    static constexpr uint32_t kSizes[] = {0, 1, 100, 4095, 4096, 4097, 8192};
    while (ops.size() < total && ops.size() - completed < window) {
      Op o;
      o.wr_id = 0x1000'0000u + ops.size();
      const uint64_t kind = rng() % (read_ok ? 3 : 2);
      o.len = kSizes[rng() % std::size(kSizes)];
      if (kind == 1 && sends.size() >= recvs_posted)
        break;  // wait for receives
      if (kind == 0) {
        if (writes >= kMaxOpsPerKind) break;
        o.op = WrOpcode::kRdmaWrite;
        o.local = (rng() % 1000) * 997 % ((1 << 20) - kSlot);
        o.remote = kWriteDst + writes++ * kSlot;
      } else if (kind == 1) {
        o.op = WrOpcode::kSend;
        o.local = (rng() % 1000) * 991 % ((1 << 20) - kSlot);
        o.remote = kRecvDst + sends.size() * kSlot;
      } else {
        if (reads >= kMaxOpsPerKind) break;
        o.op = WrOpcode::kRdmaRead;
        if (o.len == 0) o.len = 64;
        o.local = kReadDst + reads++ * kSlot;
        o.remote = (rng() % 1000) * 983 % ((1 << 20) - kSlot);
      }
      SendWr w;
      w.wr_id = o.wr_id;
      w.opcode = o.op;
      w.send_flags = kSendSignaled;
      w.num_sge = o.len > 0 ? 1 : 0;
      w.sge[0] = Sge{me->at(o.local), o.len, me->mr.lkey};
      if (o.op != WrOpcode::kSend) {
        w.remote_addr = peer->at(o.remote);
        w.rkey = peer->mr.rkey;
      }
      Status st = Status::kOk;
      if (l->PostSend(qp, std::span(&w, 1), &st) != 1) {
        errors.push_back(std::string("PostSend refused: ") + StatusName(st));
        return;
      }
      if (o.op == WrOpcode::kSend) sends.push_back(ops.size());
      ops.push_back(o);
    }
  }

  // This end's send completions and the peer's receive completions.
  void Check(const std::vector<Completion>& scq, size_t* s_seen,
             const std::vector<Completion>& rcq, size_t* r_seen) {
    for (; *s_seen < scq.size(); ++*s_seen) {
      const Completion& c = scq[*s_seen];
      if (completed >= ops.size()) {
        errors.push_back("a completion for nothing posted: wr_id " +
                         std::to_string(c.wr_id));
        continue;
      }
      const Op& o = ops[completed++];
      if (c.wr_id != o.wr_id || c.status != WcStatus::kSuccess ||
          c.qpn != qp.qpn) {
        errors.push_back("completion " + std::to_string(completed - 1) +
                         ": wr_id " + std::to_string(c.wr_id) + " status " +
                         std::to_string(static_cast<int>(c.status)) +
                         " (expected " + std::to_string(o.wr_id) + ")");
        continue;
      }
      if (o.op == WrOpcode::kRdmaWrite &&
          std::memcmp(&peer->buf[o.remote], &me->buf[o.local], o.len) != 0) {
        errors.push_back("WRITE " + std::to_string(o.wr_id) + " not in place");
      }
      if (o.op == WrOpcode::kRdmaRead &&
          std::memcmp(&me->buf[o.local], &peer->buf[o.remote], o.len) != 0) {
        errors.push_back("READ " + std::to_string(o.wr_id) + " not in place");
      }
    }
    for (; *r_seen < rcq.size(); ++*r_seen) {
      const Completion& c = rcq[*r_seen];
      if (recvs_done >= sends.size()) {
        errors.push_back("a receive completion for no SEND: wr_id " +
                         std::to_string(c.wr_id));
        continue;
      }
      const Op& o = ops[sends[recvs_done]];
      const uint64_t want = 0x5000'0000u + recvs_done;
      ++recvs_done;
      if (c.wr_id != want || c.status != WcStatus::kSuccess ||
          c.byte_len != o.len) {
        errors.push_back("receive " + std::to_string(recvs_done - 1) +
                         ": wr_id " + std::to_string(c.wr_id) + " status " +
                         std::to_string(static_cast<int>(c.status)) + " len " +
                         std::to_string(c.byte_len));
        continue;
      }
      if (std::memcmp(&peer->buf[o.remote], &me->buf[o.local], o.len) != 0) {
        errors.push_back("SEND " + std::to_string(o.wr_id) + " not in place");
      }
    }
  }
  bool done(size_t total) const {
    return ops.size() == total && completed == total &&
           recvs_done == sends.size();
  }
};

class ReliableSwitchTest : public ReliableUcTest {
 protected:
  // Both daemons, both VMs in `mode`, one QP each, connected; B's buffer
  // gets a pattern of its own.
  void Setup(ReliabilityMode mode, const QpConf& c = {},
             const fabric::FaultConfig& f = {}, uint64_t seed = 1,
             const ConnectSteps& steps = {}) {
    SetupModes(mode, mode, c, f, seed, steps);
  }
  // The same with A's VM in mode_a and B's in mode_b.
  void SetupModes(ReliabilityMode mode_a, ReliabilityMode mode_b,
                  const QpConf& c = {}, const fabric::FaultConfig& f = {},
                  uint64_t seed = 1, const ConnectSteps& steps = {}) {
    Build(f, f, seed);
    for (size_t i = 0; i < kBufSize; ++i) {
      vb_.buf[i] = static_cast<uint8_t>(i * 13 + i / 4091 + 5);
    }
    Connect(c, mode_b, mode_a, steps);
    ab_ = Stream{la_.get(), qa_, &va_, lb_.get(), qb_, &vb_};
    ba_ = Stream{lb_.get(), qb_, &vb_, la_.get(), qa_, &va_};
    ab_.rng.seed(seed * 7 + 1);
    ba_.rng.seed(seed * 7 + 2);
  }

  // Feeds both streams and checks what completed, `turns` times.
  void Traffic(size_t total, int turns, size_t window = 8) {
    for (int i = 0; i < turns; ++i) TrafficTurn(total, window);
  }
  void TrafficTurn(size_t total, size_t window = 8) {
    ab_.Feed(total, window, reads_);
    ba_.Feed(total, window, reads_);
    Turn();
    ab_.Check(got_, &seen_a_, recv_b_, &seen_rb_);
    ba_.Check(got_b_, &seen_b_, recv_a_, &seen_ra_);
  }
  // Runs traffic until both streams finished total WRs.
  bool FinishTraffic(size_t total, int max_turns) {
    for (int i = 0; i < max_turns; ++i) {
      if (ab_.done(total) && ba_.done(total)) return true;
      if (!ab_.errors.empty() || !ba_.errors.empty()) {
        ExpectClean();
        return false;
      }
      TrafficTurn(total);
    }
    const bool ok = ab_.done(total) && ba_.done(total);
    if (!ok) Dump();
    return ok;
  }
  // Where the streams and the switches are (on a failure).
  void Dump() {
    for (auto [name, st] : {std::pair{"A->B", &ab_}, std::pair{"B->A", &ba_}}) {
      printf(
          "%s: posted %zu completed %zu sends %zu recvs_done %zu recvs_posted "
          "%u\n",
          name, st->ops.size(), st->completed, st->sends.size(), st->recvs_done,
          st->recvs_posted);
    }
    for (auto [name, l, q] :
         {std::tuple{"A", la_.get(), qa_}, std::tuple{"B", lb_.get(), qb_}}) {
      const reliable::VirtualQp* v = l->FindQp(q.id);
      printf(
          "%s: sw state %d held %u drained_mine %d peer_drained %d peer_ready "
          "%d "
          "flushes %lu conn %d rq holding %d\n",
          name, v->sw ? static_cast<int>(v->sw->state) : -1,
          v->sw ? v->sw->held.size() : 0, v->sw ? v->sw->drained_mine : 0,
          v->sw ? v->sw->peer_drained : 0, v->sw ? v->sw->peer_ready : 0,
          v->sw ? static_cast<unsigned long>(v->sw->flushes) : 0ul,
          v->conn ? static_cast<int>(v->conn->state()) : -1,
          v->rq ? v->rq->holding() : -1);
      if (v->conn)
        printf("  sender outstanding %u failed %d\n",
               v->conn->sender().outstanding(), v->conn->sender().failed());
    }
  }
  bool Switched(ReliableRnic& l, const Gid& g) const {
    return l.QpModes(g).switching == 0;
  }
  // Asks `mode` on both ends (A first, B after `gap` turns of traffic).
  void SwitchBoth(ReliabilityMode mode, size_t total, int gap = 10) {
    la_->SetMode(std::span(&va_.gid, 1), mode);
    Traffic(total, gap);
    lb_->SetMode(std::span(&vb_.gid, 1), mode);
  }
  // Both ends ask `mode` at once, and the SWITCHes cross: both hold what
  // is posted from now on.
  void SwitchBothNow(ReliabilityMode mode) {
    la_->SetMode(std::span(&va_.gid, 1), mode);
    lb_->SetMode(std::span(&vb_.gid, 1), mode);
    Turn();
  }
  // Runs until both VMs' QPs run `mode`, none switching.
  ::testing::AssertionResult BothSettleIn(ReliabilityMode mode,
                                          int max_turns = 100000) {
    if (RunUntil(
            [&] {
              return la_->QpModes(va_.gid) == Only(mode) &&
                     lb_->QpModes(vb_.gid) == Only(mode);
            },
            max_turns)) {
      return ::testing::AssertionSuccess();
    }
    const reliable::QpModeCounts a = la_->QpModes(va_.gid);
    const reliable::QpModeCounts b = lb_->QpModes(vb_.gid);
    return ::testing::AssertionFailure()
           << "native/uc/rc/switching: A " << a.native << "/" << a.uc << "/"
           << a.rc << "/" << a.switching << ", B " << b.native << "/" << b.uc
           << "/" << b.rc << "/" << b.switching;
  }
  // Both streams' errors, none expected.
  void ExpectClean() {
    for (size_t i = 0; i < ab_.errors.size() && i < 8; ++i) {
      ADD_FAILURE() << "A->B: " << ab_.errors[i];
    }
    for (size_t i = 0; i < ba_.errors.size() && i < 8; ++i) {
      ADD_FAILURE() << "B->A: " << ba_.errors[i];
    }
    ab_.errors.clear();
    ba_.errors.clear();
  }
  reliable::QpModeCounts Only(ReliabilityMode m) const {
    reliable::QpModeCounts n;
    if (m == ReliabilityMode::kNative) n.native = 1;
    if (m == ReliabilityMode::kUc) n.uc = 1;
    if (m == ReliabilityMode::kRc) n.rc = 1;
    return n;
  }

  Stream ab_, ba_;
  size_t seen_a_ = 0, seen_b_ = 0, seen_ra_ = 0, seen_rb_ = 0;
  bool reads_ = true;
};

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_SWITCH_TEST_UTIL_H_
