// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Parameters of the RNIC timing MODEL and of the fabric it sits on. Every
// value is either taken from a published measurement (the source is named
// next to it and in docs/rnic-model.md) or fitted so that the model
// reproduces a published anomaly (marked "fitted"). These are model inputs,
// never hardware measurements.
#ifndef VRDMA_BACKEND_RNIC_MODEL_PARAMS_H_
#define VRDMA_BACKEND_RNIC_MODEL_PARAMS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vrdma::model {

// Virtual time is kept in picoseconds: one byte at 100 Gbps is exactly 80 ps,
// and 2^64 ps is ~213 days, far beyond any scenario.
using Picos = uint64_t;
inline constexpr Picos kPicosPerNano = 1000;
inline constexpr Picos NsToPs(double ns) { return static_cast<Picos>(ns * 1000.0 + 0.5); }
inline constexpr double PsToNs(Picos ps) { return static_cast<double>(ps) / 1000.0; }

struct NicParams {
  std::string name;
  double line_rate_gbps = 100.0;
  // Bytes on the wire per packet beyond its payload (headers, CRCs and, on
  // Ethernet, preamble + inter-frame gap).
  uint32_t per_packet_overhead_bytes = 82;
  uint32_t mtu_bytes = 4096;             // 256..4096
  // Send side.
  uint32_t num_pus = 16;                 // processing units
  Picos doorbell_ps = NsToPs(200);       // MMIO write reaching the NIC
  Picos wqe_fetch_ps = NsToPs(600);      // PCIe DMA read of the posted WQEs
  Picos wqe_cost_ps = NsToPs(77);        // PU time per WQE (first packet)
  Picos seg_cost_ps = NsToPs(30);        // PU time per further packet
  Picos dispatch_gap_ps = NsToPs(9.5);   // shared WQE scheduler, per WQE
  uint32_t tx_fifo_packets = 8;          // processed packets waiting for the link
  // WQEs a PU serves from one QP before the QP goes back to the round robin.
  // No source gives it; 1 makes every WQE boundary a switch point. With
  // more, only a zero-count WAIT (PeRF §3.5.2) forces an early switch.
  uint32_t wqes_per_visit = 1;
  // Receive side.
  uint32_t num_rx_pus = 16;
  Picos rx_cost_ps = NsToPs(60);         // RX PU time per packet
  Picos cqe_write_ps = NsToPs(300);      // PCIe write of a CQE seen by a poller
  // RC retransmission timeout (tail loss). IB's timeout=14 would be 67 ms;
  // the model uses 1 ms so tail-loss recovery shows up in short runs.
  Picos rto_ps = NsToPs(1000000);
  uint32_t ack_every_packets = 16;       // responder ACK coalescing (assumed)
  uint32_t max_rd_atomic = 16;           // outstanding READs + atomics per QP

  // Protocol operations and the receive side (docs/rnic-model.md). The
  // RNR timer is per QP (QpConfig::rnr_timer, IB-encoded), not a card value.
  // A receive WQE the responder fetches from host memory before a SEND (or
  // WRITE with immediate) can consume it: a PCIe read round trip. One
  // field, so a PCIe model can later replace it.
  Picos recv_wqe_fetch_ps = NsToPs(600);
  // RX pipeline time an RNR NAK costs: the whole RX pipeline is busy on it
  // (SwiftRDMA §3.3, Fig. 8), charged for the NAKed packet and for every
  // request packet of the QP discarded until the retry arrives.
  Picos rnr_nak_cost_ps = NsToPs(1000);
  // Atomic units of the card: an atomic (CAS/FAA) runs on the unit its
  // remote address hashes to, so atomics on one address are serialised.
  uint32_t num_atomic_units = 4;
  Picos atomic_cost_ps = NsToPs(400);    // one read-modify-write
  // Responder ACK coalescing: an ACK after ack_every_packets accepted
  // packets, or when the QP's receive burst ends (no packet for
  // ack_coalesce_delay); a lone message is ACKed at once; NAKs, RNR NAKs
  // and READ/atomic responses are never delayed. 0 = ACK every message.
  Picos ack_coalesce_delay_ps = NsToPs(1000);
  // RX buffer of the NIC in time: when the RX pipeline is this far behind
  // (stalled by RNR NAKs or atomics) the switch port stops delivering, so
  // the stall backs up into the fabric (PFC) instead of vanishing.
  Picos rx_backlog_limit_ps = NsToPs(2000);

  Picos byte_time_ps() const;            // serialization of one byte
  Picos wire_time_ps(uint32_t payload_bytes) const;
};

struct FabricParams {
  Picos link_propagation_ps = NsToPs(100);   // cable + PHY, each hop
  Picos switch_latency_ps = NsToPs(300);     // cut-through-ish port to port
  uint64_t switch_buffer_bytes = 16u << 20;  // shared buffer (SN2100: 16 MB)
  uint64_t ecn_threshold_bytes = 150u << 10; // per egress port
  double random_loss = 0.0;                  // per data packet, at the switch
  // Lossless Ethernet (PFC) / IB credits, simplified: a NIC does not start
  // a packet towards an egress port holding more than pfc_xoff_bytes, and
  // resumes when it drains below pfc_xon_bytes. Pausing is per NIC link and
  // instantaneous (no pause-frame delay). false: drop on overflow.
  bool lossless = true;
  uint64_t pfc_xoff_bytes = 512u << 10;
  uint64_t pfc_xon_bytes = 256u << 10;
};

// Named presets; see docs/rnic-model.md for the source of each value.
NicParams ConnectX6RoCE100();   // PeRF default card (§2.2, Table 1, §5.1)
NicParams ConnectX5RoCE40();    // PeRF Table 1 / Justitia Table 1 (CX-4 40G)
NicParams ConnectX4RoCE25();    // 25 GbE variant of the same generation
NicParams ConnectX3IB56();      // Justitia's 56 Gbps InfiniBand card
NicParams ConnectX5RoCE100();   // "cx5": ConnectX-5 100 GbE
NicParams ConnectX7RoCE400();   // "cx7": ConnectX-7 400 GbE
// nullptr-free lookup by name ("cx6-100", "cx5-40", "cx4-25", "ib-56",
// "cx5", "cx6" = "cx6-100", "cx7").
bool PresetByName(std::string_view name, NicParams* out);
std::vector<std::string> PresetNames();

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_PARAMS_H_
