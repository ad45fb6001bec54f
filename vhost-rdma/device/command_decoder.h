// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The control-queue command decoder: THE one place where control-queue bytes
// become typed, checked requests (docs/architecture.md). Input is the
// device-readable part of one descriptor chain, already copied out of guest
// memory once; output is a typed command in backend/engine/engine.h types or
// Status::kInvalid.
//
// Only syntax is checked here (lengths, enum ranges, mask and flag bits,
// alignment, overflow-free arithmetic, ring geometry); meaning (handles,
// quotas, state machines, addresses inside guest RAM) is the engine's.
// Reserved fields are ignored (the driver writes them as zero). The exact
// list of rules is in the comment of each Decode* in command_decoder.cc.
//
// Pure functions: no I/O, no globals, so the fuzzer and the tests drive them
// directly.
#ifndef VRDMA_VHOST_RDMA_DEVICE_COMMAND_DECODER_H_
#define VRDMA_VHOST_RDMA_DEVICE_COMMAND_DECODER_H_

#include <cstdint>
#include <span>
#include <variant>

#include "backend/base/status.h"
#include "backend/engine/engine.h"
#include "backend/engine/ring_check.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::device {

// Bounds the decoder needs from the device's configuration.
struct DecodeLimits {
  // config.max_mr_pages: page-list entries in one REG_MR.
  uint32_t max_mr_pages = 0;
  // Page-list entries of one ring. The geometry bounds below already cap a
  // ring at ceil((384 + 2^16 * 2^12) / 4096) pages; this can lower that.
  uint32_t max_ring_pages = 0;
};

// Largest page count of a ring the engine's geometry bounds allow.
inline constexpr uint32_t kMaxRingPagesByGeometry = engine::kMaxRingPages;

// One typed command per virtio_rdma_cmd. Field names follow the engine.
struct QueryDeviceCmd {};
struct QueryPortCmd { uint32_t port_num = 0; };
struct QueryGidCmd { uint32_t index = 0; };
struct CreatePdCmd {};
struct DestroyPdCmd { uint32_t pd = 0; };
struct RegMrCmd { engine::RegMrRequest req; };
struct DeregMrCmd { uint32_t mr = 0; };
struct CreateCqCmd { engine::CreateCqRequest req; };
struct DestroyCqCmd { uint32_t cq = 0; };
struct ReqNotifyCqCmd { uint32_t cq = 0; bool solicited_only = false; };
struct CreateQpCmd { engine::CreateQpRequest req; };
struct ModifyQpCmd { engine::ModifyQpRequest req; };
struct QueryQpCmd { uint32_t qpn = 0; uint32_t attr_mask = 0; };
struct DestroyQpCmd { uint32_t qpn = 0; };
struct CreateAhCmd { uint32_t pd = 0; engine::GuestAh ah; };
struct DestroyAhCmd { uint32_t ah = 0; };
struct CreateSrqCmd { engine::CreateSrqRequest req; };
struct ModifySrqCmd {
  uint32_t srq = 0;
  uint32_t mask = 0;  // VIRTIO_RDMA_SRQ_MAX_WR | VIRTIO_RDMA_SRQ_LIMIT
  uint32_t max_wr = 0;
  uint32_t srq_limit = 0;
};
struct DestroySrqCmd { uint32_t srq = 0; };
struct AllocMwCmd { uint32_t pd = 0; uint8_t type = 0; };
struct DeallocMwCmd { uint32_t mw = 0; };
struct AllocMrCmd { engine::AllocMrRequest req; };

using Command =
    std::variant<QueryDeviceCmd, QueryPortCmd, QueryGidCmd, CreatePdCmd,
                 DestroyPdCmd, RegMrCmd, DeregMrCmd, CreateCqCmd, DestroyCqCmd,
                 ReqNotifyCqCmd, CreateQpCmd, ModifyQpCmd, QueryQpCmd,
                 DestroyQpCmd, CreateAhCmd, DestroyAhCmd, CreateSrqCmd,
                 ModifySrqCmd, DestroySrqCmd, AllocMwCmd, DeallocMwCmd,
                 AllocMrCmd>;

// Reads the command code of a request (the first 4 bytes, little-endian)
// without checking anything else; 0 when fewer than 8 bytes (a whole
// virtio_rdma_cmd_hdr) are present. The device uses it to size the response
// before decoding.
uint32_t PeekCommandCode(std::span<const uint8_t> bytes);

// Decodes a whole request: struct virtio_rdma_cmd_hdr, the command's request
// struct, and its page list. The length must be exact. Never reads outside
// `bytes`, never crashes on any input.
Result<Command> DecodeCommand(std::span<const uint8_t> bytes,
                              const DecodeLimits& limits);

// Size of the command's response body (after struct virtio_rdma_resp_hdr);
// 0 for commands without one and for unknown codes.
uint32_t ResponseBodySize(uint32_t cmd);

// The largest readable part DecodeCommand can accept under `limits`: a
// device refuses bigger chains before copying them.
uint64_t MaxCommandBytes(const DecodeLimits& limits);

// A doorbell record (struct virtio_rdma_doorbell), exactly 8 bytes, kind in
// [VIRTIO_RDMA_DB_SQ, VIRTIO_RDMA_DB_CQ_ARM_SOLICITED]. Allocates nothing:
// used on the data path.
struct DoorbellRecord {
  uint32_t handle = 0;
  uint8_t kind = 0;
};
Result<DoorbellRecord> DecodeDoorbell(std::span<const uint8_t> bytes);

// The pieces MODIFY_QP and CREATE_AH share, exposed so the QUERY_QP encoder
// can be tested as their exact inverse. `wire` is a host copy.
Status DecodeAhAttr(const virtio_rdma_ah_attr& wire, engine::GuestAh* out);
Status DecodeQpAttr(const virtio_rdma_qp_attr& wire,
                    engine::ModifyQpRequest* out);

}  // namespace vrdma::device

#endif  // VRDMA_VHOST_RDMA_DEVICE_COMMAND_DECODER_H_
