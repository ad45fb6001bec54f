#!/usr/bin/env bash
# VerbsRnic on a real rdma-core device. This host has no RDMA device and its
# kernel no rdma_rxe, so TCG guests play the hosts: each boots the cached
# image (scripts/vm-build-image.sh, shared with run-e2e.sh), adds Soft-RoCE
# (`rdma link add rxe0 type rxe netdev eth0`) and runs binaries of the
# host's build directory from its 9p share.
#
# Default (two hosts): host VMs h1 and h2 on a QEMU socket network, each
# with rxe0 and `vhost-rdma-daemon --rnic rxe0` serving one in-process guest
# (guest-driver/lib); native ib_write_bw / ib_write_lat between the hosts'
# rxe0, then vrdma-perftest write/send/read bw and lat with --verify between
# the guests on the two hosts, printed side by side; then, on h1,
# verbs_rnic_test, verbs_rnic_alloc_test and engine_rnic_test with
# VRDMA_TEST_RNIC=rxe0 (every
# Verbs instance must pass: a skip fails this script), the hostile test
# in which one VM registers 1 GiB of MRs over and over beside another VM's
# WRITE latency, through a daemon on rxe0, and the daemon's checks at start
# and attach on rxe0: the pinning budget under RLIMIT_MEMLOCK, a missing
# --rnic-port, the probe GID (--probe-gid).
# --one-host: one host VM: the gtests; attach-vm refuses a GID the port
# lacks and accepts the port's; native perftest beside vrdma-perftest
# through the daemon, both ends on the same rxe0 (loopback).
# --tests-only: one host VM, the gtests only.
#
# Usage: tests/vm/run-verbs.sh [--one-host | --tests-only]
# Env:   VRDMA_CACHE, VRDMA_QEMU, VRDMA_QEMU_ARGS (see run-e2e.sh)
#        VRDMA_BUILD   build directory (default build/; the binaries must exist:
#                      cmake --build build --target verbs_rnic_test verbs_rnic_alloc_test
#                      engine_rnic_test vhost-rdma-daemon vrdma-ctl vrdma-perftest
#                      integration_hostile_test)
#        VRDMA_VM_SMP  vCPUs per host VM (default 2)
#        VRDMA_VERBS_TIMEOUT  seconds for a host VM's whole run (default 900)
#        VRDMA_DAEMON_ARGS  the daemons' flags besides --control and --rnic
#                      (default --idle-spin-us 1000)
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
vm_tag=verbs
source "$here/tests/vm/lib.sh"
tests_only=0 two=1
for a in "$@"; do
  case "$a" in
    --tests-only) tests_only=1 two=0 ;;
    --one-host) two=0 ;;
    *) echo "usage: $0 [--one-host | --tests-only]" >&2; exit 2 ;;
  esac
done
export VRDMA_VM_SMP="${VRDMA_VM_SMP:-2}"
build="${VRDMA_BUILD:-$here/build}"
bins=(backend/verbs_rnic/verbs_rnic_test backend/verbs_rnic/verbs_rnic_alloc_test
      backend/engine/engine_rnic_test
      vhost-rdma/daemon/vhost-rdma-daemon vhost-rdma/daemon/vrdma-ctl
      guest-driver/perftest/vrdma-perftest tests/integration/integration_hostile_test)
((tests_only)) && bins=("${bins[@]:0:3}")
gtests="verbs_rnic_test verbs_rnic_alloc_test engine_rnic_test"
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || die "no $build/$b (build it first; see the header of $0)"
done

vm_run_dir verbs
trap vm_cleanup EXIT
log "step 1/4: QEMU and the guest image (cached)"
vm_qemu
vm_image

log "step 2/4: the shares: guest scripts and the host build's binaries"
make_share() { # vm role ip peer_ip
  local d="$run/share-$1"
  mkdir -p "$d/results" "$d/bin"
  cp -r "$here/tests/vm/guest/." "$d/"
  for b in "${bins[@]}"; do cp "$build/$b" "$d/bin/"; done
  printf 'NAME=%s\nROLE=%s\nIP=%s\nPEER_IP=%s\nPT_TIMEOUT=%s\nRXE=1\nCRASH=0\nTESTS_ONLY=%s\n' \
    "$1" "$2" "$3" "$4" "${VRDMA_PT_TIMEOUT:-300}" "$tests_only" >"$d/env"
  [ -n "${VRDMA_DAEMON_ARGS:-}" ] && printf "DAEMON_ARGS='%s'\n" "$VRDMA_DAEMON_ARGS" >>"$d/env"
  return 0
}
# -cpu max: Debian's DPDK (librte_eal, in the daemon) uses instructions
# TCG's default qemu64 CPU lacks (SIGILL at start otherwise).
port=$((30000 + $$ % 20000))
boot_host() { # vm mac-suffix local-port remote-port
  vm_boot "$1" "${VRDMA_VERBS_TIMEOUT:-900}" -cpu max \
    -netdev "socket,id=n0,udp=127.0.0.1:$4,localaddr=127.0.0.1:$3" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:99:00:$2,romfile=
}
if ((two)); then
  make_share h1 verbs-server 10.99.0.1 10.99.0.2
  make_share h2 verbs-client 10.99.0.2 10.99.0.1
  log "step 3/4: boot host VMs h1 and h2 (TCG, ${VRDMA_VM_SMP} vCPUs each), rxe0 on their link"
  boot_host h1 01 "$port" "$((port + 1))"
  boot_host h2 02 "$((port + 1))" "$port"
  hosts=(h1 h2)
else
  make_share h1 verbs 10.99.0.1 ""
  log "step 3/4: boot the host VM (TCG, ${VRDMA_VM_SMP} vCPUs) with rxe0 on its virtio-net"
  boot_host h1 01 "$port" "$((port + 1))"
  hosts=(h1)
fi
rc_h=0
for h in "${hosts[@]}"; do
  rc=0
  wait "$(eval echo "\$pid_$h")" || rc=$?
  ((rc == 124)) && log "  $h hit the run timeout (${VRDMA_VERBS_TIMEOUT:-900} s)"
  ((rc != 0)) && rc_h=$rc
done

log "step 4/4: results"
R="$run/share-h1/results"
echo "== rxe0 in the guest: $(grep -m1 -E 'hca_id|transport' "$R/ibv_devinfo.txt" 2>/dev/null | tr -s ' \t' ' ')"
echo "== GIDs:"; sed 's/^/   /' "$R/gids.txt" 2>/dev/null || true
for t in $gtests; do
  echo "== $t (rc $(cat "$R/$t.rc" 2>/dev/null || echo none))"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|^limits:|Failure|Expected|Actual|Which is' "$R/$t.out" 2>/dev/null |
    sed 's/^/   /' || echo "   (no output)"
done
no_verbs_skip() { ! grep -qE '^\[  SKIPPED \].*(Verbs|VerbsRnicTest)' "$1"; }
verbs_ran() { grep -qE '^\[       OK \] .*(/Verbs|VerbsRnicTest)' "$1"; }
for t in $gtests; do
  check "$t exit code 0 on rxe0" rc_is_zero "$R/$t.rc"
  check "$t: the VerbsRnic tests ran (none skipped)" \
    bash -c "$(declare -f no_verbs_skip verbs_ran); no_verbs_skip '$R/$t.out' && verbs_ran '$R/$t.out'"
done
row() { # label file
  local h r
  h=$(grep -m1 "#bytes" "$2" 2>/dev/null) || true
  r=$(awk '/#bytes/ {h = 1; next} h && /^ *[0-9]+ +[0-9]+ +[0-9.]+/ {print; exit}' "$2" 2>/dev/null) || true
  printf '  %-26s %s\n  %-26s %s\n' "" "${h:-}" "$1" "${r:-<no result>}"
}
both_zero() { [ "$(cat "$1" "$2" 2>/dev/null | tr -d '\n')" = 00 ]; }
missing_gid_refused() {
  [ "$(cat "$1/attach_missing_gid.rc" 2>/dev/null)" != 0 ] &&
    grep -q 'not in the GID table' "$1/attach_missing_gid.out" 2>/dev/null
}
if ((tests_only == 0)); then
  echo "== attach-vm with a GID rxe0 lacks: $(tr -d '\n' <"$R/attach_missing_gid.out" 2>/dev/null)"
  check "attach-vm refuses a GID the port lacks, naming it" missing_gid_refused "$R"
fi
if ((two)); then
  echo "== one VM registers 1 GiB of MRs over and over beside another's WRITEs (daemon on rxe0):"
  grep -E 'victim (p99|worst)|registrations of|^\[ +(OK|FAILED) +\]|Failure|Expected|Which is' \
    "$R/hostile_reg.out" 2>/dev/null | sed 's/^/   /' || echo "   (no output)"
  check "the 1 GiB registrations on rxe0 (HostileTest) exit code 0" rc_is_zero "$R/hostile_reg.rc"
  echo "== a daemon on rxe0 under RLIMIT_MEMLOCK 512 MiB: attach 384 MiB, 256 MiB, detach the first, 256 MiB:"
  sed 's/^/   /' "$R/pinning.out" 2>/dev/null || echo "   (no output)"
  pinning_budget_held() { # attached; refused, naming the budget; detached; attached
    grep '^rc ' "$1" | tr '\n' ' ' | grep -qE '^rc 0 rc [1-9][0-9]* rc 0 rc 0 $' &&
      grep -q 'pinning budget' "$1"
  }
  check "the pinning budget (RLIMIT_MEMLOCK) refuses a VM beyond it, naming it, until one leaves" \
    pinning_budget_held "$R/pinning.out"
  echo "== --rnic rxe0 --rnic-port 2: $(grep -m1 'rnic' "$R/no_port.out" 2>/dev/null)"
  no_port_refused() { [ "$(cat "$1/no_port.rc" 2>/dev/null)" = 2 ] && grep -q 'has no port 2' "$1/no_port.out"; }
  check "a port the device lacks (--rnic-port 2) stops the daemon at start, naming it" \
    no_port_refused "$R"
  echo "== --probe-gid the port lacks: $(grep -m1 'probe-gid' "$R/probe_gid_missing.out" 2>/dev/null)"
  echo "== attach-vm with the probe GID: $(grep -m1 'error' "$R/probe_gid_taken.out" 2>/dev/null)"
  probe_gid_held() {
    [ "$(cat "$1/probe_gid_missing.rc" 2>/dev/null)" = 2 ] &&
      grep -q 'not in the GID table' "$1/probe_gid_missing.out" &&
      [ "$(cat "$1/probe_gid_taken.rc" 2>/dev/null)" != 0 ] &&
      grep -q "the daemon's own" "$1/probe_gid_taken.out" &&
      [ "$(cat "$1/probe_daemon.rc" 2>/dev/null)" = 0 ]
  }
  check "--probe-gid: refused when the port lacks it; with the port's, the daemon keeps it from VMs" \
    probe_gid_held "$R"
  R2="$run/share-h2/results"
  for h in h1 h2; do
    check "$h: attach-vm of its guest with the port's GID" rc_is_zero "$run/share-$h/results/attach.rc"
  done
  echo
  echo "Between two host VMs (TCG, Soft-RoCE rxe0 on a QEMU socket link): native perftest"
  echo "on rxe0, then vrdma-perftest between in-process guests through each host's"
  echo "vhost-rdma-daemon --rnic rxe0; same run (clients' figures; not hardware figures):"
  row "native ib_write_bw" "$R2/x_native_write_bw.out"
  row "daemon write_bw" "$R2/x_write_bw.out"
  row "native ib_write_lat" "$R2/x_native_write_lat.out"
  row "daemon write_lat" "$R2/x_write_lat.out"
  for t in send_bw send_lat read_bw read_lat; do row "daemon $t" "$R2/x_$t.out"; done
  # Adaptive signaling (--adaptive-signaling auto: on with rxe0): the
  # client host's stage counters after each test. vrdma-perftest signals
  # every WR; a latency test's WR is the last of its post list, so it is
  # signaled; a bandwidth test's WRs get a CQE per signal period.
  echo "CQEs the client host's daemon asked of rxe0 per guest WR (vrdma-perftest signals every WR):"
  python3 - "$R2" >"$run/signals.txt" <<'PY'
import json, sys
prev = (0.0, 0.0)
for t in ("write_bw", "write_lat", "send_bw", "send_lat", "read_bw", "read_lat"):
    try:
        p = json.load(open(f"{sys.argv[1]}/x_{t}.stats.json"))["policy"]
        s, w = p["stage_rnic_signals"], p["stage_wrs_done"]
    except (OSError, ValueError, KeyError) as e:
        print(f"  {t:10s} no counters ({e})")
        continue
    ds, dw = s - prev[0], w - prev[1]
    prev = (s, w)
    print(f"  {t:10s} {int(ds):6d} RNIC CQEs for {int(dw):6d} guest WRs = {ds / dw if dw else 0:.3f}")
PY
  sed 's/^/  /' "$run/signals.txt"
  for t in x_native_write_bw x_native_write_lat; do
    check "two hosts: $t exit code 0 (server h1, client h2)" both_zero "$R/$t.rc" "$R2/$t.rc"
  done
  for t in write_bw write_lat send_bw send_lat read_bw read_lat; do
    check "two hosts: vrdma-perftest $t --verify exit code 0 (server h1, client h2)" \
      both_zero "$R/x_$t.rc" "$R2/x_$t.rc"
  done
  check "adaptive signaling on rxe0: write_bw's 1000 signaled WRs took fewer RNIC CQEs" \
    awk '$1 == "write_bw" && $2 + 0 > 0 && $2 + 0 < $6 + 0 {ok = 1} END {exit !ok}' "$run/signals.txt"
elif ((tests_only == 0)); then
  check "attach-vm accepts the port's GIDs" bash -c "rc=\$(cat '$R/attach_a.rc' '$R/attach_b.rc' | tr -d '\n'); [ \"\$rc\" = 00 ]"
  echo
  echo "Native perftest on rxe0 and vrdma-perftest through vhost-rdma-daemon --rnic rxe0,"
  echo "same guest, same run (TCG guest, Soft-RoCE loopback: not hardware figures):"
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
check "the host VM(s) powered off by themselves" test "$rc_h" = 0
if ((fails)); then
  log "FAILED: $fails check(s). Consoles: $run/console-*.txt, guest logs: $run/share-*/results/"
  exit 1
fi
log "PASSED in $(($(date +%s) - t0)) s (run directory $run)"
