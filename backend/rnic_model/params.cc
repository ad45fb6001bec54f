// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/rnic_model/params.h"

#include <algorithm>

namespace vrdma::model {

namespace {

// PCIe link of a card generation (PCIe base spec rates; pcie-bench model
// for the DLLP efficiency and header sizes). Tags: 8-bit extended tags on
// Gen3, 10-bit tags (768 usable) from Gen4 on (assumed: the card uses them).
PcieParams PcieLink(int gen, uint32_t lanes) {
  PcieParams p;
  p.gts = gen == 3 ? 8.0 : gen == 4 ? 16.0 : 32.0;
  p.lanes = lanes;
  p.read_tags = gen == 3 ? 256 : 768;
  return p;
}

// Cache sizes, ESTIMATES: SwiftRDMA §3.2 gives ~2 MB of on-chip cache for a
// ConnectX-5 (all contexts together); the split is assumed. scale 1 = CX-5
// (QPC 1024 x 256 B, MPT 1024 x 64 B, MTT 64 Ki entries x 8 B, WQEs of 256
// QPs: ~0.9 MiB), each newer generation doubles it, older ones halve it.
CacheParams Caches(double scale) {
  CacheParams c;
  c.qpc_entries = static_cast<uint32_t>(1024 * scale);
  c.mpt_entries = static_cast<uint32_t>(1024 * scale);
  c.mtt_entries = static_cast<uint32_t>(65536 * scale);
  c.wqe_qps = static_cast<uint32_t>(256 * scale);
  // ESTIMATE: the miss handler grows with the caches, 4 fills in flight on
  // a CX-5 (with it the MTT/MPT attacker of pcie_anomaly_test.cc halves
  // its victim, Husky's figure; docs/rnic-model.md).
  c.fill_slots = std::max<uint32_t>(static_cast<uint32_t>(4 * scale), 1);
  return c;
}

}  // namespace

Picos NicParams::byte_time_ps() const {
  // Rounded to whole picoseconds: exact for 25/40/50/100 Gbps.
  return static_cast<Picos>(8000.0 / line_rate_gbps + 0.5);
}

Picos NicParams::wire_time_ps(uint32_t payload_bytes) const {
  double bits = 8.0 * (payload_bytes + per_packet_overhead_bytes);
  return static_cast<Picos>(bits * 1000.0 / line_rate_gbps + 0.5);
}

NicParams ConnectX6RoCE100() {
  NicParams p;
  p.name = "cx6-100";
  p.line_rate_gbps = 100.0;            // PeRF §5.1, Table 1
  // RoCEv2: Eth 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 = 62,
  // plus 8 preamble + 12 inter-frame gap.
  p.per_packet_overhead_bytes = 82;
  p.mtu_bytes = 4096;                  // PeRF Fig. 1 varies 1-4 KB; 4 KB default
  p.num_pus = 16;                      // PeRF Table 1 (citing [23])
  p.wqe_cost_ps = NsToPs(1e3 / 13.0);  // ~13 Mmps from one QP (PeRF §2.3.2)
  p.dispatch_gap_ps = NsToPs(1e3 / 105.0);  // ~105 Mmps with 9 QPs (PeRF §2.3.2)
  p.seg_cost_ps = NsToPs(30);          // assumed: > line rate per QP at any MTU
  p.doorbell_ps = NsToPs(200);         // assumed PCIe MMIO posted write
  p.wqe_fetch_ps = NsToPs(400);        // assumed PCIe read round trip
  p.cqe_write_ps = NsToPs(300);        // assumed PCIe posted write + poll
  p.tx_fifo_packets = 16;              // fitted: Justitia §3.1.1 4x p99 (RoCEv2)
  p.num_rx_pus = 16;                   // assumed symmetric with TX
  p.rx_cost_ps = NsToPs(1e3 / 13.0 / 2.0);  // assumed: RX never the bottleneck alone
  p.pcie = PcieLink(4, 16);            // ConnectX-6: PCIe Gen4 x16
  p.cache = Caches(2.0);               // estimate (see Caches)
  p.recv_wqe_fetch_ps = p.wqe_fetch_ps;  // assumed: one PCIe read round trip
  // Estimate, no published cost: a firmware-handled exception. 1.5-5 us
  // reproduces Husky's RNR collapse on a lossy class (docs/rnic-model.md).
  p.rnr_nak_cost_ps = NsToPs(2000);
  p.num_atomic_units = 4;              // assumed
  p.atomic_cost_ps = NsToPs(400);      // estimate: ~2.5 Mops per address (Kalia ATC'16 order)
  p.ack_coalesce_delay_ps = NsToPs(1000);  // assumed
  p.rx_backlog_limit_ps = NsToPs(2000);    // assumed: ~25 KB of RX buffer at 100 Gbps
  return p;
}

NicParams ConnectX5RoCE40() {
  NicParams p = ConnectX6RoCE100();
  p.name = "cx5-40";
  p.line_rate_gbps = 40.0;             // PeRF Table 1; Justitia Table 1 (CX-4 40G)
  p.mtu_bytes = 1024;                  // assumed: Ethernet MTU 1500 -> RoCE 1024
  p.num_pus = 8;                       // PeRF Table 1
  p.wqe_cost_ps = NsToPs(1e3 / 11.0);  // assumed ~11 Mmps per QP (older card)
  p.dispatch_gap_ps = NsToPs(1e3 / 60.0);  // assumed ~60 Mmps aggregate
  p.pcie = PcieLink(3, 16);            // ConnectX-5: PCIe Gen3 x16
  p.cache = Caches(1.0);               // estimate
  return p;
}

NicParams ConnectX4RoCE25() {
  NicParams p = ConnectX5RoCE40();
  p.name = "cx4-25";
  p.line_rate_gbps = 25.0;             // ConnectX-4 Lx class; assumed
  p.dispatch_gap_ps = NsToPs(1e3 / 40.0);  // assumed
  p.pcie = PcieLink(3, 8);             // ConnectX-4 Lx: PCIe Gen3 x8
  p.cache = Caches(0.5);               // estimate
  return p;
}

NicParams ConnectX3IB56() {
  NicParams p = ConnectX6RoCE100();
  p.name = "ib-56";
  p.line_rate_gbps = 54.54;            // FDR 4x: 56 Gbps signalling, 64b/66b
  // IB: LRH 8 + BTH 12 + ICRC 4 + VCRC 2; no preamble/IFG.
  p.per_packet_overhead_bytes = 26;
  p.mtu_bytes = 4096;                  // IB default active MTU
  p.num_pus = 8;                       // assumed (older generation)
  p.wqe_cost_ps = NsToPs(1e3 / 9.0);   // assumed
  p.dispatch_gap_ps = NsToPs(1e3 / 35.0);  // assumed
  p.pcie = PcieLink(3, 8);             // ConnectX-3 Pro: PCIe Gen3 x8
  p.cache = Caches(0.25);              // estimate
  return p;
}

NicParams ConnectX5RoCE100() {
  NicParams p = ConnectX5RoCE40();     // 8 PUs (PeRF Table 1), CX-5 PCIe and caches
  p.name = "cx5-100";
  p.line_rate_gbps = 100.0;            // ConnectX-5 EN 100GbE
  p.mtu_bytes = 4096;                  // assumed, as cx6-100
  p.atomic_cost_ps = NsToPs(500);      // estimate (older card)
  return p;
}

NicParams ConnectX6RoCE200() {
  NicParams p = ConnectX6RoCE100();    // PCIe Gen4 x16, CX-6 caches
  p.name = "cx6-200";
  p.line_rate_gbps = 200.0;            // ConnectX-6 HDR/200GbE
  return p;
}

NicParams ConnectX7RoCE400() {
  NicParams p = ConnectX6RoCE100();
  p.name = "cx7-400";
  p.line_rate_gbps = 400.0;            // ConnectX-7 NDR/400GbE
  p.pcie = PcieLink(5, 16);            // ConnectX-7: PCIe Gen5 x16
  p.cache = Caches(4.0);               // estimate
  p.num_pus = 32;                      // assumed: twice cx6
  p.wqe_cost_ps = NsToPs(1e3 / 20.0);  // assumed ~20 Mmps per QP
  p.dispatch_gap_ps = NsToPs(1e3 / 200.0);  // assumed ~200 Mmps aggregate
  p.seg_cost_ps = NsToPs(7);           // assumed: > line rate per QP at 4 KiB
  p.rx_cost_ps = NsToPs(1e3 / 20.0 / 2.0);  // assumed, as cx6
  p.num_rx_pus = 32;                   // assumed symmetric with TX
  p.num_atomic_units = 8;              // assumed
  p.atomic_cost_ps = NsToPs(300);      // estimate
  p.rx_backlog_limit_ps = NsToPs(500); // assumed: same bytes at 4x the rate
  return p;
}

bool PresetByName(std::string_view name, NicParams* out) {
  if (name == "cx5") { *out = ConnectX5RoCE100(); return true; }
  if (name == "cx6") { *out = ConnectX6RoCE100(); return true; }
  if (name == "cx7") { *out = ConnectX7RoCE400(); return true; }
  if (name == "cx6-100") { *out = ConnectX6RoCE100(); return true; }
  if (name == "cx5-40") { *out = ConnectX5RoCE40(); return true; }
  if (name == "cx4-25") { *out = ConnectX4RoCE25(); return true; }
  if (name == "ib-56") { *out = ConnectX3IB56(); return true; }
  if (name == "cx5-100") { *out = ConnectX5RoCE100(); return true; }
  if (name == "cx6-200") { *out = ConnectX6RoCE200(); return true; }
  if (name == "cx7-400") { *out = ConnectX7RoCE400(); return true; }
  return false;
}

std::vector<std::string> PresetNames() {
  return {"cx6-100", "cx5-40", "cx4-25", "ib-56", "cx5-100", "cx6-200", "cx7-400"};
}

}  // namespace vrdma::model
