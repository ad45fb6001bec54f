// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// FaultyFabric: the model's verdicts carried out, with a fixed hold pool.
#include "backend/fabric/faulty_fabric.h"

#include <algorithm>
#include <cstring>

namespace vrdma::fabric {

FaultyFabric::FaultyFabric(Fabric* inner, const FaultConfig& config,
                           uint64_t seed, uint32_t hold_packets)
    : FaultyFabric(inner, nullptr, hold_packets) {
  own_model_ = std::make_unique<FaultModel>(config, seed);
  model_ = own_model_.get();
}

FaultyFabric::FaultyFabric(Fabric* inner, FaultModel* model,
                           uint32_t hold_packets)
    : inner_(inner),
      model_(model),
      slots_(size_t{hold_packets} * kMaxPacketBytes),
      free_(hold_packets),
      num_free_(hold_packets),
      heap_(hold_packets) {
  for (uint32_t i = 0; i < hold_packets; ++i) free_[i] = hold_packets - 1 - i;
}

FaultyFabric::~FaultyFabric() = default;

void FaultyFabric::Release(uint64_t now_ns) {
  while (num_held_ > 0 && heap_[0].depart_ns <= now_ns) {
    std::pop_heap(heap_.begin(), heap_.begin() + num_held_, Later);
    const Held& h = heap_[--num_held_];
    inner_->Send({&slots_[size_t{h.slot} * kMaxPacketBytes], h.len}, h.dgid,
                 h.depart_ns);
    free_[num_free_++] = h.slot;
    ++stats_.released;
  }
}

void FaultyFabric::Hold(std::span<const uint8_t> packet, const Gid& dgid,
                        uint64_t depart_ns) {
  if (num_free_ == 0 || packet.size() > kMaxPacketBytes) {
    ++stats_.hold_full;
    return;
  }
  const uint32_t slot = free_[--num_free_];
  std::memcpy(&slots_[size_t{slot} * kMaxPacketBytes], packet.data(),
              packet.size());
  heap_[num_held_++] = Held{depart_ns, seq_++, slot,
                            static_cast<uint32_t>(packet.size()), dgid};
  std::push_heap(heap_.begin(), heap_.begin() + num_held_, Later);
}

void FaultyFabric::Send(std::span<const uint8_t> packet, const Gid& dgid,
                        uint64_t now_ns) {
  // What was due leaves first: the wire keeps time order.
  Release(now_ns);
  const Fate fate =
      model_->Decide(static_cast<uint32_t>(packet.size()), dgid, now_ns);
  for (int i = 0; i < fate.copies; ++i) {
    if (fate.depart_ns[i] <= now_ns) {
      inner_->Send(packet, dgid, now_ns);
      ++stats_.passed;
    } else {
      Hold(packet, dgid, fate.depart_ns[i]);
    }
  }
}

int FaultyFabric::Poll(std::span<Datagram> out, uint64_t now_ns) {
  Release(now_ns);
  return inner_->Poll(out, now_ns);
}

std::optional<uint64_t> FaultyFabric::NextEventNs() const {
  std::optional<uint64_t> next = inner_->NextEventNs();
  if (num_held_ > 0 && (!next || heap_[0].depart_ns < *next)) {
    next = heap_[0].depart_ns;
  }
  return next;
}

}  // namespace vrdma::fabric
