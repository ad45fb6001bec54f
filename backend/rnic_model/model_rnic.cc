// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/rnic_model/model_rnic.h"

#include <algorithm>
#include <cstring>

#include "backend/rnic/roce_grh.h"

namespace vrdma::model {

bool ModelWorld::RemoveGid(const Gid& gid, HostId host) {
  auto it = gids_.find(gid);
  if (it == gids_.end() || it->second != host) return false;
  gids_.erase(it);
  return true;
}

bool ModelWorld::HostOfGid(const Gid& gid, HostId* host) const {
  auto it = gids_.find(gid);
  if (it == gids_.end()) return false;
  *host = it->second;
  return true;
}

uint8_t* ModelWorld::HostBytes(uint32_t key, uint32_t tag, uint64_t addr, uint64_t len) const {
  uint64_t iova = 0;
  const MrId mr = MrOfKey(key, tag, &iova);
  if (mr == kNoMr || mr >= mr_mem_.size() || mr_mem_[mr].addr == nullptr) return nullptr;
  const MrMemory& m = mr_mem_[mr];
  if (addr < iova || addr - iova > m.length || len > m.length - (addr - iova)) return nullptr;
  return m.addr + (addr - iova);
}

ModelWorld::Carried& ModelWorld::NewCarried() {
  if (carry_.empty()) carry_.resize(kCarrySlots);
  ++carried_;
  if (++next_carry_ == 0) next_carry_ = 1;  // tag 0 means none
  Carried& c = carry_[next_carry_ % kCarrySlots];
  c.tag = next_carry_;
  c.len = 0;
  return c;
}

const ModelWorld::Carried* ModelWorld::FindCarried(uint32_t tag) {
  if (tag == 0) return nullptr;
  if (carry_.empty() || carry_[tag % kCarrySlots].tag != tag) {
    ++carry_overwritten_;
    return nullptr;
  }
  return &carry_[tag % kCarrySlots];
}

ModelRnic::ModelRnic(ModelWorld& world, const NicParams& nic) : world_(world) {
  host_ = world_.sim().AddHost(nic);
}

RnicLimits ModelRnic::limits() const {
  RnicLimits l;
  l.max_qp = 1u << 16;
  l.max_qp_wr = 1u << 15;
  l.max_sge = kMaxSge;
  l.max_cq = 1u << 16;
  l.max_cqe = 1u << 22;
  l.max_mr = 1u << 20;
  l.max_mr_size = ~0ull;
  l.max_pd = 1u << 16;
  l.max_srq = 0;
  l.max_srq_wr = 0;
  l.max_inline_data = kMaxInline;
  l.max_msg_sz = 1u << 31;
  l.active_mtu_bytes = world_.sim().nic(host_).mtu_bytes;
  l.node_guid = 0x5a00000000000000ull | host_;
  l.cross_channel = true;
  l.atomics = true;
  return l;
}

Status ModelRnic::AddGid(const Gid& gid) {
  if (gid == Gid{}) return Status::kInvalid;
  return world_.AddGid(gid, host_) ? Status::kOk : Status::kBusy;  // one card per GID
}
Status ModelRnic::RemoveGid(const Gid& gid) {
  return world_.RemoveGid(gid, host_) ? Status::kOk : Status::kBadHandle;
}
Result<RnicPd> ModelRnic::AllocPd() { return RnicPd{next_pd_++}; }
Status ModelRnic::DeallocPd(RnicPd) { return Status::kOk; }

Result<RnicMr> ModelRnic::RegMr(RnicPd, uint8_t* addr, uint64_t length, uint64_t iova,
                                uint32_t) {
  const MrId mr = world_.sim().RegisterMr(host_, length, 4096);
  world_.set_mr_iova(mr, iova);
  world_.set_mr_memory(mr, addr, length);
  return RnicMr{mr, mr << 8 | 1, mr << 8 | 2};
}
Status ModelRnic::DeregMr(RnicMr mr) {
  if (!world_.sim().DeregisterMr(mr.id)) return Status::kBadHandle;
  world_.clear_mr(mr.id);
  return Status::kOk;
}

Result<RnicCq> ModelRnic::CreateCq(uint32_t) {
  cqs_.push_back(world_.sim().CreateCq(host_));
  return RnicCq{static_cast<uint32_t>(cqs_.size())};
}
Status ModelRnic::DestroyCq(RnicCq cq) {
  return cq.id >= 1 && cq.id <= cqs_.size() ? Status::kOk : Status::kBadHandle;
}

Status ModelRnic::ResizeCq(RnicCq cq, uint32_t) {
  return cq.id >= 1 && cq.id <= cqs_.size() ? Status::kOk : Status::kBadHandle;
}

Result<RnicSrq> ModelRnic::CreateSrq(RnicPd, uint32_t, uint32_t) { return Status::kUnsupported; }
Status ModelRnic::DestroySrq(RnicSrq) { return Status::kUnsupported; }

Result<RnicQp> ModelRnic::CreateQp(const QpInit& init) {
  if (init.has_srq) return Status::kUnsupported;
  if (init.send_cq.id < 1 || init.send_cq.id > cqs_.size() || init.recv_cq.id < 1 ||
      init.recv_cq.id > cqs_.size()) {
    return Status::kBadHandle;
  }
  QpConfig c;
  c.transport = init.type == QpType::kUc   ? Transport::kUc
                : init.type == QpType::kUd ? Transport::kUd
                                           : Transport::kRc;
  c.send_cq = cqs_[init.send_cq.id - 1];
  c.recv_cq = cqs_[init.recv_cq.id - 1];
  c.sq_depth = std::max<uint32_t>(init.caps.max_send_wr, 1);
  c.sig_all = init.sq_sig_all;
  c.managed = init.managed;
  QpEntry e;
  e.live = true;
  e.model = world_.sim().CreateQp(host_, c);
  e.type = init.type;
  by_model_[e.model] = static_cast<uint32_t>(qps_.size());
  qps_.push_back(std::move(e));
  // QPN = model QP id + kFirstQpn: unique across every card of the world,
  // and never 0 or 1 (SMI and GSI, as on every RNIC).
  return RnicQp{static_cast<uint32_t>(qps_.size()), e.model + kFirstQpn};
}

ModelRnic::QpEntry* ModelRnic::Find(RnicQp qp) {
  if (qp.id < 1 || qp.id > qps_.size() || !qps_[qp.id - 1].live) return nullptr;
  return &qps_[qp.id - 1];
}
const ModelRnic::QpEntry* ModelRnic::Find(RnicQp qp) const {
  if (qp.id < 1 || qp.id > qps_.size() || !qps_[qp.id - 1].live) return nullptr;
  return &qps_[qp.id - 1];
}

Status ModelRnic::ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) {
  QpEntry* e = Find(qp);
  if (e == nullptr) return Status::kBadHandle;
  if (mask & kQpState) {
    const QpState from = e->attr.state, to = attr.state;
    const bool ok = to == QpState::kErr || to == QpState::kReset ||
                    (from == QpState::kReset && to == QpState::kInit) ||
                    (from == QpState::kInit && (to == QpState::kInit || to == QpState::kRtr)) ||
                    (from == QpState::kRtr && to == QpState::kRts) ||
                    (from == QpState::kRts && to == QpState::kRts);
    if (!ok) return Status::kBadState;
    if (to == QpState::kRtr && e->type != QpType::kUd) {  // UD: no peer
      if (!(mask & kQpDestQpn) || attr.dest_qpn < kFirstQpn) return Status::kInvalid;
      if (!world_.sim().Connect(e->model, SimQp(attr.dest_qpn))) return Status::kInvalid;
    }
  }
  if (mask & (kQpRetryCnt | kQpRnrRetry | kQpMinRnrTimer)) {
    world_.sim().SetRetry(e->model, (mask & kQpRetryCnt) ? attr.retry_cnt : e->attr.retry_cnt,
                          (mask & kQpRnrRetry) ? attr.rnr_retry : e->attr.rnr_retry,
                          (mask & kQpMinRnrTimer) ? attr.min_rnr_timer : e->attr.min_rnr_timer);
  }
  if (mask & kQpTimeout) world_.sim().SetTimeout(e->model, attr.timeout);
  const QpState keep = e->attr.state;
  e->attr = attr;
  if (!(mask & kQpState)) e->attr.state = keep;
  return Status::kOk;
}

Result<QpAttr> ModelRnic::QueryQp(RnicQp qp) const {
  const QpEntry* e = Find(qp);
  if (e == nullptr) return Status::kBadHandle;
  QpAttr a = e->attr;
  // A retry count ran out in the model: the QP moved to the error state.
  if (world_.sim().qp_in_error(e->model)) a.state = QpState::kErr;
  return a;
}

Status ModelRnic::DestroyQp(RnicQp qp) {
  QpEntry* e = Find(qp);
  if (e == nullptr) return Status::kBadHandle;
  e->live = false;
  return Status::kOk;
}

Result<RnicAh> ModelRnic::CreateAh(RnicPd, const AddressVector& av) {
  HostId own = 0, dst = 0;
  // Like a real RNIC's sgid_index check: only a GID of this card; and the
  // model must know which card the dgid names.
  if (!world_.HostOfGid(av.sgid, &own) || own != host_) return Status::kInvalid;
  if (!world_.HostOfGid(av.dgid, &dst)) return Status::kInvalid;
  ahs_.push_back(AhEntry{true, dst, av});
  return RnicAh{static_cast<uint32_t>(ahs_.size())};
}
Status ModelRnic::DestroyAh(RnicAh ah) {
  if (ah.id < 1 || ah.id > ahs_.size() || !ahs_[ah.id - 1].live) return Status::kBadHandle;
  ahs_[ah.id - 1].live = false;
  return Status::kOk;
}

WrOpcode WrOpcodeOf(Op op) {
  switch (op) {
    case Op::kWrite: return WrOpcode::kRdmaWrite;
    case Op::kWriteImm: return WrOpcode::kRdmaWriteWithImm;
    case Op::kSend: return WrOpcode::kSend;
    case Op::kSendImm: return WrOpcode::kSendWithImm;
    case Op::kRead: return WrOpcode::kRdmaRead;
    case Op::kWait: return WrOpcode::kWait;
    case Op::kEnable: return WrOpcode::kEnable;
    case Op::kCas: return WrOpcode::kAtomicCmpSwp;
    case Op::kFaa: return WrOpcode::kAtomicFetchAdd;
  }
  return WrOpcode::kRdmaWrite;
}

bool ModelRnic::ToModelWr(const SendWr& in, Wr* out) const {
  Wr w;
  w.wr_id = in.wr_id;
  w.bytes = static_cast<uint32_t>(in.total_length());
  w.signaled = (in.send_flags & kSendSignaled) != 0;
  w.inline_data = (in.send_flags & kSendInline) != 0;
  if (in.opcode == WrOpcode::kRdmaWriteWithImm || in.opcode == WrOpcode::kSendWithImm) {
    w.imm = in.imm_data;
  }
  uint64_t iova = 0;
  if (!w.inline_data && in.num_sge > 0) {
    w.local_mr = world_.MrOfKey(in.sge[0].lkey, 1, &iova);
    if (w.local_mr != kNoMr) w.local_offset = in.sge[0].addr - iova;
  }
  if (in.opcode == WrOpcode::kRdmaWrite || in.opcode == WrOpcode::kRdmaWriteWithImm ||
      in.opcode == WrOpcode::kRdmaRead) {
    w.remote_mr = world_.MrOfKey(in.rkey, 2, &iova);
    if (w.remote_mr != kNoMr) w.remote_offset = in.remote_addr - iova;
  }
  if (in.ah.id != 0) {  // UD: the AH's card and a QP of the world
    if (in.ah.id > ahs_.size() || !ahs_[in.ah.id - 1].live || in.remote_qpn < kFirstQpn) return false;
    w.ah_host = ahs_[in.ah.id - 1].host;
    w.ah_qp = SimQp(in.remote_qpn);
  }
  switch (in.opcode) {
    case WrOpcode::kRdmaWrite: w.op = Op::kWrite; break;
    case WrOpcode::kRdmaWriteWithImm: w.op = Op::kWriteImm; break;
    case WrOpcode::kSend: w.op = Op::kSend; break;
    case WrOpcode::kSendWithImm: w.op = Op::kSendImm; break;
    case WrOpcode::kRdmaRead: w.op = Op::kRead; break;
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd:
      w.op = in.opcode == WrOpcode::kAtomicCmpSwp ? Op::kCas : Op::kFaa;
      w.bytes = 8;
      w.raddr = in.remote_addr;
      break;
    case WrOpcode::kWait: {
      // rnic.h counts completions absolutely; the model's WAIT counts
      // from the moment it is posted.
      const CqId cq = model_cq(in.wait_cq);
      if (cq == kNoCq) return false;
      const uint64_t produced = world_.sim().cqe_count(cq);
      w.op = Op::kWait;
      w.wait_cq = cq;
      w.wait_count = static_cast<uint32_t>(
          in.wait_index > produced ? in.wait_index - produced : 0);
      break;
    }
    case WrOpcode::kEnable: {
      const QpEntry* t = Find(in.enable_qp);
      if (t == nullptr) return false;
      w.op = Op::kEnable;
      w.enable_qp = t->model;
      w.enable_count = in.enable_count;
      break;
    }
    default: return false;
  }
  *out = w;
  return true;
}

int ModelRnic::PostSend(RnicQp qp, std::span<const SendWr> wrs, Status* first_error) {
  QpEntry* e = Find(qp);
  if (e == nullptr || e->attr.state != QpState::kRts) {
    if (first_error) *first_error = e == nullptr ? Status::kBadHandle : Status::kBadState;
    return 0;
  }
  int done = 0;
  // Post-list semantics: one model post (one doorbell) per run of WRs.
  constexpr int kChunk = 32;
  Wr buf[kChunk];
  const uint32_t mtu = world_.sim().nic(host_).mtu_bytes;
  while (done < static_cast<int>(wrs.size())) {
    int n = 0;
    Status bad = Status::kOk;
    while (n < kChunk && done + n < static_cast<int>(wrs.size())) {
      const SendWr& in = wrs[done + n];
      // UD carries SENDs of at most one MTU, each addressed by an AH.
      if (e->type == QpType::kUd &&
          (in.ah.id == 0 || in.total_length() > mtu ||
           (in.opcode != WrOpcode::kSend && in.opcode != WrOpcode::kSendWithImm))) {
        bad = Status::kInvalid;
        break;
      }
      if (!ToModelWr(in, &buf[n])) {
        bad = in.ah.id != 0 ? Status::kInvalid : Status::kUnsupported;
        break;
      }
      Carry(*e, in, &buf[n]);
      ++n;
    }
    if (n == 0) {
      if (first_error) *first_error = bad;
      return done;
    }
    const int accepted = world_.sim().PostSend(e->model, std::span<const Wr>(buf, n));
    done += accepted;
    if (accepted < n) {
      if (first_error) *first_error = Status::kNoResource;
      return done;
    }
  }
  return done;
}

int ModelRnic::PostRecv(RnicQp qp, std::span<const RecvWr> wrs, Status* first_error) {
  QpEntry* e = Find(qp);
  if (e == nullptr || e->attr.state == QpState::kReset || e->attr.state == QpState::kErr) {
    if (first_error) *first_error = e == nullptr ? Status::kBadHandle : Status::kBadState;
    return 0;
  }
  for (const RecvWr& r : wrs) {
    world_.sim().PostRecv(e->model, r.wr_id);
    e->recvs.push_back(r);
  }
  return static_cast<int>(wrs.size());
}

int ModelRnic::PostSrqRecv(RnicSrq, std::span<const RecvWr>, Status* first_error) {
  if (first_error) *first_error = Status::kUnsupported;
  return 0;
}

uint64_t ModelRnic::CqProduced(RnicCq cq) const {
  const CqId id = model_cq(cq);
  return id == kNoCq ? 0 : world_.sim().cqe_count(id);
}

Completion ModelRnic::ToCompletion(const Cqe& c) {
  Completion o;
  o.wr_id = c.wr_id;
  switch (c.status) {
    case CqeStatus::kSuccess: o.status = WcStatus::kSuccess; break;
    case CqeStatus::kFlushed: o.status = WcStatus::kWrFlushErr; break;
    case CqeStatus::kRetryExceeded: o.status = WcStatus::kRetryExcErr; break;
    case CqeStatus::kRnrRetryExceeded: o.status = WcStatus::kRnrRetryExcErr; break;
  }
  o.byte_len = c.bytes;
  if (c.op == Op::kWriteImm || c.op == Op::kSendImm) o.imm_data = c.imm;
  o.qpn = c.qp + kFirstQpn;
  if (c.src_qp != kNoQp) o.src_qpn = c.src_qp + kFirstQpn;
  o.timestamp_ns = c.time / kPicosPerNano;
  if (c.recv) {
    o.opcode = c.op == Op::kWriteImm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
    if (c.op == Op::kWriteImm || c.op == Op::kSendImm) o.wc_flags |= kWcWithImm;
  } else {
    o.opcode = SendCompletionOpcode(WrOpcodeOf(c.op));  // rnic.h's table
  }
  return o;
}

int ModelRnic::PollCq(RnicCq cq, std::span<Completion> out) {
  if (cq.id < 1 || cq.id > cqs_.size()) return 0;
  // Straight from the model's ring (an empty CQ costs a comparison: the
  // scheduler stage polls its control CQs on every pass).
  return world_.sim().DrainCq(cqs_[cq.id - 1], static_cast<int>(out.size()),
                              [&](int i, const Cqe& c) {
                                out[i] = ToCompletion(c);
                                if (c.recv) Land(c, &out[i]);
                              });
}

void ModelRnic::Carry(const QpEntry& e, const SendWr& in, Wr* w) {
  if (in.opcode != WrOpcode::kSend && in.opcode != WrOpcode::kSendWithImm) return;
  const bool ud = e.type == QpType::kUd;
  // RC/UC: only a SEND whose first SGE is registered memory has bytes to
  // carry (the bench's tenants post hot-region keys: nothing is taken).
  if (!ud && (in.num_sge == 0 ||
              world_.HostBytes(in.sge[0].lkey, 1, in.sge[0].addr, 0) == nullptr)) {
    return;
  }
  ModelWorld::Carried& c = world_.NewCarried();
  uint32_t at = 0;
  if (ud) {
    BuildRoceGrh(ahs_[in.ah.id - 1].av, static_cast<uint32_t>(in.total_length()),
                 c.data.data());
    at = ModelWorld::kCarryGrh;
  }
  uint32_t left = ModelWorld::kCarryBytes;
  for (uint32_t i = 0; i < in.num_sge && left > 0; ++i) {
    const uint32_t n = std::min(in.sge[i].length, left);
    const uint8_t* src = world_.HostBytes(in.sge[i].lkey, 1, in.sge[i].addr, n);
    if (src == nullptr) break;  // not registered memory: carry what came before
    std::memcpy(c.data.data() + at, src, n);
    at += n;
    left -= n;
  }
  c.len = at;
  w->carry = c.tag;
}

void ModelRnic::Land(const Cqe& c, Completion* o) {
  auto q = by_model_.find(c.qp);
  if (q == by_model_.end()) return;
  QpEntry& e = qps_[q->second];
  // Receives complete in post order; search in case a flush raced.
  auto r = e.recvs.begin();
  while (r != e.recvs.end() && r->wr_id != c.wr_id) ++r;
  if (r == e.recvs.end()) return;
  const RecvWr recv = *r;
  e.recvs.erase(r);
  if (c.status != CqeStatus::kSuccess) return;
  if (e.type == QpType::kUd) o->byte_len += ModelWorld::kCarryGrh;  // the GRH, as RoCE
  const ModelWorld::Carried* data = world_.FindCarried(c.carry);
  if (data == nullptr) return;
  uint32_t from = 0;
  for (uint32_t i = 0; i < recv.num_sge && from < data->len; ++i) {
    const uint32_t n = std::min(recv.sge[i].length, data->len - from);
    uint8_t* dst = world_.HostBytes(recv.sge[i].lkey, 1, recv.sge[i].addr, n);
    if (dst == nullptr) break;
    std::memcpy(dst, data->data.data() + from, n);
    from += n;
  }
}

bool ModelRnic::Progress() {
  if (quantum_ == 0) return false;
  Simulator& sim = world_.sim();
  const uint64_t before = sim.events_processed();
  sim.RunUntil(sim.now() + quantum_);
  return sim.events_processed() != before;
}

}  // namespace vrdma::model
