#!/bin/bash
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#
# What a scheduling policy costs a tenant that has nobody to be protected
# from: vrdma-perftest write_bw with 1 MiB messages between two in-process
# guests through a real vhost-rdma-daemon (soft RNIC), once per policy, in
# one run, each policy's bandwidth as a ratio to pass-through's. Figures
# only; nothing is asserted. The daemon's stats, taken while the transfer
# runs, show how the stage posted the messages (pieces per WR: split or not).
# Usage: policy_cost.sh [BUILD_DIR] [POLICY[:KNOB,KNOB...] ...]
#   (default: every policy). "perf:always_isolate=true" runs PeRF splitting
#   although the tenant is alone.
#   ROUNDS=N      runs per policy, interleaved (default 3); the median is kept
#   SECS=N        seconds per run (default 4)
set -euo pipefail
B=${1:-$(dirname "$0")/../../build}
B=$(cd "$B" && pwd)
shift || true
DAEMON=$B/vhost-rdma/daemon/vhost-rdma-daemon
PERF=$B/guest-driver/perftest/vrdma-perftest
POLICIES=("$@")
if [ ${#POLICIES[@]} -eq 0 ]; then
  mapfile -t POLICIES < <("$DAEMON" --help | sed -n 's/.*--policy TEXT:{\(.*\)}.*/\1/p' | tr ',' '\n')
fi
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-4}
T=$(mktemp -d /tmp/vrdma-policy-cost-XXXXXX)
DPID=
cleanup() { [ -n "$DPID" ] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

ctl() {  # request-json -> reply on stdout
  python3 - "$T/ctl.sock" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
print(s.makefile().readline().strip())
PY
}

port=$((23000 + $$ % 5000))
run_one() {  # policy[:knobs] -> prints MB/s average
  local policy=${1%%:*} knobs=() k
  if [[ $1 == *:* ]]; then
    IFS=, read -ra k <<<"${1#*:}"
    for o in "${k[@]}"; do knobs+=(--policy-opt "$o"); done
  fi
  "$DAEMON" --control-socket "$T/ctl.sock" --log-level warn --policy "$policy" "${knobs[@]}" \
    --idle-spin-us 1000 --idle-yield-turns 4 >"$T/daemon.log" 2>&1 &
  DPID=$!
  for _ in $(seq 100); do [ -S "$T/ctl.sock" ] && break; sleep 0.05; done
  for vm in a:10.0.0.1 b:10.0.0.2; do
    ctl "{\"cmd\":\"attach-vm\",\"name\":\"${vm%%:*}\",\"socket\":\"$T/${vm%%:*}.sock\",\"gids\":[\"::ffff:${vm#*:}\"]}" >/dev/null
  done
  port=$((port + 1))
  "$PERF" write_bw --socket "$T/a.sock" -p $port >"$T/server.out" 2>&1 &
  local s=$!
  sleep 0.3  # the server listens (a client that finds no listener backs off)
  "$PERF" write_bw 127.0.0.1 --socket "$T/b.sock" -p $port -s 1048576 -D "$SECS" -t 16 \
    >"$T/client.out" 2>&1 &
  local c=$!
  sleep $((SECS / 2))
  ctl '{"cmd":"stats"}' >"$T/stats.json"
  wait $c
  wait $s
  kill "$DPID"
  wait "$DPID" 2>/dev/null || true
  DPID=
  rm -f "$T/ctl.sock"
  awk '/#bytes/ {getline; print $4}' "$T/client.out"
}

declare -A results
for _ in $(seq "$ROUNDS"); do
  for p in "${POLICIES[@]}"; do
    bw=$(run_one "$p")
    pieces=$(python3 -c "
import json
d = json.load(open('$T/stats.json'))
s = [v['scheduler'] for v in d['vms']]
w = sum(x['wrs_arrived'] for x in s)
print('%.1f' % (sum(x['pieces_posted'] for x in s) / w if w else 0))")
    echo "$p: ${bw} MB/s (pieces per WR: $pieces)"
    results[$p]+="$bw "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(echo "${results[pass-through]:-}" | median)
echo "== write_bw 1 MiB alone, median of $ROUNDS, ratio to pass-through"
for p in "${POLICIES[@]}"; do
  m=$(echo "${results[$p]}" | median)
  awk -v p="$p" -v m="$m" -v b="${base:-0}" \
    'BEGIN {printf "%-14s %10.1f MB/s  %s\n", p, m, (b > 0 ? sprintf("%.3f", m / b) : "")}'
done
