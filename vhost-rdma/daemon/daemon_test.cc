// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The daemon in-process with its real parts (SoftRnic, engine, RdmaDevice,
// both loops on their own threads), driven through its control socket and
// by the in-process vhost-user frontend as QEMU would.
#include "vhost-rdma/daemon/daemon.h"

#include <linux/virtio_config.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/base/executor_mailbox.h"
#include "backend/soft_rnic/soft_rnic.h"
#include "gtest/gtest.h"
#include "backend/memory/testing/test_mappings.h"
#include "vhost-rdma/abi/virtio_rdma.h"
#include "vhost-rdma/daemon/unix_socket.h"
#include "vhost-rdma/vhost_user/frontend.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Pass-through that records the QoS it is told, and on which thread, and
// applies all of it (its EffectiveQos is what it was told last).
class QosRecordingPolicy final : public policy::SchedulerPolicy {
 public:
  std::string_view name() const override { return "qos-recording"; }
  void OnTenantAdded(policy::TenantId t, const policy::TenantQos& q) override { Note(t, q); }
  void OnTenantQosChanged(policy::TenantId t, const policy::TenantQos& q) override {
    Note(t, q);
  }
  void OnTenantRemoved(policy::TenantId) override {}
  void OnFlowAdded(policy::Nanos, const policy::FlowInfo&) override {}
  void OnFlowEnded(policy::Nanos, policy::FlowId, policy::FlowEnd) override {}
  void OnArrival(policy::Nanos, const policy::WrInfo&) override {}
  void OnCompleted(policy::Nanos, const policy::WrInfo&, policy::Nanos, bool) override {}
  void ReportTenant(policy::TenantId, policy::ReportSink& sink) const override {
    std::lock_guard<std::mutex> l(mu_);
    sink.EffectiveQos(last_, policy::kQosWeight | policy::kQosLatencyTarget |
                                 policy::kQosMaxRate | policy::kQosMaxMsgs |
                                 policy::kQosMinRate | policy::kQosClass);
  }

  policy::TenantQos last() const {
    std::lock_guard<std::mutex> l(mu_);
    return last_;
  }
  std::thread::id thread() const {
    std::lock_guard<std::mutex> l(mu_);
    return thread_;
  }
  int calls() const {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }

 private:
  void Note(policy::TenantId, const policy::TenantQos& q) {
    std::lock_guard<std::mutex> l(mu_);
    last_ = q;
    thread_ = std::this_thread::get_id();
    ++calls_;
  }
  mutable std::mutex mu_;
  policy::TenantQos last_;
  std::thread::id thread_;
  int calls_ = 0;
};

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/vrdma-daemon-test-" + std::to_string(getpid());
    mkdir(dir_.c_str(), 0700);
    datapath_loop_ = EpollEventLoop::Create();
    control_loop_ = EpollEventLoop::Create();
    executor_ = MailboxExecutor::Create(*datapath_loop_);
    engine_ = engine::Engine::Create(rnic_, *executor_, policy_);
    ASSERT_NE(engine_, nullptr);
    poller_ = device::RegisterEnginePoller(*datapath_loop_, *engine_);
    datapath_ = std::thread([this] { datapath_loop_->Run(); });
    DaemonDeps deps;
    deps.engine = engine_.get();
    deps.control_loop = control_loop_.get();
    deps.datapath_loop = datapath_loop_.get();
    deps.datapath_executor = executor_.get();
    // A 25 GbE card that does 20 M messages/s: what QoS is checked against.
    deps.card.line_rate_bps = 25e9;
    deps.card.max_msgs_per_s = 20e6;
    daemon_ = std::make_unique<Daemon>(deps);
    ASSERT_EQ(daemon_->ListenControl(dir_ + "/ctl.sock"), Status::kOk);
    control_ = std::thread([this] { control_loop_->Run(); });
  }
  void TearDown() override {
    control_loop_->Stop();
    control_.join();
    daemon_.reset();  // control loop stopped: safe on this thread
    executor_->RunSync([this] { datapath_loop_->RemovePoller(poller_); });
    datapath_loop_->Stop();
    datapath_.join();
    engine_.reset();
    executor_.reset();
    rmdir(dir_.c_str());
  }

  // One request over a fresh control connection.
  json Request(const std::string& line) {
    auto fd = ConnectUnix(dir_ + "/ctl.sock");
    if (!fd.ok()) return json();
    std::string out = line + "\n";
    EXPECT_EQ(send(*fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
    std::string reply;
    char buf[4096];
    while (reply.find('\n') == std::string::npos) {
      ssize_t n = recv(*fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
    close(*fd);
    return json::parse(reply.substr(0, reply.find('\n')), nullptr, false);
  }
  json Request(const json& j) { return Request(j.dump()); }
  json Request(const char* line) { return Request(std::string(line)); }
  json Attach(const std::string& name) {
    return Request(json{{"cmd", "attach-vm"},
                        {"name", name},
                        {"socket", dir_ + "/" + name + ".sock"},
                        {"gids", {"::ffff:10.0.0.1", "fe80::2"}}});
  }
  json FindVm(const json& reply, const std::string& name) {
    for (const auto& vm : reply.value("vms", json::array())) {
      if (vm.value("name", "") == name) return vm;
    }
    return json();
  }
  bool WaitFor(const std::function<bool()>& cond) {
    for (int i = 0; i < 2000; ++i) {
      if (cond()) return true;
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }

  std::string dir_;
  SoftRnic rnic_;
  QosRecordingPolicy policy_;
  std::unique_ptr<EpollEventLoop> datapath_loop_, control_loop_;
  std::unique_ptr<MailboxExecutor> executor_;
  std::unique_ptr<engine::Engine> engine_;
  uint64_t poller_ = 0;
  std::unique_ptr<Daemon> daemon_;
  std::thread datapath_, control_;
};

TEST_F(DaemonTest, AttachListStatsDetach) {
  json r = Attach("vm-a");
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  struct stat st;
  EXPECT_EQ(stat((dir_ + "/vm-a.sock").c_str(), &st), 0);

  EXPECT_FALSE(Attach("vm-a").value("ok", true));  // duplicate name
  json same_socket = Request(json{{"cmd", "attach-vm"}, {"name", "vm-b"},
                                  {"socket", dir_ + "/vm-a.sock"}, {"gids", {"::1"}}});
  EXPECT_FALSE(same_socket.value("ok", true));
  EXPECT_TRUE(same_socket.contains("error"));

  json list = Request(R"({"cmd":"list-vms"})");
  ASSERT_TRUE(list.value("ok", false));
  ASSERT_EQ(list["vms"].size(), 1u);
  EXPECT_EQ(list["vms"][0]["name"], "vm-a");
  EXPECT_EQ(list["vms"][0]["connected"], false);

  json stats = Request(R"({"cmd":"stats"})");
  json vm = FindVm(stats, "vm-a");
  ASSERT_TRUE(vm.is_object()) << stats.dump();
  EXPECT_EQ(vm["qps"], 0);
  EXPECT_EQ(vm["mrs"], 0);
  EXPECT_EQ(vm["rnic_cq_errors"], 0);
  EXPECT_EQ(vm["flush_deferred"], 0);

  EXPECT_TRUE(Request(R"({"cmd":"detach-vm","name":"vm-a"})").value("ok", false));
  EXPECT_NE(stat((dir_ + "/vm-a.sock").c_str(), &st), 0);  // socket removed
  EXPECT_FALSE(Request(R"({"cmd":"detach-vm","name":"vm-a"})").value("ok", true));
  EXPECT_EQ(Request(R"({"cmd":"list-vms"})")["vms"].size(), 0u);
}

TEST_F(DaemonTest, QosIsSetAtAttachAndChangedLive) {
  json r = Request(json{{"cmd", "attach-vm"},
                        {"name", "vm-q"},
                        {"socket", dir_ + "/vm-q.sock"},
                        {"gids", {"::ffff:10.0.0.9"}},
                        {"qos", {{"weight", 3}, {"class", "latency"}}}});
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  json vm = FindVm(Request(R"({"cmd":"stats"})"), "vm-q");
  EXPECT_EQ(vm["qos"]["weight"], 3);
  EXPECT_EQ(vm["qos"]["class"], "latency");
  EXPECT_TRUE(vm["scheduler"].is_object());
  EXPECT_EQ(vm["scheduler"]["wrs_arrived"], 0);

  // Only the fields named change.
  r = Request(R"({"cmd":"set-qos","name":"vm-q","qos":{"class":"throughput"}})");
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  vm = FindVm(Request(R"({"cmd":"stats"})"), "vm-q");
  EXPECT_EQ(vm["qos"]["weight"], 3);
  EXPECT_EQ(vm["qos"]["class"], "throughput");

  // A bad change is refused whole; the old QoS stays.
  for (const char* bad :
       {R"({"cmd":"set-qos","name":"vm-q","qos":{"class":"urgent","weight":9}})",
        R"({"cmd":"set-qos","name":"vm-q","qos":{"weight":0}})",
        R"({"cmd":"set-qos","name":"vm-q","qos":{"priority":1}})",
        R"({"cmd":"set-qos","name":"nobody","qos":{"weight":2}})",
        R"({"cmd":"set-qos","name":"vm-q"})"}) {
    json e = Request(std::string(bad));
    EXPECT_FALSE(e.value("ok", true)) << bad;
    EXPECT_TRUE(e.contains("error")) << bad;
  }
  vm = FindVm(Request(R"({"cmd":"stats"})"), "vm-q");
  EXPECT_EQ(vm["qos"]["weight"], 3);
  EXPECT_EQ(vm["qos"]["class"], "throughput");
  json stats = Request(R"({"cmd":"stats"})");
  EXPECT_EQ(stats["policy"]["name"], "qos-recording");
}

// Bad QoS values, at attach-vm and at set-qos: each refused with an error
// naming the field; a refused attach-vm attaches nothing, a refused set-qos
// leaves every field of the QoS as it was.
TEST_F(DaemonTest, BadQosIsRefusedAndTheOldStays) {
  struct Bad {
    const char* qos;
    const char* field;
  };
  const Bad bad[] = {
      {R"({"weight":0})", "weight"},
      {R"({"weight":-1})", "weight"},
      {R"({"weight":2.5})", "weight"},
      {R"({"latency_target_ns":"5us"})", "latency_target_ns"},
      {R"({"max_rate_bps":-1000})", "max_rate_bps"},
      {R"({"max_rate_bps":30000000000})", "max_rate_bps"},  // above the 25 Gb/s card
      {R"({"max_msgs_per_s":20000001})", "max_msgs_per_s"},  // above its 20 M msg/s
      {R"({"min_rate_bps":26000000000})", "min_rate_bps"},   // a guarantee above the card
      {R"({"max_rate_bps":2000000000,"min_rate_bps":3000000000})", "min_rate_bps"},
      {R"({"class":"urgent"})", "class"},
      {R"({"priority":1})", "priority"},
  };
  for (const Bad& b : bad) {
    json r = Request(json{{"cmd", "attach-vm"},
                          {"name", "vm-bad"},
                          {"socket", dir_ + "/vm-bad.sock"},
                          {"gids", {"::ffff:10.0.0.8"}},
                          {"qos", json::parse(b.qos)}});
    EXPECT_FALSE(r.value("ok", true)) << b.qos;
    EXPECT_EQ(r.value("error", "").rfind(std::string("qos.") + b.field, 0), 0u) << r.dump();
    EXPECT_TRUE(FindVm(Request(R"({"cmd":"list-vms"})"), "vm-bad").is_null()) << b.qos;
  }
  ASSERT_TRUE(Request(json{{"cmd", "attach-vm"},
                           {"name", "vm-q"},
                           {"socket", dir_ + "/vm-q.sock"},
                           {"gids", {"::ffff:10.0.0.9"}},
                           {"qos", {{"weight", 3}, {"class", "latency"},
                                    {"max_rate_bps", 2000000000}}}})
                  .value("ok", false));
  const json before = FindVm(Request(R"({"cmd":"stats"})"), "vm-q")["qos"];
  EXPECT_EQ(before["max_rate_bps"], 2000000000);
  // The guarantee alone passes the cap the VM already has.
  const Bad bad_now[] = {{R"({"min_rate_bps":3000000000})", "min_rate_bps"},
                         {R"({"weight":7,"max_rate_bps":-1})", "max_rate_bps"}};
  for (const auto& list : {std::span<const Bad>(bad), std::span<const Bad>(bad_now)}) {
    for (const Bad& b : list) {
      json r = Request(json{{"cmd", "set-qos"}, {"name", "vm-q"}, {"qos", json::parse(b.qos)}});
      EXPECT_FALSE(r.value("ok", true)) << b.qos;
      EXPECT_EQ(r.value("error", "").rfind(std::string("qos.") + b.field, 0), 0u) << r.dump();
      EXPECT_EQ(FindVm(Request(R"({"cmd":"stats"})"), "vm-q")["qos"], before) << b.qos;
    }
  }
}

// Guarantees are admitted only while every VM's together fit the card
// (90 % of its 25 Gb/s here): at attach-vm and at set-qos, a VM's own old
// guarantee not counted twice.
TEST_F(DaemonTest, GuaranteesBeyondTheCardAreRefused) {
  auto attach = [&](const char* name, const char* gid, uint64_t min_bps) {
    return Request(json{{"cmd", "attach-vm"},
                        {"name", name},
                        {"socket", dir_ + "/" + name + ".sock"},
                        {"gids", {gid}},
                        {"qos", {{"min_rate_bps", min_bps}}}});
  };
  ASSERT_TRUE(attach("vm-g1", "::ffff:10.0.0.11", 12'000'000'000).value("ok", false));
  json r = attach("vm-g2", "::ffff:10.0.0.12", 11'000'000'000);
  EXPECT_FALSE(r.value("ok", true));
  EXPECT_EQ(r.value("error", "").rfind("qos.min_rate_bps: the guarantees on this card would "
                                       "sum to 23000000000",
                                       0),
            0u)
      << r.dump();
  EXPECT_TRUE(FindVm(Request(R"({"cmd":"list-vms"})"), "vm-g2").is_null());
  ASSERT_TRUE(attach("vm-g2", "::ffff:10.0.0.12", 10'000'000'000).value("ok", false));
  // vm-g1 may raise its own within what vm-g2 leaves, not beyond.
  auto set = [&](uint64_t min_bps) {
    return Request(json{{"cmd", "set-qos"}, {"name", "vm-g1"}, {"qos", {{"min_rate_bps", min_bps}}}});
  };
  EXPECT_TRUE(set(12'500'000'000).value("ok", false));
  r = set(12'500'000'001);
  EXPECT_FALSE(r.value("ok", true));
  EXPECT_EQ(r.value("error", "").rfind("qos.min_rate_bps", 0), 0u) << r.dump();
  EXPECT_EQ(FindVm(Request(R"({"cmd":"stats"})"), "vm-g1")["qos"]["min_rate_bps"],
            12'500'000'000);
}

// A QoS declared whole (libvirt metadata: "replace":true) resets the fields
// it does not name; each outcome, refused or not, is recorded with who
// asked, and refusals are counted (stats' qos_change, qos_rejections).
TEST_F(DaemonTest, SetQosReplaceAndItsOutcomeInStats) {
  ASSERT_TRUE(Request(json{{"cmd", "attach-vm"},
                           {"name", "vm-r"},
                           {"socket", dir_ + "/vm-r.sock"},
                           {"gids", {"::ffff:10.0.0.7"}},
                           {"qos", {{"weight", 3}, {"max_rate_bps", 2000000000}}}})
                  .value("ok", false));
  json r = Request(json::parse(R"({"cmd":"set-qos","name":"vm-r","source":"libvirt",
                                   "replace":true,"qos":{"max_msgs_per_s":1000}})"));
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  json vm = FindVm(Request(R"({"cmd":"stats"})"), "vm-r");
  EXPECT_EQ(vm["qos"]["weight"], 1);           // back to the default
  EXPECT_EQ(vm["qos"]["max_rate_bps"], 0);     // back to the default
  EXPECT_EQ(vm["qos"]["max_msgs_per_s"], 1000);
  EXPECT_EQ(policy_.last().max_msgs_per_s, 1000u);
  EXPECT_EQ(vm["qos_change"]["source"], "libvirt");
  EXPECT_EQ(vm["qos_change"]["ok"], true);
  EXPECT_EQ(vm["qos_rejections"], 0);

  // Refused (a value, or what the sender could not read): the QoS stays,
  // and stats says who asked what, and why it was refused.
  r = Request(json::parse(R"({"cmd":"set-qos","name":"vm-r","source":"libvirt",
                              "replace":true,"qos":{"max_rate_bps":"lots"}})"));
  EXPECT_FALSE(r.value("ok", true));
  vm = FindVm(Request(R"({"cmd":"stats"})"), "vm-r");
  EXPECT_EQ(vm["qos"]["max_msgs_per_s"], 1000);
  EXPECT_EQ(vm["qos_change"]["ok"], false);
  EXPECT_EQ(vm["qos_change"]["asked"], json({{"max_rate_bps", "lots"}}));
  EXPECT_EQ(vm["qos_change"]["error"].get<std::string>().rfind("qos.max_rate_bps", 0), 0u)
      << vm["qos_change"].dump();
  EXPECT_EQ(vm["qos_rejections"], 1);
  r = Request(R"({"cmd":"set-qos","name":"vm-r","source":"libvirt","invalid":"metadata: <x>"})");
  EXPECT_EQ(r.value("error", ""), "metadata: <x>");
  vm = FindVm(Request(R"({"cmd":"stats"})"), "vm-r");
  EXPECT_EQ(vm["qos_rejections"], 2);
  EXPECT_EQ(vm["qos"]["max_msgs_per_s"], 1000);
  for (const char* bad : {R"({"cmd":"set-qos","name":"vm-r","source":7,"qos":{}})",
                          R"({"cmd":"set-qos","name":"vm-r","replace":"yes","qos":{}})"}) {
    EXPECT_FALSE(Request(std::string(bad)).value("ok", true)) << bad;
  }
}

TEST_F(DaemonTest, UnknownQuotaIsRefused) {
  json r = Request(json{{"cmd", "attach-vm"},
                        {"name", "vm-u"},
                        {"socket", dir_ + "/vm-u.sock"},
                        {"gids", {"::1"}},
                        {"quotas", {{"max_qps", 4}}}});
  EXPECT_FALSE(r.value("ok", true));
  EXPECT_EQ(r.value("error", "").rfind("quotas.max_qps: unknown field", 0), 0u) << r.dump();
}

TEST_F(DaemonTest, BadControlRequestsGetErrors) {
  const char* bad[] = {"not json", "[1]", R"({"cmd":7})", R"({"cmd":"reboot"})",
                       R"({"cmd":"detach-vm"})", R"({"cmd":"attach-vm","name":"x"})"};
  for (const char* line : bad) {
    json r = Request(std::string(line));
    EXPECT_FALSE(r.value("ok", true)) << line;
    EXPECT_TRUE(r.contains("error")) << line;
  }
  // Several requests on one connection, one per line.
  auto fd = ConnectUnix(dir_ + "/ctl.sock");
  ASSERT_TRUE(fd.ok());
  std::string two = "{\"cmd\":\"list-vms\"}\n{\"cmd\":\"stats\"}\n";
  ASSERT_EQ(send(*fd, two.data(), two.size(), 0), static_cast<ssize_t>(two.size()));
  std::string reply;
  char buf[4096];
  while (std::count(reply.begin(), reply.end(), '\n') < 2) {
    ssize_t n = recv(*fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    reply.append(buf, static_cast<size_t>(n));
  }
  close(*fd);
}

TEST_F(DaemonTest, FrontendNegotiatesWithTheRealDevice) {
  ASSERT_TRUE(Attach("vm-q").value("ok", false));
  auto fe = vhost::VhostUserFrontend::Connect(dir_ + "/vm-q.sock", 16 << 20);
  ASSERT_TRUE(fe.ok());
  ASSERT_EQ((*fe)->Negotiate(~0ull), Status::kOk);
  EXPECT_GE((*fe)->queue_num(), 3u);  // control, event, >= 1 doorbell
  auto cfg = (*fe)->GetConfig(0, sizeof(virtio_rdma_config));
  ASSERT_TRUE(cfg.ok());
  virtio_rdma_config c;
  std::memcpy(&c, cfg->data(), sizeof(c));
  EXPECT_EQ(c.num_gids, 2);
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  EXPECT_EQ(std::memcmp(c.gids[0], v4, 16), 0);

  EXPECT_TRUE(WaitFor([&] { return FindVm(Request(R"({"cmd":"list-vms"})"), "vm-q")
                                       .value("connected", false); }));
  // A second frontend for the same VM is turned away.
  auto second = vhost::VhostUserFrontend::Connect(dir_ + "/vm-q.sock", 1 << 20);
  ASSERT_TRUE(second.ok());
  EXPECT_NE((*second)->Negotiate(0), Status::kOk);

  (*fe)->Disconnect();
  EXPECT_TRUE(WaitFor([&] { return !FindVm(Request(R"({"cmd":"list-vms"})"), "vm-q")
                                        .value("connected", true); }));
  // QEMU may come back (VM reboot with a new QEMU): served again.
  auto again = vhost::VhostUserFrontend::Connect(dir_ + "/vm-q.sock", 1 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Negotiate(~0ull), Status::kOk);
  EXPECT_TRUE(Request(R"({"cmd":"detach-vm","name":"vm-q"})").value("ok", false));
}

// Every queue (control, event, doorbells) set up, enabled and DRIVER_OK.
void StartAllQueues(vhost::VhostUserFrontend& fe) {
  for (uint32_t q = 0; q < fe.queue_num(); ++q) {
    auto ring = fe.AllocGpa(vhost::VringBytes(64), 4096);
    ASSERT_TRUE(ring.ok());
    ASSERT_EQ(fe.SetupQueue(q, 64, *ring), Status::kOk) << q;
    ASSERT_EQ(fe.EnableQueue(q, true), Status::kOk) << q;
  }
  ASSERT_EQ(fe.SetStatus(VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
                         VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK),
            Status::kOk);
}

// A frontend that goes away takes its guest RAM along: the daemon unmaps it
// at once, with the VM still attached (no detach-vm), although the real
// device keeps its table across a driver reset.
TEST_F(DaemonTest, FrontendDisconnectUnmapsGuestRam) {
  ASSERT_TRUE(Attach("vm-m").value("ok", false));
  auto fe = vhost::VhostUserFrontend::Connect(dir_ + "/vm-m.sock", 16 << 20);
  ASSERT_TRUE(fe.ok());
  ASSERT_EQ((*fe)->Negotiate(~0ull), Status::kOk);
  ASSERT_NO_FATAL_FAILURE(StartAllQueues(**fe));
  const int memfd = (*fe)->memfd();
  EXPECT_EQ(vrdma::testing::CountMappingsOf(memfd), 2);  // the frontend's and the daemon's

  (*fe)->Disconnect();
  EXPECT_TRUE(WaitFor([&] { return !FindVm(Request(R"({"cmd":"list-vms"})"), "vm-m")
                                        .value("connected", true); }));
  EXPECT_EQ(vrdma::testing::CountMappingsOf(memfd), 1) << "the daemon still maps the guest RAM";
  EXPECT_FALSE(FindVm(Request(R"({"cmd":"list-vms"})"), "vm-m").is_null());  // still attached
  EXPECT_TRUE(Request(R"({"cmd":"detach-vm","name":"vm-m"})").value("ok", false));
}

TEST_F(DaemonTest, DetachWhileQueuesRunDisconnectsTheFrontend) {
  ASSERT_TRUE(Attach("vm-d").value("ok", false));
  auto fe = vhost::VhostUserFrontend::Connect(dir_ + "/vm-d.sock", 16 << 20);
  ASSERT_TRUE(fe.ok());
  ASSERT_EQ((*fe)->Negotiate(~0ull), Status::kOk);
  // Control, event and doorbell queues all running.
  ASSERT_NO_FATAL_FAILURE(StartAllQueues(**fe));
  EXPECT_TRUE(FindVm(Request(R"({"cmd":"stats"})"), "vm-d").contains("vm_id"));

  EXPECT_TRUE(Request(R"({"cmd":"detach-vm","name":"vm-d"})").value("ok", false));
  EXPECT_FALSE((*fe)->GetStatus().ok());  // the daemon hung up
  EXPECT_TRUE(FindVm(Request(R"({"cmd":"stats"})"), "vm-d").is_null());
  // The same name and socket can be attached again.
  EXPECT_TRUE(Attach("vm-d").value("ok", false));
}

// A set-qos reaches the policy on the data-path thread before the daemon
// replies: the reply means the new QoS is in force, and stats shows what
// the policy applies.
TEST_F(DaemonTest, SetQosIsInForceWhenTheReplyComes) {
  ASSERT_TRUE(Request(json{{"cmd", "attach-vm"},
                           {"name", "vm-l"},
                           {"socket", dir_ + "/vm-l.sock"},
                           {"gids", {"::ffff:10.0.0.7"}},
                           {"qos", {{"weight", 2}}}})
                  .value("ok", false));
  auto fe = vhost::VhostUserFrontend::Connect(dir_ + "/vm-l.sock", 16 << 20);
  ASSERT_TRUE(fe.ok());
  ASSERT_EQ((*fe)->Negotiate(~0ull), Status::kOk);
  ASSERT_NO_FATAL_FAILURE(StartAllQueues(**fe));
  ASSERT_TRUE(WaitFor([&] { return policy_.calls() > 0; })) << "the device is up";
  EXPECT_EQ(policy_.last().weight, 2u) << "attach-vm's QoS";
  EXPECT_EQ(policy_.thread(), datapath_.get_id());

  std::vector<double> ms;
  for (uint64_t i = 1; i <= 100; ++i) {
    const json q{{"weight", 1 + i % 7}, {"max_rate_bps", i * 100000000},
                 {"min_rate_bps", i * 50000000}, {"max_msgs_per_s", i * 1000}};
    const auto t0 = std::chrono::steady_clock::now();
    json r = Request(json{{"cmd", "set-qos"}, {"name", "vm-l"}, {"qos", q}});
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    // No waiting: the policy has it already, from the data-path thread.
    const policy::TenantQos seen = policy_.last();
    ASSERT_EQ(seen.max_rate_bps, i * 100000000) << i;
    ASSERT_EQ(seen.min_rate_bps, i * 50000000) << i;
    ASSERT_EQ(seen.max_msgs_per_s, i * 1000) << i;
    ASSERT_EQ(policy_.thread(), datapath_.get_id());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("set-qos round trip (request to reply, policy updated): p50 %.3f ms, max %.3f ms\n",
              ms[ms.size() / 2], ms.back());
  EXPECT_LT(ms[ms.size() / 2], 10.0);
  const json vm = FindVm(Request(R"({"cmd":"stats"})"), "vm-l");
  EXPECT_EQ(vm["effective_qos"], vm["qos"]) << "this policy applies all it is asked";
  EXPECT_EQ(vm["effective_qos"]["max_rate_bps"], 10000000000);
  (*fe)->Disconnect();
}

}  // namespace
}  // namespace vrdma::daemon
