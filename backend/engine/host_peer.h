// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// HostPeer: this daemon as a peer of the scheduler policy's protocol
// (docs/scheduler.md): peer messages the stage sends to this host (dest 0)
// loop back to the next turn, and the daemon's own loopback QP pair serves
// probes towards this host. A part of the engine (README.md, "Parts");
// data-path thread (Close: the engine's destructor, once the data path no
// longer runs).
#ifndef VRDMA_BACKEND_ENGINE_HOST_PEER_H_
#define VRDMA_BACKEND_ENGINE_HOST_PEER_H_

#include <array>
#include <cstdint>

#include "backend/engine/turn.h"
#include "backend/rnic/rnic.h"
#include "backend/scheduler/stage.h"
#include "policy/scheduler_policy.h"

namespace vrdma::engine {

// The daemon's own source GID for its probe QPs on a software RNIC:
// ::ffff:127.0.0.1, never a VM's (attach-vm refuses it). A physical RNIC
// sends only from its port's GIDs: there the operator gives one
// (EngineOptions::probe_gid).
inline constexpr Gid kHostGid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};

class HostPeer {
 public:
  // probe_gid: the probe QPs' GID (EngineOptions::probe_gid; zero: kHostGid).
  HostPeer(Rnic& rnic, sched::Stage& stage, const Gid& probe_gid)
      : rnic_(rnic), stage_(stage), gid_(probe_gid == Gid{} ? kHostGid : probe_gid) {}
  HostPeer(const HostPeer&) = delete;
  HostPeer& operator=(const HostPeer&) = delete;

  // sched::StageOwner: a message to dest; false when it cannot be sent
  // (not this host, or the loopback queue is full: the policy's protocol
  // tolerates loss).
  bool SendPeerMessage(sched::DestId dest, const policy::PeerMessage& m);
  // sched::StageOwner: the probe QP pair towards dest, built once, on the
  // data path, the first time a policy probes (a software RNIC).
  bool OpenProbePath(sched::DestId dest);
  // On an RNIC whose slow calls run beside the data path
  // (Rnic::control_beside_data_path), the pair is built here instead, by
  // the engine's constructor (before the data path runs it), when the
  // operator gave a probe GID; without one such an RNIC has no probes.
  void OpenAtStart();
  const Gid& gid() const { return gid_; }
  // The messages sent to this host last turn, to the stage.
  bool DeliverLoopback(Turn& turn) {
    return loopback_count_ > 0 && DeliverSome(turn);
  }
  bool has_loopback() const { return loopback_count_ > 0; }
  // The probe objects destroyed (best effort).
  void Close();

 private:
  bool DeliverSome(Turn& turn);
  bool Build();

  Rnic& rnic_;
  sched::Stage& stage_;
  const Gid gid_;
  // Peer messages the stage sent to this host (dest 0), delivered at the
  // start of the next turn. Fixed capacity; a full queue drops.
  std::array<policy::PeerMessage, 16> loopback_{};
  uint32_t loopback_count_ = 0;
  // The daemon's own loopback QP pair for probes towards this host (dest
  // 0), built the first time a policy probes.
  struct ProbeObjects {
    bool built = false;
    RnicPd pd;
    RnicMr mr;
    RnicCq cq;
    RnicQp a, b;
    alignas(64) std::array<uint8_t, 64> target{};
  };
  ProbeObjects probe_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_HOST_PEER_H_
