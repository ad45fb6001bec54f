// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test-only: a gmock engine::Engine for the device tests.
#ifndef VRDMA_VHOST_RDMA_DEVICE_MOCK_ENGINE_H_
#define VRDMA_VHOST_RDMA_DEVICE_MOCK_ENGINE_H_

#include <gmock/gmock.h>

#include "backend/engine/engine.h"

namespace vrdma::device::testing {

class MockEngine : public engine::Engine {
 public:
  MOCK_METHOD(Result<engine::VmId>, AttachVm,
              (const engine::VmConfig&, engine::VmEventSink*), (override));
  MOCK_METHOD(void, DetachVm, (engine::VmId), (override));
  MOCK_METHOD(void, SetGuestMemory,
              (engine::VmId, std::shared_ptr<const GuestMemory>), (override));
  MOCK_METHOD(Result<engine::VmStats>, Stats, (engine::VmId), (const, override));
  MOCK_METHOD(Result<engine::DeviceAttr>, QueryDevice, (engine::VmId),
              (const, override));
  MOCK_METHOD(Result<Gid>, QueryGid, (engine::VmId, uint32_t), (const, override));
  MOCK_METHOD(Result<uint32_t>, CreatePd, (engine::VmId), (override));
  MOCK_METHOD(Status, DestroyPd, (engine::VmId, uint32_t), (override));
  MOCK_METHOD(Result<engine::RegMrResult>, RegMr,
              (engine::VmId, const engine::RegMrRequest&), (override));
  MOCK_METHOD(Status, DeregMr, (engine::VmId, uint32_t), (override));
  MOCK_METHOD(Result<engine::AllocMwResult>, AllocMw, (engine::VmId, uint32_t, uint8_t),
              (override));
  MOCK_METHOD(Status, DeallocMw, (engine::VmId, uint32_t), (override));
  MOCK_METHOD(Result<engine::RegMrResult>, AllocMr,
              (engine::VmId, const engine::AllocMrRequest&), (override));
  MOCK_METHOD(Result<engine::CreateCqResult>, CreateCq,
              (engine::VmId, const engine::CreateCqRequest&), (override));
  MOCK_METHOD(Status, DestroyCq, (engine::VmId, uint32_t), (override));
  MOCK_METHOD(Status, ReqNotifyCq, (engine::VmId, uint32_t, bool), (override));
  MOCK_METHOD(Result<engine::CreateQpResult>, CreateQp,
              (engine::VmId, const engine::CreateQpRequest&), (override));
  MOCK_METHOD(Status, ModifyQp, (engine::VmId, const engine::ModifyQpRequest&),
              (override));
  MOCK_METHOD(Result<engine::QueryQpResult>, QueryQp, (engine::VmId, uint32_t),
              (const, override));
  MOCK_METHOD(Status, DestroyQp, (engine::VmId, uint32_t), (override));
  MOCK_METHOD(Result<uint32_t>, CreateAh,
              (engine::VmId, uint32_t, const engine::GuestAh&), (override));
  MOCK_METHOD(Status, DestroyAh, (engine::VmId, uint32_t), (override));
  MOCK_METHOD(Result<engine::CreateSrqResult>, CreateSrq,
              (engine::VmId, const engine::CreateSrqRequest&), (override));
  MOCK_METHOD(Status, ModifySrq,
              (engine::VmId, uint32_t, uint32_t, uint32_t, uint32_t), (override));
  MOCK_METHOD(Status, DestroySrq, (engine::VmId, uint32_t), (override));
  MOCK_METHOD(Status, SetQos, (engine::VmId, const policy::TenantQos&),
              (override));
  MOCK_METHOD(void, Report, (engine::VmId, policy::ReportSink&),
              (const, override));
  MOCK_METHOD(void, ReportPolicy, (policy::ReportSink&), (const, override));
  MOCK_METHOD(void, Doorbell, (engine::VmId, uint8_t, uint32_t), (override));
  MOCK_METHOD(bool, PollOnce, (), (override));
  MOCK_METHOD(policy::Nanos, NextDeadline, (), (const, override));
};

}  // namespace vrdma::device::testing

#endif  // VRDMA_VHOST_RDMA_DEVICE_MOCK_ENGINE_H_
