// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The header's static checks already ran at compile time, in C (via
// abi_layout_check.c, linked here) and in C++ (this file). These tests pin
// the values docs/virtio-rdma.md quotes, so the spec and the header cannot
// drift apart silently.
#include "vhost-rdma/abi/virtio_rdma.h"

#include <gtest/gtest.h>

extern "C" int vrdma_abi_layout_checked_in_c(void);

namespace {

TEST(AbiLayout, HeaderAlsoCompilesAsC) {
  EXPECT_EQ(vrdma_abi_layout_checked_in_c(), VIRTIO_RDMA_ABI_VERSION);
}

TEST(AbiLayout, IdentityMatchesSpec) {
  EXPECT_EQ(VIRTIO_ID_RDMA, 42);
  EXPECT_EQ(VIRTIO_RDMA_PCI_DEVICE_ID, 0x106a);
}

TEST(AbiLayout, ConfigFitsVhostUserLimit) {
  // VHOST_USER_MAX_CONFIG_SIZE is 256 bytes.
  EXPECT_LE(sizeof(virtio_rdma_config), 256u);
}

TEST(AbiLayout, RingOffsetsMatchLibrxe) {
  EXPECT_EQ(offsetof(rxe_queue_buf, producer_index), 128u);
  EXPECT_EQ(offsetof(rxe_queue_buf, consumer_index), 256u);
  EXPECT_EQ(VIRTIO_RDMA_RING_HDR_SIZE, 384u);
  // A CQ slot of 2^6 bytes holds one ib_uverbs_wc.
  EXPECT_LE(sizeof(ib_uverbs_wc), 1u << VIRTIO_RDMA_MIN_CQE_LOG2_SIZE);
  EXPECT_EQ(offsetof(rxe_send_wqe, dma) + 24, VIRTIO_RDMA_SEND_WQE_SGE_OFFSET);
  EXPECT_EQ(offsetof(rxe_recv_wqe, dma) + 24, VIRTIO_RDMA_RECV_WQE_SGE_OFFSET);
}

TEST(AbiLayout, CommandCodesAreDense) {
  EXPECT_EQ(VIRTIO_RDMA_CMD_QUERY_DEVICE, 1);
  EXPECT_EQ(VIRTIO_RDMA_CMD_MAX, VIRTIO_RDMA_CMD_ALLOC_MR);
}

// The values §4.8 quotes: kernel consumers keep CREATE_QP's size (flags is
// its first reserved byte) and use the kernel's REG_MR opcodes.
TEST(AbiLayout, KernelConsumerValuesMatchSpec) {
  EXPECT_EQ(VIRTIO_RDMA_F_KERNEL, 5);
  EXPECT_EQ(VIRTIO_RDMA_CMD_ALLOC_MR, 22);
  EXPECT_EQ(VIRTIO_RDMA_QP_F_KERNEL, 1);
  EXPECT_EQ(offsetof(virtio_rdma_req_create_qp, flags), 18u);
  EXPECT_EQ(sizeof(virtio_rdma_req_create_qp), 80u);
  EXPECT_EQ(VIRTIO_RDMA_WR_REG_MR, 0x20);
  EXPECT_EQ(VIRTIO_RDMA_WC_REG_MR, 8);
  EXPECT_EQ(sizeof(virtio_rdma_req_alloc_mr), 16u);
  EXPECT_EQ(sizeof(virtio_rdma_resp_alloc_mr), 16u);
}

}  // namespace
