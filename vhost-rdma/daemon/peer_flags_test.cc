// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The peer flags (peer_flags.h): ParsePeerFlags on good and bad values and
// the combinations that cannot work (each refusal names its flag), the
// stats "peers" object, and the real vhost-rdma-daemon started with them:
// two daemons find each other, each one's stats show the other's VM GIDs,
// a detach removes them; the layer starts over the software RNIC and
// attach-vm's "reliability" is taken or refused.
#include "vhost-rdma/daemon/peer_flags.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend/fabric/udp_fabric.h"
#include "vhost-rdma/daemon/control_client.h"
#include "vhost-rdma/daemon/testing/daemon_process.h"
#include "vhost-rdma/daemon/vm_request.h"

#ifndef VRDMA_DAEMON_BIN
#define VRDMA_DAEMON_BIN "vhost-rdma-daemon"
#endif

namespace vrdma::daemon {
namespace {

using testing::DaemonProcess;
using testing::FreePort;
using testing::PortOf;

TEST(PeerFlagsTest, NoFlagsNoChannel) {
  PeerConfig c;
  std::string error;
  ASSERT_TRUE(ParsePeerFlags({}, true, false, &c, &error)) << error;
  EXPECT_FALSE(c.enabled);
  EXPECT_FALSE(c.layer);
}

TEST(PeerFlagsTest, EveryFlag) {
  PeerFlags f;
  f.listen = "127.0.0.1:7000";
  f.peers = {"127.0.0.1:7001", "10.1.2.3:7000"};
  f.daemon_gid = "::ffff:10.9.0.1";
  f.reliability_layer = true;
  f.target_us = 1000;
  f.base_rtt_us = 4;
  f.packet_lifetime_us = 2500;
  PeerConfig c;
  std::string error;
  ASSERT_TRUE(ParsePeerFlags(f, true, true, &c, &error)) << error;
  EXPECT_TRUE(c.enabled);
  EXPECT_TRUE(c.layer);
  EXPECT_EQ(c.target_delay_ns, 1'000'000u);
  EXPECT_EQ(c.base_rtt_ns, 4'000u);
  EXPECT_EQ(c.packet_lifetime_ns, 2'500'000u);
  ASSERT_EQ(c.peers.size(), 2u);
  EXPECT_EQ(fabric::UdpAddressToString(c.peers[1]), "10.1.2.3:7000");
  EXPECT_EQ(GidToString(c.daemon_gid), "::ffff:10.9.0.1");
}

TEST(PeerFlagsTest, BadValuesAndCombinationsNameTheirFlag) {
  struct Case {
    PeerFlags f;
    bool soft = true, fabric = true;
    std::string message;
  } cases[] = {
      {{"", {"127.0.0.1:7001"}, "", false}, true, true, "--peer needs --peer-listen"},
      {{"127.0.0.1", {}, "", false}, true, true, "--peer-listen: "},
      {{"127.0.0.1:7000", {"nohost:1"}, "", false}, true, true, "--peer: "},
      {{"127.0.0.1:7000", {"127.0.0.1:0"}, "", false}, true, true, "port 0"},
      {{"127.0.0.1:7000", {"[::1]:7001"}, "", false}, true, true, "address family"},
      {{"127.0.0.1:7000", {"127.0.0.1:7001", "127.0.0.1:7001"}, "", false}, true, true,
       "given twice"},
      {{"127.0.0.1:7000", {}, "::ffff:10.0.0.9", false}, true, true,
       "--daemon-gid is the reliability layer's"},
      {{"127.0.0.1:7000", {}, "::", true}, true, true, "--daemon-gid: '::' is not a GID"},
      {{"", {}, "::ffff:10.0.0.9", true}, true, true, "--reliability-layer needs --peer-listen"},
      {{"127.0.0.1:7000", {}, "", true}, true, true, "--reliability-layer needs --daemon-gid"},
      {{"127.0.0.1:7000", {}, "::ffff:10.0.0.9", true}, true, false,
       "--reliability-layer needs --fabric-listen"},
      {{"127.0.0.1:7000", {}, "::ffff:10.0.0.9", true}, false, true,
       "--reliability-layer runs over --rnic soft only"},
      {{"127.0.0.1:7000", {}, "", false, 100}, true, true,
       "--reliability-target-us is the reliability layer's"},
      {{"127.0.0.1:7000", {}, "::ffff:10.0.0.9", true, 0.5}, true, true,
       "--reliability-target-us: 1 to 100000"},
      {{"127.0.0.1:7000", {}, "", false, -1, 50}, true, true,
       "--reliability-base-rtt-us is the reliability layer's"},
      {{"127.0.0.1:7000", {}, "::ffff:10.0.0.9", true, -1, 200'000}, true, true,
       "--reliability-base-rtt-us: 1 to 100000"},
      {{"127.0.0.1:7000", {}, "", false, -1, -1, 1000}, true, true,
       "--reliability-packet-lifetime-us is the reliability layer's"},
      {{"127.0.0.1:7000", {}, "::ffff:10.0.0.9", true, -1, -1, 0}, true, true,
       "--reliability-packet-lifetime-us: 1 to 10000000"},
  };
  for (const Case& c : cases) {
    PeerConfig out;
    std::string error;
    EXPECT_FALSE(ParsePeerFlags(c.f, c.soft, c.fabric, &out, &error)) << c.message;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
  PeerFlags many;
  many.listen = "127.0.0.1:7000";
  for (int i = 0; i < 17; ++i) many.peers.push_back("127.0.0.1:" + std::to_string(8000 + i));
  PeerConfig out;
  std::string error;
  EXPECT_FALSE(ParsePeerFlags(many, true, true, &out, &error));
  EXPECT_NE(error.find("at most 16 peers"), std::string::npos) << error;
}

TEST(PeerFlagsTest, StatsJson) {
  PeerFlags f;
  f.listen = "127.0.0.1:0";
  f.peers = {"127.0.0.1:9"};
  PeerConfig c;
  std::string error;
  ASSERT_TRUE(ParsePeerFlags(f, true, false, &c, &error)) << error;
  auto ch = OpenPeerChannel(c, &error);
  ASSERT_TRUE(ch) << error;
  const nlohmann::json j = PeerStatsJson(*ch);
  EXPECT_EQ(j["peers_known"], 0);
  ASSERT_EQ(j["peers"].size(), 1u);
  EXPECT_EQ(j["peers"][0]["address"], "127.0.0.1:9");
  EXPECT_EQ(j["peers"][0]["known"], false);
  for (const char* k : {"sent", "resent", "dropped", "malformed", "gid_table", "id", "listen"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
}


std::string Local(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

nlohmann::json Attach(DaemonProcess& d, const std::string& name, const std::string& gid,
                      const std::string& reliability = "") {
  nlohmann::json r{{"cmd", "attach-vm"},
                   {"name", name},
                   {"socket", d.dir() + "/" + name + ".sock"},
                   {"gids", {gid}}};
  if (!reliability.empty()) r["reliability"] = reliability;
  return d.Request(r);
}

// Waits until pred(stats) holds (10 s at most); returns the last stats.
template <typename Pred>
nlohmann::json WaitStats(DaemonProcess& d, Pred pred) {
  nlohmann::json st;
  for (int i = 0; i < 1000; ++i) {
    st = d.Stats();
    if (!st.is_null() && pred(st)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return st;
}

bool HasGid(const nlohmann::json& st, const std::string& gid) {
  for (const auto& e : st["peers"]["gid_table"]) {
    if (e["gid"] == gid) return true;
  }
  return false;
}

TEST(DaemonPeerFlagsTest, TwoDaemonsLearnEachOthersGids) {
  const uint16_t pa = FreePort(), pb = FreePort();
  DaemonProcess a({"--peer-listen", Local(pa), "--peer", Local(pb)});
  DaemonProcess b({"--peer-listen", Local(pb), "--peer", Local(pa)});
  ASSERT_TRUE(a.Serving()) << a.Log();
  ASSERT_TRUE(b.Serving()) << b.Log();
  EXPECT_NE(a.Log().find("peer channel: udp " + Local(pa)), std::string::npos) << a.Log();
  ASSERT_EQ(Attach(a, "va", "::ffff:10.0.0.1")["ok"], true);
  ASSERT_EQ(Attach(b, "vb", "::ffff:10.0.0.2")["ok"], true);
  nlohmann::json sa = WaitStats(a, [](const auto& s) { return HasGid(s, "::ffff:10.0.0.2"); });
  nlohmann::json sb = WaitStats(b, [](const auto& s) { return HasGid(s, "::ffff:10.0.0.1"); });
  EXPECT_TRUE(HasGid(sa, "::ffff:10.0.0.2")) << sa["peers"].dump();
  EXPECT_TRUE(HasGid(sb, "::ffff:10.0.0.1")) << sb["peers"].dump();
  EXPECT_FALSE(HasGid(sa, "::ffff:10.0.0.1"));  // its own are not in its table
  EXPECT_EQ(sa["peers"]["peers_known"], 1);
  EXPECT_EQ(sa["peers"]["peers"][0]["id"], sb["peers"]["id"]);
  EXPECT_EQ(sa["peers"]["peers"][0]["layer"], false);
  EXPECT_EQ(sa["peers"]["malformed"], 0);
  EXPECT_EQ(sa["vms"][0]["reliability"], "native");
  EXPECT_FALSE(sa["vms"][0].contains("reliability_counters"));  // no layer
  // Without the layer, uc is refused.
  nlohmann::json r = Attach(a, "vc", "::ffff:10.0.0.3", "uc");
  EXPECT_EQ(r["ok"], false);
  EXPECT_NE(r["error"].get<std::string>().find("--reliability-layer"), std::string::npos) << r;
  // ... and so is set-reliability to it; native is what the VM has.
  r = a.Request({{"cmd", "set-reliability"}, {"name", "va"}, {"mode", "uc"}});
  EXPECT_EQ(r["ok"], false);
  EXPECT_NE(r["error"].get<std::string>().find("--reliability-layer"), std::string::npos) << r;
  r = a.Request({{"cmd", "set-reliability"}, {"name", "va"}, {"mode", "native"}});
  EXPECT_EQ(r["ok"], true) << r;
  // A detach takes the GID out of the other's table.
  ASSERT_EQ(b.Request({{"cmd", "detach-vm"}, {"name", "vb"}})["ok"], true);
  sa = WaitStats(a, [](const auto& s) { return !HasGid(s, "::ffff:10.0.0.2"); });
  EXPECT_FALSE(HasGid(sa, "::ffff:10.0.0.2")) << sa["peers"].dump();
  // A stranger's datagram is counted and dropped.
  const int raw = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  fabric::UdpAddress to;
  ASSERT_TRUE(fabric::ParseUdpAddress(Local(pa), &to));
  const char junk[] = "not a peer message";
  ASSERT_GT(sendto(raw, junk, sizeof(junk), 0, to.sa(), to.len), 0);
  close(raw);
  sa = WaitStats(a, [](const auto& s) { return s["peers"]["unknown_sender"] == 1; });
  EXPECT_EQ(sa["peers"]["unknown_sender"], 1);
}

TEST(DaemonPeerFlagsTest, TheLayerStartsAndTakesUcVms) {
  const uint16_t pa = FreePort(), fa = FreePort();
  DaemonProcess a({"--peer-listen", Local(pa), "--peer", "127.0.0.1:9", "--fabric-listen",
                   Local(fa), "--daemon-gid", "::ffff:10.9.0.1", "--reliability-layer"});
  ASSERT_TRUE(a.Serving()) << a.Log();
  EXPECT_NE(a.Log().find("reliability layer, daemon GID ::ffff:10.9.0.1"), std::string::npos)
      << a.Log();
  nlohmann::json r = Attach(a, "va", "::ffff:10.0.0.1", "uc");
  ASSERT_EQ(r["ok"], true) << r;
  r = Attach(a, "vc", "::ffff:10.0.0.3", "fast");
  EXPECT_EQ(r["ok"], false);
  r = Attach(a, "vb", "::ffff:10.0.0.2", "rc");
  ASSERT_EQ(r["ok"], true) << r;
  const nlohmann::json st = a.Stats();
  ASSERT_EQ(st["vms"].size(), 2u) << st["vms"].dump();
  std::vector<std::string> modes = {st["vms"][0]["reliability"], st["vms"][1]["reliability"]};
  std::sort(modes.begin(), modes.end());
  EXPECT_EQ(modes, (std::vector<std::string>{"rc", "uc"}));
  EXPECT_EQ(st["peers"]["local_gids"], 2);
  EXPECT_EQ(st["reliability"]["rc_takeovers"], 0) << st["reliability"].dump();
  // Each VM's counters, the daemon-wide object's names.
  for (const nlohmann::json& vm : st["vms"]) {
    ASSERT_TRUE(vm.contains("reliability_counters")) << vm.dump();
    EXPECT_EQ(vm["reliability_counters"].size(), st["reliability"].size());
    for (const auto& [key, value] : st["reliability"].items()) {
      EXPECT_TRUE(vm["reliability_counters"].contains(key)) << key;
    }
    EXPECT_EQ(vm["reliability_counters"]["rc_takeovers"], 0);
    EXPECT_EQ(vm["reliability_counters"]["chunks_sent"], 0);
  }
  // The layer's HELLO went out (its sends to a peer that never answers).
  EXPECT_GE(st["peers"]["sent"].get<uint64_t>(), 2u) << st["peers"].dump();
  ASSERT_EQ(a.Request({{"cmd", "detach-vm"}, {"name", "va"}})["ok"], true);
}

TEST(DaemonPeerFlagsTest, SetReliabilityChangesAVmsModeAndRefusesNonsense) {
  const uint16_t pa = FreePort(), fa = FreePort();
  DaemonProcess a({"--peer-listen", Local(pa), "--peer", "127.0.0.1:9", "--fabric-listen",
                   Local(fa), "--daemon-gid", "::ffff:10.9.0.1", "--reliability-layer"});
  ASSERT_TRUE(a.Serving()) << a.Log();
  ASSERT_EQ(Attach(a, "va", "::ffff:10.0.0.1")["ok"], true);
  auto set = [&](const nlohmann::json& request) {
    nlohmann::json r = request;
    r["cmd"] = "set-reliability";
    return a.Request(r);
  };
  for (const char* mode : {"uc", "rc", "native", "uc"}) {
    const nlohmann::json r = set({{"name", "va"}, {"mode", mode}});
    ASSERT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["mode"], mode);
    EXPECT_EQ(a.Stats()["vms"][0]["reliability"], mode);
  }
  EXPECT_NE(a.Log().find("VM va: reliability rc -> native"), std::string::npos) << a.Log();
  // A refusal changes nothing and says why.
  struct Bad {
    nlohmann::json request;
    std::string error;
  } bad[] = {
      {{{"name", "va"}, {"mode", "fast"}}, "mode: native, rc or uc, not \"fast\""},
      {{{"name", "va"}, {"mode", 2}}, "mode: native, rc or uc, not 2"},
      {{{"name", "va"}}, "mode required (native, rc or uc)"},
      {{{"name", "nobody"}, {"mode", "rc"}}, "no such VM: nobody"},
      {{{"mode", "rc"}}, "name required"},
  };
  for (const Bad& b : bad) {
    const nlohmann::json r = set(b.request);
    EXPECT_EQ(r["ok"], false) << b.request;
    EXPECT_EQ(r.value("error", ""), b.error) << r;
  }
  const nlohmann::json vm = a.Stats()["vms"][0];
  EXPECT_EQ(vm["reliability"], "uc");
  // No QP yet: none in any mode.
  for (const char* k : {"qps_native", "qps_rc", "qps_uc", "qps_switching"}) {
    EXPECT_EQ(vm.value(k, -1), 0) << k << " " << vm.dump();
  }
}

TEST(DaemonPeerFlagsTest, BadCombinationsStopTheDaemonAtStartUp) {
  const std::string listen = Local(FreePort());
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--reliability-layer"}, "--reliability-layer needs --peer-listen"},
      {{"--peer", "127.0.0.1:9"}, "--peer needs --peer-listen"},
      {{"--peer-listen", listen, "--reliability-layer", "--daemon-gid", "::ffff:10.9.0.1"},
       "--reliability-layer needs --fabric-listen"},
      {{"--peer-listen", "127.0.0.1:x"}, "--peer-listen: "},
  };
  for (const Case& c : cases) {
    DaemonProcess d(c.args);
    EXPECT_EQ(d.Wait(std::chrono::seconds(10)), 2) << c.message << "\n" << d.Log();
    EXPECT_NE(d.Log().find(c.message), std::string::npos) << d.Log();
  }
}

}  // namespace
}  // namespace vrdma::daemon
