// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/vm_request.h"

#include "gtest/gtest.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

TEST(VmRequestTest, ParsesFullRequest) {
  json j = json::parse(R"({"cmd":"attach-vm","name":"tenant-a","socket":"/run/a.sock",
      "gids":["::ffff:192.0.2.10","fe80::1"],
      "quotas":{"max_qp":64,"max_pinned_bytes":4096},
      "qos":{"weight":3,"max_rate_bps":1000}})");
  AttachRequest r;
  std::string err;
  ASSERT_TRUE(ParseAttachRequest(j, &r, &err)) << err;
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
}

// Every quota the daemon knows is read from "quotas" and written back by
// QuotasJson under the same name (the attach-vm reply).
TEST(VmRequestTest, QuotasRoundTrip) {
  json quotas{{"max_pd", 1},           {"max_cq", 2},        {"max_qp", 3},
              {"max_mr", 4},           {"max_ah", 5},        {"max_srq", 6},
              {"max_pinned_bytes", 7}, {"max_host_bytes", 8}, {"max_mappings", 9}};
  json j{{"cmd", "attach-vm"}, {"name", "a"}, {"socket", "/run/a.sock"},
         {"gids", {"fe80::1"}}, {"quotas", quotas}};
  AttachRequest r;
  std::string err;
  ASSERT_TRUE(ParseAttachRequest(j, &r, &err)) << err;
  EXPECT_EQ(r.config.quotas.max_host_bytes, 8u);
  EXPECT_EQ(r.config.quotas.max_mappings, 9u);
  EXPECT_EQ(QuotasJson(r.config.quotas), quotas);
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
      R"({"name":"a","socket":"/s","gids":["::1"],"qos":{"weight":0}})",
      R"({"name":"a","socket":"/s","gids":["::1"],"qos":{"weight":1.5}})",
  };
  for (const char* text : bad) {
    AttachRequest r;
    std::string err;
    EXPECT_FALSE(ParseAttachRequest(json::parse(text), &r, &err)) << text;
    EXPECT_FALSE(err.empty()) << text;
  }
  std::string long_path(200, 'x');
  AttachRequest r;
  std::string err;
  EXPECT_FALSE(ParseAttachRequest(
      json{{"name", "a"}, {"socket", long_path}, {"gids", {"::1"}}}, &r, &err));
}

}  // namespace
}  // namespace vrdma::daemon
