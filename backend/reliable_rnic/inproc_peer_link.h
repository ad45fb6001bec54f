// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// InprocPeerLink: the peer channel's in-process twin (peer_link.h) for
// tests that run several layers in one process, one link per layer
// ("daemon"). Join makes two links peers; AddGid says which GIDs this
// daemon's layer owns (what GIDS would tell its peers). Send copies the
// message into the peer's inbox (a fixed ring: a full one drops, as the
// UDP channel's socket would); Deliver hands a layer every message in its
// inbox, oldest first, on the caller's (the data path's) thread. No loss
// of its own: `drop` makes a link lose everything it sends.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_INPROC_PEER_LINK_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_INPROC_PEER_LINK_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/peer_link.h"

namespace vrdma::reliable {

template <typename Layer>
class InprocPeerLinkT final : public PeerLink {
 public:
  static constexpr uint32_t kInbox = 256;

  explicit InprocPeerLinkT(uint64_t daemon_id) : id_(daemon_id) {}

  static void Join(InprocPeerLinkT& a, InprocPeerLinkT& b) {
    a.peers_.push_back(&b);
    b.peers_.push_back(&a);
  }

  uint64_t id() const { return id_; }
  void AddGid(const Gid& gid) { gids_.push_back(gid); }
  void RemoveGid(const Gid& gid) {
    gids_.erase(std::remove(gids_.begin(), gids_.end(), gid), gids_.end());
  }

  std::optional<uint64_t> PeerOf(const Gid& gid) const override {
    for (const InprocPeerLinkT* p : peers_) {
      if (std::find(p->gids_.begin(), p->gids_.end(), gid) != p->gids_.end())
        return p->id_;
    }
    return std::nullopt;
  }

  bool Send(uint64_t peer, std::span<const uint8_t> message) override {
    ++sent;
    if (drop) return true;  // lost on the way
    for (InprocPeerLinkT* p : peers_) {
      if (p->id_ == peer) return p->Enqueue(message);
    }
    return false;
  }

  void Broadcast(std::span<const uint8_t> message) override {
    for (InprocPeerLinkT* p : peers_) (void)Send(p->id_, message);
  }

  // Hands layer every message in this link's inbox; returns how many.
  int Deliver(Layer& layer) {
    int n = 0;
    while (head_ != tail_) {
      const Slot& s = inbox_[head_ % kInbox];
      ++head_;
      layer.OnPeerMessage(std::span<const uint8_t>(s.bytes.data(), s.len));
      ++n;
    }
    return n;
  }
  bool empty() const { return head_ == tail_; }

  bool drop = false;   // lose everything this link sends
  uint64_t sent = 0;   // messages Send took (also those dropped)
  uint64_t full = 0;   // messages the peer's inbox refused

 private:
  struct Slot {
    std::array<uint8_t, peer::kMaxMessageBytes> bytes{};
    uint32_t len = 0;
  };
  bool Enqueue(std::span<const uint8_t> m) {
    if (tail_ - head_ == kInbox || m.size() > peer::kMaxMessageBytes) {
      ++full;
      return false;
    }
    Slot& s = inbox_[tail_ % kInbox];
    std::memcpy(s.bytes.data(), m.data(), m.size());
    s.len = static_cast<uint32_t>(m.size());
    ++tail_;
    return true;
  }

  uint64_t id_;
  std::vector<InprocPeerLinkT*> peers_;
  std::vector<Gid> gids_;
  std::array<Slot, kInbox> inbox_{};
  uint64_t head_ = 0, tail_ = 0;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_INPROC_PEER_LINK_H_
