// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/scenario_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/isolation/bench_run.h"
#include "bench/isolation/scenario_fields.h"
#include "bench/isolation/scenario_vars.h"

namespace vrdma::bench {

namespace {

using internal::ErrorSink;
using internal::ScenarioReader;

const std::vector<std::string> kFileKeys = {"vars", "sweep", "shapes",
                                            "scenarios"};
constexpr size_t kMaxSweepPoints = 10000;

// Every variable a node's scalars (keys too) refer to.
void CollectRefs(const YAML::Node& n, std::set<std::string>* names) {
  if (n.IsScalar()) {
    CollectVarRefs(n.Scalar(), names);
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) CollectRefs(n[i], names);
  } else if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      CollectRefs(it->first, names);
      CollectRefs(it->second, names);
    }
  }
}

// One file: its variables, sweeps and shapes, then each scenario at each
// sweep point.
class FileLoader {
 public:
  FileLoader(std::string file, const VarOverrides& overrides, ErrorSink* errors,
             std::set<std::string>* used_overrides)
      : file_(std::move(file)),
        overrides_(overrides),
        errors_(*errors),
        used_overrides_(*used_overrides),
        reader_(file_, shapes_, errors) {}

  void Load(const YAML::Node& root, std::vector<ScenarioSpec>* out) {
    if (root.IsNull()) {
      errors_.Add(file_, root, "", "", "the file is empty");
      return;
    }
    if (!reader_.CheckKeys(root, "", kFileKeys)) return;
    ReadVars(root["vars"], "vars", &file_vars_);
    ReadSweep(root["sweep"], "sweep", &file_sweep_);
    ReadShapes(root["shapes"]);
    const YAML::Node& list = root["scenarios"];
    if (!list || !list.IsSequence() || list.size() == 0) {
      errors_.Add(file_, list ? list : root, "", "scenarios",
                  "expected a list of at least one scenario");
      return;
    }
    std::set<std::string> file_used;
    for (size_t k = 0; k < list.size(); ++k)
      LoadScenario(list[k], k, &file_used, out);
    for (const auto& [name, values] : file_sweep_) {
      if (!file_used.contains(name)) {
        errors_.Add(file_, sweep_nodes_[name], "", "sweep." + name,
                    "no scenario of this file uses it");
      }
    }
  }

 private:
  using Sweep = std::vector<std::pair<std::string, std::vector<std::string>>>;

  bool CheckVarName(const YAML::Node& key, const std::string& path) {
    const std::string name = key.IsScalar() ? key.Scalar() : "";
    if (!IsVarName(name)) {
      errors_.Add(file_, key, "", path,
                  fmt::format("\"{}\" is not a variable name", name));
      return false;
    }
    if (name == "i") {
      errors_.Add(file_, key, "", path,
                  "i is reserved: it is a tenant replica's index");
      return false;
    }
    return true;
  }

  void ReadVars(const YAML::Node& n, const std::string& path,
                std::map<std::string, std::string>* vars) {
    if (!n) return;
    if (!n.IsMap()) {
      errors_.Add(file_, n, "", path,
                  "expected a map of variables to default values");
      return;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!CheckVarName(it->first, path)) continue;
      const std::string at = path + "." + it->first.Scalar();
      if (!it->second.IsScalar()) {
        errors_.Add(file_, it->second, "", at, "a default value is a scalar");
        continue;
      }
      (*vars)[it->first.Scalar()] = it->second.Scalar();
    }
  }

  void ReadSweep(const YAML::Node& n, const std::string& path, Sweep* sweep) {
    if (!n) return;
    if (!n.IsMap()) {
      errors_.Add(file_, n, "", path,
                  "expected a map of variables to lists of values");
      return;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!CheckVarName(it->first, path)) continue;
      const std::string at = path + "." + it->first.Scalar();
      const YAML::Node v = it->second;  // a handle: it->second is a temporary's
      if (!v.IsSequence() || v.size() == 0) {
        errors_.Add(file_, v, "", at, "expected a list of at least one value");
        continue;
      }
      std::vector<std::string> values;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].IsScalar()) {
          errors_.Add(file_, v[i], "", fmt::format("{}[{}]", at, i),
                      "a value is a scalar");
          continue;
        }
        values.push_back(v[i].Scalar());
      }
      sweep_nodes_[it->first.Scalar()] = it->first;
      sweep->emplace_back(it->first.Scalar(), std::move(values));
    }
  }

  void ReadShapes(const YAML::Node& n) {
    if (!n) return;
    if (!n.IsMap()) {
      errors_.Add(file_, n, "", "shapes",
                  "expected a map of shape names to tenant fields");
      return;
    }
    std::vector<std::string> keys = internal::TenantKeys();
    keys.erase(std::find(keys.begin(), keys.end(), "shape"));
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
      if (reader_.CheckKeys(it->second, "shapes." + name, keys))
        shapes_[name] = it->second;
    }
  }

  void LoadScenario(const YAML::Node& n, size_t k,
                    std::set<std::string>* file_used,
                    std::vector<ScenarioSpec>* out) {
    std::string label = fmt::format("scenarios[{}]", k);
    if (n.IsMap() && n["name"] && n["name"].IsScalar())
      label = n["name"].Scalar();
    std::map<std::string, std::string> vars = file_vars_;
    Sweep sweep;
    if (n.IsMap()) {
      ReadVars(n["vars"], label + ": vars", &vars);
      ReadSweep(n["sweep"], label + ": sweep", &sweep);
    }
    // The variables it uses: in its own fields and in its tenants' shapes.
    std::set<std::string> used;
    if (n.IsMap()) {
      for (const char* key :
           {"name", "group", "paper", "card", "hosts", "duration_us",
            "warmup_us", "seed", "fabric", "tenants", "expect"}) {
        if (n[key]) CollectRefs(n[key], &used);
      }
      const YAML::Node& tenants = n["tenants"];
      for (size_t i = 0; tenants && tenants.IsSequence() && i < tenants.size();
           ++i) {
        const YAML::Node& shape =
            tenants[i].IsMap() ? tenants[i]["shape"] : YAML::Node();
        if (shape && shape.IsScalar() && shapes_.contains(shape.Scalar())) {
          CollectRefs(shapes_[shape.Scalar()], &used);
        }
      }
    }
    used.erase("i");
    for (const auto& [name, values] : sweep) {
      if (!used.contains(name)) {
        errors_.Add(file_, n["sweep"][name], label, "sweep." + name,
                    "the scenario does not use it");
      }
    }
    // Each used variable's values: --sweep, else --set, else the
    // scenario's sweep, the file's sweep, its default, the file's default.
    Sweep dims;
    std::map<std::string, std::string> env;
    for (const std::string& name : used) {
      file_used->insert(name);
      const std::vector<std::string>* values = nullptr;
      if (auto it = overrides_.sweep.find(name); it != overrides_.sweep.end()) {
        values = &it->second;
        used_overrides_.insert(name);
      } else if (auto it = overrides_.set.find(name);
                 it != overrides_.set.end()) {
        env[name] = it->second;
        used_overrides_.insert(name);
        continue;
      } else if (auto it =
                     std::find_if(sweep.begin(), sweep.end(),
                                  [&](auto& d) { return d.first == name; });
                 it != sweep.end()) {
        values = &it->second;
      } else if (auto it =
                     std::find_if(file_sweep_.begin(), file_sweep_.end(),
                                  [&](auto& d) { return d.first == name; });
                 it != file_sweep_.end()) {
        values = &it->second;
      } else if (auto it = vars.find(name); it != vars.end()) {
        env[name] = it->second;
        continue;
      } else {
        continue;  // undefined: the field that uses it says so
      }
      dims.emplace_back(name, *values);
    }
    // Sweep in the order the file declares its variables' sweeps.
    auto order = [&](const std::string& name) {
      for (size_t i = 0; i < sweep.size(); ++i)
        if (sweep[i].first == name) return i;
      for (size_t i = 0; i < file_sweep_.size(); ++i)
        if (file_sweep_[i].first == name) return sweep.size() + i;
      return sweep.size() + file_sweep_.size();
    };
    std::stable_sort(dims.begin(), dims.end(),
                     [&](const auto& a, const auto& b) {
                       return order(a.first) < order(b.first);
                     });
    size_t points = 1;
    for (const auto& d : dims) {
      points *= d.second.size();
      if (points > kMaxSweepPoints) {
        errors_.Add(file_, n, label, "sweep",
                    fmt::format("more than {} sweep points", kMaxSweepPoints));
        return;
      }
    }
    std::vector<size_t> at(dims.size(), 0);
    for (size_t p = 0; p < points; ++p) {
      std::string point;
      for (size_t d = 0; d < dims.size(); ++d) {
        env[dims[d].first] = dims[d].second[at[d]];
        point += fmt::format("{}{}={}", point.empty() ? "" : ", ",
                             dims[d].first, dims[d].second[at[d]]);
      }
      std::optional<ScenarioSpec> s = reader_.Read(
          n, env, point.empty() ? label : label + " [" + point + "]");
      if (s) out->push_back(std::move(*s));
      for (size_t d = dims.size();
           d-- > 0;) {  // the last variable moves fastest
        if (++at[d] < dims[d].second.size()) break;
        at[d] = 0;
      }
    }
  }

  const std::string file_;
  const VarOverrides& overrides_;
  ErrorSink& errors_;
  std::set<std::string>& used_overrides_;
  std::map<std::string, YAML::Node> shapes_;
  ScenarioReader reader_;
  std::map<std::string, std::string> file_vars_;
  Sweep file_sweep_;
  std::map<std::string, YAML::Node> sweep_nodes_;
};

LoadedScenarios LoadAll(
    const std::vector<std::pair<std::string, std::string>>& files,
    const VarOverrides& overrides) {
  LoadedScenarios r;
  ErrorSink errors(&r.errors);
  std::set<std::string> used_overrides;
  for (const auto& [path, text] : files) {
    const std::string name = path;
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      r.errors.push_back(
          fmt::format("{}:{}: {}", name, e.mark.line + 1, e.msg));
      continue;
    }
    FileLoader(name, overrides, &errors, &used_overrides)
        .Load(root, &r.scenarios);
  }
  auto unused = [&](const char* option, const std::string& name) {
    if (!used_overrides.contains(name)) {
      r.errors.push_back(fmt::format(
          "{} {}: no scenario loaded uses the variable", option, name));
    }
  };
  for (const auto& [name, value] : overrides.set) unused("--set", name);
  for (const auto& [name, values] : overrides.sweep) unused("--sweep", name);
  std::map<std::string, std::string> seen;  // name -> where
  for (const ScenarioSpec& s : r.scenarios) {
    auto [it, fresh] = seen.emplace(s.name, s.source);
    if (!fresh) {
      r.errors.push_back(fmt::format("{}: {}: name: scenario {} is also at {}",
                                     s.source, s.name, s.name, it->second));
    }
  }
  return r;
}

}  // namespace

LoadedScenarios LoadScenarioText(const std::string& file_name,
                                 const std::string& yaml,
                                 const VarOverrides& overrides) {
  return LoadAll({{file_name, yaml}}, overrides);
}

LoadedScenarios LoadScenarioFiles(const std::vector<std::string>& paths,
                                  const VarOverrides& overrides) {
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> unreadable;
  for (const std::string& p : paths) {
    std::ifstream in(p);
    if (!in) {
      unreadable.push_back(fmt::format("{}: cannot read the file", p));
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    files.emplace_back(p, ss.str());
  }
  LoadedScenarios r = LoadAll(files, overrides);
  r.errors.insert(r.errors.begin(), unreadable.begin(), unreadable.end());
  return r;
}

std::vector<std::string> ScenarioFilesIn(const std::string& dir,
                                         std::string* error) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml"))
      files.push_back(e.path().string());
  }
  if (ec) {
    *error = fmt::format("{}: {}", dir, ec.message());
    return {};
  }
  if (files.empty()) *error = fmt::format("{}: no *.yaml scenario files", dir);
  std::sort(files.begin(), files.end());
  return files;
}

std::string BuiltinScenarioDir() { return VRDMA_ISOLATION_SCENARIO_DIR; }

namespace {
bool SplitOption(const std::string& arg, std::string* name, std::string* value,
                 std::string* error) {
  const size_t eq = arg.find('=');
  *name = arg.substr(0, eq);
  if (eq == std::string::npos || !IsVarName(*name) || eq + 1 == arg.size()) {
    *error = fmt::format("\"{}\": expected name=value", arg);
    return false;
  }
  *value = arg.substr(eq + 1);
  return true;
}
}  // namespace

bool ParseSetOption(const std::string& arg, VarOverrides* overrides,
                    std::string* error) {
  std::string name, value;
  if (!SplitOption(arg, &name, &value, error)) return false;
  overrides->set[name] = value;
  return true;
}

bool ParseSweepOption(const std::string& arg, VarOverrides* overrides,
                      std::string* error) {
  std::string name, value;
  if (!SplitOption(arg, &name, &value, error)) return false;
  std::vector<std::string> values;
  std::stringstream ss(value);
  for (std::string v; std::getline(ss, v, ',');) {
    if (v.empty()) {
      *error = fmt::format("\"{}\": an empty value", arg);
      return false;
    }
    values.push_back(v);
  }
  overrides->sweep[name] = values;
  return true;
}

std::optional<ScenarioSpec> BuiltinScenario(
    const std::string& name, double scale,
    const std::map<std::string, std::string>& set, std::string* error) {
  std::string err;
  const std::vector<std::string> files =
      ScenarioFilesIn(BuiltinScenarioDir(), &err);
  VarOverrides overrides;
  overrides.set = set;
  LoadedScenarios loaded = LoadScenarioFiles(files, overrides);
  if (!err.empty()) loaded.errors.push_back(err);
  if (!loaded.errors.empty()) {
    if (error != nullptr) *error = loaded.errors.front();
    return std::nullopt;
  }
  for (ScenarioSpec& s : loaded.scenarios) {
    if (s.name == name) {
      ScaleDuration(&s, scale);
      return s;
    }
  }
  if (error != nullptr) *error = "no built-in scenario " + name;
  return std::nullopt;
}

}  // namespace vrdma::bench
