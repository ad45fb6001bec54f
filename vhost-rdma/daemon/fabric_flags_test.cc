// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The fabric flags: ParseFabricFlags on good and bad values (each refusal
// names its flag and reason), OpenFabric's socket, routes and faults, and
// the real vhost-rdma-daemon started with them: it holds the UDP port and
// serves its control socket, and a bad value stops it at start-up (exit
// status 2) with the message these tests expect.
#include "vhost-rdma/daemon/fabric_flags.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "vhost-rdma/daemon/control_client.h"
#include "vhost-rdma/daemon/testing/daemon_process.h"

#ifndef VRDMA_DAEMON_BIN
#define VRDMA_DAEMON_BIN "vhost-rdma-daemon"
#endif

namespace vrdma::daemon {
namespace {

using testing::DaemonProcess;
using testing::FreePort;
using testing::PortOf;

Gid G(uint8_t last) { return Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last}; }

TEST(FabricFlagsTest, NoFlagsNoFabric) {
  FabricConfig c;
  std::string error;
  ASSERT_TRUE(ParseFabricFlags({}, &c, &error)) << error;
  EXPECT_FALSE(c.enabled);
  EXPECT_FALSE(c.faulty);
}

TEST(FabricFlagsTest, EveryFlag) {
  FabricFlags f;
  f.listen = "127.0.0.1:7400";
  f.fault = "loss=0.01,burst=0.001:0.3,reorder=0.01:20us,dup=0.005,delay=10us:5us,"
            "bottleneck=10gbps:256KiB";
  f.fault_seed = 9;
  f.routes = {"fe80::2=127.0.0.1:7401", "::ffff:10.0.0.3=127.0.0.2:7402"};
  FabricConfig c;
  std::string error;
  ASSERT_TRUE(ParseFabricFlags(f, &c, &error)) << error;
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(fabric::UdpAddressToString(c.listen), "127.0.0.1:7400");
  ASSERT_TRUE(c.faulty);
  EXPECT_DOUBLE_EQ(c.faults.loss, 0.01);
  EXPECT_EQ(c.faults.reorder_delay_ns, 20'000u);
  EXPECT_EQ(c.faults.bottleneck_bytes, 256u * 1024);
  EXPECT_EQ(c.fault_seed, 9u);
  ASSERT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.routes[0].gid, G(2));
  EXPECT_EQ(fabric::UdpAddressToString(c.routes[0].to), "127.0.0.1:7401");
  const Gid mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 3};
  EXPECT_EQ(c.routes[1].gid, mapped);
  EXPECT_EQ(fabric::UdpAddressToString(c.routes[1].to), "127.0.0.2:7402");
}

TEST(FabricFlagsTest, BadValuesNameTheirFlagAndReason) {
  struct Case {
    FabricFlags flags;
    const char* message;
  } cases[] = {
      {{.fault = "loss=0.1"}, "--fabric-fault needs --fabric-listen"},
      {{.routes = {"fe80::2=127.0.0.1:1"}}, "--fabric-route needs --fabric-listen"},
      {{.listen = "localhost:7400"}, "--fabric-listen: not a numeric IPv4 address"},
      {{.listen = "127.0.0.1:70000"}, "--fabric-listen: a port that is not a number"},
      {{.listen = "127.0.0.1:0", .fault = "loss=2"},
       "--fabric-fault: a value out of range or without its unit in 'loss=2'"},
      {{.listen = "127.0.0.1:0", .fault = "drop=0.1"},
       "--fabric-fault: an unknown key in 'drop=0.1'"},
      {{.listen = "127.0.0.1:0", .routes = {"fe80::2"}},
       "--fabric-route: 'fe80::2' is not GID=ADDR:PORT"},
      {{.listen = "127.0.0.1:0", .routes = {"nonsense=127.0.0.1:1"}},
       "--fabric-route: 'nonsense' is not a GID"},
      {{.listen = "127.0.0.1:0", .routes = {"::=127.0.0.1:1"}},
       "--fabric-route: '::' is not a GID"},
      {{.listen = "127.0.0.1:0", .routes = {"fe80::2=127.0.0.1:0"}},
       "--fabric-route: port 0"},
      {{.listen = "127.0.0.1:0", .routes = {"fe80::2=[::1]:7000"}},
       "not the address family of --fabric-listen"},
      {{.listen = "127.0.0.1:0", .routes = {"fe80::2=127.0.0.1:1", "fe80::2=127.0.0.1:2"}},
       "--fabric-route: GID fe80::2 is routed twice"},
  };
  for (const Case& c : cases) {
    FabricConfig out;
    std::string error;
    EXPECT_FALSE(ParseFabricFlags(c.flags, &out, &error)) << c.message;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
}

TEST(FabricFlagsTest, OpenFabricBindsRoutesAndAddsFaults) {
  FabricFlags f;
  f.listen = "127.0.0.1:0";
  f.routes = {"fe80::2=127.0.0.1:7401"};
  FabricConfig c;
  std::string error;
  ASSERT_TRUE(ParseFabricFlags(f, &c, &error)) << error;
  auto plain = OpenFabric(c, &error);
  ASSERT_NE(plain, nullptr) << error;
  EXPECT_NE(PortOf(plain->udp->local_address()), 0);
  EXPECT_EQ(plain->udp->num_routes(), 1u);
  EXPECT_EQ(plain->port(), plain->udp.get());  // no faults: the socket itself
  f.fault = "loss=1";
  ASSERT_TRUE(ParseFabricFlags(f, &c, &error)) << error;
  auto lossy = OpenFabric(c, &error);
  ASSERT_NE(lossy, nullptr) << error;
  ASSERT_NE(lossy->faulty, nullptr);
  EXPECT_EQ(lossy->port(), lossy->faulty.get());
  // Everything sent through the port meets the faults first: all lost.
  const uint8_t packet[64] = {};
  lossy->port()->Send(packet, G(2), 0);
  lossy->udp->Flush();
  EXPECT_EQ(lossy->faulty->fault_stats().lost_random, 1u);
  EXPECT_EQ(lossy->udp->stats().sent, 0u);
  // A port another socket holds.
  c.listen = plain->udp->local_address();
  EXPECT_EQ(OpenFabric(c, &error), nullptr);
  EXPECT_NE(error.find("--fabric-listen: bind 127.0.0.1:"), std::string::npos) << error;
}

TEST(FabricFlagsTest, StatsJsonCarriesEveryCounterGroup) {
  FabricSnapshot s;
  ASSERT_TRUE(fabric::ParseUdpAddress("127.0.0.1:7400", &s.listen));
  s.routes = 3;
  s.udp.tx_packets = 11;
  s.udp.rx_unknown_source = 2;
  s.udp.rx_kernel_drops = 5;
  nlohmann::json j = FabricStatsJson(s);
  EXPECT_EQ(j["listen"], "127.0.0.1:7400");
  EXPECT_EQ(j["routes"], 3);
  EXPECT_EQ(j["udp"]["tx_packets"], 11);
  EXPECT_EQ(j["udp"]["rx_unknown_source"], 2);
  EXPECT_EQ(j["udp"]["rx_kernel_drops"], 5);
  EXPECT_FALSE(j.contains("faults"));  // none asked for
  EXPECT_FALSE(j.contains("packets"));
  s.faulty = true;
  s.faults.lost_random = 4;
  s.held.hold_full = 1;
  s.has_net = true;
  s.net.retransmitted = 6;
  s.net.dropped[static_cast<size_t>(NetDrop::kSequence)] = 2;
  s.net.dropped[static_cast<size_t>(NetDrop::kQkey)] = 1;
  j = FabricStatsJson(s);
  EXPECT_EQ(j["faults"]["lost_random"], 4);
  EXPECT_EQ(j["faults"]["hold_full"], 1);
  EXPECT_EQ(j["packets"]["retransmitted"], 6);
  EXPECT_EQ(j["packets"]["dropped"][static_cast<size_t>(NetDrop::kSequence)], 2);
  EXPECT_EQ(j["packets"]["dropped"].size(), static_cast<size_t>(NetDrop::kCount));
  EXPECT_EQ(j["packets"]["dropped_total"], 3);
}


// Whether a UDP socket can bind 127.0.0.1:port now.
bool PortFree(uint16_t port) {
  fabric::UdpAddress a;
  EXPECT_TRUE(fabric::ParseUdpAddress("127.0.0.1:" + std::to_string(port), &a));
  std::string error;
  return fabric::UdpFabric::Open(a, {}, &error) != nullptr;
}

TEST(DaemonFabricFlagsTest, TheFlagsStartADaemonOnAUdpFabric) {
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  DaemonProcess d({"--fabric-listen", listen, "--fabric-route", "fe80::2=127.0.0.1:9",
                   "--fabric-route", "fe80::3=127.0.0.1:9", "--fabric-fault",
                   "loss=0.01,delay=10us:5us", "--fabric-fault-seed", "7"});
  ASSERT_TRUE(d.Serving()) << d.Log();
  // The daemon holds the port, with the routes and faults it was given.
  EXPECT_FALSE(PortFree(port));
  EXPECT_NE(d.Log().find("fabric: udp " + listen + " (2 routes"), std::string::npos)
      << d.Log();
  EXPECT_NE(d.Log().find("faults loss=0.01,delay=10us:5us seed 7"), std::string::npos)
      << d.Log();
  // Its stats show the fabric; a datagram from a stranger reaches the
  // daemon's data path (woken by the socket) and is counted, not used.
  nlohmann::json st = d.Stats();
  ASSERT_TRUE(st.contains("fabric")) << st.dump();
  EXPECT_EQ(st["fabric"]["listen"], listen);
  EXPECT_EQ(st["fabric"]["routes"], 2);
  EXPECT_EQ(st["fabric"]["faults"]["lost_random"], 0);
  EXPECT_EQ(st["fabric"]["packets"]["rx_packets"], 0);
  const int raw = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  fabric::UdpAddress to;
  ASSERT_TRUE(fabric::ParseUdpAddress(listen, &to));
  const char junk[] = "not a fabric datagram";
  ASSERT_EQ(sendto(raw, junk, sizeof(junk), 0, to.sa(), to.len),
            static_cast<ssize_t>(sizeof(junk)));
  close(raw);
  uint64_t unknown = 0;
  for (int i = 0; i < 200 && unknown == 0; ++i) {
    st = d.Stats();
    unknown = st["fabric"]["udp"].value("rx_unknown_source", uint64_t{0});
    if (unknown == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(unknown, 1u) << st.dump();
  EXPECT_EQ(st["fabric"]["udp"]["delivered"], 0);
  // Without the flags: no fabric, and the port stays free.
  DaemonProcess plain({});
  ASSERT_TRUE(plain.Serving()) << plain.Log();
  EXPECT_EQ(plain.Log().find("fabric:"), std::string::npos) << plain.Log();
  EXPECT_FALSE(plain.Stats().contains("fabric"));
  EXPECT_EQ(d.Wait(std::chrono::seconds(0)), -1);  // still running
}

TEST(DaemonFabricFlagsTest, BadValuesStopTheDaemonAtStartUp) {
  const uint16_t port = FreePort();
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  fabric::UdpAddress taken_addr;
  ASSERT_TRUE(fabric::ParseUdpAddress("127.0.0.1:0", &taken_addr));
  std::string error;
  auto taken = fabric::UdpFabric::Open(taken_addr, {}, &error);
  ASSERT_NE(taken, nullptr) << error;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--fabric-listen", listen, "--fabric-fault", "loss=0.01,reorder=0.01"},
       "--fabric-fault: a value out of range or without its unit in 'reorder=0.01'"},
      {{"--fabric-fault", "loss=0.01"}, "--fabric-fault needs --fabric-listen"},
      {{"--fabric-listen", listen, "--fabric-route", "fe80::2=127.0.0.1"},
       "--fabric-route: no ':PORT'"},
      {{"--fabric-listen", UdpAddressToString(taken->local_address())},
       "--fabric-listen: bind " + UdpAddressToString(taken->local_address())},
      {{"--rnic", "mlx5_nonexistent", "--fabric-listen", listen},
       "--fabric-listen is for --rnic soft only"},
  };
  for (const Case& c : cases) {
    DaemonProcess d(c.args);
    EXPECT_EQ(d.Wait(std::chrono::seconds(10)), 2) << c.message << "\n" << d.Log();
    EXPECT_NE(d.Log().find(c.message), std::string::npos) << d.Log();
  }
}

}  // namespace
}  // namespace vrdma::daemon
