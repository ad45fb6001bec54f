#!/usr/bin/env bash
# One real QEMU guest against vhost-rdma-daemon, to check vhost-user interop
# (not RDMA traffic: tests/vm/run-e2e.sh does that). The guest loads the
# virtio_rdma module, runs ibv_devinfo, unloads and reloads the module (queue
# stop via GET_VRING_BASE, restart), then powers off (disconnect). Passes when
# the guest saw the device both times and the daemon's debug trace of every
# vhost-user message shows no failed message.
#
# Needs the caches of scripts/vm-build-qemu.sh and scripts/vm-build-image.sh
# (run tests/vm/run-e2e.sh once). ~15 s under TCG.
# Usage: vhost-rdma/daemon/qemu_smoke.sh [build-dir]   (default: build)
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$here/build}"
cache="${VRDMA_CACHE:-/var/cache/vhost-rdma}"
daemon="$build/vhost-rdma/daemon/vhost-rdma-daemon"
ctl="$build/vhost-rdma/daemon/vrdma-ctl"
qemu="$cache/qemu-current/qemu-system-x86_64"
kabi="$(ls "$cache"/image/vmlinuz-* 2>/dev/null | head -1 | sed 's/.*vmlinuz-//')"
module="$cache/module-$kabi/guest-driver/kernel/virtio_rdma.ko"
for f in "$daemon" "$ctl" "$qemu" "$module"; do
  [ -e "$f" ] || { echo "qemu_smoke: missing $f" >&2; exit 2; }
done

run="$(mktemp -d /tmp/vrdma-qemu-smoke.XXXXXX)"
daemon_pid=""
cleanup() { [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true; }
trap cleanup EXIT

mkdir -p "$run/share/results"
cp "$module" "$run/share/vrdma.ko"
cat >"$run/share/init.sh" <<'GUEST'
#!/bin/sh
S=/run/vrdma
exec >$S/results/console.log 2>&1
modprobe -a ib_core ib_uverbs
for dep in $(modinfo -F depends $S/vrdma.ko | tr ',' ' '); do modprobe "$dep"; done
insmod $S/vrdma.ko && ibv_devinfo | grep -E "hca_id|state"
rmmod virtio_rdma && echo "rmmod ok"
insmod $S/vrdma.ko && ibv_devinfo | grep -E "hca_id|state"
GUEST

"$daemon" --control "$run/ctl.sock" --log-level debug >"$run/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 50); do [ -S "$run/ctl.sock" ] && break; sleep 0.1; done
"$ctl" -s "$run/ctl.sock" attach-vm --name smoke --socket "$run/vm.sock" \
  --gid ::ffff:10.0.0.1 >/dev/null

img="$cache/image"
timeout 180 "$qemu" -L /usr/share/seabios -L /usr/share/qemu \
  -accel tcg -smp 1 -m 1G -nic none -vga none -display none -monitor none -no-reboot \
  -serial "file:$run/console.txt" \
  -object memory-backend-memfd,id=mem,size=1G,share=on -machine pc,memory-backend=mem \
  -kernel "$img/vmlinuz-$kabi" -initrd "$img/initrd-$kabi.img" \
  -append "root=LABEL=vrdmaroot ro console=ttyS0 init=/sbin/vrdma-init quiet" \
  -drive "file=$img/rootfs-$kabi.ext4,format=raw,if=virtio,readonly=on" \
  -virtfs "local,path=$run/share,mount_tag=vrdma,security_model=none,id=fs0" \
  -chardev "socket,id=vrdma0,path=$run/vm.sock" \
  -device vhost-user-rdma-pci,chardev=vrdma0 >"$run/qemu.log" 2>&1 || true
sleep 0.3

fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
check "guest saw vrdma0 twice" \
  '[ "$(grep -c "hca_id:.*vrdma0" "$run/share/results/console.log")" = 2 ]'
check "port active twice" '[ "$(grep -c PORT_ACTIVE "$run/share/results/console.log")" = 2 ]'
check "queues were stopped (GET_VRING_BASE)" 'grep -q "GET_VRING_BASE.*-> ok" "$run/daemon.log"'
check "every vhost-user message succeeded" '! grep -E "\] VM smoke: [A-Z_]+ .*-> [a-z-]+$" "$run/daemon.log" | grep -vq -- "-> ok$"'
check "frontend disconnected at power-off" 'grep -q "connection ended" "$run/daemon.log"'
echo "logs: $run"
exit $fail
