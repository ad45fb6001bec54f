#!/usr/bin/env bash
# Checks the vhost-user-rdma-pci device model in the patched QEMU without
# booting a guest (seconds):
# - bad properties are refused with an error, not an abort;
# - against the real vhost-rdma-daemon, the device is PCI 1af4:106a
#   (virtio ID 42, "virtio-rdma"), and its queue count is the daemon's:
#   2 + --doorbell-queues, for several values.
# Usage: tests/vm/qemu-device-test.sh   (env VRDMA_DAEMON, VRDMA_CACHE as run-e2e.sh)
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
daemon="${VRDMA_DAEMON:-$here/build/vhost-rdma/daemon/vhost-rdma-daemon}"
qemu="$(timeout 2400 "$here/scripts/vm-build-qemu.sh")"
[ -x "$daemon" ] || { echo "no daemon at $daemon (build it, or set VRDMA_DAEMON)"; exit 1; }
tmp="$(mktemp -d)"
dpid=""
cleanup() { [ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$tmp"; }
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

if ((fails)); then echo "qemu-device-test: $fails failure(s)"; exit 1; fi
echo "qemu-device-test: all checks passed"
