// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "tests/integration/two_daemon_fixture.h"

#include <chrono>
#include <thread>

#include "backend/fabric/udp_address.h"
#include "backend/fabric/udp_fabric.h"

namespace vrdma::integration {

uint16_t FreeUdpPort() {
  fabric::UdpAddress a;
  if (!fabric::ParseUdpAddress("127.0.0.1:0", &a)) return 0;
  std::string error;
  auto f = fabric::UdpFabric::Open(a, {}, &error);
  if (f == nullptr) return 0;
  // "127.0.0.1:PORT" (<netinet/in.h> would clash with the guest ABI's
  // <linux/in.h> included before it).
  const std::string text = fabric::UdpAddressToString(f->local_address());
  const size_t colon = text.rfind(':');
  return colon == std::string::npos ? 0
                                    : static_cast<uint16_t>(std::stoul(text.substr(colon + 1)));
}

std::vector<std::string> FaultArgs(const std::string& spec, uint64_t seed) {
  return {"--fabric-fault", spec, "--fabric-fault-seed", std::to_string(seed)};
}

bool DaemonPair::Start(const std::vector<std::string>& extra, std::string* err,
                       const std::vector<std::string>& extra_a,
                       const std::vector<std::string>& extra_b) {
  const uint16_t pa = FreeUdpPort();
  uint16_t pb = FreeUdpPort();
  for (int i = 0; i < 10 && pb == pa; ++i) pb = FreeUdpPort();
  if (pa == 0 || pb == 0 || pa == pb) return *err = "no free UDP ports", false;
  listen_a_ = "127.0.0.1:" + std::to_string(pa);
  listen_b_ = "127.0.0.1:" + std::to_string(pb);
  std::vector<std::string> args_a = {"--fabric-listen", listen_a_, "--fabric-route",
                                     std::string(kGidB) + "=" + listen_b_};
  std::vector<std::string> args_b = {"--fabric-listen", listen_b_, "--fabric-route",
                                     std::string(kGidA) + "=" + listen_a_};
  if (peers_) {
    uint16_t qa = FreeUdpPort(), qb = FreeUdpPort();
    for (int i = 0; i < 10 && (qa == pa || qa == pb); ++i) qa = FreeUdpPort();
    for (int i = 0; i < 10 && (qb == pa || qb == pb || qb == qa); ++i) qb = FreeUdpPort();
    if (qa == 0 || qb == 0 || qa == qb) return *err = "no free UDP ports", false;
    peer_a_ = "127.0.0.1:" + std::to_string(qa);
    peer_b_ = "127.0.0.1:" + std::to_string(qb);
    args_a.insert(args_a.end(), {"--peer-listen", peer_a_, "--peer", peer_b_});
    args_b.insert(args_b.end(), {"--peer-listen", peer_b_, "--peer", peer_a_});
    if (layer_) {
      // Two software RNICs on this loaded 2-core host see RTTs of several
      // milliseconds when other processes run (CPU time slices, not
      // queues): the hardware path's 10 us delay target, and 1 ms too, keep
      // windows at their minimum, and a third of MixedMessages' runs beside
      // one busy loop crawled for tens of seconds; at 20 ms none of 14 did,
      // beside one or three (docs/reliability.md §10 step 19, §11 q10).
      for (auto* args : {&args_a, &args_b}) {
        args->insert(args->end(), {"--reliability-layer", "--reliability-target-us", "20000"});
      }
      args_a.insert(args_a.end(), {"--daemon-gid", kDaemonGidA, "--fabric-route",
                                   std::string(kDaemonGidB) + "=" + listen_b_});
      args_b.insert(args_b.end(), {"--daemon-gid", kDaemonGidB, "--fabric-route",
                                   std::string(kDaemonGidA) + "=" + listen_a_});
    }
  }
  args_a.insert(args_a.end(), extra.begin(), extra.end());
  args_b.insert(args_b.end(), extra.begin(), extra.end());
  args_a.insert(args_a.end(), extra_a.begin(), extra_a.end());
  args_b.insert(args_b.end(), extra_b.begin(), extra_b.end());
  if (!a_.Start(err, args_a)) return *err = "daemon A: " + *err, false;
  if (!b_.Start(err, args_b)) return *err = "daemon B: " + *err, false;
  return true;
}

std::string DaemonPair::Attach(DaemonHarness& d, const std::string& name, const char* gid,
                               const std::string& reliability) {
  if (reliability.empty()) return d.AttachVm(name, gid);
  const std::string sock = d.dir() + "/" + name + ".sock";
  const nlohmann::json r = d.Control({{"cmd", "attach-vm"},
                                      {"name", name},
                                      {"socket", sock},
                                      {"gids", {gid}},
                                      {"reliability", reliability}});
  if (!r.value("ok", false)) ADD_FAILURE() << "attach-vm " << name << ": " << r.dump();
  return r.value("ok", false) ? sock : "";
}

nlohmann::json DaemonPair::Peers(DaemonHarness& d) {
  const nlohmann::json stats = d.Control({{"cmd", "stats"}});
  if (!stats.value("ok", false) || !stats.contains("peers")) {
    ADD_FAILURE() << "stats without peers: " << stats.dump();
    return nullptr;
  }
  return stats["peers"];
}

void DaemonPair::Stop() {
  a_.Stop();
  b_.Stop();
}

FabricCounters DaemonPair::Counters(DaemonHarness& d) {
  FabricCounters c;
  const nlohmann::json stats = d.Control({{"cmd", "stats"}});
  if (!stats.value("ok", false) || !stats.contains("fabric")) {
    ADD_FAILURE() << "stats without a fabric: " << stats.dump();
    return c;
  }
  const nlohmann::json& f = stats["fabric"];
  c.raw = f;
  auto get = [&f](const char* group, const char* name) {
    return f.contains(group) ? f[group].value(name, uint64_t{0}) : uint64_t{0};
  };
  c.tx_packets = get("packets", "tx_packets");
  c.rx_packets = get("packets", "rx_packets");
  c.udp_sent = get("udp", "tx_packets");
  c.udp_delivered = get("udp", "delivered");
  c.lost = get("faults", "lost_random") + get("faults", "lost_burst");
  c.retransmitted = get("packets", "retransmitted");
  c.timeouts = get("packets", "timeouts");
  c.naks_sent = get("packets", "naks_sent");
  c.uc_messages_dropped = get("packets", "uc_messages_dropped");
  c.rx_unknown_source = get("udp", "rx_unknown_source");
  c.rx_kernel_drops = get("udp", "rx_kernel_drops");
  c.tx_dropped_busy = get("udp", "tx_dropped_busy");
  return c;
}

bool HasGid(const nlohmann::json& peers, const char* gid) {
  for (const auto& e : peers["gid_table"]) {
    if (e.value("gid", "") == gid) return true;
  }
  return false;
}

bool WaitPeers(DaemonPair& d,
               const std::function<bool(const nlohmann::json&, const nlohmann::json&)>& done,
               nlohmann::json* pa, nlohmann::json* pb) {
  for (int i = 0; i < 1000; ++i) {
    *pa = DaemonPair::Peers(d.a());
    *pb = DaemonPair::Peers(d.b());
    if (pa->is_null() || pb->is_null()) return false;
    if (done(*pa, *pb)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool WaitLayers(DaemonPair& d) {
  nlohmann::json pa, pb;
  const bool ok = WaitPeers(
      d,
      [](const nlohmann::json& a, const nlohmann::json& b) {
        return HasGid(a, kGidB) && HasGid(b, kGidA) && a["peers"][0]["layer"] == true &&
               b["peers"][0]["layer"] == true;
      },
      &pa, &pb);
  if (!ok) ADD_FAILURE() << "the layers never met:\n" << pa.dump() << "\n" << pb.dump();
  return ok;
}

void TwoDaemonTest::SetUp() {
  std::string err;
  ASSERT_TRUE(daemons_.Start(DaemonArgs(), &err)) << err;
  const std::string sa = daemons_.AttachA("vm-a");
  const std::string sb = daemons_.AttachB("vm-b");
  ASSERT_FALSE(sa.empty());
  ASSERT_FALSE(sb.empty());
  ASSERT_NO_FATAL_FAILURE(a_.Open(sa));
  ASSERT_NO_FATAL_FAILURE(b_.Open(sb));
}

void TwoDaemonTest::TearDown() {
  a_.Close();
  b_.Close();
  EXPECT_TRUE(daemons_.a().alive()) << "daemon A died";
  EXPECT_TRUE(daemons_.b().alive()) << "daemon B died";
  daemons_.Stop();
}

}  // namespace vrdma::integration
