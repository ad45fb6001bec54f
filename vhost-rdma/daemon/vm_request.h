// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The attach-vm request of the control socket: JSON in, a checked VmConfig
// and socket path out (or a human-readable error). Control path only.
//
//   {"cmd":"attach-vm","name":"tenant-a","socket":"/run/vhost-rdma/a.sock",
//    "gids":["::ffff:192.0.2.10"],
//    "quotas":{"max_qp":64,"max_pinned_bytes":1073741824,...},   optional
//    "qos":{"weight":2,"class":"latency","latency_target_ns":0,
//           "max_rate_bps":0}}                                     optional
//
// qos.class is Justitia's application class (bandwidth, the default;
// throughput; latency); policies that do not classify by operator ignore it.
#ifndef VRDMA_VHOST_RDMA_DAEMON_VM_REQUEST_H_
#define VRDMA_VHOST_RDMA_DAEMON_VM_REQUEST_H_

#include <string>

#include <nlohmann/json.hpp>

#include "backend/engine/engine.h"

namespace vrdma::daemon {

struct AttachRequest {
  engine::VmConfig config;
  std::string socket_path;
};

// Returns false and sets *error when the request is malformed.
bool ParseAttachRequest(const nlohmann::json& j, AttachRequest* out, std::string* error);
// A qos object (the fields it names replace those of *out); unknown
// fields, bad types and ranges are errors and leave *out unchanged.
bool ParseQos(const nlohmann::json& q, policy::TenantQos* out, std::string* error);
// The "quotas" object, as ParseAttachRequest reads it (every field).
nlohmann::json QuotasJson(const engine::Quotas& q);
bool ParseTenantClass(const std::string& text, policy::TenantClass* out);
const char* TenantClassName(policy::TenantClass c);
// IPv6 text (incl. ::ffff:a.b.c.d) to a GID.
bool ParseGid(const std::string& text, Gid* out);
std::string GidToString(const Gid& gid);
// 1..64 characters of [A-Za-z0-9._-].
bool ValidVmName(const std::string& name);

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_VM_REQUEST_H_
