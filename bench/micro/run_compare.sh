#!/bin/bash
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#
# Prints, in one run on one machine state, the layers of a vrdma round trip
# and the ratios the performance targets are stated in:
#   1. raw vhost-user ring echo (ring_echo_benchmark): the floor;
#   2. the engine's CPU cost per WQE on a no-op RNIC (engine_wqe_benchmark);
#   3. memcpy bandwidth over perftest's 64 KiB working set (memcpy_benchmark):
#      the ceiling of large writes on the software RNIC;
#   4. end to end: vrdma-perftest between two in-process guests through a
#      real vhost-rdma-daemon (soft RNIC), in two daemon set-ups:
#      a. two busy threads, which fit this machine's two cores: read_lat
#         (the client polls, the server is passive), write_bw 64 B and
#         64 KiB (the server sleeps). The daemon spins without yielding and
#         the guest spins 64 pauses before it yields, as both sides of the
#         ring echo do;
#      b. three busy pollers (write_lat, send_lat: both guests and the
#         daemon), which do not fit: everything yields early
#         (docs/benchmarks.md), and the figures measure the kernel's
#         scheduler as much as the code;
#   5. ratios: read_lat round trip / echo round trip (both medians),
#      64 B message rate (32 in flight) / echo rate (32 in flight),
#      64 KiB write_bw / memcpy bandwidth, and write_lat against the echo.
# Figures only; nothing is asserted.
# Usage: run_compare.sh [BUILD_DIR]
#   DAEMON_ARGS="..."  extra vhost-rdma-daemon flags for both set-ups
#   DAEMON_WRAP="valgrind --tool=callgrind"   run the daemon under a profiler
#   SKIP_MICRO=1                          only the end-to-end part (no ratios)
set -euo pipefail
B=${1:-$(dirname "$0")/../../build}
B=$(cd "$B" && pwd)
DAEMON=$B/vhost-rdma/daemon/vhost-rdma-daemon
PERF=$B/guest-driver/perftest/vrdma-perftest
T=$(mktemp -d /tmp/vrdma-compare-XXXXXX)
DPID=
cleanup() { [ -n "$DPID" ] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

# "2.93591M/s" -> 2935910 (google benchmark's k/M/G are powers of 1000 for
# items_per_second).
counter() {  # file benchmark-name counter
  grep "^$2 " "$1" | grep -o "$3=[0-9.]*[kMG]*" | head -1 | cut -d= -f2 |
    awk '{v=$1; m=1; if (v ~ /k$/) m=1e3; if (v ~ /M$/) m=1e6; if (v ~ /G$/) m=1e9;
          sub(/[kMG]$/, "", v); printf "%.0f", v*m}'
}

if [ -z "${SKIP_MICRO:-}" ]; then
  echo "== 1. raw vhost-user ring echo (64 B, busy polling)"
  "$B/bench/micro/ring_echo_benchmark" --benchmark_min_time=1 2>/dev/null | grep BM_ |
    tee "$T/echo.txt" || true
  if [ -x "$B/bench/micro/engine_wqe_benchmark" ]; then
    echo "== 2. engine cost per WQE (no-op RNIC)"
    "$B/bench/micro/engine_wqe_benchmark" 2>/dev/null | grep BM_ || true
  fi
  echo "== 3. memcpy over perftest's 64 KiB working set (128 slots)"
  "$B/bench/micro/memcpy_benchmark" --benchmark_min_time=0.5 2>/dev/null | grep BM_ |
    tee "$T/memcpy.txt" || true
fi

port=$((21000 + $$ % 5000))
daemon() {  # starts a daemon with flags "$@" and attaches VMs a and b
  # shellcheck disable=SC2086  # DAEMON_ARGS is a list of flags
  ${DAEMON_WRAP:-} "$DAEMON" --control-socket "$T/ctl.sock" --log-level warn "$@" \
    ${DAEMON_ARGS:-} >>"$T/daemon.log" 2>&1 &
  DPID=$!
  for _ in $(seq 100); do [ -S "$T/ctl.sock" ] && break; sleep 0.05; done
  python3 - "$T" <<'PY'
import json, socket, sys
t = sys.argv[1]
for name, gid in (("a", "::ffff:10.0.0.1"), ("b", "::ffff:10.0.0.2")):
    s = socket.socket(socket.AF_UNIX)
    s.connect(t + "/ctl.sock")
    s.sendall((json.dumps({"cmd": "attach-vm", "name": name, "socket": f"{t}/{name}.sock",
                           "gids": [gid]}) + "\n").encode())
    reply = json.loads(s.makefile().readline())
    assert reply.get("ok"), reply
PY
}
stop_daemon() {
  kill "$DPID"
  wait "$DPID" 2>/dev/null || true
  DPID=
  rm -f "$T"/*.sock
}
run() {  # output-name test extra-args... (both sides get the extra args)
  local out=$1 t=$2; shift 2
  port=$((port + 1))
  "$PERF" "$t" --socket "$T/a.sock" -p $port "$@" >"$T/server.out" 2>&1 &
  local s=$!
  echo "-- $t $*"
  "$PERF" "$t" 127.0.0.1 --socket "$T/b.sock" -p $port "$@" | grep -A1 '#bytes' |
    tee "$T/$out.txt"
  wait $s
}

echo "== 4a. two busy threads: vhost-rdma-daemon --idle-spin-us 1000 --idle-yield-turns 0 ${DAEMON_ARGS:-}"
daemon --idle-spin-us 1000 --idle-yield-turns 0
run read_lat read_lat -n 20000 -s 64 --spins-before-yield 64
run bw64 write_bw -D 3 -s 64 -t 32
run bw64k write_bw -D 3 -s 65536
stop_daemon

# Three busy pollers on two cores: the daemon must spin through a ping-pong
# and yield while it spins, and the guests yield after 8 pauses
# (docs/benchmarks.md). The daemon's defaults are for VMs, whose vCPUs need
# the core.
echo "== 4b. three busy pollers: vhost-rdma-daemon --idle-spin-us 1000 --idle-yield-turns 4 ${DAEMON_ARGS:-}"
daemon --idle-spin-us 1000 --idle-yield-turns 4
run lat write_lat -n 2000 -s 64
run send_lat send_lat -n 2000 -s 64
stop_daemon

[ -n "${SKIP_MICRO:-}" ] && exit 0
echo "== 5. ratios (targets from the issue in brackets)"
echo_p50=$(counter "$T/echo.txt" BM_RingEcho/1/real_time p50_ns)
echo_rate=$(counter "$T/echo.txt" BM_RingEcho/32/real_time items_per_second)
memcpy_rate=$(counter "$T/memcpy.txt" BM_Memcpy/65536/128/real_time items_per_second)
read_rtt=$(awk 'NR==2 {print $5}' "$T/read_lat.txt")  # t_typical: a whole READ
lat_half=$(awk 'NR==2 {print $5}' "$T/lat.txt")      # t_typical: half a round trip
rate64=$(awk 'NR==2 {print $5}' "$T/bw64.txt")       # MsgRate [Mpps]
rate64k=$(awk 'NR==2 {print $5}' "$T/bw64k.txt")
awk -v p50="$echo_p50" -v er="$echo_rate" -v mc="$memcpy_rate" -v rr="$read_rtt" \
    -v lh="$lat_half" -v r64="$rate64" -v r64k="$rate64k" 'BEGIN {
  printf "read_lat 64 B round trip %.2f us / echo round trip p50 %.2f us = %.2f  [<= 1.5]\n",
         rr, p50 / 1000, (p50 > 0 ? rr * 1000 / p50 : 0);
  printf "64 B write_bw, 32 in flight: %.3f M msg/s / echo 32 in flight %.3f M req/s = %.2f  [>= 0.9]\n",
         r64, er / 1e6, (er > 0 ? r64 * 1e6 / er : 0);
  printf "64 KiB write_bw %.2f GB/s / memcpy of 64 KiB %.2f GB/s = %.2f  [>= 0.9]\n",
         r64k * 1e6 * 65536 / 1e9, mc * 65536 / 1e9, (mc > 0 ? r64k * 1e6 / mc : 0);
  printf "write_lat round trip (2 x t_typical, three pollers) %.2f us / echo p50 = %.1f  [no target]\n",
         2 * lh, (p50 > 0 ? 2 * lh * 1000 / p50 : 0);
}'
