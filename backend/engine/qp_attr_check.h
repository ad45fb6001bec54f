// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// MODIFY_QP checks without side effects (rxe's qp_chk_attr): the state
// transition and the attributes it requires or allows (IB spec 11.2.4.2,
// the table of Linux ib_modify_qp_is_ok), then every attribute's range and
// the guest-specific address rules (sgid_index only among the VM's own
// GIDs). The RNIC still enforces its own state machine afterwards.
#ifndef VRDMA_BACKEND_ENGINE_QP_ATTR_CHECK_H_
#define VRDMA_BACKEND_ENGINE_QP_ATTR_CHECK_H_

#include <cstdint>

#include "backend/base/status.h"
#include "backend/engine/engine.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine {

inline constexpr uint32_t kMaxQpRdAtom = 16;

struct QpCheckContext {
  QpType type = QpType::kRc;
  QpState current = QpState::kReset;
  uint32_t num_gids = 0;             // the VM's GIDs
  uint32_t active_mtu_bytes = 4096;  // the RNIC's
};

// The one place MODIFY_QP values are checked (the device decoder only
// parses). Resolves the target state (current when the mask has no STATE
// bit). kBadState: illegal transition or CUR_STATE not matching; kInvalid: a
// required attribute missing, an attribute not allowed for the transition,
// or a value out of range (GID index, MTU, PSNs, QPN, retry counts, access
// bits, pkey index, port); kUnsupported: alternate paths, path migration,
// resizing by CAP.
Status CheckModifyQp(const ModifyQpRequest& req, const QpCheckContext& ctx,
                     QpState* next_state);

// The address-vector rule for CREATE_AH and MODIFY_QP's AV. kInvalid:
// sgid_index outside the VM's num_gids GIDs, no GRH (RoCE needs one), port
// other than 1, flow label beyond 20 bits, SL beyond 4 bits.
Status CheckAh(const GuestAh& ah, uint32_t num_gids);

// Keeps in *attrs the attributes req sets (QUERY_QP answers from them);
// req has passed CheckModifyQp.
void RecordQpAttrs(const ModifyQpRequest& req, ModifyQpRequest* attrs);
// QUERY_QP's answer: the attributes in force, the QP's state and caps.
QueryQpResult QueryQpAnswer(const ModifyQpRequest& attrs, uint32_t qpn,
                            QpState state, const QpCaps& caps);

// True when a path MTU in bytes is one of 256, 512, 1024, 2048, 4096.
bool IsValidMtu(uint32_t bytes);

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_QP_ATTR_CHECK_H_
