#!/usr/bin/env bash
# Checks the vhost-user-rdma-pci device model in the patched QEMU without
# booting a guest (seconds):
# - bad properties are refused with an error, not an abort;
# - against the real vhost-rdma-daemon, the device is PCI 1af4:106a
#   (virtio ID 42, "virtio-rdma"), and its queue count is the daemon's:
#   2 + --doorbell-queues, for several values;
# - reconnects (chardev reconnect-ms): QEMU started before the daemon waits
#   for it; QEMU survives the daemon's SIGKILL (also without reconnect-ms);
#   a restarted daemon serving another queue count is refused while QEMU
#   keeps running; one serving the same is reconnected to.
# Usage: tests/vm/qemu-device-test.sh   (env VRDMA_DAEMON, VRDMA_CACHE, VRDMA_QEMU
#        as run-e2e.sh)
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
daemon="${VRDMA_DAEMON:-$here/build/vhost-rdma/daemon/vhost-rdma-daemon}"
qemu="${VRDMA_QEMU:-$(timeout 2400 "$here/scripts/vm-build-qemu.sh")}"
[ -x "$daemon" ] || { echo "no daemon at $daemon (build it, or set VRDMA_DAEMON)"; exit 1; }
tmp="$(mktemp -d)"
dpid=""
qpid=""
cleanup() {
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
pass() { echo "  PASS  $*"; }
fail() { echo "  FAIL  $*"; fails=$((fails + 1)); }

q() { # QEMU with the device's usual surroundings; extra args follow
  timeout 30 "$qemu" -L /usr/share/seabios -L /usr/share/qemu -accel tcg -m 256M \
    -nic none -vga none -display none -S \
    -object memory-backend-memfd,id=mem,size=256M,share=on -machine pc,memory-backend=mem "$@"
}

# 1. Properties QEMU must refuse (exit 1 with a message; an abort is 134).
expect_refused() { # description, expected message, device args
  local out rc=0
  out="$(q -monitor none -chardev "socket,id=c0,path=$tmp/none.sock,server=on,wait=off" \
         -device "$3" </dev/null 2>&1)" || rc=$?
  if [ "$rc" = 1 ] && [[ "$out" == *"$2"* ]]; then pass "$1"; else
    fail "$1 (rc $rc: $out)"; fi
}
expect_refused "queue-size 100 refused" "power of 2" vhost-user-rdma-pci,chardev=c0,queue-size=100
expect_refused "queue-size 0 refused" "power of 2" vhost-user-rdma-pci,chardev=c0,queue-size=0
expect_refused "queue-size 2048 refused" "power of 2" vhost-user-rdma-pci,chardev=c0,queue-size=2048
expect_refused "missing chardev refused" "chardev" vhost-user-rdma-pci

# 2. Against the daemon: identity and queue count from the backend.
ctl() { timeout 20 /usr/bin/python3 "$here/tests/vm/daemon_ctl.py" "$tmp/ctl.sock" request "$1"; }
for ndb in 1 4; do
  rm -f "$tmp"/*.sock
  "$daemon" --control "$tmp/ctl.sock" --doorbell-queues "$ndb" >"$tmp/daemon.log" 2>&1 &
  dpid=$!
  for ((i = 0; i < 50; i++)); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.1; done
  ctl '{"cmd":"attach-vm","name":"t","socket":"'"$tmp"'/t.sock","gids":["::ffff:10.0.0.1"]}' >/dev/null
  out="$( (sleep 2; echo "info pci"; echo "info virtio-status /machine/peripheral/vr/virtio-backend";
           sleep 1; echo quit) |
          q -monitor stdio -chardev "socket,id=c0,path=$tmp/t.sock" \
            -device vhost-user-rdma-pci,chardev=c0,id=vr 2>&1 | tr -d '\r' | sed 's/\x1b\[[0-9;]*[A-Za-z]//g')" || true
  if grep -q "Network controller: PCI device 1af4:106a" <<<"$out"; then
    pass "doorbell-queues $ndb: PCI 1af4:106a"; else fail "doorbell-queues $ndb: no PCI 1af4:106a"; fi
  if grep -q "device_id: *42" <<<"$out" && grep -q "device_name: *virtio-rdma" <<<"$out"; then
    pass "doorbell-queues $ndb: virtio device 42 (virtio-rdma)"; else fail "doorbell-queues $ndb: not virtio 42"; fi
  nvq="$(sed -n 's/^ *num_vqs: *\([0-9]*\).*/\1/p' <<<"$out")"
  if [ "$nvq" = "$((2 + ndb))" ]; then pass "doorbell-queues $ndb: num_vqs $nvq from the daemon"
  else fail "doorbell-queues $ndb: num_vqs '$nvq', want $((2 + ndb))"; fi
  kill "$dpid"; wait "$dpid" 2>/dev/null || true; dpid=""
done

# 3. Reconnects. QEMU runs paused (-S): no driver, so no DEVICE_NEEDS_RESET
# here (run-e2e.sh covers the guest's side); this is QEMU's side.
start_daemon() { # doorbell queues; attaches VM t on t.sock
  rm -f "$tmp/ctl.sock"
  "$daemon" --control "$tmp/ctl.sock" --doorbell-queues "$1" >>"$tmp/daemon.log" 2>&1 &
  dpid=$!
  for ((i = 0; i < 50; i++)); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.1; done
  ctl '{"cmd":"attach-vm","name":"t","socket":"'"$tmp"'/t.sock","gids":["::ffff:10.0.0.1"]}' >/dev/null
}
kill_daemon() { kill -9 "$dpid"; wait "$dpid" 2>/dev/null || true; dpid=""; }
connected() { # seconds: the daemon sees VM t's QEMU connected
  for ((i = 0; i < $1 * 5; i++)); do
    timeout 20 /usr/bin/python3 "$here/tests/vm/daemon_ctl.py" "$tmp/ctl.sock" connected t && return 0
    sleep 0.2
  done
  return 1
}
start_qemu() { # chardev options after the path
  "$qemu" -L /usr/share/seabios -L /usr/share/qemu -accel tcg -m 256M \
    -nic none -vga none -display none -S -monitor none \
    -object memory-backend-memfd,id=mem,size=256M,share=on -machine pc,memory-backend=mem \
    -chardev "socket,id=c0,path=$tmp/t.sock$1" -device vhost-user-rdma-pci,chardev=c0 \
    </dev/null >"$tmp/qemu.log" 2>&1 &
  qpid=$!
}
stop_qemu() { kill "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null || true; qpid=""; }

rm -f "$tmp"/*.sock
start_qemu ",reconnect-ms=200" # no daemon yet: realize waits for the socket
sleep 2
start_daemon 1
if connected 10; then pass "reconnect-ms: QEMU started before the daemon connects once the VM is attached"
else fail "reconnect-ms: QEMU never connected ($(tail -3 "$tmp/qemu.log"))"; fi
kill_daemon
sleep 1
if kill -0 "$qpid" 2>/dev/null; then pass "reconnect-ms: QEMU survives the daemon's SIGKILL"
else fail "reconnect-ms: QEMU died with the daemon ($(tail -3 "$tmp/qemu.log"))"; fi
start_daemon 4
sleep 2
if ! connected 1 && kill -0 "$qpid" 2>/dev/null &&
   grep -q "serves 6 queues; the device has 3" "$tmp/qemu.log"; then
  pass "reconnect-ms: a daemon with another queue count is refused, QEMU keeps running"
else fail "reconnect-ms: other queue count not refused ($(tail -3 "$tmp/qemu.log"))"; fi
kill_daemon
start_daemon 1
if connected 10 && kill -0 "$qpid" 2>/dev/null; then
  pass "reconnect-ms: QEMU reconnects to a restarted daemon"
else fail "reconnect-ms: no reconnect to the restarted daemon ($(tail -3 "$tmp/qemu.log"))"; fi
kill_daemon
stop_qemu

rm -f "$tmp"/*.sock
start_daemon 1
start_qemu ""
connected 10 || fail "no reconnect-ms: QEMU did not connect"
kill_daemon
sleep 1
if kill -0 "$qpid" 2>/dev/null; then pass "no reconnect-ms: QEMU survives the daemon's SIGKILL"
else fail "no reconnect-ms: QEMU died with the daemon ($(tail -3 "$tmp/qemu.log"))"; fi
stop_qemu

if ((fails)); then echo "qemu-device-test: $fails failure(s)"; exit 1; fi
echo "qemu-device-test: all checks passed"
