// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/vm_request.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

// Reads an optional boolean field of `obj`; false when present and not a
// JSON true or false (no 0/1, no strings).
bool OptionalBool(const json& obj, const char* where, const char* key, bool* out,
                  std::string* error) {
  auto it = obj.find(key);
  if (it == obj.end()) return true;
  if (!it->is_boolean()) {
    *error = std::string(where) + key + ": must be true or false";
    return false;
  }
  *out = it->get<bool>();
  return true;
}

// Reads an optional unsigned field of `obj` (named `where` + key in
// errors); false when present with a bad type, a sign, a fraction, or out of
// range for T. An integral number written with an exponent (25e9) is one.
template <typename T>
bool OptionalUnsigned(const json& obj, const char* where, const char* key, T* out,
                      std::string* error) {
  auto it = obj.find(key);
  if (it == obj.end()) return true;
  const std::string name = std::string(where) + key;
  uint64_t v = 0;
  if (it->is_number_unsigned()) {
    v = it->template get<uint64_t>();
  } else if (it->is_number_integer()) {
    if (it->template get<int64_t>() < 0) {
      *error = name + ": must not be negative";
      return false;
    }
    v = it->template get<uint64_t>();
  } else if (it->is_number_float()) {
    const double d = it->template get<double>();
    if (d < 0) {
      *error = name + ": must not be negative";
      return false;
    }
    if (d != std::floor(d)) {
      *error = name + ": must be an integer";
      return false;
    }
    // 2^64 and above do not fit; below, every integral double converts.
    if (d >= 18446744073709551616.0) {
      *error = name + ": is out of range";
      return false;
    }
    v = static_cast<uint64_t>(d);
  } else {
    *error = name + ": must be a non-negative integer";
    return false;
  }
  if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    *error = name + ": is out of range";
    return false;
  }
  *out = static_cast<T>(v);
  return true;
}

// The fields of a qos object (QosJson writes each) and their QosField bits.
struct QosFieldName {
  const char* name;
  uint32_t bit;
};
constexpr QosFieldName kQosFields[] = {
    {"weight", policy::kQosWeight},          {"class", policy::kQosClass},
    {"latency_target_ns", policy::kQosLatencyTarget},
    {"max_rate_bps", policy::kQosMaxRate},   {"max_msgs_per_s", policy::kQosMaxMsgs},
    {"min_rate_bps", policy::kQosMinRate}};

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

bool ParseMac(const std::string& text, engine::MacAddress* out) {
  engine::MacAddress m{};
  unsigned v[6];
  char tail;
  if (text.size() != 17 ||
      std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4],
                  &v[5], &tail) != 6) {
    return false;
  }
  for (int i = 0; i < 6; ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(text[i * 3])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i * 3 + 1])) ||
        (i < 5 && text[i * 3 + 2] != ':')) {
      return false;
    }
    m[i] = static_cast<uint8_t>(v[i]);
  }
  // A NIC's own address: unicast and not zero.
  if ((m[0] & 1) != 0 || m == engine::MacAddress{}) return false;
  *out = m;
  return true;
}

std::string MacToString(const engine::MacAddress& mac) {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5]);
  return buf;
}

std::string MissingGid(const Gid& gid, const std::string& rnic_name, uint32_t port) {
  return "gid " + GidToString(gid) + " is not in the GID table of " + rnic_name + " port " +
         std::to_string(port) +
         ": add the address to the RNIC's netdev (or a macvlan on it) first "
         "(docs/operators.md, \"A physical RNIC\")";
}

nlohmann::json QuotasJson(const engine::Quotas& q) {
  return nlohmann::json{{"max_pd", q.max_pd},
                        {"max_cq", q.max_cq},
                        {"max_qp", q.max_qp},
                        {"max_mr", q.max_mr},
                        {"max_ah", q.max_ah},
                        {"max_srq", q.max_srq},
                        {"max_mw", q.max_mw},
                        {"kernel_verbs", q.kernel_verbs},
                        {"max_fr_mr", q.max_fr_mr},
                        {"max_pinned_bytes", q.max_pinned_bytes},
                        {"max_host_bytes", q.max_host_bytes},
                        {"max_mappings", q.max_mappings}};
}

bool ParseAttachRequest(const json& j, const policy::CardProfile& card, AttachRequest* out,
                        std::string* error) {
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

  out->reliability = ReliabilityMode::kNative;
  if (auto r = j.find("reliability"); r != j.end()) {
    if (!ParseReliability(*r, &out->reliability, error)) {
      *error = "reliability: " + *error;
      return false;
    }
  }

  out->config.mac.reset();
  if (auto m = j.find("mac"); m != j.end()) {
    engine::MacAddress mac{};
    if (!m->is_string() || !ParseMac(m->get<std::string>(), &mac)) {
      *error = "mac: the unicast MAC of the VM's NIC (\"52:54:00:12:34:56\") required, not " +
               m->dump();
      return false;
    }
    out->config.mac = mac;
  }

  if (auto q = j.find("quotas"); q != j.end()) {
    // Field names: the same as QuotasJson's.
    if (!q->is_object()) {
      *error = "quotas must be an object";
      return false;
    }
    // Every field QuotasJson writes, and no other.
    const json known = QuotasJson(engine::Quotas{});
    for (const auto& [key, value] : q->items()) {
      if (!known.contains(key)) {
        *error = "quotas." + key + ": unknown field (known:";
        for (const auto& [k, v] : known.items()) *error += " " + k;
        *error += ")";
        return false;
      }
    }
    engine::Quotas& Q = out->config.quotas;
    if (!OptionalUnsigned(*q, "quotas.", "max_pd", &Q.max_pd, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_cq", &Q.max_cq, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_qp", &Q.max_qp, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_mr", &Q.max_mr, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_ah", &Q.max_ah, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_srq", &Q.max_srq, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_mw", &Q.max_mw, error) ||
        !OptionalBool(*q, "quotas.", "kernel_verbs", &Q.kernel_verbs, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_fr_mr", &Q.max_fr_mr, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_pinned_bytes", &Q.max_pinned_bytes, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_host_bytes", &Q.max_host_bytes, error) ||
        !OptionalUnsigned(*q, "quotas.", "max_mappings", &Q.max_mappings, error)) {
      return false;
    }
  }
  if (auto q = j.find("qos"); q != j.end()) {
    return ParseQos(*q, card, &out->config.qos, error);
  }
  return true;
}

bool ParseQos(const json& q, const policy::CardProfile& card, policy::TenantQos* out,
              std::string* error) {
  if (!q.is_object()) {
    *error = "qos: must be an object";
    return false;
  }
  for (const auto& [key, value] : q.items()) {
    const auto known = [&key](const QosFieldName& f) { return key == f.name; };
    if (std::none_of(std::begin(kQosFields), std::end(kQosFields), known)) {
      *error = "qos." + key + ": unknown field (known:";
      for (const QosFieldName& f : kQosFields) *error += std::string(" ") + f.name;
      *error += ")";
      return false;
    }
  }
  policy::TenantQos Q = *out;
  if (!OptionalUnsigned(q, "qos.", "weight", &Q.weight, error) ||
      !OptionalUnsigned(q, "qos.", "latency_target_ns", &Q.latency_target_ns, error) ||
      !OptionalUnsigned(q, "qos.", "max_rate_bps", &Q.max_rate_bps, error) ||
      !OptionalUnsigned(q, "qos.", "max_msgs_per_s", &Q.max_msgs_per_s, error) ||
      !OptionalUnsigned(q, "qos.", "min_rate_bps", &Q.min_rate_bps, error)) {
    return false;
  }
  if (auto c = q.find("class"); c != q.end()) {
    if (!c->is_string() || !ParseTenantClass(c->get<std::string>(), &Q.app_class)) {
      *error = "qos.class: must be \"bandwidth\", \"throughput\" or \"latency\"";
      return false;
    }
  }
  // The meaning (weight, limits against the card), on the QoS as it would
  // become: a set-qos naming one field is checked with the others in force.
  std::string why;
  if (!policy::CheckTenantQos(Q, card, &why)) {
    *error = "qos." + why;
    return false;
  }
  *out = Q;
  return true;
}

nlohmann::json QosJson(const policy::TenantQos& q) {
  return nlohmann::json{{"weight", q.weight},
                        {"class", TenantClassName(q.app_class)},
                        {"latency_target_ns", q.latency_target_ns},
                        {"max_rate_bps", q.max_rate_bps},
                        {"max_msgs_per_s", q.max_msgs_per_s},
                        {"min_rate_bps", q.min_rate_bps}};
}

nlohmann::json EffectiveQosJson(const policy::TenantQos& q, uint32_t applied) {
  const nlohmann::json all = QosJson(q);
  nlohmann::json out = nlohmann::json::object();
  for (const QosFieldName& f : kQosFields) {
    if (applied & f.bit) out[f.name] = all[f.name];
  }
  return out;
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

bool ParseReliability(const nlohmann::json& j, ReliabilityMode* out, std::string* error) {
  for (ReliabilityMode m : {ReliabilityMode::kNative, ReliabilityMode::kRc, ReliabilityMode::kUc}) {
    if (j.is_string() && j.get<std::string>() == ReliabilityName(m)) {
      *out = m;
      return true;
    }
  }
  *error = "native, rc or uc, not " + j.dump();
  return false;
}

const char* ReliabilityName(ReliabilityMode m) {
  switch (m) {
    case ReliabilityMode::kNative: return "native";
    case ReliabilityMode::kRc: return "rc";
    case ReliabilityMode::kUc: return "uc";
  }
  return "native";
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
