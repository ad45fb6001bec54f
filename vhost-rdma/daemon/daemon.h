// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The daemon's control-thread object: the JSON control socket and, per
// attached VM, its vhost-user listening socket, its RdmaDevice and the one
// vhost-user Connection QEMU holds. Everything here runs on the control
// loop's thread; the data-path loop is reached only through the device and
// the engine (which use the executor).
//
// Control protocol: one JSON object per line in, one JSON object per line
// out. Success replies carry "ok":true; failures "ok":false and "error".
//   {"cmd":"attach-vm", ...}   see vm_request.h
//   {"cmd":"detach-vm","name":N}
//   {"cmd":"list-vms"}         -> {"ok":true,"vms":[{"name","socket","connected",...}]}
//   {"cmd":"stats"}            -> {"ok":true,"policy":{"name",...},
//                                  "vms":[{"name",...,"pds","cqs","qps","mrs",
//                                  "ahs","srqs","pinned_bytes",...,"qos":{...},
//                                  "effective_qos":{...},"scheduler":{...},
//                                  "policy":{...}}]}
//                                  qos: as asked; effective_qos: the fields
//                                  the policy applies, with the values in
//                                  force; scheduler: the stage's accounting;
//                                  with --fabric-listen also "fabric":
//                                  {"listen","routes","udp":{...},
//                                  "faults":{...},"packets":{...}};
//                                  with --peer-listen also "peers":
//                                  {"listen","id","peers_known","peers":[...],
//                                  "gid_table":[...],"sent","resent",
//                                  "dropped","malformed",...}; each VM's
//                                  "reliability": its mode (attach-vm's);
//                                  with --reliability-layer "reliability":
//                                  {"connects_uc","chunks_sent","retx_sent",
//                                  ...,"wire":{...}}, the layer's counters,
//                                  and per VM "reliability_counters" (the
//                                  same names) and "qps_native", "qps_rc",
//                                  "qps_uc", "qps_switching"
//   {"cmd":"set-qos","name":N,"qos":{"weight":..,"class":..,...}}
//                                  the fields named replace the VM's QoS; a
//                                  refusal changes nothing; the reply comes
//                                  once the policy has the new QoS. Optional:
//                                  "replace":true (the fields not named
//                                  become the defaults: a QoS declared whole,
//                                  as libvirt metadata is), "source":S (who
//                                  asked, 1-32 characters; default
//                                  "control"), "invalid":WHY (the sender
//                                  found the QoS unreadable: refused with
//                                  WHY). stats shows the last change of each
//                                  VM, refused or not, as "qos_change"
//                                  {source, ok, error, asked, unix_ms} and
//                                  counts refusals in "qos_rejections".
//   {"cmd":"set-reliability","name":N,"mode":"uc"}
//                                  the VM's reliability mode (native, rc,
//                                  uc; docs/reliability.md §2.2, §6); the
//                                  reply comes once the data path has it;
//                                  each connected QP switches when its
//                                  peer's VM asks the same. Other modes than
//                                  native need --reliability-layer.
// The qos fields and their rules: vm_request.h, docs/operators.md ("QoS").
#ifndef VRDMA_VHOST_RDMA_DAEMON_DAEMON_H_
#define VRDMA_VHOST_RDMA_DAEMON_DAEMON_H_

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/base/event_loop.h"
#include "backend/base/executor.h"
#include "backend/engine/engine.h"
#include "backend/peer_channel/peer_channel.h"
#include "backend/reliable_rnic/reliable_rnic.h"
#include "vhost-rdma/daemon/fabric_flags.h"
#include "vhost-rdma/device/rdma_device.h"
#include "vhost-rdma/vhost_user/connection.h"

namespace vrdma::daemon {

struct DaemonDeps {
  engine::Engine* engine = nullptr;
  EpollEventLoop* control_loop = nullptr;  // this thread's loop
  EventLoop* datapath_loop = nullptr;
  Executor* datapath_executor = nullptr;
  device::RdmaDeviceOptions device_options;
  // What every VM's vhost-user connection accepts (--allow-unsealed-memory).
  vhost::ConnectionOptions connection_options;
  // The card the policy plans for: VMs' QoS is checked against it.
  policy::CardProfile card;
  // The RNIC under the engine (--rnic): attach-vm refuses a GID it cannot
  // send from (not in a physical port's GID table) with a clear error.
  const Rnic* rnic = nullptr;
  std::string rnic_name = "soft";
  uint32_t rnic_port = 1;  // --rnic-port
  Gid probe_gid{};         // --probe-gid: never a VM's
  // Group of every VM's vhost-user socket, made 0660 (--socket-group: the
  // group QEMU runs in, e.g. libvirt-qemu); -1 keeps the daemon's.
  int vm_socket_gid = -1;
  // --fabric-listen: the software RNIC's fabric (its counters are read on
  // the data path through datapath_executor for stats' "fabric");
  // nullptr: none.
  const DaemonFabric* fabric = nullptr;
  const SoftRnic* soft_rnic = nullptr;  // the RNIC on that fabric
  // --peer-listen: the peer channel (control thread): every VM's GIDs are
  // told to the peers at attach and detach; stats' "peers". nullptr: none.
  peer::PeerChannel* peers = nullptr;
  // --reliability-layer: the layer under the engine; attach-vm's
  // "reliability" sets the VM's mode (SetMode, through datapath_executor).
  // nullptr: none, and attach-vm refuses "uc".
  ReliableRnic* layer = nullptr;
};

class Daemon {
 public:
  explicit Daemon(const DaemonDeps& deps);
  // Detaches every VM and closes every socket.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Listens for control clients on `path` (registered with the control loop).
  Status ListenControl(const std::string& path);

  // Handles one request (also used by tests without a socket).
  nlohmann::json Handle(const nlohmann::json& request);

  size_t vm_count() const { return vms_.size(); }

 private:
  struct Vm {
    std::string name;
    std::string socket_path;
    int listen_fd = -1;
    std::unique_ptr<device::RdmaDevice> device;
    std::unique_ptr<vhost::Connection> conn;
    int conn_fd = -1;
    uint64_t connections = 0;  // accepted so far
    nlohmann::json qos_change;    // the last set-qos (stats' "qos_change")
    uint64_t qos_rejections = 0;  // set-qos refused
    std::vector<Gid> gids;        // told to the peers (deps_.peers)
    ReliabilityMode reliability = ReliabilityMode::kNative;
  };
  struct ControlClient {
    int fd = -1;
    std::string buffer;
  };

  nlohmann::json AttachVm(const nlohmann::json& request);
  nlohmann::json DetachVm(const nlohmann::json& request);
  nlohmann::json ListVms() const;
  nlohmann::json Stats() const;
  nlohmann::json SetQos(const nlohmann::json& request);
  nlohmann::json SetReliability(const nlohmann::json& request);
  // Whether VM `name` may have qos next to every other VM's guarantee
  // (policy::CheckGuarantees).
  bool GuaranteesFit(const std::string& name, const policy::TenantQos& qos,
                     std::string* error) const;

  void AcceptVhostUser(Vm* vm);
  void OnVhostUserReadable(Vm* vm);
  void DropConnection(Vm* vm);
  void DestroyVm(Vm* vm);

  void AcceptControl();
  void OnControlReadable(int fd);
  void CloseControlClient(int fd);

  DaemonDeps deps_;
  int control_fd_ = -1;
  std::string control_path_;
  std::map<int, ControlClient> clients_;
  std::map<std::string, std::unique_ptr<Vm>> vms_;
};

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_DAEMON_H_
