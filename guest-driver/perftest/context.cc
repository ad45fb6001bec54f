// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "guest-driver/perftest/context.h"

#include <cstring>
#include <random>

#include "guest-driver/perftest/pattern.h"

namespace vrdma::perftest {

Context::~Context() {
  // Destroy in verbs order: QPs, MRs, CQs, PD, device.
  for (auto& q : qps) q.qp.reset();
  for (auto& q : qps) q.mr.reset();
  send_cq.reset();
  recv_cq.reset();
  pd.reset();
  dev.reset();
}

bool ExchangeParams(TcpChannel& ch, Options* o, std::string* err) {
  WireParams p;
  if (!o->is_server()) {
    p.test = static_cast<uint32_t>(o->test);
    p.size = o->size;
    p.iters = o->iters;
    p.num_qps = o->num_qps;
    p.duration_s = o->duration_s;
    p.tx_depth = o->tx_depth;
    p.verify = o->verify ? 1 : 0;
    p.uc = o->uc ? 1 : 0;
    if (!ch.Send(&p, sizeof(p))) return *err = "sending parameters failed", false;
    return true;
  }
  if (!ch.Recv(&p, sizeof(p)) || p.magic != WireParams{}.magic) {
    return *err = "receiving parameters failed", false;
  }
  if (p.test != static_cast<uint32_t>(o->test)) {
    return *err = std::string("client runs ") + TestName(static_cast<TestKind>(p.test)) +
                  ", server " + TestName(o->test), false;
  }
  if (p.num_qps == 0 || p.num_qps > 64 || p.tx_depth == 0 || p.tx_depth > 1023 ||
      p.size == 0 || p.size > (1ull << 30)) {
    return *err = "client sent parameters out of range", false;
  }
  o->size = p.size;
  o->iters = p.iters;
  o->num_qps = p.num_qps;
  o->duration_s = p.duration_s;
  o->tx_depth = p.tx_depth;
  o->verify = p.verify != 0;
  o->uc = p.uc != 0;
  return true;
}

bool Context::Setup(const Options& o, std::string* err) {
  opts = o;
  switch (o.test) {
    case TestKind::kWriteLat:
    case TestKind::kReadLat: slots = 2; break;
    case TestKind::kSendLat: slots = 1 + kSendLatRecvSlots; break;
    default: slots = o.tx_depth; break;
  }
  const uint64_t mr_bytes = slots * o.size;
  guest::DriverOptions dopt;
  // One doorbell queue per QP as far as the device offers them (a guest
  // uses one per vCPU); QP q rings queue q modulo their number.
  dopt.doorbell_queues = o.num_qps;
  dopt.ram_bytes = o.ram_mb != 0 ? (o.ram_mb << 20)
                                 : (32ull << 20) + o.num_qps * (mr_bytes + (2ull << 20));
  auto d = guest::Device::Open(o.socket, dopt);
  if (!d.ok()) return *err = std::string("opening ") + o.socket + ": " + StatusName(d.status()), false;
  dev = std::move(d.value());
  const auto& cfg = dev->config();
  const uint64_t pages = (mr_bytes + 4095) / 4096;
  if (cfg.max_mr_pages != 0 && pages > cfg.max_mr_pages) {
    return *err = "buffer of " + std::to_string(pages) + " pages exceeds the device's max_mr_pages " +
                  std::to_string(cfg.max_mr_pages) + ": lower -s or -t", false;
  }
  auto gid = dev->QueryGid(0);
  if (!gid.ok()) return *err = std::string("QUERY_GID: ") + StatusName(gid.status()), false;
  auto p = dev->AllocPd();
  if (!p.ok()) return *err = std::string("CREATE_PD: ") + StatusName(p.status()), false;
  pd = std::move(p.value());
  const uint32_t depth = IsBw(o.test) ? o.tx_depth : std::max<uint32_t>(o.tx_depth, kSendLatRecvSlots + 1);
  const uint32_t cqe = depth * o.num_qps;
  auto scq = dev->CreateCq(cqe);
  auto rcq = dev->CreateCq(cqe);
  if (!scq.ok() || !rcq.ok()) {
    return *err = std::string("CREATE_CQ: ") + StatusName(scq.ok() ? rcq.status() : scq.status()), false;
  }
  send_cq = std::move(scq.value());
  recv_cq = std::move(rcq.value());
  std::mt19937 rng(std::random_device{}());
  qps.resize(o.num_qps);
  for (uint32_t q = 0; q < o.num_qps; ++q) {
    guest::QpInitAttr qa;
    qa.qp_type = o.uc ? VIRTIO_RDMA_QPT_UC : VIRTIO_RDMA_QPT_RC;
    qa.send_cq = send_cq.get();
    qa.recv_cq = recv_cq.get();
    qa.max_send_wr = depth;
    qa.max_recv_wr = depth;
    qa.doorbell_queue = q;
    auto qp = dev->CreateQp(*pd, qa);
    if (!qp.ok()) return *err = std::string("CREATE_QP: ") + StatusName(qp.status()), false;
    qps[q].qp = std::move(qp.value());
    auto mr = dev->RegMr(*pd, mr_bytes,
                         VIRTIO_RDMA_ACCESS_LOCAL_WRITE | VIRTIO_RDMA_ACCESS_REMOTE_WRITE |
                             VIRTIO_RDMA_ACCESS_REMOTE_READ);
    if (!mr.ok()) return *err = std::string("REG_MR: ") + StatusName(mr.status()), false;
    qps[q].mr = std::move(mr.value());
    WireQp& w = qps[q].local;
    w.qpn = qps[q].qp->qpn();
    w.psn = rng() & 0xffffff;
    w.rkey = qps[q].mr->rkey();
    w.addr = qps[q].mr->iova();
    std::memcpy(w.gid, gid->data(), 16);
  }
  return true;
}

bool Context::Connect(TcpChannel& ch, std::string* err) {
  std::vector<WireQp> mine, theirs;
  for (auto& q : qps) mine.push_back(q.local);
  if (opts.is_server()) {
    if (!ch.RecvVec(&theirs) || !ch.SendVec(mine)) return *err = "QP exchange failed", false;
  } else {
    if (!ch.SendVec(mine) || !ch.RecvVec(&theirs)) return *err = "QP exchange failed", false;
  }
  if (theirs.size() != qps.size()) return *err = "peer has a different number of QPs", false;
  const uint32_t access = VIRTIO_RDMA_ACCESS_LOCAL_WRITE | VIRTIO_RDMA_ACCESS_REMOTE_WRITE |
                          VIRTIO_RDMA_ACCESS_REMOTE_READ;
  for (size_t q = 0; q < qps.size(); ++q) {
    qps[q].remote = theirs[q];
    guest::RemoteQpInfo r;
    r.qpn = theirs[q].qpn;
    r.psn = theirs[q].psn;
    std::memcpy(r.gid.data(), theirs[q].gid, 16);
    Status s = qps[q].qp->ToInit(access);
    if (s == Status::kOk) s = qps[q].qp->ToRtr(r);
    if (s == Status::kOk) s = qps[q].qp->ToRts(qps[q].local.psn);
    if (s != Status::kOk) return *err = std::string("MODIFY_QP: ") + StatusName(s), false;
  }
  // read tests: the server's buffer is what the client reads.
  if (opts.is_server() && (opts.test == TestKind::kReadBw || opts.test == TestKind::kReadLat)) {
    for (uint32_t q = 0; q < qps.size(); ++q) {
      for (uint32_t s = 0; s < slots; ++s) FillPattern(Slot(q, s), opts.size, q, s);
    }
  }
  if (!ch.Barrier()) return *err = "barrier failed", false;
  return true;
}

}  // namespace vrdma::perftest
