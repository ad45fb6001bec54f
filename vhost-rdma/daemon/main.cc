// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vhost-rdma-daemon: serves virtio-rdma devices to VMs over vhost-user.
// Two threads (docs/architecture.md): this (control) thread runs the control
// socket and every vhost-user socket; the data-path thread runs the engine,
// doorbells and events, busy-polling while there is work.
#include <grp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#ifdef VRDMA_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include <cstdio>
#include <thread>

#include "backend/base/event_loop.h"
#include "backend/base/executor_mailbox.h"
#include "backend/engine/engine.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "backend/soft_rnic/soft_rnic.h"
#ifdef VRDMA_HAVE_VERBS
#include "backend/verbs_rnic/verbs_rnic.h"
#endif
#include "policy/policy_registry.h"
#include "vhost-rdma/daemon/daemon.h"
#include "vhost-rdma/daemon/fabric_flags.h"
#include "vhost-rdma/daemon/peer_flags.h"
#ifdef VRDMA_HAVE_LIBVIRT
#include "vhost-rdma/daemon/libvirt_watch.h"
#endif
#ifdef VRDMA_HAVE_METRICS
#include "vhost-rdma/daemon/metrics.h"
#endif
#include "vhost-rdma/daemon/vm_request.h"
#include "vhost-rdma/device/rdma_device.h"
#include "vhost-rdma/vhost_user/eventfd_io.h"

namespace {

// Software RNIC timers (retransmission, RNR) advance in Rnic::Progress,
// which runs only when the data-path loop turns: wake an idle loop this
// often so they fire while nothing else happens.
constexpr long kIdleTickNs = 10'000'000;

// Kernel mappings the engine may hand out to VMs' page views (the sum of
// their max_mappings): vm.max_map_count less what the daemon itself needs
// (its binary, libraries, thread stacks, each VM's guest-memory table of up
// to 8 regions, twice while SET_MEM_TABLE swaps it).
constexpr uint64_t kMappingReserve = 4096;

uint64_t MappingBudget() {
  uint64_t max_map_count = 65530;  // the kernel's default
  if (FILE* f = fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long long v = 0;
    if (fscanf(f, "%llu", &v) == 1) max_map_count = v;
    fclose(f);
  }
  const uint64_t budget = max_map_count > kMappingReserve ? max_map_count - kMappingReserve : 0;
  spdlog::info("mapping budget {} (vm.max_map_count {}): VMs are admitted while the sum of their "
               "max_mappings fits",
               budget, max_map_count);
  return budget;
}

// Bytes a physical RNIC may pin for all VMs together (the sum of their
// max_pinned_bytes): ibv_reg_mr pins a region's pages against this
// process's RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK (then, or with no
// limit, none).
uint64_t PinnedBudget() {
  uint64_t cap_eff = 0;
  if (FILE* f = fopen("/proc/self/status", "r")) {
    char line[256];
    while (fgets(line, sizeof(line), f) != nullptr) {
      unsigned long long v = 0;
      if (sscanf(line, "CapEff: %llx", &v) == 1) cap_eff = v;
    }
    fclose(f);
  }
  constexpr int kCapIpcLock = 14;  // linux/capability.h
  rlimit r{};
  if ((cap_eff >> kCapIpcLock & 1) != 0 || getrlimit(RLIMIT_MEMLOCK, &r) != 0 ||
      r.rlim_cur == RLIM_INFINITY) {
    spdlog::info("pinning budget: none (CAP_IPC_LOCK or RLIMIT_MEMLOCK unlimited)");
    return UINT64_MAX;
  }
  spdlog::info("pinning budget {} bytes (RLIMIT_MEMLOCK): VMs are admitted while the sum of "
               "their max_pinned_bytes fits; LimitMEMLOCK=infinity lifts it",
               static_cast<uint64_t>(r.rlim_cur));
  return r.rlim_cur;
}

int MakeTickFd() {
  int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (fd < 0) return -1;
  itimerspec spec{{0, kIdleTickNs}, {0, kIdleTickNs}};
  timerfd_settime(fd, 0, &spec, nullptr);
  return fd;
}

// The service manager's side (systemd's Type=notify and WatchdogSec=, the
// unit in debian/vhost-rdma.service): READY=1 once the control socket
// listens, STOPPING=1 at shutdown, and WATCHDOG=1 from the control loop at
// half the watchdog interval, so a wedged control thread gets the daemon
// restarted. A no-op without NOTIFY_SOCKET (not started by systemd) and in a
// build without libsystemd.
class ServiceNotifier {
 public:
  // Registers the watchdog timer on the control loop when the service
  // manager asked for one (WATCHDOG_USEC).
  explicit ServiceNotifier(vrdma::EpollEventLoop& control_loop) : loop_(control_loop) {
#ifdef VRDMA_HAVE_SYSTEMD
    uint64_t usec = 0;
    if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) <= 0 || usec == 0) return;
    const uint64_t half_ns = usec * 1000 / 2;
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (timer_fd_ < 0) {
      spdlog::error("watchdog: cannot create a timer: systemd will restart the daemon");
      return;
    }
    const timespec period{static_cast<time_t>(half_ns / 1'000'000'000),
                          static_cast<long>(half_ns % 1'000'000'000)};
    itimerspec spec{period, period};
    timerfd_settime(timer_fd_, 0, &spec, nullptr);
    loop_.AddFd(timer_fd_, EPOLLIN, [this](uint32_t) {
      uint64_t expirations;
      [[maybe_unused]] ssize_t r = read(timer_fd_, &expirations, sizeof(expirations));
      sd_notify(0, "WATCHDOG=1");
    });
    spdlog::info("systemd watchdog: {} ms, pinged every {} ms from the control loop",
                 usec / 1000, half_ns / 1'000'000);
#endif
  }
  ~ServiceNotifier() {
    if (timer_fd_ >= 0) {
      loop_.RemoveFd(timer_fd_);
      close(timer_fd_);
    }
  }
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  void Ready([[maybe_unused]] const std::string& status) {
#ifdef VRDMA_HAVE_SYSTEMD
    sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
#endif
  }
  void Stopping() {
#ifdef VRDMA_HAVE_SYSTEMD
    sd_notify(0, "STOPPING=1\nSTATUS=shutting down: detaching every VM");
#endif
  }

 private:
  vrdma::EpollEventLoop& loop_;
  int timer_fd_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vhost-rdma-daemon: virtio-rdma devices for VMs over vhost-user"};
  // Every option may also come from a TOML file, named like the option
  // without its dashes (control-socket = "/run/vhost-rdma/control.sock";
  // card = ["line_gbps=100"]); the command line wins over the file. The
  // Debian package's unit passes /etc/vhost-rdma/vhost-rdma.conf. A key the
  // daemon does not know is an error, not silently ignored.
  app.set_config("--config", "", "read options from this TOML file (keys: the long option "
                                 "names without dashes)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  std::string control_path;
  std::string rnic_kind = "soft";
  std::string log_level = "info";
  uint32_t doorbell_queues = 1;
  uint16_t queue_size = 256;
  // A VM's share of the control thread over time (ControlQuota).
  double control_share = vrdma::device::RdmaDeviceOptions{}.control_share;
  // Idle policy of the data-path thread. The defaults suit VMs sharing
  // cores with the daemon: spin briefly, then sleep on the kick eventfds, so
  // vCPUs get the CPU back. Measured with two TCG guests on 2 cores
  // (ib_write_lat typical): 50 us / no yield 30 us; 1 ms / no yield 940 us;
  // 1 ms / yield every 4 turns 2000 us. A data path with a core of its own
  // should spin longer (e.g. --idle-spin-us 1000); busy-polling processes
  // sharing its cores (the in-process benchmark) also want
  // --idle-yield-turns 4 (docs/benchmarks.md).
  uint32_t idle_spin_us = 50;
  uint32_t idle_yield_turns = 0;
  vrdma::engine::EngineOptions engine_options;
  std::string adaptive_signaling = "auto";
  std::string policy_name = "pass-through";
  std::vector<std::string> policy_opts;
  std::vector<std::string> card_opts;
  double soft_line_gbps = 0;
  uint32_t rnic_port = 1;
  std::string probe_gid_text;
  bool allow_unsealed_memory = false;
  std::string socket_group;
  std::string libvirt_uri;
  std::string metrics_address;
  vrdma::daemon::FabricFlags fabric_flags;
  vrdma::daemon::PeerFlags peer_flags;
  app.add_option("--control-socket,--control", control_path,
                 "JSON control socket (attach-vm, detach-vm, list-vms, stats)")
      ->required();
  app.add_option("--rnic", rnic_kind,
                 "RNIC: soft (the software RNIC, default) or an rdma-core device name "
                 "(mlx5_0, rxe0: docs/verbs-rnic.md, docs/operators.md)");
  app.add_option("--probe-gid", probe_gid_text,
                 "with an rdma-core device, a GID of its port (an address of its netdev, no "
                 "VM's) for the daemon's own probe QPs: probing policies (justitia) measure "
                 "their reference flow through it; without it they run without probes");
  app.add_option("--rnic-port", rnic_port,
                 "the rdma-core device's port (ibv_devinfo lists them; 1 on most RoCE NICs)")
      ->check(CLI::Range(1, 255));
  app.add_option("--soft-line-gbps", soft_line_gbps,
                 "the software RNIC's line rate in Gb/s, shared by every packet of every "
                 "QP (0: unlimited, as fast as the CPU copies; also the card's line rate "
                 "the policy plans for unless --card line_gbps says otherwise)")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--fabric-listen", fabric_flags.listen,
                 "with --rnic soft: a UDP ADDR:PORT (IPv6: [ADDR]:PORT) for the software "
                 "RNIC's packets to GIDs of other daemons (docs/reliability.md §7); "
                 "without it, loopback only");
  app.add_option("--fabric-route", fabric_flags.routes,
                 "GID=ADDR:PORT: packets to GID go to the daemon listening there "
                 "(repeatable; the static form of the peer channel's GIDS)");
  app.add_option("--fabric-fault", fabric_flags.fault,
                 "faults on the packets this daemon sends, e.g. loss=0.01,reorder=0.01:20us,"
                 "dup=0.005,delay=10us:5us,bottleneck=10gbps:256KiB,burst=0.01:0.3 "
                 "(docs/reliability.md §7.2)");
  app.add_option("--fabric-fault-seed", fabric_flags.fault_seed,
                 "seed of --fabric-fault's random choices (the same seed and traffic: "
                 "the same packets lost)");
  app.add_option("--peer-listen", peer_flags.listen,
                 "this daemon's peer-channel UDP ADDR:PORT on the host network (IPv6: "
                 "[ADDR]:PORT): HELLO, the GID table, the reliability layer's messages "
                 "(docs/reliability.md §3.5)");
  app.add_option("--peer", peer_flags.peers,
                 "another daemon's --peer-listen ADDR:PORT (repeatable; datagrams from "
                 "any other address are dropped)");
  app.add_option("--daemon-gid", peer_flags.daemon_gid,
                 "with --reliability-layer: the daemon's own GID (never a VM's), which the "
                 "layer's ACK QP sends from");
  app.add_flag("--reliability-layer", peer_flags.reliability_layer,
               "run the reliability layer (docs/reliability.md) over --rnic soft: VMs "
               "attached with \"reliability\":\"uc\" (or \"rc\") get software reliability "
               "(or a backup QP) towards "
               "peers whose VMs ask the same; needs --peer-listen, --daemon-gid and "
               "--fabric-listen");
  app.add_option("--reliability-target-us", peer_flags.target_us,
                 "with --reliability-layer: the congestion window's delay target above "
                 "the base RTT, in microseconds (default 10, or the base RTT if smaller, for an "
                 "RNIC's hardware path; "
                 "a software RNIC on a loaded host has RTT noise of hundreds of "
                 "microseconds and wants more; docs/reliability.md §4.5)");
  app.add_option("--reliability-base-rtt-us", peer_flags.base_rtt_us,
                 "with --reliability-layer: the fabric's round trip without queues, in "
                 "microseconds (default 50, Bifröst's); a measured base RTT above it is "
                 "not taken, so a queue that never drains cannot raise the delay target "
                 "(docs/reliability.md §4.5)");
  app.add_option("--reliability-packet-lifetime-us", peer_flags.packet_lifetime_us,
                 "with --reliability-layer: the longest a packet can stay in the fabric, in "
                 "microseconds; a message repaired by retransmission is delivered that long "
                 "after its repair, so that its original WRITE, if only late, lands before "
                 "(default: no hold; docs/reliability.md §4.2, \"Late originals\")");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--doorbell-queues", doorbell_queues, "doorbell virtqueues per VM")
      ->check(CLI::Range(1, 64));
  app.add_option("--queue-size", queue_size, "largest virtqueue size accepted")
      ->check(CLI::Range(2, 1024));
  app.add_option("--control-share", control_share,
                 "the share of the control thread's time one VM's commands may take "
                 "over time (past it they wait; 0: no limit)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--idle-spin-us", idle_spin_us,
                 "data-path busy-poll time without work before it sleeps in epoll "
                 "(0: sleep at once; the CPU cost of an idle VM is this spin)")
      ->check(CLI::Range(0u, 10'000'000u));
  app.add_option("--idle-yield-turns", idle_yield_turns,
                 "while spinning idle, sched_yield after this many empty turns "
                 "(0: never; lets guest threads sharing the cores run)");
  app.add_option("--sq-watch-turns", engine_options.sq_watch_turns,
                 "data-path turns a drained send queue stays watched: WQEs posted "
                 "meanwhile are taken before their doorbell (0: doorbells only)");
  app.add_option("--adaptive-signaling", adaptive_signaling,
                 "post only every Nth guest-signaled WR signaled, N following the "
                 "RNIC's load (TPL); auto: with a physical RNIC, not --rnic soft")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--policy", policy_name,
                 "scheduler policy for every VM's work (docs/policies.md)")
      ->check(CLI::IsMember(vrdma::policy::PolicyNames()));
  app.add_option("--policy-opt", policy_opts,
                 "a knob of the policy, key=value (repeatable; docs/policies.md)");
  app.add_option("--card", card_opts,
                 "a figure of the RNIC the policy plans for and VMs' QoS is checked "
                 "against, key=value: line_gbps, max_mpps, qp_mpps, mtu, pus, rtt_us "
                 "(repeatable; default: a ConnectX-6 100 GbE, with the RNIC's own "
                 "line rate where it reports one)");
  app.add_flag("--allow-unsealed-memory", allow_unsealed_memory,
               "accept guest RAM that cannot be sealed against shrinking (hugetlbfs, "
               "memfd without sealing); a frontend can then crash the daemon with "
               "SIGBUS by truncating it: only for trusted frontends (docs/operators.md)");
  app.add_option("--socket-group", socket_group,
                 "group of every VM's vhost-user socket, made 0660: the group QEMU runs in "
                 "(libvirt: libvirt-qemu; docs/operators.md)");
#ifdef VRDMA_HAVE_LIBVIRT
  app.add_option("--libvirt-uri", libvirt_uri,
                 "follow this libvirt (e.g. qemu:///system): QoS changes in domains' vrdma "
                 "metadata are applied live, running domains attached at start "
                 "(docs/operators.md, section 3)");
#endif
#ifdef VRDMA_HAVE_METRICS
  app.add_option("--metrics-address", metrics_address,
                 "serve Prometheus metrics at http://ADDRESS/metrics, e.g. 127.0.0.1:9464 "
                 "(docs/operators.md, \"Metrics\")");
#endif
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));

  // SIGINT/SIGTERM become an fd on the control loop; SIGPIPE never kills us
  // (sends use MSG_NOSIGNAL, but be sure).
  signal(SIGPIPE, SIG_IGN);
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // inherited by the data-path thread
  int sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);

  // The fabric outlives the RNIC that sends through it (declared first).
  vrdma::daemon::FabricConfig fabric_config;
  std::unique_ptr<vrdma::daemon::DaemonFabric> fabric;
  {
    std::string fabric_error;
    if (!vrdma::daemon::ParseFabricFlags(fabric_flags, &fabric_config, &fabric_error)) {
      spdlog::error("{}", fabric_error);
      return 2;
    }
  }
  // The peer channel outlives the layer that sends through it.
  vrdma::daemon::PeerConfig peer_config;
  std::unique_ptr<vrdma::peer::PeerChannel> peer_channel;
  {
    std::string peer_error;
    if (!vrdma::daemon::ParsePeerFlags(peer_flags, rnic_kind == "soft", fabric_config.enabled,
                                       &peer_config, &peer_error)) {
      spdlog::error("{}", peer_error);
      return 2;
    }
    if (peer_config.enabled) {
      peer_channel = vrdma::daemon::OpenPeerChannel(peer_config, &peer_error);
      if (!peer_channel) {
        spdlog::error("{}", peer_error);
        return 2;
      }
      spdlog::info("peer channel: udp {} (daemon id {:016x}, {} peers){}",
                   vrdma::fabric::UdpAddressToString(peer_channel->local_address()),
                   peer_channel->id(), peer_config.peers.size(),
                   peer_config.layer ? fmt::format(", reliability layer, daemon GID {}",
                                                   peer_flags.daemon_gid)
                                     : std::string());
    }
  }
  std::unique_ptr<vrdma::Rnic> rnic_owner;
  std::unique_ptr<vrdma::ReliableRnic> layer;  // --reliability-layer, over rnic_owner
  if (rnic_kind == "soft") {
    if (!probe_gid_text.empty()) {
      spdlog::error("--probe-gid is for an rdma-core device (--rnic NAME) only");
      return 2;
    }
    if (rnic_port != 1) {
      spdlog::error("--rnic-port is for an rdma-core device (--rnic NAME) only");
      return 2;
    }
    vrdma::RnicLimits limits = vrdma::DefaultSoftRnicLimits();
    limits.link_rate_bps = static_cast<uint64_t>(soft_line_gbps * 1e9 + 0.5);
    if (fabric_config.enabled) {
      std::string fabric_error;
      fabric = vrdma::daemon::OpenFabric(fabric_config, &fabric_error);
      if (!fabric) {
        spdlog::error("{}", fabric_error);
        return 2;
      }
      spdlog::info("fabric: udp {} ({} routes, receive buffer {} bytes{}){}",
                   vrdma::fabric::UdpAddressToString(fabric->udp->local_address()),
                   fabric_config.routes.size(), fabric->udp->rcvbuf_bytes(),
                   fabric->udp->rcvbuf_bytes() < vrdma::daemon::kFabricSocketBufferBytes
                       ? ": below what was asked, raise net.core.rmem_max"
                       : "",
                   fabric_config.faulty
                       ? fmt::format(", faults {} seed {}", fabric_flags.fault,
                                     fabric_config.fault_seed)
                       : std::string());
    }
    rnic_owner = std::make_unique<vrdma::SoftRnic>(
        limits, vrdma::SoftRnicClock{}, fabric ? fabric->port() : nullptr);
    if (peer_config.layer) {
      vrdma::ReliableRnicOptions layer_options;
      layer_options.daemon_id = peer_channel->id();
      if (peer_config.target_delay_ns != 0) {
        layer_options.connection.sender.window.target_delay_ns = peer_config.target_delay_ns;
      }
      if (peer_config.base_rtt_ns != 0) {
        layer_options.connection.sender.window.fabric_base_rtt_ns = peer_config.base_rtt_ns;
      }
      layer_options.connection.receiver.packet_lifetime_ns = peer_config.packet_lifetime_ns;
      layer = std::make_unique<vrdma::ReliableRnic>(*rnic_owner, layer_options);
    }
  } else {
    if (fabric_config.enabled) {
      spdlog::error("--fabric-listen is for --rnic soft only (a physical RNIC has its "
                    "network)");
      return 2;
    }
#ifdef VRDMA_HAVE_VERBS
    if (soft_line_gbps != 0) {
      spdlog::error("--soft-line-gbps is for --rnic soft only");
      return 2;
    }
    std::string open_error;
    vrdma::VerbsRnic::Options verbs_options;
    verbs_options.device = rnic_kind;
    verbs_options.port = static_cast<uint8_t>(rnic_port);
    rnic_owner = vrdma::VerbsRnic::Open(verbs_options, &open_error);
    if (!rnic_owner) {
      spdlog::error("--rnic {}: {}", rnic_kind, open_error);
      return 2;
    }
#else
    spdlog::error("--rnic {}: this daemon was built without libibverbs (only --rnic soft)",
                  rnic_kind);
    return 2;
#endif
  }
  vrdma::Rnic& rnic = layer ? static_cast<vrdma::Rnic&>(*layer) : *rnic_owner;
  // The card the policy plans for: the RNIC's line rate where it reports
  // one, then what --card says.
  vrdma::policy::CardProfile card;
  const uint64_t link_bps = rnic.limits().link_rate_bps;
  if (link_bps != 0) card.line_rate_bps = static_cast<double>(link_bps);
  std::string error;
  for (const std::string& o : card_opts) {
    if (!vrdma::policy::ParseCardOption(o, &card, &error)) {
      spdlog::error("--card: {}", error);
      return 2;
    }
  }
  if (link_bps != 0 && card.line_rate_bps > static_cast<double>(link_bps)) {
    spdlog::warn("--card line_gbps={} is above the RNIC's line rate, {} Gb/s: the policy "
                 "plans for, and QoS may ask for, more than the wire carries",
                 card.line_rate_bps / 1e9, static_cast<double>(link_bps) / 1e9);
  }
  std::unique_ptr<vrdma::policy::SchedulerPolicy> policy =
      vrdma::policy::MakePolicy(policy_name, card, policy_opts, /*host_id=*/0, &error);
  if (!policy) {
    spdlog::error("--policy {}: {}", policy_name, error);
    return 2;
  }
  vrdma::EpollEventLoop::Options datapath_options;
  datapath_options.idle_spin_ns = uint64_t{idle_spin_us} * 1000;
  datapath_options.idle_yield_turns = idle_yield_turns;
  auto datapath_loop = vrdma::EpollEventLoop::Create(datapath_options);
  auto control_loop = vrdma::EpollEventLoop::Create();
  if (!datapath_loop || !control_loop || sig_fd < 0) {
    spdlog::error("cannot create event loops");
    return 1;
  }
  auto executor = vrdma::MailboxExecutor::Create(*datapath_loop);
  if (!executor) {
    spdlog::error("cannot create the data-path mailbox");
    return 1;
  }
  if (!probe_gid_text.empty()) {
    if (!vrdma::daemon::ParseGid(probe_gid_text, &engine_options.probe_gid) ||
        engine_options.probe_gid == vrdma::Gid{}) {
      spdlog::error("--probe-gid {}: not a GID (an IPv6 or IPv4-mapped address)", probe_gid_text);
      return 2;
    }
    if (!rnic.HasGid(engine_options.probe_gid)) {
      spdlog::error("--probe-gid: {}",
                    vrdma::daemon::MissingGid(engine_options.probe_gid, rnic_kind, rnic_port));
      return 2;
    }
  }
  engine_options.mapping_budget = MappingBudget();
  // A software RNIC maps guest pages but pins none.
  if (rnic_kind != "soft") engine_options.pinned_budget = PinnedBudget();
  engine_options.adaptive_signaling =
      adaptive_signaling == "on" || (adaptive_signaling == "auto" && rnic_kind != "soft");
  auto engine = vrdma::engine::CreateEngine(rnic, *executor, *policy, engine_options);
  if (!engine) {
    spdlog::error("cannot create the engine");
    return 1;
  }
  // Registered before the data-path thread starts (loop calls are for the
  // loop's own thread once it runs).
  const uint64_t engine_poller = vrdma::device::RegisterEnginePoller(*datapath_loop, *engine);
  // A hardware RNIC's completion channel wakes the sleeping data path (a
  // remote peer's SEND or WRITE_WITH_IMM to an idle VM): CQs are armed just
  // before the loop sleeps (docs/verbs-rnic.md, "Completion channel").
  uint64_t arm_poller = 0;
  const int completion_fd = rnic.completion_fd();
  if (completion_fd >= 0) {
    datapath_loop->AddFd(completion_fd, EPOLLIN,
                         [&rnic](uint32_t) { rnic.DrainCompletionFd(); });
    arm_poller = datapath_loop->AddPoller([] { return false; },
                                          [&rnic] { rnic.ArmCompletions(); });
  }
  // Datagrams from other daemons wake a sleeping data path; the engine's
  // poller has the RNIC read them (SoftRnic::Progress polls its fabric).
  const int fabric_fd = fabric ? fabric->udp->fd() : -1;
  if (fabric_fd >= 0) datapath_loop->AddFd(fabric_fd, EPOLLIN, [](uint32_t) {});
  // The layer's messages from peers: the channel (control thread) fills an
  // inbox the data path drains into the layer; its eventfd wakes a
  // sleeping data path.
  uint64_t peer_poller = 0;
  const int peer_inbox_fd = layer ? peer_channel->inbox_fd() : -1;
  if (layer) {
    peer_channel->SetSink(
        [l = layer.get()](std::span<const uint8_t> bytes) { l->OnPeerMessage(bytes); });
    datapath_loop->AddFd(peer_inbox_fd, EPOLLIN,
                         [ch = peer_channel.get()](uint32_t) { ch->ReadInboxFd(); });
    peer_poller = datapath_loop->AddPoller(
        [ch = peer_channel.get()] { return ch->DrainInbox() > 0; });
  }
  int tick_fd = MakeTickFd();
  if (tick_fd >= 0) {
    datapath_loop->AddFd(tick_fd, EPOLLIN, [tick_fd, l = layer.get()](uint32_t) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = read(tick_fd, &v, sizeof(v));
      // The layer's control calls run on this thread (AttachPeerLink
      // refuses a lower whose run beside it): the switch asks its data
      // path found due, made between turns.
      if (l != nullptr) l->RunDueAsks();
    });
  }
  // Both threads write eventfds a frontend shares; a write it made block is
  // interrupted within two periods (eventfd_io.h).
  auto fd_watchdog = vrdma::vhost::FdWatchdog::Start(std::chrono::milliseconds(10));
  if (!fd_watchdog) {
    spdlog::error("cannot start the eventfd watchdog");
    return 1;
  }
  std::thread datapath([&] {
    fd_watchdog->WatchThisThread();
    datapath_loop->Run();
  });
  fd_watchdog->WatchThisThread();  // the control thread

  int rc = 0;
  {
    vrdma::daemon::DaemonDeps deps;
    deps.engine = engine.get();
    deps.control_loop = control_loop.get();
    deps.datapath_loop = datapath_loop.get();
    deps.datapath_executor = executor.get();
    deps.device_options.num_doorbell_queues = doorbell_queues;
    deps.device_options.max_queue_size = queue_size;
    deps.device_options.control_share = control_share;
    deps.connection_options.memory.allow_unsealed = allow_unsealed_memory;
    deps.card = card;
    deps.rnic = &rnic;
    deps.rnic_name = rnic_kind;
    deps.rnic_port = rnic_port;
    deps.probe_gid = engine_options.probe_gid;
    if (fabric) {
      deps.fabric = fabric.get();
      // --fabric-listen: soft only (under the layer, if any).
      deps.soft_rnic = static_cast<const vrdma::SoftRnic*>(rnic_owner.get());
    }
    deps.peers = peer_channel.get();
    deps.layer = layer.get();
    if (layer) {
      // A control call of the layer: on the data path, as the software
      // RNIC's are. Its first HELLO waits in the channel's outbox.
      vrdma::Status st = vrdma::Status::kOk;
      executor->RunSync(
          [&] { st = layer->AttachPeerLink(peer_channel.get(), peer_config.daemon_gid); });
      if (st != vrdma::Status::kOk) {
        spdlog::error("--reliability-layer: the layer refused the peer channel ({}; "
                      "--daemon-gid {})",
                      vrdma::StatusName(st), peer_flags.daemon_gid);
        rc = 1;
      }
    }
    if (peer_channel) peer_channel->Start(*control_loop);
    if (!socket_group.empty()) {
      const group* g = getgrnam(socket_group.c_str());
      if (g == nullptr) {
        spdlog::error("--socket-group: no group {}", socket_group);
        return 2;
      }
      deps.vm_socket_gid = static_cast<int>(g->gr_gid);
    }
    if (allow_unsealed_memory) {
      spdlog::warn("--allow-unsealed-memory: frontends may pass guest RAM that can shrink "
                   "under the daemon's mapping (a frontend can crash the daemon)");
    }
    vrdma::daemon::Daemon daemon(deps);
    ServiceNotifier notifier(*control_loop);
    if (daemon.ListenControl(control_path) != vrdma::Status::kOk) {
      spdlog::error("cannot listen on {}", control_path);
      rc = 1;
    } else {
      control_loop->AddFd(sig_fd, EPOLLIN, [&](uint32_t) {
        signalfd_siginfo si;
        [[maybe_unused]] ssize_t r = read(sig_fd, &si, sizeof(si));
        spdlog::info("signal {}: shutting down", si.ssi_signo);
        notifier.Stopping();
        control_loop->Stop();
      });
      spdlog::info("vhost-rdma-daemon running (rnic={}, line {}, policy={}, card {} Gb/s "
                   "{} Mmsg/s)",
                   rnic_kind,
                   link_bps != 0 ? fmt::format("{} Gb/s", static_cast<double>(link_bps) / 1e9)
                                 : std::string("unlimited"),
                   policy_name, card.line_rate_bps / 1e9, card.max_msgs_per_s / 1e6);
#ifdef VRDMA_HAVE_METRICS
      // Asks the control socket for stats on each scrape, like any client.
      std::unique_ptr<vrdma::daemon::MetricsServer> metrics;
      if (!metrics_address.empty()) {
        metrics = vrdma::daemon::MetricsServer::Start(metrics_address, control_path);
        if (!metrics) rc = 1;
      }
#endif
#ifdef VRDMA_HAVE_LIBVIRT
      // Talks to the control socket like any client: started once it
      // listens, stopped before the daemon goes.
      std::unique_ptr<vrdma::daemon::LibvirtWatcher> watcher;
      if (!libvirt_uri.empty()) {
        watcher = vrdma::daemon::LibvirtWatcher::Start(libvirt_uri, control_path);
        if (!watcher) rc = 1;
      }
#endif
      if (rc == 0) {
        notifier.Ready(fmt::format("serving {} (rnic={}, policy={})", control_path, rnic_kind,
                                   policy_name));
        control_loop->Run();
      }
      // The watcher, then the metrics server, end here: before the daemon.
    }
    // ~Daemon detaches every VM (through the data-path executor).
  }
  if (peer_channel) peer_channel->Stop();  // the control loop has stopped
  executor->RunSync([&] {
    datapath_loop->RemovePoller(engine_poller);
    if (completion_fd >= 0) {
      datapath_loop->RemovePoller(arm_poller);
      datapath_loop->RemoveFd(completion_fd);
    }
    if (tick_fd >= 0) datapath_loop->RemoveFd(tick_fd);
    if (fabric_fd >= 0) datapath_loop->RemoveFd(fabric_fd);
    if (peer_inbox_fd >= 0) {
      datapath_loop->RemovePoller(peer_poller);
      datapath_loop->RemoveFd(peer_inbox_fd);
    }
  });
  datapath_loop->Stop();
  datapath.join();
  if (tick_fd >= 0) close(tick_fd);
  engine.reset();
  layer.reset();       // after the engine, before the RNIC under it
  rnic_owner.reset();  // after the engine released every object on it
  peer_channel.reset();  // after the layer that sent through it
  fabric.reset();      // after the RNIC that sent through it
  executor.reset();
  close(sig_fd);
  return rc;
}
