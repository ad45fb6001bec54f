// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/peer_channel/peer_channel.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "backend/base/byte_order.h"

namespace vrdma::peer {
namespace {

uint64_t SteadyNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t RandomId() {
  uint64_t id = 0;
  while (id == 0) {
    if (getrandom(&id, sizeof(id), 0) != sizeof(id)) id = SteadyNs() ^ (static_cast<uint64_t>(getpid()) << 40);
  }
  return id;
}

// Messages the layer repeats by its own rule (§3.5): sent once here.
bool LayerRepeats(MsgType t) {
  return t == MsgType::kConnect || t == MsgType::kConnectOk || t == MsgType::kConnectNative;
}

void Wake(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(fd, &one, sizeof(one));
}

void Clear(int fd) {
  uint64_t v;
  [[maybe_unused]] ssize_t r = read(fd, &v, sizeof(v));
}

}  // namespace

std::unique_ptr<PeerChannel> PeerChannel::Open(PeerChannelOptions options, std::string* error) {
  auto fail = [&](const std::string& what) -> std::unique_ptr<PeerChannel> {
    if (error != nullptr) *error = what;
    return nullptr;
  };
  if (options.listen.len == 0) return fail("no address to listen on");
  if (options.peers.size() > kMaxPeers) {
    return fail("at most " + std::to_string(kMaxPeers) + " peers");
  }
  for (size_t i = 0; i < options.peers.size(); ++i) {
    if (options.peers[i].len == 0) return fail("a peer without an address");
    if (options.peers[i].family() != options.listen.family()) {
      return fail("peer " + fabric::UdpAddressToString(options.peers[i]) +
                  " is not of the listening address's family");
    }
    for (size_t j = 0; j < i; ++j) {
      if (options.peers[j].SameEndpoint(options.peers[i].storage)) {
        return fail("peer " + fabric::UdpAddressToString(options.peers[i]) + " given twice");
      }
    }
  }
  if (options.window == 0 || options.window > 4096 || options.outbox == 0 ||
      options.inbox == 0 || options.max_gids == 0 || options.max_resends == 0) {
    return fail("window (1..4096), outbox, inbox, max_gids and max_resends must be at least 1");
  }
  const int fd = socket(options.listen.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(std::string("socket: ") + std::strerror(errno));
  if (bind(fd, options.listen.sa(), options.listen.len) != 0) {
    const int e = errno;
    close(fd);
    return fail("bind " + fabric::UdpAddressToString(options.listen) + ": " + std::strerror(e));
  }
  fabric::UdpAddress local;
  local.len = sizeof(local.storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local.storage), &local.len) != 0) {
    const int e = errno;
    close(fd);
    return fail(std::string("getsockname: ") + std::strerror(e));
  }
  auto c = std::unique_ptr<PeerChannel>(new PeerChannel(fd, local, std::move(options)));
  if (c->outbox_fd_ < 0 || c->inbox_fd_ < 0 || c->timer_fd_ < 0) {
    return fail(std::string("eventfd/timerfd: ") + std::strerror(errno));
  }
  return c;
}

PeerChannel::PeerChannel(int fd, const fabric::UdpAddress& local, PeerChannelOptions options)
    : fd_(fd),
      local_(local),
      options_(std::move(options)),
      id_(options_.daemon_id != 0 ? options_.daemon_id : RandomId()),
      clock_(options_.clock ? options_.clock : SteadyNs),
      outbox_(options_.outbox),
      inbox_(options_.inbox),
      gid_table_(options_.max_gids) {
  for (const fabric::UdpAddress& a : options_.peers) {
    auto p = std::make_unique<Peer>();
    p->address = a;
    p->pending.resize(options_.window);
    p->held.resize(options_.window);
    peers_.push_back(std::move(p));
  }
  outbox_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  inbox_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
}

PeerChannel::~PeerChannel() {
  Stop();
  close(fd_);
  if (outbox_fd_ >= 0) close(outbox_fd_);
  if (inbox_fd_ >= 0) close(inbox_fd_);
  if (timer_fd_ >= 0) close(timer_fd_);
}

void PeerChannel::Start(EpollEventLoop& loop) {
  loop_ = &loop;
  auto turn = [this](uint32_t) {
    Turn();
    ArmTimer();
  };
  loop.AddFd(fd_, EPOLLIN, turn);
  loop.AddFd(outbox_fd_, EPOLLIN, [this, turn](uint32_t e) {
    Clear(outbox_fd_);
    turn(e);
  });
  loop.AddFd(timer_fd_, EPOLLIN, [this, turn](uint32_t e) {
    Clear(timer_fd_);
    turn(e);
  });
  Turn();  // the first HELLO and GIDS
  ArmTimer();
}

void PeerChannel::Stop() {
  if (loop_ == nullptr) return;
  loop_->RemoveFd(fd_);
  loop_->RemoveFd(outbox_fd_);
  loop_->RemoveFd(timer_fd_);
  loop_ = nullptr;
}

void PeerChannel::ArmTimer() {
  const uint64_t due = NextDueNs();
  itimerspec t{};
  if (due != UINT64_MAX) {
    const uint64_t at = std::max<uint64_t>(due, 1);
    t.it_value.tv_sec = static_cast<time_t>(at / 1'000'000'000);
    t.it_value.tv_nsec = static_cast<long>(at % 1'000'000'000);
  }
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &t, nullptr);
}

bool PeerChannel::Turn() {
  bool did = false;
  did |= ReadSocket();
  did |= DrainOutbox();
  did |= Timers();
  for (uint32_t p = 0; p < peers_.size(); ++p) did |= DeliverHeld(p);
  return did;
}

uint64_t PeerChannel::NextDueNs() const {
  uint64_t due = next_hello_ns_;
  for (const auto& p : peers_) {
    for (const Slot& s : p->pending) {
      if (s.seq != 0) due = std::min(due, s.due_ns);
    }
  }
  return due;
}

// ---- Sending ---------------------------------------------------------------------

void PeerChannel::SendRaw(uint32_t p, const uint8_t* bytes, size_t len) {
  int copies = 1;
  if (options_.tx_hook) copies = options_.tx_hook(std::span(bytes, len));
  const fabric::UdpAddress& to = peers_[p]->address;
  for (int i = 0; i < copies; ++i) {
    if (sendto(fd_, bytes, len, MSG_DONTWAIT | MSG_NOSIGNAL, to.sa(), to.len) !=
        static_cast<ssize_t>(len)) {
      ++stats_.tx_errors;
    }
  }
}

void PeerChannel::SendSequenced(uint32_t p, std::span<const uint8_t> bytes, bool resend) {
  Peer& peer = *peers_[p];
  const uint64_t seq = peer.next_seq++;
  const uint32_t w = options_.window;
  Slot& s = peer.pending[seq % w];
  if (s.seq != 0) ++stats_.evicted;  // the oldest pending: the peer never acked it
  s.seq = 0;
  uint64_t oldest = seq;
  for (const Slot& o : peer.pending) {
    if (o.seq != 0) oldest = std::min(oldest, o.seq);
  }
  std::memcpy(s.bytes.data(), bytes.data(), bytes.size());
  s.len = static_cast<uint16_t>(bytes.size());
  StoreLe32(s.bytes.data() + 4, static_cast<uint32_t>(seq - oldest));
  StoreLe64(s.bytes.data() + 8, id_);
  StoreLe64(s.bytes.data() + 16, seq);
  s.seq = seq;
  s.resends = 0;
  s.resend = resend;
  s.due_ns = Now() + options_.resend_interval_ns;
  ++stats_.sent;
  SendRaw(p, s.bytes.data(), s.len);
}

void PeerChannel::SendAck(uint32_t p, uint64_t seq) {
  PeerMessage m;
  m.type = MsgType::kAck;
  m.origin = id_;
  m.seq = 0;
  m.body = Ack{seq};
  uint8_t buf[kMaxMessageBytes];
  const size_t n = Encode(m, buf);
  if (n == 0) return;
  ++stats_.acks_sent;
  SendRaw(p, buf, n);
}

void PeerChannel::SendHello(uint32_t p) {
  PeerMessage m;
  m.type = MsgType::kHello;
  m.origin = id_;
  m.seq = 1;  // restamped
  m.body = hello_;
  uint8_t buf[kMaxMessageBytes];
  const size_t n = Encode(m, buf);
  if (n == 0) return;
  for (uint32_t i = 0; i < peers_.size(); ++i) {
    if (p == kBroadcast || p == i) SendSequenced(i, std::span(buf, n), true);
  }
}

void PeerChannel::SendGids(uint32_t p, bool add, std::span<const Gid> gids) {
  while (!gids.empty()) {
    PeerMessage m;
    m.type = MsgType::kGids;
    m.origin = id_;
    m.seq = 1;
    Gids g;
    g.add = add;
    g.count = static_cast<uint8_t>(std::min<size_t>(gids.size(), kMaxGidsPerMessage));
    std::copy_n(gids.begin(), g.count, g.gids.begin());
    gids = gids.subspan(g.count);
    m.body = g;
    uint8_t buf[kMaxMessageBytes];
    const size_t n = Encode(m, buf);
    if (n == 0) continue;  // a zero or repeated GID: AddGids filters them
    for (uint32_t i = 0; i < peers_.size(); ++i) {
      if (p == kBroadcast || p == i) SendSequenced(i, std::span(buf, n), true);
    }
  }
}

void PeerChannel::AddGids(std::span<const Gid> gids) {
  std::vector<Gid> fresh;
  for (const Gid& g : gids) {
    if (g == Gid{} || std::find(local_gids_.begin(), local_gids_.end(), g) != local_gids_.end() ||
        std::find(fresh.begin(), fresh.end(), g) != fresh.end()) {
      continue;
    }
    fresh.push_back(g);
  }
  local_gids_.insert(local_gids_.end(), fresh.begin(), fresh.end());
  SendGids(kBroadcast, true, fresh);
}

void PeerChannel::RemoveGids(std::span<const Gid> gids) {
  std::vector<Gid> gone;
  for (const Gid& g : gids) {
    auto it = std::find(local_gids_.begin(), local_gids_.end(), g);
    if (it == local_gids_.end()) continue;
    local_gids_.erase(it);
    gone.push_back(g);
  }
  SendGids(kBroadcast, false, gone);
}

bool PeerChannel::Timers() {
  const uint64_t now = Now();
  bool did = false;
  if (now >= next_hello_ns_) {
    SendHello(kBroadcast);
    next_hello_ns_ = now + options_.hello_interval_ns;
    did = true;
  }
  for (uint32_t p = 0; p < peers_.size(); ++p) {
    Peer& peer = *peers_[p];
    // What will not be sent again goes first, so that behind passes it.
    uint64_t oldest = UINT64_MAX;
    bool due = false;
    for (Slot& s : peer.pending) {
      if (s.seq == 0) continue;
      if (s.due_ns <= now) {
        did = true;
        if (!s.resend) {  // CONNECT and its answers: the layer repeats them
          s.seq = 0;
          continue;
        }
        if (s.resends >= options_.max_resends) {
          ++stats_.gave_up;
          s.seq = 0;
          continue;
        }
        due = true;
      }
      oldest = std::min(oldest, s.seq);
    }
    if (!due) continue;
    for (Slot& s : peer.pending) {
      if (s.seq == 0 || s.due_ns > now) continue;
      ++s.resends;
      ++stats_.resent;
      s.due_ns = now + options_.resend_interval_ns;
      // The oldest still pending may have moved on since it was first sent.
      StoreLe32(s.bytes.data() + 4, static_cast<uint32_t>(s.seq - oldest));
      SendRaw(p, s.bytes.data(), s.len);
    }
  }
  return did;
}

// The layer's side.

bool PeerChannel::Send(uint64_t peer, std::span<const uint8_t> message) {
  if (message.size() < kHeaderBytes || message.size() > kMaxMessageBytes) return false;
  uint32_t p = 0;
  while (p < peers_.size() && peers_[p]->id.load(std::memory_order_acquire) != peer) ++p;
  if (p == peers_.size() || peer == 0) return false;
  const uint64_t tail = out_tail_.load(std::memory_order_relaxed);
  if (tail - out_head_.load(std::memory_order_acquire) == outbox_.size()) {
    outbox_full_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  OutMsg& o = outbox_[tail % outbox_.size()];
  o.peer = p;
  o.len = static_cast<uint16_t>(message.size());
  std::memcpy(o.bytes.data(), message.data(), message.size());
  // The id the layer meant: a peer that restarted meanwhile is not it.
  StoreLe64(o.bytes.data() + 8, peer);
  out_tail_.store(tail + 1, std::memory_order_release);
  Wake(outbox_fd_);
  return true;
}

void PeerChannel::Broadcast(std::span<const uint8_t> message) {
  if (message.size() < kHeaderBytes || message.size() > kMaxMessageBytes) return;
  const uint64_t tail = out_tail_.load(std::memory_order_relaxed);
  if (tail - out_head_.load(std::memory_order_acquire) == outbox_.size()) {
    outbox_full_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  OutMsg& o = outbox_[tail % outbox_.size()];
  o.peer = kBroadcast;
  o.len = static_cast<uint16_t>(message.size());
  std::memcpy(o.bytes.data(), message.data(), message.size());
  out_tail_.store(tail + 1, std::memory_order_release);
  Wake(outbox_fd_);
}

bool PeerChannel::DrainOutbox() {
  bool did = false;
  uint64_t head = out_head_.load(std::memory_order_relaxed);
  while (head != out_tail_.load(std::memory_order_acquire)) {
    OutMsg& o = outbox_[head % outbox_.size()];
    did = true;
    const uint64_t meant = LoadLe64(o.bytes.data() + 8);
    // The layer's own origin and seq are replaced; what it wrote must be a
    // message all the same.
    StoreLe64(o.bytes.data() + 8, id_);
    PeerMessage m;
    if (Decode(std::span(o.bytes.data(), o.len), &m) != PeerCheck::kOk ||
        m.type == MsgType::kAck) {
      ++stats_.tx_invalid;
    } else if (o.peer == kBroadcast) {
      if (m.type == MsgType::kHello) hello_ = std::get<Hello>(m.body);
      for (uint32_t p = 0; p < peers_.size(); ++p) {
        SendSequenced(p, std::span(o.bytes.data(), o.len), !LayerRepeats(m.type));
      }
    } else if (o.peer < peers_.size() && peers_[o.peer]->id.load() == meant) {
      SendSequenced(o.peer, std::span(o.bytes.data(), o.len), !LayerRepeats(m.type));
    } else {
      ++stats_.tx_unknown_peer;
    }
    ++head;
    out_head_.store(head, std::memory_order_release);
  }
  return did;
}

// ---- Receiving -------------------------------------------------------------------

bool PeerChannel::ReadSocket() {
  bool did = false;
  // One byte more than a message may have: a longer datagram is seen as one.
  uint8_t buf[kMaxMessageBytes + 1];
  for (uint32_t i = 0; i < options_.max_datagrams_per_turn; ++i) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof(from);
    const ssize_t n = recvfrom(fd_, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
                               reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) break;  // EAGAIN, or an error the next datagram may not have
    did = true;
    ++stats_.received;
    uint32_t p = 0;
    while (p < peers_.size() && !peers_[p]->address.SameEndpoint(from)) ++p;
    if (p == peers_.size()) {
      ++stats_.rx_unknown_sender;
      continue;
    }
    OnDatagram(p, std::span(buf, std::min<size_t>(static_cast<size_t>(n), sizeof(buf))));
  }
  return did;
}

void PeerChannel::OnDatagram(uint32_t p, std::span<const uint8_t> bytes) {
  PeerMessage m;
  const PeerCheck check = Decode(bytes, &m);
  stats_.checks.Count(check);
  if (check != PeerCheck::kOk) {
    ++stats_.rx_malformed;
    return;
  }
  Peer& peer = *peers_[p];
  if (m.origin == id_) {
    ++stats_.rx_bad_origin;
    return;
  }
  for (uint32_t q = 0; q < peers_.size(); ++q) {
    if (q != p && peers_[q]->id.load(std::memory_order_relaxed) == m.origin) {
      ++stats_.rx_bad_origin;
      return;
    }
  }
  const uint64_t known = peer.id.load(std::memory_order_relaxed);
  if (known != m.origin) OnPeerRestart(p, m.origin);
  if (m.type == MsgType::kAck) {
    ++stats_.acks_received;
    const uint64_t s = std::get<Ack>(m.body).acked_seq;
    Slot& slot = peer.pending[s % options_.window];
    if (slot.seq == s) {
      slot.seq = 0;
      ++stats_.acked;
    } else {
      ++stats_.rx_unknown_ack;
    }
    return;
  }
  const uint32_t w = options_.window;
  const uint64_t low = m.seq - m.behind;  // Decode: behind < seq
  if (peer.next == 0) peer.next = low;
  if (low > peer.next) {
    // The sender will not send what lies below low again: take what is held
    // of it in order, skip the rest.
    const uint64_t end = std::min(low, peer.next + w);
    while (peer.next < end) {
      Slot& h = peer.held[peer.next % w];
      if (h.seq == peer.next) {
        PeerMessage hm;
        const std::span<const uint8_t> hb(h.bytes.data(), h.len);
        if (Decode(hb, &hm) == PeerCheck::kOk && !Take(p, hm, hb)) return;  // inbox full
        SendAck(p, h.seq);
        h.seq = 0;
      } else {
        ++stats_.skipped;
      }
      ++peer.next;
    }
    if (peer.next < low) {
      stats_.skipped += low - peer.next;
      peer.next = low;
    }
  }
  if (m.seq < peer.next) {
    ++stats_.rx_duplicate;
    SendAck(p, m.seq);  // its ACK was lost: the sender still resends it
    return;
  }
  if (m.seq - peer.next >= w) {
    ++stats_.rx_outside_window;
    return;
  }
  Slot& h = peer.held[m.seq % w];
  if (h.seq == m.seq) {
    ++stats_.rx_duplicate;  // held already, acknowledged when taken
    return;
  }
  h.seq = m.seq;
  h.len = static_cast<uint16_t>(bytes.size());
  std::memcpy(h.bytes.data(), bytes.data(), bytes.size());
  DeliverHeld(p);
}

bool PeerChannel::DeliverHeld(uint32_t p) {
  Peer& peer = *peers_[p];
  const uint32_t w = options_.window;
  bool did = false;
  while (peer.next != 0) {
    Slot& h = peer.held[peer.next % w];
    if (h.seq != peer.next) break;
    PeerMessage m;
    const std::span<const uint8_t> b(h.bytes.data(), h.len);
    if (Decode(b, &m) == PeerCheck::kOk && !Take(p, m, b)) break;  // inbox full
    SendAck(p, h.seq);
    h.seq = 0;
    ++peer.next;
    did = true;
  }
  return did;
}

void PeerChannel::OnPeerRestart(uint32_t p, uint64_t id) {
  Peer& peer = *peers_[p];
  if (peer.id.load(std::memory_order_relaxed) != 0) ++stats_.peer_restarts;
  RemovePeerGids(p);
  peer.has_layer.store(false, std::memory_order_release);
  peer.next = 0;
  for (Slot& h : peer.held) h.seq = 0;
  peer.id.store(id, std::memory_order_release);
  // A new daemon learns who we are and what we have at once.
  SendHello(p);
  SendGids(p, true, local_gids_);
}

bool PeerChannel::Take(uint32_t p, const PeerMessage& m, std::span<const uint8_t> bytes) {
  Peer& peer = *peers_[p];
  bool for_layer = true;
  if (m.type == MsgType::kHello) {
    const Hello& h = std::get<Hello>(m.body);
    for_layer = h.ack_qpn != 0;
    if (for_layer && sink_ && !PushInbox(bytes)) return false;
    peer.has_layer.store(for_layer, std::memory_order_release);
  } else if (m.type == MsgType::kGids) {
    OnGids(p, std::get<Gids>(m.body));
  } else if (sink_ && !PushInbox(bytes)) {
    return false;
  }
  ++stats_.delivered;
  return true;
}

bool PeerChannel::PushInbox(std::span<const uint8_t> bytes) {
  const uint64_t tail = in_tail_.load(std::memory_order_relaxed);
  if (tail - in_head_.load(std::memory_order_acquire) == inbox_.size()) {
    ++stats_.inbox_full;
    return false;
  }
  InMsg& m = inbox_[tail % inbox_.size()];
  m.len = static_cast<uint16_t>(bytes.size());
  std::memcpy(m.bytes.data(), bytes.data(), bytes.size());
  in_tail_.store(tail + 1, std::memory_order_release);
  Wake(inbox_fd_);
  return true;
}

int PeerChannel::DrainInbox() {
  int n = 0;
  uint64_t head = in_head_.load(std::memory_order_relaxed);
  while (head != in_tail_.load(std::memory_order_acquire)) {
    const InMsg& m = inbox_[head % inbox_.size()];
    if (sink_) sink_(std::span(m.bytes.data(), m.len));
    ++head;
    in_head_.store(head, std::memory_order_release);
    ++n;
  }
  return n;
}

void PeerChannel::ReadInboxFd() { Clear(inbox_fd_); }

// ---- The GID table ---------------------------------------------------------------

namespace {
uint64_t Hi(const Gid& g) { return LoadLe64(g.data()); }
uint64_t Lo(const Gid& g) { return LoadLe64(g.data() + 8); }
}  // namespace

void PeerChannel::GidWriteBegin() {
  gid_seq_.store(gid_seq_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}

void PeerChannel::GidWriteEnd() {
  gid_seq_.store(gid_seq_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

int PeerChannel::FindGidSlot(const Gid& gid) const {
  const uint64_t hi = Hi(gid), lo = Lo(gid);
  for (uint32_t i = 0; i < gid_table_.size(); ++i) {
    const GidEntry& e = gid_table_[i];
    if (e.peer.load(std::memory_order_relaxed) != 0 &&
        e.hi.load(std::memory_order_relaxed) == hi && e.lo.load(std::memory_order_relaxed) == lo) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

void PeerChannel::OnGids(uint32_t p, const Gids& g) {
  Peer& peer = *peers_[p];
  GidWriteBegin();
  for (uint32_t i = 0; i < g.count; ++i) {
    const Gid& gid = g.gids[i];
    const int at = FindGidSlot(gid);
    if (!g.add) {
      if (at >= 0 && gid_table_[at].peer.load(std::memory_order_relaxed) == p + 1) {
        gid_table_[at].peer.store(0, std::memory_order_relaxed);
        --peer.gids;
        --gid_used_;
      }
      continue;
    }
    if (at >= 0) {
      const uint32_t owner = gid_table_[at].peer.load(std::memory_order_relaxed);
      if (owner == p + 1) continue;
      if (peer.gids >= options_.max_gids_per_peer) {
        ++stats_.gids_full;
        continue;
      }
      ++stats_.gids_moved;  // a VM that moved (or a peer that lies)
      --peers_[owner - 1]->gids;
      gid_table_[at].peer.store(p + 1, std::memory_order_relaxed);
      ++peer.gids;
      continue;
    }
    if (peer.gids >= options_.max_gids_per_peer || gid_used_ >= gid_table_.size()) {
      ++stats_.gids_full;
      continue;
    }
    for (GidEntry& e : gid_table_) {
      if (e.peer.load(std::memory_order_relaxed) != 0) continue;
      e.hi.store(Hi(gid), std::memory_order_relaxed);
      e.lo.store(Lo(gid), std::memory_order_relaxed);
      e.peer.store(p + 1, std::memory_order_relaxed);
      break;
    }
    ++peer.gids;
    ++gid_used_;
  }
  GidWriteEnd();
}

void PeerChannel::RemovePeerGids(uint32_t p) {
  GidWriteBegin();
  for (GidEntry& e : gid_table_) {
    if (e.peer.load(std::memory_order_relaxed) == p + 1) {
      e.peer.store(0, std::memory_order_relaxed);
      --gid_used_;
    }
  }
  peers_[p]->gids = 0;
  GidWriteEnd();
}

std::optional<uint64_t> PeerChannel::PeerOf(const Gid& gid) const {
  const uint64_t hi = Hi(gid), lo = Lo(gid);
  for (;;) {
    const uint64_t s1 = gid_seq_.load(std::memory_order_acquire);
    if (s1 & 1) continue;
    uint32_t owner = 0;
    for (const GidEntry& e : gid_table_) {
      const uint32_t o = e.peer.load(std::memory_order_relaxed);
      if (o != 0 && e.hi.load(std::memory_order_relaxed) == hi &&
          e.lo.load(std::memory_order_relaxed) == lo) {
        owner = o;
        break;
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (gid_seq_.load(std::memory_order_relaxed) != s1) continue;
    if (owner == 0 || owner > peers_.size()) return std::nullopt;
    const Peer& peer = *peers_[owner - 1];
    const uint64_t id = peer.id.load(std::memory_order_acquire);
    if (id == 0 || !peer.has_layer.load(std::memory_order_acquire)) return std::nullopt;
    return id;
  }
}

// ---- Introspection ---------------------------------------------------------------

const PeerChannelStats& PeerChannel::stats() const {
  stats_.outbox_full = outbox_full_.load(std::memory_order_relaxed);
  return stats_;
}

std::vector<PeerInfo> PeerChannel::Peers() const {
  std::vector<PeerInfo> out;
  for (const auto& p : peers_) {
    PeerInfo i;
    i.address = p->address;
    i.id = p->id.load();
    i.has_layer = p->has_layer.load();
    i.gids = p->gids;
    uint64_t oldest = p->next_seq;
    for (const Slot& s : p->pending) {
      i.pending += s.seq != 0;
      if (s.seq != 0) oldest = std::min(oldest, s.seq);
    }
    i.span = p->next_seq - oldest;
    out.push_back(i);
  }
  return out;
}

std::vector<std::pair<Gid, uint64_t>> PeerChannel::GidTable() const {
  std::vector<std::pair<Gid, uint64_t>> out;
  for (const GidEntry& e : gid_table_) {
    const uint32_t o = e.peer.load();
    if (o == 0) continue;
    Gid g;
    StoreLe64(g.data(), e.hi.load());
    StoreLe64(g.data() + 8, e.lo.load());
    out.emplace_back(g, peers_[o - 1]->id.load());
  }
  return out;
}

}  // namespace vrdma::peer
