#!/bin/sh
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#
# Runs a command as debian/vhost-rdma.service runs its ExecStart, without
# systemd (no test machine here has systemd as PID 1): in a mount namespace
# where everything but the API file systems and RUNTIME_DIR is read-only
# (ProtectSystem=strict), /tmp and /var/tmp private (PrivateTmp), /home and
# /root empty (ProtectHome); then User=/Group= with the user's supplementary
# groups, NoNewPrivileges=yes, an empty CapabilityBoundingSet, UMask= and
# systemd's clean environment (plus RUNTIME_DIRECTORY and any VAR=VALUE
# given). Every step execs: the command keeps this script's pid.
# Not reproduced: the unit's cgroup and seccomp options, LimitMEMLOCK (pass
# it yourself, e.g. `prlimit --memlock=... -- run-as-unit.sh ...`).
#
# Usage: run-as-unit.sh USER GROUP UMASK RUNTIME_DIR [VAR=VALUE...] -- COMMAND [ARG...]
# Needs root (the caller makes RUNTIME_DIR, as systemd does, beforehand).
# RUNTIME_DIR must not be under /tmp, /var/tmp, /home or /root (those are
# replaced in the namespace); the unit's own is /run/vhost-rdma.
# Used by tests/pkg/run-pkg.sh and tests/vm/run-libvirt.sh.
set -e
[ $# -ge 6 ] || { echo "usage: $0 USER GROUP UMASK RUNTIME_DIR [VAR=VALUE...] -- COMMAND [ARG...]" >&2; exit 2; }
case "$4" in
  /*) ;; *) echo "$0: RUNTIME_DIR must be absolute: $4" >&2; exit 2 ;;
esac
case "$4/" in
  /tmp/*|/var/tmp/*|/home/*|/root/*) echo "$0: RUNTIME_DIR $4 would be hidden in the namespace" >&2; exit 2 ;;
esac
exec unshare --mount --propagation private -- /bin/sh -ec '
  user=$1; group=$2; um=$3; rt=$4; shift 4
  mount --bind "$rt" "$rt"
  for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
  for d in /home /root; do [ -d "$d" ] && mount -t tmpfs -o ro,mode=0755 tmpfs "$d"; done
  mount -o remount,bind,ro /
  findmnt -rn -o TARGET | while read -r m; do
    case "$m" in /|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*|"$rt"|/tmp|/var/tmp) continue ;; esac
    mount -o remount,bind,ro "$m" 2>/dev/null || true
  done
  umask "$um"
  cd /  # WorkingDirectory= defaults to / for a system service
  vars=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
  [ "$1" = -- ] && shift
  # shellcheck disable=SC2086  # VAR=VALUE words: no spaces by contract
  exec setpriv --reuid "$user" --regid "$group" --init-groups --no-new-privs \
               --bounding-set -all --inh-caps -all -- \
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/nonexistent USER="$user" LOGNAME="$user" RUNTIME_DIRECTORY="$rt" $vars "$@"
' sh "$@"
