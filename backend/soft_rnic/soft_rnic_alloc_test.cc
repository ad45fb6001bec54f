// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The data path (PostSend, PostRecv, PostSrqRecv, PollCq, Progress) must not
// allocate: this binary replaces the global operator new with a counting one
// and runs a mixed workload (every opcode, RNR waits, errors, flushes, CQ
// overflow) with counting switched on only around data-path calls.
#include <malloc.h>

#include <cstdlib>
#include <new>

#include "backend/fabric/faulty_fabric.h"
#include "backend/fabric/inproc_fabric.h"
#include "backend/soft_rnic/soft_rnic_test_util.h"

namespace {
bool g_counting = false;
long g_allocs = 0;
// Allocations and frees of queue-sized blocks (>= 4 KiB), counted while
// g_counting: what a control call costs the thread it runs on.
constexpr size_t kLarge = 4096;
long g_large_allocs = 0;
long g_large_frees = 0;
void CountFree(void* p) {
  if (g_counting && p != nullptr && malloc_usable_size(p) >= kLarge) ++g_large_frees;
}
}  // namespace

// GCC cannot see that these replacements pair malloc with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  if (g_counting) ++g_allocs;
  if (g_counting && n >= kLarge) ++g_large_allocs;
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
  CountFree(p);
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }

namespace vrdma::testing {
namespace {

class NoAlloc : public SoftRnicTest {
 protected:
  NoAlloc() = default;
  explicit NoAlloc(const RnicLimits& limits) : SoftRnicTest(limits) {}
  // Runs f with allocation counting on.
  template <typename F>
  void Counted(F f) {
    g_counting = true;
    f();
    g_counting = false;
  }
  // One data-path turn; the clock moves on by tick_.
  void Turn() {
    rnic_.Progress();
    now_ += tick_;
  }
  void MixedWorkload();
  Completion out_[64];
  uint64_t tick_ = 0;
};

// With a 10 Mb/s line (a 512-byte message holds the wire ~0.5 ms):
// messages wait for the wire, turn after turn.
class NoAllocOnALine : public NoAlloc {
 protected:
  NoAllocOnALine() : NoAlloc(Line()) { tick_ = 10'000'000; }
  static RnicLimits Line() {
    RnicLimits l = DefaultSoftRnicLimits();
    l.link_rate_bps = 10'000'000;
    return l;
  }
};

TEST_F(NoAlloc, DataPathNeverAllocates) { MixedWorkload(); }
TEST_F(NoAllocOnALine, DataPathNeverAllocates) { MixedWorkload(); }

// Memory windows on the data path: binds, accesses through them, LOCAL_INV,
// SEND_WITH_INV and a failing bind change preallocated windows only.
TEST_F(NoAlloc, WindowsNeverAllocate) {
  Connect(QpType::kRc);
  auto mr = rnic_.RegMr(b_.pd, b_.buf.data(), b_.buf.size(), b_.iova,
                        kAllAccess | kAccessMwBind);
  auto t1 = rnic_.AllocMw(b_.pd, 1);
  auto t2 = rnic_.AllocMw(b_.pd, 2);
  ASSERT_TRUE(mr.ok() && t1.ok() && t2.ok());
  constexpr uint32_t kRw = kAccessRemoteRead | kAccessRemoteWrite;
  auto bind = [&](uint32_t mw_rkey, uint8_t key) {
    SendWr w;
    w.opcode = WrOpcode::kBindMw;
    w.send_flags = kSendSignaled;
    w.bind = MwBind{mw_rkey, mr->lkey, b_.at(0), 4096, key, kRw};
    return w;
  };
  auto write = [&](uint32_t rkey) {
    SendWr w = Wr(WrOpcode::kRdmaWrite, 1, a_, 0, 64, 0);
    w.remote_addr = b_.at(0);
    w.rkey = rkey;
    return w;
  };
  const uint32_t r1 = (t1->rkey & ~0xffu) | 1, r2 = (t2->rkey & ~0xffu) | 2;
  SendWr inv;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = kSendSignaled;
  SendWr swi = Wr(WrOpcode::kSendWithInv, 2, a_, 0, 32);
  swi.invalidate_rkey = r2;
  Counted([&] {
    Status st;
    const SendWr b_ops[] = {bind(t1->rkey, 1), bind(t2->rkey, 2)};
    EXPECT_EQ(rnic_.PostSend(qb_, b_ops, &st), 2);
    const RecvWr r = Rwr(3, b_, 8192, 64);
    EXPECT_EQ(rnic_.PostRecv(qb_, std::span<const RecvWr>(&r, 1), &st), 1);
    Turn();
    const SendWr a_ops[] = {write(r1), write(r2), swi};
    EXPECT_EQ(rnic_.PostSend(qa_, a_ops, &st), 3);
    Turn();
    // Bind t2 again (free after the SEND_WITH_INV), invalidate it, then a
    // bind that fails (t2 is free: length 0) and breaks qb_.
    inv.invalidate_rkey = (r2 & ~0xffu) | 4;
    const SendWr more[] = {bind(r2, 4), inv};
    EXPECT_EQ(rnic_.PostSend(qb_, more, &st), 2);
    Turn();
    SendWr bad = bind((t2->rkey & ~0xffu) | 4, 5);
    bad.bind.length = 0;
    EXPECT_EQ(rnic_.PostSend(qb_, std::span<const SendWr>(&bad, 1), &st), 1);
    Turn();
    int n = rnic_.PollCq(b_.scq, out_);
    EXPECT_EQ(n, 5);  // three binds, LOCAL_INV, the failed bind
    EXPECT_EQ(out_[3].opcode, WcOpcode::kLocalInv);
    EXPECT_EQ(out_[3].status, WcStatus::kSuccess);
    EXPECT_EQ(out_[4].status, WcStatus::kMwBindErr);
    while (rnic_.PollCq(a_.scq, out_) > 0 || rnic_.PollCq(b_.rcq, out_) > 0) {
    }
  });
  EXPECT_EQ(g_allocs, 0);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  EXPECT_EQ(StateOf(qa_), QpState::kRts);
}

// Fast-registration MRs on the data path: registrations (the page list
// copied into room AllocFrMr made), accesses through them across pages as
// rkey and lkey, LOCAL_INV, SEND_WITH_INV and a failing registration
// change preallocated MRs only.
TEST_F(NoAlloc, FastRegistrationNeverAllocates) {
  Connect(QpType::kRc);
  auto fr = rnic_.AllocFrMr(b_.pd, 8);
  ASSERT_TRUE(fr.ok());
  // Four pages of b_'s buffer, out of order, from 0x100 into the first.
  const FrPage pages[] = {{b_.mr.lkey, b_.at(3 * 4096)},
                          {b_.mr.lkey, b_.at(1 * 4096)},
                          {b_.mr.lkey, b_.at(6 * 4096)},
                          {b_.mr.lkey, b_.at(4 * 4096)}};
  constexpr uint64_t kIova = 0x5000'0000'0100ull;
  auto reg = [&](uint32_t lkey, uint8_t key) {
    SendWr w;
    w.opcode = WrOpcode::kRegMr;
    w.send_flags = kSendSignaled;
    w.reg = FrReg{lkey, key, kIova, 3 * 4096, kAllAccess, pages, 4, fr->id};
    return w;
  };
  auto rdma = [&](WrOpcode op, uint32_t rkey) {
    SendWr w = Wr(op, 1, a_, 0, 9000, 0);
    w.remote_addr = kIova + 100;
    w.rkey = rkey;
    return w;
  };
  const uint32_t k1 = (fr->lkey & ~0xffu) | 1, k2 = (fr->lkey & ~0xffu) | 2;
  SendWr inv;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = kSendSignaled;
  inv.invalidate_rkey = k1;
  SendWr swi = Wr(WrOpcode::kSendWithInv, 2, a_, 0, 32);
  swi.invalidate_rkey = k2;
  Counted([&] {
    Status st;
    const SendWr b_ops[] = {reg(fr->lkey, 1)};
    EXPECT_EQ(rnic_.PostSend(qb_, b_ops, &st), 1);
    // A receive into the MR itself (an lkey across pages).
    RecvWr r;
    r.wr_id = 3;
    r.num_sge = 1;
    r.sge[0] = Sge{kIova + 4000, 5000, k1};
    EXPECT_EQ(rnic_.PostRecv(qb_, std::span<const RecvWr>(&r, 1), &st), 1);
    Turn();
    SendWr send = Wr(WrOpcode::kSend, 4, a_, 0, 5000, 0);
    const SendWr a_ops[] = {rdma(WrOpcode::kRdmaWrite, k1),
                            rdma(WrOpcode::kRdmaRead, k1), send};
    EXPECT_EQ(rnic_.PostSend(qa_, a_ops, &st), 3);
    Turn();
    const SendWr more[] = {inv, reg(k1, 2)};
    EXPECT_EQ(rnic_.PostSend(qb_, more, &st), 2);
    r.sge[0] = Sge{b_.at(0), 64, b_.mr.lkey};
    EXPECT_EQ(rnic_.PostRecv(qb_, std::span<const RecvWr>(&r, 1), &st), 1);
    Turn();
    EXPECT_EQ(rnic_.PostSend(qa_, std::span<const SendWr>(&swi, 1), &st), 1);
    Turn();
    // Invalid again: registering with a stale lkey fails and breaks qb_.
    const SendWr bad = reg(k1, 3);
    EXPECT_EQ(rnic_.PostSend(qb_, std::span<const SendWr>(&bad, 1), &st), 1);
    Turn();
    int n = rnic_.PollCq(b_.scq, out_);
    EXPECT_EQ(n, 4);  // two registrations, LOCAL_INV, the failed one
    EXPECT_EQ(out_[0].opcode, WcOpcode::kRegMr);
    EXPECT_EQ(out_[0].status, WcStatus::kSuccess);
    EXPECT_EQ(out_[2].status, WcStatus::kSuccess);
    EXPECT_EQ(out_[3].status, WcStatus::kLocQpOpErr);
    n = rnic_.PollCq(b_.rcq, out_);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(out_[0].status, WcStatus::kSuccess);
    EXPECT_EQ(out_[1].wc_flags & kWcWithInv, uint32_t{kWcWithInv});
    while (rnic_.PollCq(a_.scq, out_) > 0) {
    }
  });
  EXPECT_EQ(g_allocs, 0);
  EXPECT_EQ(StateOf(qb_), QpState::kErr);
  EXPECT_EQ(StateOf(qa_), QpState::kRts);
}

void NoAlloc::MixedWorkload() {
  Connect(QpType::kRc);
  auto srq = rnic_.CreateSrq(b_.pd, 64, 2);
  ASSERT_TRUE(srq.ok());
  RnicQp ua = MakeQp(a_, QpType::kUd);
  RnicQp ub = MakeQp(b_, QpType::kUd, 64, false, &*srq);
  BringUp(ua, QpType::kUd, a_, b_, 0);
  BringUp(ub, QpType::kUd, b_, a_, 0);
  AddressVector av;
  av.sgid = a_.gid;
  av.dgid = b_.gid;
  auto ah = rnic_.CreateAh(a_.pd, av);
  ASSERT_TRUE(ah.ok());

  std::vector<SendWr> sends;
  for (WrOpcode op :
       {WrOpcode::kSend, WrOpcode::kSendWithImm, WrOpcode::kRdmaWrite,
        WrOpcode::kRdmaWriteWithImm, WrOpcode::kRdmaRead,
        WrOpcode::kAtomicCmpSwp, WrOpcode::kAtomicFetchAdd}) {
    bool atomic =
        op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
    SendWr w = Wr(op, sends.size(), a_, 64, atomic ? 8 : 512);
    w.remote_addr = b_.at(1024);
    w.rkey = b_.mr.rkey;
    sends.push_back(w);
  }
  uint8_t inline_bytes[64] = {1, 2, 3};
  SendWr inl;
  inl.opcode = WrOpcode::kSend;
  inl.send_flags = kSendInline | kSendSignaled;
  inl.inline_data = inline_bytes;
  inl.inline_len = 64;
  sends.push_back(inl);
  std::vector<RecvWr> recvs(8, Rwr(0, b_, 4096, 4096));
  SendWr ud = Wr(WrOpcode::kSend, 99, a_, 0, 100);
  ud.ah = *ah;
  ud.remote_qpn = ub.qpn;
  ud.remote_qkey = Conn{}.qkey;
  RecvWr ud_recv = Rwr(5, b_, 8192, 200);
  SendWr bad = sends[2];
  bad.rkey ^= 1;

  Status st;
  g_allocs = 0;  // what earlier tests counted is theirs
  Counted([&] {
    // RNR first: a send with no receive, then the receive, then the rest.
    rnic_.PostSend(qa_, std::span<const SendWr>(sends.data(), 1), &st);
    Turn();
    now_ += 10'000'000;
    rnic_.PostRecv(qb_, recvs, &st);
    rnic_.PostSend(qa_, std::span<const SendWr>(sends).subspan(1), &st);
    rnic_.PostSrqRecv(*srq, std::span<const RecvWr>(&ud_recv, 1), &st);
    rnic_.PostSend(ua, std::span<const SendWr>(&ud, 1), &st);
    for (int i = 0; i < 10; ++i) Turn();
    while (rnic_.PollCq(a_.scq, out_) > 0) {
    }
    while (rnic_.PollCq(b_.rcq, out_) > 0) {
    }
    // A remote access error: both QPs to ERR, flushes, later posts flushed.
    rnic_.PostSend(qa_, std::span<const SendWr>(&bad, 1), &st);
    rnic_.PostRecv(qb_, std::span<const RecvWr>(recvs.data(), 2), &st);
    Turn();
    rnic_.PostSend(qa_, std::span<const SendWr>(sends.data(), 3), &st);
    Turn();
    while (rnic_.PollCq(a_.scq, out_) > 0) {
    }
    while (rnic_.PollCq(b_.rcq, out_) > 0) {
    }
  });
  EXPECT_EQ(g_allocs, 0);
  EXPECT_EQ(StateOf(qa_), QpState::kErr);
  // The workload really ran: the UD message and the writes landed.
  EXPECT_EQ(0, std::memcmp(&b_.buf[8192 + 40], &a_.buf[0], 100));
  if (tick_ != 0) {
    EXPECT_GT(rnic_.wire_bytes(), 0u);
  }
}

// On a fabric (docs/reliability.md §7.1): UC and UD messages cut into
// packets, lost, reordered and duplicated on the way, executed packet by
// packet at the other host, and hostile bytes dropped, all without an
// allocation on either host.
TEST_F(NoAlloc, FabricDataPathNeverAllocates) {
  fabric::InprocFabric fab;
  fabric::FaultConfig fc;
  fc.loss = 0.1;
  fc.p_reorder = 0.1;
  fc.reorder_delay_ns = 2000;
  fc.p_dup = 0.1;
  fabric::FaultyFabric port_a(fab.AddPort(), fc, 3);
  fabric::Fabric* port_b = fab.AddPort();
  fabric::Fabric* raw = fab.AddPort();
  SoftRnic ha(limits_, [this] { return now_; }, &port_a);
  SoftRnic hb(limits_, [this] { return now_; }, port_b);
  struct Host {
    SoftRnic* r;
    Vm vm;
  } hosts[2] = {{&ha, {}}, {&hb, {}}};
  for (uint8_t i = 0; i < 2; ++i) {
    Vm& vm = hosts[i].vm;
    SoftRnic& r = *hosts[i].r;
    vm.gid = Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(10 + i)};
    ASSERT_EQ(r.AddGid(vm.gid), Status::kOk);
    vm.pd = *r.AllocPd();
    vm.scq = *r.CreateCq(1024);
    vm.rcq = *r.CreateCq(1024);
    vm.buf.assign(kBufSize, static_cast<uint8_t>(i));
    vm.iova = (uint64_t{i} + 1) << 32;
    vm.mr = *r.RegMr(vm.pd, vm.buf.data(), kBufSize, vm.iova, kAllAccess);
  }
  Vm& va = hosts[0].vm;
  Vm& vb = hosts[1].vm;
  auto create = [&](SoftRnic& r, Vm& vm, QpType t) {
    QpInit init;
    init.type = t;
    init.pd = vm.pd;
    init.send_cq = vm.scq;
    init.recv_cq = vm.rcq;
    init.caps = QpCaps{64, 64, 4, 4, 0};
    return *r.CreateQp(init);
  };
  auto bring_up = [&](SoftRnic& r, RnicQp q, QpType t, const Gid& self,
                      const Gid& peer, uint32_t peer_qpn) {
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = kAllAccess;
    a.qkey = 0x1111;
    const bool ud = t == QpType::kUd;
    ASSERT_EQ(r.ModifyQp(q, a, kQpState | kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags)),
              Status::kOk);
    a.state = QpState::kRtr;
    a.av.sgid = self;
    a.av.dgid = peer;
    a.path_mtu_bytes = 1024;
    a.dest_qpn = peer_qpn;
    if (t == QpType::kRc) {
      a.max_dest_rd_atomic = 4;
      ASSERT_EQ(r.ModifyQp(q, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                     kQpMaxDestRdAtomic | kQpMinRnrTimer),
                Status::kOk);
      a.state = QpState::kRts;
      a.timeout = 4;
      a.retry_cnt = 7;
      a.rnr_retry = 7;
      ASSERT_EQ(r.ModifyQp(q, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                     kQpRnrRetry | kQpMaxQpRdAtomic),
                Status::kOk);
      return;
    }
    ASSERT_EQ(r.ModifyQp(q, a, kQpState | (ud ? 0u : kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn)),
              Status::kOk);
    a.state = QpState::kRts;
    ASSERT_EQ(r.ModifyQp(q, a, kQpState | kQpSqPsn), Status::kOk);
  };
  RnicQp qa = create(ha, va, QpType::kUc);
  RnicQp qb = create(hb, vb, QpType::kUc);
  RnicQp ua = create(ha, va, QpType::kUd);
  RnicQp ub = create(hb, vb, QpType::kUd);
  RnicQp ra = create(ha, va, QpType::kRc);
  RnicQp rb = create(hb, vb, QpType::kRc);
  bring_up(ha, qa, QpType::kUc, va.gid, vb.gid, qb.qpn);
  bring_up(hb, qb, QpType::kUc, vb.gid, va.gid, qa.qpn);
  bring_up(ha, ua, QpType::kUd, va.gid, va.gid, 0);
  bring_up(hb, ub, QpType::kUd, vb.gid, vb.gid, 0);
  bring_up(ha, ra, QpType::kRc, va.gid, vb.gid, rb.qpn);
  bring_up(hb, rb, QpType::kRc, vb.gid, va.gid, ra.qpn);
  AddressVector av;
  av.sgid = va.gid;
  av.dgid = vb.gid;
  RnicAh ah = *ha.CreateAh(va.pd, av);

  SendWr send = Wr(WrOpcode::kSendWithImm, 1, va, 0, 3000);
  SendWr write = Wr(WrOpcode::kRdmaWriteWithImm, 2, va, 4096, 2500);
  write.remote_addr = vb.at(32768);
  write.rkey = vb.mr.rkey;
  SendWr ud = Wr(WrOpcode::kSend, 3, va, 0, 500);
  ud.ah = ah;
  ud.remote_qpn = ub.qpn;
  ud.remote_qkey = 0x1111;
  SendWr rc_write = write;
  rc_write.opcode = WrOpcode::kRdmaWrite;
  SendWr rc_read = Wr(WrOpcode::kRdmaRead, 4, va, 20000, 3000);
  rc_read.remote_addr = vb.at(0);
  rc_read.rkey = vb.mr.rkey;
  SendWr rc_atomic = Wr(WrOpcode::kAtomicFetchAdd, 5, va, 24000, 8);
  rc_atomic.remote_addr = vb.at(40000);
  rc_atomic.rkey = vb.mr.rkey;
  rc_atomic.compare_add = 1;
  const SendWr rc_ops[] = {rc_write, rc_read, rc_atomic, send};
  std::memset(&vb.buf[40000], 0, 8);  // the atomics' counter
  const RecvWr recv = Rwr(7, vb, 0, 8192);
  const RecvWr ud_recv = Rwr(8, vb, 16384, 1000);
  const std::vector<uint8_t> junk(200, 0xab);
  Completion out[64];
  uint64_t received = 0;
  g_allocs = 0;
  Counted([&] {
    Status st;
    for (int round = 0; round < 200; ++round) {
      hb.PostRecv(qb, std::span<const RecvWr>(&recv, 1), &st);
      hb.PostRecv(ub, std::span<const RecvWr>(&ud_recv, 1), &st);
      ha.PostSend(qa, std::span<const SendWr>(&send, 1), &st);
      ha.PostSend(qa, std::span<const SendWr>(&write, 1), &st);
      ha.PostSend(ua, std::span<const SendWr>(&ud, 1), &st);
      hb.PostRecv(rb, std::span<const RecvWr>(&recv, 1), &st);
      ha.PostSend(ra, rc_ops, &st);
      raw->Send(junk, vb.gid, now_);  // malformed: dropped and counted
      for (int i = 0; i < 40; ++i) {
        ha.Progress();
        hb.Progress();
        now_ += 500;
      }
      while (ha.PollCq(va.scq, out) > 0) {
      }
      int n;
      while ((n = hb.PollCq(vb.rcq, out)) > 0) received += n;
    }
  });
  EXPECT_EQ(g_allocs, 0);
  // It did run: messages arrived, some were dropped whole, junk counted.
  EXPECT_GT(received, 100u);
  EXPECT_GT(hb.net_stats().uc_messages_dropped, 0u);
  EXPECT_EQ(hb.net_stats().drops(NetDrop::kVersion), 200u);
  EXPECT_GT(port_a.fault_stats().duplicated, 0u);
  EXPECT_GT(ha.net_stats().retransmitted, 0u);  // RC recovered losses
  uint64_t adds = 0;
  std::memcpy(&adds, &vb.buf[40000], 8);
  EXPECT_GT(adds, 100u);  // most of the 200 atomics done (once each)
  EXPECT_LE(adds, 200u);
}


// Control calls the engine runs on the data-path thread: with their queue
// memory prepared (Rnic::Prepare*), CreateQp, CreateCq, ResizeCq and
// CreateSrq allocate no queue-sized block there, and Destroy* free none:
// what they let go of is freed by Reclaim, on the control thread.
TEST_F(NoAlloc, PreparedControlCallsMoveNoQueueMemoryOnTheDataPath) {
  const QpCaps caps{1023, 1023, 4, 4, 64};
  auto counted_large = [&](auto f) {
    g_large_allocs = g_large_frees = 0;
    Counted(f);
    return std::pair{g_large_allocs, g_large_frees};
  };
  rnic_.PrepareCq(2047);
  rnic_.PrepareCq(4095);
  rnic_.PrepareQp(caps);
  rnic_.PrepareSrq(511, 4);
  Result<RnicCq> cq = Status::kInvalid;
  Result<RnicQp> qp = Status::kInvalid;
  Result<RnicSrq> srq = Status::kInvalid;
  auto [allocs, frees] = counted_large([&] {
    cq = rnic_.CreateCq(2047);
    ASSERT_TRUE(cq.ok());
    ASSERT_EQ(rnic_.ResizeCq(*cq, 4095), Status::kOk);
    QpInit init;
    init.type = QpType::kRc;
    init.pd = a_.pd;
    init.send_cq = init.recv_cq = *cq;
    init.caps = caps;
    qp = rnic_.CreateQp(init);
    srq = rnic_.CreateSrq(a_.pd, 511, 4);
  });
  ASSERT_TRUE(qp.ok() && srq.ok());
  EXPECT_EQ(allocs, 0) << "queue memory allocated on the calling thread";
  EXPECT_EQ(frees, 0) << "the CQ's old ring freed on the calling thread";
  std::tie(allocs, frees) = counted_large([&] {
    ASSERT_EQ(rnic_.DestroyQp(*qp), Status::kOk);
    ASSERT_EQ(rnic_.DestroySrq(*srq), Status::kOk);
    ASSERT_EQ(rnic_.DestroyCq(*cq), Status::kOk);
  });
  EXPECT_EQ(frees, 0) << "queue memory freed on the calling thread";
  std::tie(allocs, frees) = counted_large([&] { rnic_.Reclaim(); });
  EXPECT_GE(frees, 5) << "Reclaim frees the rings (SQ, inline pool, RQ, SRQ, CQs)";

  // Without preparation the same calls allocate (the fallback works).
  std::tie(allocs, frees) = counted_large([&] {
    cq = rnic_.CreateCq(2047);
    ASSERT_TRUE(cq.ok());
    ASSERT_EQ(rnic_.DestroyCq(*cq), Status::kOk);
  });
  EXPECT_GT(allocs, 0);
  rnic_.Reclaim();
}

}  // namespace
}  // namespace vrdma::testing
