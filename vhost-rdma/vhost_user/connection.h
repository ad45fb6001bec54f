// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The backend (server) side of one vhost-user connection: reads messages
// from the frontend, validates them in three stages (framing table in
// message_validation.h, struct syntax in messages.h, meaning here against
// the current state), and drives a VhostUserDevice. Runs on the control
// thread; the device moves queues to the data-path thread itself.
//
// Any protocol violation or socket error ends the connection: all queues are
// stopped, the device is Reset(), the memory table is dropped and every fd
// is closed. A well-formed request the backend refuses (kAccess: SET_CONFIG
// on the read-only config, a memory table that is not sealed) is NACKed and
// the connection goes on. A frontend can make
// HandleMessage fail, never crash or hang the process: reads never block
// (a message that arrives in pieces is assembled across calls, so a peer
// that stalls mid-message stalls only itself), and neither do replies: the
// connection's output is bounded (kMaxOutputBytes of socket send buffer)
// and a peer that stops reading until a reply no longer fits is
// disconnected (kNoResource). A frontend reads each reply before its next
// request, so it never has more than one reply unread.
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_CONNECTION_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/base/status.h"
#include "backend/memory/guest_memory.h"
#include "vhost-rdma/vhost_user/device.h"
#include "vhost-rdma/vhost_user/messages.h"
#include "vhost-rdma/vhost_user/socket_io.h"
#include "vhost-rdma/vhost_user/virtqueue.h"

namespace vrdma::vhost {

// What the operator allows a frontend (daemon flags).
struct ConnectionOptions {
  // SET_MEM_TABLE regions (see GuestMemoryOptions::allow_unsealed).
  GuestMemoryOptions memory;
};

class Connection {
 public:
  // Unread replies a frontend may leave in the socket (SO_SNDBUF; the kernel
  // doubles it for bookkeeping). Thousands of replies: only a frontend that
  // never reads reaches it.
  static constexpr int kMaxOutputBytes = 64 * 1024;
  // Protocol features offered to the frontend.
  static constexpr uint64_t kProtocolFeatures = (1ull << kProtoMq) | (1ull << kProtoReplyAck) |
                                                (1ull << kProtoConfig) | (1ull << kProtoStatus);

  // Takes ownership of `sock`, a connected unix stream socket. `device`
  // must outlive the connection.
  Connection(int sock, VhostUserDevice* device, const ConnectionOptions& options = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return sock_; }
  bool closed() const { return sock_ < 0; }

  // Call when fd() is readable: reads what has arrived (without blocking)
  // and handles the message once it is complete. A non-OK result means the
  // connection has been shut down (see Shutdown) and fd() is closed: remove
  // the fd (saved beforehand) from the loop.
  Status HandleMessage();

  // Called after every complete message with its header and the outcome
  // (debug logging in the daemon; tests). Control path only.
  using TraceFn = std::function<void(const VhostUserHeader& hdr, Status result)>;
  void set_trace(TraceFn trace) { trace_ = std::move(trace); }

  // Stops every queue, resets the device, closes every fd and lets go of the
  // memory table: the connection's and the device's (SetMemory(nullptr)),
  // so guest RAM is unmapped when the frontend goes away. Idempotent.
  void Shutdown();

  // Virtio features offered in GET_FEATURES (device's + protocol layer's).
  uint64_t offered_features() const;

  // Introspection for tests and stats.
  uint64_t acked_features() const { return acked_features_; }
  uint64_t acked_protocol_features() const { return protocol_features_; }
  uint8_t device_status() const { return status_; }
  bool queue_started(uint32_t index) const;
  const std::shared_ptr<const GuestMemory>& memory() const { return memory_; }

 private:
  struct Queue {
    Virtqueue vq;
    uint16_t num = 0;
    uint16_t base = 0;
    VringAddrs addrs{};
    bool has_num = false;
    bool has_addr = false;
    bool has_kick = false;  // SET_VRING_KICK received (fd or NOFD)
    bool enabled = false;   // SET_VRING_ENABLE state
    bool configured = false;  // vq.Setup done since the last stop
    bool started = false;     // device->StartQueue succeeded
  };

  // A message being received (it may arrive in pieces).
  struct Rx {
    VhostUserHeader hdr{};
    size_t hdr_got = 0;
    size_t payload_got = 0;
    // Zeroed per message and large enough for any request, so a struct view
    // of a shorter payload reads zeros, never stale bytes.
    alignas(8) uint8_t payload[kMaxPayloadSize] = {};
    ReceivedFds fds;
  };
  // Reads more of the current message; kOk with *complete=false when more
  // is needed.
  Status Receive(bool* complete);

  Status Dispatch(const VhostUserHeader& hdr, const uint8_t* payload, ReceivedFds& fds);
  Status Reply(uint32_t request, const void* payload, uint32_t size);
  Status ReplyU64(uint32_t request, uint64_t value);

  Status SetFeatures(uint64_t v);
  Status SetMemTable(const uint8_t* payload, uint32_t size, ReceivedFds& fds);
  Status SetVringFd(Request request, uint64_t v, ReceivedFds& fds);
  Status GetVringBase(const VhostUserVringState& s);
  Status GetConfig(const uint8_t* payload, uint32_t size);
  // Starts queue i when it has everything it needs (see .cc).
  Status MaybeStart(uint32_t i);
  void StopQueue(uint32_t i);
  // Stops the queue if running, runs `change`, restarts it.
  template <typename F>
  Status WithQueuePaused(uint32_t i, F change);
  void ResetQueues();
  bool protocol_features_acked() const { return acked_features_ & kFProtocolFeatures; }

  int sock_;
  VhostUserDevice* device_;
  const ConnectionOptions options_;
  uint32_t num_queues_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::shared_ptr<const GuestMemory> memory_;
  uint64_t acked_features_ = 0;
  uint64_t protocol_features_ = 0;
  uint8_t status_ = 0;
  bool owner_ = false;
  Rx rx_;
  TraceFn trace_;
};

}  // namespace vrdma::vhost

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_CONNECTION_H_
