// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Device, PD, MR, CQ and AH: control-queue commands and the guest memory
// behind them.
#include <cstring>

#include "guest-driver/lib/verbs.h"

namespace vrdma::guest {

uint32_t Log2Ceil(uint64_t v) {
  uint32_t n = 0;
  while ((uint64_t{1} << n) < v) ++n;
  return n;
}

Result<std::unique_ptr<Device>> Device::Open(const std::string& socket_path,
                                             const DriverOptions& options) {
  auto drv = VirtioRdmaDriver::Open(socket_path, options);
  if (!drv.ok()) return drv.status();
  std::unique_ptr<Device> dev(new Device());
  dev->driver_ = std::move(drv.value());
  return dev;
}

Device::~Device() = default;

Status Device::DestroyHandle(uint32_t cmd, uint32_t handle) {
  virtio_rdma_req_handle req{handle, 0};
  return driver_->Command(cmd, {reinterpret_cast<const uint8_t*>(&req), sizeof(req)},
                          {}, {});
}

Result<virtio_rdma_resp_query_device> Device::QueryDevice() {
  virtio_rdma_resp_query_device resp{};
  VRDMA_RETURN_IF_ERROR(driver_->Command(VIRTIO_RDMA_CMD_QUERY_DEVICE, {}, {},
                                         {reinterpret_cast<uint8_t*>(&resp), sizeof(resp)}));
  return resp;
}

Result<virtio_rdma_resp_query_port> Device::QueryPort(uint32_t port) {
  virtio_rdma_req_query_port req{port, 0};
  virtio_rdma_resp_query_port resp{};
  VRDMA_RETURN_IF_ERROR(driver_->Command(VIRTIO_RDMA_CMD_QUERY_PORT, req, &resp));
  return resp;
}

Result<GidBytes> Device::QueryGid(uint32_t index) {
  virtio_rdma_req_query_gid req{1, index};
  virtio_rdma_resp_query_gid resp{};
  VRDMA_RETURN_IF_ERROR(driver_->Command(VIRTIO_RDMA_CMD_QUERY_GID, req, &resp));
  GidBytes gid;
  std::memcpy(gid.data(), resp.gid, 16);
  return gid;
}

Result<std::unique_ptr<Pd>> Device::AllocPd() {
  virtio_rdma_resp_create_pd resp{};
  VRDMA_RETURN_IF_ERROR(driver_->Command(
      VIRTIO_RDMA_CMD_CREATE_PD, {}, {},
      {reinterpret_cast<uint8_t*>(&resp), sizeof(resp)}));
  return std::unique_ptr<Pd>(new Pd(this, resp.pd_handle));
}

Pd::~Pd() { (void)dev_->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_PD, handle_); }

Result<std::unique_ptr<Mr>> Device::RegMr(Pd& pd, uint64_t length,
                                          uint32_t access, uint32_t offset) {
  if (offset >= kGuestPageSize || length == 0) return Status::kInvalid;
  auto buf = driver_->ram().Allocate(length + offset);
  if (!buf) return Status::kNoResource;
  std::unique_ptr<Mr> mr(new Mr());
  mr->dev_ = this;
  mr->buf_ = *buf;
  mr->offset_ = offset;
  mr->length_ = length;
  const auto pages = buf->page_gpas();
  virtio_rdma_req_reg_mr req{};
  req.pd_handle = pd.handle();
  req.access_flags = access;
  req.iova = mr->iova();
  req.length = length;
  req.first_page_offset = offset;
  req.npages = static_cast<uint32_t>(pages.size());
  virtio_rdma_resp_reg_mr resp{};
  if (Status s = driver_->Command(VIRTIO_RDMA_CMD_REG_MR, req, &resp, pages);
      s != Status::kOk) {
    driver_->ram().Free(*buf);
    mr->dev_ = nullptr;
    return s;
  }
  mr->handle_ = resp.mr_handle;
  mr->lkey_ = resp.lkey;
  mr->rkey_ = resp.rkey;
  return mr;
}

Mr::~Mr() {
  if (dev_ == nullptr) return;
  // Only reuse the pages once the device has let go of them.
  if (dev_->DestroyHandle(VIRTIO_RDMA_CMD_DEREG_MR, handle_) == Status::kOk) {
    dev_->driver().ram().Free(buf_);
  }
}

Result<std::unique_ptr<Cq>> Device::CreateCq(uint32_t cqe) {
  if (cqe == 0) return Status::kInvalid;
  const uint32_t log2_num = Log2Ceil(uint64_t{cqe} + 1);
  if (log2_num > VIRTIO_RDMA_MAX_RING_LOG2_ELEMS) return Status::kInvalid;
  const uint32_t log2_elem = VIRTIO_RDMA_MIN_CQE_LOG2_SIZE;
  auto mem = driver_->ram().Allocate(RxeRing::Bytes(log2_num, log2_elem));
  if (!mem) return Status::kNoResource;
  std::unique_ptr<Cq> cq(new Cq());
  cq->ring_mem_ = *mem;
  cq->ring_.Init(mem->host, log2_num, log2_elem);
  const auto pages = mem->page_gpas();
  virtio_rdma_req_create_cq req{};
  req.ring.log2_num_elem = log2_num;
  req.ring.log2_elem_size = log2_elem;
  req.ring.npages = static_cast<uint32_t>(pages.size());
  req.cqe = cqe;
  virtio_rdma_resp_create_cq resp{};
  if (Status s = driver_->Command(VIRTIO_RDMA_CMD_CREATE_CQ, req, &resp, pages);
      s != Status::kOk) {
    driver_->ram().Free(*mem);
    return s;
  }
  cq->dev_ = this;
  cq->handle_ = resp.cq_handle;
  cq->cqe_ = resp.cqe;
  return cq;
}

Cq::~Cq() {
  if (dev_ == nullptr) return;
  if (dev_->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_CQ, handle_) == Status::kOk) {
    dev_->driver().ram().Free(ring_mem_);
  }
}

Result<std::unique_ptr<Ah>> Device::CreateAh(Pd& pd,
                                             const virtio_rdma_ah_attr& attr) {
  virtio_rdma_req_create_ah req{};
  req.pd_handle = pd.handle();
  req.attr = attr;
  virtio_rdma_resp_create_ah resp{};
  VRDMA_RETURN_IF_ERROR(driver_->Command(VIRTIO_RDMA_CMD_CREATE_AH, req, &resp));
  return std::unique_ptr<Ah>(new Ah(this, resp.ah_handle));
}

Result<std::unique_ptr<Ah>> Device::CreateAh(Pd& pd, const GidBytes& dgid) {
  virtio_rdma_ah_attr attr{};
  std::memcpy(attr.dgid, dgid.data(), 16);
  attr.sgid_index = 0;
  attr.hop_limit = 64;
  attr.port_num = 1;
  attr.is_global = 1;
  return CreateAh(pd, attr);
}

Ah::~Ah() { (void)dev_->DestroyHandle(VIRTIO_RDMA_CMD_DESTROY_AH, handle_); }

}  // namespace vrdma::guest
