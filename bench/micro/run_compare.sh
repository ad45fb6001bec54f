#!/bin/bash
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#
# Prints, in one run on one machine state, the layers of a vrdma round trip:
#   1. raw vhost-user ring echo (ring_echo_benchmark): the floor;
#   2. the engine's CPU cost per WQE on a no-op RNIC (engine_wqe_benchmark);
#   3. end to end: vrdma-perftest write_lat / send_lat / write_bw between two
#      in-process guests through a real vhost-rdma-daemon (soft RNIC).
# Figures only; nothing is asserted. Usage: run_compare.sh [BUILD_DIR]
set -euo pipefail
B=${1:-$(dirname "$0")/../../build}
B=$(cd "$B" && pwd)
DAEMON=$B/vhost-rdma/daemon/vhost-rdma-daemon
PERF=$B/guest-driver/perftest/vrdma-perftest
T=$(mktemp -d /tmp/vrdma-compare-XXXXXX)
DPID=
cleanup() { [ -n "$DPID" ] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

echo "== 1. raw vhost-user ring echo (64 B, busy polling)"
"$B/bench/micro/ring_echo_benchmark" --benchmark_min_time=1 2>/dev/null | grep BM_ || true
if [ -x "$B/bench/micro/engine_wqe_benchmark" ]; then
  echo "== 2. engine cost per WQE (no-op RNIC)"
  "$B/bench/micro/engine_wqe_benchmark" 2>/dev/null | grep BM_ || true
fi

echo "== 3. end to end through vhost-rdma-daemon"
"$DAEMON" --control-socket "$T/ctl.sock" --log-level warn >"$T/daemon.log" 2>&1 &
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
port=$((21000 + $$ % 5000))
run() {  # test, extra args...
  local t=$1; shift
  port=$((port + 1))
  "$PERF" "$t" --socket "$T/a.sock" -p $port >"$T/server.out" 2>&1 &
  local s=$!
  "$PERF" "$t" 127.0.0.1 --socket "$T/b.sock" -p $port "$@" | grep -A1 '#bytes'
  wait $s
}
run write_lat -n 2000 -s 64
run send_lat -n 2000 -s 64
run write_bw -n 20000 -s 64
run write_bw -n 5000 -s 65536
