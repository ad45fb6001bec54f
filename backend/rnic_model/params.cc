// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/rnic_model/params.h"

namespace vrdma::model {

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
  p.wqe_fetch_ps = NsToPs(600);        // assumed PCIe read round trip
  p.cqe_write_ps = NsToPs(300);        // assumed PCIe posted write + poll
  p.tx_fifo_packets = 16;              // fitted: Justitia §3.1.1 4x p99 (RoCEv2)
  p.num_rx_pus = 16;                   // assumed symmetric with TX
  p.rx_cost_ps = NsToPs(1e3 / 13.0 / 2.0);  // assumed: RX never the bottleneck alone
  p.recv_wqe_fetch_ps = p.wqe_fetch_ps;  // assumed: one PCIe read round trip
  p.rnr_nak_cost_ps = NsToPs(1000);    // estimate: error path, no published cost
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
  return p;
}

NicParams ConnectX4RoCE25() {
  NicParams p = ConnectX5RoCE40();
  p.name = "cx4-25";
  p.line_rate_gbps = 25.0;             // ConnectX-4 Lx class; assumed
  p.dispatch_gap_ps = NsToPs(1e3 / 40.0);  // assumed
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
  return p;
}

NicParams ConnectX5RoCE100() {
  NicParams p = ConnectX6RoCE100();
  p.name = "cx5";
  p.num_pus = 16;                      // assumed same generation of engine as cx6
  p.wqe_cost_ps = NsToPs(1e3 / 11.0);  // assumed ~11 Mmps per QP (older card)
  p.dispatch_gap_ps = NsToPs(1e3 / 75.0);  // assumed ~75 Mmps aggregate
  p.atomic_cost_ps = NsToPs(500);      // estimate
  return p;
}

NicParams ConnectX7RoCE400() {
  NicParams p = ConnectX6RoCE100();
  p.name = "cx7";
  p.line_rate_gbps = 400.0;            // ConnectX-7 400 GbE port
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
  return false;
}

std::vector<std::string> PresetNames() {
  return {"cx6-100", "cx5-40", "cx4-25", "ib-56", "cx5", "cx6", "cx7"};
}

}  // namespace vrdma::model
