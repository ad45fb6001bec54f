#!/usr/bin/python3
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
"""Plots the isolation bench's results.csv (RNIC MODEL outputs, not hardware).

Usage: plot_isolation.py DIR   (reads DIR/results.csv, writes DIR/*.png)
Needs Debian's python3-matplotlib (/usr/bin/python3).
"""
import csv
import re
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TAG = " - RNIC model, {} policy (not hardware)"


def load(path):
    """{policy: {scenario: [rows]}} (CSVs before the policy column: pass-through)."""
    by_policy = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            p = r.get("policy") or "pass-through"
            by_policy.setdefault(p, {}).setdefault(r["scenario"], []).append(r)
    return by_policy


def f(r, k):
    return float(r[k])


def series(rows, pattern):
    out = []
    for name, rs in rows.items():
        m = re.fullmatch(pattern, name)
        if m:
            out.append((int(m.group(1)), rs))
    return sorted(out, key=lambda x: x[0])


def plot_latency_crowd(rows, d, tag):
    s = series(rows, r"d_vs_(\d+)b")
    if not s:
        return
    xs = [n for n, _ in s]
    p99 = [f(rs[0], "together_p99_us") for _, rs in s]
    avg = [f(rs[0], "together_avg_us") for _, rs in s]
    alone = f(s[0][1][0], "alone_p99_us")
    plt.figure(figsize=(6, 4))
    plt.semilogy(xs, p99, "o-", label="D p99 together")
    plt.semilogy(xs, avg, "s--", label="D avg together")
    plt.axhline(alone, color="gray", ls=":", label="D p99 alone")
    plt.xlabel("number of 1 MiB bandwidth tenants (1 QP each)")
    plt.ylabel("16 B WRITE completion time (us)")
    plt.title("Latency tenant vs bandwidth crowd" + tag, fontsize=8)
    plt.legend()
    plt.grid(True, which="both", alpha=0.3)
    plt.tight_layout()
    plt.savefig(f"{d}/latency_vs_bandwidth_crowd{suffix(tag)}.png", dpi=120)
    plt.close()


def plot_qp_share(rows, d, tag):
    s = series(rows, r"b1_vs_b(\d+)qp")
    if not s:
        return
    xs = [n for n, _ in s]
    single = [f(rs[0], "together_gbps") for _, rs in s]
    multi = [f(rs[1], "together_gbps") for _, rs in s]
    ideal = [(a + b) / (n + 1) for n, a, b in zip(xs, single, multi)]
    plt.figure(figsize=(6, 4))
    plt.plot(xs, single, "o-", label="B_single (1 QP)")
    plt.plot(xs, multi, "s-", label="B_multi (N QPs)")
    plt.plot(xs, ideal, "k:", label="total / (N+1)")
    plt.xlabel("QPs of B_multi (N)")
    plt.ylabel("throughput (Gbps)")
    plt.title("QP-count anomaly (PeRF Fig. 3a)" + tag, fontsize=8)
    plt.legend()
    plt.grid(True, alpha=0.3)
    plt.tight_layout()
    plt.savefig(f"{d}/qp_count_share{suffix(tag)}.png", dpi=120)
    plt.close()


def plot_pu_saturation(rows, d, tag):
    s = series(rows, r"m1_vs_m(\d+)qp")
    if not s:
        return
    xs = [n for n, _ in s]
    single = [f(rs[0], "together_mmps") for _, rs in s]
    multi = [f(rs[1], "together_mmps") for _, rs in s]
    plt.figure(figsize=(6, 4))
    plt.plot(xs, single, "o-", label="M_single (1 QP)")
    plt.plot(xs, multi, "s-", label="M_multi (N QPs)")
    plt.plot(xs, [a + b for a, b in zip(single, multi)], "k:", label="total")
    plt.xlabel("QPs of M_multi (N)")
    plt.ylabel("message rate (Mmps)")
    plt.title("PU saturation (PeRF Fig. 3b)" + tag, fontsize=8)
    plt.legend()
    plt.grid(True, alpha=0.3)
    plt.tight_layout()
    plt.savefig(f"{d}/pu_saturation{suffix(tag)}.png", dpi=120)
    plt.close()


def plot_headline(rows, d, tag):
    bars = []
    for name, rs in rows.items():
        if re.fullmatch(r"d_vs_1b.*", name):
            r = rs[0]
            bars.append((name + " D p99 x", f(r, "p99_growth")))
        elif re.fullmatch(r"m_vs_1b.*", name):
            r = rs[0]
            bars.append((name + " M rate /", f(r, "rate_drop")))
        elif re.fullmatch(r"b1m_vs_b1g.*", name):
            a, b = rs[0], rs[1]
            if f(a, "together_gbps") > 0:
                bars.append((name + " GiB/MiB", f(b, "together_gbps") / f(a, "together_gbps")))
    if not bars:
        return
    plt.figure(figsize=(8, 0.3 * len(bars) + 1.5))
    plt.barh([b[0] for b in bars], [b[1] for b in bars])
    plt.axvline(1.0, color="gray", ls=":")
    plt.xscale("log")
    plt.xlabel("degradation factor (together vs alone)")
    plt.title("Anomalies per card preset" + tag, fontsize=8)
    plt.tight_layout()
    plt.savefig(f"{d}/anomaly_factors{suffix(tag)}.png", dpi=120)
    plt.close()


def suffix(tag):
    """'' for pass-through (the historical file names), '_POLICY' otherwise."""
    p = tag.split(",")[1].strip().split(" ")[0]
    return "" if p == "pass-through" else "_" + p.replace("-", "_")


def plot_policies(by_policy, d):
    """The issue's scenarios under every policy, side by side."""
    if len(by_policy) < 2:
        return
    policies = list(by_policy)
    metrics = [("d_vs_1b", 0, "p99_growth", "D p99 x (1 B)"),
               ("d_vs_16b", 0, "p99_growth", "D p99 x (16 B)"),
               ("m_vs_1b", 0, "rate_drop", "M rate / (1 B)"),
               ("b1_vs_b1qp", 0, "rate_drop", "B_single / vs 1-QP B"),
               ("b1_vs_b8qp", 0, "rate_drop", "B_single / vs 8-QP B")]
    metrics = [m for m in metrics if all(m[0] in by_policy[p] for p in policies)]
    if not metrics:
        return
    width = 0.8 / len(policies)
    plt.figure(figsize=(8, 4))
    for i, p in enumerate(policies):
        vals = [f(by_policy[p][m[0]][m[1]], m[2]) for m in metrics]
        plt.bar([k + i * width for k in range(len(metrics))], vals, width, label=p)
    plt.axhline(1.0, color="gray", ls=":")
    plt.yscale("log")
    plt.xticks([k + 0.4 - width / 2 for k in range(len(metrics))], [m[3] for m in metrics],
               fontsize=7)
    plt.ylabel("degradation vs alone (native), lower is better")
    plt.title("Policies side by side - RNIC model (not hardware)", fontsize=8)
    plt.legend(fontsize=7)
    plt.grid(True, axis="y", alpha=0.3)
    plt.tight_layout()
    plt.savefig(f"{d}/policies.png", dpi=120)
    plt.close()


def main():
    d = sys.argv[1]
    by_policy = load(f"{d}/results.csv")
    for p, rows in by_policy.items():
        tag = TAG.format(p)
        plot_latency_crowd(rows, d, tag)
        plot_qp_share(rows, d, tag)
        plot_pu_saturation(rows, d, tag)
        plot_headline(rows, d, tag)
    plot_policies(by_policy, d)
    print(f"plots written to {d}/*.png")


if __name__ == "__main__":
    main()
