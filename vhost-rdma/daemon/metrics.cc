// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/metrics.h"

#include <civetweb.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string_view>
#include <vector>

#include "vhost-rdma/daemon/control_client.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

enum class Kind { kCounter, kGauge };

// One metric read from a VM's stats entry: `path` is its key there
// ("scheduler.held_ns": under "scheduler"), `scale` converts to the metric's
// base unit (ns to seconds).
struct VmMetric {
  const char* path;
  const char* name;
  Kind kind;
  const char* help;
  double scale = 1;
};

constexpr VmMetric kVmMetrics[] = {
    {"connected", "vrdma_vm_connected", Kind::kGauge, "1 while the VM's QEMU is connected"},
    {"pds", "vrdma_vm_pds", Kind::kGauge, "protection domains the guest holds"},
    {"cqs", "vrdma_vm_cqs", Kind::kGauge, "completion queues the guest holds"},
    {"qps", "vrdma_vm_qps", Kind::kGauge, "queue pairs the guest holds"},
    {"mrs", "vrdma_vm_mrs", Kind::kGauge, "memory regions the guest holds"},
    {"ahs", "vrdma_vm_ahs", Kind::kGauge, "address handles the guest holds"},
    {"srqs", "vrdma_vm_srqs", Kind::kGauge, "shared receive queues the guest holds"},
    {"mws", "vrdma_vm_mws", Kind::kGauge, "memory windows the guest holds"},
    {"fr_mrs", "vrdma_vm_fr_mrs", Kind::kGauge,
     "of its memory regions, fast-registration ones (kernel consumers)"},
    {"pinned_bytes", "vrdma_vm_pinned_bytes", Kind::kGauge, "guest memory mapped for MRs and rings"},
    {"host_bytes", "vrdma_vm_host_bytes", Kind::kGauge, "daemon memory the VM's objects cause"},
    {"mappings", "vrdma_vm_mappings", Kind::kGauge, "kernel mappings of the VM's page views"},
    {"wqes_posted", "vrdma_vm_wqes_posted_total", Kind::kCounter, "work requests posted"},
    {"wqes_rejected", "vrdma_vm_wqes_rejected_total", Kind::kCounter,
     "work requests refused (errors)"},
    {"cqes_written", "vrdma_vm_cqes_written_total", Kind::kCounter,
     "completions written to the guest"},
    {"rnic_cq_errors", "vrdma_vm_rnic_cq_errors_total", Kind::kCounter,
     "host CQs the RNIC put in error"},
    {"flush_deferred", "vrdma_vm_flush_deferred_total", Kind::kCounter,
     "flushes of errored rings postponed by the per-VM budget"},
    {"gsi_sent", "vrdma_vm_gsi_sent_total", Kind::kCounter,
     "QP1 datagrams (the guest's RDMA CM) the daemon carried"},
    {"gsi_delivered", "vrdma_vm_gsi_delivered_total", Kind::kCounter,
     "of those, delivered to a VM of this daemon"},
    {"gsi_dropped", "vrdma_vm_gsi_dropped_total", Kind::kCounter,
     "of those, dropped: no VM here with the GID, or its QP1 not ready or without a receive"},
    {"lost_events", "vrdma_vm_lost_events_total", Kind::kCounter,
     "device events the guest's event queue had no room for"},
    {"control_ns", "vrdma_vm_control_seconds_total", Kind::kCounter,
     "control-thread time the VM's commands took", 1e-9},
    {"control_yields", "vrdma_vm_control_yields_total", Kind::kCounter,
     "control slices the VM used up"},
    {"control_throttles", "vrdma_vm_control_throttles_total", Kind::kCounter,
     "times the VM's commands waited for its control-thread quota"},
    {"qos_rejections", "vrdma_vm_qos_rejections_total", Kind::kCounter, "QoS changes refused"},
    {"scheduler.flows", "vrdma_vm_flows", Kind::kGauge, "flows (QPs with work) in the scheduler"},
    {"scheduler.wrs_arrived", "vrdma_vm_wrs_arrived_total", Kind::kCounter,
     "work requests that reached the scheduler"},
    {"scheduler.bytes_arrived", "vrdma_vm_arrived_bytes_total", Kind::kCounter,
     "payload bytes that reached the scheduler"},
    {"scheduler.wrs_completed", "vrdma_vm_wrs_completed_total", Kind::kCounter,
     "work requests completed"},
    {"scheduler.bytes_completed", "vrdma_vm_completed_bytes_total", Kind::kCounter,
     "payload bytes completed"},
    {"scheduler.pieces_posted", "vrdma_vm_pieces_posted_total", Kind::kCounter,
     "pieces posted to the RNIC"},
    {"scheduler.bytes_posted", "vrdma_vm_posted_bytes_total", Kind::kCounter,
     "payload bytes posted to the RNIC"},
    {"scheduler.wrs_split", "vrdma_vm_wrs_split_total", Kind::kCounter,
     "work requests split into several pieces"},
    {"scheduler.bytes_paced", "vrdma_vm_paced_bytes_total", Kind::kCounter,
     "bytes posted when a release time they waited for came"},
    {"scheduler.held_ns", "vrdma_vm_held_seconds_total", Kind::kCounter,
     "time with work queued that the policy kept back", 1e-9},
    {"scheduler.queued_wrs", "vrdma_vm_queued_wrs", Kind::kGauge,
     "work requests queued in the scheduler (queue depth)"},
    {"scheduler.queued_bytes", "vrdma_vm_queued_bytes", Kind::kGauge,
     "payload bytes queued in the scheduler"},
    {"scheduler.outstanding_pieces", "vrdma_vm_outstanding_pieces", Kind::kGauge,
     "pieces on the RNIC"},
    {"scheduler.outstanding_bytes", "vrdma_vm_outstanding_bytes", Kind::kGauge,
     "payload bytes on the RNIC"},
    {"scheduler.latency_avg_ns", "vrdma_vm_completion_latency_avg_seconds", Kind::kGauge,
     "mean completion latency since the VM attached", 1e-9},
    {"scheduler.latency_max_ns", "vrdma_vm_completion_latency_max_seconds", Kind::kGauge,
     "largest completion latency since the VM attached", 1e-9},
    // The reliability layer's, per VM (stats: reliability_counters; only
    // with --reliability-layer).
    {"reliability_counters.chunks_sent", "vrdma_vm_reliability_chunks_sent_total",
     Kind::kCounter, "reliability layer: data chunks sent (uc mode)"},
    {"reliability_counters.retx_sent", "vrdma_vm_reliability_units_resent_total",
     Kind::kCounter, "reliability layer: units sent again (uc mode)"},
    {"reliability_counters.lost_rack", "vrdma_vm_reliability_lost_rack_total", Kind::kCounter,
     "reliability layer: transmissions found lost by a later ACK (RACK)"},
    {"reliability_counters.lost_rto", "vrdma_vm_reliability_lost_rto_total", Kind::kCounter,
     "reliability layer: transmissions whose retransmission timeout expired"},
    {"reliability_counters.rto_undone", "vrdma_vm_reliability_rto_undone_total", Kind::kCounter,
     "reliability layer: retransmission timeouts proven spurious, their reaction undone"},
    {"reliability_counters.late_writes", "vrdma_vm_reliability_late_writes_total",
     Kind::kCounter,
     "reliability layer: WRITE chunks placed after their message was delivered"},
    {"reliability_counters.delivery_holds", "vrdma_vm_reliability_delivery_holds_total",
     Kind::kCounter,
     "reliability layer: repaired messages held for the packet lifetime before delivery"},
    {"reliability_counters.cwnd_resets", "vrdma_vm_reliability_window_resets_total",
     Kind::kCounter, "reliability layer: losses that set the window to its minimum"},
    {"reliability_counters.acks_sent", "vrdma_vm_reliability_acks_sent_total", Kind::kCounter,
     "reliability layer: ACKs sent"},
    {"reliability_counters.acks_received", "vrdma_vm_reliability_acks_received_total",
     Kind::kCounter, "reliability layer: ACKs received and used"},
    {"reliability_counters.messages_completed",
     "vrdma_vm_reliability_messages_completed_total", Kind::kCounter,
     "reliability layer: messages completed with success"},
    {"reliability_counters.messages_failed", "vrdma_vm_reliability_messages_failed_total",
     Kind::kCounter, "reliability layer: messages completed with an error"},
    {"reliability_counters.rc_takeovers", "vrdma_vm_reliability_rc_takeovers_total",
     Kind::kCounter, "reliability layer: backup takeovers (rc mode)"},
    {"reliability_counters.switches_done", "vrdma_vm_reliability_switches_total",
     Kind::kCounter, "reliability layer: QPs switched to another mode live"},
    {"reliability_counters.switches_failed", "vrdma_vm_reliability_switches_failed_total",
     Kind::kCounter, "reliability layer: live switches failed to the guest (the peer stopped)"},
    {"qps_native", "vrdma_vm_qps_native", Kind::kGauge,
     "connected RC QPs in native mode (reliability layer)"},
    {"qps_rc", "vrdma_vm_qps_rc", Kind::kGauge, "connected RC QPs in rc mode (reliability layer)"},
    {"qps_uc", "vrdma_vm_qps_uc", Kind::kGauge, "connected RC QPs in uc mode (reliability layer)"},
    {"qps_switching", "vrdma_vm_qps_switching", Kind::kGauge,
     "connected RC QPs switching mode or waiting for the peer VM's (reliability layer)"},
};

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// A metric or label name from a key of the daemon (policy report keys).
std::string NameFrom(const std::string& key) {
  std::string out;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

// A policy report key as a metric name suffix and the scale to its base
// unit: times in ns/us/ms become seconds (Prometheus' base unit).
std::pair<std::string, double> ReportName(const std::string& key) {
  static const std::pair<const char*, double> kUnits[] = {
      {"_ns", 1e-9}, {"_us", 1e-6}, {"_ms", 1e-3}};
  for (const auto& [suffix, scale] : kUnits) {
    const size_t n = std::char_traits<char>::length(suffix);
    if (key.size() > n && key.compare(key.size() - n, n, suffix) == 0) {
      return {NameFrom(key.substr(0, key.size() - n)) + "_seconds", scale};
    }
  }
  return {NameFrom(key), 1};
}

const json* At(const json& vm, const char* path) {
  const json* j = &vm;
  std::string p = path;
  size_t pos = 0;
  while (true) {
    const size_t dot = p.find('.', pos);
    const std::string key = p.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!j->is_object() || !j->contains(key)) return nullptr;
    j = &(*j)[key];
    if (dot == std::string::npos) return j;
    pos = dot + 1;
  }
}

std::string Number(const json& v, double scale) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (scale == 1 && v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (scale == 1 && v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return fmt::format("{}", v.get<double>() * scale);
}

class Writer {
 public:
  void Family(const std::string& name, const char* type, const std::string& help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void Sample(const std::string& name, const std::string& labels, const std::string& value) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, value)
                           : fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// One family from an object of numbers in each VM's stats (stats key `key`):
// a sample per VM and member, the member's name in label `label`; no family
// when no VM has a numeric member.
void MemberFamily(Writer& w, const json& vms, const char* key, const std::string& name,
                  const char* type, const std::string& help, const char* label) {
  bool family = false;
  for (const json& vm : vms) {
    const json members = vm.value(key, json::object());  // items() must not outlive it
    for (const auto& [member, value] : members.items()) {
      if (!value.is_number()) continue;
      if (!family) {
        w.Family(name, type, help);
        family = true;
      }
      w.Sample(name,
               fmt::format("vm=\"{}\",{}=\"{}\"", Escape(vm.value("name", "")), label,
                           Escape(member)),
               Number(value, 1));
    }
  }
}

int HandleMetrics(mg_connection* conn, void* cbdata) {
  const auto* server = static_cast<const MetricsServer*>(cbdata);
  json stats;
  std::string error;
  std::string body;
  int status = 200;
  if (!ControlRequest(server->control_socket(), json{{"cmd", "stats"}}, &stats, &error,
                      std::chrono::seconds(5)) ||
      !stats.value("ok", false)) {
    status = 503;
    body = "vhost-rdma-daemon stats unavailable: " + (error.empty() ? stats.dump() : error) + "\n";
  } else {
    body = StatsToPrometheus(stats);
  }
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            "Content-Length: %zu\r\nConnection: close\r\n\r\n",
            status, status == 200 ? "OK" : "Service Unavailable", body.size());
  mg_write(conn, body.data(), body.size());
  return status;
}

}  // namespace

std::string StatsToPrometheus(const json& stats) {
  Writer w;
  const json vms = stats.value("vms", json::array());
  const json policy = stats.value("policy", json::object());
  const std::string policy_name = policy.value("name", std::string("?"));
  w.Family("vrdma_policy_info", "gauge", "the scheduler policy in force (label policy)");
  w.Sample("vrdma_policy_info", fmt::format("policy=\"{}\"", Escape(policy_name)), "1");
  for (const auto& [key, value] : policy.items()) {
    if (!value.is_number()) continue;
    const auto [suffix, scale] = ReportName(key);
    const std::string name = "vrdma_policy_" + suffix;
    w.Family(name, "gauge", "the policy's report: " + key);
    w.Sample(name, fmt::format("policy=\"{}\"", Escape(policy_name)), Number(value, scale));
  }
  w.Family("vrdma_vms", "gauge", "VMs attached");
  w.Sample("vrdma_vms", "", std::to_string(vms.size()));
  for (const VmMetric& m : kVmMetrics) {
    bool family = false;
    for (const json& vm : vms) {
      const json* v = At(vm, m.path);
      if (v == nullptr || !(v->is_number() || v->is_boolean())) continue;
      if (!family) {
        w.Family(m.name, m.kind == Kind::kCounter ? "counter" : "gauge", m.help);
        family = true;
      }
      w.Sample(m.name, fmt::format("vm=\"{}\"", Escape(vm.value("name", ""))), Number(*v, m.scale));
    }
  }
  // The reliability layer's daemon-wide counters (stats' "reliability",
  // detached VMs included): the per-VM families' names without "vm_", and
  // the checks of docs/reliability.md §3.6 by name.
  if (const json* layer = At(stats, "reliability"); layer != nullptr) {
    constexpr std::string_view kPrefix = "reliability_counters.";
    for (const VmMetric& m : kVmMetrics) {
      const std::string_view path = m.path;
      if (!path.starts_with(kPrefix)) continue;
      const json* v = At(*layer, std::string(path.substr(kPrefix.size())).c_str());
      if (v == nullptr || !v->is_number()) continue;
      const std::string name = "vrdma_" + std::string(m.name + std::strlen("vrdma_vm_"));
      w.Family(name, m.kind == Kind::kCounter ? "counter" : "gauge",
               std::string(m.help) + " (daemon-wide)");
      w.Sample(name, "", Number(*v, m.scale));
    }
    if (const json* wire = At(*layer, "wire"); wire != nullptr && wire->is_object()) {
      w.Family("vrdma_reliability_wire_checks_total", "counter",
               "reliability layer: packets and ACKs from peers caught by a check of "
               "docs/reliability.md 3.6 (label check)");
      for (const auto& [check, n] : wire->items()) {
        if (n.is_number()) {
          w.Sample("vrdma_reliability_wire_checks_total",
                   fmt::format("check=\"{}\"", Escape(check)), Number(n, 1));
        }
      }
    }
  }
  // Completions by status (cqes_by_status: a name per IB_WC_* status).
  MemberFamily(w, vms, "cqes_by_status", "vrdma_vm_completions_total", "counter",
               "completions written to the guest, by status (label status)", "status");
  // The completion-latency histogram (scheduler.latency_hist: bucket i
  // below 2^i us, the last unbounded), cumulative as Prometheus wants.
  bool hist_family = false;
  for (const json& vm : vms) {
    const json* h = At(vm, "scheduler.latency_hist");
    const json* sum = At(vm, "scheduler.latency_sum_ns");
    if (h == nullptr || !h->is_array() || h->empty() || sum == nullptr) continue;
    if (!hist_family) {
      w.Family("vrdma_vm_completion_latency_seconds", "histogram",
               "work requests by completion latency (arrival in the daemon to completion)");
      hist_family = true;
    }
    const std::string vm_label = fmt::format("vm=\"{}\"", Escape(vm.value("name", "")));
    uint64_t cum = 0;
    for (size_t i = 0; i < h->size(); ++i) {
      const json& n = (*h)[i];
      cum += n.is_number_integer() && n.get<int64_t>() > 0 ? n.get<uint64_t>() : 0;
      const std::string le =
          i + 1 < h->size() ? fmt::format("{}", static_cast<double>(uint64_t{1} << i) * 1e-6)
                            : "+Inf";
      w.Sample("vrdma_vm_completion_latency_seconds_bucket",
               fmt::format("{},le=\"{}\"", vm_label, le), std::to_string(cum));
    }
    w.Sample("vrdma_vm_completion_latency_seconds_sum", vm_label, Number(*sum, 1e-9));
    w.Sample("vrdma_vm_completion_latency_seconds_count", vm_label, std::to_string(cum));
  }
  // QoS as asked and as the policy applies it: one sample per numeric field.
  MemberFamily(w, vms, "qos", "vrdma_vm_qos", "gauge", "the VM's QoS as asked, per field",
               "field");
  MemberFamily(w, vms, "effective_qos", "vrdma_vm_effective_qos", "gauge",
               "the VM's QoS as the policy applies it, per field", "field");
  // The policy's per-VM report (numbers only), one family per key.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> per_key;
  for (const json& vm : vms) {
    const json report = vm.value("policy", json::object());
    for (const auto& [key, value] : report.items()) {
      if (value.is_number()) {
        per_key[key].emplace_back(vm.value("name", ""), Number(value, ReportName(key).second));
      }
    }
  }
  for (const auto& [key, samples] : per_key) {
    const std::string name = "vrdma_vm_policy_" + ReportName(key).first;
    w.Family(name, "gauge", "the policy's report for the VM: " + key);
    for (const auto& [vm, value] : samples) {
      w.Sample(name, fmt::format("vm=\"{}\",policy=\"{}\"", Escape(vm), Escape(policy_name)),
               value);
    }
  }
  return w.Take();
}

std::unique_ptr<MetricsServer> MetricsServer::Start(const std::string& address,
                                                    const std::string& control_socket) {
  mg_init_library(0);
  std::unique_ptr<MetricsServer> s(new MetricsServer(control_socket));
  const char* options[] = {"listening_ports", address.c_str(), "num_threads", "2", nullptr};
  mg_callbacks callbacks{};
  s->ctx_ = mg_start(&callbacks, nullptr, options);
  if (s->ctx_ == nullptr) {
    spdlog::error("metrics: cannot listen on {}", address);
    return nullptr;
  }
  mg_set_request_handler(s->ctx_, "/metrics$", HandleMetrics, s.get());
  spdlog::info("metrics: http://{}/metrics", address);
  return s;
}

MetricsServer::~MetricsServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

}  // namespace vrdma::daemon
