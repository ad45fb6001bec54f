#!/usr/bin/env bash
# End-to-end test on real VMs: two TCG guests, each with a vhost-user-rdma-pci
# device served by one vhost-rdma-daemon, run Debian's unmodified perftest
# against each other; a third guest holding QPs and MRs is SIGKILLed during
# the first test and the daemon must release everything it held. Then the
# daemon itself is SIGKILLed under traffic: both QEMUs must survive, both
# guests' contexts must get IBV_EVENT_DEVICE_FATAL, and after the daemon is
# restarted (VMs re-attached, QEMU reconnects) a fresh perftest must pass
# between the same guests, without a reboot.
#
# Usage: tests/vm/run-e2e.sh [--no-victim] [--no-crash] [--rxe] [--roce] [--nvme-only]
#   --rxe  harness self-test: the guests use the kernel's Soft-RoCE (rdma_rxe)
#          on their virtio-net link instead of vhost-rdma; no daemon, no
#          victim, no crash. Shows the harness works and gives a baseline,
#          RoCE tools included (guest/roles/roce.sh).
#   --roce vm-a and vm-b are attached with their NIC's MAC, so the device
#          offers VIRTIO_RDMA_F_ROCE: vrdma0 is a RoCE v2 port on eth0, the
#          perftests run without -x and the RoCE tools of guest/roles/roce.sh
#          (RDMA CM, UD, ibv_*_pingpong -g) run after them, as on --rxe.
#          (The victim stays without a MAC: the InfiniBand-layer port.)
#          vm-a and vm-b get the quota kernel_verbs, so the device may offer
#          VIRTIO_RDMA_F_KERNEL; after the RoCE tools NVMe over RDMA runs
#          between them (guest/roles/nvme.sh: vm-a's nvmet-rdma target, vm-b
#          writes, reads back and compares through nvme-rdma).
#   --nvme-only  with --rxe or --roce: only the NVMe-over-RDMA step (no
#          perftests, RoCE tools, victim or crash), for quick iterations.
# Env:   VRDMA_CACHE   heavy artifacts (QEMU, image, runs); /var/cache/vhost-rdma
#        VRDMA_DAEMON  daemon binary; default build/vhost-rdma/daemon/vhost-rdma-daemon
#                      (built with cmake into build/ when missing)
#        VRDMA_QEMU    QEMU binary (default: scripts/vm-build-qemu.sh's cached build)
#        VRDMA_E2E_TIMEOUT  seconds for the guests' whole test run (default 1200)
#        VRDMA_PT_TIMEOUT   seconds for one perftest in a guest (default 240)
#        VRDMA_DAEMON_ARGS, VRDMA_QEMU_ARGS  extra flags (e.g. --log-level debug,
#                           -trace 'vhost_user_*') for debugging
# Every step runs under `timeout`. Exit code 0 only if every check passed.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
vm_tag=e2e
source "$here/tests/vm/lib.sh"
victim=1 crash=1 rxe=0 roce=0 nvme_only=0
for a in "$@"; do
  case "$a" in
    --no-victim) victim=0 ;;
    --no-crash) crash=0 ;;
    --rxe) rxe=1 victim=0 crash=0 roce=1 ;;
    --roce) roce=1 ;;
    --nvme-only) nvme_only=1 ;;
    *) echo "usage: $0 [--no-victim] [--no-crash] [--rxe] [--roce] [--nvme-only]" >&2; exit 2 ;;
  esac
done
if ((nvme_only)); then
  ((roce)) || { echo "--nvme-only needs --rxe or --roce (RDMA CM)" >&2; exit 2; }
  victim=0 crash=0
fi

vm_run_dir e2e
trap vm_cleanup EXIT

declare -A gid=([a]=10.77.0.1 [b]=10.77.0.2 [c]=10.77.0.3)
declare -A mac=([a]=52:54:00:77:00:01 [b]=52:54:00:77:00:02)
# attach_vm VM: attach-vm with the VM's GID; with --roce vm-a and vm-b also
# get their virtio-net MAC (docs/virtio-rdma.md 2.1), the victim none, and
# the quota kernel_verbs (VIRTIO_RDMA_F_KERNEL, §4.8: NVMe over RDMA).
attach_vm() {
  local vm="$1" m="" q=""
  ((roce)) && m="${mac[$vm]:-}"
  [ -n "$m" ] && q='{"kernel_verbs":true}'
  daemon_attach "vm-$vm" "$run/vm-$vm.sock" "${gid[$vm]}" "$m" "$q"
}

# verbs_match PROG OUT: every case's line in OUT (PROG's output, e.g.
# verbs_errors or verbs_ex) is Soft-RoCE's
# (guest-driver/kernel/testing/PROG.expected) or, on vrdma0, one of
# PROG.differences; every case ran. Prints what did not match.
verbs_match() {
  local t="$here/guest-driver/kernel/testing"
  python3 - "$2" "$t/$1.expected" "$t/$1.differences" "$rxe" <<'PY'
import sys
out, expected, differences, rxe = sys.argv[1:]
case = lambda line: line.split(":", 1)[0]
want = {case(l): l for l in open(expected).read().splitlines() if l.strip()}
allowed = set() if rxe == "1" else {
    l for l in open(differences).read().splitlines() if l.strip() and not l.startswith("#")}
got = {case(l): l for l in open(out).read().splitlines() if ":" in l}
bad = [f"  {c}: got {got.get(c, '(nothing)')!r}, Soft-RoCE {w!r}"
       for c, w in want.items() if got.get(c) != w and got.get(c) not in allowed]
bad += [f"  {c}: not in the expected lines: {l!r}" for c, l in got.items() if c not in want]
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# ---------------------------------------------------------------- builds ---
log "step 1/8: QEMU with vhost-user-rdma-pci (cached)"
vm_qemu

log "step 2/8: guest image, kernel, initrd and guest module (cached)"
vm_image
if ((roce)); then
  # guest/roles/roce.sh runs them: ibv_query_qp must return the AV it was
  # given; the error flows and the extended verbs must end as on Soft-RoCE
  # (verbs_errors.expected, verbs_ex.expected, verbs_mw.expected).
  for prog in verbs_smoke verbs_errors verbs_ex verbs_mw; do
    cc -O2 -Wall -o "$run/$prog" "$here/guest-driver/kernel/testing/$prog.c" -libverbs \
      >"$run/$prog.build.log" 2>&1 ||
      log "  $prog did not build (libibverbs-dev?): $run/$prog.build.log"
  done
fi
if ((rxe == 0)); then
[ -n "$MODULE" ] && [ -f "$MODULE" ] ||
  die "no guest module: guest-driver/kernel did not build (see $cache/module-$KABI/build.log)"

log "step 3/8: vhost-rdma-daemon"
daemon="${VRDMA_DAEMON:-$here/build/vhost-rdma/daemon/vhost-rdma-daemon}"
if [ ! -x "$daemon" ] && [ -z "${VRDMA_DAEMON:-}" ]; then
  log "  building it into $here/build"
  timeout 600 cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$run/cmake.log" 2>&1 || { tail -20 "$run/cmake.log" >&2; die "cmake configure"; }
  timeout 1800 cmake --build "$here/build" --target vhost-rdma-daemon >>"$run/cmake.log" 2>&1 ||
    { tail -20 "$run/cmake.log" >&2; die "daemon build"; }
fi
[ -x "$daemon" ] || die "no daemon binary at $daemon"
source "$here/tests/vm/daemon_ctl.sh"

# ---------------------------------------------------------------- daemon ---
log "step 4/8: start the daemon and attach three VMs"
daemon_start "$daemon" "$run" || die "daemon did not start (log: $run/daemon.log)"
vms=(a b); ((victim)) && vms+=(c)
for vm in "${vms[@]}"; do
  attach_vm "$vm" || die "attach-vm vm-$vm failed: $(cat "$run/ctl.last" 2>/dev/null)"
done
else
  log "steps 3-4/8: --rxe: no daemon, the guests use Soft-RoCE"
fi

# ---------------------------------------------------------------- guests ---
# Each guest gets its own 9p share: the guest scripts, the module, its env
# (role, addresses) and a results/ directory the guest fills.
make_share() { # vm role ip peer_ip
  local d="$run/share-$1"
  mkdir -p "$d/results"
  cp -r "$here/tests/vm/guest/." "$d/"
  ((rxe)) || cp "$MODULE" "$d/vrdma.ko"
  for prog in verbs_smoke verbs_errors verbs_ex verbs_mw; do
    if [ -x "$run/$prog" ]; then cp "$run/$prog" "$d/"; fi
  done
  # PT_GID=auto: on a RoCE port perftest runs without -x (guest/lib.sh).
  # ONLY=nvme: the roles run the NVMe step alone (--nvme-only).
  printf 'NAME=vm-%s\nROLE=%s\nIP=%s\nPEER_IP=%s\nPT_TIMEOUT=%s\nRXE=%s\nCRASH=%s\nPT_GID=auto\nONLY=%s\n' \
    "$1" "$2" "$3" "$4" "${VRDMA_PT_TIMEOUT:-240}" "$rxe" "$crash" "$( ((nvme_only)) && echo nvme)" >"$d/env"
}

port_base=$((20000 + $$ % 20000))
boot() { # vm, then extra QEMU arguments; runs in the background, pid in pids[]
  local vm="$1"; shift
  # reconnect-ms: QEMU reconnects to a restarted daemon (docs/operators.md).
  local rdma_args=(-chardev "socket,id=vrdma0,path=$run/vm-$vm.sock,reconnect-ms=500"
                   -device vhost-user-rdma-pci,chardev=vrdma0)
  ((rxe)) && rdma_args=()
  vm_boot "$vm" "${VRDMA_E2E_TIMEOUT:-1200}" "${rdma_args[@]}" "$@"
}

if ((victim)); then
  log "step 5/8: boot the victim VM (holds QPs and MRs: see tests/vm/guest/roles/victim.sh)"
  make_share c victim "" ""
  boot c
  wait_file "$run/share-c/results/victim.started" 180 "$pid_c" ||
    die "victim VM did not start its server (console: $run/console-c.txt, $run/share-c/results/console.log)"
  # The server holds PD, CQs, QP and MR once it is waiting for a client.
  held=""
  for ((i = 0; i < 120; i++)); do
    if daemon_vm_holds "vm-c"; then held=1; break; fi
    kill -0 "$pid_c" 2>/dev/null || break
    sleep 1
  done
  [ -n "$held" ] || die "the daemon never showed QPs/MRs for vm-c: $(cat "$run/ctl.last" 2>/dev/null)"
  log "  daemon holds for vm-c: $(daemon_vm_summary vm-c)"
else
  log "step 5/8: victim VM skipped (--no-victim)"
fi

log "step 6/8: boot vm-a (servers) and vm-b (clients), linked by a QEMU socket netdev"
make_share a server 10.77.0.1 10.77.0.2
make_share b client 10.77.0.2 10.77.0.1
boot a -netdev "socket,id=n0,udp=127.0.0.1:$((port_base + 1)),localaddr=127.0.0.1:$port_base" \
       -device "virtio-net-pci,netdev=n0,mac=${mac[a]},romfile="
boot b -netdev "socket,id=n0,udp=127.0.0.1:$port_base,localaddr=127.0.0.1:$((port_base + 1))" \
       -device "virtio-net-pci,netdev=n0,mac=${mac[b]},romfile="

killed_during_write_bw=0
if ((victim)); then
  # Kill the victim while vm-a and vm-b run their first test (ib_write_bw,
  # 10 s): perftest prints its result header when the transfer starts.
  for ((i = 0; i < 480; i++)); do
    grep -qs "#bytes" "$run/share-b/results/write_bw.out" && break
    kill -0 "$pid_b" 2>/dev/null || break
    sleep 0.5
  done
  sleep 2
  [ -e "$run/share-b/results/write_bw.rc" ] || killed_during_write_bw=1
  qpid="$(cat "$run/qemu-c.pid")"
  log "  SIGKILL the victim's QEMU (pid $qpid); vm-b's ib_write_bw running: $killed_during_write_bw"
  kill -9 "$qpid"
  # Checked now: the daemon is restarted below and then knows no vm-c.
  released=""
  for ((i = 0; i < 30; i++)); do
    if daemon_vm_released "vm-c"; then released=1; break; fi
    sleep 1
  done
  log "  daemon after the kill: $(daemon_vm_summary vm-c)"
fi

# After the RoCE tools: every AH the guests made (perftest/pingpong UD,
# udaddy, and the kernel CM's, destroyed from atomic context) must be gone
# from the device, or a VM's AH quota would run out connection by connection.
vm_ahs() { daemon_vm_summary "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["ahs"])' 2>/dev/null; }
ahs_released="" ahs_seen=""
if ((roce && !rxe && !nvme_only)); then
  for ((i = 0; i < 2400; i++)); do
    [ -e "$run/share-a/results/roce.done" ] && [ -e "$run/share-b/results/roce.done" ] && break
    kill -0 "$pid_a" 2>/dev/null && kill -0 "$pid_b" 2>/dev/null || break
    sleep 0.5
  done
  for ((i = 0; i < 20; i++)); do
    ahs_seen="vm-a $(vm_ahs vm-a), vm-b $(vm_ahs vm-b)"
    [ "$ahs_seen" = "vm-a 0, vm-b 0" ] && { ahs_released=1; break; }
    sleep 0.5
  done
  log "  device AHs after the RoCE tools: $ahs_seen"
  # guest/roles/roce.sh's roce_reload: vm-b removes the module.
  unload_clean="" unload_seen=""
  wait_file "$run/share-b/results/unloaded" 600 "$pid_b" &&
    for ((i = 0; i < 20; i++)); do
      unload_seen="$(daemon_vm_summary vm-b)"
      if echo "$unload_seen" | python3 -c 'import json, sys
d = json.load(sys.stdin)
sys.exit(any(d[k] for k in ("pds", "cqs", "qps", "mrs", "ahs", "srqs")))' 2>/dev/null; then
        unload_clean=1; break
      fi
      sleep 0.5
    done
  touch "$run/share-b/results/host.checked"
  log "  daemon for vm-b after rmmod virtio_rdma: $unload_seen"
fi

qemu_alive() { # vm: its QEMU process (not the timeout wrapper) still runs
  local p; p="$(cat "$run/qemu-$1.pid" 2>/dev/null)" && [ -n "$p" ] && kill -0 "$p" 2>/dev/null
}
killed_daemon_under_traffic=0 qemu_survived=0 both_fatal=0 reconnected=0
if ((crash)); then
  log "step 7/8: SIGKILL the daemon under traffic (vm-b's crash_bw), restart it"
  for ((i = 0; i < 1200; i++)); do
    grep -qs "#bytes" "$run/share-b/results/crash_bw.out" && break
    kill -0 "$pid_a" 2>/dev/null && kill -0 "$pid_b" 2>/dev/null || break
    sleep 0.5
  done
  grep -qs "#bytes" "$run/share-b/results/crash_bw.out" ||
    die "vm-b's crash_bw never started transferring (console: $run/share-b/results/console.log)"
  sleep 2
  [ -e "$run/share-b/results/crash_bw.rc" ] || killed_daemon_under_traffic=1
  log "  SIGKILL the daemon (pid $daemon_pid); vm-b's crash_bw running: $killed_daemon_under_traffic"
  kill -9 "$daemon_pid"
  wait "$daemon_pid" 2>/dev/null || true
  # The guests must see the device die while the daemon is down.
  for ((i = 0; i < 120; i++)); do
    [ -e "$run/share-a/results/fatal.seen" ] && [ -e "$run/share-b/results/fatal.seen" ] &&
      { both_fatal=1; break; }
    sleep 0.5
  done
  log "  both guests saw IBV_EVENT_DEVICE_FATAL: $both_fatal"
  qemu_alive a && qemu_alive b && qemu_survived=1
  log "  vm-a and vm-b QEMU still running: $qemu_survived"
  daemon_start "$daemon" "$run" daemon-restarted.log ||
    die "the daemon did not restart (log: $run/daemon-restarted.log)"
  # A restarted daemon knows no VM: the operator attaches them again, with
  # the same sockets and GIDs; QEMU reconnects by itself (reconnect-ms).
  for vm in a b; do
    attach_vm "$vm" || die "re-attach of vm-$vm failed: $(cat "$run/ctl.last" 2>/dev/null)"
  done
  for ((i = 0; i < 60; i++)); do
    daemon_vm_connected vm-a && daemon_vm_connected vm-b && { reconnected=1; break; }
    sleep 0.5
  done
  log "  restarted daemon: vm-a and vm-b QEMU reconnected: $reconnected"
else
  log "step 7/8: daemon crash skipped"
fi

log "  waiting for both guests to finish and power off"
rc_a=0 rc_b=0
wait "$pid_a" || rc_a=$?
wait "$pid_b" || rc_b=$?
((rc_a == 124 || rc_b == 124)) && log "  a guest hit the run timeout (${VRDMA_E2E_TIMEOUT:-1200} s)"
for vm in a b; do
  [ -s "$run/qemu-$vm.log" ] && log "  qemu-$vm.log: $(tail -3 "$run/qemu-$vm.log")"
done

# --------------------------------------------------------------- checks ----
log "step 8/8: results"
has_table() { # a perftest header line, then at least one numeric result row
  awk '/#bytes/ {h = 1; next} h && /^ *[0-9]+ +[0-9]+ +[0-9.]+/ {ok = 1} END {exit !ok}' "$1" 2>/dev/null
}

tests=$(awk 'NF >= 2 && $1 !~ /^#/ && $2 ~ /^ib_/ {print $1}' "$here/tests/vm/guest/roles/tests.sh")
((nvme_only)) && tests=""
# The RoCE tools (guest/roles/roce.sh) ran after the perftests.
roce_tests="" roce_perftests=""
if ((roce && !nvme_only)); then
  roce_tests=$(awk 'NF >= 3 && ($2 == "perftest" || $2 == "cmd") {print $1}' "$here/tests/vm/guest/roles/roce.sh" | tr '\n' ' ')
  roce_perftests=$(awk 'NF >= 3 && $2 == "perftest" {print $1}' "$here/tests/vm/guest/roles/roce.sh" | tr '\n' ' ')
  tests="$tests $roce_tests"
fi
# The daemon-crash phase (guest/roles/crash.sh): crash_bw is cut by the
# kill, after_restart_bw runs on the recovered device and must pass.
((crash)) && tests="$tests after_restart_bw"
# cm_early's client output (guest/lib.sh run_cmd_client): an end line per
# try, "<time> client <tag> (try <n>): rc <rc> after <s> s"; rping prints
# "cma event RDMA_CM_EVENT_REJECTED, error 8" (perftest 4.5 names the event
# by number: "Unexpected CM event bl blka 8").
cm_early_ok() {
  awk '$4 == "(try" && $6 == "rc" { if ($5 == "1):") { rc1 = $7; s1 = $9 }; n++; next }
       n == 0 && (/REJECTED/ || /Unexpected CM event bl blka 8$/) { rej = 1 }
       END { exit !(rej && rc1 != 0 && s1 != "" && s1 <= 5 && n >= 2) }' "$1" 2>/dev/null
}
cm_early_first() { # what the first try did, for the check's line
  [ -f "$1" ] || { echo "no output"; return 0; }
  awk '$4 == "(try" && $5 == "1):" && $6 == "rc" { print "rc " $7 " after " $9 " s"; f = 1; exit }
       END { if (!f) print "no try recorded" }' "$1" 2>/dev/null
}
# A RoCE tool that prints no perftest table (rping, ucmatose, ...).
is_roce_cmd() { case " $roce_tests " in *" $1 "*) case " $roce_perftests " in *" $1 "*) return 1 ;; esac; return 0 ;; esac; return 1; }
summary="$run/summary.txt"
: >"$summary"
for t in $tests; do
  for vm in a b; do
    out="$run/share-$vm/results/$t.out"
    echo "===== vm-$vm $t (rc $(cat "$run/share-$vm/results/$t.rc" 2>/dev/null || echo none)) =====" >>"$summary"
    cat "$out" >>"$summary" 2>/dev/null || echo "(no output)" >>"$summary"
  done
done
cat "$summary"
echo
echo "Figures printed by the clients (TCG guests and a software RNIC: not hardware figures;"
echo "-D 10 runs print no peak bandwidth):"
for t in $tests; do
  is_roce_cmd "$t" && continue
  b="$run/share-b/results/$t.out"
  hdr=$(grep -m1 "#bytes" "$b" 2>/dev/null) || true
  row=$(awk '/#bytes/ {h = 1; next} h && /^ *[0-9]+ +[0-9]+ +[0-9.]+/ {print; exit}' "$b" 2>/dev/null) || true
  printf '  %-12s %s\n  %-12s %s\n' "" "${hdr:-}" "$t" "${row:-<no result>}"
done
echo
for t in $tests; do
  for vm in a b; do
    check "vm-$vm $t exit code 0" rc_is_zero "$run/share-$vm/results/$t.rc"
  done
  is_roce_cmd "$t" || check "vm-b $t printed a result table" has_table "$run/share-b/results/$t.out"
done
if ((roce)); then
  for vm in a b; do
    check "vm-$vm: port 1 is RoCE (link_layer Ethernet)" \
      grep -q "link_layer:[[:space:]]*Ethernet" "$run/share-$vm/results/ibv_devinfo.txt"
  done
  # NVMe over RDMA (guest/roles/nvme.sh): every step of vm-b's and vm-a's.
  for vm in a b; do
    f=nvme; [ $vm = a ] && f=nvme_target
    echo "===== vm-$vm NVMe over RDMA ($f.out, rc $(cat "$run/share-$vm/results/$f.rc" 2>/dev/null || echo none)) ====="
    cat "$run/share-$vm/results/$f.out" 2>/dev/null || echo "(no output)"
  done
  nvme_steps() { # vm file step...: each step's line says rc=0
    local vm=$1 f=$2 st; shift 2
    for st in "$@"; do
      grep -q "^step $st rc=0 " "$run/share-$vm/results/$f.out" 2>/dev/null || return 1
    done
  }
  check "nvme: vm-a exported a brd namespace on an rdma port (nvmet configfs)" \
    nvme_steps a nvme_target modules brd configfs
  check "nvme: vm-b connected over RDMA (nvme connect -t rdma) and saw the namespace" \
    nvme_steps b nvme modules connect namespace
  check "nvme: 16 MiB written with 1 MiB O_DIRECT I/Os, read back with 128 KiB, identical" \
    nvme_steps b nvme write_1M read_128k compare_big
  check "nvme: 1 MiB written and read back with 4 KiB O_DIRECT I/Os, identical" \
    nvme_steps b nvme write_4k read_4k compare_small
  check "nvme: the 16 MiB read back again with 1 MiB I/Os, identical" \
    nvme_steps b nvme reread_1M compare_again
  check "nvme: vm-b disconnected" nvme_steps b nvme disconnect
  # nvme-rdma hides a failed work request behind a reconnect and requeue.
  check "nvme: no transport error on vm-b (no error recovery, reconnect, failed WR, warning)" \
    nvme_steps b nvme no_transport_errors
  check "nvme: no transport error on vm-a (no failed WR, fatal controller error, warning)" \
    nvme_steps a nvme_target no_transport_errors
  check "nvme: vm-a's RAM disk holds exactly what vm-b wrote (checksums)" \
    nvme_steps a nvme_target ramdisk_holds_data
  check "nvme: vm-a took the target down" nvme_steps a nvme_target unconfigure
  for vm in a b; do
    f=nvme; [ $vm = a ] && f=nvme_target
    check "nvme: vm-$vm's step exit code 0" rc_is_zero "$run/share-$vm/results/$f.rc"
  done
fi
if ((roce && !nvme_only)); then
  # What each tool prints when its exchange went through, not just rc 0.
  for t in rc_pingpong ud_pingpong; do
    for vm in a b; do
      check "$t: vm-$vm printed its iterations" grep -q "iters in" "$run/share-$vm/results/$t.out"
    done
  done
  check "vm-b: verbs_smoke (RC loopback on the IPv4 GID; ibv_query_qp returns the AV given)" \
    rc_is_zero "$run/share-b/results/verbs_smoke.rc"
  # The differential run: each error flow ends as on Soft-RoCE (its lines
  # are verbs_errors.expected), or, on vrdma0, as a written-down difference.
  check "vm-b: verbs_errors' error flows end as on Soft-RoCE (or a listed difference)" \
    verbs_match verbs_errors "$run/share-b/results/verbs_errors.out"
  # The same for the extended verbs (ibv_create_cq_ex, ibv_wr_*, ibv_start_poll).
  check "vm-b: verbs_ex's extended verbs end as on Soft-RoCE (or a listed difference)" \
    verbs_match verbs_ex "$run/share-b/results/verbs_ex.out"
  check "vm-b: verbs_mw's memory windows end as on Soft-RoCE (or a listed difference)" \
    verbs_match verbs_mw "$run/share-b/results/verbs_mw.out"
  for t in rping cm_early; do
    check "$t: vm-b got 10 pings back" \
      test "$(grep -c "^ping data" "$run/share-b/results/$t.out" 2>/dev/null)" -ge 10
  done
  for t in ucmatose udaddy ucmatose_c8; do
    for vm in a b; do
      check "$t: vm-$vm reports 'test complete'" grep -q "test complete" "$run/share-$vm/results/$t.out"
    done
  done
  # cm_early (roles/roce.sh): vm-b's client started before vm-a's server
  # listened. Its first try must end within 5 s with the REJ of vm-a's CM
  # (a REQ nobody answers is retried by the CM for many seconds instead), and
  # a later try must connect (rc 0 and 10 pings: checked with the others).
  check "cm_early: vm-b's first try REJECTED within 5 s ($(cm_early_first "$run/share-b/results/cm_early.out")), a later try connected" \
    cm_early_ok "$run/share-b/results/cm_early.out"
  if ((rxe == 0)); then
    check "the device holds no AH of vm-a and vm-b after the RoCE tools ($ahs_seen)" \
      test -n "$ahs_released"
    # guest/roles/roce.sh's roce_rebind: eth0 unregistered and back on vm-b.
    rb="$run/share-b/results/rebind.out"
    echo "===== vm-b: the port follows eth0 (rebind.out) ====="
    cat "$rb" 2>/dev/null
    check "vm-b: eth0 unregistered (rmmod virtio_net returned)" grep -q "rmmod virtio_net rc=0" "$rb"
    check "vm-b: port DOWN without eth0" grep -q "without eth0: PORT_DOWN" "$rb"
    check "vm-b: port ACTIVE with eth0 again" grep -q "with eth0 again: PORT_ACTIVE" "$rb"
    check "vm-b: traffic on the rebound port (loopback ibv_rc_pingpong)" grep -q "loopback rc=0" "$rb"
    echo "===== vm-b: rmmod and insmod virtio_rdma (reload.out) ====="
    cat "$run/share-b/results/reload.out" 2>/dev/null
    check "vm-b: rmmod virtio_rdma returned" grep -q "rmmod virtio_rdma rc=0" "$run/share-b/results/reload.out"
    check "vm-b: the device held nothing of vm-b after rmmod ($unload_seen)" test -n "$unload_clean"
    check "vm-b: vrdma0 back after insmod (PORT_ACTIVE)" \
      grep -q "after reload: vrdma0 PORT_ACTIVE" "$run/share-b/results/reload.out"
  fi
fi
check "vm-a powered off by itself" test "$rc_a" = 0
check "vm-b powered off by itself" test "$rc_b" = 0
if ((victim)); then
  check "vm-c was killed while vm-a and vm-b ran ib_write_bw" test "$killed_during_write_bw" = 1
  check "daemon released every resource of the killed vm-c" test -n "$released"
fi
ended() { # a perftest's rc file exists and is not timeout's 124 (it did not hang)
  local rc; rc="$(cat "$1" 2>/dev/null)" && [ -n "$rc" ] && [ "$rc" != 124 ]
}
if ((crash)); then
  for vm in a b; do
    echo "===== vm-$vm daemon crash: asyncwatch, crash_bw (rc $(cat "$run/share-$vm/results/crash_bw.rc" 2>/dev/null || echo none)) ====="
    cat "$run/share-$vm/results/asyncwatch.out" 2>/dev/null
    tail -3 "$run/share-$vm/results/crash_bw.out" 2>/dev/null
    grep -h "virtio_rdma\|vrdma" "$run/share-$vm/results/dmesg.txt" 2>/dev/null | tail -4
  done
  check "the daemon was SIGKILLed while vm-b's crash_bw (ib_write_bw) ran" \
    test "$killed_daemon_under_traffic" = 1
  check "vm-a's and vm-b's QEMU survived the daemon's death" test "$qemu_survived" = 1
  check "both guests saw IBV_EVENT_DEVICE_FATAL before the daemon was restarted" \
    test "$both_fatal" = 1
  for vm in a b; do
    check "vm-$vm: a user context got IBV_EVENT_DEVICE_FATAL" \
      grep -q IBV_EVENT_DEVICE_FATAL "$run/share-$vm/results/asyncwatch.out"
    check "vm-$vm: crash_bw ended instead of hanging" ended "$run/share-$vm/results/crash_bw.rc"
  done
  check "the restarted daemon sees vm-a's and vm-b's QEMU reconnected" test "$reconnected" = 1
  for vm in a b; do
    check "vm-$vm: the device came back (PORT_ACTIVE) without a reboot" \
      test -s "$run/share-$vm/results/revived"
  done
fi
if ((fails)); then
  log "FAILED: $fails check(s). Consoles: $run/console-*.txt, guest logs: $run/share-*/results/"
  exit 1
fi
log "PASSED in $(($(date +%s) - t0)) s (run directory $run)"
