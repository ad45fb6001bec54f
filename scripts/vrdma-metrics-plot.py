#!/usr/bin/python3
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
"""Per-VM throughput and completion latency over time, from the daemon's
Prometheus metrics (vhost-rdma-daemon --metrics-address; docs/operators.md).

  vrdma-metrics-plot.py record URL OUT.jsonl [--interval 0.5]
      scrapes URL (http://127.0.0.1:9464/metrics) every interval until it is
      stopped (SIGTERM/SIGINT); one JSON line per scrape.
  vrdma-metrics-plot.py plot OUT.jsonl PNG [--mark SECONDS:LABEL ...]
      [--title TEXT]
      per VM: payload throughput (Gb/s, from vrdma_vm_completed_bytes_total),
      its cap (vrdma_vm_qos max_rate_bps, dashed), and the mean completion
      latency of each interval (from the running mean and count); --mark
      draws a vertical line at a time (Unix seconds) with a label.

Needs Debian's python3-matplotlib (/usr/bin/python3) for plot only.
"""
import argparse
import json
import re
import signal
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
WANTED = {
    "vrdma_vm_completed_bytes_total": "bytes",
    "vrdma_vm_wrs_completed_total": "wrs",
    "vrdma_vm_completion_latency_avg_seconds": "lat_avg",
}


def parse(text):
    """{vm: {key: value}} for the metrics this script plots."""
    vms = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), dict(LABEL.findall(m.group(3) or "")), m.group(4)
        vm = labels.get("vm")
        if vm is None:
            continue
        if name in WANTED:
            vms.setdefault(vm, {})[WANTED[name]] = float(value)
        elif name == "vrdma_vm_qos" and labels.get("field") == "max_rate_bps":
            vms.setdefault(vm, {})["cap_bps"] = float(value)
    return vms


def record(url, out, interval):
    stop = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.append(1))
    with open(out, "a") as f:
        while not stop:
            t = time.time()
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    vms = parse(r.read().decode())
                f.write(json.dumps({"t": t, "vms": vms}) + "\n")
                f.flush()
            except OSError as e:
                print(f"vrdma-metrics-plot: {url}: {e}", file=sys.stderr)
            time.sleep(max(0.0, interval - (time.time() - t)))


def plot(src, png, marks, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = [json.loads(line) for line in open(src) if line.strip()]
    if len(samples) < 2:
        sys.exit("vrdma-metrics-plot: fewer than two samples")
    # Start 2 s before the first work completes (a boot is not worth a plot).
    first = next((i for i in range(1, len(samples))
                  if any(v.get("bytes", 0) > samples[0]["vms"].get(vm, {}).get("bytes", 0)
                         for vm, v in samples[i]["vms"].items())), 1)
    start_t = samples[first - 1]["t"] - 2
    samples = [s for s in samples if s["t"] >= start_t] or samples
    t0 = samples[0]["t"]
    vms = sorted({vm for s in samples for vm in s["vms"]})
    fig, (ax_bw, ax_lat) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    for vm in vms:
        xs, bw, lat, cap = [], [], [], []
        prev = None
        for s in samples:
            cur = s["vms"].get(vm)
            if cur is None or "bytes" not in cur:
                prev = None
                continue
            if prev is not None:
                dt = s["t"] - prev[0]
                db = cur["bytes"] - prev[1]["bytes"]
                dn = cur.get("wrs", 0) - prev[1].get("wrs", 0)
                if dt > 0 and db >= 0:
                    xs.append(s["t"] - t0)
                    bw.append(db * 8 / dt / 1e9)
                    # The interval's mean from the running mean and count.
                    sum_now = cur.get("lat_avg", 0) * cur.get("wrs", 0)
                    sum_prev = prev[1].get("lat_avg", 0) * prev[1].get("wrs", 0)
                    lat.append((sum_now - sum_prev) / dn * 1e6 if dn > 0 else float("nan"))
                    c = cur.get("cap_bps", 0)
                    cap.append(c / 1e9 if c > 0 else float("nan"))
            prev = (s["t"], cur)
        if not xs:
            continue
        line, = ax_bw.plot(xs, bw, label=f"{vm}")
        ax_bw.plot(xs, cap, linestyle="--", color=line.get_color(), label=f"{vm} cap")
        ax_lat.plot(xs, lat, color=line.get_color(), label=vm)
    for m in marks:
        at, _, label = m.partition(":")
        x = float(at) - t0
        for ax in (ax_bw, ax_lat):
            ax.axvline(x, color="gray", linestyle=":")
        ax_bw.annotate(label, (x, ax_bw.get_ylim()[1]), rotation=90, va="top", ha="right",
                       fontsize=8, color="gray")
    ax_bw.set_ylabel("payload completed (Gb/s)")
    ax_lat.set_ylabel("mean completion latency (us, log)")
    ax_lat.set_yscale("log")
    ax_lat.set_xlabel("seconds")
    ax_bw.legend(fontsize=8, loc="upper right")
    ax_bw.set_title(title)
    ax_bw.grid(alpha=0.3)
    ax_lat.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("url")
    r.add_argument("out")
    r.add_argument("--interval", type=float, default=0.5)
    g = sub.add_parser("plot")
    g.add_argument("src")
    g.add_argument("png")
    g.add_argument("--mark", action="append", default=[])
    g.add_argument("--title", default="vhost-rdma: per-VM throughput and latency")
    a = p.parse_args()
    if a.cmd == "record":
        record(a.url, a.out, a.interval)
    else:
        plot(a.src, a.png, a.mark, a.title)


if __name__ == "__main__":
    main()
