// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// PeerChannel: the UDP peer channel between daemons (docs/reliability.md
// §3.5), the PeerLink the layer sends through (peer_link.h). One
// nonblocking UDP socket on the host network, run by the control thread
// (Start registers it with that thread's EpollEventLoop; tests may drive
// Turn by hand). The peers are the addresses given (--peer); each one's
// daemon id is learned from its first valid message.
//
// Reliability, per peer: each message sent gets the next sequence number of
// this daemon towards that peer (the header's seq; the layer's own seq and
// origin are overwritten) and `behind`: how many numbers before it are
// still unacknowledged. The receiver acknowledges every message it takes
// (one ACK each, duplicates too), delivers in sequence order exactly once,
// holds up to `window` out-of-order ones, and never waits for a number
// below seq - behind (the sender gave it up, or the receiver is new: its
// resync needs no timer). The sender resends each unacknowledged message
// every resend_interval (1 ms) up to max_resends (20) times, then gives it
// up (counted); at most `window` are pending per peer: a peer that never
// acknowledges loses its oldest (counted). CONNECT is not resent (the
// layer repeats it by its own rule).
//
// HELLO (daemon id, version, UNIT_SIZE, the layer's ACK QP once the layer
// has broadcast its own HELLO; all zero without the layer) at Start and
// every hello_interval; GIDS add/remove on every AddGids/RemoveGids, and
// the whole set to a peer when it is first heard of or restarted (a new
// daemon id from its address): the GID table, GID -> peer. PeerOf answers
// only for peers whose HELLO named an ACK QP (a daemon without the layer
// owns GIDs, but its QPs are native).
//
// Threads: the control thread owns the socket and every table. The
// layer's thread (the data path) calls PeerOf, Send and Broadcast: PeerOf
// reads the GID table under a seqlock, Send copies into a fixed SPSC
// outbox and writes an eventfd; nothing blocks or allocates. Received
// layer messages go the other way through a fixed SPSC inbox, which the
// data path drains (DrainInbox) into the sink; the control thread writes
// the inbox's eventfd so a sleeping data path wakes. A full inbox leaves
// messages held (and unacknowledged, so resent); a full outbox refuses
// Send (the layer repeats what it needs).
//
// Every datagram is untrusted and checked in this order, the first failure
// counted and the datagram dropped: the source is a --peer address
// (rx_unknown_sender), at most 512 bytes and decodes (rx_malformed, and
// per check), the origin is neither ours nor another peer's
// (rx_bad_origin), the seq is within the window (rx_outside_window); a
// seq already taken is acknowledged again and dropped (rx_duplicate). UDP
// sources are forgeable: the address check keeps strangers out, not
// forgers (the layer's tokens and checks still apply).
#ifndef VRDMA_BACKEND_PEER_CHANNEL_PEER_CHANNEL_H_
#define VRDMA_BACKEND_PEER_CHANNEL_PEER_CHANNEL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/base/event_loop.h"
#include "backend/fabric/udp_address.h"
#include "backend/peer_channel/peer_message.h"
#include "backend/reliable_rnic/peer_link.h"

namespace vrdma::peer {

inline constexpr uint32_t kMaxPeers = 16;

struct PeerChannelOptions {
  fabric::UdpAddress listen;             // --peer-listen
  std::vector<fabric::UdpAddress> peers;  // --peer, at most kMaxPeers
  uint64_t daemon_id = 0;                // 0: a random one (each start)
  uint64_t resend_interval_ns = 1'000'000;
  uint32_t max_resends = 20;
  uint64_t hello_interval_ns = 1'000'000'000;
  uint32_t window = 64;      // pending (sent) and held (received) per peer
  uint32_t max_gids = 4096;  // the GID table, every peer together
  uint32_t max_gids_per_peer = 1024;
  uint32_t outbox = 256;     // layer -> channel
  uint32_t inbox = 256;      // channel -> layer
  uint32_t max_datagrams_per_turn = 256;
  // ns, monotonic; default: steady clock (the timer fd's clock).
  std::function<uint64_t()> clock;
  // Tests: what happens to each datagram sent (0 lost, 1 sent, 2 sent
  // twice); nullptr: sent.
  std::function<int(std::span<const uint8_t>)> tx_hook;
};

struct PeerChannelStats {
  uint64_t sent = 0;        // sequenced messages sent (first time)
  uint64_t resent = 0;      // sent again
  uint64_t acks_sent = 0;
  uint64_t acks_received = 0;
  uint64_t acked = 0;       // pending messages an ACK cleared
  uint64_t gave_up = 0;     // resent max_resends times, never acked
  uint64_t evicted = 0;     // pending dropped for a newer (window full)
  uint64_t tx_errors = 0;   // sendto failed (EAGAIN included)
  uint64_t tx_unknown_peer = 0;  // Send to a daemon id not known
  uint64_t tx_invalid = 0;  // the layer's bytes did not decode
  uint64_t received = 0;    // datagrams read
  uint64_t delivered = 0;   // messages taken in order (to the layer or the channel)
  uint64_t rx_unknown_sender = 0;
  uint64_t rx_malformed = 0;  // any decode failure (checks below)
  uint64_t rx_bad_origin = 0;
  uint64_t rx_outside_window = 0;
  uint64_t rx_duplicate = 0;
  uint64_t rx_unknown_ack = 0;  // an ACK of nothing pending
  uint64_t skipped = 0;     // numbers never received, passed by behind
  uint64_t peer_restarts = 0;
  uint64_t gids_full = 0;   // GIDS entries the table refused
  uint64_t gids_moved = 0;  // a GID another peer had
  uint64_t inbox_full = 0;  // delivery waited for the layer
  uint64_t outbox_full = 0; // Send refused (data-path side)
  PeerCheckCounters checks;
};

struct PeerInfo {
  fabric::UdpAddress address;
  uint64_t id = 0;  // 0: not heard from
  bool has_layer = false;
  uint32_t gids = 0;
  uint32_t pending = 0;
  uint64_t span = 0;  // next seq - the oldest pending (0: none pending)
};

class PeerChannel final : public reliable::PeerLink {
 public:
  using Sink = std::function<void(std::span<const uint8_t>)>;

  // Binds options.listen; nullptr and *error when it cannot (a bad option,
  // the socket).
  static std::unique_ptr<PeerChannel> Open(PeerChannelOptions options, std::string* error);
  ~PeerChannel() override;
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  uint64_t id() const { return id_; }
  const fabric::UdpAddress& local_address() const { return local_; }

  // Control thread. Registers the socket, the outbox's eventfd and a timer
  // fd with loop and sends the first HELLO; Stop removes them (on loop's
  // thread, or before it runs / after it stopped).
  void Start(EpollEventLoop& loop);
  void Stop();
  // One turn by hand (tests; Start's handlers call it too): reads every
  // datagram, sends what the outbox has, resends and HELLOs what is due,
  // delivers what the inbox takes. Returns true when anything happened.
  bool Turn();
  // When Turn next has timed work (ns of the clock); UINT64_MAX: none.
  uint64_t NextDueNs() const;

  // Control thread: this daemon's VM GIDs, told to every peer.
  void AddGids(std::span<const Gid> gids);
  void RemoveGids(std::span<const Gid> gids);

  // reliable::PeerLink, the layer's thread.
  std::optional<uint64_t> PeerOf(const Gid& gid) const override;
  bool Send(uint64_t peer, std::span<const uint8_t> message) override;
  void Broadcast(std::span<const uint8_t> message) override;

  // The layer's thread: hands sink every message waiting in the inbox,
  // oldest first; returns how many. sink is set once (SetSink) before the
  // first message can arrive.
  void SetSink(Sink sink) { sink_ = std::move(sink); }
  int DrainInbox();
  // Written by the control thread when the inbox gets a message (the data
  // path's loop watches it; its handler calls ReadInboxFd).
  int inbox_fd() const { return inbox_fd_; }
  void ReadInboxFd();

  // Control thread.
  const PeerChannelStats& stats() const;
  std::vector<PeerInfo> Peers() const;
  // Every (GID, peer daemon id) in the table.
  std::vector<std::pair<Gid, uint64_t>> GidTable() const;
  uint32_t local_gid_count() const { return static_cast<uint32_t>(local_gids_.size()); }

 private:
  struct Slot {
    uint64_t seq = 0;  // 0: free
    uint64_t due_ns = 0;
    uint32_t resends = 0;
    uint16_t len = 0;
    bool resend = true;
    std::array<uint8_t, kMaxMessageBytes> bytes{};
  };
  struct Peer {
    fabric::UdpAddress address;
    std::atomic<uint64_t> id{0};
    std::atomic<bool> has_layer{false};
    // Sending.
    uint64_t next_seq = 1;
    std::vector<Slot> pending;  // window slots, by seq % window
    // Receiving.
    uint64_t next = 0;          // the lowest seq not taken; 0: none yet
    std::vector<Slot> held;     // out-of-order, by seq % window
    uint32_t gids = 0;
  };
  struct OutMsg {
    uint32_t peer = 0;  // kBroadcast: every peer
    uint16_t len = 0;
    std::array<uint8_t, kMaxMessageBytes> bytes{};
  };
  struct InMsg {
    uint16_t len = 0;
    std::array<uint8_t, kMaxMessageBytes> bytes{};
  };
  struct GidEntry {
    std::atomic<uint64_t> hi{0}, lo{0};
    std::atomic<uint32_t> peer{0};  // index + 1; 0: free
  };
  static constexpr uint32_t kBroadcast = ~0u;

  PeerChannel(int fd, const fabric::UdpAddress& local, PeerChannelOptions options);

  uint64_t Now() const { return clock_(); }
  // Sends bytes (a whole encoded message) to peer p, sequenced.
  void SendSequenced(uint32_t p, std::span<const uint8_t> bytes, bool resend);
  void SendRaw(uint32_t p, const uint8_t* bytes, size_t len);
  void SendAck(uint32_t p, uint64_t seq);
  void SendHello(uint32_t p);  // kBroadcast: every peer
  void SendGids(uint32_t p, bool add, std::span<const Gid> gids);
  bool ReadSocket();
  bool DrainOutbox();
  bool Timers();
  bool DeliverHeld(uint32_t p);
  void OnDatagram(uint32_t p, std::span<const uint8_t> bytes);
  void OnPeerRestart(uint32_t p, uint64_t id);
  // A message taken in order: the channel's own, or one for the layer.
  // false when the inbox is full (the message stays held).
  bool Take(uint32_t p, const PeerMessage& m, std::span<const uint8_t> bytes);
  void OnGids(uint32_t p, const Gids& g);
  bool PushInbox(std::span<const uint8_t> bytes);
  void ArmTimer();
  // GID table (control thread writes under seq_).
  void GidWriteBegin();
  void GidWriteEnd();
  int FindGidSlot(const Gid& gid) const;  // control thread
  void RemovePeerGids(uint32_t p);

  const int fd_;
  const fabric::UdpAddress local_;
  const PeerChannelOptions options_;
  const uint64_t id_;
  std::function<uint64_t()> clock_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Gid> local_gids_;
  // The layer's ACK QP, from its HELLO (HELLO's body; zero: no layer).
  Hello hello_{};
  uint64_t next_hello_ns_ = 0;

  // Outbox: the layer's thread produces, the control thread consumes.
  std::vector<OutMsg> outbox_;
  std::atomic<uint64_t> out_head_{0}, out_tail_{0};
  std::atomic<uint64_t> outbox_full_{0};
  int outbox_fd_ = -1;
  // Inbox: the control thread produces, the layer's thread consumes.
  std::vector<InMsg> inbox_;
  std::atomic<uint64_t> in_head_{0}, in_tail_{0};
  int inbox_fd_ = -1;
  Sink sink_;

  std::vector<GidEntry> gid_table_;
  std::atomic<uint64_t> gid_seq_{0};
  uint32_t gid_used_ = 0;

  EpollEventLoop* loop_ = nullptr;
  int timer_fd_ = -1;
  mutable PeerChannelStats stats_;
};

}  // namespace vrdma::peer

#endif  // VRDMA_BACKEND_PEER_CHANNEL_PEER_CHANNEL_H_
