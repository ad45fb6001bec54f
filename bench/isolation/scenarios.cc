// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "bench/isolation/scenarios.h"

#include <string>

namespace vrdma::bench {

using model::Op;

namespace {
const char* OpName(Op op) {
  switch (op) {
    case Op::kSend: return "send";
    case Op::kRead: return "read";
    default: return "write";
  }
}
std::string Suffix(Op op, const std::string& preset) {
  std::string s;
  if (op != Op::kWrite) s += std::string("_") + OpName(op);
  if (preset != "cx6-100") s += "@" + preset;
  return s;
}
ScenarioSpec Base(const std::string& name, const std::string& group,
                  const std::string& paper, double duration_us, double scale) {
  ScenarioSpec s;
  s.name = name;
  s.group = group;
  s.paper = paper;
  s.duration_us = duration_us * scale;
  s.warmup_us = s.duration_us * 0.1;
  return s;
}
}  // namespace

TenantSpec LatencyTenant(const std::string& name, Op op) {
  TenantSpec t;
  t.name = name;
  t.op = op;
  t.msg_bytes = 16;
  t.mode = Mode::kLatency;
  t.app_class = policy::TenantClass::kLatency;  // as its operator sets it
  return t;
}

TenantSpec MessageTenant(const std::string& name, uint32_t qps, Op op) {
  TenantSpec t;
  t.name = name;
  t.op = op;
  t.msg_bytes = 16;
  t.batch = 32;        // PeRF §5.1 (Justitia §3.1 uses 64)
  t.tx_depth = 128;
  t.num_qps = qps;
  t.mode = Mode::kBandwidth;
  t.app_class = policy::TenantClass::kThroughput;
  return t;
}

TenantSpec BandwidthTenant(const std::string& name, uint32_t msg_bytes, uint32_t qps, Op op) {
  TenantSpec t;
  t.name = name;
  t.op = op;
  t.msg_bytes = msg_bytes;
  t.batch = 1;
  t.tx_depth = 16;
  t.num_qps = qps;
  t.mode = Mode::kBandwidth;
  return t;
}

ScenarioSpec LatencyVsBandwidth(int n_bw, Op op, const std::string& preset, double scale) {
  ScenarioSpec s = Base(
      "d_vs_" + std::to_string(n_bw) + "b" + Suffix(op, preset), "latency-vs-bandwidth",
      n_bw == 1 ? "Justitia §3.1.1: p99 x4 (RoCEv2 40G), x2.23 (IB 56G); PeRF Fig.2b"
                : "Justitia §3.1.1/App.B.1: x139 latency with 16 bandwidth apps",
      n_bw >= 16 ? 60000 : 20000, scale);
  s.preset = preset;
  s.tenants.push_back(LatencyTenant("D", op));
  for (int i = 0; i < n_bw; ++i) s.tenants.push_back(BandwidthTenant("B" + std::to_string(i), 1u << 20, 1, op));
  return s;
}

ScenarioSpec MessageVsBandwidth(int n_bw, Op op, const std::string& preset, double scale) {
  ScenarioSpec s = Base(
      "m_vs_" + std::to_string(n_bw) + "b" + Suffix(op, preset), "message-vs-bandwidth",
      n_bw == 1 ? "Justitia §3.1.1: rate falls >= x2.85; PeRF Fig.2a"
                : "Justitia App.B.1: loses 90% with 16 bandwidth apps",
      10000, scale);
  s.preset = preset;
  s.tenants.push_back(MessageTenant("M", 1, op));
  for (int i = 0; i < n_bw; ++i) s.tenants.push_back(BandwidthTenant("B" + std::to_string(i), 1u << 20, 1, op));
  return s;
}

ScenarioSpec SingleVsMultiQpBandwidth(int n_qps, const std::string& preset, double scale) {
  ScenarioSpec s = Base("b1_vs_b" + std::to_string(n_qps) + "qp" + Suffix(Op::kWrite, preset),
                        "qp-count", "PeRF Fig.3a, Justitia Fig.13b: single-QP gets ~1/(N+1)",
                        20000, scale);
  s.preset = preset;
  s.tenants.push_back(BandwidthTenant("B_single"));
  s.tenants.push_back(BandwidthTenant("B_multi", 1u << 20, n_qps));
  return s;
}

ScenarioSpec MiBVsGiB(const std::string& preset, double scale) {
  ScenarioSpec s = Base("b1m_vs_b1g" + Suffix(Op::kWrite, preset), "message-size-bandwidth",
                        "Justitia §3.1.3: 1 GB gets x1.22 (RoCEv2), x1.42 (IB); PeRF App.B (SQ size 1)",
                        40000, scale);
  s.preset = preset;
  // PeRF App. B: the anomaly appears with SQ size 1, when each 1 MiB message
  // waits for the host to see the previous completion and post again.
  TenantSpec mib = BandwidthTenant("B_1MiB", 1u << 20);
  mib.tx_depth = 1;
  mib.turnaround_ns = 15000;  // assumed: event-driven completion (perftest -e)
  TenantSpec gib = BandwidthTenant("B_1GiB", 1u << 30);
  gib.tx_depth = 1;
  gib.turnaround_ns = 15000;
  s.tenants = {mib, gib};
  return s;
}

ScenarioSpec MessageVsMultiQpMessage(int n_qps, double scale) {
  ScenarioSpec s = Base("m1_vs_m" + std::to_string(n_qps) + "qp", "pu-saturation",
                        "PeRF §2.3.2 Fig.3b: M_single degrades once ~105 Mmps is reached",
                        5000, scale);
  s.tenants.push_back(MessageTenant("M_single"));
  s.tenants.push_back(MessageTenant("M_multi", n_qps));
  return s;
}

ScenarioSpec LatencyVsMultiQpMessage(int n_qps, double scale) {
  ScenarioSpec s = Base("d_vs_m" + std::to_string(n_qps) + "qp", "pu-saturation",
                        "PeRF §2.3.2 Fig.3c: D_single degrades once PUs saturate", 5000, scale);
  s.tenants.push_back(LatencyTenant("D"));
  s.tenants.push_back(MessageTenant("M_multi", n_qps));
  return s;
}

ScenarioSpec LatencyAmongLatency(int n, double scale) {
  ScenarioSpec s = Base("d_x" + std::to_string(n), "coexist",
                        "Justitia §3.1.2/App.B: latency apps coexist", 5000, scale);
  for (int i = 0; i < n; ++i) s.tenants.push_back(LatencyTenant("D" + std::to_string(i)));
  return s;
}

ScenarioSpec MessageAmongMessage(int n, double scale) {
  ScenarioSpec s = Base("m_x" + std::to_string(n), "coexist",
                        "Justitia §3.1.2/App.B: throughput apps get equal shares", 5000, scale);
  for (int i = 0; i < n; ++i) s.tenants.push_back(MessageTenant("M" + std::to_string(i)));
  return s;
}

ScenarioSpec LatencyVsMessage(double scale) {
  ScenarioSpec s = Base("d_vs_m", "coexist", "PeRF §2.3.1: no anomaly between M and D",
                        5000, scale);
  s.tenants.push_back(LatencyTenant("D"));
  s.tenants.push_back(MessageTenant("M"));
  return s;
}

ScenarioSpec LatencyVsInboundRead(double scale) {
  ScenarioSpec s = Base("d_vs_inbound_read", "read-vs-write",
                        "PeRF App.C Fig.19, Justitia §4.5: inbound READ responses compete "
                        "with outbound WRITEs",
                        20000, scale);
  s.tenants.push_back(LatencyTenant("D_write"));  // host 0 -> host 1
  TenantSpec r = BandwidthTenant("B_read_from_host0", 1u << 20, 1, Op::kRead);
  r.src_host = 1;                                  // host 1 READs host 0
  r.dst_host = 0;
  s.tenants.push_back(r);
  return s;
}

ScenarioSpec Incast(int senders, double scale) {
  ScenarioSpec s = Base("incast_" + std::to_string(senders) + "to1", "incast",
                        "Justitia §6.5 Fig.24: 32 bandwidth senders + 1 latency sender, one "
                        "receiver (paper runs DCQCN; the model has none)",
                        10000, scale);
  const uint32_t rx = static_cast<uint32_t>(senders) + 1;
  for (int i = 0; i < senders; ++i) {
    TenantSpec b = BandwidthTenant("B" + std::to_string(i));
    b.src_host = static_cast<uint32_t>(i);
    b.dst_host = rx;
    s.tenants.push_back(b);
  }
  TenantSpec d = LatencyTenant("D");
  d.src_host = static_cast<uint32_t>(senders);
  d.dst_host = rx;
  s.tenants.push_back(d);
  return s;
}

ScenarioSpec Scale(int tenants, double scale) {
  ScenarioSpec s = Base("scale_" + std::to_string(tenants), "scale",
                        "Justitia §6.4 (8 latency + 8 bandwidth apps), extended to many VMs",
                        5000, scale);
  const int n_bw = 8;
  for (int i = 0; i < tenants - n_bw; ++i) s.tenants.push_back(LatencyTenant("D" + std::to_string(i)));
  for (int i = 0; i < n_bw; ++i) s.tenants.push_back(BandwidthTenant("B" + std::to_string(i)));
  return s;
}

ScenarioSpec MixedCrowd(double scale) {
  ScenarioSpec s = Base("mixed_8d_8b", "crowd",
                        "Justitia §6.4 Fig.23: latency x71.4 median, x79.8 p99 (IB)", 40000,
                        scale);
  for (int i = 0; i < 8; ++i) s.tenants.push_back(LatencyTenant("D" + std::to_string(i)));
  const uint32_t sizes[4] = {1u << 20, 10u << 20, 100u << 20, 1u << 30};
  for (int i = 0; i < 8; ++i) {
    TenantSpec b = BandwidthTenant("B" + std::to_string(i) + "_" + std::to_string(sizes[i / 2] >> 20) + "MiB",
                                   sizes[i / 2]);
    b.tx_depth = 4;
    s.tenants.push_back(b);
  }
  return s;
}

ScenarioSpec SpeedOneSecond(double scale) {
  ScenarioSpec s = Base("speed_1s", "speed",
                        "issue 3: 1 simulated s of 100 Gbps / 4 KiB packets in a few wall s",
                        1e6, scale);
  s.tenants.push_back(BandwidthTenant("B"));
  return s;
}

std::vector<ScenarioSpec> AllScenarios() {
  std::vector<ScenarioSpec> v;
  for (int n : {1, 2, 4, 8, 15, 16}) v.push_back(LatencyVsBandwidth(n));
  for (int n : {1, 4, 16}) v.push_back(MessageVsBandwidth(n));
  for (Op op : {Op::kSend, Op::kRead}) {
    v.push_back(LatencyVsBandwidth(1, op));
    v.push_back(MessageVsBandwidth(1, op));
  }
  for (const char* p : {"cx5-40", "cx4-25", "ib-56"}) {
    v.push_back(LatencyVsBandwidth(1, Op::kWrite, p));
    v.push_back(MessageVsBandwidth(1, Op::kWrite, p));
    v.push_back(MiBVsGiB(p));
  }
  for (int n : {1, 2, 4, 8, 15}) v.push_back(SingleVsMultiQpBandwidth(n));
  v.push_back(MiBVsGiB());
  for (int n : {2, 4, 8, 12, 16}) v.push_back(MessageVsMultiQpMessage(n));
  for (int n : {4, 16}) v.push_back(LatencyVsMultiQpMessage(n));
  v.push_back(LatencyAmongLatency(4));
  v.push_back(MessageAmongMessage(4));
  v.push_back(LatencyVsMessage());
  v.push_back(LatencyVsInboundRead());
  v.push_back(Incast(32));
  v.push_back(MixedCrowd());
  v.push_back(Scale(1000));
  v.push_back(SpeedOneSecond());
  return v;
}

}  // namespace vrdma::bench
