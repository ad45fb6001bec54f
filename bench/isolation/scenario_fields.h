// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Reads one sweep point of one scenario of a scenario file into a
// ScenarioSpec, checking every field (type, range, unknown keys, the
// fields' rules together). Private to scenario_file.cc.
#ifndef VRDMA_BENCH_ISOLATION_SCENARIO_FIELDS_H_
#define VRDMA_BENCH_ISOLATION_SCENARIO_FIELDS_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/isolation/workload.h"

namespace vrdma::bench::internal {

// Collects errors once each ("file:line: where: field: message").
class ErrorSink {
 public:
  explicit ErrorSink(std::vector<std::string>* out) : out_(*out) {}
  // label names the scenario; the same error of several sweep points is
  // reported once.
  void Add(const std::string& file, const YAML::Node& at,
           const std::string& label, const std::string& path,
           const std::string& message);
  size_t count() const { return out_.size(); }

 private:
  std::vector<std::string>& out_;
  std::set<std::string> seen_;
};

// The line of a node, 1-based (0: unknown).
int LineOf(const YAML::Node& n);

// The keys a tenant (and a shape) may have.
const std::vector<std::string>& TenantKeys();

class ScenarioReader {
 public:
  ScenarioReader(std::string file,
                 const std::map<std::string, YAML::Node>& shapes,
                 ErrorSink* errors)
      : file_(std::move(file)), shapes_(shapes), errors_(*errors) {}

  // One sweep point: env binds every variable the scenario may use.
  std::optional<ScenarioSpec> Read(
      const YAML::Node& n, const std::map<std::string, std::string>& env,
      const std::string& label);

  // Checks a map's keys: every one known, none twice. False if n is no map.
  bool CheckKeys(const YAML::Node& n, const std::string& path,
                 const std::vector<std::string>& allowed);

  void Error(const YAML::Node& at, const std::string& path,
             const std::string& message) {
    ok_ = false;
    errors_.Add(file_, at, label_, path, message);
  }

 private:
  // The value of key: the tenant's own, else its shape's.
  struct View {
    YAML::Node own, shape;
    YAML::Node operator[](const std::string& key) const {
      if (own.IsMap() && own[key]) return own[key];
      if (shape.IsMap() && shape[key]) return shape[key];
      return YAML::Node(YAML::NodeType::Undefined);
    }
  };

  bool Text(const YAML::Node& n, const std::string& path, std::string* out);
  bool Name(const YAML::Node& n, const std::string& path, std::string* out);
  bool Uint(const YAML::Node& n, const std::string& path, uint64_t min,
            uint64_t max, bool size, uint64_t* out);
  bool Real(const YAML::Node& n, const std::string& path, double min,
            double max, double* out);
  bool Flag(const YAML::Node& n, const std::string& path, bool* out);
  bool Choice(const YAML::Node& n, const std::string& path,
              const std::vector<std::string>& names, size_t* out);
  template <typename T>
  void OptUint(const YAML::Node& n, const std::string& path, uint64_t min,
               uint64_t max, T* out, bool size = false) {
    uint64_t v = 0;
    if (n && Uint(n, path, min, max, size, &v)) *out = static_cast<T>(v);
  }
  void OptReal(const YAML::Node& n, const std::string& path, double min,
               double max, double* out) {
    if (n) Real(n, path, min, max, out);
  }

  void ReadFabric(const YAML::Node& n, model::FabricParams* f);
  void ReadTenants(const YAML::Node& list, ScenarioSpec* s);
  void ReadTenant(const View& v, const std::string& path, uint32_t hosts,
                  TenantSpec* t);
  void ReadQps(const YAML::Node& n, const std::string& path, TenantSpec* t);
  void ReadOps(const YAML::Node& n, const std::string& path, TenantSpec* t);
  void ReadSizes(const YAML::Node& n, const std::string& path, TenantSpec* t);
  void ReadMrs(const YAML::Node& n, const std::string& path, TenantSpec* t);
  void CheckTenant(const View& v, const std::string& path, const TenantSpec& t);
  void ReadExpect(const YAML::Node& list, ScenarioSpec* s);
  std::string Where(const YAML::Node& n) const;

  const std::string file_;
  const std::map<std::string, YAML::Node>& shapes_;
  ErrorSink& errors_;
  std::map<std::string, std::string> env_;
  std::optional<uint32_t> replica_;  // the value of $i in a tenant
  std::string label_;
  std::vector<std::string>
      bases_;  // per tenant read: its entry's name without $i
  bool ok_ = true;
};

}  // namespace vrdma::bench::internal

#endif  // VRDMA_BENCH_ISOLATION_SCENARIO_FIELDS_H_
