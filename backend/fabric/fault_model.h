// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// FaultModel: what a lossy network does to one packet (docs/reliability.md
// §7.2), decided apart from moving any bytes, so FaultyFabric only carries
// out its verdicts. Each fault is independent and counted:
//   - random loss with probability `loss`;
//   - burst loss, Gilbert-Elliott: a two-state chain stepped once per
//     packet (good -> bad with p_enter_bad, bad -> good with p_leave_bad),
//     a packet in the bad state lost with loss_bad; a bad period of k
//     packets is a burst of k losses when loss_bad is 1 (mean 1/p_leave_bad);
//   - a bottleneck queue per destination GID: a link of bottleneck_bps
//     whose backlog may hold bottleneck_bytes; a packet that does not fit
//     is dropped (tail drop), one that does leaves when its last bit is
//     serialized after everything queued before it;
//   - delay and jitter: delay_ns plus a uniform [0, jitter_ns] per packet
//     (jitter reorders packets closer together than it);
//   - reordering: with p_reorder a packet is held reorder_delay_ns more;
//   - duplication: with p_dup a second copy arrives up to jitter_ns after
//     the first (a copy is not charged to the bottleneck).
// Losses are decided first (a lost packet takes no place in the queue),
// then the bottleneck, then the delays.
//
// Determinism: every fault draws from its own std::mt19937_64 stream,
// seeded from one seed, and only when it is enabled; so a run is the same
// given the seed, the packets and their times, and enabling one fault does
// not change which packets another one hits. Time is a parameter.
//
// No allocation after construction (the bottleneck table is sized then);
// one thread at a time. Several FaultyFabrics may share one model, e.g. N
// senders behind one bottleneck (incast).
#ifndef VRDMA_BACKEND_FABRIC_FAULT_MODEL_H_
#define VRDMA_BACKEND_FABRIC_FAULT_MODEL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "backend/rnic/rnic.h"

namespace vrdma::fabric {

struct FaultConfig {
  double loss = 0;          // random loss probability, any state
  double p_enter_bad = 0;   // Gilbert-Elliott; 0: no burst loss
  double p_leave_bad = 1;
  double loss_bad = 1;      // loss probability in the bad state
  double p_reorder = 0;
  uint64_t reorder_delay_ns = 0;
  double p_dup = 0;
  uint64_t delay_ns = 0;
  uint64_t jitter_ns = 0;
  uint64_t bottleneck_bps = 0;    // 0: no bottleneck
  uint64_t bottleneck_bytes = 0;  // backlog limit; 0: unlimited
  uint32_t bottleneck_dests = 64;  // destination GIDs with a queue
};

struct FaultStats {
  uint64_t packets = 0;           // packets decided
  uint64_t lost_random = 0;
  uint64_t lost_burst = 0;        // lost in the Gilbert-Elliott bad state
  uint64_t bottleneck_drops = 0;  // tail drops
  uint64_t bottleneck_untracked = 0;  // to a dgid beyond bottleneck_dests
  uint64_t reordered = 0;
  uint64_t duplicated = 0;
  uint64_t delayed = 0;           // copies that leave after their send time
};

// The model's verdict on one packet: `copies` copies (0: lost), leaving
// towards their destination at depart_ns[i] (>= the send time).
struct Fate {
  int copies = 0;
  uint64_t depart_ns[2] = {0, 0};
};

class FaultModel {
 public:
  FaultModel(const FaultConfig& config, uint64_t seed);

  // The fate of a packet of len bytes to dgid, sent at now_ns. Calls must
  // come in non-decreasing now_ns for the bottleneck to mean anything.
  Fate Decide(uint32_t len, const Gid& dgid, uint64_t now_ns);

  const FaultConfig& config() const { return config_; }
  const FaultStats& stats() const { return stats_; }
  // Bytes queued at the bottleneck towards dgid at now_ns (tests).
  uint64_t BacklogBytes(const Gid& dgid, uint64_t now_ns) const;

 private:
  struct Queue {
    Gid dgid{};
    uint64_t free_at_ns = 0;  // the link is busy until then
    uint64_t rem = 0;         // fraction of a ns, in units of 1/rate ns
  };
  // A uniform double in [0, 1) from 53 bits of g (the same on every
  // standard library, unlike std::uniform_real_distribution).
  static double Uniform(std::mt19937_64& g) {
    return static_cast<double>(g() >> 11) * 0x1.0p-53;
  }
  static uint64_t UniformNs(std::mt19937_64& g, uint64_t max) {
    return max == 0 ? 0 : g() % (max + 1);
  }
  Queue* FindQueue(const Gid& dgid, bool create);
  const Queue* FindQueue(const Gid& dgid) const;
  uint64_t Backlog(const Queue& q, uint64_t now_ns) const;

  FaultConfig config_;
  std::mt19937_64 loss_rng_, burst_rng_, reorder_rng_, dup_rng_, jitter_rng_;
  bool bad_ = false;  // Gilbert-Elliott state
  std::vector<Queue> queues_;  // capacity bottleneck_dests
  uint32_t num_queues_ = 0;
  FaultStats stats_;
};

}  // namespace vrdma::fabric

#endif  // VRDMA_BACKEND_FABRIC_FAULT_MODEL_H_
