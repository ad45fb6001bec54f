#!/usr/bin/env bash
# Builds a minimal QEMU 10.0.2 (x86_64-softmmu, TCG, vhost-user, 9p) with the
# vhost-user-rdma-pci device from qemu/*.patch into a cache outside the
# checkout, and reuses the cached binary while the patches are unchanged.
#
# Usage: scripts/vm-build-qemu.sh          prints the path of qemu-system-x86_64
#        (also reachable as $VRDMA_CACHE/qemu-current/qemu-system-x86_64)
# Env:   VRDMA_CACHE (default /var/cache/vhost-rdma)
#
# Source: exactly Debian's qemu_10.0.2+ds.orig.tar.xz from bookworm-backports,
# fetched through apt's deb-src mechanism (the only route this machine has).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${VRDMA_CACHE:-/var/cache/vhost-rdma}"
qemu_version=10.0.2
tarball="qemu_${qemu_version}+ds.orig.tar.xz"
src_root="$cache/qemu-src"
log() { echo "[vm-build-qemu] $*" >&2; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo

# Build dependencies, all from Debian. meson >= 1.5 and python3-pycotap come
# from bookworm-backports (bookworm's meson 1.0 is too old for QEMU 10).
deps=(build-essential pkg-config ninja-build libglib2.0-dev libslirp-dev
      libattr1-dev libcap-ng-dev libfdt-dev zlib1g-dev libpixman-1-dev
      flex bison python3 python3-venv seabios qemu-system-data xz-utils)
backports_deps=(meson python3-pycotap)

ensure_apt_sources() {
  # bookworm-backports (binary + source) and deb-src for it. Idempotent.
  local f=/etc/apt/sources.list.d/vrdma-backports.sources
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ ||
     ! grep -rqsE "^Types:.*deb-src|^deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    log "adding bookworm-backports (deb + deb-src) to $f"
    $SUDO tee "$f" >/dev/null <<'SRC'
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    $SUDO apt-get update -qq
  fi
}

installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == *"ok installed" ]]; }

install_deps() {
  local missing=() p
  for p in "${deps[@]}"; do installed "$p" || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  missing=()
  for p in "${backports_deps[@]}"; do installed "$p" || missing+=("$p"); done
  # meson must be the backports one (>= 1.5).
  if installed meson && dpkg --compare-versions "$(dpkg-query -W -f='${Version}' meson)" lt 1.5; then
    missing+=(meson)
  fi
  if ((${#missing[@]})); then
    log "installing from bookworm-backports: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      -t bookworm-backports "${missing[@]}" >/dev/null
  fi
}

# Fetches exactly $tarball through apt's deb-src mechanism and checks it
# against the sha256 in apt's source index. Some files of the archive answer
# 404 (e.g. several .debian.tar.xz): apt-get source may fail as a whole while
# the one file we need arrived, so the checksum decides.
fetch_tarball() {
  local f="$cache/dl/$tarball" ver sum
  mkdir -p "$cache/dl"
  read -r ver sum < <(apt-cache showsrc qemu 2>/dev/null | awk -v t="$tarball" '
      /^Version:/ {v = $2} /^Checksums-Sha256:/ {c = 1; next} /^[^ ]/ {c = 0}
      c && $3 == t {print v, $1; exit}') || true
  if [ -z "${ver:-}" ]; then
    log "ERROR: no qemu source package with $tarball in apt's deb-src indexes."
    log "       Needs 'deb-src' for bookworm-backports (see ensure_apt_sources) and apt-get update."
    exit 1
  fi
  if [ -s "$f" ] && echo "$sum  $f" | sha256sum -c --quiet >/dev/null 2>&1; then return 0; fi
  log "fetching $tarball (source qemu=$ver) with apt-get source --download-only"
  rm -f "$f"
  (cd "$cache/dl" && timeout 900 apt-get source --download-only -q "qemu=$ver") \
    >"$cache/dl/apt-source.log" 2>&1 || true
  if [ ! -s "$f" ] || ! echo "$sum  $f" | sha256sum -c --quiet >/dev/null 2>&1; then
    tail -5 "$cache/dl/apt-source.log" >&2
    log "ERROR: $tarball is missing or corrupt: the archive did not deliver it (log: $cache/dl/apt-source.log)."
    exit 1
  fi
}

configure_flags=(
  --python=/usr/bin/python3
  --target-list=x86_64-softmmu
  --without-default-features --without-default-devices
  --with-devices-x86_64=vhost-rdma
  --enable-tcg --enable-vhost-user --enable-slirp --enable-virtfs --enable-attr
  --disable-docs --disable-tools --disable-werror --disable-install-blobs
)

# The cache key: the patches, the configure flags and the source tarball.
patch_hash() {
  { cat "$here"/qemu/*.patch; echo "${configure_flags[*]}"; echo "$tarball"; } |
    sha256sum | cut -c1-16
}

main() {
  local h; h="$(patch_hash)"
  local build="$cache/qemu-build-$h"
  local bin="$build/qemu-system-x86_64"
  # Warm path first: no apt, no network.
  if [ -x "$bin" ]; then
    log "reusing $bin (patch hash $h)"
    ln -sfn "$build" "$cache/qemu-current"
    echo "$bin"; return 0
  fi
  ensure_apt_sources
  install_deps
  fetch_tarball
  local src="$src_root-$h"
  rm -rf "$src" && mkdir -p "$src"
  log "extracting $tarball"
  tar -xJf "$cache/dl/$tarball" -C "$src" --strip-components=1
  local p
  for p in "$here"/qemu/*.patch; do
    log "applying $(basename "$p")"
    patch -d "$src" -p1 --forward --quiet < "$p"
  done
  rm -rf "$build" && mkdir -p "$build"
  log "configuring in $build"
  (cd "$build" && timeout 600 "$src/configure" "${configure_flags[@]}" \
      >"$build/configure.log" 2>&1) || { tail -40 "$build/configure.log" >&2; exit 1; }
  log "building qemu-system-x86_64 (a few minutes on 2 cores)"
  (cd "$build" && timeout 1800 ninja qemu-system-x86_64 >"$build/ninja.log" 2>&1) ||
    { tail -40 "$build/ninja.log" >&2; exit 1; }
  # Old builds of other patch revisions are dead weight.
  find "$cache" -maxdepth 1 \( -name 'qemu-build-*' -o -name 'qemu-src-*' \) \
    ! -name "*-$h" -exec rm -rf {} + 2>/dev/null || true
  # A stable path for operators (libvirt's <emulator>).
  ln -sfn "$build" "$cache/qemu-current"
  echo "$bin"
}

# Allow `source`-ing for the helpers (tests) without running main.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
