// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// VerbsRnic: opening the device, limits, the GID map, and the objects
// without a state machine (PD, MR, CQ, SRQ, AH). QPs: verbs_rnic_qp.cc;
// the data path: verbs_rnic_datapath.cc.
#include "backend/verbs_rnic/verbs_rnic.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace vrdma {
namespace {

uint32_t MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 1024;
}

// One lane's nominal rate in Gb/s (ibv_port_attr::active_speed).
double LaneGbps(uint8_t speed) {
  switch (speed) {
    case 1: return 2.5;    // SDR
    case 2: return 5;      // DDR
    case 4: return 10;     // QDR
    case 8: return 10;     // FDR10
    case 16: return 14;    // FDR
    case 32: return 25;    // EDR
    case 64: return 50;    // HDR
    case 128: return 100;  // NDR
  }
  return 0;
}

int Lanes(uint8_t width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
  }
  return 0;
}

bool MakeNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

}  // namespace

Status StatusFromErrno(int err) {
  switch (err) {
    case 0: return Status::kOk;
    case EINVAL: return Status::kInvalid;
    case ENOMEM:
    case ENOSPC:
    case EAGAIN: return Status::kNoResource;
    case EOPNOTSUPP:
    case ENOSYS:
    case EPROTONOSUPPORT: return Status::kUnsupported;
    case EACCES:
    case EPERM: return Status::kAccess;
    case EFAULT: return Status::kFault;
    case EBUSY: return Status::kBusy;
  }
  return Status::kIoError;
}

std::unique_ptr<VerbsRnic> VerbsRnic::Open(const Options& options,
                                           std::string* error) {
  std::unique_ptr<VerbsRnic> rnic(new VerbsRnic(options));
  if (rnic->Init(error) != Status::kOk) return nullptr;
  return rnic;
}

Status VerbsRnic::Init(std::string* error) {
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (list == nullptr) {
    *error = "no RDMA device named " + options_.device + " (ibv_get_device_list: " +
             strerror(errno) + "; does this kernel have RDMA support?)";
    return Status::kIoError;
  }
  std::string names;
  for (int i = 0; i < num; ++i) {
    const char* name = ibv_get_device_name(list[i]);
    names += std::string(names.empty() ? "" : ", ") + name;
    if (options_.device == name) ctx_ = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  if (ctx_ == nullptr) {
    *error = "no RDMA device named " + options_.device + " (devices: " +
             (names.empty() ? "none" : names) + ")";
    return Status::kInvalid;
  }
  ibv_device_attr dev{};
  ibv_port_attr port{};
  if (int e = ibv_query_device(ctx_, &dev); e != 0) {
    *error = std::string("ibv_query_device: ") + strerror(e);
    return Status::kIoError;
  }
  if (options_.port < 1 || options_.port > dev.phys_port_cnt) {
    *error = options_.device + " has no port " + std::to_string(options_.port);
    return Status::kInvalid;
  }
  if (int e = ibv_query_port(ctx_, options_.port, &port); e != 0) {
    *error = std::string("ibv_query_port: ") + strerror(e);
    return Status::kIoError;
  }
  if (port.link_layer != IBV_LINK_LAYER_ETHERNET) {
    *error = options_.device + " port " + std::to_string(options_.port) +
             " is not RoCE (Ethernet link layer): only RoCE is supported";
    return Status::kUnsupported;
  }
  gid_table_len_ = port.gid_tbl_len;
  channel_ = ibv_create_comp_channel(ctx_);
  if (channel_ == nullptr || !MakeNonBlocking(channel_->fd) ||
      !MakeNonBlocking(ctx_->async_fd)) {
    *error = std::string("completion channel / async fd: ") + strerror(errno);
    return Status::kIoError;
  }
  const uint32_t cap = options_.max_objects;
  auto lim = [cap](int v) {
    return std::min<uint32_t>(cap, static_cast<uint32_t>(std::max(v, 0)));
  };
  RnicLimits& l = limits_;
  l.max_qp = lim(dev.max_qp);
  l.max_qp_wr = static_cast<uint32_t>(std::max(dev.max_qp_wr, 0));
  l.max_sge = std::min<uint32_t>(kMaxSge, static_cast<uint32_t>(std::max(dev.max_sge, 0)));
  l.max_cq = lim(dev.max_cq);
  l.max_cqe = static_cast<uint32_t>(std::max(dev.max_cqe, 0));
  l.max_mr = lim(dev.max_mr);
  l.max_mr_size = dev.max_mr_size;
  l.max_mw = lim(dev.max_mw);
  l.max_pd = lim(dev.max_pd);
  l.max_srq = lim(dev.max_srq);
  l.max_srq_wr = static_cast<uint32_t>(std::max(dev.max_srq_wr, 0));
  l.max_msg_sz = port.max_msg_sz;
  l.active_mtu_bytes = MtuBytes(port.active_mtu);
  l.node_guid = be64toh(dev.node_guid);
  l.cross_channel = false;
  l.atomics = dev.atomic_cap != IBV_ATOMIC_NONE;
  // ibv_reg_mr without IBV_ACCESS_ON_DEMAND: the kernel pins every page of
  // a registration for its life (ib_umem_get), rxe included.
  l.pins_memory = true;
  l.link_rate_bps = static_cast<uint64_t>(LaneGbps(port.active_speed) *
                                          Lanes(port.active_width) * 1e9);
  pds_.Init(l.max_pd);
  mrs_.Init(l.max_mr);
  mws_.Init(l.max_mw);
  cqs_.Init(l.max_cq);
  arm_cqs_ = std::make_unique<std::atomic<ibv_cq*>[]>(l.max_cq);
  for (uint32_t i = 0; i < l.max_cq; ++i) arm_cqs_[i].store(nullptr);
  srqs_.Init(l.max_srq);
  qps_.Init(l.max_qp);
  ahs_.Init(lim(dev.max_ah));

  // max_inline_data is reported nowhere but by a created QP: probe it.
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ibv_cq* cq = pd ? ibv_create_cq(ctx_, 1, nullptr, nullptr, 0) : nullptr;
  if (cq != nullptr) {
    for (uint32_t inl : {uint32_t{kMaxInline}, 256u, 128u, 64u}) {
      ibv_qp_init_attr a{};
      a.send_cq = a.recv_cq = cq;
      a.qp_type = IBV_QPT_RC;
      a.cap = {1, 1, 1, 1, inl};
      if (ibv_qp* qp = ibv_create_qp(pd, &a)) {
        l.max_inline_data = std::min<uint32_t>(a.cap.max_inline_data, kMaxInline);
        ibv_destroy_qp(qp);
        break;
      }
    }
  }
  if (cq != nullptr) ibv_destroy_cq(cq);
  if (pd != nullptr) ibv_dealloc_pd(pd);
  return Status::kOk;
}

VerbsRnic::~VerbsRnic() {
  // Dependency order; the engine normally destroyed everything already.
  qps_.ForEach([](uint32_t, QpSlot& s) { ibv_destroy_qp(s.obj); });
  ahs_.ForEach([](uint32_t, Slot<ibv_ah>& s) { ibv_destroy_ah(s.obj); });
  srqs_.ForEach([](uint32_t, Slot<ibv_srq>& s) { ibv_destroy_srq(s.obj); });
  cqs_.ForEach([](uint32_t, Slot<ibv_cq>& s) { ibv_destroy_cq(s.obj); });
  mws_.ForEach([](uint32_t, Slot<ibv_mw>& s) { ibv_dealloc_mw(s.obj); });
  mrs_.ForEach([](uint32_t, Slot<ibv_mr>& s) { ibv_dereg_mr(s.obj); });
  pds_.ForEach([](uint32_t, Slot<ibv_pd>& s) { ibv_dealloc_pd(s.obj); });
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

uint32_t VerbsRnic::live_objects() const {
  return pds_.live() + mrs_.live() + mws_.live() + cqs_.live() + srqs_.live() +
         qps_.live() + ahs_.live();
}

// ------------------------------------------------------------------ GIDs --

int VerbsRnic::FindPortGid(const Gid& gid) const {
  int found = -1;
  for (int i = 0; i < gid_table_len_; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx_, options_.port, i, &e, 0) != 0) continue;
    if (std::memcmp(e.gid.raw, gid.data(), gid.size()) != 0) continue;
    if (e.gid_type == IBV_GID_TYPE_ROCE_V2) return i;
    if (found < 0) found = i;
  }
  return found;
}

std::vector<Gid> VerbsRnic::PortGids() const {
  std::vector<Gid> out;
  for (int i = 0; i < gid_table_len_; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx_, options_.port, i, &e, 0) != 0) continue;
    Gid g;
    std::memcpy(g.data(), e.gid.raw, g.size());
    if (g == Gid{} || std::find(out.begin(), out.end(), g) != out.end()) continue;
    out.push_back(g);
  }
  return out;
}

int VerbsRnic::RegisteredGidIndex(const Gid& gid) const {
  for (int i = 0; i < num_gids_; ++i) {
    if (gids_[i].gid == gid) return gids_[i].index;
  }
  return -1;
}

Status VerbsRnic::AddGid(const Gid& gid) {
  if (gid == Gid{}) return Status::kInvalid;
  if (RegisteredGidIndex(gid) >= 0) return Status::kBusy;
  if (num_gids_ == kMaxGids) return Status::kNoResource;
  const int index = FindPortGid(gid);
  if (index < 0) return Status::kInvalid;  // not the port's: docs/verbs-rnic.md
  gids_[num_gids_++] = GidEntry{gid, index};
  return Status::kOk;
}

Status VerbsRnic::RemoveGid(const Gid& gid) {
  for (int i = 0; i < num_gids_; ++i) {
    if (gids_[i].gid == gid) {
      gids_[i] = gids_[--num_gids_];
      return Status::kOk;
    }
  }
  return Status::kBadHandle;
}

// ------------------------------------------------------------ PD and MR --

Result<RnicPd> VerbsRnic::AllocPd() {
  if (pds_.full()) return Status::kNoResource;
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  if (pd == nullptr) return StatusFromErrno(errno);
  return RnicPd{pds_.Insert({pd})};
}

Status VerbsRnic::DeallocPd(RnicPd pd) {
  Slot<ibv_pd>* s = pds_.Get(pd.id);
  if (s == nullptr) return Status::kBadHandle;
  if (int e = ibv_dealloc_pd(s->obj); e != 0) return StatusFromErrno(e);
  pds_.Erase(pd.id);
  return Status::kOk;
}

Result<RnicMr> VerbsRnic::RegMr(RnicPd pd, uint8_t* addr, uint64_t length,
                                uint64_t iova, uint32_t access) {
  Slot<ibv_pd>* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  // Only the guest's own IB access bits, never more (docs/verbs-rnic.md).
  constexpr uint32_t kIbAccess = kAccessLocalWrite | kAccessRemoteWrite |
                                 kAccessRemoteRead | kAccessRemoteAtomic |
                                 kAccessMwBind;
  static_assert(uint32_t{kAccessMwBind} == uint32_t{IBV_ACCESS_MW_BIND});
  if ((access & ~kIbAccess) != 0 || length == 0) return Status::kInvalid;
  if (mrs_.full()) return Status::kNoResource;
  ibv_mr* mr = ibv_reg_mr_iova2(p->obj, addr, length, iova, access);
  if (mr == nullptr) return StatusFromErrno(errno);
  const uint32_t id = mrs_.Insert({mr});
  return RnicMr{id, mr->lkey, mr->rkey};
}

Status VerbsRnic::DeregMr(RnicMr mr) {
  Slot<ibv_mr>* s = mrs_.Get(mr.id);
  if (s == nullptr) return Status::kBadHandle;
  if (int e = ibv_dereg_mr(s->obj); e != 0) return StatusFromErrno(e);
  mrs_.Erase(mr.id);
  return Status::kOk;
}

// --------------------------------------------------------------- MW --

Result<RnicMw> VerbsRnic::AllocMw(RnicPd pd, uint8_t type) {
  if (limits_.max_mw == 0) return Status::kUnsupported;
  Slot<ibv_pd>* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  if (type != 1 && type != 2) return Status::kInvalid;
  if (mws_.full()) return Status::kNoResource;
  ibv_mw* mw = ibv_alloc_mw(p->obj, type == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
  if (mw == nullptr) return StatusFromErrno(errno);
  return RnicMw{mws_.Insert({mw}), mw->rkey};
}

Status VerbsRnic::DeallocMw(RnicMw mw) {
  Slot<ibv_mw>* s = mws_.Get(mw.id);
  if (s == nullptr) return Status::kBadHandle;
  if (int e = ibv_dealloc_mw(s->obj); e != 0) return StatusFromErrno(e);
  mws_.Erase(mw.id);
  return Status::kOk;
}

// ---------------------------------------------------------- CQ, SRQ, AH --

Result<RnicCq> VerbsRnic::CreateCq(uint32_t depth) {
  if (depth == 0 || depth > limits_.max_cqe) return Status::kInvalid;
  if (cqs_.full()) return Status::kNoResource;
  ibv_cq* cq = ibv_create_cq(ctx_, static_cast<int>(depth), nullptr, channel_, 0);
  if (cq == nullptr) return StatusFromErrno(errno);
  const uint32_t id = cqs_.Insert({cq});
  // PollAsyncEvent names a failed CQ by its id.
  cq->cq_context = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
  arm_cqs_[id - 1].store(cq);
  if (arm_slots_.load() < id) arm_slots_.store(id);
  return RnicCq{id};
}

Status VerbsRnic::ResizeCq(RnicCq cq, uint32_t depth) {
  Slot<ibv_cq>* s = cqs_.Get(cq.id);
  if (s == nullptr) return Status::kBadHandle;
  if (depth == 0 || depth > limits_.max_cqe) return Status::kInvalid;
  if (static_cast<uint32_t>(s->obj->cqe) >= depth) return Status::kOk;
  return StatusFromErrno(ibv_resize_cq(s->obj, static_cast<int>(depth)));
}

Status VerbsRnic::DestroyCq(RnicCq cq) {
  Slot<ibv_cq>* s = cqs_.Get(cq.id);
  if (s == nullptr) return Status::kBadHandle;
  // Out of the data path's arming first, and any pass of ArmCompletions
  // that may have read the CQ before is over (sequentially consistent:
  // a pass that read it had made arm_passes_ odd before).
  arm_cqs_[cq.id - 1].store(nullptr);
  const uint64_t pass = arm_passes_.load();
  if (pass & 1) {
    while (arm_passes_.load() == pass) std::this_thread::yield();
  }
  if (int e = ibv_destroy_cq(s->obj); e != 0) {
    arm_cqs_[cq.id - 1].store(s->obj);
    return StatusFromErrno(e);
  }
  cqs_.Erase(cq.id);
  return Status::kOk;
}

Result<RnicSrq> VerbsRnic::CreateSrq(RnicPd pd, uint32_t max_wr,
                                     uint32_t max_sge) {
  Slot<ibv_pd>* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  if (srqs_.full()) return Status::kNoResource;
  ibv_srq_init_attr a{};
  a.attr.max_wr = max_wr;
  a.attr.max_sge = max_sge;
  ibv_srq* srq = ibv_create_srq(p->obj, &a);
  if (srq == nullptr) return StatusFromErrno(errno);
  return RnicSrq{srqs_.Insert({srq})};
}

Status VerbsRnic::DestroySrq(RnicSrq srq) {
  Slot<ibv_srq>* s = srqs_.Get(srq.id);
  if (s == nullptr) return Status::kBadHandle;
  if (int e = ibv_destroy_srq(s->obj); e != 0) return StatusFromErrno(e);
  srqs_.Erase(srq.id);
  return Status::kOk;
}

Result<RnicAh> VerbsRnic::CreateAh(RnicPd pd, const AddressVector& av) {
  Slot<ibv_pd>* p = pds_.Get(pd.id);
  if (p == nullptr) return Status::kBadHandle;
  ibv_ah_attr attr{};
  VRDMA_RETURN_IF_ERROR(ToAhAttr(av, &attr));
  if (ahs_.full()) return Status::kNoResource;
  ibv_ah* ah = ibv_create_ah(p->obj, &attr);
  if (ah == nullptr) return StatusFromErrno(errno);
  return RnicAh{ahs_.Insert({ah})};
}

Status VerbsRnic::DestroyAh(RnicAh ah) {
  Slot<ibv_ah>* s = ahs_.Get(ah.id);
  if (s == nullptr) return Status::kBadHandle;
  if (int e = ibv_destroy_ah(s->obj); e != 0) return StatusFromErrno(e);
  ahs_.Erase(ah.id);
  return Status::kOk;
}

Status VerbsRnic::ToAhAttr(const AddressVector& av, ibv_ah_attr* out) const {
  const int sgid = RegisteredGidIndex(av.sgid);
  if (sgid < 0) return Status::kInvalid;  // never a GID the engine did not add
  *out = {};
  out->is_global = 1;
  std::memcpy(out->grh.dgid.raw, av.dgid.data(), av.dgid.size());
  out->grh.sgid_index = static_cast<uint8_t>(sgid);
  out->grh.flow_label = av.flow_label;
  out->grh.hop_limit = av.hop_limit;
  out->grh.traffic_class = av.traffic_class;
  out->sl = av.sl;
  out->port_num = options_.port;
  return Status::kOk;
}

}  // namespace vrdma
