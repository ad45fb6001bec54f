// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/device/command_handler.h"

#include <cstring>
#include <type_traits>

#include "vhost-rdma/device/command_encoder.h"

namespace vrdma::device {
namespace {

template <typename T>
CommandResponse Ok(const T& body) {
  static_assert(sizeof(T) <= kMaxResponseBody);
  CommandResponse r;
  r.status = Status::kOk;
  r.body_len = sizeof(T);
  std::memcpy(r.body.data(), &body, sizeof(T));
  return r;
}

CommandResponse Done(Status s) {
  CommandResponse r;
  r.status = s;
  return r;
}

}  // namespace

CommandHandler::CommandHandler(engine::Engine& engine, engine::VmId vm,
                               const DecodeLimits& limits, uint32_t num_gids)
    : engine_(engine), vm_(vm), limits_(limits), num_gids_(num_gids) {}

CommandResponse CommandHandler::Handle(std::span<const uint8_t> request) {
  Result<Command> cmd = DecodeCommand(request, limits_);
  if (!cmd.ok()) return Done(cmd.status());
  return Execute(*cmd);
}

CommandResponse CommandHandler::Execute(const Command& command) {
  return std::visit(
      [this](const auto& c) -> CommandResponse {
        using T = std::decay_t<decltype(c)>;
        engine::Engine& e = engine_;
        if constexpr (std::is_same_v<T, QueryDeviceCmd>) {
          auto a = e.QueryDevice(vm_);
          return a.ok() ? Ok(EncodeQueryDevice(*a)) : Done(a.status());
        } else if constexpr (std::is_same_v<T, QueryPortCmd>) {
          auto a = e.QueryDevice(vm_);
          return a.ok() ? Ok(EncodeQueryPort(*a, num_gids_)) : Done(a.status());
        } else if constexpr (std::is_same_v<T, QueryGidCmd>) {
          auto g = e.QueryGid(vm_, c.index);
          return g.ok() ? Ok(EncodeQueryGid(*g)) : Done(g.status());
        } else if constexpr (std::is_same_v<T, CreatePdCmd>) {
          auto pd = e.CreatePd(vm_);
          return pd.ok() ? Ok(EncodeCreatePd(*pd)) : Done(pd.status());
        } else if constexpr (std::is_same_v<T, DestroyPdCmd>) {
          return Done(e.DestroyPd(vm_, c.pd));
        } else if constexpr (std::is_same_v<T, RegMrCmd>) {
          // Without windows the bit is as unknown as any other (EINVAL).
          if ((c.req.access & VIRTIO_RDMA_ACCESS_MW_BIND) && !has(VIRTIO_RDMA_F_MW))
            return Done(Status::kInvalid);
          auto mr = e.RegMr(vm_, c.req);
          return mr.ok() ? Ok(EncodeRegMr(*mr)) : Done(mr.status());
        } else if constexpr (std::is_same_v<T, DeregMrCmd>) {
          return Done(e.DeregMr(vm_, c.mr));
        } else if constexpr (std::is_same_v<T, CreateCqCmd>) {
          auto cq = e.CreateCq(vm_, c.req);
          return cq.ok() ? Ok(EncodeCreateCq(*cq)) : Done(cq.status());
        } else if constexpr (std::is_same_v<T, DestroyCqCmd>) {
          return Done(e.DestroyCq(vm_, c.cq));
        } else if constexpr (std::is_same_v<T, ReqNotifyCqCmd>) {
          return Done(e.ReqNotifyCq(vm_, c.cq, c.solicited_only));
        } else if constexpr (std::is_same_v<T, CreateQpCmd>) {
          if (c.req.type == QpType::kUd && !has(VIRTIO_RDMA_F_UD))
            return Done(Status::kUnsupported);
          if (c.req.type == QpType::kGsi && !has(VIRTIO_RDMA_F_ROCE))
            return Done(Status::kUnsupported);
          if (c.req.srq != 0 && !has(VIRTIO_RDMA_F_SRQ))
            return Done(Status::kUnsupported);
          // Without kernel consumers the flag is as unknown as any other
          // bit (EINVAL).
          if (c.req.kernel && !has(VIRTIO_RDMA_F_KERNEL)) return Done(Status::kInvalid);
          auto qp = e.CreateQp(vm_, c.req);
          return qp.ok() ? Ok(EncodeCreateQp(*qp)) : Done(qp.status());
        } else if constexpr (std::is_same_v<T, ModifyQpCmd>) {
          return Done(e.ModifyQp(vm_, c.req));
        } else if constexpr (std::is_same_v<T, QueryQpCmd>) {
          auto q = e.QueryQp(vm_, c.qpn);
          return q.ok() ? Ok(EncodeQueryQp(*q)) : Done(q.status());
        } else if constexpr (std::is_same_v<T, DestroyQpCmd>) {
          return Done(e.DestroyQp(vm_, c.qpn));
        } else if constexpr (std::is_same_v<T, CreateAhCmd>) {
          if (!has(VIRTIO_RDMA_F_UD)) return Done(Status::kUnsupported);
          auto ah = e.CreateAh(vm_, c.pd, c.ah);
          return ah.ok() ? Ok(EncodeCreateAh(*ah)) : Done(ah.status());
        } else if constexpr (std::is_same_v<T, DestroyAhCmd>) {
          if (!has(VIRTIO_RDMA_F_UD)) return Done(Status::kUnsupported);
          return Done(e.DestroyAh(vm_, c.ah));
        } else if constexpr (std::is_same_v<T, CreateSrqCmd>) {
          if (!has(VIRTIO_RDMA_F_SRQ)) return Done(Status::kUnsupported);
          auto s = e.CreateSrq(vm_, c.req);
          return s.ok() ? Ok(EncodeCreateSrq(*s)) : Done(s.status());
        } else if constexpr (std::is_same_v<T, ModifySrqCmd>) {
          if (!has(VIRTIO_RDMA_F_SRQ)) return Done(Status::kUnsupported);
          return Done(e.ModifySrq(vm_, c.srq, c.mask, c.max_wr, c.srq_limit));
        } else if constexpr (std::is_same_v<T, DestroySrqCmd>) {
          if (!has(VIRTIO_RDMA_F_SRQ)) return Done(Status::kUnsupported);
          return Done(e.DestroySrq(vm_, c.srq));
        } else if constexpr (std::is_same_v<T, AllocMwCmd>) {
          if (!has(VIRTIO_RDMA_F_MW)) return Done(Status::kUnsupported);
          auto mw = e.AllocMw(vm_, c.pd, c.type);
          return mw.ok() ? Ok(EncodeAllocMw(*mw)) : Done(mw.status());
        } else if constexpr (std::is_same_v<T, DeallocMwCmd>) {
          if (!has(VIRTIO_RDMA_F_MW)) return Done(Status::kUnsupported);
          return Done(e.DeallocMw(vm_, c.mw));
        } else if constexpr (std::is_same_v<T, AllocMrCmd>) {
          if (!has(VIRTIO_RDMA_F_KERNEL)) return Done(Status::kUnsupported);
          auto mr = e.AllocMr(vm_, c.req);
          return mr.ok() ? Ok(EncodeAllocMr(*mr)) : Done(mr.status());
        } else {
          static_assert(sizeof(T) == 0, "unhandled command");
        }
      },
      command);
}

}  // namespace vrdma::device
