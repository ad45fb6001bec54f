// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/vm_request.h"

#include "gtest/gtest.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

// The card requests are checked against: the default 100 GbE, 105 M msg/s.
const policy::CardProfile kCard{};

TEST(VmRequestTest, ParsesFullRequest) {
  json j = json::parse(R"({"cmd":"attach-vm","name":"tenant-a","socket":"/run/a.sock",
      "gids":["::ffff:192.0.2.10","fe80::1"],
      "quotas":{"max_qp":64,"max_pinned_bytes":4096},
      "qos":{"weight":3,"max_rate_bps":1000}})");
  AttachRequest r;
  std::string err;
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  EXPECT_EQ(r.config.name, "tenant-a");
  EXPECT_EQ(r.socket_path, "/run/a.sock");
  ASSERT_EQ(r.config.gids.size(), 2u);
  const Gid v4{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 10};
  EXPECT_EQ(r.config.gids[0], v4);
  EXPECT_EQ(r.config.gids[1][0], 0xfe);
  EXPECT_EQ(r.config.gids[1][15], 1);
  EXPECT_EQ(r.config.quotas.max_qp, 64u);
  EXPECT_EQ(r.config.quotas.max_pinned_bytes, 4096u);
  EXPECT_EQ(r.config.quotas.max_mr, engine::Quotas{}.max_mr);  // default kept
  EXPECT_EQ(r.config.qos.weight, 3u);
  EXPECT_EQ(r.config.qos.max_rate_bps, 1000u);
  EXPECT_EQ(GidToString(r.config.gids[0]), "::ffff:192.0.2.10");
  EXPECT_FALSE(r.config.mac.has_value()) << "no mac: the InfiniBand-layer port";
}

TEST(VmRequestTest, ReliabilityMode) {
  json j = json::parse(R"({"name":"a","socket":"/run/a.sock","gids":["::ffff:10.0.0.1"]})");
  AttachRequest r;
  std::string err;
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  EXPECT_EQ(r.reliability, ReliabilityMode::kNative);
  j["reliability"] = "uc";
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  EXPECT_EQ(r.reliability, ReliabilityMode::kUc);
  EXPECT_STREQ(ReliabilityName(r.reliability), "uc");
  j["reliability"] = "native";
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  EXPECT_EQ(r.reliability, ReliabilityMode::kNative);
  j["reliability"] = "rc";
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  EXPECT_EQ(r.reliability, ReliabilityMode::kRc);
  EXPECT_STREQ(ReliabilityName(r.reliability), "rc");
  j["reliability"] = 2;
  EXPECT_FALSE(ParseAttachRequest(j, kCard, &r, &err));
  EXPECT_NE(err.find("reliability: native, rc or uc"), std::string::npos) << err;
}

TEST(VmRequestTest, MacOfTheVmsNic) {
  json j = json::parse(R"({"name":"a","socket":"/run/a.sock","gids":["::ffff:10.0.0.1"],
                           "mac":"52:54:00:AB:cd:01"})");
  AttachRequest r;
  std::string err;
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  ASSERT_TRUE(r.config.mac.has_value());
  EXPECT_EQ(MacToString(*r.config.mac), "52:54:00:ab:cd:01");
  for (const char* bad : {"52:54:00:ab:cd", "52:54:00:ab:cd:01:02", "01:00:5e:00:00:01",
                          "00:00:00:00:00:00", "52-54-00-ab-cd-01", "52:54:00:ab:cd:0g",
                          " 2:54:00:ab:cd:01", "52:54:00:ab:cd:+1"}) {
    j["mac"] = bad;
    err.clear();
    EXPECT_FALSE(ParseAttachRequest(j, kCard, &r, &err)) << bad;
    EXPECT_NE(err.find("mac:"), std::string::npos) << err;
  }
  j["mac"] = 5;
  EXPECT_FALSE(ParseAttachRequest(j, kCard, &r, &err));
}

// Every quota the daemon knows is read from "quotas" and written back by
// QuotasJson under the same name (the attach-vm reply).
TEST(VmRequestTest, QuotasRoundTrip) {
  json quotas{{"max_pd", 1},           {"max_cq", 2},        {"max_qp", 3},
              {"max_mr", 4},           {"max_ah", 5},        {"max_srq", 6},
              {"max_mw", 10},          {"kernel_verbs", true}, {"max_fr_mr", 11},
              {"max_pinned_bytes", 7}, {"max_host_bytes", 8}, {"max_mappings", 9}};
  json j{{"cmd", "attach-vm"}, {"name", "a"}, {"socket", "/run/a.sock"},
         {"gids", {"fe80::1"}}, {"quotas", quotas}};
  AttachRequest r;
  std::string err;
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  EXPECT_EQ(r.config.quotas.max_host_bytes, 8u);
  EXPECT_EQ(r.config.quotas.max_mappings, 9u);
  EXPECT_EQ(r.config.quotas.max_mw, 10u);
  EXPECT_TRUE(r.config.quotas.kernel_verbs);
  EXPECT_EQ(r.config.quotas.max_fr_mr, 11u);
  EXPECT_EQ(QuotasJson(r.config.quotas), quotas);
}

// Kernel consumers are the operator's opt-in: off unless asked for.
TEST(VmRequestTest, KernelVerbsDefaultOff) {
  json j{{"cmd", "attach-vm"}, {"name", "a"}, {"socket", "/run/a.sock"}, {"gids", {"fe80::1"}}};
  AttachRequest r;
  std::string err;
  ASSERT_TRUE(ParseAttachRequest(j, kCard, &r, &err)) << err;
  EXPECT_FALSE(r.config.quotas.kernel_verbs);
  EXPECT_EQ(r.config.quotas.max_fr_mr, 1024u);
}

TEST(VmRequestTest, RejectsBadRequests) {
  const char* bad[] = {
      R"([1,2])",
      R"({"name":"a","socket":"/s"})",                                   // no gids
      R"({"name":"a","socket":"/s","gids":[]})",
      R"({"name":"a","socket":"/s","gids":["1.2.3.4"]})",               // not IPv6
      R"({"name":"a","socket":"/s","gids":[7]})",
      R"({"name":"a","socket":"/s","gids":["::1","::1"]})",             // duplicate
      R"({"name":"a","socket":"/s","gids":["::1","::2","::3","::4","::5","::6","::7","::8","::9"]})",
      R"({"name":"","socket":"/s","gids":["::1"]})",
      R"({"name":"a/b","socket":"/s","gids":["::1"]})",
      R"({"name":"a b","socket":"/s","gids":["::1"]})",
      R"({"socket":"/s","gids":["::1"]})",
      R"({"name":"a","gids":["::1"]})",
      R"({"name":"a","socket":"","gids":["::1"]})",
      R"({"name":"a","socket":7,"gids":["::1"]})",
      R"({"name":"a","socket":"/s","gids":["::1"],"quotas":{"max_qp":-1}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"quotas":{"max_qp":4294967296}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"quotas":{"max_qp":"x"}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"quotas":[]})",
      R"({"name":"a","socket":"/s","gids":["::1"],"quotas":{"kernel_verbs":1}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"quotas":{"kernel_verbs":"yes"}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"quotas":{"max_fr_mr":-1}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"qos":{"weight":0}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"qos":{"weight":1.5}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"qos":{"max_rate_bps":2e11}})",
  };
  for (const char* text : bad) {
    AttachRequest r;
    std::string err;
    EXPECT_FALSE(ParseAttachRequest(json::parse(text), kCard, &r, &err)) << text;
    EXPECT_FALSE(err.empty()) << text;
  }
  std::string long_path(200, 'x');
  AttachRequest r;
  std::string err;
  EXPECT_FALSE(ParseAttachRequest(
      json{{"name", "a"}, {"socket", long_path}, {"gids", {"::1"}}}, kCard, &r, &err));
}

// Every QoS field is read from "qos" and written back by QosJson under the
// same name (stats' "qos", the set-qos reply).
TEST(VmRequestTest, QosRoundTrip) {
  const json qos{{"weight", 3},          {"class", "throughput"},
                 {"latency_target_ns", 5000}, {"max_rate_bps", 40000000000},
                 {"max_msgs_per_s", 2000000}, {"min_rate_bps", 10000000000}};
  policy::TenantQos q;
  std::string err;
  ASSERT_TRUE(ParseQos(qos, kCard, &q, &err)) << err;
  EXPECT_EQ(q.max_msgs_per_s, 2000000u);
  EXPECT_EQ(q.min_rate_bps, 10000000000u);
  EXPECT_EQ(QosJson(q), qos);
  EXPECT_EQ(EffectiveQosJson(q, policy::kQosWeight | policy::kQosMinRate),
            (json{{"weight", 3}, {"min_rate_bps", 10000000000}}));
  EXPECT_EQ(EffectiveQosJson(q, 0), json::object());
}

TEST(VmRequestTest, QosNumbersAreIntegersAnyWayJsonWritesThem) {
  policy::TenantQos q;
  std::string err;
  ASSERT_TRUE(ParseQos(json::parse(R"({"max_rate_bps":25e9,"weight":2.0})"), kCard, &q, &err))
      << err;
  EXPECT_EQ(q.max_rate_bps, 25000000000u);
  EXPECT_EQ(q.weight, 2u);
}

// Each bad value is refused with an error that names the field, and the
// QoS it would have changed stays as it was.
TEST(VmRequestTest, RefusesBadQosNamingTheFieldAndKeepsTheOld) {
  policy::CardProfile card;
  card.line_rate_bps = 25e9;
  card.max_msgs_per_s = 20e6;
  struct Case {
    const char* qos;
    const char* error;  // how the error starts
  };
  const Case cases[] = {
      {R"({"weight":0})", "qos.weight: must be >= 1"},
      {R"({"weight":-2})", "qos.weight: must not be negative"},
      {R"({"weight":1.5})", "qos.weight: must be an integer"},
      {R"({"weight":"2"})", "qos.weight: must be a non-negative integer"},
      {R"({"weight":4294967296})", "qos.weight: is out of range"},
      {R"({"latency_target_ns":-1})", "qos.latency_target_ns: must not be negative"},
      {R"({"max_rate_bps":-1})", "qos.max_rate_bps: must not be negative"},
      {R"({"max_rate_bps":26000000000})", "qos.max_rate_bps: 26000000000 is above the card's"},
      {R"({"max_msgs_per_s":0.5})", "qos.max_msgs_per_s: must be an integer"},
      {R"({"max_msgs_per_s":20000001})", "qos.max_msgs_per_s: 20000001 is above the card's"},
      {R"({"min_rate_bps":30000000000})", "qos.min_rate_bps: 30000000000 is above the card's"},
      {R"({"min_rate_bps":2000000000})", "qos.min_rate_bps: 2000000000 is above max_rate_bps"},
      {R"({"class":"bulk"})", "qos.class: must be"},
      {R"({"class":2})", "qos.class: must be"},
      {R"({"weigth":2})", "qos.weigth: unknown field"},
      {R"([])", "qos: must be an object"},
  };
  for (const Case& c : cases) {
    const json j = json::parse(c.qos);
    policy::TenantQos q;
    q.weight = 7;
    q.max_rate_bps = 1000000000;
    const policy::TenantQos before = q;
    std::string err;
    EXPECT_FALSE(ParseQos(j, card, &q, &err)) << c.qos;
    EXPECT_EQ(err.rfind(c.error, 0), 0u) << c.qos << ": " << err;
    EXPECT_EQ(q, before) << c.qos;
  }
}

// A set-qos naming one field is checked with the others in force: the
// guarantee may not pass the cap the VM already has.
TEST(VmRequestTest, QosIsCheckedWithTheFieldsAlreadyInForce) {
  policy::TenantQos q;
  q.max_rate_bps = 1000;
  std::string err;
  EXPECT_FALSE(ParseQos(json{{"min_rate_bps", 2000}}, kCard, &q, &err));
  EXPECT_TRUE(ParseQos(json{{"min_rate_bps", 1000}}, kCard, &q, &err)) << err;
  EXPECT_TRUE(ParseQos(json{{"max_rate_bps", 0}}, kCard, &q, &err)) << err;
  EXPECT_TRUE(ParseQos(json{{"min_rate_bps", 2000}}, kCard, &q, &err)) << err;
}

}  // namespace
}  // namespace vrdma::daemon
