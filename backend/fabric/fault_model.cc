// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// FaultModel's decisions, in the order the header gives.
#include "backend/fabric/fault_model.h"

namespace vrdma::fabric {
namespace {

constexpr uint64_t kBitNsPerByte = 8'000'000'000;  // bits x ns-per-second

// One seed per fault stream (splitmix64 of the seed and the stream's
// number), so the streams are unrelated.
uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

FaultModel::FaultModel(const FaultConfig& config, uint64_t seed)
    : config_(config),
      loss_rng_(StreamSeed(seed, 0)),
      burst_rng_(StreamSeed(seed, 1)),
      reorder_rng_(StreamSeed(seed, 2)),
      dup_rng_(StreamSeed(seed, 3)),
      jitter_rng_(StreamSeed(seed, 4)),
      queues_(config.bottleneck_bps != 0 ? config.bottleneck_dests : 0) {}

FaultModel::Queue* FaultModel::FindQueue(const Gid& dgid, bool create) {
  for (uint32_t i = 0; i < num_queues_; ++i) {
    if (queues_[i].dgid == dgid) return &queues_[i];
  }
  if (!create || num_queues_ == queues_.size()) return nullptr;
  queues_[num_queues_] = Queue{dgid, 0, 0};
  return &queues_[num_queues_++];
}

const FaultModel::Queue* FaultModel::FindQueue(const Gid& dgid) const {
  for (uint32_t i = 0; i < num_queues_; ++i) {
    if (queues_[i].dgid == dgid) return &queues_[i];
  }
  return nullptr;
}

uint64_t FaultModel::Backlog(const Queue& q, uint64_t now_ns) const {
  if (q.free_at_ns <= now_ns) return 0;
  // Bytes the link still has to serialize: busy time x rate.
  const unsigned __int128 bits_ns =
      static_cast<unsigned __int128>(q.free_at_ns - now_ns) *
      config_.bottleneck_bps;
  return static_cast<uint64_t>(bits_ns / kBitNsPerByte);
}

uint64_t FaultModel::BacklogBytes(const Gid& dgid, uint64_t now_ns) const {
  const Queue* q = FindQueue(dgid);
  return q == nullptr ? 0 : Backlog(*q, now_ns);
}

Fate FaultModel::Decide(uint32_t len, const Gid& dgid, uint64_t now_ns) {
  ++stats_.packets;
  Fate fate;

  // 1. Losses. The chain steps on every packet, lost or not.
  bool lost_burst = false;
  if (config_.p_enter_bad > 0) {
    const double step = Uniform(burst_rng_);
    bad_ = bad_ ? step >= config_.p_leave_bad : step < config_.p_enter_bad;
    const double u = Uniform(burst_rng_);
    lost_burst = bad_ && u < config_.loss_bad;
  }
  const bool lost_random = config_.loss > 0 && Uniform(loss_rng_) < config_.loss;
  if (lost_burst) {
    ++stats_.lost_burst;
    return fate;
  }
  if (lost_random) {
    ++stats_.lost_random;
    return fate;
  }

  // 2. The bottleneck: tail drop, else leave when serialized.
  uint64_t t = now_ns;
  if (config_.bottleneck_bps != 0) {
    Queue* q = FindQueue(dgid, /*create=*/true);
    if (q == nullptr) {
      ++stats_.bottleneck_untracked;
    } else {
      if (config_.bottleneck_bytes != 0 &&
          Backlog(*q, now_ns) + len > config_.bottleneck_bytes) {
        ++stats_.bottleneck_drops;
        return fate;
      }
      if (q->free_at_ns < now_ns) {  // the link idled: no credit
        q->free_at_ns = now_ns;
        q->rem = 0;
      }
      // Exact: free_at advances by len x 8e9 / rate ns, the remainder
      // carried in units of 1/rate ns.
      const unsigned __int128 num =
          static_cast<unsigned __int128>(len) * kBitNsPerByte + q->rem;
      q->free_at_ns += static_cast<uint64_t>(num / config_.bottleneck_bps);
      q->rem = static_cast<uint64_t>(num % config_.bottleneck_bps);
      t = q->free_at_ns;
    }
  }

  // 3. Delays.
  t += config_.delay_ns + UniformNs(jitter_rng_, config_.jitter_ns);
  if (config_.p_reorder > 0 && Uniform(reorder_rng_) < config_.p_reorder) {
    t += config_.reorder_delay_ns;
    ++stats_.reordered;
  }
  fate.copies = 1;
  fate.depart_ns[0] = t;
  if (config_.p_dup > 0 && Uniform(dup_rng_) < config_.p_dup) {
    fate.copies = 2;
    fate.depart_ns[1] = t + UniformNs(dup_rng_, config_.jitter_ns);
    ++stats_.duplicated;
  }
  for (int i = 0; i < fate.copies; ++i) {
    if (fate.depart_ns[i] > now_ns) ++stats_.delayed;
  }
  return fate;
}

}  // namespace vrdma::fabric
