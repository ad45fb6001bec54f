// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/ctl_view.h"

#include <fmt/format.h>

#include <ctime>
#include <utility>
#include <vector>

namespace vrdma::daemon {
namespace {

using nlohmann::json;

std::string Scalar(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump();
}

// Bytes and bit rates in units a person reads at a glance.
std::string Si(double v, const char* unit) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f}{}", v, unit) : fmt::format("{:.3g}{}{}", v, kPrefix[i], unit);
}

void Flatten(const json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>* out) {
  for (const auto& [k, v] : j.items()) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object() && !v.empty()) {
      Flatten(v, key, out);
    } else {
      out->emplace_back(key, v.is_object() ? "{}" : Scalar(v));
    }
  }
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += i + 1 < r.size() ? fmt::format("{:<{}}  ", r[i], width[i]) : r[i];
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

json FindVmStats(const json& stats, const std::string& name) {
  for (const json& vm : stats.value("vms", json::array())) {
    if (vm.value("name", "") == name) return vm;
  }
  return json();
}

std::string VmsTable(const json& stats) {
  std::vector<std::vector<std::string>> rows{{"NAME", "CONNECTED", "QPS", "MRS", "PINNED",
                                              "POSTED", "COMPLETED", "WEIGHT", "CAP",
                                              "QOS REFUSED"}};
  for (const json& vm : stats.value("vms", json::array())) {
    const json& s = vm.value("scheduler", json::object());
    const json& q = vm.value("qos", json::object());
    const uint64_t cap = q.value("max_rate_bps", uint64_t{0});
    rows.push_back({vm.value("name", "?"), vm.value("connected", false) ? "yes" : "no",
                    Scalar(vm.value("qps", json())), Scalar(vm.value("mrs", json())),
                    Si(vm.value("pinned_bytes", 0.0), "B"), Si(s.value("bytes_posted", 0.0), "B"),
                    Si(s.value("bytes_completed", 0.0), "B"), Scalar(q.value("weight", json())),
                    cap ? Si(static_cast<double>(cap), "b/s") : "-",
                    Scalar(vm.value("qos_rejections", json()))});
  }
  return Table(rows);
}

std::string VmStatsText(const json& vm) {
  std::vector<std::pair<std::string, std::string>> kv;
  Flatten(vm, "", &kv);
  std::vector<std::vector<std::string>> rows;
  for (auto& [k, v] : kv) rows.push_back({k, v});
  return Table(rows);
}

std::string QosText(const json& vm, const std::string& policy) {
  const json& asked = vm.value("qos", json::object());
  const json& effective = vm.value("effective_qos", json::object());
  std::vector<std::vector<std::string>> rows{{"FIELD", "ASKED", "IN FORCE (policy)"}};
  for (const auto& [k, v] : asked.items()) {
    rows.push_back({k, Scalar(v), effective.contains(k) ? Scalar(effective[k]) : "-"});
  }
  std::string out = Table(rows);
  out += fmt::format("policy {} applies the fields shown under IN FORCE; '-' it does not "
                     "enforce\n",
                     policy);
  const json& c = vm.value("qos_change", json::object());
  if (!c.empty()) {
    const std::time_t t = c.value("unix_ms", int64_t{0}) / 1000;
    char when[32] = "?";
    std::tm tm{};
    if (gmtime_r(&t, &tm) != nullptr) std::strftime(when, sizeof(when), "%F %T UTC", &tm);
    out += fmt::format("last change: {} from {}: {}{}\n", when, c.value("source", "?"),
                       c.value("ok", false) ? "in force" : "REFUSED, ",
                       c.value("ok", false) ? "" : c.value("error", ""));
    if (!c.value("ok", false)) out += fmt::format("  asked: {}\n", c.value("asked", json()).dump());
  }
  out += fmt::format("refused so far: {}\n", Scalar(vm.value("qos_rejections", json(0))));
  return out;
}

// The upper bound (us) of the bucket holding quantile q of the WRs the
// interval completed (scheduler.latency_hist: bucket i below 2^i us); null
// when none completed, "inf" beyond the last bound.
json Percentile(const json& h_now, const json& h_prev, double q) {
  if (!h_now.is_array()) return json();
  std::vector<double> d(h_now.size(), 0);
  double total = 0;
  for (size_t i = 0; i < h_now.size(); ++i) {
    const double before = h_prev.is_array() && i < h_prev.size() ? h_prev[i].get<double>() : 0;
    d[i] = std::max(0.0, h_now[i].get<double>() - before);
    total += d[i];
  }
  if (total <= 0) return json();
  double cum = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    cum += d[i];
    if (cum >= q * total) {
      return i + 1 < d.size() ? json(static_cast<double>(uint64_t{1} << i)) : json("inf");
    }
  }
  return json("inf");
}

json TopRates(const json& prev, const json& cur, double dt_s) {
  json vms = json::array();
  for (const json& vm : cur.value("vms", json::array())) {
    const std::string name = vm.value("name", "");
    const json before = FindVmStats(prev, name);
    const json s = vm.value("scheduler", json::object());
    const json p = before.is_object() ? before.value("scheduler", json::object()) : json::object();
    auto delta = [&](const char* k) {
      const double d = s.value(k, 0.0) - p.value(k, 0.0);
      return d > 0 ? d : 0.0;  // a VM that reconnected starts from zero
    };
    const double wrs = delta("wrs_completed");
    // The interval's mean latency, from the running mean and count.
    const double sum_now = s.value("latency_avg_ns", 0.0) * s.value("wrs_completed", 0.0);
    const double sum_prev = p.value("latency_avg_ns", 0.0) * p.value("wrs_completed", 0.0);
    json r{{"name", name},
           {"connected", vm.value("connected", false)},
           {"wrs_per_s", dt_s > 0 ? wrs / dt_s : 0},
           {"gbps", dt_s > 0 ? delta("bytes_completed") * 8 / dt_s / 1e9 : 0},
           {"latency_avg_us", wrs > 0 ? (sum_now - sum_prev) / wrs / 1e3 : 0},
           {"latency_max_us", s.value("latency_max_ns", 0.0) / 1e3},
           // Bucket bounds: "p99 <= 64 us" (docs/operators.md, top).
           {"latency_p50_le_us", Percentile(s.value("latency_hist", json()),
                                            p.value("latency_hist", json()), 0.50)},
           {"latency_p99_le_us", Percentile(s.value("latency_hist", json()),
                                            p.value("latency_hist", json()), 0.99)},
           {"held_fraction", dt_s > 0 ? delta("held_ns") / 1e9 / dt_s : 0},
           {"paced_gbps", dt_s > 0 ? delta("bytes_paced") * 8 / dt_s / 1e9 : 0},
           {"queued_wrs", s.value("queued_wrs", 0)},
           {"cap_gbps", vm.value("qos", json::object()).value("max_rate_bps", 0.0) / 1e9}};
    vms.push_back(std::move(r));
  }
  return json{{"interval_s", dt_s}, {"vms", vms}};
}

std::string TopTable(const json& rates) {
  std::vector<std::vector<std::string>> rows{{"NAME", "WR/s", "Gb/s", "CAP", "LAT avg us",
                                              "p50<= us", "p99<= us", "LAT max us", "HELD",
                                              "PACED Gb/s", "QUEUED"}};
  for (const json& r : rates.value("vms", json::array())) {
    const double cap = r.value("cap_gbps", 0.0);
    rows.push_back({r.value("name", "?") + (r.value("connected", false) ? "" : " (down)"),
                    fmt::format("{:.0f}", r.value("wrs_per_s", 0.0)),
                    fmt::format("{:.3f}", r.value("gbps", 0.0)),
                    cap > 0 ? fmt::format("{:.3f}", cap) : "-",
                    fmt::format("{:.1f}", r.value("latency_avg_us", 0.0)),
                    Scalar(r.value("latency_p50_le_us", json())),
                    Scalar(r.value("latency_p99_le_us", json())),
                    fmt::format("{:.1f}", r.value("latency_max_us", 0.0)),
                    fmt::format("{:.0f}%", 100 * r.value("held_fraction", 0.0)),
                    fmt::format("{:.3f}", r.value("paced_gbps", 0.0)),
                    Scalar(r.value("queued_wrs", json()))});
  }
  return Table(rows);
}

}  // namespace vrdma::daemon
