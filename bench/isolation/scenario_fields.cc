// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/scenario_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "bench/isolation/scenario_vars.h"
#include "policy/policy_registry.h"

namespace vrdma::bench::internal {

namespace {

const std::vector<std::string> kScenarioKeys = {
    "name", "group",  "paper", "card",  "hosts",   "duration_us", "warmup_us",
    "seed", "fabric", "vars",  "sweep", "tenants", "expect", "adaptive_signaling",
    "in_all", "packet_lifetime_us"};
const std::vector<std::string> kFabricKeys = {
    "link_propagation_ns", "switch_latency_ns", "switch_buffer_bytes",
    "ecn_threshold_bytes", "random_loss",       "lossless",
    "pfc_xoff_bytes",      "pfc_xon_bytes"};
const std::vector<std::string> kQpKeys = {"type", "count", "processes"};
const std::vector<std::string> kMrKeys = {"count", "size", "page_size"};
const std::vector<std::string> kExpectKeys = {"tenant", "metric", "ratio",
                                              "le",     "ge",     "policy"};
const std::vector<std::string> kOpNames = {
    "write", "write_imm", "send", "send_imm", "read", "cas", "faa"};
const std::vector<std::string> kTransportNames = {"rc", "uc", "ud"};
const std::vector<std::string> kModeNames = {"latency", "bandwidth"};
const std::vector<std::string> kReliabilityNames = {"native", "uc"};
const std::vector<std::string> kClassNames = {"bandwidth", "throughput",
                                              "latency"};
const std::vector<std::string> kMetricNames = {"gbps", "mmps", "avg_us",
                                               "p50_us", "p99_us"};
const std::vector<std::string> kRatioNames = {"none", "with/alone",
                                              "alone/with"};

constexpr uint64_t kMaxMessage = 1ull << 31;
constexpr uint32_t kUdMtu = 4096;

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

const char* KindOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "map";
    case YAML::NodeType::Sequence:
      return "list";
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return "scalar";
  }
}

// "1048576", "1MiB", "64KiB", "1GiB".
bool ParseSize(const std::string& t, uint64_t* out) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p == t.data()) return false;
  const std::string unit(p, t.data() + t.size());
  uint64_t mul = 1;
  if (unit == "KiB")
    mul = 1ull << 10;
  else if (unit == "MiB")
    mul = 1ull << 20;
  else if (unit == "GiB")
    mul = 1ull << 30;
  else if (!unit.empty())
    return false;
  if (v > UINT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

bool IsPlainName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("_.@+-").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace

int LineOf(const YAML::Node& n) {
  if (!n.IsDefined()) return 0;
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 0 : m.line + 1;
}

const std::vector<std::string>& TenantKeys() {
  static const std::vector<std::string> keys = {
      "name",     "shape",    "count",         "qps",      "ops",
      "size",     "batch",    "inline",        "mode",     "depth",
      "mrs",      "rate",     "turnaround_ns", "start_us", "stop_us",
      "src_host", "dst_host", "weight",        "class",    "recv_depth",
      "rnr_retry", "rnr_timer", "retry_cnt", "timeout", "max_gbps",
      "max_mmps", "min_gbps", "latency_target_us", "reliability"};
  return keys;
}

void ErrorSink::Add(const std::string& file, const YAML::Node& at,
                    const std::string& label, const std::string& path,
                    const std::string& message) {
  const int line = LineOf(at);
  const std::string where = line > 0 ? fmt::format("{}:{}", file, line) : file;
  const std::string key = where + ": " + path + ": " + message;
  if (!seen_.insert(key).second) return;
  out_.push_back(fmt::format("{}: {}{}{}{}", where, label,
                             label.empty() ? "" : ": ", path,
                             (path.empty() ? "" : ": ") + message));
}

std::string ScenarioReader::Where(const YAML::Node& n) const {
  return fmt::format("{}:{}", file_, LineOf(n));
}

bool ScenarioReader::CheckKeys(const YAML::Node& n, const std::string& path,
                               const std::vector<std::string>& allowed) {
  if (!n.IsMap()) {
    Error(n, path, fmt::format("expected a map, got a {}", KindOf(n)));
    return false;
  }
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
    const std::string at = path.empty() ? key : path + "." + key;
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      Error(it->first, at,
            fmt::format("unknown key (expected one of {})", Join(allowed)));
    } else if (!seen.insert(key).second) {
      Error(it->first, at, "given twice");
    }
  }
  return true;
}

bool ScenarioReader::Text(const YAML::Node& n, const std::string& path,
                          std::string* out) {
  if (!n.IsScalar()) {
    Error(n, path,
          fmt::format("expected a scalar, got {}",
                      n.IsNull() ? "nothing" : std::string("a ") + KindOf(n)));
    return false;
  }
  std::string err;
  const VarLookup vars = [this](const std::string& name, std::string* value) {
    if (name == "i" && replica_) {
      *value = std::to_string(*replica_);
      return true;
    }
    auto it = env_.find(name);
    if (it == env_.end()) return false;
    *value = it->second;
    return true;
  };
  if (!SubstituteVars(n.Scalar(), vars, out, &err)) {
    if (err.starts_with("undefined variable i") && err.size() == 20 &&
        !replica_) {
      err = "$i (the replica's index) is only defined in a tenant";
    }
    Error(n, path, err);
    return false;
  }
  return true;
}

bool ScenarioReader::Name(const YAML::Node& n, const std::string& path,
                          std::string* out) {
  if (!Text(n, path, out)) return false;
  if (!IsPlainName(*out)) {
    Error(
        n, path,
        fmt::format("\"{}\" is not a name (letters, digits, _ . @ + -)", *out));
    return false;
  }
  return true;
}

bool ScenarioReader::Uint(const YAML::Node& n, const std::string& path,
                          uint64_t min, uint64_t max, bool size,
                          uint64_t* out) {
  std::string t;
  if (!Text(n, path, &t)) return false;
  uint64_t v = 0;
  bool parsed;
  if (size) {
    parsed = ParseSize(t, &v);
  } else {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    parsed = ec == std::errc() && p == t.data() + t.size() && !t.empty();
  }
  if (!parsed) {
    Error(n, path,
          fmt::format("expected {}, got \"{}\"",
                      size ? "a size (bytes, or a number with KiB, MiB or GiB)"
                           : "a whole number",
                      t));
    return false;
  }
  if (v < min || v > max) {
    Error(n, path,
          fmt::format("must be between {} and {}, got {}", min, max, v));
    return false;
  }
  *out = v;
  return true;
}

bool ScenarioReader::Real(const YAML::Node& n, const std::string& path,
                          double min, double max, double* out) {
  std::string t;
  if (!Text(n, path, &t)) return false;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) {
    Error(n, path, fmt::format("expected a number, got \"{}\"", t));
    return false;
  }
  if (v < min || v > max) {
    Error(n, path,
          fmt::format("must be between {} and {}, got {}", min, max, t));
    return false;
  }
  *out = v;
  return true;
}

bool ScenarioReader::Flag(const YAML::Node& n, const std::string& path,
                          bool* out) {
  std::string t;
  if (!Text(n, path, &t)) return false;
  if (t != "true" && t != "false") {
    Error(n, path, fmt::format("expected true or false, got \"{}\"", t));
    return false;
  }
  *out = t == "true";
  return true;
}

bool ScenarioReader::Choice(const YAML::Node& n, const std::string& path,
                            const std::vector<std::string>& names,
                            size_t* out) {
  std::string t;
  if (!Text(n, path, &t)) return false;
  auto it = std::find(names.begin(), names.end(), t);
  if (it == names.end()) {
    Error(n, path,
          fmt::format("expected one of {}, got \"{}\"", Join(names), t));
    return false;
  }
  *out = static_cast<size_t>(it - names.begin());
  return true;
}

std::optional<ScenarioSpec> ScenarioReader::Read(
    const YAML::Node& n, const std::map<std::string, std::string>& env,
    const std::string& label) {
  env_ = env;
  label_ = label;
  ok_ = true;
  replica_.reset();
  bases_.clear();
  ScenarioSpec s;
  s.source = Where(n);
  if (!CheckKeys(n, "", kScenarioKeys)) return std::nullopt;
  if (!n["name"]) {
    Error(n, "name", "missing (every scenario needs a name)");
  } else {
    Name(n["name"], "name", &s.name);
  }
  s.group = "custom";
  if (n["group"]) Name(n["group"], "group", &s.group);
  if (n["paper"]) Text(n["paper"], "paper", &s.paper);
  if (n["card"]) {
    size_t k = 0;
    const std::vector<std::string> presets = model::PresetNames();
    if (Choice(n["card"], "card", presets, &k)) s.preset = presets[k];
  }
  OptUint(n["hosts"], "hosts", 1, 4096, &s.num_hosts);
  OptReal(n["duration_us"], "duration_us", 1e-3, 1e9, &s.duration_us);
  // Default warm-up: 10 % of the run, excluded from the statistics.
  s.warmup_us = s.duration_us * 0.1;
  if (n["warmup_us"] &&
      Real(n["warmup_us"], "warmup_us", 0, 1e9, &s.warmup_us) &&
      s.warmup_us >= s.duration_us) {
    Error(n["warmup_us"], "warmup_us",
          fmt::format("must be below duration_us ({})", s.duration_us));
  }
  OptUint(n["seed"], "seed", 0, UINT64_MAX, &s.seed);
  if (n["in_all"]) Flag(n["in_all"], "in_all", &s.in_all);
  if (n["adaptive_signaling"]) {
    Flag(n["adaptive_signaling"], "adaptive_signaling", &s.adaptive_signaling);
  }
  if (n["packet_lifetime_us"]) {
    Real(n["packet_lifetime_us"], "packet_lifetime_us", 0, 1e7, &s.packet_lifetime_us);
  }
  if (n["fabric"]) ReadFabric(n["fabric"], &s.fabric);
  if (!n["tenants"]) {
    Error(n, "tenants", "missing (a scenario needs at least one tenant)");
  } else {
    ReadTenants(n["tenants"], &s);
  }
  if (n["expect"] && ok_) ReadExpect(n["expect"], &s);
  if (!ok_) return std::nullopt;
  return s;
}

void ScenarioReader::ReadFabric(const YAML::Node& n, model::FabricParams* f) {
  if (!CheckKeys(n, "fabric", kFabricKeys)) return;
  double ns = 0;
  if (n["link_propagation_ns"] &&
      Real(n["link_propagation_ns"], "fabric.link_propagation_ns", 0, 1e9,
           &ns)) {
    f->link_propagation_ps = model::NsToPs(ns);
  }
  if (n["switch_latency_ns"] &&
      Real(n["switch_latency_ns"], "fabric.switch_latency_ns", 0, 1e9, &ns)) {
    f->switch_latency_ps = model::NsToPs(ns);
  }
  OptUint(n["switch_buffer_bytes"], "fabric.switch_buffer_bytes", 1, 1ull << 40,
          &f->switch_buffer_bytes, true);
  OptUint(n["ecn_threshold_bytes"], "fabric.ecn_threshold_bytes", 0, 1ull << 40,
          &f->ecn_threshold_bytes, true);
  OptReal(n["random_loss"], "fabric.random_loss", 0, 1, &f->random_loss);
  if (n["lossless"]) Flag(n["lossless"], "fabric.lossless", &f->lossless);
  OptUint(n["pfc_xoff_bytes"], "fabric.pfc_xoff_bytes", 1, 1ull << 40,
          &f->pfc_xoff_bytes, true);
  OptUint(n["pfc_xon_bytes"], "fabric.pfc_xon_bytes", 0, 1ull << 40,
          &f->pfc_xon_bytes, true);
  if (f->pfc_xon_bytes > f->pfc_xoff_bytes) {
    Error(n, "fabric.pfc_xon_bytes",
          fmt::format("must not exceed pfc_xoff_bytes ({} > {})",
                      f->pfc_xon_bytes, f->pfc_xoff_bytes));
  }
}

void ScenarioReader::ReadTenants(const YAML::Node& list, ScenarioSpec* s) {
  if (!list.IsSequence() || list.size() == 0) {
    Error(list, "tenants", "expected a list of at least one tenant");
    return;
  }
  std::map<std::string, std::string> names;  // name -> path
  for (size_t k = 0; k < list.size(); ++k) {
    const YAML::Node& tn = list[k];
    const std::string path = fmt::format("tenants[{}]", k);
    if (!CheckKeys(tn, path, TenantKeys())) continue;
    View v{tn, YAML::Node(YAML::NodeType::Undefined)};
    if (tn["shape"]) {
      std::string shape;
      if (Text(tn["shape"], path + ".shape", &shape)) {
        auto it = shapes_.find(shape);
        if (it == shapes_.end()) {
          std::vector<std::string> known;
          for (const auto& [name, node] : shapes_) known.push_back(name);
          Error(tn["shape"], path + ".shape",
                fmt::format("no shape \"{}\" in this file (shapes: {})", shape,
                            known.empty() ? "none" : Join(known)));
          continue;
        }
        v.shape = it->second;
      }
    }
    std::string base;  // the name as written, without $i
    if (v["name"] && v["name"].IsScalar()) {
      base = v["name"].Scalar();
      for (const std::string ref : {"${i}", "$i"}) {
        for (size_t at; (at = base.find(ref)) != std::string::npos;)
          base.erase(at, ref.size());
      }
    }
    uint32_t count = 1;
    OptUint(v["count"], path + ".count", 1, 100000, &count);
    if (!v["name"]) {
      Error(tn, path + ".name", "missing (every tenant needs a name)");
      continue;
    }
    for (uint32_t r = 0; r < count; ++r) {
      replica_ = r;
      TenantSpec t;
      t.source = Where(tn);
      t.path = path;
      ReadTenant(v, path, s->num_hosts, &t);
      replica_.reset();
      if (t.name.empty()) break;  // the name did not read: said once
      auto [it, fresh] = names.emplace(t.name, path);
      if (!fresh) {
        Error(v["name"], path + ".name",
              fmt::format(
                  "tenant name \"{}\" is also {}'s{}", t.name, it->second,
                  count > 1 ? " (a tenant with count > 1 needs $i in its name)"
                            : ""));
        break;
      }
      s->tenants.push_back(std::move(t));
      bases_.push_back(base);
      if (s->tenants.size() > 100000) {
        Error(tn, path + ".count", "more than 100000 tenants in one scenario");
        return;
      }
    }
  }
}

void ScenarioReader::ReadTenant(const View& v, const std::string& path,
                                uint32_t hosts, TenantSpec* t) {
  if (!Name(v["name"], path + ".name", &t->name)) t->name.clear();
  if (v["qps"]) ReadQps(v["qps"], path + ".qps", t);
  if (v["ops"]) ReadOps(v["ops"], path + ".ops", t);
  if (v["size"]) ReadSizes(v["size"], path + ".size", t);
  if (v["mode"]) {
    size_t k = 0;
    if (Choice(v["mode"], path + ".mode", kModeNames, &k)) {
      t->mode = k == 0 ? Mode::kLatency : Mode::kBandwidth;
    }
  }
  OptUint(v["batch"], path + ".batch", 1, 4096, &t->batch);
  OptUint(v["depth"], path + ".depth", 1, 65536, &t->tx_depth);
  if (v["inline"]) Flag(v["inline"], path + ".inline", &t->inline_data);
  if (v["mrs"]) ReadMrs(v["mrs"], path + ".mrs", t);
  if (v["rate"]) {
    std::string r;
    const YAML::Node n = v["rate"];
    if (n.IsScalar() && Text(n, path + ".rate", &r) && r != "closed") {
      Real(n, path + ".rate", 1, 1e10, &t->rate_mps);
    } else if (!n.IsScalar()) {
      Text(n, path + ".rate", &r);  // says what it expected
    }
  }
  OptReal(v["turnaround_ns"], path + ".turnaround_ns", 0, 1e9,
          &t->turnaround_ns);
  OptReal(v["start_us"], path + ".start_us", 0, 1e9, &t->start_us);
  if (v["stop_us"] &&
      Real(v["stop_us"], path + ".stop_us", 0, 1e18, &t->stop_us) &&
      t->stop_us <= t->start_us) {
    Error(v["stop_us"], path + ".stop_us",
          fmt::format("must be after start_us ({})", t->start_us));
  }
  OptUint(v["src_host"], path + ".src_host", 0, hosts - 1, &t->src_host);
  OptUint(v["dst_host"], path + ".dst_host", 0, hosts - 1, &t->dst_host);
  OptUint(v["weight"], path + ".weight", 1, 1000000, &t->weight);
  if (v["max_gbps"]) Real(v["max_gbps"], path + ".max_gbps", 0.001, 1e6, &t->max_gbps);
  if (v["max_mmps"]) Real(v["max_mmps"], path + ".max_mmps", 0.000001, 1e6, &t->max_mmps);
  if (v["min_gbps"]) Real(v["min_gbps"], path + ".min_gbps", 0.001, 1e6, &t->min_gbps);
  if (v["latency_target_us"]) {
    Real(v["latency_target_us"], path + ".latency_target_us", 0.001, 1e9, &t->latency_target_us);
  }
  uint64_t u = 0;
  if (v["recv_depth"] && Uint(v["recv_depth"], path + ".recv_depth", 0, 1u << 20, false, &u))
    t->recv_depth = static_cast<uint32_t>(u);
  if (v["rnr_retry"] && Uint(v["rnr_retry"], path + ".rnr_retry", 0, 7, false, &u))
    t->rnr_retry = static_cast<uint8_t>(u);
  if (v["retry_cnt"] && Uint(v["retry_cnt"], path + ".retry_cnt", 0, 7, false, &u))
    t->retry_cnt = static_cast<uint8_t>(u);
  if (v["rnr_timer"] && Uint(v["rnr_timer"], path + ".rnr_timer", 0, 31, false, &u))
    t->rnr_timer = static_cast<uint8_t>(u);
  if (v["timeout"] && Uint(v["timeout"], path + ".timeout", 0, 31, false, &u))
    t->timeout = static_cast<uint8_t>(u);
  if (v["class"]) {
    size_t k = 0;
    if (Choice(v["class"], path + ".class", kClassNames, &k)) {
      t->app_class = static_cast<policy::TenantClass>(k);
    }
  }
  if (v["reliability"]) {
    size_t k = 0;
    if (Choice(v["reliability"], path + ".reliability", kReliabilityNames, &k)) {
      t->reliability = static_cast<Reliability>(k);
    }
  }
  CheckTenant(v, path, *t);
}

void ScenarioReader::ReadQps(const YAML::Node& n, const std::string& path,
                             TenantSpec* t) {
  if (!CheckKeys(n, path, kQpKeys)) return;
  if (n["type"]) {
    size_t k = 0;
    if (Choice(n["type"], path + ".type", kTransportNames, &k)) {
      t->transport = static_cast<Transport>(k);
    }
  }
  OptUint(n["count"], path + ".count", 1, 1024, &t->qps_per_process);
  OptUint(n["processes"], path + ".processes", 1, 1024, &t->processes);
}

void ScenarioReader::ReadOps(const YAML::Node& n, const std::string& path,
                             TenantSpec* t) {
  t->ops.clear();
  if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      OpShare o;
      size_t k = 0;
      if (!Choice(it->first, path, kOpNames, &k)) continue;
      o.op = static_cast<OpKind>(k);
      OptUint(it->second, path + "." + kOpNames[k], 1, 1000000, &o.weight);
      for (const OpShare& p : t->ops) {
        if (p.op == o.op)
          Error(it->first, path + "." + kOpNames[k], "given twice");
      }
      t->ops.push_back(o);
    }
  } else {
    size_t k = 0;
    if (Choice(n, path, kOpNames, &k))
      t->ops.push_back({static_cast<OpKind>(k), 1});
  }
  if (t->ops.empty()) {
    if (n.IsMap()) Error(n, path, "expected an op or a map of ops to weights");
    t->ops.push_back(OpShare{});
  }
}

void ScenarioReader::ReadSizes(const YAML::Node& n, const std::string& path,
                               TenantSpec* t) {
  t->sizes.clear();
  if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      SizeShare z;
      uint64_t bytes = 0;
      if (!Uint(it->first, path, 1, kMaxMessage, true, &bytes)) continue;
      z.bytes = static_cast<uint32_t>(bytes);
      OptUint(it->second, fmt::format("{}.{}", path, it->first.Scalar()), 1,
              1000000, &z.weight);
      t->sizes.push_back(z);
    }
  } else {
    uint64_t bytes = 0;
    if (Uint(n, path, 1, kMaxMessage, true, &bytes))
      t->sizes.push_back({static_cast<uint32_t>(bytes), 1});
  }
  if (t->sizes.empty()) {
    if (n.IsMap())
      Error(n, path, "expected a size or a map of sizes to weights");
    t->sizes.push_back(SizeShare{});
  }
}

void ScenarioReader::ReadMrs(const YAML::Node& n, const std::string& path,
                             TenantSpec* t) {
  if (!CheckKeys(n, path, kMrKeys)) return;
  if (!n["count"] || !n["size"]) {
    Error(n, path, "needs count and size");
    return;
  }
  OptUint(n["count"], path + ".count", 1, 1u << 20, &t->mrs.count);
  OptUint(n["size"], path + ".size", 1, 1ull << 40, &t->mrs.bytes, true);
  if (n["page_size"]) {
    uint64_t page = 0;
    if (Uint(n["page_size"], path + ".page_size", 4096, 1ull << 30, true,
             &page)) {
      if ((page & (page - 1)) != 0) {
        Error(n["page_size"], path + ".page_size",
              fmt::format("must be a power of two, got {}", page));
      }
      t->mrs.page_bytes = page;
    }
  }
}

// Rules between fields (RDMA's, not the model's: those are CheckRunnable's).
void ScenarioReader::CheckTenant(const View& v, const std::string& path,
                                 const TenantSpec& t) {
  for (const OpShare& o : t.ops) {
    const std::string op = kOpNames[static_cast<size_t>(o.op)];
    const bool atomic = o.op == OpKind::kCas || o.op == OpKind::kFaa;
    const bool send = o.op == OpKind::kSend || o.op == OpKind::kSendImm;
    if (t.transport == Transport::kUc && (atomic || o.op == OpKind::kRead)) {
      Error(v["qps"], path + ".qps.type",
            fmt::format("a uc QP cannot carry {} (only write and send)", op));
    }
    if (t.transport == Transport::kUd && !send) {
      Error(v["qps"], path + ".qps.type",
            fmt::format("a ud QP cannot carry {} (only send)", op));
    }
  }
  if (t.transport == Transport::kUd) {
    for (const SizeShare& z : t.sizes) {
      if (z.bytes > kUdMtu) {
        Error(v["size"], path + ".size",
              fmt::format("a ud message fits one MTU ({} bytes), got {}",
                          kUdMtu, z.bytes));
      }
    }
  }
  if (v["recv_depth"]) {
    bool receives = false;
    for (const OpShare& o : t.ops) receives = receives || ConsumesReceive(o.op);
    if (!receives) {
      Error(v["recv_depth"], path + ".recv_depth",
            "the tenant's ops consume no receive (only send, send_imm and write_imm do)");
    }
  }
  if (t.transport != Transport::kRc) {
    for (const char* key : {"rnr_retry", "rnr_timer", "retry_cnt", "timeout"}) {
      if (v[key]) {
        Error(v[key], path + "." + key,
              fmt::format("only an rc QP retries (qps.type is {})",
                          kTransportNames[static_cast<size_t>(t.transport)]));
      }
    }
  }
  if (t.mode == Mode::kLatency) {
    if (v["batch"] && t.batch != 1) {
      Error(v["batch"], path + ".batch",
            "latency mode keeps one message in flight: batch must be 1");
    }
    if (v["depth"]) {
      Error(v["depth"], path + ".depth",
            "latency mode keeps one message in flight: no depth");
    }
  }
}

void ScenarioReader::ReadExpect(const YAML::Node& list, ScenarioSpec* s) {
  if (!list.IsSequence()) {
    Error(list, "expect",
          fmt::format("expected a list of rules, got a {}", KindOf(list)));
    return;
  }
  const std::vector<std::string> policies = policy::PolicyNames();
  for (size_t k = 0; k < list.size(); ++k) {
    const YAML::Node& n = list[k];
    const std::string path = fmt::format("expect[{}]", k);
    if (!CheckKeys(n, path, kExpectKeys)) continue;
    ExpectRule r;
    r.source = Where(n);
    if (!n["tenant"] || !n["metric"]) {
      Error(n, path, "needs tenant and metric");
      continue;
    }
    if (!Text(n["tenant"], path + ".tenant", &r.tenant)) continue;
    for (size_t i = 0; i < s->tenants.size(); ++i) {
      // A tenant by its name, or every replica of an entry by its name
      // written without $i ("B" for "B$i").
      if (s->tenants[i].name == r.tenant || bases_[i] == r.tenant)
        r.tenants.push_back(i);
    }
    if (r.tenants.empty()) {
      std::vector<std::string> names;
      for (const TenantSpec& t : s->tenants) {
        if (names.size() == 8) {
          names.push_back("...");
          break;
        }
        names.push_back(t.name);
      }
      Error(n["tenant"], path + ".tenant",
            fmt::format("no tenant \"{}\" in this scenario (tenants: {})",
                        r.tenant, Join(names)));
    }
    size_t k2 = 0;
    if (Choice(n["metric"], path + ".metric", kMetricNames, &k2))
      r.metric = static_cast<Metric>(k2);
    if (n["ratio"] && Choice(n["ratio"], path + ".ratio", kRatioNames, &k2)) {
      r.ratio = static_cast<RatioKind>(k2);
    }
    double bound = 0;
    if (n["le"] && Real(n["le"], path + ".le", -1e18, 1e18, &bound))
      r.le = bound;
    if (n["ge"] && Real(n["ge"], path + ".ge", -1e18, 1e18, &bound))
      r.ge = bound;
    if (!n["le"] && !n["ge"]) Error(n, path, "needs le or ge (or both)");
    if (r.le && r.ge && *r.ge > *r.le) {
      Error(n["ge"], path + ".ge",
            fmt::format("ge ({}) is above le ({}): no figure passes", *r.ge,
                        *r.le));
    }
    if (n["policy"]) {
      const YAML::Node p = n["policy"];
      std::vector<YAML::Node> items;
      if (p.IsSequence()) {
        for (size_t j = 0; j < p.size(); ++j) items.push_back(p[j]);
      } else {
        items.push_back(p);
      }
      for (const YAML::Node& item : items) {
        if (Choice(item, path + ".policy", policies, &k2))
          r.policies.push_back(policies[k2]);
      }
    }
    s->expect.push_back(std::move(r));
  }
}

}  // namespace vrdma::bench::internal
