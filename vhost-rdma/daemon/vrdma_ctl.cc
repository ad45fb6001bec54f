// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-ctl: sends one request to vhost-rdma-daemon's control socket and
// prints the JSON reply. Exit status 0 when the reply says "ok":true.
//
//   vrdma-ctl -s /run/vhost-rdma/ctl.sock attach-vm --name a --socket /run/a.sock
//             --gid ::ffff:192.0.2.10 [--max-qp 64 ...] [--weight 2]
//   vrdma-ctl -s ... set-qos --name a [--weight 2] [--class latency]
//             [--latency-target-ns N] [--max-rate-bps N] [--max-msgs-per-s N]
//             [--min-rate-bps N]   (attach-vm takes the same QoS options)
//   vrdma-ctl -s ... detach-vm --name a
//   vrdma-ctl -s ... list-vms
//   vrdma-ctl -s ... [--json] vms | stats [VM] | qos VM
//             (human tables; --json prints the daemon's JSON)
//   vrdma-ctl -s ... [--json] top [--interval S] [--count N]
//             (per-VM rates, refreshed; --json: one line per interval)
//   vrdma-ctl -s ... raw '{"cmd":"stats"}'
//   vrdma-ctl -s ... libvirt-hook DOMAIN OPERATION SUB-OPERATION [EXTRA]
//             (libvirt's QEMU hook, domain XML on stdin: libvirt_hook.h)
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <optional>
#include <string>

#include "vhost-rdma/daemon/control_client.h"
#include "vhost-rdma/daemon/ctl_view.h"
#ifdef VRDMA_HAVE_LIBVIRT_HOOK
#include "vhost-rdma/daemon/libvirt_hook.h"
#endif

using nlohmann::json;

namespace {

// vrdma-ctl top: samples stats every `interval` seconds and prints the
// rates between samples (ctl_view.h, TopRates).
int Top(const std::string& socket_path, double interval, int count, bool as_json) {
  using Clock = std::chrono::steady_clock;
  json prev;
  auto prev_t = Clock::now();
  std::string error;
  if (!vrdma::daemon::ControlRequest(socket_path, json{{"cmd", "stats"}}, &prev, &error)) {
    std::fprintf(stderr, "vrdma-ctl: %s\n", error.c_str());
    return 2;
  }
  const bool tty = isatty(STDOUT_FILENO) && !as_json;
  for (int i = 0; count == 0 || i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    json cur;
    if (!vrdma::daemon::ControlRequest(socket_path, json{{"cmd", "stats"}}, &cur, &error)) {
      std::fprintf(stderr, "vrdma-ctl: %s\n", error.c_str());
      return 2;
    }
    const auto now = Clock::now();
    const json rates = vrdma::daemon::TopRates(
        prev, cur, std::chrono::duration<double>(now - prev_t).count());
    if (as_json) {
      std::printf("%s\n", rates.dump().c_str());
    } else {
      if (tty) std::fputs("\033[H\033[2J", stdout);  // clear, like top
      std::fputs(vrdma::daemon::TopTable(rates).c_str(), stdout);
      if (!tty) std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    prev = std::move(cur);
    prev_t = now;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vrdma-ctl: control vhost-rdma-daemon"};
  app.require_subcommand(1);
  std::string socket_path = "/run/vhost-rdma/ctl.sock";
  app.add_option("-s,--control-socket,--control", socket_path, "daemon control socket");
  bool as_json = false;
  app.add_flag("--json", as_json, "vms, stats, qos: print JSON instead of a table");

  json request;
  auto* attach = app.add_subcommand("attach-vm", "attach a VM (creates its vhost-user socket)");
  std::string name, vm_socket;
  std::vector<std::string> gids;
  std::optional<uint64_t> max_pd, max_cq, max_qp, max_mr, max_ah, max_srq, max_mw, max_pinned,
      max_host, max_mappings, max_fr_mr;
  bool kernel_verbs = false;
  // A VM's QoS (the qos object; vm_request.h): the same options at
  // attach-vm and set-qos.
  std::optional<uint64_t> weight, latency_ns, rate_bps, msgs_per_s, min_rate_bps;
  std::optional<std::string> app_class;
  auto add_qos_options = [&](CLI::App* cmd) {
    cmd->add_option("--weight", weight, "share of contended capacity, >= 1");
    cmd->add_option("--latency-target-ns", latency_ns, "p99 target (0: the policy's)");
    cmd->add_option("--max-rate-bps", rate_bps, "cap in payload bits/s (0: none)");
    cmd->add_option("--max-msgs-per-s", msgs_per_s, "cap in work requests/s (0: none)");
    cmd->add_option("--min-rate-bps", min_rate_bps, "guarantee in payload bits/s (0: none)");
    cmd->add_option("--class", app_class, "bandwidth|throughput|latency");
  };
  auto qos_json = [&] {
    json qos = json::object();
    if (weight) qos["weight"] = *weight;
    if (latency_ns) qos["latency_target_ns"] = *latency_ns;
    if (rate_bps) qos["max_rate_bps"] = *rate_bps;
    if (msgs_per_s) qos["max_msgs_per_s"] = *msgs_per_s;
    if (min_rate_bps) qos["min_rate_bps"] = *min_rate_bps;
    if (app_class) qos["class"] = *app_class;
    return qos;
  };
  attach->add_option("--name", name, "VM name")->required();
  attach->add_option("--socket", vm_socket, "vhost-user socket path for QEMU")->required();
  attach->add_option("--gid", gids, "RoCEv2 GID (IPv6 text), repeatable")->required();
  std::string mac;
  attach->add_option("--mac", mac, "MAC of the VM's NIC: the device is RoCE v2 on it");
  std::string reliability;
  attach->add_option("--reliability", reliability,
                     "native (default), rc (the RNIC's retries, 2, and a backup QP) or uc "
                     "(software reliability) towards peers that ask the same (a daemon with "
                     "--reliability-layer; docs/reliability.md)")
      ->check(CLI::IsMember({"native", "rc", "uc"}));
  attach->add_option("--max-pd", max_pd);
  attach->add_option("--max-cq", max_cq);
  attach->add_option("--max-qp", max_qp);
  attach->add_option("--max-mr", max_mr);
  attach->add_option("--max-ah", max_ah);
  attach->add_option("--max-srq", max_srq);
  attach->add_option("--max-mw", max_mw);
  attach->add_flag("--kernel-verbs", kernel_verbs,
                   "allow the guest kernel's RDMA consumers (registers the VM's RAM per kernel PD)");
  attach->add_option("--max-fr-mr", max_fr_mr);
  attach->add_option("--max-pinned-bytes", max_pinned);
  attach->add_option("--max-host-bytes", max_host);
  attach->add_option("--max-mappings", max_mappings);
  add_qos_options(attach);

  auto* set_qos = app.add_subcommand("set-qos", "change a running VM's QoS (fields given)");
  set_qos->add_option("--name", name, "VM name")->required();
  add_qos_options(set_qos);

  auto* set_rel = app.add_subcommand(
      "set-reliability", "change a running VM's reliability mode (docs/reliability.md §6)");
  set_rel->add_option("--name", name, "VM name")->required();
  set_rel->add_option("--mode", reliability, "native, rc or uc")
      ->required()
      ->check(CLI::IsMember({"native", "rc", "uc"}));

  auto* detach = app.add_subcommand("detach-vm", "detach a VM, releasing everything it holds");
  detach->add_option("--name", name, "VM name")->required();
  auto* list = app.add_subcommand("list-vms", "list attached VMs");
  auto* vms = app.add_subcommand("vms", "attached VMs: connection, objects, traffic, QoS");
  auto* stats = app.add_subcommand("stats", "per-VM resources and counters (one VM if named)");
  std::string stats_vm;
  stats->add_option("vm", stats_vm, "VM name");
  auto* qos = app.add_subcommand("qos", "a VM's QoS: asked, in force, last change");
  std::string qos_vm;
  qos->add_option("vm", qos_vm, "VM name")->required();
  auto* top = app.add_subcommand("top", "per-VM rates, latency, held and paced time, refreshed");
  double top_interval = 1.0;
  int top_count = 0;
  top->add_option("--interval", top_interval, "seconds between samples")
      ->check(CLI::Range(0.1, 3600.0));
  top->add_option("--count", top_count, "stop after this many intervals (0: never)");
  auto* raw = app.add_subcommand("raw", "send a JSON request as is");
  std::string raw_json;
  raw->add_option("json", raw_json)->required();
#ifdef VRDMA_HAVE_LIBVIRT_HOOK
  auto* hook = app.add_subcommand(
      "libvirt-hook", "libvirt's QEMU hook: attach at prepare, detach at release (XML on stdin)");
  std::vector<std::string> hook_args;
  hook->add_option("args", hook_args, "DOMAIN OPERATION SUB-OPERATION [EXTRA]")->required();
  hook->allow_extras();
#endif
  CLI11_PARSE(app, argc, argv);
#ifdef VRDMA_HAVE_LIBVIRT_HOOK
  if (*hook) {
    for (const std::string& extra : hook->remaining()) hook_args.push_back(extra);
    // Always drain stdin: libvirt writes the whole domain XML to it.
    const std::string xml = vrdma::daemon::ReadHookStdin();
    return vrdma::daemon::RunLibvirtHook(socket_path, hook_args, xml);
  }
#endif

  if (*attach) {
    request = {{"cmd", "attach-vm"}, {"name", name}, {"socket", vm_socket}, {"gids", gids}};
    if (!mac.empty()) request["mac"] = mac;
    if (!reliability.empty()) request["reliability"] = reliability;
    json quotas = json::object();
    auto put = [](json& j, const char* k, const std::optional<uint64_t>& v) {
      if (v) j[k] = *v;
    };
    put(quotas, "max_pd", max_pd);
    put(quotas, "max_cq", max_cq);
    put(quotas, "max_qp", max_qp);
    put(quotas, "max_mr", max_mr);
    put(quotas, "max_ah", max_ah);
    put(quotas, "max_srq", max_srq);
    put(quotas, "max_mw", max_mw);
    if (kernel_verbs) quotas["kernel_verbs"] = true;
    put(quotas, "max_fr_mr", max_fr_mr);
    put(quotas, "max_pinned_bytes", max_pinned);
    put(quotas, "max_host_bytes", max_host);
    put(quotas, "max_mappings", max_mappings);
    if (!quotas.empty()) request["quotas"] = quotas;
    if (json qos = qos_json(); !qos.empty()) request["qos"] = qos;
  } else if (*set_qos) {
    request = {{"cmd", "set-qos"}, {"name", name}, {"qos", qos_json()}};
  } else if (*set_rel) {
    request = {{"cmd", "set-reliability"}, {"name", name}, {"mode", reliability}};
  } else if (*detach) {
    request = {{"cmd", "detach-vm"}, {"name", name}};
  } else if (*list) {
    request = {{"cmd", "list-vms"}};
  } else if (*top) {
    return Top(socket_path, top_interval, top_count, as_json);
  } else if (*stats || *vms || *qos) {
    request = {{"cmd", "stats"}};
  } else if (*raw) {
    request = json::parse(raw_json, nullptr, false);
    if (request.is_discarded()) {
      std::fprintf(stderr, "vrdma-ctl: not valid JSON\n");
      return 2;
    }
  }

  json j;
  std::string error;
  if (!vrdma::daemon::ControlRequest(socket_path, request, &j, &error)) {
    std::fprintf(stderr, "vrdma-ctl: %s\n", error.c_str());
    return 2;
  }
  if ((*stats || *vms || *qos) && j.value("ok", false)) {
    // The views of the stats reply (ctl_view.h).
    const std::string vm_name = *qos ? qos_vm : stats_vm;
    json vm;
    if (!vm_name.empty()) {
      vm = vrdma::daemon::FindVmStats(j, vm_name);
      if (vm.is_null()) {
        std::fprintf(stderr, "vrdma-ctl: no VM %s\n", vm_name.c_str());
        return 1;
      }
    }
    const json& shown = vm_name.empty() ? j : vm;
    std::string text;
    if (as_json) {
      text = shown.dump(2) + "\n";
    } else if (*vms || (*stats && vm_name.empty())) {
      text = vrdma::daemon::VmsTable(j);
    } else if (*stats) {
      text = vrdma::daemon::VmStatsText(vm);
    } else {
      text = vrdma::daemon::QosText(vm, j.value("policy", json::object()).value("name", "?"));
    }
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::printf("%s\n", j.dump(2).c_str());
  return j.value("ok", false) ? 0 : 1;
}
