// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/base/status.h"

namespace vrdma {

const char* StatusName(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kInvalid: return "invalid";
    case Status::kUnsupported: return "unsupported";
    case Status::kNoResource: return "no-resource";
    case Status::kBadHandle: return "bad-handle";
    case Status::kBadState: return "bad-state";
    case Status::kBusy: return "busy";
    case Status::kFault: return "fault";
    case Status::kAccess: return "access";
    case Status::kIoError: return "io-error";
  }
  return "unknown";
}

}  // namespace vrdma
