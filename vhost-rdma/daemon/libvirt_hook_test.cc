// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The libvirt hook against a fake daemon: a thread that answers the control
// socket's JSON lines from a script and records what it was asked.
#include "vhost-rdma/daemon/libvirt_hook.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "vhost-rdma/daemon/unix_socket.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

class FakeDaemon {
 public:
  explicit FakeDaemon(std::function<json(const json&)> answer) : answer_(std::move(answer)) {
    path_ = "/tmp/vrdma-hook-test-" + std::to_string(getpid()) + ".sock";
    fd_ = *ListenUnix(path_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeDaemon() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
    unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> cmds() {
    std::lock_guard<std::mutex> l(mu_);
    return cmds_;
  }

 private:
  void Serve() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) {
        if (stop_) return;
        usleep(1000);
        continue;
      }
      std::string in;
      char buf[4096];
      ssize_t n;
      while (in.find('\n') == std::string::npos && (n = recv(c, buf, sizeof(buf), 0)) > 0) {
        in.append(buf, static_cast<size_t>(n));
      }
      const json req = json::parse(in.substr(0, in.find('\n')), nullptr, false);
      {
        std::lock_guard<std::mutex> l(mu_);
        cmds_.push_back(req.value("cmd", "?"));
      }
      const std::string out = answer_(req).dump() + "\n";
      send(c, out.data(), out.size(), MSG_NOSIGNAL);
      close(c);
    }
  }

  std::function<json(const json&)> answer_;
  std::string path_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> cmds_;
};

const char kDomain[] = R"(<domain xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">
  <name>tenant-a</name>
  <metadata><v:vrdma xmlns:v="https://vhost-rdma.org/xmlns/vrdma/1"><v:gid>::1</v:gid>
    </v:vrdma></metadata>
  <qemu:commandline>
    <qemu:arg value="-chardev"/><qemu:arg value="socket,id=c0,path=/run/a.sock"/>
    <qemu:arg value="-device"/><qemu:arg value="vhost-user-rdma-pci,chardev=c0"/>
  </qemu:commandline>
</domain>)";

json Ok() { return json{{"ok", true}, {"vms", json::array()}}; }

int Hook(const std::string& socket, const std::string& op, const std::string& sub,
         const std::string& xml, std::string* err) {
  testing::internal::CaptureStderr();
  const int rc = RunLibvirtHook(socket, {"tenant-a", op, sub, "-"}, xml);
  *err = testing::internal::GetCapturedStderr();
  return rc;
}

TEST(LibvirtHook, PrepareAttachesAndReleaseDetaches) {
  json attached;
  FakeDaemon d([&](const json& r) {
    if (r["cmd"] == "attach-vm") attached = r;
    return Ok();
  });
  std::string err;
  EXPECT_EQ(Hook(d.path(), "prepare", "begin", kDomain, &err), 0) << err;
  EXPECT_EQ(attached["socket"], "/run/a.sock");
  EXPECT_EQ(attached["gids"], json({"::1"}));
  EXPECT_EQ(Hook(d.path(), "release", "end", kDomain, &err), 0) << err;
  EXPECT_EQ(d.cmds(), (std::vector<std::string>{"list-vms", "attach-vm", "detach-vm"}));
  // Other operations do nothing.
  EXPECT_EQ(Hook(d.path(), "start", "begin", kDomain, &err), 0);
  EXPECT_EQ(Hook(d.path(), "stopped", "end", kDomain, &err), 0);
  EXPECT_EQ(d.cmds().size(), 3u);
}

TEST(LibvirtHook, OtherDomainsAreNotTouched) {
  FakeDaemon d([](const json&) { return Ok(); });
  std::string err;
  const std::string plain = "<domain><name>web</name></domain>";
  EXPECT_EQ(Hook(d.path(), "prepare", "begin", plain, &err), 0);
  EXPECT_EQ(Hook(d.path(), "release", "end", plain, &err), 0);
  EXPECT_TRUE(d.cmds().empty());
  EXPECT_EQ(err, "");
}

TEST(LibvirtHook, AStaleAttachmentIsReplacedAConnectedOneIsNot) {
  bool connected = false;
  FakeDaemon d([&](const json& r) {
    if (r["cmd"] == "list-vms") {
      return json{{"ok", true}, {"vms", {{{"name", "tenant-a"}, {"connected", connected}}}}};
    }
    return Ok();
  });
  std::string err;
  EXPECT_EQ(Hook(d.path(), "prepare", "begin", kDomain, &err), 0) << err;
  EXPECT_EQ(d.cmds(), (std::vector<std::string>{"list-vms", "detach-vm", "attach-vm"}));
  connected = true;
  EXPECT_EQ(Hook(d.path(), "prepare", "begin", kDomain, &err), 1);
  EXPECT_NE(err.find("a QEMU is connected to it"), std::string::npos) << err;
  EXPECT_EQ(d.cmds().size(), 4u);  // only list-vms
}

TEST(LibvirtHook, RefusalsFailPrepareWithTheReason) {
  FakeDaemon d([](const json& r) {
    if (r["cmd"] == "attach-vm") return json{{"ok", false}, {"error", "qos.weight: must be >= 1"}};
    return Ok();
  });
  std::string err;
  EXPECT_EQ(Hook(d.path(), "prepare", "begin", kDomain, &err), 1);
  EXPECT_EQ(err, "vhost-rdma: the daemon refused domain tenant-a: qos.weight: must be >= 1\n");
  // Broken metadata: refused before the daemon is asked.
  std::string no_gid = kDomain;
  no_gid.replace(no_gid.find("<v:gid>::1</v:gid>"), 18, "");
  EXPECT_EQ(Hook(d.path(), "prepare", "begin", no_gid, &err), 1);
  EXPECT_NE(err.find("names no <gid>"), std::string::npos) << err;
  // No daemon: prepare fails and says where it looked; release does not.
  EXPECT_EQ(Hook("/tmp/vrdma-hook-test-nobody.sock", "prepare", "begin", kDomain, &err), 1);
  EXPECT_NE(err.find("cannot connect to /tmp/vrdma-hook-test-nobody.sock"), std::string::npos);
  EXPECT_EQ(Hook("/tmp/vrdma-hook-test-nobody.sock", "release", "end", kDomain, &err), 0);
  EXPECT_EQ(RunLibvirtHook(d.path(), {"tenant-a"}, kDomain), 2);  // usage
}

}  // namespace
}  // namespace vrdma::daemon
