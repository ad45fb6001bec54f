#!/usr/bin/env bash
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#
# The reliability layer's own instructions and simulated L1 misses per WR
# in one reliable_cost case (docs/benchmarks.md "What eight QPs add"):
# callgrind with its cache simulator, then the self costs of every
# function in backend/reliable_rnic/ and policy/reliability/ summed,
# set-up and teardown left out. Deterministic, unlike the wall clock of
# this shared machine.
#   bench/micro/layer_callgrind.sh [wrs [case]]
#   (default: 30000 "64 KiB WRITE, 8 QPs, 100000 us, model"; the 64 KiB
#   cases run wrs / 10 WRs, plus the bench's warm-up of a tenth and one)
set -euo pipefail
cd "$(dirname "$0")/../.."
wrs=${1:-30000}
case=${2:-"64 KiB WRITE, 8 QPs, 100000 us, model"}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$out" \
  build/bench/micro/reliable_cost "$wrs" 1 "$case" > /dev/null 2>&1
n=$wrs
case $case in *KiB*) n=$((wrs / 10)) ;; esac
n=$((n + n / 10 + 1))
callgrind_annotate --auto=no --threshold=100 "$out" 2>/dev/null |
  grep -E "/(reliable_rnic|policy/reliability)/" |
  grep -vE "IdTable\(|ReliableRnic\(|~|CreateQp|ModifyQp|SetMode|Resize|Connect|Create|Destroy|Start\(|Sender\(|Receiver\(" |
  sed 's/([ 0-9.%]*)//g' |
  awk -v n="$n" '{for (i = 1; i <= 6; i++) {g = $i; gsub(",", "", g); if (g == ".") g = 0; s[i] += g}}
    END {printf "%s WRs: per WR %.0f instructions, %.1f + %.1f L1 misses (read + write)\n", n, s[1] / n, s[5] / n, s[6] / n}'
