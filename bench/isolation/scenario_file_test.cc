// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Scenario files (docs/isolation-scenarios.md): the format, variables and
// sweeps, the errors (each must name file, line and field), the built-in
// files, the runner's refusals, and what the runner does with op and size
// mixes, open loop rates and processes on the RNIC MODEL.
#include "bench/isolation/scenario_file.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "bench/isolation/bench_run.h"
#include "bench/isolation/scenario_vars.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy_registry.h"

namespace vrdma::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

LoadedScenarios Load(const std::string& yaml, const VarOverrides& o = {}) {
  return LoadScenarioText("t.yaml", yaml, o);
}

// The one error a bad file gives.
std::string OnlyError(const std::string& yaml, const VarOverrides& o = {}) {
  LoadedScenarios r = Load(yaml, o);
  EXPECT_EQ(r.errors.size(), 1u) << ::testing::PrintToString(r.errors);
  EXPECT_TRUE(r.scenarios.empty() || !r.errors.empty());
  return r.errors.empty() ? "" : r.errors.front();
}

constexpr const char* kFull = R"(# every field
vars: {n: 2}
shapes:
  small: {size: 64, batch: 4}
scenarios:
  - name: full_$n
    group: g
    paper: "PeRF §5: a citation"
    card: cx5-40
    hosts: 3
    duration_us: 1000
    warmup_us: 50
    seed: 7
    fabric: {random_loss: 0.001, lossless: false, switch_buffer_bytes: 8MiB,
             link_propagation_ns: 50, switch_latency_ns: 200}
    tenants:
      - name: T$i
        shape: small
        count: $n
        qps: {type: uc, count: 2, processes: 3}
        ops: {write: 3, send: 1}
        size: {64: 1, 4KiB: 3}
        depth: 32
        rate: 250000
        turnaround_ns: 0
        start_us: 10
        stop_us: 900
        src_host: 2
        dst_host: "${n - 2}"
        weight: 5
        class: throughput
      - {name: L, mode: latency, class: latency, mrs: {count: 2, size: 1GiB, page_size: 2MiB}, inline: true}
    expect:
      - {tenant: T, metric: mmps, ratio: alone/with, le: 2}
      - {tenant: L, metric: p99_us, ratio: with/alone, ge: 1, le: 3, policy: [perf, justitia]}
)";

TEST(ScenarioFile, ReadsEveryField) {
  LoadedScenarios r = Load(kFull);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.scenarios.size(), 1u);
  const ScenarioSpec& s = r.scenarios[0];
  EXPECT_EQ(s.name, "full_2");
  EXPECT_EQ(s.group, "g");
  EXPECT_EQ(s.paper, "PeRF §5: a citation");
  EXPECT_EQ(s.preset, "cx5-40");
  EXPECT_EQ(s.num_hosts, 3u);
  EXPECT_EQ(s.duration_us, 1000);
  EXPECT_EQ(s.warmup_us, 50);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.fabric.random_loss, 0.001);
  EXPECT_FALSE(s.fabric.lossless);
  EXPECT_EQ(s.fabric.switch_buffer_bytes, 8u << 20);
  EXPECT_EQ(s.fabric.link_propagation_ps, model::NsToPs(50));
  EXPECT_EQ(s.source, "t.yaml:6");
  ASSERT_EQ(s.tenants.size(), 3u);
  const TenantSpec& t = s.tenants[1];
  EXPECT_EQ(s.tenants[0].name, "T0");
  EXPECT_EQ(t.name, "T1");
  EXPECT_EQ(t.batch, 4u);  // from the shape
  EXPECT_EQ(t.transport, Transport::kUc);
  EXPECT_EQ(t.qps_per_process, 2u);
  EXPECT_EQ(t.processes, 3u);
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].op, OpKind::kWrite);
  EXPECT_EQ(t.ops[0].weight, 3u);
  EXPECT_EQ(t.ops[1].op, OpKind::kSend);
  ASSERT_EQ(t.sizes.size(), 2u);
  EXPECT_EQ(t.sizes[1].bytes, 4096u);
  EXPECT_EQ(t.sizes[1].weight, 3u);
  EXPECT_EQ(t.tx_depth, 32u);
  EXPECT_EQ(t.rate_mps, 250000);
  EXPECT_EQ(t.turnaround_ns, 0);
  EXPECT_EQ(t.stop_us, 900);
  EXPECT_EQ(t.src_host, 2u);
  EXPECT_EQ(t.dst_host, 0u);
  EXPECT_EQ(t.weight, 5u);
  EXPECT_EQ(t.app_class, policy::TenantClass::kThroughput);
  const TenantSpec& l = s.tenants[2];
  EXPECT_EQ(l.mode, Mode::kLatency);
  EXPECT_EQ(l.mrs.count, 2u);
  EXPECT_EQ(l.mrs.bytes, 1ull << 30);
  EXPECT_EQ(l.mrs.page_bytes, 2u << 20);
  EXPECT_TRUE(l.inline_data);
  ASSERT_EQ(s.expect.size(), 2u);
  EXPECT_THAT(s.expect[0].tenants, ElementsAre(0, 1));  // "T" names every T$i
  EXPECT_EQ(s.expect[0].ratio, RatioKind::kAloneOverWith);
  EXPECT_EQ(*s.expect[0].le, 2);
  EXPECT_THAT(s.expect[1].policies, ElementsAre("perf", "justitia"));
  EXPECT_EQ(*s.expect[1].ge, 1);
}

constexpr const char* kSwept = R"(sweep: {n: [1, 2, 3]}
scenarios:
  - name: x_$n
    duration_us: "${n >= 3 ? 300 : 100}"
    tenants:
      - {name: B$i, count: $n}
)";

TEST(ScenarioFile, SweepGivesOneScenarioPerPoint) {
  LoadedScenarios r = Load(kSwept);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.scenarios.size(), 3u);
  EXPECT_EQ(r.scenarios[2].name, "x_3");
  EXPECT_EQ(r.scenarios[2].tenants.size(), 3u);
  EXPECT_EQ(r.scenarios[1].duration_us, 100);
  EXPECT_EQ(r.scenarios[2].duration_us, 300);
}

TEST(ScenarioFile, CommandLineSweepAndSetWin) {
  VarOverrides sweep;
  std::string error;
  ASSERT_TRUE(ParseSweepOption("n=4,5", &sweep, &error));
  LoadedScenarios r = Load(kSwept, sweep);
  ASSERT_EQ(r.scenarios.size(), 2u);
  EXPECT_EQ(r.scenarios[1].name, "x_5");
  VarOverrides set;
  ASSERT_TRUE(ParseSetOption("n=7", &set, &error));
  r = Load(kSwept, set);
  ASSERT_EQ(r.scenarios.size(), 1u);
  EXPECT_EQ(r.scenarios[0].tenants.size(), 7u);
  EXPECT_FALSE(ParseSetOption("n", &set, &error));
  EXPECT_THAT(error, HasSubstr("expected name=value"));
}

TEST(ScenarioFile, OverrideNoScenarioUsesIsAnError) {
  VarOverrides o;
  o.set["nope"] = "1";
  EXPECT_THAT(OnlyError(kSwept, o),
              HasSubstr("--set nope: no scenario loaded uses the variable"));
}

TEST(ScenarioVars, SubstitutesAndComputes) {
  const VarLookup vars = [](const std::string& n, std::string* v) {
    if (n != "a") return false;
    *v = "6";
    return true;
  };
  std::string out, error;
  ASSERT_TRUE(SubstituteVars("x$a-${a * (a - 4)}-$${a}", vars, &out, &error))
      << error;
  EXPECT_EQ(out, "x6-12-${a}");
  ASSERT_TRUE(SubstituteVars("${a == 6 ? 1 : 2}${a < 6}", vars, &out, &error));
  EXPECT_EQ(out, "10");
  EXPECT_FALSE(SubstituteVars("$b", vars, &out, &error));
  EXPECT_EQ(error, "undefined variable b");
  EXPECT_FALSE(SubstituteVars("${a / 0}", vars, &out, &error));
  EXPECT_THAT(error, HasSubstr("division by zero"));
}

// ------------------------------------------------------------ errors --

// A file with one scenario whose second tenant has the given line(s) (at
// line 6 and on).
std::string WithTenant(const std::string& tenant_fields) {
  return "scenarios:\n"
         "  - name: s\n"
         "    tenants:\n"
         "      - {name: A}\n"
         "      - name: B\n" +
         tenant_fields;
}

TEST(ScenarioFileErrors, BadChoiceNamesFileLineFieldAndValue) {
  EXPECT_EQ(OnlyError(WithTenant("        qps: {type: rd}\n")),
            "t.yaml:6: s: tenants[1].qps.type: expected one of rc, uc, ud, got "
            "\"rd\"");
}

TEST(ScenarioFileErrors, UnknownKey) {
  EXPECT_THAT(
      OnlyError(WithTenant("        sise: 64\n")),
      HasSubstr(
          "t.yaml:6: s: tenants[1].sise: unknown key (expected one of name, "));
}

TEST(ScenarioFileErrors, WrongTypeAndRange) {
  EXPECT_EQ(OnlyError(WithTenant("        batch: 0\n")),
            "t.yaml:6: s: tenants[1].batch: must be between 1 and 4096, got 0");
  EXPECT_EQ(OnlyError(WithTenant("        size: 1MB\n")),
            "t.yaml:6: s: tenants[1].size: expected a size (bytes, or a number "
            "with KiB, MiB or "
            "GiB), got \"1MB\"");
  EXPECT_EQ(
      OnlyError(WithTenant("        inline: 1\n")),
      "t.yaml:6: s: tenants[1].inline: expected true or false, got \"1\"");
  EXPECT_EQ(OnlyError(WithTenant("        qps: [1]\n")),
            "t.yaml:6: s: tenants[1].qps: expected a map, got a list");
  EXPECT_EQ(OnlyError(WithTenant("        dst_host: 2\n")),
            "t.yaml:6: s: tenants[1].dst_host: must be between 0 and 1, got 2");
}

TEST(ScenarioFileErrors, UndefinedVariable) {
  EXPECT_EQ(OnlyError(WithTenant("        count: $n_bw\n")),
            "t.yaml:6: s: tenants[1].count: undefined variable n_bw");
}

TEST(ScenarioFileErrors, RdmaRulesBetweenFields) {
  EXPECT_EQ(
      OnlyError(WithTenant("        qps: {type: uc}\n        ops: read\n")),
      "t.yaml:6: s: tenants[1].qps.type: a uc QP cannot carry read (only write "
      "and send)");
  EXPECT_EQ(OnlyError(WithTenant("        mode: latency\n        batch: 8\n")),
            "t.yaml:7: s: tenants[1].batch: latency mode keeps one message in "
            "flight: batch "
            "must be 1");
}

TEST(ScenarioFile, ReadsReceiveAndRetryFields) {
  const ScenarioSpec s =
      Load("scenarios:\n  - name: s\n    tenants:\n"
           "      - {name: X, ops: send, recv_depth: 0, rnr_retry: 3, rnr_timer: 14, "
           "retry_cnt: 2, timeout: 14}\n"
           "      - {name: W, ops: {write: 1, write_imm: 1}, recv_depth: 8}\n"
           "      - {name: D}\n")
          .scenarios.at(0);
  EXPECT_EQ(s.tenants[0].recv_depth, 0u);
  EXPECT_EQ(s.tenants[0].rnr_retry, 3u);
  EXPECT_EQ(s.tenants[0].rnr_timer, 14u);
  EXPECT_EQ(s.tenants[0].retry_cnt, 2u);
  EXPECT_EQ(s.tenants[0].timeout, 14u);
  EXPECT_EQ(s.tenants[1].recv_depth, 8u);
  EXPECT_FALSE(s.tenants[2].recv_depth.has_value()) << "unset: never short";
  EXPECT_FALSE(s.tenants[2].rnr_retry.has_value()) << "unset: the model's default";
  EXPECT_FALSE(s.tenants[2].timeout.has_value()) << "unset: the card's rto";
  EXPECT_NE(AloneKey(s, s.tenants[0]), AloneKey(s, s.tenants[2]));
}

TEST(ScenarioFileErrors, ReceiveAndRetryFieldRules) {
  EXPECT_EQ(OnlyError(WithTenant("        recv_depth: 0\n")),
            "t.yaml:6: s: tenants[1].recv_depth: the tenant's ops consume no receive "
            "(only send, send_imm and write_imm do)");
  EXPECT_EQ(OnlyError(WithTenant("        ops: send\n        qps: {type: ud}\n"
                                 "        rnr_retry: 0\n")),
            "t.yaml:8: s: tenants[1].rnr_retry: only an rc QP retries (qps.type is ud)");
  EXPECT_EQ(OnlyError(WithTenant("        retry_cnt: 8\n")),
            "t.yaml:6: s: tenants[1].retry_cnt: must be between 0 and 7, got 8");
  EXPECT_EQ(OnlyError(WithTenant("        rnr_timer: 32\n")),
            "t.yaml:6: s: tenants[1].rnr_timer: must be between 0 and 31, got 32");
  EXPECT_EQ(OnlyError(WithTenant("        timeout: 32\n")),
            "t.yaml:6: s: tenants[1].timeout: must be between 0 and 31, got 32");
}

TEST(ScenarioFileErrors, EverySweepPointIsChecked) {
  // Point n=0 is bad; the error says which point.
  VarOverrides o;
  std::string error;
  ASSERT_TRUE(ParseSweepOption("n=2,0", &o, &error));
  LoadedScenarios r = Load(kSwept, o);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0],
            "t.yaml:6: x_$n [n=0]: tenants[0].count: must be between 1 and "
            "100000, got 0");
}

TEST(ScenarioFileErrors, YamlSyntaxErrorHasItsLine) {
  EXPECT_THAT(OnlyError("scenarios:\n  - name: s\n    tenants: [{name: A}\n"),
              HasSubstr("t.yaml:4:"));
}

TEST(ScenarioFileErrors, DuplicateNamesAndRules) {
  EXPECT_THAT(OnlyError("scenarios:\n  - {name: s, tenants: [{name: A}]}\n"
                        "  - {name: s, tenants: [{name: A}]}\n"),
              HasSubstr("t.yaml:3: s: name: scenario s is also at t.yaml:2"));
  EXPECT_THAT(OnlyError(WithTenant("        count: 2\n")),
              HasSubstr("t.yaml:5: s: tenants[1].name: tenant name \"B\" is "
                        "also tenants[1]'s "
                        "(a tenant with count > 1 needs $i in its name)"));
  EXPECT_EQ(OnlyError("scenarios:\n  - name: s\n    tenants: [{name: A}]\n"
                      "    expect: [{tenant: Z, metric: gbps, ge: 1}]\n"),
            "t.yaml:4: s: expect[0].tenant: no tenant \"Z\" in this scenario "
            "(tenants: A)");
  EXPECT_EQ(
      OnlyError(
          "scenarios:\n  - name: s\n    tenants: [{name: A}]\n"
          "    expect: [{tenant: A, metric: gbps, ge: 1, policy: fast}]\n"),
      "t.yaml:4: s: expect[0].policy: expected one of " +
          [] {
            std::string n;
            for (const std::string& p : policy::PolicyNames())
              n += (n.empty() ? "" : ", ") + p;
            return n;
          }() +
          ", got \"fast\"");
}

TEST(ScenarioFileErrors, UnreadableFile) {
  LoadedScenarios r = LoadScenarioFiles({"/nonexistent/x.yaml"}, {});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "/nonexistent/x.yaml: cannot read the file");
}

// ---------------------------------------------- what the model runs --

TEST(CheckRunnable, RefusesWhatTheModelCannotRunYetInOnePlace) {
  LoadedScenarios r = Load(
      "scenarios:\n  - name: s\n    tenants:\n"
      "      - {name: U, qps: {type: ud}, ops: send, size: 4KiB}\n"
      "      - {name: A, ops: {write: 1, cas: 1, faa: 1}}\n"
      "      - {name: M, mrs: {count: 1, size: 4KiB}, inline: true}\n"
      "  - name: ud_small_mtu\n    card: cx5-40\n    tenants:\n"
      "      - {name: U, qps: {type: ud}, ops: send, size: 4KiB}\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  // UD and atomics run; memory regions and inline data wait for the model.
  EXPECT_EQ(CheckRunnable(r.scenarios[0]),
            "t.yaml:6: s: tenants[2].mrs: registering memory regions is not "
            "supported by the "
            "RNIC model yet\n"
            "t.yaml:6: s: tenants[2].inline: inline data is not supported by "
            "the RNIC model yet");
  // The file allows a 4 KiB UD message; this card's MTU is 1 KiB.
  EXPECT_EQ(CheckRunnable(r.scenarios[1]),
            "t.yaml:10: ud_small_mtu: tenants[0].size: a ud message of 4096 bytes is over "
            "the MTU of card cx5-40 (1024)");
  EXPECT_EQ(CheckRunnable(Load(kSwept).scenarios[0]), "");
}

TEST(Builtins, LoadAndTheModelRunsThemAll) {
  std::string error;
  const std::vector<std::string> files =
      ScenarioFilesIn(BuiltinScenarioDir(), &error);
  ASSERT_FALSE(files.empty()) << error;
  LoadedScenarios r = LoadScenarioFiles(files, {});
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  // 50 + scale_1000x8, crowd_992 (90_crowd.yaml) + rnr_storm_pfc,
  // rnr_storm_deep + 6 of 97_qos.yaml + 18 of 98_lossy.yaml
  EXPECT_EQ(r.scenarios.size(), 78u);
  size_t outside_all = 0;
  for (const ScenarioSpec& s : r.scenarios) {
    EXPECT_EQ(CheckRunnable(s), "") << s.name;
    if (!s.in_all) {
      ++outside_all;
      EXPECT_EQ(s.group, "lossy") << s.name;
    }
  }
  // --all over the built-in directory runs the 60 it ran before.
  EXPECT_EQ(outside_all, 18u);
}

TEST(ScenarioFile, ReadsReliabilityAndInAll) {
  LoadedScenarios r = Load(
      "scenarios:\n  - name: s\n    in_all: false\n    packet_lifetime_us: 200\n"
      "    tenants:\n"
      "      - {name: A, reliability: uc}\n      - {name: B, reliability: native}\n"
      "  - name: t\n    tenants:\n      - {name: C}\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_FALSE(r.scenarios[0].in_all);
  EXPECT_EQ(r.scenarios[0].packet_lifetime_us, 200);
  EXPECT_EQ(r.scenarios[1].packet_lifetime_us, 0);
  EXPECT_THAT(OnlyError("scenarios:\n  - name: s\n    packet_lifetime_us: -1\n"
                        "    tenants:\n      - {name: A, reliability: uc}\n"),
              HasSubstr("packet_lifetime_us"));
  EXPECT_EQ(r.scenarios[0].tenants[0].reliability, Reliability::kUc);
  EXPECT_EQ(r.scenarios[0].tenants[1].reliability, Reliability::kNative);
  EXPECT_TRUE(r.scenarios[1].in_all);
  EXPECT_FALSE(r.scenarios[1].tenants[0].reliability.has_value());
  EXPECT_THAT(OnlyError("scenarios:\n  - name: s\n    tenants:\n"
                        "      - {name: A, reliability: rc}\n"),
              HasSubstr("tenants[0].reliability"));
  // A layer tenant's reference ("alone") is native RC on the lossless fabric.
  ScenarioSpec lossy = r.scenarios[0];
  lossy.fabric.lossless = false;
  lossy.fabric.random_loss = 0.01;
  const ScenarioSpec ref = AloneSpec(lossy, 0);
  ASSERT_EQ(ref.tenants.size(), 1u);
  EXPECT_EQ(ref.tenants[0].name, "A");
  EXPECT_EQ(ref.tenants[0].reliability, Reliability::kNative);
  EXPECT_TRUE(ref.fabric.lossless);
  EXPECT_EQ(ref.fabric.random_loss, 0.0);
  EXPECT_NE(AloneKey(ref, ref.tenants[0]), AloneKey(lossy, lossy.tenants[0]));
  // Without `reliability`, alone is the tenant on the scenario's fabric.
  ScenarioSpec plain = r.scenarios[1];
  plain.fabric.random_loss = 0.01;
  EXPECT_EQ(AloneSpec(plain, 0).fabric.random_loss, 0.01);
}

TEST(CheckRunnable, LayerTenantsAreRcWriteTenantsOnEveryHost) {
  LoadedScenarios r = Load(
      "scenarios:\n"
      "  - name: ops\n    tenants:\n      - {name: A, ops: send, reliability: uc}\n"
      "  - name: some\n    tenants:\n      - {name: A, reliability: uc}\n"
      "      - {name: B}\n"
      "  - name: modes\n    tenants:\n      - {name: A, reliability: uc}\n"
      "      - {name: B, reliability: native}\n"
      "  - name: ok\n    hosts: 4\n    tenants:\n      - {name: A, reliability: uc}\n"
      "      - {name: B, reliability: native, src_host: 2, dst_host: 3}\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_THAT(CheckRunnable(r.scenarios[0]), HasSubstr("ops other than write"));
  EXPECT_THAT(CheckRunnable(r.scenarios[1]), HasSubstr("set on some tenants only"));
  EXPECT_THAT(CheckRunnable(r.scenarios[2]), HasSubstr("two modes on one host"));
  EXPECT_EQ(CheckRunnable(r.scenarios[3]), "");
  // A layer keeps 64 peer daemons: 65 senders into one host is refused,
  // 64 runs.
  for (int senders : {64, 65}) {
    LoadedScenarios in = Load(
        "scenarios:\n  - name: incast\n    hosts: " + std::to_string(senders + 1) +
        "\n    vars: {n: " + std::to_string(senders) + "}\n    tenants:\n"
        "      - {name: B$i, count: $n, src_host: $i, dst_host: $n, reliability: uc}\n");
    ASSERT_TRUE(in.errors.empty()) << in.errors.front();
    if (senders == 64) {
      EXPECT_EQ(CheckRunnable(in.scenarios[0]), "");
    } else {
      EXPECT_THAT(CheckRunnable(in.scenarios[0]),
                  HasSubstr("host 65 would have 65 peer daemons; a ReliableRnic keeps 64"));
    }
  }
}

// docs/reliability.md §9 rows 1-2 in small: 8 QPs of 1 MiB WRITEs, 8 in
// flight each, at 1 % random loss on a lossy fabric. Through the layer in
// uc mode the tenant keeps most of native's lossless goodput; native RC
// (go-back-N, perftest's 67 ms transport timer) loses most of it. RNIC
// MODEL figures.
TEST(ReliabilityOnModel, UcKeepsGoodputAtOnePercentLossWhereNativeGoBackNDoesNot) {
  LoadedScenarios r = Load(
      "scenarios:\n  - name: s_${rel}\n    duration_us: 30000\n"
      "    fabric: {lossless: false, random_loss: 0.01}\n"
      "    sweep: {rel: [native, uc]}\n    tenants:\n"
      "      - {name: T, qps: {count: 8}, size: 1MiB, depth: 8, reliability: $rel}\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.scenarios.size(), 2u);
  const ScenarioSpec& native = r.scenarios[0];
  const ScenarioSpec& uc = r.scenarios[1];
  ASSERT_EQ(CheckRunnable(uc), "");
  const PolicyFactory pass = PassThrough();
  RunStats ref_stats, native_stats, uc_stats;
  const TenantResult ref = RunAlone(uc, 0, pass, &ref_stats);
  const TenantResult n = RunScenario(native, pass, &native_stats).front();
  const TenantResult u = RunScenario(uc, pass, &uc_stats).front();
  EXPECT_GT(ref.gbps, 90);  // lossless native, the reference
  EXPECT_GT(u.gbps, 0.7 * ref.gbps) << "native " << n.gbps << ", reference " << ref.gbps;
  EXPECT_LT(n.gbps, u.gbps);
  EXPECT_EQ(u.errors, 0u);
  EXPECT_GT(native_stats.drops, 0u);
  EXPECT_GT(uc_stats.drops, 0u);
  // uc framed every QP: each has its UC data QP on both cards (16 more
  // model QPs than native, through the same layer in native mode).
  EXPECT_EQ(uc_stats.model_qps, native_stats.model_qps + 16);
}

// A policy that counts the kinds and bytes of the WRs it sees.
struct Seen {
  std::map<policy::WrKind, uint64_t> kinds;
  std::map<uint32_t, uint64_t> sizes;
};
class CountingPolicy : public policy::SchedulerPolicy {
 public:
  explicit CountingPolicy(Seen* seen) : seen_(*seen) {}
  std::string_view name() const override { return "counting"; }
  void OnTenantAdded(policy::TenantId, const policy::TenantQos&) override {}
  void OnTenantQosChanged(policy::TenantId, const policy::TenantQos&) override {
  }
  void OnTenantRemoved(policy::TenantId) override {}
  void OnFlowAdded(policy::Nanos, const policy::FlowInfo&) override {}
  void OnFlowEnded(policy::Nanos, policy::FlowId, policy::FlowEnd) override {}
  void OnArrival(policy::Nanos, const policy::WrInfo& w) override {
    ++seen_.kinds[w.kind];
    ++seen_.sizes[static_cast<uint32_t>(w.bytes)];
  }
  void OnCompleted(policy::Nanos, const policy::WrInfo&, policy::Nanos,
                   bool) override {}
  Seen& seen_;
};

ScenarioSpec One(const std::string& tenant) {
  LoadedScenarios r = Load(
      "scenarios:\n  - name: s\n    duration_us: 1000\n    tenants:\n      - " +
      tenant + "\n");
  EXPECT_TRUE(r.errors.empty()) << ::testing::PrintToString(r.errors);
  return r.scenarios.empty() ? ScenarioSpec{} : r.scenarios[0];
}

TEST(Runner, OpAndSizeMixesAreDrawnByWeight) {
  const ScenarioSpec s =
      One("{name: X, ops: {write: 3, read: 1}, size: {64: 1, 4KiB: 1}, batch: "
          "8, depth: 64}");
  Seen seen, receiver;
  RunScenario(
      s,
      [&](const policy::CardProfile&, uint32_t host) {
        return std::make_unique<CountingPolicy>(host == 0 ? &seen : &receiver);
      },
      nullptr);
  const double writes = seen.kinds[policy::WrKind::kWrite];
  const double reads = seen.kinds[policy::WrKind::kRead];
  ASSERT_GT(reads, 1000);
  EXPECT_NEAR(writes / reads, 3.0, 0.3);
  EXPECT_NEAR(double(seen.sizes[64]) / seen.sizes[4096], 1.0, 0.1);
  EXPECT_EQ(seen.sizes.size(), 2u);
}

TEST(Runner, OpenLoopPostsAtTheRateWhateverTheCompletions) {
  // 2 processes x 200,000 messages/s of 16 B latency-mode WRITEs: far
  // below what the card can do, so each completes in its alone time.
  const ScenarioSpec s =
      One("{name: X, mode: latency, rate: 200000, qps: {processes: 2}}");
  const std::vector<TenantResult> r = RunScenario(s, PassThrough(), nullptr);
  EXPECT_NEAR(r[0].mmps, 0.4, 0.01);
  EXPECT_LT(r[0].p99_us, 3.0);
  // Offered above what one message in flight can carry: the backlog grows
  // and completion times (from arrival) with it.
  const ScenarioSpec over = One("{name: X, mode: latency, rate: 2000000}");
  const std::vector<TenantResult> o = RunScenario(over, PassThrough(), nullptr);
  EXPECT_LT(o[0].mmps, 0.5);
  EXPECT_GT(o[0].p99_us, 100.0);
}

TEST(Runner, ProcessesAreIndependentPostingLoops) {
  const std::string m =
      "{name: M, size: 16, batch: 32, depth: 128, qps: {processes: ";
  const double one =
      RunScenario(One(m + "1}}"), PassThrough(), nullptr)[0].mmps;
  const double four =
      RunScenario(One(m + "4}}"), PassThrough(), nullptr)[0].mmps;
  const double shared =
      RunScenario(One(m + "1, count: 4}}"), PassThrough(), nullptr)[0].mmps;
  EXPECT_NEAR(one, 13.0, 1.0) << "PeRF §2.3.2: ~13 Mmps from one QP";
  EXPECT_NEAR(four, 4 * one, 0.1 * 4 * one);
  // One loop over 4 QPs also fills each QP's depth.
  EXPECT_GT(shared, 3 * one);
}

TEST(Runner, UdTenantsSendThroughAddressHandlesAndNeedReceives) {
  // One MTU per SEND: the UD tenant fills the link like an RC one.
  Seen seen, receiver;
  const std::vector<TenantResult> r = RunScenario(
      One("{name: U, ops: send, qps: {type: ud, count: 2}, size: 4KiB, depth: 64}"),
      [&](const policy::CardProfile&, uint32_t host) {
        return std::make_unique<CountingPolicy>(host == 0 ? &seen : &receiver);
      },
      nullptr);
  EXPECT_GT(r[0].gbps, 90.0);
  EXPECT_EQ(r[0].errors, 0u);
  EXPECT_EQ(seen.kinds.size(), 1u);
  EXPECT_GT(seen.kinds[policy::WrKind::kSend], 1000u);
  // The receiver posts nothing: every SEND completes at the sender (UD has
  // no ACK) and is dropped at the receiver, so nothing is delivered.
  const std::vector<TenantResult> d = RunScenario(
      One("{name: U, ops: send, qps: {type: ud}, size: 4KiB, depth: 64, recv_depth: 0}"),
      PassThrough(), nullptr);
  EXPECT_GT(d[0].messages, 1000u);
  EXPECT_EQ(d[0].gbps, 0.0);
}

TEST(Runner, RcSendsIntoAReceiverThatNeverPostsReceives) {
  // rnr_retry 7 (the default): the sender retries for ever, nothing completes.
  const std::vector<TenantResult> forever = RunScenario(
      One("{name: X, ops: send, depth: 8, recv_depth: 0}"), PassThrough(), nullptr);
  EXPECT_EQ(forever[0].messages, 0u);
  EXPECT_EQ(forever[0].errors, 0u);
  // rnr_retry 0: the first RNR NAK fails the QP; its WRs complete in error
  // (the failing one and the flushed rest) and its guest stops posting.
  const std::vector<TenantResult> bounded = RunScenario(
      One("{name: X, ops: send, depth: 8, recv_depth: 0, rnr_retry: 0}"), PassThrough(),
      nullptr);
  EXPECT_EQ(bounded[0].messages, 0u);
  EXPECT_EQ(bounded[0].errors, 8u);
  // A receiver that keeps a few posted: the sender runs, slower than with
  // plenty (it waits out an RNR NAK whenever they run short).
  const double plenty =
      RunScenario(One("{name: X, ops: send, size: 16, depth: 64}"), PassThrough(), nullptr)[0]
          .mmps;
  const double few = RunScenario(One("{name: X, ops: send, size: 16, depth: 64, recv_depth: 4}"),
                                 PassThrough(), nullptr)[0]
                         .mmps;
  EXPECT_GT(few, 0.0);
  EXPECT_LT(few, plenty / 2);
}

TEST(Runner, AtomicsOfATenantSerialiseOnOneAddress) {
  // Each tenant's atomics hit one word of its own: one atomic unit
  // (atomic_cost 400 ns on cx6-100, 2.5 Mops) whatever the QPs.
  Seen seen, receiver;
  const std::vector<TenantResult> r = RunScenario(
      One("{name: A, ops: {cas: 1, faa: 1}, size: 4KiB, qps: {count: 4}, depth: 16}"),
      [&](const policy::CardProfile&, uint32_t host) {
        return std::make_unique<CountingPolicy>(host == 0 ? &seen : &receiver);
      },
      nullptr);
  EXPECT_NEAR(r[0].mmps, 2.5, 0.1);
  EXPECT_EQ(r[0].errors, 0u);
  EXPECT_GT(seen.kinds[policy::WrKind::kAtomic], 1000u);
  EXPECT_EQ(seen.sizes.size(), 1u);
  EXPECT_GT(seen.sizes[8], 0u) << "atomics carry 8 bytes whatever the size";
}

}  // namespace
}  // namespace vrdma::bench
