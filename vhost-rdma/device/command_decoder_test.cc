// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The decoder against valid requests (decoded fields are checked) and
// against hostile ones: every truncation of every command, page lists of the
// wrong length, overflowing counts, bad enums, unknown bits, wrapped ranges,
// unaligned pages. Every hostile case must give kInvalid, never a crash
// (run under VRDMA_SANITIZE=ON to also catch out-of-bounds reads): from the
// decoder (syntax) or from the engine's checks of the decoded request
// (meaning: ring geometry, MR access and coverage, queue capabilities),
// which the engine runs before anything else. Each rule lives in one of
// the two, never both.
#include "vhost-rdma/device/command_decoder.h"

#include <endian.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/engine/mr_check.h"
#include "backend/engine/qp_attr_check.h"
#include "backend/engine/ring_check.h"

namespace vrdma::device {
namespace {

constexpr DecodeLimits kLimits{.max_mr_pages = 512, .max_ring_pages = 1024};

// What the engine lets a VM use (the device reports the same).
RnicLimits EngineLimits() {
  RnicLimits l;
  l.max_qp_wr = 16384;
  l.max_sge = 16;
  l.max_cqe = 65535;
  l.max_srq_wr = 16384;
  l.max_inline_data = 512;
  return l;
}

// The VM the checks assume: two GIDs; a MODIFY_QP goes to an RC QP in INIT
// (GoodModifyQp is its INIT -> RTR).
constexpr uint32_t kVmGids = 2;
engine::QpCheckContext InitRcQp() {
  engine::QpCheckContext c;
  c.type = QpType::kRc;
  c.current = QpState::kInit;
  c.num_gids = kVmGids;
  return c;
}

// The status a guest gets for a request before the engine touches any
// state: the decoder's, or else the engine's own checks of the request.
Status Refusal(std::span<const uint8_t> bytes) {
  Result<Command> c = DecodeCommand(bytes, kLimits);
  if (!c.ok()) return c.status();
  if (auto* m = std::get_if<RegMrCmd>(&*c)) {
    return engine::CheckRegMr(
        m->req, engine::MrLimits{kLimits.max_mr_pages, uint64_t{kLimits.max_mr_pages} * 4096});
  }
  if (auto* q = std::get_if<CreateCqCmd>(&*c)) return engine::CheckCreateCq(q->req, EngineLimits());
  if (auto* q = std::get_if<CreateQpCmd>(&*c)) return engine::CheckCreateQp(q->req, EngineLimits());
  if (auto* q = std::get_if<CreateSrqCmd>(&*c)) {
    return engine::CheckCreateSrq(q->req, EngineLimits());
  }
  if (auto* m = std::get_if<ModifyQpCmd>(&*c)) {
    QpState next;
    return engine::CheckModifyQp(m->req, InitRcQp(), &next);
  }
  if (auto* a = std::get_if<CreateAhCmd>(&*c)) return engine::CheckAh(a->ah, kVmGids);
  return Status::kOk;
}

using Bytes = std::vector<uint8_t>;

template <typename T>
void Append(Bytes& b, const T& v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

Bytes Cmd(uint32_t code) {
  Bytes b;
  virtio_rdma_cmd_hdr h{};
  h.cmd = htole32(code);
  Append(b, h);
  return b;
}

template <typename T>
Bytes Cmd(uint32_t code, const T& req) {
  Bytes b = Cmd(code);
  Append(b, req);
  return b;
}

void AppendPages(Bytes& b, uint64_t first, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) Append(b, htole64(first + i * 4096ull));
}

// --- Valid requests of every page-list command --------------------------

virtio_rdma_req_reg_mr GoodRegMr() {
  virtio_rdma_req_reg_mr r{};
  r.pd_handle = htole32(7);
  r.access_flags = htole32(VIRTIO_RDMA_ACCESS_LOCAL_WRITE |
                           VIRTIO_RDMA_ACCESS_REMOTE_WRITE);
  r.iova = htole64(0x7f0000001100ull);
  r.length = htole64(3 * 4096);
  r.first_page_offset = htole32(0x100);
  r.npages = htole32(4);  // 0x100 + 3 pages spills into a 4th page
  return r;
}

Bytes RegMrBytes(const virtio_rdma_req_reg_mr& r, uint32_t pages_present) {
  Bytes b = Cmd(VIRTIO_RDMA_CMD_REG_MR, r);
  AppendPages(b, 0x100000, pages_present);
  return b;
}

virtio_rdma_ring_desc Ring(uint32_t log2_num, uint32_t log2_size,
                           uint32_t npages) {
  virtio_rdma_ring_desc d{};
  d.log2_num_elem = htole32(log2_num);
  d.log2_elem_size = htole32(log2_size);
  d.npages = htole32(npages);
  return d;
}

// 384 + 2^n * 2^e bytes in pages.
uint32_t RingPages(uint32_t n, uint32_t e) {
  return static_cast<uint32_t>((384 + (1ull << (n + e)) + 4095) / 4096);
}

virtio_rdma_req_create_cq GoodCq() {
  virtio_rdma_req_create_cq r{};
  r.ring = Ring(8, 6, RingPages(8, 6));  // 256 x 64 B = 5 pages
  r.cqe = htole32(255);
  return r;
}

Bytes CqBytes(const virtio_rdma_req_create_cq& r, uint32_t pages_present) {
  Bytes b = Cmd(VIRTIO_RDMA_CMD_CREATE_CQ, r);
  AppendPages(b, 0x200000, pages_present);
  return b;
}

virtio_rdma_req_create_qp GoodQp() {
  virtio_rdma_req_create_qp r{};
  r.pd_handle = htole32(1);
  r.send_cq_handle = htole32(2);
  r.recv_cq_handle = htole32(3);
  r.qp_type = VIRTIO_RDMA_QPT_RC;
  r.sq_sig_all = 1;
  r.cap.max_send_wr = htole32(63);
  r.cap.max_recv_wr = htole32(127);
  r.cap.max_send_sge = htole32(4);       // 208 + 64 = 272 -> 512 B elements
  r.cap.max_recv_sge = htole32(1);       // 40 + 16 = 56 -> 64 B elements
  r.cap.max_inline_data = htole32(256);  // 208 + 256 = 464 -> 512 B
  r.sq = Ring(6, 9, RingPages(6, 9));    // 9 pages
  r.rq = Ring(7, 6, RingPages(7, 6));    // 3 pages
  return r;
}

Bytes QpBytes(const virtio_rdma_req_create_qp& r, uint32_t pages_present) {
  Bytes b = Cmd(VIRTIO_RDMA_CMD_CREATE_QP, r);
  AppendPages(b, 0x300000, pages_present);
  return b;
}

uint32_t QpPages(const virtio_rdma_req_create_qp& r) {
  return le32toh(r.sq.npages) + le32toh(r.rq.npages);
}

virtio_rdma_req_create_srq GoodSrq() {
  virtio_rdma_req_create_srq r{};
  r.pd_handle = htole32(1);
  r.max_wr = htole32(100);
  r.max_sge = htole32(2);  // 40 + 32 = 72 -> 128 B
  r.srq_limit = htole32(10);
  r.ring = Ring(7, 7, RingPages(7, 7));
  return r;
}

Bytes SrqBytes(const virtio_rdma_req_create_srq& r, uint32_t pages_present) {
  Bytes b = Cmd(VIRTIO_RDMA_CMD_CREATE_SRQ, r);
  AppendPages(b, 0x400000, pages_present);
  return b;
}

virtio_rdma_ah_attr GoodAh() {
  virtio_rdma_ah_attr a{};
  for (int i = 0; i < 16; ++i) a.dgid[i] = static_cast<uint8_t>(0xf0 + i);
  a.flow_label = htole32(0xabcde);
  a.sgid_index = 1;
  a.hop_limit = 64;
  a.traffic_class = 3;
  a.sl = 2;
  a.port_num = 1;
  a.is_global = 1;
  return a;
}

virtio_rdma_req_modify_qp GoodModifyQp() {
  virtio_rdma_req_modify_qp r{};
  r.qpn = htole32(0x123456);
  virtio_rdma_qp_attr& a = r.attr;
  a.attr_mask = htole32(VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_AV |
                        VIRTIO_RDMA_QP_PATH_MTU | VIRTIO_RDMA_QP_DEST_QPN |
                        VIRTIO_RDMA_QP_RQ_PSN |
                        VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC |
                        VIRTIO_RDMA_QP_MIN_RNR_TIMER);
  a.qp_state = VIRTIO_RDMA_QPS_RTR;
  a.path_mtu = VIRTIO_RDMA_MTU_1024;
  a.dest_qp_num = htole32(0xabcdef);
  a.rq_psn = htole32(0x10);
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr = GoodAh();
  return r;
}

// --- Valid decodes -----------------------------------------------------

TEST(CommandDecoderTest, DecodesRegMrFields) {
  auto res = DecodeCommand(RegMrBytes(GoodRegMr(), 4), kLimits);
  ASSERT_TRUE(res.ok()) << StatusName(res.status());
  const auto* cmd = std::get_if<RegMrCmd>(&*res);
  ASSERT_NE(cmd, nullptr);
  EXPECT_EQ(cmd->req.pd, 7u);
  EXPECT_EQ(cmd->req.access, 0x3u);
  EXPECT_EQ(cmd->req.iova, 0x7f0000001100ull);
  EXPECT_EQ(cmd->req.length, 3u * 4096);
  EXPECT_EQ(cmd->req.first_page_offset, 0x100u);
  ASSERT_EQ(cmd->req.pages.size(), 4u);
  EXPECT_EQ(cmd->req.pages[0], 0x100000u);
  EXPECT_EQ(cmd->req.pages[3], 0x103000u);
}

TEST(CommandDecoderTest, DecodesCreateQpWithSeparatePageLists) {
  auto q = GoodQp();
  auto res = DecodeCommand(QpBytes(q, QpPages(q)), kLimits);
  ASSERT_TRUE(res.ok()) << StatusName(res.status());
  const auto& req = std::get<CreateQpCmd>(*res).req;
  EXPECT_EQ(req.type, QpType::kRc);
  EXPECT_TRUE(req.sq_sig_all);
  EXPECT_EQ(req.send_cq, 2u);
  EXPECT_EQ(req.recv_cq, 3u);
  EXPECT_EQ(req.caps.max_send_wr, 63u);
  EXPECT_EQ(req.caps.max_inline_data, 256u);
  EXPECT_EQ(req.sq.log2_num_elem, 6u);
  EXPECT_EQ(req.sq.log2_elem_size, 9u);
  ASSERT_EQ(req.sq.pages.size(), 9u);
  ASSERT_EQ(req.rq.pages.size(), 3u);
  EXPECT_EQ(req.sq.pages[0], 0x300000u);
  EXPECT_EQ(req.rq.pages[0], 0x300000u + 9 * 4096);
}

TEST(CommandDecoderTest, DecodesCreateQpWithSrqAndNoRqPages) {
  auto q = GoodQp();
  q.srq_handle = htole32(9);
  q.rq = Ring(0, 0, 0);  // ignored apart from npages
  auto res = DecodeCommand(QpBytes(q, QpPages(q)), kLimits);
  ASSERT_TRUE(res.ok()) << StatusName(res.status());
  const auto& req = std::get<CreateQpCmd>(*res).req;
  EXPECT_EQ(req.srq, 9u);
  EXPECT_TRUE(req.rq.pages.empty());
}

// The Linux driver sizes a ring as roundup_pow_of_two(depth + 1): a QP with
// no receives has a 1-slot RQ ring (log2_num_elem 0).
TEST(CommandDecoderTest, AcceptsDepthZeroRings) {
  auto q = GoodQp();
  q.cap.max_recv_wr = 0;
  q.rq = Ring(0, 6, 1);
  auto res = DecodeCommand(QpBytes(q, QpPages(q)), kLimits);
  ASSERT_TRUE(res.ok()) << StatusName(res.status());
  EXPECT_EQ(std::get<CreateQpCmd>(*res).req.rq.log2_num_elem, 0u);
  q.cap.max_recv_wr = 1;  // but then depth 1 does not fit (the engine says)
  EXPECT_EQ(Refusal(QpBytes(q, QpPages(q))), Status::kInvalid);
}

TEST(CommandDecoderTest, DecodesCqSrqAndSmallCommands) {
  auto cq = DecodeCommand(CqBytes(GoodCq(), 5), kLimits);
  ASSERT_TRUE(cq.ok());
  EXPECT_EQ(std::get<CreateCqCmd>(*cq).req.cqe, 255u);
  EXPECT_EQ(std::get<CreateCqCmd>(*cq).req.ring.pages.size(), 5u);

  auto s = GoodSrq();
  auto srq = DecodeCommand(SrqBytes(s, le32toh(s.ring.npages)), kLimits);
  ASSERT_TRUE(srq.ok());
  EXPECT_EQ(std::get<CreateSrqCmd>(*srq).req.srq_limit, 10u);

  virtio_rdma_req_handle h{htole32(42), 0xffffffff /* reserved: ignored */};
  auto d = DecodeCommand(Cmd(VIRTIO_RDMA_CMD_DEREG_MR, h), kLimits);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(std::get<DeregMrCmd>(*d).mr, 42u);

  virtio_rdma_req_notify_cq n{htole32(5), htole32(VIRTIO_RDMA_NOTIFY_SOLICITED)};
  auto nc = DecodeCommand(Cmd(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ, n), kLimits);
  ASSERT_TRUE(nc.ok());
  EXPECT_TRUE(std::get<ReqNotifyCqCmd>(*nc).solicited_only);

  EXPECT_TRUE(std::holds_alternative<QueryDeviceCmd>(
      *DecodeCommand(Cmd(VIRTIO_RDMA_CMD_QUERY_DEVICE), kLimits)));
  EXPECT_TRUE(std::holds_alternative<CreatePdCmd>(
      *DecodeCommand(Cmd(VIRTIO_RDMA_CMD_CREATE_PD), kLimits)));
}

TEST(CommandDecoderTest, DecodesModifyQpOnlyMaskedFields) {
  auto m = GoodModifyQp();
  m.attr.qkey = htole32(0x11111111);  // not in the mask: must stay default
  m.attr.timeout = 200;               // out of range but not in the mask
  auto res = DecodeCommand(Cmd(VIRTIO_RDMA_CMD_MODIFY_QP, m), kLimits);
  ASSERT_TRUE(res.ok()) << StatusName(res.status());
  const auto& req = std::get<ModifyQpCmd>(*res).req;
  EXPECT_EQ(req.qpn, 0x123456u);
  EXPECT_EQ(req.state, QpState::kRtr);
  EXPECT_EQ(req.path_mtu_bytes, 1024u);
  EXPECT_EQ(req.dest_qpn, 0xabcdefu);
  EXPECT_EQ(req.qkey, 0u);
  EXPECT_EQ(req.ah.sgid_index, 1);
  EXPECT_EQ(req.ah.flow_label, 0xabcdeu);
  EXPECT_EQ(req.ah.dgid[15], 0xff);
  EXPECT_EQ(req.max_dest_rd_atomic, 4);
}

TEST(CommandDecoderTest, DecodesDoorbell) {
  virtio_rdma_doorbell d{};
  d.handle = htole32(0x42);
  d.kind = VIRTIO_RDMA_DB_CQ_ARM;
  d.reserved[0] = 0xff;  // ignored
  Bytes b;
  Append(b, d);
  auto res = DecodeDoorbell(b);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->handle, 0x42u);
  EXPECT_EQ(res->kind, VIRTIO_RDMA_DB_CQ_ARM);
}

// Reserved fields (and the AH fields the device resolves itself) are
// ignored on read: setting them changes nothing in the decoded command.
TEST(CommandDecoderTest, ReservedFieldsAreIgnored) {
  auto q = GoodQp();
  auto q_dirty = q;
  std::memset(q_dirty.reserved, 0xff, sizeof(q_dirty.reserved));
  q_dirty.cap.reserved = 0xffffffff;
  q_dirty.sq.reserved = 0xffffffff;
  q_dirty.rq.reserved = 0xffffffff;
  Bytes clean = QpBytes(q, QpPages(q));
  Bytes dirty = QpBytes(q_dirty, QpPages(q_dirty));
  dirty[4] = 0xff;  // virtio_rdma_cmd_hdr.reserved
  auto a = DecodeCommand(clean, kLimits);
  auto b = DecodeCommand(dirty, kLimits);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok()) << StatusName(b.status());
  const auto& ra = std::get<CreateQpCmd>(*a).req;
  const auto& rb = std::get<CreateQpCmd>(*b).req;
  EXPECT_EQ(ra.caps.max_send_wr, rb.caps.max_send_wr);
  EXPECT_EQ(ra.sq.pages, rb.sq.pages);
  EXPECT_EQ(ra.rq.pages, rb.rq.pages);

  auto m = GoodModifyQp();
  m.reserved = 0xffffffff;
  m.attr.reserved = 0xff;
  m.attr.sq_draining = 1;
  m.attr.ah_attr.reserved = 0xff;
  m.attr.ah_attr.static_rate = 9;
  m.attr.ah_attr.dlid = 0xffff;
  std::memset(m.attr.ah_attr.dmac, 0xff, sizeof(m.attr.ah_attr.dmac));
  std::memset(&m.attr.alt_ah_attr, 0xff, sizeof(m.attr.alt_ah_attr));
  m.attr.cap.reserved = 0xffffffff;
  auto mm = DecodeCommand(Cmd(VIRTIO_RDMA_CMD_MODIFY_QP, m), kLimits);
  ASSERT_TRUE(mm.ok()) << StatusName(mm.status());
  EXPECT_EQ(std::get<ModifyQpCmd>(*mm).req.ah.sgid_index, 1);

  virtio_rdma_req_handle h{htole32(5), 0xffffffff};
  EXPECT_TRUE(DecodeCommand(Cmd(VIRTIO_RDMA_CMD_DESTROY_QP, h), kLimits).ok());
  virtio_rdma_req_query_port qp{htole32(1), 0xffffffff};
  EXPECT_TRUE(DecodeCommand(Cmd(VIRTIO_RDMA_CMD_QUERY_PORT, qp), kLimits).ok());
  auto cq = GoodCq();
  cq.reserved = 0xffffffff;
  EXPECT_TRUE(DecodeCommand(CqBytes(cq, 5), kLimits).ok());
}

virtio_rdma_req_alloc_mr GoodAllocMr() {
  return virtio_rdma_req_alloc_mr{htole32(7), htole32(256), htole64(0x401000)};
}

TEST(CommandDecoderTest, DecodesAllocMrAndTheKernelQpFlag) {
  auto m = DecodeCommand(Cmd(VIRTIO_RDMA_CMD_ALLOC_MR, GoodAllocMr()), kLimits);
  ASSERT_TRUE(m.ok()) << StatusName(m.status());
  const auto& req = std::get<AllocMrCmd>(*m).req;
  EXPECT_EQ(req.pd, 7u);
  EXPECT_EQ(req.max_pages, 256u);
  EXPECT_EQ(req.page_list, 0x401000u);
  // max_mr_pages itself, and an 8-byte (not page) aligned list, are fine.
  auto edge = GoodAllocMr();
  edge.max_pages = htole32(kLimits.max_mr_pages);
  edge.page_list = htole64(0x401008);
  EXPECT_TRUE(DecodeCommand(Cmd(VIRTIO_RDMA_CMD_ALLOC_MR, edge), kLimits).ok());

  auto q = GoodQp();
  auto plain = DecodeCommand(QpBytes(q, QpPages(q)), kLimits);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(std::get<CreateQpCmd>(*plain).req.kernel);
  q.flags = VIRTIO_RDMA_QP_F_KERNEL;
  auto kernel = DecodeCommand(QpBytes(q, QpPages(q)), kLimits);
  ASSERT_TRUE(kernel.ok()) << StatusName(kernel.status());
  EXPECT_TRUE(std::get<CreateQpCmd>(*kernel).req.kernel);
}

// --- Hostile inputs ------------------------------------------------------

// Every valid request of every command; the truncation test cuts each one.
std::vector<std::pair<std::string, Bytes>> AllValidRequests() {
  std::vector<std::pair<std::string, Bytes>> v;
  virtio_rdma_req_handle h{htole32(1), 0};
  virtio_rdma_req_query_port qp{htole32(1), 0};
  virtio_rdma_req_query_gid qg{htole32(1), htole32(0)};
  virtio_rdma_req_notify_cq n{htole32(1), htole32(1)};
  virtio_rdma_req_query_qp qq{htole32(1), htole32(VIRTIO_RDMA_QP_STATE)};
  virtio_rdma_req_create_ah ah{};
  ah.pd_handle = htole32(1);
  ah.attr = GoodAh();
  virtio_rdma_req_modify_srq ms{htole32(1), htole32(VIRTIO_RDMA_SRQ_LIMIT), 0,
                                htole32(4)};
  auto q = GoodQp();
  auto s = GoodSrq();
  v.push_back({"query_device", Cmd(VIRTIO_RDMA_CMD_QUERY_DEVICE)});
  v.push_back({"query_port", Cmd(VIRTIO_RDMA_CMD_QUERY_PORT, qp)});
  v.push_back({"query_gid", Cmd(VIRTIO_RDMA_CMD_QUERY_GID, qg)});
  v.push_back({"create_pd", Cmd(VIRTIO_RDMA_CMD_CREATE_PD)});
  v.push_back({"destroy_pd", Cmd(VIRTIO_RDMA_CMD_DESTROY_PD, h)});
  v.push_back({"reg_mr", RegMrBytes(GoodRegMr(), 4)});
  v.push_back({"dereg_mr", Cmd(VIRTIO_RDMA_CMD_DEREG_MR, h)});
  v.push_back({"create_cq", CqBytes(GoodCq(), 5)});
  v.push_back({"destroy_cq", Cmd(VIRTIO_RDMA_CMD_DESTROY_CQ, h)});
  v.push_back({"req_notify_cq", Cmd(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ, n)});
  v.push_back({"create_qp", QpBytes(q, QpPages(q))});
  v.push_back({"modify_qp", Cmd(VIRTIO_RDMA_CMD_MODIFY_QP, GoodModifyQp())});
  v.push_back({"query_qp", Cmd(VIRTIO_RDMA_CMD_QUERY_QP, qq)});
  v.push_back({"destroy_qp", Cmd(VIRTIO_RDMA_CMD_DESTROY_QP, h)});
  v.push_back({"create_ah", Cmd(VIRTIO_RDMA_CMD_CREATE_AH, ah)});
  v.push_back({"destroy_ah", Cmd(VIRTIO_RDMA_CMD_DESTROY_AH, h)});
  v.push_back({"create_srq", SrqBytes(s, le32toh(s.ring.npages))});
  v.push_back({"modify_srq", Cmd(VIRTIO_RDMA_CMD_MODIFY_SRQ, ms)});
  v.push_back({"destroy_srq", Cmd(VIRTIO_RDMA_CMD_DESTROY_SRQ, h)});
  v.push_back({"alloc_mw", Cmd(VIRTIO_RDMA_CMD_ALLOC_MW,
                               virtio_rdma_req_alloc_mw{htole32(1), htole32(2)})});
  v.push_back({"dealloc_mw", Cmd(VIRTIO_RDMA_CMD_DEALLOC_MW, h)});
  v.push_back({"alloc_mr", Cmd(VIRTIO_RDMA_CMD_ALLOC_MR, GoodAllocMr())});
  return v;
}

TEST(CommandDecoderTest, EveryCommandIsCoveredAndValid) {
  auto all = AllValidRequests();
  ASSERT_EQ(all.size(), size_t{VIRTIO_RDMA_CMD_MAX});
  for (const auto& [name, bytes] : all) {
    auto res = DecodeCommand(bytes, kLimits);
    EXPECT_TRUE(res.ok()) << name << ": " << StatusName(res.status());
    // The variant index follows the command code.
    if (res.ok()) {
      EXPECT_EQ(res->index() + 1, PeekCommandCode(bytes)) << name;
    }
  }
}

TEST(CommandDecoderTest, EveryTruncationOfEveryCommandIsInvalid) {
  for (const auto& [name, bytes] : AllValidRequests()) {
    for (size_t len = 0; len < bytes.size(); ++len) {
      // Copy into an exactly-sized buffer so ASan sees any over-read.
      Bytes cut(bytes.begin(), bytes.begin() + len);
      EXPECT_EQ(DecodeCommand(cut, kLimits).status(), Status::kInvalid)
          << name << " cut to " << len;
    }
  }
}

TEST(CommandDecoderTest, TrailingBytesAreInvalid) {
  for (auto [name, bytes] : AllValidRequests()) {
    bytes.push_back(0);
    EXPECT_EQ(DecodeCommand(bytes, kLimits).status(), Status::kInvalid) << name;
  }
}

TEST(CommandDecoderTest, UnknownCommandCodesAreInvalid) {
  for (uint32_t code : {0u, 23u, 24u, 0x100u, 0x80000000u, 0xffffffffu}) {
    Bytes b = Cmd(code);
    b.resize(256, 0);
    EXPECT_EQ(DecodeCommand(b, kLimits).status(), Status::kInvalid) << code;
  }
}

struct BadCase {
  std::string name;
  std::function<Bytes()> make;
};

void ExpectAllInvalid(const std::vector<BadCase>& cases) {
  for (const auto& c : cases) {
    Bytes b = c.make();
    EXPECT_EQ(Refusal(b), Status::kInvalid) << c.name;
  }
}

TEST(CommandDecoderTest, HostileRegMr) {
  auto with = [](std::function<void(virtio_rdma_req_reg_mr&)> f,
                 uint32_t pages) {
    return [f, pages] {
      auto r = GoodRegMr();
      f(r);
      return RegMrBytes(r, pages);
    };
  };
  ExpectAllInvalid({
      {"page list short", with([](auto&) {}, 3)},
      {"page list long", with([](auto&) {}, 5)},
      {"npages 0", with([](auto& r) { r.npages = 0; }, 0)},
      {"npages above limit",
       with([](auto& r) { r.npages = htole32(kLimits.max_mr_pages + 1); },
            kLimits.max_mr_pages + 1)},
      {"npages*8 overflows 32 bits",
       with([](auto& r) { r.npages = htole32(0x20000000); }, 4)},
      {"npages huge", with([](auto& r) { r.npages = htole32(0xffffffff); }, 4)},
      {"pages do not cover mr",
       with([](auto& r) { r.length = htole64(4 * 4096); }, 4)},
      {"length 0", with([](auto& r) { r.length = 0; }, 4)},
      {"length huge",
       with([](auto& r) { r.length = htole64(~0ull); r.iova = 0; }, 4)},
      {"iova+length wraps",
       with([](auto& r) {
         r.iova = htole64(~0ull - 4095);
         r.length = htole64(4096 * 2);
       }, 4)},
      {"iova+length ends at 2^64",
       with([](auto& r) {
         r.iova = htole64(~0ull - 4095);
         r.length = htole64(4096);
         r.first_page_offset = 0;
         r.npages = htole32(1);
       }, 1)},
      {"first_page_offset 4096",
       with([](auto& r) { r.first_page_offset = htole32(4096); }, 4)},
      {"first_page_offset huge",
       with([](auto& r) { r.first_page_offset = htole32(0xffffffff); }, 4)},
      {"unknown access bit",
       with([](auto& r) { r.access_flags = htole32(0x11); }, 4)},
      {"access bit 31",
       with([](auto& r) { r.access_flags = htole32(0x80000001u); }, 4)},
      {"remote write without local write",
       with([](auto& r) {
         r.access_flags = htole32(VIRTIO_RDMA_ACCESS_REMOTE_WRITE);
       }, 4)},
      {"remote atomic without local write",
       with([](auto& r) {
         r.access_flags = htole32(VIRTIO_RDMA_ACCESS_REMOTE_ATOMIC |
                                  VIRTIO_RDMA_ACCESS_REMOTE_READ);
       }, 4)},
      {"unaligned page",
       [] {
         Bytes b = RegMrBytes(GoodRegMr(), 3);
         Append(b, htole64(0x500008ull));
         return b;
       }},
      // A page at the top of the address space is aligned: outside guest
      // RAM, it is the memory layer that refuses it (kFault,
      // GuestPageViewTest.RejectsBadPages).
  });
}

TEST(CommandDecoderTest, RegMrEdgeValuesAreAccepted) {
  auto r = GoodRegMr();
  r.access_flags = htole32(VIRTIO_RDMA_ACCESS_REMOTE_READ);  // no write needed
  r.first_page_offset = htole32(4095);
  r.length = htole64(1);
  r.npages = htole32(1);
  r.iova = htole64(~0ull - 1);  // last byte ~0ull - 1, end ~0ull: fits
  EXPECT_TRUE(DecodeCommand(RegMrBytes(r, 1), kLimits).ok());
  auto big = GoodRegMr();
  big.first_page_offset = 0;
  big.length = htole64(uint64_t{kLimits.max_mr_pages} * 4096);
  big.npages = htole32(kLimits.max_mr_pages);
  EXPECT_TRUE(DecodeCommand(RegMrBytes(big, kLimits.max_mr_pages), kLimits).ok());
}

TEST(CommandDecoderTest, HostileCreateCq) {
  auto with = [](std::function<void(virtio_rdma_req_create_cq&)> f,
                 uint32_t pages) {
    return [f, pages] {
      auto r = GoodCq();
      f(r);
      return CqBytes(r, pages);
    };
  };
  ExpectAllInvalid({
      {"page list short", with([](auto&) {}, 4)},
      {"page list long", with([](auto&) {}, 6)},
      {"cqe 0", with([](auto& r) { r.cqe = 0; }, 5)},
      {"cqe == 2^n (no empty slot)",
       with([](auto& r) { r.cqe = htole32(256); }, 5)},
      {"log2_num_elem 0", with([](auto& r) { r.ring = Ring(0, 6, 1); }, 1)},
      {"log2_num_elem 17",
       with([](auto& r) { r.ring = Ring(17, 6, 2049); }, 2049)},
      {"log2_num_elem 63", with([](auto& r) { r.ring = Ring(63, 6, 5); }, 5)},
      {"log2_num_elem 0xffffffff",
       with([](auto& r) { r.ring = Ring(0xffffffff, 6, 5); }, 5)},
      {"cqe element 32 bytes", with([](auto& r) { r.ring = Ring(8, 5, 3); }, 3)},
      {"log2_elem_size 13", with([](auto& r) { r.ring = Ring(8, 13, 513); }, 513)},
      {"log2_elem_size 64", with([](auto& r) { r.ring = Ring(8, 64, 5); }, 5)},
      {"npages too small for ring",
       with([](auto& r) { r.ring = Ring(8, 6, 4); }, 4)},
      {"npages one more than the ring spans",
       with([](auto& r) { r.ring = Ring(8, 6, 6); }, 6)},
      {"npages above ring limit",
       with([](auto& r) { r.ring = Ring(8, 6, kLimits.max_ring_pages + 1); },
            kLimits.max_ring_pages + 1)},
      {"npages huge",
       with([](auto& r) { r.ring = Ring(8, 6, 0xffffffff); }, 5)},
      {"unaligned page",
       [] {
         Bytes b = CqBytes(GoodCq(), 4);
         Append(b, htole64(0x1234ull));
         return b;
       }},
  });
}

TEST(CommandDecoderTest, HostileCreateQp) {
  auto with = [](std::function<void(virtio_rdma_req_create_qp&)> f,
                 int extra_pages = 0) {
    return [f, extra_pages] {
      auto r = GoodQp();
      f(r);
      return QpBytes(r, static_cast<uint32_t>(
                            std::max<int64_t>(0, int64_t{QpPages(r)} +
                                                     extra_pages)));
    };
  };
  ExpectAllInvalid({
      {"page list short", with([](auto&) {}, -1)},
      {"page list long", with([](auto&) {}, +1)},
      {"qp_type 0", with([](auto& r) { r.qp_type = 0; })},
      {"qp_type 5", with([](auto& r) { r.qp_type = 5; })},
      {"qp_type 255", with([](auto& r) { r.qp_type = 255; })},
      {"sq_sig_all 2", with([](auto& r) { r.sq_sig_all = 2; })},
      {"flags unknown bit 2", with([](auto& r) { r.flags = 2; })},
      {"flags 0xff", with([](auto& r) { r.flags = 0xff; })},
      {"max_send_wr == 2^n",
       with([](auto& r) { r.cap.max_send_wr = htole32(64); })},
      {"max_recv_wr == 2^n",
       with([](auto& r) { r.cap.max_recv_wr = htole32(128); })},
      {"max_send_wr huge",
       with([](auto& r) { r.cap.max_send_wr = htole32(0xffffffff); })},
      {"sq element too small for sges",
       with([](auto& r) { r.cap.max_send_sge = htole32(20); })},
      {"sq element too small for inline",
       with([](auto& r) { r.cap.max_inline_data = htole32(400); })},
      {"sge count overflows 32-bit product",
       with([](auto& r) { r.cap.max_send_sge = htole32(0x10000000); })},
      {"rq element too small",
       with([](auto& r) { r.cap.max_recv_sge = htole32(2); })},
      {"sq log2_num_elem 17",
       with([](auto& r) { r.sq.log2_num_elem = htole32(17); })},
      {"rq log2_num_elem 0", with([](auto& r) { r.rq = Ring(0, 6, 1); })},
      {"sq npages too small", with([](auto& r) { r.sq = Ring(6, 9, 8); })},
      {"rq npages huge",
       with([](auto& r) { r.rq.npages = htole32(0xffffffff); })},
      {"sq npages huge, rq npages wraps the sum",
       with([](auto& r) {
         r.sq.npages = htole32(0xffffffff);
         r.rq.npages = htole32(3);
       })},
      {"srq with rq pages",
       with([](auto& r) { r.srq_handle = htole32(5); })},
  });
}

TEST(CommandDecoderTest, HostileCreateSrq) {
  auto with = [](std::function<void(virtio_rdma_req_create_srq&)> f,
                 int extra_pages = 0) {
    return [f, extra_pages] {
      auto r = GoodSrq();
      f(r);
      return SrqBytes(r, static_cast<uint32_t>(std::max<int64_t>(
                             0, int64_t{le32toh(r.ring.npages)} + extra_pages)));
    };
  };
  ExpectAllInvalid({
      {"page list short", with([](auto&) {}, -1)},
      {"page list long", with([](auto&) {}, +1)},
      {"max_wr == 2^n", with([](auto& r) { r.max_wr = htole32(128); })},
      {"element too small for sges",
       with([](auto& r) { r.max_sge = htole32(6); })},
      {"sge product overflow",
       with([](auto& r) { r.max_sge = htole32(0xffffffff); })},
      {"ring too big for pages", with([](auto& r) { r.ring = Ring(7, 8, 4); })},
  });
}

TEST(CommandDecoderTest, HostileModifyQp) {
  auto with = [](std::function<void(virtio_rdma_req_modify_qp&)> f) {
    return [f] {
      auto r = GoodModifyQp();
      f(r);
      return Cmd(VIRTIO_RDMA_CMD_MODIFY_QP, r);
    };
  };
  auto set_mask = [](virtio_rdma_req_modify_qp& r, uint32_t bit) {
    r.attr.attr_mask = htole32(le32toh(r.attr.attr_mask) | bit);
  };
  // Each case changes one field of a request both accept, so the refusal
  // is that field's rule.
  ASSERT_EQ(Refusal(Cmd(VIRTIO_RDMA_CMD_MODIFY_QP, GoodModifyQp())), Status::kOk);
  ExpectAllInvalid({
      {"unknown mask bit 21",
       with([&](auto& r) { set_mask(r, 1u << 21); })},
      {"unknown mask bit 31",
       with([&](auto& r) { set_mask(r, 1u << 31); })},
      {"qp_state 7", with([](auto& r) { r.attr.qp_state = 7; })},
      {"qp_state 255", with([](auto& r) { r.attr.qp_state = 255; })},
      {"cur_qp_state 9",
       with([&](auto& r) {
         set_mask(r, VIRTIO_RDMA_QP_CUR_STATE);
         r.attr.cur_qp_state = 9;
       })},
      {"path_mtu 0", with([](auto& r) { r.attr.path_mtu = 0; })},
      {"path_mtu 6", with([](auto& r) { r.attr.path_mtu = 6; })},
      {"min_rnr_timer 32", with([](auto& r) { r.attr.min_rnr_timer = 32; })},
      {"rq_psn 2^24", with([](auto& r) { r.attr.rq_psn = htole32(1u << 24); })},
      {"dest_qpn 2^24",
       with([](auto& r) { r.attr.dest_qp_num = htole32(1u << 24); })},
      {"ah port 0", with([](auto& r) { r.attr.ah_attr.port_num = 0; })},
      {"ah sgid_index 8", with([](auto& r) { r.attr.ah_attr.sgid_index = 8; })},
      {"ah sgid_index 255",
       with([](auto& r) { r.attr.ah_attr.sgid_index = 255; })},
      {"ah is_global 2", with([](auto& r) { r.attr.ah_attr.is_global = 2; })},
      {"ah flow_label 2^20",
       with([](auto& r) { r.attr.ah_attr.flow_label = htole32(1u << 20); })},
      {"ah sl 16", with([](auto& r) { r.attr.ah_attr.sl = 16; })},
  });
}

TEST(CommandDecoderTest, HostileSmallCommands) {
  auto ah_with = [](std::function<void(virtio_rdma_ah_attr&)> f) {
    return [f] {
      virtio_rdma_req_create_ah r{};
      r.attr = GoodAh();
      f(r.attr);
      return Cmd(VIRTIO_RDMA_CMD_CREATE_AH, r);
    };
  };
  auto alloc_mr_with = [](std::function<void(virtio_rdma_req_alloc_mr&)> f) {
    return [f] {
      auto m = GoodAllocMr();
      f(m);
      return Cmd(VIRTIO_RDMA_CMD_ALLOC_MR, m);
    };
  };
  ASSERT_EQ(Refusal(ah_with([](auto&) {})()), Status::kOk);
  ASSERT_EQ(Refusal(alloc_mr_with([](auto&) {})()), Status::kOk);
  ExpectAllInvalid({
      {"query_port port 0",
       [] { return Cmd(VIRTIO_RDMA_CMD_QUERY_PORT,
                       virtio_rdma_req_query_port{0, 0}); }},
      {"query_port port 2",
       [] { return Cmd(VIRTIO_RDMA_CMD_QUERY_PORT,
                       virtio_rdma_req_query_port{htole32(2), 0}); }},
      {"query_gid index 8",
       [] { return Cmd(VIRTIO_RDMA_CMD_QUERY_GID,
                       virtio_rdma_req_query_gid{htole32(1), htole32(8)}); }},
      {"query_gid port 0",
       [] { return Cmd(VIRTIO_RDMA_CMD_QUERY_GID,
                       virtio_rdma_req_query_gid{0, 0}); }},
      {"notify flags 0",
       [] { return Cmd(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
                       virtio_rdma_req_notify_cq{htole32(1), 0}); }},
      {"notify flags 3",
       [] { return Cmd(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
                       virtio_rdma_req_notify_cq{htole32(1), htole32(3)}); }},
      {"query_qp unknown mask bit",
       [] { return Cmd(VIRTIO_RDMA_CMD_QUERY_QP,
                       virtio_rdma_req_query_qp{htole32(1), htole32(1u << 25)}); }},
      {"modify_srq unknown mask bit",
       [] { return Cmd(VIRTIO_RDMA_CMD_MODIFY_SRQ,
                       virtio_rdma_req_modify_srq{htole32(1), htole32(4), 0, 0}); }},
      {"create_ah port 2", ah_with([](auto& a) { a.port_num = 2; })},
      {"create_ah sgid_index 8", ah_with([](auto& a) { a.sgid_index = 8; })},
      {"create_ah flow_label", ah_with([](auto& a) {
         a.flow_label = htole32(0xffffffff); })},
      {"create_ah sl 200", ah_with([](auto& a) { a.sl = 200; })},
      {"create_ah is_global 7", ah_with([](auto& a) { a.is_global = 7; })},
      {"alloc_mw type 0",
       [] { return Cmd(VIRTIO_RDMA_CMD_ALLOC_MW, virtio_rdma_req_alloc_mw{htole32(1), 0}); }},
      {"alloc_mw type 3",
       [] { return Cmd(VIRTIO_RDMA_CMD_ALLOC_MW,
                       virtio_rdma_req_alloc_mw{htole32(1), htole32(3)}); }},
      {"alloc_mr max_pages 0", alloc_mr_with([](auto& m) { m.max_pages = 0; })},
      {"alloc_mr max_pages above max_mr_pages",
       alloc_mr_with([](auto& m) { m.max_pages = htole32(kLimits.max_mr_pages + 1); })},
      {"alloc_mr max_pages huge",
       alloc_mr_with([](auto& m) { m.max_pages = htole32(0xffffffff); })},
      {"alloc_mr page_list not 8-byte aligned",
       alloc_mr_with([](auto& m) { m.page_list = htole64(0x401004); })},
      {"alloc_mr page list wraps",
       alloc_mr_with([](auto& m) { m.page_list = htole64(0xfffffffffffffff8ull); })},
  });
}

TEST(CommandDecoderTest, HostileDoorbells) {
  virtio_rdma_doorbell d{};
  d.handle = htole32(1);
  for (uint8_t kind : {0, 6, 7, 0x80, 0xff}) {
    d.kind = kind;
    Bytes b;
    Append(b, d);
    EXPECT_EQ(DecodeDoorbell(b).status(), Status::kInvalid) << int{kind};
  }
  d.kind = VIRTIO_RDMA_DB_SQ;
  Bytes b;
  Append(b, d);
  for (size_t len = 0; len < b.size(); ++len) {
    Bytes cut(b.begin(), b.begin() + len);
    EXPECT_EQ(DecodeDoorbell(cut).status(), Status::kInvalid) << len;
  }
  b.push_back(0);
  EXPECT_EQ(DecodeDoorbell(b).status(), Status::kInvalid);
}

// Deterministic garbage: mutations of valid requests (bit flips and random
// lengths) must either decode or fail cleanly. The fuzzer does this at scale.
TEST(CommandDecoderTest, RandomMutationsNeverCrash) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  int decoded = 0;
  for (const auto& [name, bytes] : AllValidRequests()) {
    for (int i = 0; i < 2000; ++i) {
      Bytes b = bytes;
      const int flips = 1 + static_cast<int>(next() % 4);
      for (int f = 0; f < flips; ++f)
        b[next() % b.size()] ^= static_cast<uint8_t>(1u << (next() % 8));
      if (next() % 4 == 0) b.resize(next() % (b.size() + 16));
      auto res = DecodeCommand(b, kLimits);
      if (res.ok()) {
        ++decoded;
      } else {
        EXPECT_EQ(res.status(), Status::kInvalid);
      }
    }
  }
  EXPECT_GT(decoded, 0);  // some flips hit ignored or free-valued fields
}

TEST(CommandDecoderTest, MaxCommandBytesBoundsTheLargestValidRequest) {
  auto r = GoodRegMr();
  r.first_page_offset = 0;
  r.length = htole64(uint64_t{kLimits.max_mr_pages} * 4096);
  r.npages = htole32(kLimits.max_mr_pages);
  Bytes b = RegMrBytes(r, kLimits.max_mr_pages);
  ASSERT_TRUE(DecodeCommand(b, kLimits).ok());
  EXPECT_LE(b.size(), MaxCommandBytes(kLimits));

  auto q = GoodQp();
  q.sq = Ring(14, 10, RingPages(14, 10));  // 16 MiB: above the page limit
  EXPECT_EQ(DecodeCommand(QpBytes(q, QpPages(q)), kLimits).status(),
            Status::kInvalid);
  q.sq = Ring(11, 11, RingPages(11, 11));  // exactly at max_ring_pages + 1?
  const uint32_t p = RingPages(11, 11);
  ASSERT_EQ(p, 1025u);
  EXPECT_EQ(DecodeCommand(QpBytes(q, QpPages(q)), kLimits).status(),
            Status::kInvalid);
  q.sq = Ring(10, 12, RingPages(10, 12));  // 1025 pages as well
  EXPECT_EQ(DecodeCommand(QpBytes(q, QpPages(q)), kLimits).status(),
            Status::kInvalid);
  q.sq = Ring(10, 11, RingPages(10, 11));  // 513 pages: fine
  q.rq = Ring(16, 6, RingPages(16, 6));    // 1025 pages: over
  q.cap.max_recv_wr = htole32(1000);
  EXPECT_EQ(DecodeCommand(QpBytes(q, QpPages(q)), kLimits).status(),
            Status::kInvalid);
  q.rq = Ring(15, 6, RingPages(15, 6));    // 513 pages
  Bytes ok = QpBytes(q, QpPages(q));
  ASSERT_TRUE(DecodeCommand(ok, kLimits).ok());
  EXPECT_LE(ok.size(), MaxCommandBytes(kLimits));
}

}  // namespace
}  // namespace vrdma::device
