// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The attach-vm request of the control socket: JSON in, a checked VmConfig
// and socket path out (or a human-readable error). Control path only.
//
//   {"cmd":"attach-vm","name":"tenant-a","socket":"/run/vhost-rdma/a.sock",
//    "gids":["::ffff:192.0.2.10"],
//    "mac":"52:54:00:12:34:56",   optional: the VM NIC's MAC; RoCE v2 on it
//    "quotas":{"max_qp":64,"max_pinned_bytes":1073741824,...},   optional
//    "qos":{"weight":2,"class":"latency","latency_target_ns":0,
//           "max_rate_bps":0,"max_msgs_per_s":0,"min_rate_bps":0}}, optional
//    "reliability":"uc"}          optional: native (default), rc or uc, the
//                                 VM's mode under --reliability-layer
//                                 (docs/reliability.md §2.2; set-reliability
//                                 changes it live)
//
// The qos fields (policy::TenantQos; docs/operators.md, "QoS"): weight >= 1;
// class, Justitia's application class (bandwidth, the default; throughput;
// latency); latency_target_ns (0: the policy's default); max_rate_bps and
// max_msgs_per_s, caps in payload bits and work requests per second (0:
// none); min_rate_bps, a guarantee (0: none). Numbers are non-negative
// integers (25e9 is one); caps and the guarantee are at most the card's
// (--card, or the RNIC's link rate), the guarantee at most the byte cap.
#ifndef VRDMA_VHOST_RDMA_DAEMON_VM_REQUEST_H_
#define VRDMA_VHOST_RDMA_DAEMON_VM_REQUEST_H_

#include <string>

#include <nlohmann/json.hpp>

#include "backend/engine/engine.h"
#include "backend/reliable_rnic/reliable_rnic.h"

namespace vrdma::daemon {

struct AttachRequest {
  engine::VmConfig config;
  std::string socket_path;
  ReliabilityMode reliability = ReliabilityMode::kNative;
};

// Returns false and sets *error when the request is malformed. card: what
// the QoS is checked against.
bool ParseAttachRequest(const nlohmann::json& j, const policy::CardProfile& card,
                        AttachRequest* out, std::string* error);
// A qos object: the fields it names replace those of *out, and the result
// must pass policy::CheckTenantQos on `card`. Every refusal (unknown field,
// bad type, sign, fraction, range, a rule of CheckTenantQos) leaves *out
// unchanged and names the field in *error ("qos.max_rate_bps: ...").
bool ParseQos(const nlohmann::json& q, const policy::CardProfile& card,
              policy::TenantQos* out, std::string* error);
// A QoS as ParseQos reads it (every field).
nlohmann::json QosJson(const policy::TenantQos& q);
// The fields of q named by `applied` (policy::QosField bits), as QosJson
// names them: what a policy enforces (stats' "effective_qos").
nlohmann::json EffectiveQosJson(const policy::TenantQos& q, uint32_t applied);
// The "quotas" object, as ParseAttachRequest reads it (every field).
nlohmann::json QuotasJson(const engine::Quotas& q);
// "native", "rc", "uc".
const char* ReliabilityName(ReliabilityMode m);
// One of ReliabilityName's strings to *out; false with *error otherwise.
bool ParseReliability(const nlohmann::json& j, ReliabilityMode* out, std::string* error);
bool ParseTenantClass(const std::string& text, policy::TenantClass* out);
const char* TenantClassName(policy::TenantClass c);
// IPv6 text (incl. ::ffff:a.b.c.d) to a GID.
bool ParseGid(const std::string& text, Gid* out);
std::string GidToString(const Gid& gid);
// "52:54:00:12:34:56" (hex, either case) to a unicast, non-zero MAC.
bool ParseMac(const std::string& text, engine::MacAddress* out);
std::string MacToString(const engine::MacAddress& mac);
// Why a physical RNIC cannot send from gid, for the operator (attach-vm,
// --probe-gid).
std::string MissingGid(const Gid& gid, const std::string& rnic_name, uint32_t port);
// 1..64 characters of [A-Za-z0-9._-].
bool ValidVmName(const std::string& name);

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_VM_REQUEST_H_
