// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Bringing a QP to RTS through the Engine API the way a guest driver does:
// INIT, RTR, RTS, each with the attributes the IB spec requires for the QP
// type. Shared by the engine tests on the fake RNIC and on SoftRnic.
#ifndef VRDMA_BACKEND_ENGINE_TESTING_QP_BRING_UP_H_
#define VRDMA_BACKEND_ENGINE_TESTING_QP_BRING_UP_H_

#include <gtest/gtest.h>

#include "backend/engine/engine.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine::testing {

inline Gid MakeGid(uint8_t x) {
  Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  g[15] = x;
  return g;
}

// RC timers. The defaults are short so that SoftRnic's retries stay quick
// in tests; a real device (Soft-RoCE in a TCG guest takes milliseconds per
// packet) wants those of a real network.
struct QpTimers {
  uint8_t timeout = 1;
  uint8_t retry_cnt = 2;
  uint8_t min_rnr_timer = 1;
};
inline constexpr QpTimers kRealNetworkTimers{14, 7, 12};

// Connected types (RC, UC) point at (peer_gid, peer_qpn); UD ignores them.
inline void BringUpQp(Engine& engine, VmId vm, uint32_t qpn, QpType type,
                      uint32_t access, const Gid& peer_gid,
                      uint32_t peer_qpn, QpTimers timers = {}) {
  ModifyQpRequest m;
  m.qpn = qpn;
  m.state = QpState::kInit;
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_PKEY_INDEX |
           VIRTIO_RDMA_QP_PORT |
           (type == QpType::kUd ? VIRTIO_RDMA_QP_QKEY
                                : VIRTIO_RDMA_QP_ACCESS_FLAGS);
  m.access_flags = access;
  m.qkey = 0x1111;
  ASSERT_EQ(engine.ModifyQp(vm, m), Status::kOk);

  m = {};
  m.qpn = qpn;
  m.state = QpState::kRtr;
  m.mask = VIRTIO_RDMA_QP_STATE;
  if (type != QpType::kUd) {
    m.mask |= VIRTIO_RDMA_QP_AV | VIRTIO_RDMA_QP_PATH_MTU |
              VIRTIO_RDMA_QP_DEST_QPN | VIRTIO_RDMA_QP_RQ_PSN;
    m.ah.dgid = peer_gid;
    m.ah.sgid_index = 0;
    m.dest_qpn = peer_qpn;
    m.path_mtu_bytes = 1024;
    if (type == QpType::kRc) {
      m.mask |= VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC | VIRTIO_RDMA_QP_MIN_RNR_TIMER;
      m.max_dest_rd_atomic = 4;
      m.min_rnr_timer = timers.min_rnr_timer;
    }
  }
  ASSERT_EQ(engine.ModifyQp(vm, m), Status::kOk);

  m = {};
  m.qpn = qpn;
  m.state = QpState::kRts;
  m.mask = VIRTIO_RDMA_QP_STATE | VIRTIO_RDMA_QP_SQ_PSN;
  if (type == QpType::kRc) {
    m.mask |= VIRTIO_RDMA_QP_TIMEOUT | VIRTIO_RDMA_QP_RETRY_CNT |
              VIRTIO_RDMA_QP_RNR_RETRY | VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC;
    m.timeout = timers.timeout;
    m.retry_cnt = timers.retry_cnt;
    m.rnr_retry = 7;
    m.max_rd_atomic = 4;
  }
  ASSERT_EQ(engine.ModifyQp(vm, m), Status::kOk);
}

}  // namespace vrdma::engine::testing

#endif  // VRDMA_BACKEND_ENGINE_TESTING_QP_BRING_UP_H_
