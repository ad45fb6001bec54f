// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Every rule below is a syntax rule: it needs nothing but the request bytes
// and the device limits. Each Decode* function lists the rules it enforces;
// docs/virtio-rdma.md quotes them. Any violation is Status::kInvalid.
// What a request means (ring geometry, MR access and coverage, queue
// capabilities) is checked once, by the engine (backend/engine/mr_check.h,
// ring_check.h), whoever calls it.
#include "vhost-rdma/device/command_decoder.h"

#include <endian.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace vrdma::device {
namespace {

// A cursor over the copied request. Reads are bounds-checked; a read past
// the end fails instead of touching memory.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  bool Read(T* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

  // Reads exactly n little-endian page addresses (the engine checks them:
  // alignment, then whether they are guest RAM).
  bool ReadPages(uint32_t n, std::vector<uint64_t>* pages) {
    if (remaining() / sizeof(uint64_t) < n) return false;
    pages->resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t le;
      std::memcpy(&le, bytes_.data() + pos_, sizeof(le));
      pos_ += sizeof(le);
      (*pages)[i] = le64toh(le);
    }
    return true;
  }
  // The request ends with exactly n page addresses: nothing more, nothing
  // less (every command with a page list ends with it).
  bool ReadFinalPages(uint32_t n, std::vector<uint64_t>* pages) {
    return remaining() == uint64_t{n} * sizeof(uint64_t) && ReadPages(n, pages);
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

// A ring descriptor (struct virtio_rdma_ring_desc): its geometry as
// declared, and npages <= min(limits.max_ring_pages, the pages the largest
// geometry spans) so the page list that follows is bounded. The page list
// itself is read later, in order, by ReadPages.
Status ReadRing(const virtio_rdma_ring_desc& wire, const DecodeLimits& limits,
                engine::RingSpec* out, uint32_t* npages) {
  const uint32_t n = le32toh(wire.npages);
  if (n > limits.max_ring_pages || n > kMaxRingPagesByGeometry) return Status::kInvalid;
  out->log2_num_elem = le32toh(wire.log2_num_elem);
  out->log2_elem_size = le32toh(wire.log2_elem_size);
  *npages = n;
  return Status::kOk;
}

// Fixed-size requests: the whole request is the header plus T, exactly.
template <typename T>
Status ReadExact(Reader& r, T* out) {
  if (!r.Read(out) || r.remaining() != 0) return Status::kInvalid;
  return Status::kOk;
}

// DESTROY_PD, DEREG_MR, DESTROY_CQ, DESTROY_QP, DESTROY_AH, DESTROY_SRQ,
// DEALLOC_MW:
// struct virtio_rdma_req_handle, exactly; any handle value (the engine
// decides whether it names a live object of this VM).
template <typename Cmd, uint32_t Cmd::*kField>
Result<Command> DecodeHandleCmd(Reader& r) {
  virtio_rdma_req_handle w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  Cmd cmd;
  cmd.*kField = le32toh(w.handle);
  return Command{cmd};
}

// QUERY_DEVICE, CREATE_PD: no request body.
template <typename Cmd>
Result<Command> DecodeEmpty(Reader& r) {
  if (r.remaining() != 0) return Status::kInvalid;
  return Command{Cmd{}};
}

// QUERY_PORT: port_num == 1 (one port).
Result<Command> DecodeQueryPort(Reader& r) {
  virtio_rdma_req_query_port w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  const uint32_t port = le32toh(w.port_num);
  if (port != 1) return Status::kInvalid;
  return Command{QueryPortCmd{port}};
}

// QUERY_GID: port_num == 1, index < VIRTIO_RDMA_MAX_GIDS (the engine checks
// it against the VM's own table).
Result<Command> DecodeQueryGid(Reader& r) {
  virtio_rdma_req_query_gid w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  if (le32toh(w.port_num) != 1) return Status::kInvalid;
  const uint32_t index = le32toh(w.index);
  if (index >= VIRTIO_RDMA_MAX_GIDS) return Status::kInvalid;
  return Command{QueryGidCmd{index}};
}

// REG_MR: npages <= limits.max_mr_pages and exactly npages * 8 bytes of
// page list follow. (Access, length, coverage, alignment: CheckRegMr.)
Result<Command> DecodeRegMr(Reader& r, const DecodeLimits& limits) {
  virtio_rdma_req_reg_mr w;
  if (!r.Read(&w)) return Status::kInvalid;
  RegMrCmd cmd;
  engine::RegMrRequest& req = cmd.req;
  req.pd = le32toh(w.pd_handle);
  req.access = le32toh(w.access_flags);
  req.iova = le64toh(w.iova);
  req.length = le64toh(w.length);
  req.first_page_offset = le32toh(w.first_page_offset);
  const uint32_t npages = le32toh(w.npages);
  if (npages > limits.max_mr_pages) return Status::kInvalid;
  if (!r.ReadFinalPages(npages, &req.pages)) return Status::kInvalid;
  return Command{std::move(cmd)};
}

// CREATE_CQ: the ring descriptor (ReadRing); exactly ring.npages * 8 bytes
// of page list follow. (cqe and geometry: CheckCreateCq.)
Result<Command> DecodeCreateCq(Reader& r, const DecodeLimits& limits) {
  virtio_rdma_req_create_cq w;
  if (!r.Read(&w)) return Status::kInvalid;
  CreateCqCmd cmd;
  cmd.req.cqe = le32toh(w.cqe);
  uint32_t npages = 0;
  VRDMA_RETURN_IF_ERROR(ReadRing(w.ring, limits, &cmd.req.ring, &npages));
  if (!r.ReadFinalPages(npages, &cmd.req.ring.pages)) return Status::kInvalid;
  return Command{std::move(cmd)};
}

// CREATE_QP:
//  - qp_type in {GSI 1, RC 2, UC 3, UD 4}; sq_sig_all in {0, 1};
//  - the SQ and RQ ring descriptors (ReadRing);
//  - exactly (sq.npages + rq.npages) * 8 bytes of page list follow, SQ pages
//    first. (Capabilities, geometry, RQ pages with an SRQ: CheckCreateQp.)
Result<Command> DecodeCreateQp(Reader& r, const DecodeLimits& limits) {
  virtio_rdma_req_create_qp w;
  if (!r.Read(&w)) return Status::kInvalid;
  CreateQpCmd cmd;
  engine::CreateQpRequest& req = cmd.req;
  req.pd = le32toh(w.pd_handle);
  req.send_cq = le32toh(w.send_cq_handle);
  req.recv_cq = le32toh(w.recv_cq_handle);
  req.srq = le32toh(w.srq_handle);
  switch (w.qp_type) {
    case VIRTIO_RDMA_QPT_GSI: req.type = QpType::kGsi; break;
    case VIRTIO_RDMA_QPT_RC: req.type = QpType::kRc; break;
    case VIRTIO_RDMA_QPT_UC: req.type = QpType::kUc; break;
    case VIRTIO_RDMA_QPT_UD: req.type = QpType::kUd; break;
    default: return Status::kInvalid;
  }
  if (w.sq_sig_all > 1) return Status::kInvalid;
  req.sq_sig_all = w.sq_sig_all != 0;
  // flags: known bits only (whether KERNEL was negotiated: the handler).
  if (w.flags & ~VIRTIO_RDMA_QP_F_SUPPORTED) return Status::kInvalid;
  req.kernel = (w.flags & VIRTIO_RDMA_QP_F_KERNEL) != 0;
  req.caps.max_send_wr = le32toh(w.cap.max_send_wr);
  req.caps.max_recv_wr = le32toh(w.cap.max_recv_wr);
  req.caps.max_send_sge = le32toh(w.cap.max_send_sge);
  req.caps.max_recv_sge = le32toh(w.cap.max_recv_sge);
  req.caps.max_inline_data = le32toh(w.cap.max_inline_data);

  uint32_t sq_pages = 0;
  VRDMA_RETURN_IF_ERROR(ReadRing(w.sq, limits, &req.sq, &sq_pages));
  uint32_t rq_pages = 0;
  VRDMA_RETURN_IF_ERROR(ReadRing(w.rq, limits, &req.rq, &rq_pages));
  // Both counts are <= kMaxRingPagesByGeometry: the sum cannot overflow.
  if (!r.ReadPages(sq_pages, &req.sq.pages) ||
      !r.ReadFinalPages(rq_pages, &req.rq.pages))
    return Status::kInvalid;
  return Command{std::move(cmd)};
}

// REQ_NOTIFY_CQ: flags is exactly NEXT_COMP (1) or SOLICITED (2).
Result<Command> DecodeReqNotifyCq(Reader& r) {
  virtio_rdma_req_notify_cq w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  ReqNotifyCqCmd cmd;
  cmd.cq = le32toh(w.cq_handle);
  switch (le32toh(w.flags)) {
    case VIRTIO_RDMA_NOTIFY_NEXT_COMP: cmd.solicited_only = false; break;
    case VIRTIO_RDMA_NOTIFY_SOLICITED: cmd.solicited_only = true; break;
    default: return Status::kInvalid;
  }
  return Command{cmd};
}

// MODIFY_QP: qpn and the attr (DecodeQpAttr; values: engine::CheckModifyQp).
Result<Command> DecodeModifyQp(Reader& r) {
  virtio_rdma_req_modify_qp w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  ModifyQpCmd cmd;
  VRDMA_RETURN_IF_ERROR(DecodeQpAttr(w.attr, &cmd.req));
  cmd.req.qpn = le32toh(w.qpn);
  return Command{cmd};
}

// QUERY_QP: attr_mask only VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED bits.
Result<Command> DecodeQueryQp(Reader& r) {
  virtio_rdma_req_query_qp w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  QueryQpCmd cmd{le32toh(w.qpn), le32toh(w.attr_mask)};
  if (cmd.attr_mask & ~uint32_t{VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED})
    return Status::kInvalid;
  return Command{cmd};
}

// CREATE_AH: pd and the ah_attr (DecodeAhAttr; values: engine::CheckAh).
Result<Command> DecodeCreateAh(Reader& r) {
  virtio_rdma_req_create_ah w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  CreateAhCmd cmd;
  cmd.pd = le32toh(w.pd_handle);
  VRDMA_RETURN_IF_ERROR(DecodeAhAttr(w.attr, &cmd.ah));
  return Command{cmd};
}

// CREATE_SRQ: the ring descriptor (ReadRing); exactly ring.npages * 8
// bytes of page list follow. (Capabilities, geometry: CheckCreateSrq.)
Result<Command> DecodeCreateSrq(Reader& r, const DecodeLimits& limits) {
  virtio_rdma_req_create_srq w;
  if (!r.Read(&w)) return Status::kInvalid;
  CreateSrqCmd cmd;
  engine::CreateSrqRequest& req = cmd.req;
  req.pd = le32toh(w.pd_handle);
  req.max_wr = le32toh(w.max_wr);
  req.max_sge = le32toh(w.max_sge);
  req.srq_limit = le32toh(w.srq_limit);
  uint32_t npages = 0;
  VRDMA_RETURN_IF_ERROR(ReadRing(w.ring, limits, &req.ring, &npages));
  if (!r.ReadFinalPages(npages, &req.ring.pages)) return Status::kInvalid;
  return Command{std::move(cmd)};
}

// MODIFY_SRQ: attr_mask only VIRTIO_RDMA_SRQ_MAX_WR | VIRTIO_RDMA_SRQ_LIMIT.
Result<Command> DecodeModifySrq(Reader& r) {
  virtio_rdma_req_modify_srq w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  ModifySrqCmd cmd{le32toh(w.srq_handle), le32toh(w.attr_mask),
                   le32toh(w.max_wr), le32toh(w.srq_limit)};
  if (cmd.mask & ~uint32_t{VIRTIO_RDMA_SRQ_MAX_WR | VIRTIO_RDMA_SRQ_LIMIT})
    return Status::kInvalid;
  return Command{cmd};
}

}  // namespace

// ah_attr (CREATE_AH; MODIFY_QP with VIRTIO_RDMA_QP_AV): parsed only; its
// values are the engine's rule (engine::CheckAh). is_global is a wire
// boolean, 0 or 1. dlid, static_rate, dmac and reserved are ignored (the
// device resolves the fabric address itself, docs/virtio-rdma.md 4.4).
Status DecodeAhAttr(const virtio_rdma_ah_attr& w, engine::GuestAh* out) {
  if (w.is_global > 1) return Status::kInvalid;
  std::memcpy(out->dgid.data(), w.dgid, sizeof(w.dgid));
  out->sgid_index = w.sgid_index;
  out->flow_label = le32toh(w.flow_label);
  out->hop_limit = w.hop_limit;
  out->traffic_class = w.traffic_class;
  out->sl = w.sl;
  out->port_num = w.port_num;
  out->is_global = w.is_global != 0;
  return Status::kOk;
}

// qp_attr (MODIFY_QP): parsed only. Every field its mask names is copied;
// which fields a transition takes and their values are the engine's rule
// (engine::CheckModifyQp, the one place). The path MTU enum becomes bytes;
// a value outside IB_MTU_256..IB_MTU_4096 becomes 0, which the engine
// refuses. The others are meaningless and left at their defaults.
Status DecodeQpAttr(const virtio_rdma_qp_attr& w,
                    engine::ModifyQpRequest* out) {
  const uint32_t mask = le32toh(w.attr_mask);
  out->mask = mask;
  if (mask & VIRTIO_RDMA_QP_STATE) out->state = static_cast<QpState>(w.qp_state);
  if (mask & VIRTIO_RDMA_QP_CUR_STATE) out->cur_state = static_cast<QpState>(w.cur_qp_state);
  if (mask & VIRTIO_RDMA_QP_ACCESS_FLAGS) out->access_flags = le32toh(w.qp_access_flags);
  if (mask & VIRTIO_RDMA_QP_PKEY_INDEX) out->pkey_index = le16toh(w.pkey_index);
  if (mask & VIRTIO_RDMA_QP_PORT) out->port_num = w.port_num;
  if (mask & VIRTIO_RDMA_QP_QKEY) out->qkey = le32toh(w.qkey);
  if (mask & VIRTIO_RDMA_QP_AV) VRDMA_RETURN_IF_ERROR(DecodeAhAttr(w.ah_attr, &out->ah));
  if (mask & VIRTIO_RDMA_QP_PATH_MTU) {
    const bool known = w.path_mtu >= VIRTIO_RDMA_MTU_256 && w.path_mtu <= VIRTIO_RDMA_MTU_4096;
    out->path_mtu_bytes = known ? 128u << w.path_mtu : 0;
  }
  if (mask & VIRTIO_RDMA_QP_TIMEOUT) out->timeout = w.timeout;
  if (mask & VIRTIO_RDMA_QP_RETRY_CNT) out->retry_cnt = w.retry_cnt;
  if (mask & VIRTIO_RDMA_QP_RNR_RETRY) out->rnr_retry = w.rnr_retry;
  if (mask & VIRTIO_RDMA_QP_RQ_PSN) out->rq_psn = le32toh(w.rq_psn);
  if (mask & VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC) out->max_rd_atomic = w.max_rd_atomic;
  if (mask & VIRTIO_RDMA_QP_MIN_RNR_TIMER) out->min_rnr_timer = w.min_rnr_timer;
  if (mask & VIRTIO_RDMA_QP_SQ_PSN) out->sq_psn = le32toh(w.sq_psn);
  if (mask & VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC) out->max_dest_rd_atomic = w.max_dest_rd_atomic;
  if (mask & VIRTIO_RDMA_QP_DEST_QPN) out->dest_qpn = le32toh(w.dest_qp_num);
  return Status::kOk;
}

// ALLOC_MW: struct virtio_rdma_req_alloc_mw, exactly; type 1 or 2 (the
// engine checks the PD, the quota and whether windows are offered).
Result<Command> DecodeAllocMw(Reader& r) {
  virtio_rdma_req_alloc_mw w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  const uint32_t type = le32toh(w.type);
  if (type != 1 && type != 2) return Status::kInvalid;
  return Command{AllocMwCmd{le32toh(w.pd_handle), static_cast<uint8_t>(type)}};
}

// ALLOC_MR: struct virtio_rdma_req_alloc_mr, exactly; max_pages
// 1..max_mr_pages, page_list 8-byte aligned and the list's end without
// wrap (the engine checks the PD, the quota and that the list lies in
// guest RAM).
Result<Command> DecodeAllocMr(Reader& r, const DecodeLimits& limits) {
  virtio_rdma_req_alloc_mr w;
  VRDMA_RETURN_IF_ERROR(ReadExact(r, &w));
  AllocMrCmd cmd;
  cmd.req.pd = le32toh(w.pd_handle);
  cmd.req.max_pages = le32toh(w.max_pages);
  cmd.req.page_list = le64toh(w.page_list);
  if (cmd.req.max_pages == 0 || cmd.req.max_pages > limits.max_mr_pages)
    return Status::kInvalid;
  if (cmd.req.page_list % sizeof(uint64_t) != 0) return Status::kInvalid;
  uint64_t end = 0;
  if (__builtin_add_overflow(cmd.req.page_list,
                             uint64_t{cmd.req.max_pages} * sizeof(uint64_t), &end))
    return Status::kInvalid;
  return Command{cmd};
}

uint32_t PeekCommandCode(std::span<const uint8_t> bytes) {
  virtio_rdma_cmd_hdr hdr;
  if (bytes.size() < sizeof(hdr)) return 0;
  std::memcpy(&hdr, bytes.data(), sizeof(hdr));
  return le32toh(hdr.cmd);
}

// Every command: at least a struct virtio_rdma_cmd_hdr; cmd in
// [1, VIRTIO_RDMA_CMD_MAX]; hdr.reserved ignored; then the command's rules.
Result<Command> DecodeCommand(std::span<const uint8_t> bytes,
                              const DecodeLimits& limits) {
  Reader r(bytes);
  virtio_rdma_cmd_hdr hdr;
  if (!r.Read(&hdr)) return Status::kInvalid;
  switch (le32toh(hdr.cmd)) {
    case VIRTIO_RDMA_CMD_QUERY_DEVICE: return DecodeEmpty<QueryDeviceCmd>(r);
    case VIRTIO_RDMA_CMD_QUERY_PORT: return DecodeQueryPort(r);
    case VIRTIO_RDMA_CMD_QUERY_GID: return DecodeQueryGid(r);
    case VIRTIO_RDMA_CMD_CREATE_PD: return DecodeEmpty<CreatePdCmd>(r);
    case VIRTIO_RDMA_CMD_DESTROY_PD:
      return DecodeHandleCmd<DestroyPdCmd, &DestroyPdCmd::pd>(r);
    case VIRTIO_RDMA_CMD_REG_MR: return DecodeRegMr(r, limits);
    case VIRTIO_RDMA_CMD_DEREG_MR:
      return DecodeHandleCmd<DeregMrCmd, &DeregMrCmd::mr>(r);
    case VIRTIO_RDMA_CMD_CREATE_CQ: return DecodeCreateCq(r, limits);
    case VIRTIO_RDMA_CMD_DESTROY_CQ:
      return DecodeHandleCmd<DestroyCqCmd, &DestroyCqCmd::cq>(r);
    case VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ: return DecodeReqNotifyCq(r);
    case VIRTIO_RDMA_CMD_CREATE_QP: return DecodeCreateQp(r, limits);
    case VIRTIO_RDMA_CMD_MODIFY_QP: return DecodeModifyQp(r);
    case VIRTIO_RDMA_CMD_QUERY_QP: return DecodeQueryQp(r);
    case VIRTIO_RDMA_CMD_DESTROY_QP:
      return DecodeHandleCmd<DestroyQpCmd, &DestroyQpCmd::qpn>(r);
    case VIRTIO_RDMA_CMD_CREATE_AH: return DecodeCreateAh(r);
    case VIRTIO_RDMA_CMD_DESTROY_AH:
      return DecodeHandleCmd<DestroyAhCmd, &DestroyAhCmd::ah>(r);
    case VIRTIO_RDMA_CMD_CREATE_SRQ: return DecodeCreateSrq(r, limits);
    case VIRTIO_RDMA_CMD_MODIFY_SRQ: return DecodeModifySrq(r);
    case VIRTIO_RDMA_CMD_DESTROY_SRQ:
      return DecodeHandleCmd<DestroySrqCmd, &DestroySrqCmd::srq>(r);
    case VIRTIO_RDMA_CMD_ALLOC_MW: return DecodeAllocMw(r);
    case VIRTIO_RDMA_CMD_DEALLOC_MW:
      return DecodeHandleCmd<DeallocMwCmd, &DeallocMwCmd::mw>(r);
    case VIRTIO_RDMA_CMD_ALLOC_MR: return DecodeAllocMr(r, limits);
    default: return Status::kInvalid;
  }
}

uint32_t ResponseBodySize(uint32_t cmd) {
  switch (cmd) {
    case VIRTIO_RDMA_CMD_QUERY_DEVICE:
      return sizeof(virtio_rdma_resp_query_device);
    case VIRTIO_RDMA_CMD_QUERY_PORT: return sizeof(virtio_rdma_resp_query_port);
    case VIRTIO_RDMA_CMD_QUERY_GID: return sizeof(virtio_rdma_resp_query_gid);
    case VIRTIO_RDMA_CMD_CREATE_PD: return sizeof(virtio_rdma_resp_create_pd);
    case VIRTIO_RDMA_CMD_REG_MR: return sizeof(virtio_rdma_resp_reg_mr);
    case VIRTIO_RDMA_CMD_CREATE_CQ: return sizeof(virtio_rdma_resp_create_cq);
    case VIRTIO_RDMA_CMD_CREATE_QP: return sizeof(virtio_rdma_resp_create_qp);
    case VIRTIO_RDMA_CMD_QUERY_QP: return sizeof(virtio_rdma_resp_query_qp);
    case VIRTIO_RDMA_CMD_CREATE_AH: return sizeof(virtio_rdma_resp_create_ah);
    case VIRTIO_RDMA_CMD_CREATE_SRQ: return sizeof(virtio_rdma_resp_create_srq);
    case VIRTIO_RDMA_CMD_ALLOC_MW: return sizeof(virtio_rdma_resp_alloc_mw);
    case VIRTIO_RDMA_CMD_ALLOC_MR: return sizeof(virtio_rdma_resp_alloc_mr);
    default: return 0;
  }
}

uint64_t MaxCommandBytes(const DecodeLimits& limits) {
  const uint64_t ring_pages =
      std::min<uint64_t>(limits.max_ring_pages, kMaxRingPagesByGeometry);
  const uint64_t hdr = sizeof(virtio_rdma_cmd_hdr);
  const uint64_t mr = hdr + sizeof(virtio_rdma_req_reg_mr) +
                      uint64_t{limits.max_mr_pages} * sizeof(uint64_t);
  const uint64_t qp =
      hdr + sizeof(virtio_rdma_req_create_qp) + 2 * ring_pages * sizeof(uint64_t);
  const uint64_t fixed = hdr + sizeof(virtio_rdma_req_modify_qp);  // largest
  return std::max({mr, qp, fixed});
}

// Doorbell: exactly 8 bytes; kind in [1, 5]; reserved ignored.
Result<DoorbellRecord> DecodeDoorbell(std::span<const uint8_t> bytes) {
  virtio_rdma_doorbell w;
  if (bytes.size() != sizeof(w)) return Status::kInvalid;
  std::memcpy(&w, bytes.data(), sizeof(w));
  if (w.kind < VIRTIO_RDMA_DB_SQ || w.kind > VIRTIO_RDMA_DB_CQ_ARM_SOLICITED)
    return Status::kInvalid;
  return DoorbellRecord{le32toh(w.handle), w.kind};
}

}  // namespace vrdma::device
