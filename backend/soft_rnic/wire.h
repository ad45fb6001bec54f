// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The transmit side of a SoftRnic's port when it has a line rate
// (RnicLimits::link_rate_bps): every packet the requester and the responder
// put on the wire takes its serialization time, one after another, so all
// QPs share the rate. A virtual finish time: the wire is busy until
// free_at(); a message may start when the wire is free and then pushes
// free_at() on by the time its packets take. What the wire carries is
// counted as RoCEv2 does (payload in MTU-sized packets, each with the
// per-packet overhead of Ethernet, IP, UDP, BTH, ICRC, FCS, preamble and
// inter-frame gap, the RNIC model's preset; an ACK or a READ request is one
// packet of overhead alone).
//
// A message is executed whole when it starts (the SoftRnic delivers
// messages whole), so the wire charges ahead: the next message waits for
// the time this one's packets take. A message's packets start when both
// the wire and the message are ready, at max(free_at, ready), as on a
// link's FIFO: an idle wire gives no credit (a message posted to an idle
// wire starts when posted), and a message that was waiting loses nothing
// when the data path serves it late (its thread off the CPU: a NIC would
// have sent it meanwhile), so the messages behind it follow back to back
// from where the wire really was.
//
// No allocation, no lock: the data-path thread alone calls it.
#ifndef VRDMA_BACKEND_SOFT_RNIC_WIRE_H_
#define VRDMA_BACKEND_SOFT_RNIC_WIRE_H_

#include <cmath>
#include <cstdint>

namespace vrdma::soft {

class Wire {
 public:
  // Bytes on the wire per packet beyond its payload.
  static constexpr uint32_t kPacketOverheadBytes = 82;

  // bits per second; 0: unlimited (never busy, nothing counted).
  explicit Wire(uint64_t rate_bps = 0)
      : rate_bps_(rate_bps),
        ps_per_byte_(rate_bps == 0 ? 0.0 : 8e12 / static_cast<double>(rate_bps)) {}

  bool limited() const { return rate_bps_ != 0; }
  uint64_t rate_bps() const { return rate_bps_; }
  // Nothing more may start before free_at().
  bool Busy(uint64_t now_ns) const { return limited() && free_at_ns_ > now_ns; }
  uint64_t free_at() const { return free_at_ns_; }

  // Bytes a message of `payload` bytes puts on the wire in packets of at
  // most `mtu` bytes (a zero-length message is one packet).
  static uint64_t WireBytes(uint64_t payload, uint32_t mtu) {
    const uint64_t packets = payload == 0 ? 1 : (payload + mtu - 1) / mtu;
    return payload + packets * kPacketOverheadBytes;
  }

  // Packets of `wire_bytes` in all, ready to go at ready_ns (their WR was
  // posted, or its retry timer expired), go out after what is ahead of
  // them: the wire is busy for their serialization time.
  void Send(uint64_t ready_ns, uint64_t wire_bytes) {
    if (!limited()) return;
    if (free_at_ns_ < ready_ns) {  // the wire idled until the message came
      free_at_ns_ = ready_ns;
      rem_ps_ = 0;
    }
    // Whole nanoseconds go to free_at, the fraction carries over.
    const double ps = static_cast<double>(wire_bytes) * ps_per_byte_ + rem_ps_;
    const double ns = std::floor(ps / 1000.0);
    free_at_ns_ += static_cast<uint64_t>(ns);
    rem_ps_ = ps - ns * 1000.0;
    bytes_ += wire_bytes;
  }

  // Bytes sent so far, overhead included (tests, stats).
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t rate_bps_;
  double ps_per_byte_;
  uint64_t free_at_ns_ = 0;
  double rem_ps_ = 0;  // picoseconds of free_at below one nanosecond
  uint64_t bytes_ = 0;
};

}  // namespace vrdma::soft

#endif  // VRDMA_BACKEND_SOFT_RNIC_WIRE_H_
