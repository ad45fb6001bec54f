// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Resources of one side of a perftest run: the in-process guest device, a
// PD, a send and a receive CQ, and per QP a registered buffer of `slots`
// message-sized slots, connected to the peer over the TCP channel.
//
// Buffer layout per QP (both sides agree on it, only the base travels):
//   bw tests:   slots = tx_depth; iteration i uses slot i % slots;
//   write_lat, read_lat: slot 0 = outgoing / read source, slot 1 = incoming;
//   send_lat:   slot 0 = outgoing, slots 1.. = posted receives.
#ifndef VRDMA_GUEST_DRIVER_PERFTEST_CONTEXT_H_
#define VRDMA_GUEST_DRIVER_PERFTEST_CONTEXT_H_

#include <memory>
#include <string>
#include <vector>

#include "guest-driver/lib/verbs.h"
#include "guest-driver/perftest/options.h"
#include "guest-driver/perftest/tcp_exchange.h"

namespace vrdma::perftest {

inline constexpr uint32_t kSendLatRecvSlots = 16;

struct QpContext {
  std::unique_ptr<guest::Qp> qp;
  std::unique_ptr<guest::Mr> mr;
  WireQp local;
  WireQp remote;
  uint64_t posted = 0;
  uint64_t completed = 0;
};

class Context {
 public:
  ~Context();
  // Device, PD, CQs, QPs and buffers for `o` (after ApplyDefaults).
  bool Setup(const Options& o, std::string* err);
  // Swaps coordinates with the peer and moves every QP to RTS, then a
  // barrier so neither side starts before the other is ready.
  bool Connect(TcpChannel& ch, std::string* err);

  uint8_t* Slot(uint32_t q, uint64_t slot) const {
    return qps[q].mr->data() + slot * opts.size;
  }
  uint64_t RemoteSlot(uint32_t q, uint64_t slot) const {
    return qps[q].remote.addr + slot * opts.size;
  }

  Options opts;
  uint32_t slots = 0;
  std::unique_ptr<guest::Device> dev;
  std::unique_ptr<guest::Pd> pd;
  std::unique_ptr<guest::Cq> send_cq;
  std::unique_ptr<guest::Cq> recv_cq;
  std::vector<QpContext> qps;
};

// Client: sends its options; server: receives and adopts the client's.
bool ExchangeParams(TcpChannel& ch, Options* o, std::string* err);

}  // namespace vrdma::perftest

#endif  // VRDMA_GUEST_DRIVER_PERFTEST_CONTEXT_H_
