// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/engine/wqe_decoder.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <functional>
#include <vector>

namespace vrdma::engine {
namespace {

// A send WQE laid out as librxe writes it.
class SendWqe {
 public:
  explicit SendWqe(uint32_t elem = 512) : b_(elem, 0) {}
  SendWqe& Set32(uint32_t off, uint32_t v) {
    std::memcpy(&b_[off], &v, 4);
    return *this;
  }
  SendWqe& Set64(uint32_t off, uint64_t v) {
    std::memcpy(&b_[off], &v, 8);
    return *this;
  }
  SendWqe& Sge(int i, uint64_t addr, uint32_t len, uint32_t lkey) {
    uint32_t o = kSendWqeHeaderBytes + i * 16;
    Set64(o, addr);
    Set32(o + 8, len);
    return Set32(o + 12, lkey);
  }
  std::vector<uint8_t>& bytes() { return b_; }

 private:
  std::vector<uint8_t> b_;
};

SendQueueLimits Limits(QpType t = QpType::kRc) {
  SendQueueLimits l;
  l.type = t;
  l.max_sge = 4;
  l.max_inline = 128;
  l.elem_size = 512;
  l.max_msg_sz = 1 << 20;
  return l;
}

SendWqe GoodWrite() {
  SendWqe w;
  w.Set64(send_wqe::kWrId, 0xabcdef)
      .Set32(send_wqe::kOpcode, IB_UVERBS_WR_RDMA_WRITE)
      .Set32(send_wqe::kSendFlags, kSendSignaled)
      .Set64(send_wqe::kRdmaRemoteAddr, 0x5000)
      .Set32(send_wqe::kRdmaRkey, 77)
      .Set32(send_wqe::kDmaNumSge, 2)
      .Sge(0, 0x1000, 100, 5)
      .Sge(1, 0x2000, 28, 6);
  return w;
}

TEST(WqeDecoderTest, DecodesRdmaWrite) {
  SendWqe w = GoodWrite();
  DecodedSend d;
  ASSERT_EQ(DecodeSendWqe(w.bytes(), Limits(), &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.wr_id, 0xabcdefu);
  EXPECT_EQ(d.wr.opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(d.wr.send_flags, uint32_t{kSendSignaled});
  EXPECT_EQ(d.wr.remote_addr, 0x5000u);
  EXPECT_EQ(d.wr.rkey, 77u);
  ASSERT_EQ(d.wr.num_sge, 2);
  EXPECT_EQ(d.wr.sge[0].addr, 0x1000u);
  EXPECT_EQ(d.wr.sge[0].length, 100u);
  EXPECT_EQ(d.wr.sge[0].lkey, 5u);
  EXPECT_EQ(d.wr.sge[1].lkey, 6u);
  EXPECT_EQ(d.wr.total_length(), 128u);
}

TEST(WqeDecoderTest, DecodesInlineSendWithImm) {
  SendWqe w;
  w.Set64(send_wqe::kWrId, 9)
      .Set32(send_wqe::kOpcode, IB_UVERBS_WR_SEND_WITH_IMM)
      .Set32(send_wqe::kSendFlags, kSendInline | kSendSolicited)
      .Set32(send_wqe::kImmData, 0x11223344)
      .Set32(send_wqe::kDmaLength, 5)
      .Set32(send_wqe::kDmaNumSge, 3);  // librxe leaves the source count here
  std::memcpy(&w.bytes()[kSendWqeHeaderBytes], "hello", 5);
  DecodedSend d;
  ASSERT_EQ(DecodeSendWqe(w.bytes(), Limits(), &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.inline_len, 5);
  EXPECT_EQ(d.wr.num_sge, 0);
  EXPECT_EQ(d.wr.imm_data, 0x11223344u);
  EXPECT_EQ(std::memcmp(d.wr.inline_data, "hello", 5), 0);
}

TEST(WqeDecoderTest, DecodesUdSendAndAtomic) {
  SendWqe u;
  u.Set32(send_wqe::kOpcode, IB_UVERBS_WR_SEND)
      .Set32(send_wqe::kUdRemoteQpn, 0x123456)
      .Set32(send_wqe::kUdRemoteQkey, 0x80000001)
      .Set32(send_wqe::kUdAhNum, 0x10001)
      .Set32(send_wqe::kDmaNumSge, 1)
      .Sge(0, 0x100, 64, 1);
  DecodedSend d;
  ASSERT_EQ(DecodeSendWqe(u.bytes(), Limits(QpType::kUd), &d),
            WcStatus::kSuccess);
  EXPECT_EQ(d.ah_handle, 0x10001u);
  EXPECT_EQ(d.wr.remote_qpn, 0x123456u);
  EXPECT_EQ(d.wr.remote_qkey, 0x80000001u);

  SendWqe a;
  a.Set32(send_wqe::kOpcode, IB_UVERBS_WR_ATOMIC_CMP_AND_SWP)
      .Set64(send_wqe::kAtomicRemoteAddr, 0x8008)
      .Set64(send_wqe::kAtomicCompareAdd, 5)
      .Set64(send_wqe::kAtomicSwap, 6)
      .Set32(send_wqe::kAtomicRkey, 9)
      .Set32(send_wqe::kDmaNumSge, 1)
      .Sge(0, 0x100, 8, 1);
  DecodedSend da;
  ASSERT_EQ(DecodeSendWqe(a.bytes(), Limits(), &da), WcStatus::kSuccess);
  EXPECT_EQ(da.wr.compare_add, 5u);
  EXPECT_EQ(da.wr.swap, 6u);
  EXPECT_EQ(da.wr.rkey, 9u);
  EXPECT_EQ(da.wr.remote_addr, 0x8008u);
}

// Every field bad, one at a time, starting from a valid WQE.
struct BadCase {
  const char* name;
  QpType type;
  std::function<void(SendWqe&)> mutate;
  WcStatus want;
};

TEST(WqeDecoderTest, EveryFieldBadOneAtATime) {
  const BadCase cases[] = {
      {"opcode 7 (local inv)", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kOpcode, 7); },
       WcStatus::kLocQpOpErr},
      {"opcode huge", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kOpcode, 0xffffffff); },
       WcStatus::kLocQpOpErr},
      {"bind mw", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_BIND_MW); },
       WcStatus::kLocQpOpErr},
      {"write on UD", QpType::kUd,
       [](SendWqe& w) { w.Set32(send_wqe::kUdAhNum, 1); },
       WcStatus::kLocQpOpErr},
      {"read on UC", QpType::kUc,
       [](SendWqe& w) { w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_RDMA_READ); },
       WcStatus::kLocQpOpErr},
      {"atomic on UC", QpType::kUc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD);
       },
       WcStatus::kLocQpOpErr},
      {"unknown send flag", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kSendFlags, kSendSignaled | 0x10); },
       WcStatus::kLocQpOpErr},
      {"high send flag", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kSendFlags, 0x80000000u); },
       WcStatus::kLocQpOpErr},
      {"num_sge above max", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kDmaNumSge, 5); },
       WcStatus::kLocQpOpErr},
      {"num_sge huge", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kDmaNumSge, 0xffffffff); },
       WcStatus::kLocQpOpErr},
      {"rkey zero", QpType::kRc,
       [](SendWqe& w) { w.Set32(send_wqe::kRdmaRkey, 0); },
       WcStatus::kLocProtErr},
      {"inline too long", QpType::kRc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kSendFlags, kSendInline)
             .Set32(send_wqe::kDmaLength, 129);
       },
       WcStatus::kLocLenErr},
      {"inline huge", QpType::kRc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kSendFlags, kSendInline)
             .Set32(send_wqe::kDmaLength, 0xffffffff);
       },
       WcStatus::kLocLenErr},
      {"inline read", QpType::kRc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_RDMA_READ)
             .Set32(send_wqe::kSendFlags, kSendInline);
       },
       WcStatus::kLocQpOpErr},
      {"total above max_msg", QpType::kRc,
       [](SendWqe& w) { w.Sge(1, 0, (1u << 20) - 99, 6); },
       WcStatus::kLocLenErr},
      {"sge lengths sum beyond 2^32", QpType::kRc,
       [](SendWqe& w) { w.Sge(0, 0, 0xffffffff, 5).Sge(1, 0, 0xffffffff, 6); },
       WcStatus::kLocLenErr},
      {"atomic unaligned", QpType::kRc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_ATOMIC_CMP_AND_SWP)
             .Set64(send_wqe::kAtomicRemoteAddr, 0x5004)
             .Set32(send_wqe::kAtomicRkey, 1)
             .Set32(send_wqe::kDmaNumSge, 1)
             .Sge(0, 0, 8, 1);
       },
       WcStatus::kLocQpOpErr},
      {"atomic two sges", QpType::kRc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD)
             .Set32(send_wqe::kAtomicRkey, 1)
             .Set64(send_wqe::kAtomicRemoteAddr, 0x5000);
       },
       WcStatus::kLocLenErr},
      {"atomic 4 bytes", QpType::kRc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD)
             .Set32(send_wqe::kAtomicRkey, 1)
             .Set64(send_wqe::kAtomicRemoteAddr, 0x5000)
             .Set32(send_wqe::kDmaNumSge, 1)
             .Sge(0, 0, 4, 1);
       },
       WcStatus::kLocLenErr},
      {"atomic no rkey", QpType::kRc,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD)
             .Set32(send_wqe::kAtomicRkey, 0)
             .Set32(send_wqe::kDmaNumSge, 1)
             .Sge(0, 0, 8, 1);
       },
       WcStatus::kLocProtErr},
      {"ud no ah", QpType::kUd,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_SEND)
             .Set32(send_wqe::kUdAhNum, 0);
       },
       WcStatus::kLocQpOpErr},
      {"ud qpn 25 bits", QpType::kUd,
       [](SendWqe& w) {
         w.Set32(send_wqe::kOpcode, IB_UVERBS_WR_SEND)
             .Set32(send_wqe::kUdAhNum, 1)
             .Set32(send_wqe::kUdRemoteQpn, 1u << 24);
       },
       WcStatus::kLocQpOpErr},
  };
  for (const BadCase& c : cases) {
    SendWqe w = GoodWrite();
    c.mutate(w);
    DecodedSend d;
    EXPECT_EQ(DecodeSendWqe(w.bytes(), Limits(c.type), &d), c.want) << c.name;
  }
}

TEST(WqeDecoderTest, ElementSizeBoundsPayload) {
  // A 256-byte element has room for 3 SGEs (208 + 48) even if max_sge is 4.
  SendQueueLimits l = Limits();
  l.elem_size = 256;
  SendWqe w = GoodWrite();
  w.Set32(send_wqe::kDmaNumSge, 3);
  DecodedSend d;
  EXPECT_EQ(DecodeSendWqe(std::span(w.bytes()).first(256), l, &d),
            WcStatus::kSuccess);
  w.Set32(send_wqe::kDmaNumSge, 4);
  EXPECT_EQ(DecodeSendWqe(std::span(w.bytes()).first(256), l, &d),
            WcStatus::kLocQpOpErr);
  // Inline beyond the element.
  l.max_inline = 128;
  l.elem_size = 240;
  w.Set32(send_wqe::kSendFlags, kSendInline).Set32(send_wqe::kDmaLength, 33);
  EXPECT_EQ(DecodeSendWqe(std::span(w.bytes()).first(240), l, &d),
            WcStatus::kLocLenErr);
}

TEST(WqeDecoderTest, ShortBufferRejected) {
  SendWqe w = GoodWrite();
  DecodedSend d;
  EXPECT_EQ(DecodeSendWqe(std::span(w.bytes()).first(100), Limits(), &d),
            WcStatus::kLocLenErr);
  EXPECT_EQ(DecodeSendWqe(std::span(w.bytes()).first(208 + 20), Limits(), &d),
            WcStatus::kLocLenErr);
}

TEST(WqeDecoderTest, NoStaleFieldsAcrossDecodes) {
  DecodedSend d;
  SendWqe w = GoodWrite();
  ASSERT_EQ(DecodeSendWqe(w.bytes(), Limits(), &d), WcStatus::kSuccess);
  SendWqe s;
  s.Set32(send_wqe::kOpcode, IB_UVERBS_WR_SEND).Set32(send_wqe::kDmaNumSge, 0);
  ASSERT_EQ(DecodeSendWqe(s.bytes(), Limits(), &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.rkey, 0u);
  EXPECT_EQ(d.wr.remote_addr, 0u);
  EXPECT_EQ(d.wr.num_sge, 0);
}

TEST(WqeDecoderTest, RecvWqe) {
  std::vector<uint8_t> b(128, 0);
  uint64_t wr_id = 42;
  uint32_t n = 2;
  std::memcpy(&b[0], &wr_id, 8);
  std::memcpy(&b[recv_wqe::kDmaNumSge], &n, 4);
  uint64_t addr = 0x3000;
  uint32_t len = 64, lkey = 7;
  std::memcpy(&b[40 + 16], &addr, 8);
  std::memcpy(&b[40 + 24], &len, 4);
  std::memcpy(&b[40 + 28], &lkey, 4);
  RecvQueueLimits l{2, 128};
  RecvWr wr;
  ASSERT_EQ(DecodeRecvWqe(b, l, &wr), WcStatus::kSuccess);
  EXPECT_EQ(wr.wr_id, 42u);
  EXPECT_EQ(wr.num_sge, 2);
  EXPECT_EQ(wr.sge[1].addr, 0x3000u);
  EXPECT_EQ(wr.sge[1].lkey, 7u);
  // Too many SGEs for the queue, for the element, absurd count.
  for (uint32_t bad : {3u, 0xffffffffu}) {
    std::memcpy(&b[recv_wqe::kDmaNumSge], &bad, 4);
    EXPECT_EQ(DecodeRecvWqe(b, l, &wr), WcStatus::kLocLenErr) << bad;
  }
  RecvQueueLimits small{4, 64};  // room for one SGE
  n = 2;
  std::memcpy(&b[recv_wqe::kDmaNumSge], &n, 4);
  EXPECT_EQ(DecodeRecvWqe(std::span(b).first(64), small, &wr),
            WcStatus::kLocLenErr);
}

// ------------------------------------------------------------ flushes

// A flush reports, for any bytes a guest may write, exactly the wr_id and
// opcode the full decode would put in the WQE's error CQE.
TEST(WqeDecoderTest, SendFlushAgreesWithTheFullDecode) {
  const uint32_t opcodes[] = {0,    1,    2,    3,          4,         5,
                              6,    7,    8,    9,          10,        0x40,
                              0x41, 0xff, 0x100, 0x80000000, 0xffffffff};
  for (QpType type : {QpType::kRc, QpType::kUc, QpType::kUd}) {
    for (bool atomics : {true, false}) {
      SendQueueLimits l = Limits(type);
      l.atomics = atomics;
      for (uint32_t op : opcodes) {
        // Garbage everywhere else: the flush must not care.
        SendWqe w;
        for (uint32_t i = 0; i < 512; i += 4) w.Set32(i, 0xa5a5a5a5u ^ i);
        w.Set64(send_wqe::kWrId, 0x1122334455667788u ^ op)
            .Set32(send_wqe::kOpcode, op);
        DecodedSend d;
        (void)DecodeSendWqe(w.bytes(), l, &d);
        const FlushedWqe f = DecodeSendFlush(
            std::span<const uint8_t, kSendFlushBytes>(w.bytes().data(),
                                                      kSendFlushBytes),
            l);
        EXPECT_EQ(f.wr_id, d.wr.wr_id) << op;
        EXPECT_EQ(f.opcode, SendCompletionOpcode(d.wr.opcode))
            << "op " << op << " type " << int(type) << " atomics " << atomics;
      }
    }
  }
}

TEST(WqeDecoderTest, SendFlushReportsOnlyOpcodesTheQpMayUse) {
  auto flush = [](uint32_t op, SendQueueLimits l) {
    std::array<uint8_t, kSendFlushBytes> b{};
    const uint64_t wr_id = 0xfeedu;
    std::memcpy(&b[send_wqe::kWrId], &wr_id, 8);
    std::memcpy(&b[send_wqe::kOpcode], &op, 4);
    FlushedWqe f = DecodeSendFlush(b, l);
    EXPECT_EQ(f.wr_id, 0xfeedu);
    return f.opcode;
  };
  EXPECT_EQ(flush(IB_UVERBS_WR_RDMA_READ, Limits()), WcOpcode::kRdmaRead);
  EXPECT_EQ(flush(IB_UVERBS_WR_RDMA_WRITE_WITH_IMM, Limits(QpType::kUc)),
            WcOpcode::kRdmaWrite);
  EXPECT_EQ(flush(IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD, Limits()),
            WcOpcode::kFetchAdd);
  // Not for the QP's type, atomics off, host-only, unknown: kSend, as the
  // error CQE of a WQE the decoder rejects.
  EXPECT_EQ(flush(IB_UVERBS_WR_RDMA_WRITE, Limits(QpType::kUd)),
            WcOpcode::kSend);
  EXPECT_EQ(flush(IB_UVERBS_WR_RDMA_READ, Limits(QpType::kUc)),
            WcOpcode::kSend);
  SendQueueLimits no_atomics = Limits();
  no_atomics.atomics = false;
  EXPECT_EQ(flush(IB_UVERBS_WR_ATOMIC_CMP_AND_SWP, no_atomics),
            WcOpcode::kSend);
  EXPECT_EQ(flush(static_cast<uint32_t>(WrOpcode::kWait), Limits()),
            WcOpcode::kSend);
  EXPECT_EQ(flush(0xffffffffu, Limits()), WcOpcode::kSend);
  // Windows: their own completion opcodes when offered, kSend when not.
  SendQueueLimits windows = Limits();
  windows.windows = true;
  EXPECT_EQ(flush(IB_UVERBS_WR_BIND_MW, windows), WcOpcode::kBindMw);
  EXPECT_EQ(flush(IB_UVERBS_WR_LOCAL_INV, windows), WcOpcode::kLocalInv);
  EXPECT_EQ(flush(IB_UVERBS_WR_SEND_WITH_INV, windows), WcOpcode::kSend);
  EXPECT_EQ(flush(IB_UVERBS_WR_BIND_MW, Limits()), WcOpcode::kSend);
}

// Memory windows (docs/virtio-rdma.md §4.7): the three opcodes only with
// SendQueueLimits::windows and on RC/UC QPs; BIND_MW's fields from wr.mw,
// LOCAL_INV's and SEND_WITH_INV's rkey from ex; local operations carry no
// data whatever the WQE says.
TEST(WqeDecoderTest, WindowOpcodes) {
  SendQueueLimits l = Limits();
  l.windows = true;
  SendWqe bind;
  bind.Set64(send_wqe::kWrId, 9)
      .Set32(send_wqe::kOpcode, IB_UVERBS_WR_BIND_MW)
      .Set32(send_wqe::kSendFlags, kSendSignaled | kSendInline)
      .Set64(send_wqe::kMwAddr, 0x7000)
      .Set64(send_wqe::kMwLength, 0x2000)
      .Set32(send_wqe::kMwMrLkey, 0x11)
      .Set32(send_wqe::kMwMwRkey, 0x800123)
      .Set32(send_wqe::kMwRkey, 0x800145)
      .Set32(send_wqe::kMwAccess, kAccessRemoteWrite)
      .Set32(send_wqe::kDmaNumSge, 3)
      .Sge(0, 0x1000, 100, 5);
  DecodedSend d;
  ASSERT_EQ(DecodeSendWqe(bind.bytes(), l, &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.opcode, WrOpcode::kBindMw);
  EXPECT_EQ(d.wr.bind.addr, 0x7000u);
  EXPECT_EQ(d.wr.bind.length, 0x2000u);
  EXPECT_EQ(d.wr.bind.mr_lkey, 0x11u);
  EXPECT_EQ(d.wr.bind.mw_rkey, 0x800123u);
  EXPECT_EQ(d.wr.bind.rkey, 0x800145u);
  EXPECT_EQ(d.wr.bind.access, uint32_t{kAccessRemoteWrite});
  EXPECT_EQ(d.wr.num_sge, 0);
  EXPECT_EQ(d.wr.send_flags, uint32_t{kSendSignaled});
  EXPECT_EQ(d.payload_bytes, 0u);

  SendWqe inv;
  inv.Set32(send_wqe::kOpcode, IB_UVERBS_WR_LOCAL_INV).Set32(send_wqe::kInvalidateRkey, 0x800145);
  ASSERT_EQ(DecodeSendWqe(inv.bytes(), l, &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.invalidate_rkey, 0x800145u);
  EXPECT_EQ(d.wr.bind.mw_rkey, 0u);  // nothing left over from the bind

  SendWqe swi;
  swi.Set32(send_wqe::kOpcode, IB_UVERBS_WR_SEND_WITH_INV)
      .Set32(send_wqe::kInvalidateRkey, 0x800166)
      .Set32(send_wqe::kDmaNumSge, 1)
      .Sge(0, 0x1000, 64, 5);
  ASSERT_EQ(DecodeSendWqe(swi.bytes(), l, &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.invalidate_rkey, 0x800166u);
  EXPECT_EQ(d.wr.num_sge, 1);
  EXPECT_EQ(d.wr.imm_data, 0u);

  // Not offered, or not for the QP type: the opcode is refused.
  EXPECT_EQ(DecodeSendWqe(bind.bytes(), Limits(), &d), WcStatus::kLocQpOpErr);
  SendQueueLimits ud = Limits(QpType::kUd);
  ud.windows = true;
  EXPECT_EQ(DecodeSendWqe(inv.bytes(), ud, &d), WcStatus::kLocQpOpErr);
  SendQueueLimits uc = Limits(QpType::kUc);
  uc.windows = true;
  EXPECT_EQ(DecodeSendWqe(bind.bytes(), uc, &d), WcStatus::kSuccess);
}

// Fast registration (docs/virtio-rdma.md §4.8): REG_MR only with
// SendQueueLimits::fast_reg (a kernel QP, RC or UC), its fields from wr.mw
// (the key byte from rkey's low 8 bits), no data; LOCAL_INV and
// SEND_WITH_INV also with fast_reg alone; BIND_MW still needs windows.
TEST(WqeDecoderTest, FastRegistrationOpcodes) {
  SendQueueLimits l = Limits();
  l.fast_reg = true;
  SendWqe reg;
  reg.Set64(send_wqe::kWrId, 4)
      .Set32(send_wqe::kOpcode, VIRTIO_RDMA_WR_REG_MR)
      .Set32(send_wqe::kSendFlags, kSendSignaled)
      .Set64(send_wqe::kMwAddr, 0xffff888000001200)
      .Set64(send_wqe::kMwLength, 0x3000)
      .Set32(send_wqe::kMwMrLkey, 0x1234500)
      .Set32(send_wqe::kMwRkey, 0xabcdef42)
      .Set32(send_wqe::kMwAccess, kAccessLocalWrite | kAccessRemoteRead)
      .Set32(send_wqe::kDmaNumSge, 2)
      .Sge(0, 0x1000, 100, 5);
  DecodedSend d;
  ASSERT_EQ(DecodeSendWqe(reg.bytes(), l, &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.opcode, WrOpcode::kRegMr);
  EXPECT_EQ(d.wr.reg.iova, 0xffff888000001200u);
  EXPECT_EQ(d.wr.reg.length, 0x3000u);
  EXPECT_EQ(d.wr.reg.mr_lkey, 0x1234500u);
  EXPECT_EQ(d.wr.reg.key, 0x42);
  EXPECT_EQ(d.wr.reg.access, uint32_t{kAccessLocalWrite | kAccessRemoteRead});
  EXPECT_EQ(d.wr.reg.pages, nullptr);  // fast_reg.h's, in the data path
  EXPECT_EQ(d.wr.num_sge, 0);
  EXPECT_EQ(d.payload_bytes, 0u);

  SendWqe inv;
  inv.Set32(send_wqe::kOpcode, IB_UVERBS_WR_LOCAL_INV).Set32(send_wqe::kInvalidateRkey, 0x1234542);
  ASSERT_EQ(DecodeSendWqe(inv.bytes(), l, &d), WcStatus::kSuccess);
  EXPECT_EQ(d.wr.reg.mr_lkey, 0u);  // nothing left over from the registration
  SendWqe bind;
  bind.Set32(send_wqe::kOpcode, IB_UVERBS_WR_BIND_MW);
  EXPECT_EQ(DecodeSendWqe(bind.bytes(), l, &d), WcStatus::kLocQpOpErr);

  // Not a kernel QP of the feature, or a UD QP: an unknown opcode, whose
  // flush reports kSend; with it, REG_MR's own completion opcode.
  EXPECT_EQ(DecodeSendWqe(reg.bytes(), Limits(), &d), WcStatus::kLocQpOpErr);
  SendQueueLimits ud = Limits(QpType::kUd);
  ud.fast_reg = true;
  EXPECT_EQ(DecodeSendWqe(reg.bytes(), ud, &d), WcStatus::kLocQpOpErr);
  auto flush = [&](const SendQueueLimits& limits) {
    return DecodeSendFlush(std::span<const uint8_t, kSendFlushBytes>(reg.bytes().data(),
                                                                     kSendFlushBytes),
                           limits)
        .opcode;
  };
  EXPECT_EQ(flush(l), WcOpcode::kRegMr);
  EXPECT_EQ(flush(Limits()), WcOpcode::kSend);
}

TEST(WqeDecoderTest, RecvFlushAgreesWithTheFullDecode) {
  std::vector<uint8_t> b(128, 0xa5);
  const uint64_t wr_id = 0x0102030405060708u;
  std::memcpy(&b[recv_wqe::kWrId], &wr_id, 8);
  for (uint32_t n : {0u, 1u, 3u, 0xffffffffu}) {  // good and hostile counts
    std::memcpy(&b[recv_wqe::kDmaNumSge], &n, 4);
    RecvWr wr;
    (void)DecodeRecvWqe(b, RecvQueueLimits{2, 128}, &wr);
    const FlushedWqe f = DecodeRecvFlush(
        std::span<const uint8_t, kRecvFlushBytes>(b.data(), kRecvFlushBytes));
    EXPECT_EQ(f.wr_id, wr.wr_id) << n;
    EXPECT_EQ(f.wr_id, wr_id);
    EXPECT_EQ(f.opcode, WcOpcode::kRecv);
  }
}

// rnic.h's WR -> WC table, in the ABI's numbers (what the guest reads).
static_assert(static_cast<uint32_t>(SendCompletionOpcode(
                  WrOpcode::kRdmaWrite)) == IB_UVERBS_WC_RDMA_WRITE);
static_assert(static_cast<uint32_t>(SendCompletionOpcode(
                  WrOpcode::kRdmaWriteWithImm)) == IB_UVERBS_WC_RDMA_WRITE);
static_assert(static_cast<uint32_t>(SendCompletionOpcode(WrOpcode::kSend)) ==
              IB_UVERBS_WC_SEND);
static_assert(static_cast<uint32_t>(SendCompletionOpcode(
                  WrOpcode::kSendWithImm)) == IB_UVERBS_WC_SEND);
static_assert(static_cast<uint32_t>(SendCompletionOpcode(
                  WrOpcode::kRdmaRead)) == IB_UVERBS_WC_RDMA_READ);
static_assert(static_cast<uint32_t>(SendCompletionOpcode(
                  WrOpcode::kAtomicCmpSwp)) == IB_UVERBS_WC_COMP_SWAP);
static_assert(static_cast<uint32_t>(SendCompletionOpcode(
                  WrOpcode::kAtomicFetchAdd)) == IB_UVERBS_WC_FETCH_ADD);
static_assert(static_cast<uint32_t>(SendCompletionOpcode(WrOpcode::kRegMr)) ==
              VIRTIO_RDMA_WC_REG_MR);
static_assert(SendCompletionOpcode(WrOpcode::kWait) == WcOpcode::kSend);
static_assert(SendCompletionOpcode(WrOpcode::kEnable) == WcOpcode::kSend);

}  // namespace
}  // namespace vrdma::engine
