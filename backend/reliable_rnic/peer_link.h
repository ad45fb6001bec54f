// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// PeerLink: how the layer reaches the layers of other daemons with the peer
// channel's messages (docs/reliability.md §3.5; the codec is
// backend/peer_channel/peer_message.h). The layer encodes and sends;
// whoever runs the channel hands it what arrives by calling
// ReliableRnic::OnPeerMessage on the data-path thread.
//
// Two implementations: InprocPeerLink (inproc_peer_link.h), which joins
// layers in one process for tests, and the UDP peer channel of step 9
// (backend/peer_channel/peer_channel.h), which resends until acknowledged.
// The layer itself repeats what it must get an answer to (CONNECT, every
// 1 ms), so a link may drop a message it cannot queue.
//
// Calls come from the layer's data-path thread (OnPeerMessage, Progress)
// and its control calls (ModifyQp, AttachPeerLink); an implementation
// must not block and must not allocate in Send and Broadcast.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_PEER_LINK_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_PEER_LINK_H_

#include <cstdint>
#include <optional>
#include <span>

#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

class PeerLink {
 public:
  virtual ~PeerLink() = default;

  // The daemon id of the peer whose layer owns gid (its GIDS messages, the
  // GID table of §3.5); nullopt when no daemon with the layer owns it (a
  // QP towards it stays native).
  virtual std::optional<uint64_t> PeerOf(const Gid& gid) const = 0;

  // Sends one encoded message to daemon peer; false when it could not be
  // queued (the message is dropped).
  virtual bool Send(uint64_t peer, std::span<const uint8_t> message) = 0;

  // Sends one encoded message to every peer daemon (HELLO).
  virtual void Broadcast(std::span<const uint8_t> message) = 0;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_PEER_LINK_H_
