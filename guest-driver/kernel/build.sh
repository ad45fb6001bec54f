#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Builds virtio_rdma.ko for the guest kernel named in KERNEL_VERSION (or $1),
# installing that kernel's headers package first if it is missing, and fails
# on any compiler warning so the module stays warning-free.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
kver=${1:-$(cat "$here/KERNEL_VERSION")}
if [ ! -d "/lib/modules/$kver/build" ]; then
	apt-get install -y --no-install-recommends "linux-headers-$kver"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
make -C "$here" KVER="$kver" modules 2>&1 | tee "$log"
if grep -q 'warning:' "$log"; then
	echo "build.sh: compiler warnings above" >&2
	exit 1
fi
test -f "$here/virtio_rdma.ko"
echo "build.sh: built $here/virtio_rdma.ko for $kver"
