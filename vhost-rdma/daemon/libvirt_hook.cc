// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/libvirt_hook.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "vhost-rdma/daemon/control_client.h"
#include "vhost-rdma/daemon/libvirt_metadata.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

// libvirt waits for the hook: a daemon that does not answer must not hang
// the domain's start for long.
constexpr auto kTimeout = std::chrono::seconds(20);
constexpr size_t kMaxStdin = 8 << 20;

void Say(const std::string& what) { std::fprintf(stderr, "vhost-rdma: %s\n", what.c_str()); }

bool Send(const std::string& socket, const json& request, json* reply) {
  std::string error;
  if (!ControlRequest(socket, request, reply, &error, kTimeout)) {
    Say(error + " (is vhost-rdma-daemon running with --control-socket " + socket + "?)");
    return false;
  }
  return true;
}

int Prepare(const std::string& socket, const std::string& xml) {
  json request;
  std::string error;
  switch (DomainToAttachRequest(xml, &request, &error)) {
    case DomainVerdict::kNotOurs:
      return 0;
    case DomainVerdict::kInvalid:
      Say(error);
      return 1;
    case DomainVerdict::kAttach:
      break;
  }
  const std::string name = request["name"];
  // A VM of this name left attached (libvirt did not run release, e.g. it
  // crashed) is replaced, unless a QEMU still uses it.
  json list;
  if (!Send(socket, json{{"cmd", "list-vms"}}, &list)) return 1;
  for (const json& old : list.value("vms", json::array())) {
    if (old.value("name", "") != name) continue;
    if (old.value("connected", false)) {
      Say("VM " + name + " is attached on the daemon and a QEMU is connected to it: not "
          "replacing it (detach it with vrdma-ctl detach-vm --name " + name + ")");
      return 1;
    }
    json reply;
    if (!Send(socket, json{{"cmd", "detach-vm"}, {"name", name}}, &reply)) return 1;
  }
  json reply;
  if (!Send(socket, request, &reply)) return 1;
  if (!reply.value("ok", false)) {
    Say("the daemon refused domain " + name + ": " + reply.value("error", reply.dump()));
    return 1;
  }
  return 0;
}

int Release(const std::string& socket, const std::string& name, const std::string& xml) {
  json request;
  std::string error;
  if (DomainToAttachRequest(xml, &request, &error) == DomainVerdict::kNotOurs) return 0;
  json reply;
  if (!Send(socket, json{{"cmd", "detach-vm"}, {"name", name}}, &reply)) return 0;
  if (!reply.value("ok", false)) Say("detach-vm " + name + ": " + reply.value("error", ""));
  return 0;
}

}  // namespace

std::string ReadHookStdin() {
  std::string xml;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) {
    if (xml.size() < kMaxStdin) xml.append(buf, n);
  }
  return xml;
}

int RunLibvirtHook(const std::string& control_socket, const std::vector<std::string>& args,
                   const std::string& xml) {
  if (args.size() < 3) {
    Say("libvirt-hook: usage: DOMAIN OPERATION SUB-OPERATION [EXTRA], domain XML on stdin");
    return 2;
  }
  const std::string& op = args[1];
  const std::string& sub = args[2];
  if (op == "prepare" && sub == "begin") return Prepare(control_socket, xml);
  if (op == "release" && sub == "end") return Release(control_socket, args[0], xml);
  return 0;
}

}  // namespace vrdma::daemon
