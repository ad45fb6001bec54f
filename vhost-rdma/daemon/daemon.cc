// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/daemon.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "vhost-rdma/daemon/peer_flags.h"
#include "vhost-rdma/daemon/unix_socket.h"
#include "vhost-rdma/daemon/vm_request.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

constexpr size_t kMaxControlClients = 32;
constexpr size_t kMaxRequestBytes = 64 * 1024;

json Error(const std::string& message) { return json{{"ok", false}, {"error", message}}; }

// What a policy reports, as JSON members; the QoS it applies to a tenant
// (EffectiveQos) goes to `effective` when given.
class JsonReport final : public policy::ReportSink {
 public:
  explicit JsonReport(json* out, json* effective = nullptr) : out_(*out), effective_(effective) {}
  void Number(std::string_view key, double value) override { out_[std::string(key)] = value; }
  void Text(std::string_view key, std::string_view value) override {
    out_[std::string(key)] = std::string(value);
  }
  void EffectiveQos(const policy::TenantQos& qos, uint32_t applied) override {
    if (effective_ != nullptr) *effective_ = EffectiveQosJson(qos, applied);
  }

 private:
  json& out_;
  json* effective_;
};

json SchedulerJson(const policy::TenantAccount& a) {
  return json{{"flows", a.flows},
              {"wrs_arrived", a.wrs_arrived},
              {"bytes_arrived", a.bytes_arrived},
              {"wrs_completed", a.wrs_completed},
              {"bytes_completed", a.bytes_completed},
              {"pieces_posted", a.pieces_posted},
              {"bytes_posted", a.bytes_posted},
              {"queued_wrs", a.queued_wrs},
              {"queued_bytes", a.queued_bytes},
              {"outstanding_pieces", a.outstanding_pieces},
              {"outstanding_bytes", a.outstanding_bytes},
              {"held_ns", a.held_ns},
              {"bytes_paced", a.bytes_paced},
              {"wrs_split", a.wrs_split},
              {"latency_avg_ns", a.wrs_completed ? a.latency_sum_ns / a.wrs_completed : 0},
              {"latency_max_ns", a.latency_max_ns},
              {"latency_sum_ns", a.latency_sum_ns},
              // Counts per policy::LatencyBucket: bucket i below 2^i us.
              {"latency_hist", a.latency_hist}};
}

// The VM's completions by status name (WcStatusName): "success" always,
// every other status once it has happened.
json CqesByStatus(const engine::VmStats& s) {
  json out = json::object();
  for (uint32_t i = 0; i < s.cqes_by_status.size(); ++i) {
    if (i == 0 || s.cqes_by_status[i] != 0) out[WcStatusName(i)] = s.cqes_by_status[i];
  }
  return out;
}

// What peers sent that a check of docs/reliability.md §3.6 caught, by the
// check's name.
json WireJson(const reliable::ReliabilityCounters& r) {
  json out = json::object();
  for (size_t i = 0; i < reliable::kWireCounterCount; ++i) {
    out[reliable::kWireCounters[i].name] = r.wire[i];
  }
  return out;
}

// The reliability layer's counters as stats prints them: daemon-wide
// ("reliability") and each VM's ("reliability_counters"), the same names.
json ReliabilityJson(const reliable::ReliabilityCounters& r) {
  return json{{"connects_sent", r.connects_sent},
              {"connects_uc", r.connects_uc},
              {"connects_native", r.connects_native},
              {"peer_unmatched", r.peer_unmatched},
              {"peer_restarts", r.peer_restarts},
              {"messages_posted", r.messages_posted},
              {"messages_completed", r.messages_completed},
              {"messages_failed", r.messages_failed},
              {"messages_delivered", r.messages_delivered},
              {"chunks_sent", r.chunks_sent},
              {"retx_sent", r.retx_sent},
              {"lost_rack", r.lost_rack},
              {"lost_rto", r.lost_rto},
              {"rto_undone", r.rto_undone},
              {"late_writes", r.late_writes},
              {"delivery_holds", r.delivery_holds},
              {"delivery_acks_repeated", r.delivery_acks_repeated},
              {"missed_wakes", r.missed_wakes},
              {"missed_deadlines", r.missed_deadlines},
              {"acks_sent", r.acks_sent},
              {"acks_received", r.acks_received},
              {"retry_exceeded", r.retry_exceeded},
              {"cwnd_resets", r.cwnd_resets},
              {"rtt_samples", r.rtt_samples},
              {"tail_waits", r.tail_waits},
              {"sends_sent", r.sends_sent},
              {"units_copied", r.units_copied},
              {"rnr_waits", r.rnr_waits},
              {"hold_refused", r.hold_refused},
              {"resent_after_wait", r.resent_after_wait},
              {"uc_path_moves", r.uc_path_moves},
              {"rc_connects", r.rc_connects},
              {"rc_recoveries", r.rc_recoveries},
              {"rc_takeovers", r.rc_takeovers},
              {"rc_completed_below_epsn", r.rc_completed_below_epsn},
              {"rc_resubmitted", r.rc_resubmitted},
              {"rc_resets", r.rc_resets},
              {"rc_failed_to_guest", r.rc_failed_to_guest},
              {"rc_atomics_lost", r.rc_atomics_lost},
              {"rc_recover_bad", r.rc_recover_bad},
              {"rc_recovered_bad", r.rc_recovered_bad},
              {"switches_asked", r.switches_asked},
              {"switches_begun", r.switches_begun},
              {"switches_done", r.switches_done},
              {"switches_failed", r.switches_failed},
              {"switch_wrs_held", r.switch_wrs_held},
              {"switch_bad", r.switch_bad},
              {"drained_bad", r.drained_bad},
              {"ready_bad", r.ready_bad},
              {"wire", WireJson(r)}};
}

}  // namespace

Daemon::Daemon(const DaemonDeps& deps) : deps_(deps) {}

Daemon::~Daemon() {
  while (!vms_.empty()) DestroyVm(vms_.begin()->second.get());
  while (!clients_.empty()) CloseControlClient(clients_.begin()->first);
  if (control_fd_ >= 0) {
    deps_.control_loop->RemoveFd(control_fd_);
    close(control_fd_);
    unlink(control_path_.c_str());
  }
}

// ---------------------------------------------------------------- control --

Status Daemon::ListenControl(const std::string& path) {
  auto fd = ListenUnix(path);
  if (!fd.ok()) return fd.status();
  control_fd_ = *fd;
  control_path_ = path;
  if (!deps_.control_loop->AddFd(control_fd_, EPOLLIN, [this](uint32_t) { AcceptControl(); })) {
    return Status::kIoError;
  }
  spdlog::info("control socket {}", path);
  return Status::kOk;
}

void Daemon::AcceptControl() {
  for (;;) {
    int fd = accept4(control_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    if (clients_.size() >= kMaxControlClients) {
      close(fd);
      continue;
    }
    // Replies are small, but a client that stops reading must not stall
    // the control thread for long.
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    clients_[fd] = ControlClient{fd, {}};
    deps_.control_loop->AddFd(fd, EPOLLIN, [this, fd](uint32_t) { OnControlReadable(fd); });
  }
}

void Daemon::CloseControlClient(int fd) {
  deps_.control_loop->RemoveFd(fd);
  close(fd);
  clients_.erase(fd);
}

void Daemon::OnControlReadable(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  char buf[4096];
  ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    CloseControlClient(fd);
    return;
  }
  std::string& pending = it->second.buffer;
  pending.append(buf, static_cast<size_t>(n));
  size_t nl;
  while ((nl = pending.find('\n')) != std::string::npos) {
    std::string line = pending.substr(0, nl);
    pending.erase(0, nl + 1);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
    json reply = request.is_discarded() ? Error("not valid JSON") : Handle(request);
    std::string out = reply.dump() + "\n";
    if (send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
      CloseControlClient(fd);
      return;
    }
  }
  if (pending.size() > kMaxRequestBytes) {
    std::string out = Error("request too long").dump() + "\n";
    send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    CloseControlClient(fd);
  }
}

json Daemon::Handle(const json& request) {
  if (!request.is_object()) return Error("request must be a JSON object");
  auto cmd = request.find("cmd");
  if (cmd == request.end() || !cmd->is_string()) return Error("missing \"cmd\"");
  const std::string c = cmd->get<std::string>();
  // The control path may use exceptions: nlohmann::json throws on type
  // mismatches we did not foresee; turn them into an error reply.
  try {
    if (c == "attach-vm") return AttachVm(request);
    if (c == "detach-vm") return DetachVm(request);
    if (c == "list-vms") return ListVms();
    if (c == "stats") return Stats();
    if (c == "set-qos") return SetQos(request);
    if (c == "set-reliability") return SetReliability(request);
  } catch (const std::exception& e) {
    return Error(std::string("bad request: ") + e.what());
  }
  return Error("unknown cmd: " + c);
}

// -------------------------------------------------------------------- VMs --

json Daemon::AttachVm(const json& request) {
  AttachRequest req;
  std::string error;
  if (!ParseAttachRequest(request, deps_.card, &req, &error)) return Error(error);
  if (vms_.count(req.config.name) != 0) return Error("VM already attached: " + req.config.name);
  if (!GuaranteesFit(req.config.name, req.config.qos, &error)) return Error("qos." + error);
  if (req.reliability != ReliabilityMode::kNative && deps_.layer == nullptr) {
    return Error("reliability: " + std::string(ReliabilityName(req.reliability)) +
                 " needs a daemon started with --reliability-layer");
  }
  for (const auto& [name, vm] : vms_) {
    if (vm->socket_path == req.socket_path) return Error("socket in use by VM " + name);
  }
  // A physical RNIC sends only from its port's GIDs (docs/verbs-rnic.md).
  for (const Gid& g : req.config.gids) {
    if (deps_.rnic != nullptr && !deps_.rnic->HasGid(g)) {
      return Error(MissingGid(g, deps_.rnic_name, deps_.rnic_port));
    }
    if (deps_.probe_gid != Gid{} && g == deps_.probe_gid) {
      return Error("gid " + GidToString(g) + " is the daemon's own (--probe-gid)");
    }
  }
  auto dev = device::RdmaDevice::Create(*deps_.engine, req.config, *deps_.control_loop,
                                        *deps_.datapath_loop, *deps_.datapath_executor,
                                        deps_.device_options);
  if (dev.status() == Status::kNoResource) {
    return Error(
        "device: no_resource (the daemon serves max_vms VMs, or the VM's max_mappings or "
        "max_pinned_bytes is more than is left of the daemon's mapping or pinning budget: "
        "docs/operators.md, \"Quotas\")");
  }
  if (!dev.ok()) return Error(std::string("device: ") + StatusName(dev.status()));
  auto fd = ListenUnix(req.socket_path);
  if (!fd.ok()) {
    return Error(std::string("cannot listen on ") + req.socket_path + ": " +
                 StatusName(fd.status()));
  }
  if (deps_.vm_socket_gid >= 0 &&
      (chown(req.socket_path.c_str(), static_cast<uid_t>(-1),
             static_cast<gid_t>(deps_.vm_socket_gid)) != 0 ||
       chmod(req.socket_path.c_str(), 0660) != 0)) {
    const int err = errno;
    close(*fd);
    unlink(req.socket_path.c_str());
    return Error("cannot give " + req.socket_path + " to group " +
                 std::to_string(deps_.vm_socket_gid) + ": " + strerror(err));
  }
  auto vm = std::make_unique<Vm>();
  vm->name = req.config.name;
  vm->socket_path = req.socket_path;
  vm->listen_fd = *fd;
  vm->device = std::move(dev.value());
  Vm* raw = vm.get();
  if (!deps_.control_loop->AddFd(raw->listen_fd, EPOLLIN,
                                 [this, raw](uint32_t) { AcceptVhostUser(raw); })) {
    close(raw->listen_fd);
    unlink(raw->socket_path.c_str());
    return Error("control loop refused the socket");
  }
  raw->gids = req.config.gids;
  raw->reliability = req.reliability;
  if (deps_.layer != nullptr) {
    // A control call of the layer, on the data path as the RNIC's are;
    // native too, so the layer knows the VM (its counters, its QPs by mode).
    deps_.datapath_executor->RunSync(
        [&] { deps_.layer->SetMode(raw->gids, raw->reliability); });
  }
  if (deps_.peers != nullptr) deps_.peers->AddGids(raw->gids);
  vms_[raw->name] = std::move(vm);
  spdlog::info("attached VM {} on {}{}", raw->name, raw->socket_path,
               raw->reliability != ReliabilityMode::kNative
                   ? std::string(", reliability ") + ReliabilityName(raw->reliability)
                   : std::string());
  return json{{"ok", true},
              {"name", raw->name},
              {"socket", raw->socket_path},
              {"quotas", QuotasJson(req.config.quotas)}};
}

json Daemon::DetachVm(const json& request) {
  auto name = request.find("name");
  if (name == request.end() || !name->is_string()) return Error("name required");
  auto it = vms_.find(name->get<std::string>());
  if (it == vms_.end()) return Error("no such VM: " + name->get<std::string>());
  DestroyVm(it->second.get());
  return json{{"ok", true}};
}

void Daemon::DestroyVm(Vm* vm) {
  DropConnection(vm);
  deps_.control_loop->RemoveFd(vm->listen_fd);
  close(vm->listen_fd);
  unlink(vm->socket_path.c_str());
  spdlog::info("detached VM {}", vm->name);
  const std::string name = vm->name;
  const std::vector<Gid> gids = vm->gids;
  vms_.erase(name);  // destroys the device: it detaches the VM from the engine
  if (deps_.peers != nullptr) deps_.peers->RemoveGids(gids);
  if (deps_.layer != nullptr) {
    deps_.datapath_executor->RunSync([&] { deps_.layer->ForgetVm(gids); });
  }
}

void Daemon::AcceptVhostUser(Vm* vm) {
  for (;;) {
    int fd = accept4(vm->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    if (vm->conn) {
      // One frontend per VM: a second QEMU must not drive the same device.
      spdlog::warn("VM {}: refusing a second vhost-user connection", vm->name);
      close(fd);
      continue;
    }
    vm->conn = std::make_unique<vhost::Connection>(fd, vm->device.get(),
                                                   deps_.connection_options);
    // Every refused or failed request is logged (the operator needs to see
    // e.g. an unsealed memory table, kAccess, or a kick fd that is not an
    // eventfd, kBadHandle); with debug logging, every request.
    const std::string name = vm->name;
    vm->conn->set_trace([name](const vhost::VhostUserHeader& h, Status st) {
      const auto level = st == Status::kOk ? spdlog::level::debug : spdlog::level::warn;
      if (!spdlog::should_log(level)) return;
      spdlog::log(level, "VM {}: {} ({} bytes, flags {:#x}) -> {}", name,
                  vhost::RequestName(h.request), h.size, h.flags, StatusName(st));
    });
    vm->conn_fd = fd;
    ++vm->connections;
    deps_.control_loop->AddFd(fd, EPOLLIN, [this, vm](uint32_t) { OnVhostUserReadable(vm); });
    spdlog::info("VM {}: frontend connected", vm->name);
  }
}

void Daemon::OnVhostUserReadable(Vm* vm) {
  if (!vm->conn) return;
  const Status st = vm->conn->HandleMessage();
  if (st != Status::kOk) {
    spdlog::info("VM {}: vhost-user connection ended ({})", vm->name, StatusName(st));
    DropConnection(vm);
  }
}

void Daemon::DropConnection(Vm* vm) {
  if (!vm->conn) return;
  // Unregister first: Shutdown closes the fd, and the number may be reused.
  deps_.control_loop->RemoveFd(vm->conn_fd);
  vm->conn->Shutdown();  // stops queues, resets the device (VM resources freed)
  vm->conn.reset();
  vm->conn_fd = -1;
}

json Daemon::ListVms() const {
  json list = json::array();
  for (const auto& [name, vm] : vms_) {
    list.push_back(json{{"name", name},
                        {"socket", vm->socket_path},
                        {"connected", vm->conn != nullptr},
                        {"connections", vm->connections},
                        {"device_status", vm->device->status()}});
  }
  return json{{"ok", true}, {"vms", list}};
}

json Daemon::Stats() const {
  json list = json::array();
  for (const auto& [name, vm] : vms_) {
    json entry{{"name", name}, {"connected", vm->conn != nullptr},
               {"device_status", vm->device->status()},
               {"lost_events", vm->device->lost_events()}};
    engine::VmStats s{};
    if (auto id = vm->device->vm(); id.has_value()) {
      entry["vm_id"] = *id;
      if (auto r = deps_.engine->Stats(*id); r.ok()) s = *r;
    }
    // What the operator asked, and what the policy applies of it (none
    // until the guest's device is up and the policy knows the VM).
    entry["qos"] = QosJson(vm->device->qos());
    entry["qos_change"] = vm->qos_change.is_null() ? json::object() : vm->qos_change;
    entry["qos_rejections"] = vm->qos_rejections;
    entry["reliability"] = ReliabilityName(vm->reliability);
    json effective = json::object();
    if (auto id = vm->device->vm(); id.has_value()) {
      json pol = json::object();
      JsonReport report(&pol, &effective);
      deps_.engine->Report(*id, report);
      entry["policy"] = pol;
    }
    entry["effective_qos"] = effective;
    entry["scheduler"] = SchedulerJson(s.sched);
    entry["sampled_at_ns"] = s.sampled_at_ns;  // CLOCK_MONOTONIC of the counters
    // Zeros when the guest holds nothing (also after a reset/disconnect).
    entry["pds"] = s.pds;
    entry["cqs"] = s.cqs;
    entry["qps"] = s.qps;
    entry["mrs"] = s.mrs;
    entry["ahs"] = s.ahs;
    entry["srqs"] = s.srqs;
    entry["mws"] = s.mws;
    entry["fr_mrs"] = s.fr_mrs;  // of mrs, fast-registration (kernel consumers)
    entry["pinned_bytes"] = s.pinned_bytes;
    entry["host_bytes"] = s.host_bytes;  // shadow state and RNIC queues
    entry["mappings"] = s.mappings;      // kernel mappings of page views
    entry["wqes_posted"] = s.wqes_posted;
    entry["wqes_rejected"] = s.wqes_rejected;
    entry["cqes_written"] = s.cqes_written;
    entry["cqes_by_status"] = CqesByStatus(s);
    entry["rnic_cq_errors"] = s.rnic_cq_errors;  // host CQs the RNIC put in error
    entry["flush_deferred"] = s.flush_deferred;  // flushes postponed by the budget
    entry["sends_held_for_receive"] = s.sends_held_for_receive;  // receive credits
    entry["gsi_sent"] = s.gsi_sent;  // QP1 datagrams (RDMA CM), in software
    entry["gsi_delivered"] = s.gsi_delivered;
    entry["gsi_dropped"] = s.gsi_dropped;
    entry["control_ns"] = vm->device->control_ns();          // control-thread time used
    entry["control_yields"] = vm->device->control_yields();  // slices used up
    entry["control_throttles"] = vm->device->control_throttles();  // quota spent
    list.push_back(std::move(entry));
  }
  json pol = json::object();
  JsonReport report(&pol);
  deps_.engine->ReportPolicy(report);
  json reply{{"ok", true}, {"policy", pol}, {"vms", list}};
  if (deps_.fabric != nullptr) {
    // Its counters are the data path's: copied there, formatted here.
    FabricSnapshot snap;
    deps_.datapath_executor->RunSync(
        [&] { snap = SnapshotFabric(*deps_.fabric, deps_.soft_rnic); });
    reply["fabric"] = FabricStatsJson(snap);
  }
  if (deps_.peers != nullptr) reply["peers"] = PeerStatsJson(*deps_.peers);
  if (deps_.layer != nullptr) {
    // The layer's counters are the data path's: copied there, daemon-wide
    // and each VM's (by its first GID, as SetMode knows it; zeros for a
    // VM the layer never framed).
    reliable::ReliabilityCounters r;
    std::vector<reliable::ReliabilityCounters> per_vm(vms_.size());
    std::vector<reliable::QpModeCounts> modes(vms_.size());
    deps_.datapath_executor->RunSync([&] {
      r = deps_.layer->counters();
      size_t i = 0;
      for (const auto& [name, vm] : vms_) {
        if (!vm->gids.empty()) {
          const reliable::ReliabilityCounters* c = deps_.layer->VmCounters(vm->gids.front());
          if (c != nullptr) per_vm[i] = *c;
          modes[i] = deps_.layer->QpModes(vm->gids.front());
        }
        ++i;
      }
    });
    for (size_t i = 0; i < per_vm.size(); ++i) {
      json& vm = reply["vms"][i];
      vm["reliability_counters"] = ReliabilityJson(per_vm[i]);
      // Its connected RC QPs by the mode they run, those switching apart
      // (docs/reliability.md §6: a QP waits for the peer VM's mode).
      vm["qps_native"] = modes[i].native;
      vm["qps_rc"] = modes[i].rc;
      vm["qps_uc"] = modes[i].uc;
      vm["qps_switching"] = modes[i].switching;
    }
    reply["reliability"] = ReliabilityJson(r);
  }
  return reply;
}

bool Daemon::GuaranteesFit(const std::string& name, const policy::TenantQos& qos,
                           std::string* error) const {
  uint64_t sum = qos.min_rate_bps;
  for (const auto& [other, vm] : vms_) {
    if (other != name) sum += vm->device->qos().min_rate_bps;
  }
  return policy::CheckGuarantees(sum, deps_.card, error);
}

json Daemon::SetQos(const json& request) {
  auto name = request.find("name");
  if (name == request.end() || !name->is_string()) return Error("name required");
  auto it = vms_.find(name->get<std::string>());
  if (it == vms_.end()) return Error("no such VM: " + name->get<std::string>());
  Vm& vm = *it->second;
  std::string source = "control";
  if (auto s = request.find("source"); s != request.end()) {
    if (!s->is_string() || s->get<std::string>().empty() || s->get<std::string>().size() > 32) {
      return Error("source: 1-32 characters");
    }
    source = s->get<std::string>();
  }
  bool replace = false;
  if (auto r = request.find("replace"); r != request.end()) {
    if (!r->is_boolean()) return Error("replace: true or false");
    replace = r->get<bool>();
  }
  auto q = request.find("qos");
  const json asked = q == request.end() ? json() : *q;
  // Every outcome is recorded for stats, so an operator who asked through
  // libvirt sees a refusal with vrdma-ctl; unix_ms: when it was decided
  // (after the policy has it, for a change that took effect).
  auto record = [&](bool ok, const std::string& error) {
    const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
    vm.qos_change = json{{"source", source}, {"ok", ok},      {"error", error},
                         {"asked", asked},   {"replace", replace}, {"unix_ms", unix_ms}};
    if (!ok) {
      ++vm.qos_rejections;
      spdlog::warn("VM {}: qos from {} refused, keeping {}: {}", vm.name, source,
                   QosJson(vm.device->qos()).dump(), error);
      return Error(error);
    }
    return json();
  };
  if (auto inv = request.find("invalid"); inv != request.end()) {
    return record(false, inv->is_string() ? inv->get<std::string>() : "invalid");
  }
  if (q == request.end()) return record(false, "qos required");
  policy::TenantQos qos = replace ? policy::TenantQos{} : vm.device->qos();
  std::string error;
  if (!ParseQos(*q, deps_.card, &qos, &error)) return record(false, error);
  if (!GuaranteesFit(it->first, qos, &error)) return record(false, "qos." + error);
  // Synchronous: the engine hands the QoS to the policy on the data-path
  // thread (between two turns) and returns once the policy has it, so the
  // reply means "in force".
  const Status st = vm.device->SetQos(qos);
  if (st != Status::kOk) return record(false, std::string("engine: ") + StatusName(st));
  record(true, "");
  spdlog::info("VM {}: qos from {}: {}", vm.name, source, QosJson(qos).dump());
  return json{{"ok", true}, {"qos", QosJson(qos)}};
}

json Daemon::SetReliability(const json& request) {
  auto name = request.find("name");
  if (name == request.end() || !name->is_string()) return Error("name required");
  auto it = vms_.find(name->get<std::string>());
  if (it == vms_.end()) return Error("no such VM: " + name->get<std::string>());
  Vm& vm = *it->second;
  auto m = request.find("mode");
  if (m == request.end()) return Error("mode required (native, rc or uc)");
  ReliabilityMode mode;
  std::string error;
  if (!ParseReliability(*m, &mode, &error)) return Error("mode: " + error);
  if (deps_.layer == nullptr) {
    if (mode == ReliabilityMode::kNative) return json{{"ok", true}, {"mode", "native"}};
    return Error("mode: " + std::string(ReliabilityName(mode)) +
                 " needs a daemon started with --reliability-layer");
  }
  // A control call of the layer, on the data path as the RNIC's are: the
  // reply means the data path has the mode; each of the VM's connected QPs
  // then switches once its peer's VM asks the same (docs/reliability.md §6;
  // stats' qps_switching counts those still waiting).
  deps_.datapath_executor->RunSync([&] { deps_.layer->SetMode(vm.gids, mode); });
  if (mode != vm.reliability) {
    spdlog::info("VM {}: reliability {} -> {}", vm.name, ReliabilityName(vm.reliability),
                 ReliabilityName(mode));
  }
  vm.reliability = mode;
  return json{{"ok", true}, {"mode", ReliabilityName(mode)}};
}

}  // namespace vrdma::daemon
