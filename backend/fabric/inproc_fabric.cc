// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// InprocFabric's ports: a fixed ring of packet slots each, lent to the
// caller by Poll until its next Poll.
#include "backend/fabric/inproc_fabric.h"

#include <cstring>

namespace vrdma::fabric {

class InprocFabric::Port final : public Fabric {
 public:
  Port(InprocFabric* fabric, uint32_t capacity)
      : fabric_(fabric),
        slots_(size_t{capacity} * kMaxPacketBytes),
        meta_(capacity),
        capacity_(capacity) {}

  Status AddGid(const Gid& gid) override {
    if (gid == Gid{}) return Status::kInvalid;
    if (fabric_->Lookup(gid) != nullptr) return Status::kBusy;
    if (fabric_->num_routes_ == fabric_->routes_.size()) {
      return Status::kNoResource;
    }
    fabric_->routes_[fabric_->num_routes_++] = Route{gid, this};
    return Status::kOk;
  }

  Status RemoveGid(const Gid& gid) override {
    for (uint32_t i = 0; i < fabric_->num_routes_; ++i) {
      Route& r = fabric_->routes_[i];
      if (r.gid == gid && r.port == this) {
        r = fabric_->routes_[--fabric_->num_routes_];
        return Status::kOk;
      }
    }
    return Status::kBadHandle;
  }

  void Send(std::span<const uint8_t> packet, const Gid& dgid,
            uint64_t now_ns) override {
    ++stats_.sent;
    if (packet.empty() || packet.size() > kMaxPacketBytes) {
      ++stats_.dropped_oversize;
      return;
    }
    Port* to = fabric_->Lookup(dgid);
    if (to == nullptr) {
      ++stats_.dropped_no_route;
      return;
    }
    to->Enqueue(packet, now_ns + fabric_->options_.latency_ns);
  }

  int Poll(std::span<Datagram> out, uint64_t now_ns) override {
    // The packets the previous Poll lent are the caller's no longer.
    head_ += lent_;
    lent_ = 0;
    int n = 0;
    while (n < static_cast<int>(out.size()) && head_ + lent_ != tail_) {
      const uint32_t pos = (head_ + lent_) % capacity_;
      const Meta& m = meta_[pos];
      if (m.arrival_ns > now_ns) break;
      out[n++] = Datagram{&slots_[size_t{pos} * kMaxPacketBytes], m.len,
                          m.arrival_ns};
      ++lent_;
    }
    stats_.delivered += n;
    return n;
  }

  std::optional<uint64_t> NextEventNs() const override {
    if (head_ + lent_ == tail_) return std::nullopt;
    return meta_[(head_ + lent_) % capacity_].arrival_ns;
  }

  const InprocPortStats& stats() const { return stats_; }

 private:
  struct Meta {
    uint32_t len = 0;
    uint64_t arrival_ns = 0;
  };

  void Enqueue(std::span<const uint8_t> packet, uint64_t arrival_ns) {
    // Lent slots are still the caller's: they count as occupied.
    if (tail_ - head_ >= capacity_) {
      ++stats_.dropped_queue_full;
      return;
    }
    const uint32_t pos = tail_ % capacity_;
    std::memcpy(&slots_[size_t{pos} * kMaxPacketBytes], packet.data(),
                packet.size());
    meta_[pos] = Meta{static_cast<uint32_t>(packet.size()), arrival_ns};
    ++tail_;
  }

  InprocFabric* fabric_;
  std::vector<uint8_t> slots_;
  std::vector<Meta> meta_;
  uint32_t capacity_;
  // Free-running: [head_, head_ + lent_) lent by the last Poll,
  // [head_ + lent_, tail_) queued.
  uint32_t head_ = 0;
  uint32_t lent_ = 0;
  uint32_t tail_ = 0;
  InprocPortStats stats_;
};

InprocFabric::InprocFabric(InprocFabricOptions options)
    : options_(options), routes_(options.max_gids) {
  if (options_.queue_packets == 0) options_.queue_packets = 1;
}

InprocFabric::~InprocFabric() = default;

Fabric* InprocFabric::AddPort() {
  ports_.push_back(std::make_unique<Port>(this, options_.queue_packets));
  return ports_.back().get();
}

const InprocPortStats& InprocFabric::stats(const Fabric* port) const {
  static const InprocPortStats kNone;
  for (const auto& p : ports_) {
    if (p.get() == port) return p->stats();
  }
  return kNone;
}

InprocFabric::Port* InprocFabric::Lookup(const Gid& gid) const {
  // Linear: a test fabric has a handful of hosts with a few GIDs each.
  for (uint32_t i = 0; i < num_routes_; ++i) {
    if (routes_[i].gid == gid) return routes_[i].port;
  }
  return nullptr;
}

}  // namespace vrdma::fabric
