// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Saturating RDMA WRITE traffic on a SoftRnic, for line-rate tests and the
// soft_line_rate benchmark: `qps` RC QP pairs between two registered
// buffers on one RNIC, each kept `depth` WRITEs of `msg_bytes` deep, driven
// by Progress() on the caller's thread. Run() says how many payload bytes
// each QP's WRITEs completed. The RNIC must run on the steady clock
// (SoftRnic's default): Run() ends by it.
#ifndef VRDMA_BACKEND_SOFT_RNIC_TESTING_WRITE_LOAD_H_
#define VRDMA_BACKEND_SOFT_RNIC_TESTING_WRITE_LOAD_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "backend/soft_rnic/soft_rnic.h"

namespace vrdma::testing {

class WriteLoad {
 public:
  // Path MTU of the QPs (RoCE's largest).
  static constexpr uint32_t kMtu = 4096;

  // Check ok() after.
  WriteLoad(SoftRnic& rnic, int qps, uint32_t msg_bytes, uint32_t depth = 32)
      : rnic_(rnic), msg_(msg_bytes), depth_(depth) {
    buf_.assign(2 * size_t{msg_bytes}, 0);
    const Gid ga{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 1};
    const Gid gb{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 2};
    auto pd = rnic.AllocPd();
    auto cq = rnic.CreateCq(4096);
    if (rnic.AddGid(ga) != Status::kOk || rnic.AddGid(gb) != Status::kOk || !pd.ok() ||
        !cq.ok()) {
      return;
    }
    cq_ = *cq;
    auto mr = rnic.RegMr(*pd, buf_.data(), buf_.size(), 0x10000,
                         kAccessLocalWrite | kAccessRemoteWrite);
    if (!mr.ok()) return;
    mr_ = *mr;
    for (int i = 0; i < qps; ++i) {
      QpInit init;
      init.pd = *pd;
      init.send_cq = init.recv_cq = cq_;
      init.caps = QpCaps{depth, 1, 1, 1, 0};
      auto a = rnic.CreateQp(init);
      auto b = rnic.CreateQp(init);
      if (!a.ok() || !b.ok() || !BringUp(*a, ga, gb, b->qpn) || !BringUp(*b, gb, ga, a->qpn)) {
        return;
      }
      qps_.push_back(*a);
    }
    ok_ = true;
  }

  bool ok() const { return ok_; }

  // Keeps every QP full for `ns` of the clock; payload bytes each QP's
  // WRITEs completed meanwhile.
  std::vector<uint64_t> Run(uint64_t ns) {
    std::vector<uint64_t> bytes(qps_.size(), 0);
    std::vector<uint64_t> outstanding(qps_.size(), 0);
    std::array<Completion, 64> wcs;
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.send_flags = kSendSignaled;
    w.num_sge = 1;
    w.sge[0] = Sge{0x10000, msg_, mr_.lkey};
    w.remote_addr = 0x10000 + msg_;
    w.rkey = mr_.rkey;
    for (const uint64_t end = Now() + ns; Now() < end;) {
      for (size_t i = 0; i < qps_.size(); ++i) {
        for (; outstanding[i] < depth_; ++outstanding[i]) {
          w.wr_id = i;
          Status st = Status::kOk;
          if (rnic_.PostSend(qps_[i], {&w, 1}, &st) != 1) break;
        }
      }
      rnic_.Progress();
      for (int n; (n = rnic_.PollCq(cq_, wcs)) > 0;) {
        for (int k = 0; k < n; ++k) {
          --outstanding[wcs[k].wr_id];
          if (wcs[k].status == WcStatus::kSuccess) bytes[wcs[k].wr_id] += wcs[k].byte_len;
        }
      }
    }
    // Let what is still queued finish uncounted, for the next Run.
    while (rnic_.Progress()) {
      for (int n; (n = rnic_.PollCq(cq_, wcs)) > 0;) {
        for (int k = 0; k < n; ++k) --outstanding[wcs[k].wr_id];
      }
    }
    return bytes;
  }

 private:
  bool BringUp(RnicQp qp, const Gid& self, const Gid& peer, uint32_t peer_qpn) {
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = kAccessRemoteWrite;
    if (rnic_.ModifyQp(qp, a, kQpState | kQpAccessFlags | kQpPkeyIndex | kQpPort) !=
        Status::kOk) {
      return false;
    }
    a.state = QpState::kRtr;
    a.av.sgid = self;
    a.av.dgid = peer;
    a.path_mtu_bytes = kMtu;
    a.dest_qpn = peer_qpn;
    if (rnic_.ModifyQp(qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                  kQpMaxDestRdAtomic | kQpMinRnrTimer) != Status::kOk) {
      return false;
    }
    a.state = QpState::kRts;
    return rnic_.ModifyQp(qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                     kQpRnrRetry | kQpMaxQpRdAtomic) == Status::kOk;
  }

  static uint64_t Now() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }

  SoftRnic& rnic_;
  uint32_t msg_;
  uint32_t depth_;
  std::vector<uint8_t> buf_;
  RnicCq cq_{};
  RnicMr mr_{};
  std::vector<RnicQp> qps_;
  bool ok_ = false;
};

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_SOFT_RNIC_TESTING_WRITE_LOAD_H_
