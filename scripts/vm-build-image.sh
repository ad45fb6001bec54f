#!/usr/bin/env bash
# Builds the Debian bookworm guest image for vhost-rdma's VM tests into a
# cache outside the checkout, and the guest kernel module against the same
# kernel ABI. Reuses what is cached.
#
# Usage: scripts/vm-build-image.sh [--module-only]
#   prints KEY=VALUE lines: KABI, KERNEL, INITRD, IMAGE, MODULE (MODULE empty
#   when guest-driver/kernel has no Makefile yet or its build failed).
# Env:   VRDMA_CACHE (default /var/cache/vhost-rdma)
#        VRDMA_GUEST_KABI (default: the ABI of bookworm main's linux-image-amd64)
#
# Why pin: the host must install linux-headers-<ABI> to build the module, and
# bookworm-security carries a newer kernel than bookworm main. The guest is
# bootstrapped from bookworm main only and gets linux-image-<ABI> explicitly,
# so module and kernel always match.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${VRDMA_CACHE:-/var/cache/vhost-rdma}"
mirror="http://deb.debian.org/debian"
log() { echo "[vm-build-image] $*" >&2; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == *"ok installed" ]]; }

# rdmacm-utils: rping, ucmatose, udaddy (RDMA CM on the RoCE port, run-e2e.sh);
# nvme-cli: nvme connect/disconnect over RDMA (guest/roles/nvme.sh).
guest_packages=(rdma-core ibverbs-utils ibverbs-providers perftest iproute2 kmod udev rdmacm-utils
  nvme-cli)
# Runtime libraries of the host build's binaries that tests/vm/run-verbs.sh
# runs inside a guest over the 9p share (the daemon and the gtest binaries:
# fmt, spdlog, DPDK's rte_ring/rte_eal). Added to an existing root with
# apt-get when this list changes; the image is rebuilt then (its stamp
# includes the list).
guest_runtime_packages=(libfmt9 libspdlog1.10 librte-ring23 librte-eal23 libnuma1 libxml2 libvirt0
  libcivetweb1)
# Modules the small initrd carries: enough to mount an ext4 root on virtio-blk.
initrd_modules=(virtio_pci virtio_blk ext4 crc32c_generic)

# The ABI bookworm main's linux-image-amd64 points at.
bookworm_main_kabi() {
  local ver dep
  ver="$(apt-cache madison linux-image-amd64 | awk -F'|' '$3 ~ / bookworm\/main / {gsub(/ /,"",$2); print $2; exit}')"
  [ -n "$ver" ] || { log "ERROR: no linux-image-amd64 in bookworm main (apt-get update?)"; exit 1; }
  dep="$(apt-cache show "linux-image-amd64=$ver" | sed -n 's/^Depends: *linux-image-\([^ ,]*\).*/\1/p' | head -1)"
  [ -n "$dep" ] || { log "ERROR: cannot read the kernel ABI of linux-image-amd64=$ver"; exit 1; }
  echo "$dep"
}

# The guest kernel ABI: VRDMA_GUEST_KABI, else the module's pin
# (guest-driver/kernel/KERNEL_VERSION), else bookworm main's. It must be
# installable from bookworm main (image) and its headers on the host (module).
resolve_kabi() {
  local kabi="${VRDMA_GUEST_KABI:-}" pin="$here/guest-driver/kernel/KERNEL_VERSION" main
  main="$(bookworm_main_kabi)"
  [ -n "$kabi" ] || { [ -s "$pin" ] && kabi="$(tr -d ' \n' <"$pin")"; } || true
  [ -n "$kabi" ] || kabi="$main"
  if [ "$kabi" != "$main" ]; then
    log "WARNING: guest kernel ABI $kabi differs from bookworm main's $main"
  fi
  # (no `| grep -q`: with pipefail, apt-cache's SIGPIPE would fail the test)
  if [[ "$(apt-cache madison "linux-image-$kabi")" != *" bookworm/main "* ]] ||
     [[ "$(apt-cache madison "linux-headers-$kabi")" != *" bookworm/main "* ]]; then
    log "ERROR: linux-image-$kabi / linux-headers-$kabi not in bookworm main"
    exit 1
  fi
  echo "$kabi"
}

install_host_deps() {
  local kabi="$1" missing=() p
  for p in debootstrap e2fsprogs "linux-headers-$kabi" build-essential; do
    installed "$p" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
}

bootstrap_root() {
  local kabi="$1" root="$2"
  [ -f "$root/.vrdma-bootstrap-done" ] && return 0
  $SUDO rm -rf "$root"; $SUDO mkdir -p "$root"
  local inc; inc="linux-image-$kabi,$(IFS=,; echo "${guest_packages[*]}")"
  log "debootstrap bookworm with $inc (about 2 minutes)"
  timeout 1200 $SUDO debootstrap --variant=minbase --include="$inc" bookworm "$root" "$mirror" \
    >"$cache/image/debootstrap.log" 2>&1 ||
    { tail -30 "$cache/image/debootstrap.log" >&2; log "ERROR: debootstrap failed"; exit 1; }
  $SUDO touch "$root/.vrdma-bootstrap-done"
}

# Installs guest_packages and guest_runtime_packages into an existing root
# (chroot apt-get from Debian's archive) once per list, so a package added to
# either list reaches a root bootstrapped before it without a new debootstrap;
# records the list in the root (the image stamp includes it, so the image is
# rebuilt then).
add_runtime_packages() {
  local root="$1" want have
  local pkgs=("${guest_packages[@]}" "${guest_runtime_packages[@]}")
  want="$(printf '%s\n' "${pkgs[@]}")"
  have="$(cat "$root/.vrdma-runtime-packages" 2>/dev/null || true)"
  [ "$want" = "$have" ] && return 0
  log "adding ${pkgs[*]} to the guest root"
  $SUDO cp /etc/resolv.conf "$root/etc/resolv.conf"
  { timeout 600 $SUDO chroot "$root" apt-get update -qq &&
    timeout 600 $SUDO chroot "$root" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${pkgs[@]}" &&
    $SUDO chroot "$root" apt-get clean; } >"$cache/image/runtime-packages.log" 2>&1 ||
    { tail -20 "$cache/image/runtime-packages.log" >&2; log "ERROR: apt-get in the guest root failed"; exit 1; }
  echo "$want" | $SUDO tee "$root/.vrdma-runtime-packages" >/dev/null
}

make_initrd() {
  local kabi="$1" root="$2" out="$3"
  [ -s "$out" ] && return 0
  log "building a small initrd (${initrd_modules[*]})"
  local conf; conf="$(mktemp -d)"
  cp -r "$root/etc/initramfs-tools/." "$conf/"
  sed -i 's/^MODULES=.*/MODULES=list/' "$conf/initramfs.conf"
  printf '%s\n' "${initrd_modules[@]}" >"$conf/modules"
  # Run the guest's own mkinitramfs inside the root so every tool and module
  # matches the guest kernel.
  $SUDO rm -rf "$root/tmp/vrdma-initramfs"; $SUDO cp -r "$conf" "$root/tmp/vrdma-initramfs"
  rm -rf "$conf"
  timeout 600 $SUDO chroot "$root" mkinitramfs -d /tmp/vrdma-initramfs -o /tmp/vrdma-initrd.img "$kabi" \
    >"$cache/image/mkinitramfs.log" 2>&1 ||
    { tail -20 "$cache/image/mkinitramfs.log" >&2; log "ERROR: mkinitramfs failed"; exit 1; }
  $SUDO mv "$root/tmp/vrdma-initrd.img" "$out"
  $SUDO rm -rf "$root/tmp/vrdma-initramfs"
}

# PID 1 of the guest. It stays tiny and stable so the image need not be
# rebuilt when the tests change: it mounts the 9p share (tag vrdma) and runs
# the share's init.sh, and powers off whatever happens.
install_stub_init() {
  local root="$1"
  $SUDO tee "$root/sbin/vrdma-init" >/dev/null <<'INIT'
#!/bin/sh
# vhost-rdma test guest init (PID 1). Installed by scripts/vm-build-image.sh.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
for d in /tmp /run /var/tmp /var/log /dev/shm; do mount -t tmpfs tmpfs "$d"; done
echo 1 > /proc/sys/kernel/sysrq
modprobe -q 9pnet_virtio; modprobe -q 9p
mkdir -p /run/vrdma
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 vrdma /run/vrdma; then
  /bin/sh /run/vrdma/init.sh
  echo "vrdma-init: init.sh exited with $?"
else
  echo "vrdma-init: cannot mount the 9p share 'vrdma'"
fi
sync
echo o > /proc/sysrq-trigger
sleep 10
INIT
  $SUDO chmod 755 "$root/sbin/vrdma-init"
}

make_image() {
  local root="$1" out="$2"
  log "mkfs.ext4 -d -> $out"
  install_stub_init "$root"
  local tmp="$out.tmp"
  rm -f "$tmp"
  # Room for the root (~770 MB) plus slack; the root is mounted read-only.
  truncate -s 1400M "$tmp"
  timeout 300 $SUDO mkfs.ext4 -q -F -L vrdmaroot -d "$root" "$tmp" >/dev/null
  mv "$tmp" "$out"
}

# build_module KABI OUT_DIR builds guest-driver/kernel (its own Makefile,
# KVER=<ABI>) in a copy outside the checkout, so no object file lands in the
# tree. The copy mirrors the repository layout because the module includes
# vhost-rdma/abi relatively. One build at a time per kernel (a subshell
# holding a lock): concurrent VM tests share this cache, and one's rm -rf
# must not pull the module from under another.
build_module() {
  mkdir -p "$(dirname "$2")"
  (
    flock 9
    build_module_unlocked "$@"
  ) 9>"$2.lock"
}

build_module_unlocked() {
  local kabi="$1" out_dir="$2"
  local srcdir="$here/guest-driver/kernel"
  if [ ! -f "$srcdir/Makefile" ]; then
    log "guest-driver/kernel has no Makefile yet: no module"
    return 0
  fi
  # Rebuild only when the module's sources (not testing/, the guest test
  # programs), the ABI header or the kernel changed.
  local key
  key="$( { echo "$kabi"; cd "$here" && find guest-driver/kernel vhost-rdma/abi \
          -path guest-driver/kernel/testing -prune -o -type f \
          \( -name '*.[ch]' -o -name Makefile -o -name Kbuild -o -name KERNEL_VERSION \) \
          -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)"
  if [ "$(cat "$out_dir/.key" 2>/dev/null)" = "$key" ] &&
     ls "$out_dir"/guest-driver/kernel/*.ko >/dev/null 2>&1; then
    return 0
  fi
  rm -rf "$out_dir" && mkdir -p "$out_dir/guest-driver" "$out_dir/vhost-rdma"
  # Sources only: objects someone built in the checkout must not leak in.
  mkdir -p "$out_dir/guest-driver/kernel"
  tar -C "$srcdir" --exclude='*.o' --exclude='*.ko' --exclude='*.mod' --exclude='*.mod.c' \
      --exclude='.*.cmd' --exclude=Module.symvers --exclude=modules.order -cf - . |
    tar -C "$out_dir/guest-driver/kernel" -xf -
  cp -r "$here/vhost-rdma/abi" "$out_dir/vhost-rdma/abi"
  log "building the guest module for $kabi"
  if ! timeout 300 make -C "$out_dir/guest-driver/kernel" KVER="$kabi" modules \
      >"$out_dir/build.log" 2>&1; then
    tail -30 "$out_dir/build.log" >&2
    log "ERROR: guest module build failed (log: $out_dir/build.log)"
    return 1
  fi
  echo "$key" >"$out_dir/.key"
}

main() {
  local module_only=0
  [ "${1:-}" = "--module-only" ] && module_only=1
  mkdir -p "$cache/image"
  local kabi; kabi="$(resolve_kabi)"
  install_host_deps "$kabi"
  local root="$cache/image/root-$kabi"
  local kernel="$cache/image/vmlinuz-$kabi" initrd="$cache/image/initrd-$kabi.img"
  local image="$cache/image/rootfs-$kabi.ext4"
  if ((module_only == 0)); then
    bootstrap_root "$kabi" "$root"
    [ -s "$kernel" ] || $SUDO cp "$root/boot/vmlinuz-$kabi" "$kernel"
    add_runtime_packages "$root"
    make_initrd "$kabi" "$root" "$initrd"
    # The image depends on the root (its package lists) and the stub init.
    local stamp; stamp="$( { sed -n '/^install_stub_init()/,/^}/p' "$0";
                             cat "$root/.vrdma-runtime-packages"; } | sha256sum | cut -c1-16)"
    if [ ! -s "$image" ] || [ "$(cat "$image.stamp" 2>/dev/null)" != "$stamp" ]; then
      make_image "$root" "$image"
      echo "$stamp" >"$image.stamp"
    fi
  fi
  local mod_dir="$cache/module-$kabi" module=""
  if build_module "$kabi" "$mod_dir" && [ -d "$mod_dir" ]; then
    module="$(find "$mod_dir/guest-driver/kernel" -maxdepth 1 -name '*.ko' | head -1)"
  fi
  echo "KABI=$kabi"
  echo "KERNEL=$kernel"
  echo "INITRD=$initrd"
  echo "IMAGE=$image"
  echo "MODULE=$module"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
