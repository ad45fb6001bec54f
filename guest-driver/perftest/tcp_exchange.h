// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// perftest's out-of-band channel: a TCP connection on which the client
// sends the test parameters, both sides swap per-QP coordinates (QPN, PSN,
// GID, rkey, buffer address), synchronise, and the client reports what it
// did at the end so the server can verify and stop.
#ifndef VRDMA_GUEST_DRIVER_PERFTEST_TCP_EXCHANGE_H_
#define VRDMA_GUEST_DRIVER_PERFTEST_TCP_EXCHANGE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vrdma::perftest {

struct WireParams {
  uint32_t magic = 0x76726d61;  // "vrma"
  uint32_t test = 0;
  uint64_t size = 0;
  uint64_t iters = 0;
  uint32_t num_qps = 0;
  uint32_t duration_s = 0;
  uint32_t tx_depth = 0;
  uint32_t verify = 0;
  uint32_t uc = 0;
};

struct WireQp {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
  uint64_t addr = 0;
  uint8_t gid[16] = {};
};

class TcpChannel {
 public:
  TcpChannel() = default;
  ~TcpChannel();
  TcpChannel(const TcpChannel&) = delete;
  TcpChannel& operator=(const TcpChannel&) = delete;

  // Server: listen on 127.0.0.1-any:port and accept one client.
  bool Accept(uint16_t port);
  // Client: connect, retrying for up to timeout_ms while the server starts.
  bool Connect(const std::string& host, uint16_t port, int timeout_ms = 10000);

  bool Send(const void* p, size_t n);
  bool Recv(void* p, size_t n);
  // Non-blocking: true when the peer sent something or closed.
  bool Readable();
  // Both sides call it; returns when the peer has reached it too.
  bool Barrier();

  template <typename T>
  bool SendVec(const std::vector<T>& v) {
    uint32_t n = static_cast<uint32_t>(v.size());
    return Send(&n, 4) && (n == 0 || Send(v.data(), n * sizeof(T)));
  }
  template <typename T>
  bool RecvVec(std::vector<T>* v, uint32_t max = 1024) {
    uint32_t n;
    if (!Recv(&n, 4) || n > max) return false;
    v->resize(n);
    return n == 0 || Recv(v->data(), n * sizeof(T));
  }

 private:
  int fd_ = -1;
};

}  // namespace vrdma::perftest

#endif  // VRDMA_GUEST_DRIVER_PERFTEST_TCP_EXCHANGE_H_
