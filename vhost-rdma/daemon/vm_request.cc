// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/vm_request.h"

#include <arpa/inet.h>

#include <cstring>
#include <limits>

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

// Reads an optional unsigned field; false when present with a bad type or
// out of range for T.
template <typename T>
bool OptionalUnsigned(const json& obj, const char* key, T* out, std::string* error) {
  auto it = obj.find(key);
  if (it == obj.end()) return true;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->template get<int64_t>() >= 0)) {
    *error = std::string(key) + " must be a non-negative integer";
    return false;
  }
  const uint64_t v = it->template get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    *error = std::string(key) + " is out of range";
    return false;
  }
  *out = static_cast<T>(v);
  return true;
}

}  // namespace

bool ValidVmName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool ParseGid(const std::string& text, Gid* out) {
  in6_addr a;
  if (inet_pton(AF_INET6, text.c_str(), &a) != 1) return false;
  std::memcpy(out->data(), &a, 16);
  return true;
}

std::string GidToString(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN];
  in6_addr a;
  std::memcpy(&a, gid.data(), 16);
  return inet_ntop(AF_INET6, &a, buf, sizeof(buf)) ? buf : "?";
}

nlohmann::json QuotasJson(const engine::Quotas& q) {
  return nlohmann::json{{"max_pd", q.max_pd},
                        {"max_cq", q.max_cq},
                        {"max_qp", q.max_qp},
                        {"max_mr", q.max_mr},
                        {"max_ah", q.max_ah},
                        {"max_srq", q.max_srq},
                        {"max_pinned_bytes", q.max_pinned_bytes},
                        {"max_host_bytes", q.max_host_bytes},
                        {"max_mappings", q.max_mappings}};
}

bool ParseAttachRequest(const json& j, AttachRequest* out, std::string* error) {
  if (!j.is_object()) {
    *error = "request must be a JSON object";
    return false;
  }
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || !ValidVmName(name->get<std::string>())) {
    *error = "name: 1-64 characters of [A-Za-z0-9._-] required";
    return false;
  }
  out->config.name = name->get<std::string>();
  auto sock = j.find("socket");
  if (sock == j.end() || !sock->is_string() || sock->get<std::string>().empty() ||
      sock->get<std::string>().size() >= 108) {
    *error = "socket: a unix socket path (< 108 bytes) required";
    return false;
  }
  out->socket_path = sock->get<std::string>();

  auto gids = j.find("gids");
  if (gids == j.end() || !gids->is_array() || gids->empty() ||
      gids->size() > VIRTIO_RDMA_MAX_GIDS) {
    *error = "gids: an array of 1-" + std::to_string(VIRTIO_RDMA_MAX_GIDS) + " IPv6 GIDs required";
    return false;
  }
  out->config.gids.clear();
  for (const auto& g : *gids) {
    Gid gid{};
    if (!g.is_string() || !ParseGid(g.get<std::string>(), &gid)) {
      *error = "gids: not an IPv6 address: " + g.dump();
      return false;
    }
    for (const auto& seen : out->config.gids) {
      if (seen == gid) {
        *error = "gids: duplicate " + g.get<std::string>();
        return false;
      }
    }
    out->config.gids.push_back(gid);
  }

  if (auto q = j.find("quotas"); q != j.end()) {
    // Field names: the same as QuotasJson's.
    if (!q->is_object()) {
      *error = "quotas must be an object";
      return false;
    }
    engine::Quotas& Q = out->config.quotas;
    if (!OptionalUnsigned(*q, "max_pd", &Q.max_pd, error) ||
        !OptionalUnsigned(*q, "max_cq", &Q.max_cq, error) ||
        !OptionalUnsigned(*q, "max_qp", &Q.max_qp, error) ||
        !OptionalUnsigned(*q, "max_mr", &Q.max_mr, error) ||
        !OptionalUnsigned(*q, "max_ah", &Q.max_ah, error) ||
        !OptionalUnsigned(*q, "max_srq", &Q.max_srq, error) ||
        !OptionalUnsigned(*q, "max_pinned_bytes", &Q.max_pinned_bytes, error) ||
        !OptionalUnsigned(*q, "max_host_bytes", &Q.max_host_bytes, error) ||
        !OptionalUnsigned(*q, "max_mappings", &Q.max_mappings, error)) {
      return false;
    }
  }
  if (auto q = j.find("qos"); q != j.end()) {
    return ParseQos(*q, &out->config.qos, error);
  }
  return true;
}

bool ParseQos(const json& q, policy::TenantQos* out, std::string* error) {
  if (!q.is_object()) {
    *error = "qos must be an object";
    return false;
  }
  for (const auto& [key, value] : q.items()) {
    if (key != "weight" && key != "latency_target_ns" && key != "max_rate_bps" &&
        key != "class") {
      *error = "qos: unknown field " + key;
      return false;
    }
  }
  policy::TenantQos Q = *out;
  if (!OptionalUnsigned(q, "weight", &Q.weight, error) ||
      !OptionalUnsigned(q, "latency_target_ns", &Q.latency_target_ns, error) ||
      !OptionalUnsigned(q, "max_rate_bps", &Q.max_rate_bps, error)) {
    return false;
  }
  if (Q.weight == 0) {
    *error = "qos.weight must be >= 1";
    return false;
  }
  if (auto c = q.find("class"); c != q.end()) {
    if (!c->is_string() || !ParseTenantClass(c->get<std::string>(), &Q.app_class)) {
      *error = "qos.class must be \"bandwidth\", \"throughput\" or \"latency\"";
      return false;
    }
  }
  *out = Q;
  return true;
}

bool ParseTenantClass(const std::string& text, policy::TenantClass* out) {
  if (text == "bandwidth") {
    *out = policy::TenantClass::kBandwidth;
  } else if (text == "throughput") {
    *out = policy::TenantClass::kThroughput;
  } else if (text == "latency") {
    *out = policy::TenantClass::kLatency;
  } else {
    return false;
  }
  return true;
}

const char* TenantClassName(policy::TenantClass c) {
  switch (c) {
    case policy::TenantClass::kThroughput:
      return "throughput";
    case policy::TenantClass::kLatency:
      return "latency";
    default:
      return "bandwidth";
  }
}

}  // namespace vrdma::daemon
