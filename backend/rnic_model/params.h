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

// The PCIe link between a host and its NIC (pcie.h). Header sizes include
// the 8 B of data-link framing (sequence number, LCRC, start/end symbols),
// as in pcie-bench's model (Neugebauer et al., SIGCOMM'18; model/pcie.py).
struct PcieParams {
  double gts = 16.0;                     // transfers/s per lane (Gen3 8, Gen4 16, Gen5 32)
  uint32_t lanes = 16;
  // Fraction of the encoded bandwidth left after DLLP ACKs, flow-control
  // updates and SKIP ordered sets (pcie-bench's TLP_bw for x16, MPS 256:
  // 8/168 + 8/168 + 4/1538 = 9.8 % lost).
  double dllp_efficiency = 0.902;
  uint32_t mps_bytes = 256;              // max payload size of a write / completion
  uint32_t mrrs_bytes = 512;             // max read request size
  uint32_t rcb_bytes = 64;               // read completion boundary
  // Completions of a read are split at multiples of this (a multiple of
  // RCB, at most MPS): MPS-sized completions by default; RCB-sized ones
  // ("observed on several older chipsets", pcie-bench) with 64.
  uint32_t completion_bytes = 256;
  uint32_t mwr_header_bytes = 24;        // 8 framing + 4 + 12 (64-bit address)
  uint32_t mrd_header_bytes = 24;
  uint32_t cpld_header_bytes = 20;       // 8 framing + 4 + 8
  uint32_t read_tags = 256;              // outstanding read requests
  uint32_t doorbell_bytes = 8;           // MMIO doorbell record
  uint32_t wqe_bytes = 64;               // one WQEBB per (non-inline) WQE
  uint32_t cqe_bytes = 64;
  // A WRITE/SEND of at most this many bytes is posted inline (its data in
  // the WQE, no payload DMA read): perftest's default for WRITE
  // (DEF_INLINE_WRITE = 220, src/perftest_parameters.h).
  uint32_t inline_threshold_bytes = 220;
};

// On-NIC caches (nic_cache.h): set-associative LRU. Capacities are in
// entries (MTT: translation entries, fetched 8 to a 64 B line). Sizes are
// ESTIMATES (docs/rnic-model.md); 0 disables a cache (always hit).
struct CacheParams {
  uint32_t ways = 8;
  uint32_t qpc_entries = 2048;
  uint32_t mpt_entries = 2048;
  uint32_t mtt_entries = 131072;
  uint32_t wqe_qps = 512;                // QPs whose next WQEs are on chip
  uint32_t qpc_bytes = 256;              // DMA read on a miss
  uint32_t mpt_bytes = 64;
  uint32_t mtt_line_bytes = 64;          // 8 entries of 8 B
  uint32_t mtt_entry_bytes = 8;
  // WQEs the NIC keeps prefetched per QP: a doorbell fetches up to this
  // many, the NIC reads the next ones in the background when half are
  // used, and a QP that lost its entry (or ran past it) refetches them
  // while its PU waits.
  uint32_t wqe_prefetch = 32;
  // Context fills (QPC, MPT, MTT misses) the card's miss handler keeps in
  // flight, TX and RX together; a further miss waits for a slot and its PU
  // waits with it (nic_cache.h). 0: unbounded. ESTIMATE (docs/rnic-model.md).
  uint32_t fill_slots = 0;
  // Firmware command interface time for an MR registration or
  // deregistration (assumed).
  Picos mr_command_ps = NsToPs(10000);
};

struct NicParams {
  std::string name;
  double line_rate_gbps = 100.0;
  // Bytes on the wire per packet beyond its payload (headers, CRCs and, on
  // Ethernet, preamble + inter-frame gap).
  uint32_t per_packet_overhead_bytes = 82;
  uint32_t mtu_bytes = 4096;             // 256..4096
  // Send side.
  uint32_t num_pus = 16;                 // processing units
  // PCIe latencies (serialization and queuing on the link come on top,
  // pcie.h): an MMIO doorbell reaching the NIC; a DMA read's round trip
  // (request out, completion back: WQE fetch, payload, cache misses).
  Picos doorbell_ps = NsToPs(200);
  Picos wqe_fetch_ps = NsToPs(600);
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
  // A DMA write (CQE, payload) until host memory / a poller sees it.
  Picos cqe_write_ps = NsToPs(300);
  // RC retransmission timeout (tail loss). IB's timeout=14 would be 67 ms;
  // the model uses 1 ms so tail-loss recovery shows up in short runs.
  Picos rto_ps = NsToPs(1000000);
  uint32_t ack_every_packets = 16;       // responder ACK coalescing (assumed)
  uint32_t max_rd_atomic = 16;           // outstanding READs + atomics per QP
  PcieParams pcie;
  CacheParams cache;

  // Protocol operations and the receive side (docs/rnic-model.md). The
  // RNR timer is per QP (QpConfig::rnr_timer, IB-encoded), not a card value.
  // A receive WQE the responder fetches from host memory before a SEND (or
  // WRITE with immediate) can consume it: a PCIe read round trip. One
  // field, so a PCIe model can later replace it.
  Picos recv_wqe_fetch_ps = NsToPs(600);
  // RX pipeline time an RNR NAK costs: the whole RX pipeline is busy on it
  // (SwiftRDMA §3.3, Fig. 8), charged for the NAKed packet and for every
  // request packet of the QP discarded until the retry arrives.
  Picos rnr_nak_cost_ps = NsToPs(2000);
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
  // (stalled by RNR NAKs or atomics) a lossless switch port stops
  // delivering, so the stall backs up into the fabric (PFC) instead of
  // vanishing; on a lossy fabric the NIC drops what arrives meanwhile.
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
// Card generations with their PCIe link and cache sizes (the cache sizes
// are estimates): ConnectX-5 100G on Gen3 x16, ConnectX-6 200G on Gen4
// x16, ConnectX-7 400G on Gen5 x16.
NicParams ConnectX5RoCE100();
NicParams ConnectX6RoCE200();
NicParams ConnectX7RoCE400();
// nullptr-free lookup by name ("cx6-100", "cx5-40", "cx4-25", "ib-56",
// "cx5-100", "cx6-200", "cx7-400"; "cx5", "cx6" and "cx7" name cx5-100,
// cx6-100 and cx7-400).
bool PresetByName(std::string_view name, NicParams* out);
std::vector<std::string> PresetNames();

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_PARAMS_H_
