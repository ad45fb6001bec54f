// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/libvirt_watch.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "vhost-rdma/daemon/control_client.h"
#include "vhost-rdma/daemon/libvirt_metadata.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kRequestTimeout = std::chrono::seconds(10);
constexpr int kTickMs = 100;  // how often the loop looks at stop_
constexpr auto kReconnectPause = std::chrono::seconds(2);

// What the callbacks need: they run on the watcher's thread, inside
// virEventRunDefaultImpl.
struct Session {
  std::string control_socket;
  bool closed = false;
};

std::string LastLibvirtError() {
  const char* m = virGetLastErrorMessage();
  return m ? m : "unknown libvirt error";
}

// libvirt reports errors through its return values; keep it from printing
// them on stderr as well.
void QuietLibvirtErrors(void*, virErrorPtr) {}

json Request(const std::string& socket, const json& request) {
  json reply;
  std::string error;
  if (!ControlRequest(socket, request, &reply, &error, kRequestTimeout)) {
    return json{{"ok", false}, {"error", error}};
  }
  return reply;
}

// The live metadata of a running domain, as a set-qos request; null when the
// domain has no vrdma metadata.
json QosRequest(virDomainPtr dom, const std::string& name) {
  char* xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, kVrdmaXmlns,
                                   VIR_DOMAIN_AFFECT_LIVE);
  if (xml == nullptr) return json();
  json request{{"cmd", "set-qos"}, {"name", name}, {"source", "libvirt"}, {"replace", true}};
  json qos;
  std::string error;
  if (MetadataToQos(xml, &qos, &error)) {
    request["qos"] = qos;
  } else {
    request["invalid"] = error;
  }
  std::free(xml);
  return request;
}

void SendQos(const Session& s, virDomainPtr dom, Clock::time_point event_at) {
  const char* n = virDomainGetName(dom);
  if (n == nullptr) return;
  const std::string name = n;
  json request = QosRequest(dom, name);
  if (request.is_null()) {
    spdlog::warn("libvirt: domain {}: no vrdma metadata in the running domain any more; its "
                 "QoS stays as it is", name);
    return;
  }
  json reply = Request(s.control_socket, request);
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - event_at).count();
  if (reply.value("ok", false)) {
    spdlog::info("libvirt: domain {}: QoS from its metadata in force {:.1f} ms after the event: "
                 "{}", name, ms, reply["qos"].dump());
  } else if (reply.value("error", "").rfind("no such VM", 0) == 0) {
    spdlog::debug("libvirt: domain {} is not attached here", name);
  } else {
    // The daemon logged the refusal and keeps the old QoS.
    spdlog::debug("libvirt: domain {}: QoS refused: {}", name, reply.value("error", ""));
  }
}

void OnMetadataChange(virConnectPtr, virDomainPtr dom, int type, const char* nsuri,
                      void* opaque) {
  const auto at = Clock::now();
  if (type != VIR_DOMAIN_METADATA_ELEMENT || nsuri == nullptr ||
      std::strcmp(nsuri, kVrdmaXmlns) != 0) {
    return;
  }
  // A --config change of a stopped domain: the hook reads it at the next
  // start.
  if (virDomainIsActive(dom) != 1) return;
  SendQos(*static_cast<Session*>(opaque), dom, at);
}

void OnClose(virConnectPtr, int reason, void* opaque) {
  spdlog::warn("libvirt: connection closed (reason {}); reconnecting", reason);
  static_cast<Session*>(opaque)->closed = true;
}

void OnTick(int, void*) {}

// A running domain the daemon does not know (it restarted): attached from
// its definition (GIDs, quotas, socket: a live `virsh metadata --set '<qos/>'`
// leaves no GIDs in the live XML) with its live metadata's QoS, or, when the
// daemon refuses that QoS, the definition's.
void AttachRunning(const Session& s, virDomainPtr dom) {
  char* xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE);
  if (xml == nullptr) return;
  json request;
  std::string error;
  const DomainVerdict v = DomainToAttachRequest(xml, &request, &error);
  std::free(xml);
  const char* n = virDomainGetName(dom);
  const std::string name = n ? n : "?";
  if (v == DomainVerdict::kInvalid) spdlog::warn("libvirt: running domain {}: {}", name, error);
  if (v != DomainVerdict::kAttach) return;
  json attach = request;
  if (json live = QosRequest(dom, name); live.is_object() && live.contains("qos")) {
    attach["qos"] = live["qos"];
  }
  json reply = Request(s.control_socket, attach);
  if (!reply.value("ok", false) && reply.value("error", "").rfind("qos.", 0) == 0 &&
      attach != request) {
    spdlog::warn("libvirt: running domain {}: its live QoS is refused ({}); attaching it with "
                 "its definition's", name, reply.value("error", ""));
    reply = Request(s.control_socket, request);
  }
  if (reply.value("ok", false)) {
    spdlog::info("libvirt: attached running domain {}", name);
  } else {
    spdlog::warn("libvirt: running domain {} not attached: {}", name, reply.value("error", ""));
  }
}

// On (re)connecting: attach the running domains the daemon does not know,
// and bring the QoS of those it knows to their live metadata.
void Sync(virConnectPtr conn, const Session& s) {
  json list = Request(s.control_socket, json{{"cmd", "list-vms"}});
  std::set<std::string> known;
  for (const json& vm : list.value("vms", json::array())) known.insert(vm.value("name", ""));
  virDomainPtr* doms = nullptr;
  const int n = virConnectListAllDomains(conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  if (n < 0) {
    spdlog::warn("libvirt: cannot list domains: {}", LastLibvirtError());
    return;
  }
  for (int i = 0; i < n; ++i) {
    const char* name = virDomainGetName(doms[i]);
    if (name != nullptr && known.count(name) != 0) {
      SendQos(s, doms[i], Clock::now());
    } else {
      AttachRunning(s, doms[i]);
    }
    virDomainFree(doms[i]);
  }
  std::free(doms);
}

}  // namespace

std::unique_ptr<LibvirtWatcher> LibvirtWatcher::Start(const std::string& uri,
                                                      const std::string& control_socket) {
  if (virInitialize() != 0 || virEventRegisterDefaultImpl() != 0) {
    spdlog::error("libvirt: cannot initialise its event loop");
    return nullptr;
  }
  virSetErrorFunc(nullptr, QuietLibvirtErrors);
  std::unique_ptr<LibvirtWatcher> w(new LibvirtWatcher(uri, control_socket));
  w->thread_ = std::thread([raw = w.get()] { raw->Run(); });
  return w;
}

LibvirtWatcher::~LibvirtWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void LibvirtWatcher::Run() {
  // Wakes virEventRunDefaultImpl regularly so stop_ is seen.
  const int tick = virEventAddTimeout(kTickMs, OnTick, nullptr, nullptr);
  bool warned = false;
  while (!stop_) {
    virConnectPtr conn = virConnectOpenReadOnly(uri_.c_str());
    if (conn == nullptr) {
      if (!warned) {
        spdlog::warn("libvirt: cannot connect to {}: {} (retrying every 2 s)", uri_,
                     LastLibvirtError());
      }
      warned = true;
      for (auto until = Clock::now() + kReconnectPause; !stop_ && Clock::now() < until;) {
        virEventRunDefaultImpl();
      }
      continue;
    }
    warned = false;
    Session session{control_socket_};
    virConnectRegisterCloseCallback(conn, OnClose, &session, nullptr);
    virConnectSetKeepAlive(conn, 5, 3);
    const int cb = virConnectDomainEventRegisterAny(
        conn, nullptr, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
        VIR_DOMAIN_EVENT_CALLBACK(OnMetadataChange), &session, nullptr);
    if (cb < 0) {
      spdlog::error("libvirt: cannot follow metadata changes on {}: {}", uri_,
                    LastLibvirtError());
    } else {
      spdlog::info("libvirt: following {} (metadata in {})", uri_, kVrdmaXmlns);
      Sync(conn, session);
      while (!stop_ && !session.closed) virEventRunDefaultImpl();
      if (!session.closed) virConnectDomainEventDeregisterAny(conn, cb);
    }
    virConnectUnregisterCloseCallback(conn, OnClose);
    virConnectClose(conn);
    if (cb < 0) {
      for (auto until = Clock::now() + kReconnectPause; !stop_ && Clock::now() < until;) {
        virEventRunDefaultImpl();
      }
    }
  }
  if (tick >= 0) virEventRemoveTimeout(tick);
}

}  // namespace vrdma::daemon
