// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// FaultyFabric: a port decorator (docs/reliability.md §7.2) that puts each
// packet this port sends through a FaultModel (fault_model.h: losses, a
// bottleneck queue per destination, delay, jitter, reordering,
// duplication) and passes the survivors to the port it wraps, each when its
// time comes. Packets that leave later than their send time wait in a pool
// of hold_packets slots sized at construction, ordered by departure; a
// packet that finds the pool full is dropped and counted (hold_full).
// Held packets move on at this port's next Send or Poll at or after their
// time (NextEventNs says when), and leave stamped with their own time.
//
// Faults apply to what the port sends; wrap every host's port to make
// every direction lossy. No allocation after construction; one thread.
#ifndef VRDMA_BACKEND_FABRIC_FAULTY_FABRIC_H_
#define VRDMA_BACKEND_FABRIC_FAULTY_FABRIC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/fabric/fabric.h"
#include "backend/fabric/fault_model.h"

namespace vrdma::fabric {

struct FaultyFabricStats {
  uint64_t hold_full = 0;  // copies dropped: no slot to wait in
  uint64_t released = 0;   // held copies passed on
  uint64_t passed = 0;     // copies passed on at once
};

class FaultyFabric final : public Fabric {
 public:
  // Its own model, seeded.
  FaultyFabric(Fabric* inner, const FaultConfig& config, uint64_t seed,
               uint32_t hold_packets = 1024);
  // A model shared with other ports (one bottleneck for several senders);
  // model must outlive this.
  FaultyFabric(Fabric* inner, FaultModel* model, uint32_t hold_packets = 1024);
  ~FaultyFabric() override;

  Status AddGid(const Gid& gid) override { return inner_->AddGid(gid); }
  Status RemoveGid(const Gid& gid) override { return inner_->RemoveGid(gid); }
  void Send(std::span<const uint8_t> packet, const Gid& dgid,
            uint64_t now_ns) override;
  int Poll(std::span<Datagram> out, uint64_t now_ns) override;
  std::optional<uint64_t> NextEventNs() const override;

  const FaultModel& model() const { return *model_; }
  const FaultStats& fault_stats() const { return model_->stats(); }
  const FaultyFabricStats& stats() const { return stats_; }
  uint32_t held() const { return num_held_; }

 private:
  struct Held {
    uint64_t depart_ns = 0;
    uint64_t seq = 0;  // ties leave in send order
    uint32_t slot = 0;
    uint32_t len = 0;
    Gid dgid{};
  };
  static bool Later(const Held& a, const Held& b) {
    return a.depart_ns != b.depart_ns ? a.depart_ns > b.depart_ns
                                      : a.seq > b.seq;
  }
  // Passes on every held packet whose time has come, in time order.
  void Release(uint64_t now_ns);
  void Hold(std::span<const uint8_t> packet, const Gid& dgid,
            uint64_t depart_ns);

  Fabric* inner_;
  std::unique_ptr<FaultModel> own_model_;
  FaultModel* model_;
  std::vector<uint8_t> slots_;     // hold_packets x kMaxPacketBytes
  std::vector<uint32_t> free_;     // free slot numbers (a stack)
  uint32_t num_free_ = 0;
  std::vector<Held> heap_;         // a min-heap by (depart_ns, seq)
  uint32_t num_held_ = 0;
  uint64_t seq_ = 0;
  FaultyFabricStats stats_;
};

}  // namespace vrdma::fabric

#endif  // VRDMA_BACKEND_FABRIC_FAULTY_FABRIC_H_
