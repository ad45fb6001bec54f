// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/scenario_vars.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>

namespace vrdma::bench {

namespace {

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c));
}

// Integer expressions: expr = cmp ["?" expr ":" expr];
// cmp = sum [(<|<=|>|>=|==|!=) sum] (1 or 0); sum = term {(+|-) term};
// term = factor {(*|/) factor}; factor = [-] (integer | name | "(" expr ")").
class Expr {
 public:
  Expr(std::string_view text, const VarLookup& vars) : s_(text), vars_(vars) {}

  bool Eval(int64_t* out, std::string* error) {
    if (!Ternary(out)) {
      *error = error_;
      return false;
    }
    Skip();
    if (pos_ != s_.size()) {
      *error = "unexpected \"" + std::string(s_.substr(pos_)) + "\"";
      return false;
    }
    return true;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool Fail(const std::string& e) {
    if (error_.empty()) error_ = e;
    return false;
  }
  bool Ternary(int64_t* v) {
    if (!Compare(v)) return false;
    Skip();
    if (pos_ >= s_.size() || s_[pos_] != '?') return true;
    ++pos_;
    int64_t a = 0, b = 0;
    if (!Ternary(&a)) return false;
    Skip();
    if (pos_ >= s_.size() || s_[pos_] != ':')
      return Fail("\"?\" without \":\"");
    ++pos_;
    if (!Ternary(&b)) return false;
    *v = *v != 0 ? a : b;
    return true;
  }
  bool Compare(int64_t* v) {
    if (!Sum(v)) return false;
    Skip();
    static constexpr std::string_view kOps[] = {
        "<=", ">=", "==", "!=", "<", ">"};
    for (std::string_view op : kOps) {
      if (s_.substr(pos_, op.size()) != op) continue;
      pos_ += op.size();
      int64_t r = 0;
      if (!Sum(&r)) return false;
      if (op == "<=")
        *v = *v <= r;
      else if (op == ">=")
        *v = *v >= r;
      else if (op == "==")
        *v = *v == r;
      else if (op == "!=")
        *v = *v != r;
      else if (op == "<")
        *v = *v < r;
      else
        *v = *v > r;
      return true;
    }
    return true;
  }
  bool Sum(int64_t* v) {
    if (!Product(v)) return false;
    for (;;) {
      Skip();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-'))
        return true;
      const char op = s_[pos_++];
      int64_t r = 0;
      if (!Product(&r)) return false;
      *v = op == '+' ? *v + r : *v - r;
    }
  }
  bool Product(int64_t* v) {
    if (!Factor(v)) return false;
    for (;;) {
      Skip();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/'))
        return true;
      const char op = s_[pos_++];
      int64_t r = 0;
      if (!Factor(&r)) return false;
      if (op == '/' && r == 0) return Fail("division by zero");
      *v = op == '*' ? *v * r : *v / r;
    }
  }
  bool Factor(int64_t* v) {
    Skip();
    if (pos_ >= s_.size()) return Fail("expression ends early");
    if (s_[pos_] == '-') {
      ++pos_;
      if (!Factor(v)) return false;
      *v = -*v;
      return true;
    }
    if (s_[pos_] == '(') {
      ++pos_;
      if (!Ternary(v)) return false;
      Skip();
      if (pos_ >= s_.size() || s_[pos_] != ')') return Fail("missing \")\"");
      ++pos_;
      return true;
    }
    const size_t start = pos_;
    if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      while (pos_ < s_.size() &&
             std::isdigit(static_cast<unsigned char>(s_[pos_])))
        ++pos_;
      return ToInt(s_.substr(start, pos_ - start), v);
    }
    if (!IsIdentStart(s_[pos_]))
      return Fail("unexpected \"" + std::string(s_.substr(pos_)) + "\"");
    while (pos_ < s_.size() && IsIdentChar(s_[pos_])) ++pos_;
    const std::string name(s_.substr(start, pos_ - start));
    std::string value;
    if (!vars_(name, &value)) return Fail("undefined variable " + name);
    if (!ToInt(value, v))
      return Fail("variable " + name + " = \"" + value +
                  "\" is not an integer");
    return true;
  }
  bool ToInt(std::string_view t, int64_t* v) {
    const char* end = t.data() + t.size();
    auto [p, ec] =
        std::from_chars(t.data() + (!t.empty() && t[0] == '+'), end, *v);
    if (ec != std::errc() || p != end)
      return Fail("\"" + std::string(t) + "\" is not an integer");
    return true;
  }

  std::string_view s_;
  const VarLookup& vars_;
  size_t pos_ = 0;
  std::string error_;
};

// Calls fn(reference) for every $name / ${...} in text; false on a
// malformed one (*error set).
template <typename Fn>
bool ForEachRef(std::string_view text, std::string* literal, std::string* error,
                Fn fn) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      if (literal != nullptr) *literal += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {
      if (literal != nullptr) *literal += '$';
      ++i;
    } else if (i + 1 < text.size() && text[i + 1] == '{') {
      const size_t close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        if (error != nullptr) *error = "\"${\" without \"}\"";
        return false;
      }
      if (!fn(text.substr(i + 2, close - i - 2), true)) return false;
      i = close;
    } else if (i + 1 < text.size() && IsIdentStart(text[i + 1])) {
      size_t end = i + 1;
      while (end < text.size() && IsIdentChar(text[end])) ++end;
      if (!fn(text.substr(i + 1, end - i - 1), false)) return false;
      i = end - 1;
    } else {
      if (error != nullptr)
        *error = "\"$\" not followed by a name, \"{\" or \"$\"";
      return false;
    }
  }
  return true;
}

}  // namespace

bool IsVarName(std::string_view name) {
  if (name.empty() || !IsIdentStart(name[0])) return false;
  for (char c : name) {
    if (!IsIdentChar(c)) return false;
  }
  return true;
}

bool SubstituteVars(std::string_view text, const VarLookup& vars,
                    std::string* out, std::string* error) {
  out->clear();
  return ForEachRef(text, out, error, [&](std::string_view ref, bool braced) {
    std::string trimmed(ref);
    while (!trimmed.empty() && trimmed.back() == ' ') trimmed.pop_back();
    while (!trimmed.empty() && trimmed.front() == ' ') trimmed.erase(0, 1);
    if (IsVarName(trimmed)) {
      std::string value;
      if (!vars(trimmed, &value)) {
        *error = "undefined variable " + trimmed;
        return false;
      }
      *out += value;
      return true;
    }
    if (!braced) return false;  // unreachable: $name is always a name
    int64_t v = 0;
    Expr e(trimmed, vars);
    if (!e.Eval(&v, error)) {
      *error = "in \"${" + std::string(ref) + "}\": " + *error;
      return false;
    }
    *out += std::to_string(v);
    return true;
  });
}

void CollectVarRefs(std::string_view text, std::set<std::string>* names) {
  ForEachRef(text, nullptr, nullptr, [&](std::string_view ref, bool) {
    for (size_t i = 0; i < ref.size();) {
      if (IsIdentStart(ref[i]) && (i == 0 || !IsIdentChar(ref[i - 1]))) {
        size_t end = i;
        while (end < ref.size() && IsIdentChar(ref[end])) ++end;
        names->insert(std::string(ref.substr(i, end - i)));
        i = end;
      } else {
        ++i;
      }
    }
    return true;
  });
}

}  // namespace vrdma::bench
