// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The reverse of command_decoder: engine results into the ABI response
// structs (little-endian, reserved fields zero) and the config space. Every
// struct is value-initialised first, so no host byte leaks into a reserved
// field or padding.
#ifndef VRDMA_VHOST_RDMA_DEVICE_COMMAND_ENCODER_H_
#define VRDMA_VHOST_RDMA_DEVICE_COMMAND_ENCODER_H_

#include <cstdint>
#include <span>

#include "backend/base/status.h"
#include "backend/engine/engine.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::device {

// Host status -> enum virtio_rdma_status. kIoError (a host-side failure the
// guest cannot fix) has no ABI value and is reported as ERR_NO_RESOURCE.
uint32_t StatusToWire(Status s);
virtio_rdma_resp_hdr EncodeRespHdr(Status s);

// 256 -> VIRTIO_RDMA_MTU_256 ... 4096 -> VIRTIO_RDMA_MTU_4096; sizes in
// between round down; below 256 gives VIRTIO_RDMA_MTU_256.
uint8_t MtuEnumFromBytes(uint32_t bytes);

// Fixed port attributes this device reports (one RoCEv2 port, link up).
inline constexpr uint8_t kActiveSpeed = 32;  // IB_SPEED_EDR (25 Gb/s lane)
inline constexpr uint8_t kActiveWidth = 2;   // IB_WIDTH_4X
inline constexpr uint8_t kPhysStateLinkUp = 5;
inline constexpr uint8_t kLinkLayerEthernet = 2;
inline constexpr uint32_t kGidTypeRoceV2 = 2;

virtio_rdma_resp_query_device EncodeQueryDevice(const engine::DeviceAttr& a);
virtio_rdma_resp_query_port EncodeQueryPort(const engine::DeviceAttr& a,
                                            uint32_t num_gids);
virtio_rdma_resp_query_gid EncodeQueryGid(const Gid& gid);
virtio_rdma_resp_create_pd EncodeCreatePd(uint32_t pd);
virtio_rdma_resp_reg_mr EncodeRegMr(const engine::RegMrResult& r);
virtio_rdma_resp_create_cq EncodeCreateCq(const engine::CreateCqResult& r);
virtio_rdma_qp_cap EncodeQpCap(const QpCaps& c);
virtio_rdma_resp_create_qp EncodeCreateQp(const engine::CreateQpResult& r);
virtio_rdma_ah_attr EncodeAhAttr(const engine::GuestAh& ah);
// Fields not named by attr.mask are written as zero.
virtio_rdma_qp_attr EncodeQpAttr(const engine::ModifyQpRequest& attr);
virtio_rdma_resp_query_qp EncodeQueryQp(const engine::QueryQpResult& r);
virtio_rdma_resp_create_ah EncodeCreateAh(uint32_t ah);
virtio_rdma_resp_create_srq EncodeCreateSrq(const engine::CreateSrqResult& r);
virtio_rdma_resp_alloc_mw EncodeAllocMw(const engine::AllocMwResult& r);
virtio_rdma_resp_alloc_mr EncodeAllocMr(const engine::RegMrResult& r);

// The config space of a VM (struct virtio_rdma_config): limits from the
// engine (already reduced to the VM's quotas), the VM's GIDs (at most
// VIRTIO_RDMA_MAX_GIDS are reported), its NIC's MAC (zero without one) and
// the doorbell queue count.
virtio_rdma_config EncodeConfig(const engine::DeviceAttr& a,
                                const engine::VmConfig& vm,
                                uint32_t num_doorbell_queues);

}  // namespace vrdma::device

#endif  // VRDMA_VHOST_RDMA_DEVICE_COMMAND_ENCODER_H_
