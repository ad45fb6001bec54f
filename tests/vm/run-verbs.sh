#!/usr/bin/env bash
# VerbsRnic on a real rdma-core device. This host has no RDMA device and its
# kernel no rdma_rxe, so a TCG guest plays the host: it boots the cached
# image (scripts/vm-build-image.sh, shared with run-e2e.sh), adds Soft-RoCE
# (`rdma link add rxe0 type rxe netdev eth0`) and runs, from the host's
# build directory over the 9p share:
#   - verbs_rnic_test and engine_rnic_test with VRDMA_TEST_RNIC=rxe0 (every
#     Verbs instance must pass: a skip fails this script);
#   - vhost-rdma-daemon --rnic rxe0: attach-vm refuses a GID the port lacks
#     and accepts the port's own;
#   - native ib_write_bw / ib_write_lat on rxe0 beside vrdma-perftest
#     (write_bw, write_lat, send_bw, read_bw with --verify) through the daemon
#     on the same rxe0, printed side by side.
#
# Usage: tests/vm/run-verbs.sh [--tests-only]
# Env:   VRDMA_CACHE, VRDMA_QEMU, VRDMA_QEMU_ARGS (see run-e2e.sh)
#        VRDMA_BUILD   build directory (default build/; the binaries must exist:
#                      cmake --build build --target verbs_rnic_test engine_rnic_test
#                      vhost-rdma-daemon vrdma-ctl vrdma-perftest)
#        VRDMA_VM_SMP  vCPUs of the guest (default 2)
#        VRDMA_VERBS_TIMEOUT  seconds for the whole guest run (default 900)
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
vm_tag=verbs
source "$here/tests/vm/lib.sh"
tests_only=0
for a in "$@"; do
  case "$a" in
    --tests-only) tests_only=1 ;;
    *) echo "usage: $0 [--tests-only]" >&2; exit 2 ;;
  esac
done
export VRDMA_VM_SMP="${VRDMA_VM_SMP:-2}"
build="${VRDMA_BUILD:-$here/build}"
bins=(backend/verbs_rnic/verbs_rnic_test backend/engine/engine_rnic_test
      vhost-rdma/daemon/vhost-rdma-daemon vhost-rdma/daemon/vrdma-ctl
      guest-driver/perftest/vrdma-perftest)
((tests_only)) && bins=("${bins[@]:0:2}")
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || die "no $build/$b (build it first; see the header of $0)"
done

vm_run_dir verbs
trap vm_cleanup EXIT
log "step 1/4: QEMU and the guest image (cached)"
vm_qemu
vm_image

log "step 2/4: the share: guest scripts and the host build's binaries"
share="$run/share-h"
mkdir -p "$share/results" "$share/bin"
cp -r "$here/tests/vm/guest/." "$share/"
for b in "${bins[@]}"; do cp "$build/$b" "$share/bin/"; done
printf 'NAME=vm-h\nROLE=verbs\nIP=10.99.0.1\nPEER_IP=\nPT_TIMEOUT=%s\nRXE=1\nCRASH=0\nTESTS_ONLY=%s\n' \
  "${VRDMA_PT_TIMEOUT:-300}" "$tests_only" >"$share/env"

log "step 3/4: boot the host VM (TCG, ${VRDMA_VM_SMP} vCPUs) with rxe0 on its virtio-net"
port=$((30000 + $$ % 20000))
# -cpu max: Debian's DPDK (librte_eal, in the daemon) uses instructions
# TCG's default qemu64 CPU lacks (SIGILL at start otherwise).
vm_boot h "${VRDMA_VERBS_TIMEOUT:-900}" -cpu max \
  -netdev "socket,id=n0,udp=127.0.0.1:$((port + 1)),localaddr=127.0.0.1:$port" \
  -device virtio-net-pci,netdev=n0,mac=52:54:00:99:00:01,romfile=
rc_h=0
wait "$pid_h" || rc_h=$?
((rc_h == 124)) && log "  the guest hit the run timeout (${VRDMA_VERBS_TIMEOUT:-900} s)"

log "step 4/4: results"
R="$share/results"
echo "== rxe0 in the guest: $(grep -m1 -E 'hca_id|transport' "$R/ibv_devinfo.txt" 2>/dev/null | tr -s ' \t' ' ')"
echo "== GIDs:"; sed 's/^/   /' "$R/gids.txt" 2>/dev/null || true
for t in verbs_rnic_test engine_rnic_test; do
  echo "== $t (rc $(cat "$R/$t.rc" 2>/dev/null || echo none))"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|^limits:|Failure|Expected|Actual|Which is' "$R/$t.out" 2>/dev/null |
    sed 's/^/   /' || echo "   (no output)"
done
no_verbs_skip() { ! grep -qE '^\[  SKIPPED \].*(Verbs|VerbsRnicTest)' "$1"; }
verbs_ran() { grep -qE '^\[       OK \] .*(/Verbs|VerbsRnicTest)' "$1"; }
for t in verbs_rnic_test engine_rnic_test; do
  check "$t exit code 0 on rxe0" rc_is_zero "$R/$t.rc"
  check "$t: the VerbsRnic tests ran (none skipped)" \
    bash -c "$(declare -f no_verbs_skip verbs_ran); no_verbs_skip '$R/$t.out' && verbs_ran '$R/$t.out'"
done
if ((tests_only == 0)); then
  echo "== attach-vm with a GID rxe0 lacks: $(cat "$R/attach_missing_gid.out" 2>/dev/null)"
  check "attach-vm refuses a GID the port lacks" \
    bash -c "[ \"\$(cat '$R/attach_missing_gid.rc')\" != 0 ] && grep -q 'not in the GID table' '$R/attach_missing_gid.out'"
  check "attach-vm accepts the port's GIDs" bash -c "rc=\$(cat '$R/attach_a.rc' '$R/attach_b.rc' | tr -d '\n'); [ \"\$rc\" = 00 ]"
  echo
  echo "Native perftest on rxe0 and vrdma-perftest through vhost-rdma-daemon --rnic rxe0,"
  echo "same guest, same run (TCG guest, Soft-RoCE loopback: not hardware figures):"
  row() { # label file
    local h r
    h=$(grep -m1 "#bytes" "$2" 2>/dev/null) || true
    r=$(awk '/#bytes/ {h = 1; next} h && /^ *[0-9]+ +[0-9]+ +[0-9.]+/ {print; exit}' "$2" 2>/dev/null) || true
    printf '  %-26s %s\n  %-26s %s\n' "" "${h:-}" "$1" "${r:-<no result>}"
  }
  row "native ib_write_bw" "$R/native_write_bw_c.out"
  row "daemon write_bw" "$R/daemon_write_bw_c.out"
  row "native ib_write_lat" "$R/native_write_lat_c.out"
  row "daemon write_lat" "$R/daemon_write_lat_c.out"
  row "daemon send_bw" "$R/daemon_send_bw_c.out"
  row "daemon read_bw" "$R/daemon_read_bw_c.out"
  for t in native_write_bw native_write_lat; do
    check "$t exit code 0 (server and client)" bash -c "[ \"\$(cat '$R/$t.rc' '$R/${t}_c.rc' | tr -d '\n')\" = 00 ]"
  done
  for t in daemon_write_bw daemon_write_lat daemon_send_bw daemon_read_bw; do
    check "$t --verify exit code 0 (server and client)" \
      bash -c "[ \"\$(cat '$R/$t.rc' '$R/${t}_c.rc' | tr -d '\n')\" = 00 ]"
  done
fi
check "the guest powered off by itself" test "$rc_h" = 0
if ((fails)); then
  log "FAILED: $fails check(s). Console: $run/console-h.txt, guest logs: $R/"
  exit 1
fi
log "PASSED in $(($(date +%s) - t0)) s (run directory $run)"
