#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Boots one TCG guest with a vhost-user-rdma-pci device, loads virtio_rdma.ko
# and runs a test in it: verbs_smoke by default, or the shell commands given.
# The backend is testing/fake_backend.py (default) or a vhost-rdma-daemon.
#
# Usage: guest_run.sh [--daemon BINARY] [--smp N] [-- 'guest shell commands']
# Needs the cached QEMU and guest image of scripts/vm-build-qemu.sh and
# scripts/vm-build-image.sh (under VRDMA_CACHE, default /var/cache/vhost-rdma).
# Prints the guest's output and the backend's log; exit code 0 when the guest
# test printed "GUEST-RC 0".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kdir="$(dirname "$here")"
cache="${VRDMA_CACHE:-/var/cache/vhost-rdma}"
kver="$(cat "$kdir/KERNEL_VERSION")"
daemon="" smp=1 cmds='$S/verbs_smoke vrdma0 0'
while [ $# -gt 0 ]; do
  case "$1" in
    --daemon) daemon="$2"; shift 2 ;;
    --smp) smp="$2"; shift 2 ;;
    --) cmds="$2"; shift 2 ;;
    *) echo "usage: $0 [--daemon BINARY] [--smp N] [-- 'commands']" >&2; exit 2 ;;
  esac
done
qemu="$cache/qemu-current/qemu-system-x86_64"
img="$cache/image"
for f in "$qemu" "$img/vmlinuz-$kver" "$img/initrd-$kver.img" "$img/rootfs-$kver.ext4"; do
  [ -e "$f" ] || { echo "missing $f (run scripts/vm-build-*.sh)" >&2; exit 1; }
done

work="$(mktemp -d /tmp/vrdma-guest-run.XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
mkdir -p "$work/share"
"$kdir/build.sh" "$kver" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
cp "$kdir/virtio_rdma.ko" "$work/share/"
cc -O2 -Wall -o "$work/share/verbs_smoke" "$here/verbs_smoke.c" -libverbs
cat >"$work/share/init.sh" <<EOF
#!/bin/sh
S=/run/vrdma
exec >\$S/console.log 2>&1
ip link set lo up
modprobe -a ib_core ib_uverbs
insmod \$S/virtio_rdma.ko || echo "insmod failed"
( $cmds ); echo "GUEST-RC \$?"
dmesg | grep -E "virtio_rdma|WARNING:|BUG:|Call Trace" | tail -20
EOF

sock="$work/vrdma.sock"
if [ -n "$daemon" ]; then
  "$daemon" --control "$work/ctl.sock" >"$work/backend.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do [ -S "$work/ctl.sock" ] && break; sleep 0.1; done
  python3 "$kdir/../../tests/vm/daemon_ctl.py" "$work/ctl.sock" request \
    "{\"cmd\":\"attach-vm\",\"name\":\"vm-g\",\"socket\":\"$sock\",\"gids\":[\"::ffff:10.77.0.9\"]}" >/dev/null
else
  python3 "$here/fake_backend.py" "$sock" >"$work/backend.log" 2>&1 &
  pids+=($!)
fi
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done

timeout "${VRDMA_GUEST_TIMEOUT:-300}" "$qemu" -L /usr/share/seabios -L /usr/share/qemu \
  -accel tcg -smp "$smp" -m 1G -nic none -vga none -display none -monitor none -no-reboot \
  -serial "file:$work/console.txt" \
  -object memory-backend-memfd,id=mem,size=1G,share=on -machine pc,memory-backend=mem \
  -kernel "$img/vmlinuz-$kver" -initrd "$img/initrd-$kver.img" \
  -append "root=LABEL=vrdmaroot ro console=ttyS0 init=/sbin/vrdma-init quiet" \
  -drive "file=$img/rootfs-$kver.ext4,format=raw,if=virtio,readonly=on" \
  -virtfs "local,path=$work/share,mount_tag=vrdma,security_model=none,id=fs0" \
  -chardev "socket,id=vrdma0,path=$sock" -device vhost-user-rdma-pci,chardev=vrdma0 || true

echo "===== guest ($work/share/console.log)"
cat "$work/share/console.log" 2>/dev/null || echo "(no guest output; console: $work/console.txt)"
echo "===== backend ($work/backend.log)"
tail -20 "$work/backend.log"
grep -q "^GUEST-RC 0$" "$work/share/console.log" 2>/dev/null
