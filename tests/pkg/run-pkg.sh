#!/usr/bin/env bash
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#
# The Debian packages, end to end (docs/operators.md, "The Debian packages"):
#  1. builds vhost-rdma and virtio-rdma-dkms with dpkg-buildpackage from a
#     copy of this checkout (the checkout stays clean);
#  2. lintian: any error or warning fails;
#  3. installs both .debs with apt-get and checks what landed (files,
#     conffiles, the system user, no test binaries);
#  4. systemd-analyze verify on the installed unit (no output allowed);
#  5. runs the daemon as the unit's ExecStart would, without systemd (this
#     machine's PID 1 is not systemd): the unit's User, Group, UMask,
#     RuntimeDirectory(Mode), LimitMEMLOCK, NoNewPrivileges, an empty
#     CapabilityBoundingSet, and ProtectSystem=strict / ProtectHome /
#     PrivateTmp rebuilt in a mount namespace; this script plays the service
#     manager's notify socket (Type=notify, NotifyAccess=main, a shortened
#     watchdog) and checks READY=1, repeated WATCHDOG=1, vrdma-ctl against
#     the control socket, a VM socket's group and mode, STOPPING=1 and a
#     clean exit on SIGTERM;
#  6. DKMS: the module is added, built and installed for the guest kernel
#     (guest-driver/kernel/KERNEL_VERSION; its headers are installed from
#     Debian if missing), and rebuilt by the hook a kernel upgrade runs;
#  7. purges both packages and checks they left nothing behind.
# Not covered without a running systemd: the unit's cgroup and seccomp
# options (DevicePolicy/DeviceAllow, RestrictAddressFamilies,
# SystemCallArchitectures, RestrictNamespaces, Protect{Kernel*,Clock,
# ControlGroups,Hostname}, LockPersonality, RestrictRealtime,
# RestrictSUIDSGID) and the 30 s watchdog itself (the test passes 2 s).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
start=$SECONDS
step() { echo "=== pkg: $1 ($((SECONDS - start)) s)"; }
fail() { echo "run-pkg: FAIL: $*" >&2; exit 1; }

version=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
kver=$(cat "$here/guest-driver/kernel/KERNEL_VERSION")
rt=/run/vhost-rdma
[ -e "$rt" ] && fail "$rt exists: a vhost-rdma daemon may be running here; stop it first"

work=$(mktemp -d "${TMPDIR:-/tmp}/vrdma-pkg.XXXXXX")
chmod 0755 "$work"
notify_dir=$(mktemp -d /run/vrdma-pkgtest.XXXXXX)  # outside PrivateTmp's /tmp
chmod 0755 "$notify_dir"
daemon_pid=""; listener_pid=""; ok=0
purge() {
  local installed=()
  for p in vhost-rdma virtio-rdma-dkms; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed" && installed+=("$p")
  done
  if ((${#installed[@]})); then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get purge -y -qq "${installed[@]}" >>"$work/apt.log" 2>&1
  fi
  return 0
}
cleanup() {
  set +e
  [ -z "$daemon_pid" ] || kill -KILL "$daemon_pid" 2>/dev/null
  [ -z "$listener_pid" ] || kill "$listener_pid" 2>/dev/null
  $SUDO rm -rf "$notify_dir" "$rt"
  purge
  if [ "$ok" = 1 ]; then
    $SUDO rm -rf "$work"
  else
    echo "run-pkg: logs kept in $work" >&2
  fi
}
trap cleanup EXIT
purge  # a previous run that was killed

step "build dependencies"
apt_install() {
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" \
    >>"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; fail "apt-get install $*"; }
}
for p in lintian dpkg-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || apt_install "$p"
done
if ! (cd "$here" && dpkg-checkbuilddeps >/dev/null 2>&1); then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get build-dep -y -qq "$here" >>"$work/apt.log" 2>&1 \
    || { tail -20 "$work/apt.log"; fail "apt-get build-dep"; }
fi

changes="$work/vhost-rdma_${version}_${arch}.changes"
deb="$work/vhost-rdma_${version}_${arch}.deb"
dkms_deb="$work/virtio-rdma-dkms_${version}_all.deb"
if [ -n "${VRDMA_PKG_REUSE:-}" ]; then
  # Debugging the later steps: the packages a kept run directory holds.
  step "reusing the packages in $VRDMA_PKG_REUSE (VRDMA_PKG_REUSE)"
  cp "$VRDMA_PKG_REUSE"/*.deb "$VRDMA_PKG_REUSE"/*.changes "$VRDMA_PKG_REUSE"/*.buildinfo "$work/"
else
  step "dpkg-buildpackage -us -uc -b ($version)"
  src="$work/vhost-rdma-${version}"
  mkdir "$src"
  # The working tree as git sees it (committed, modified and new files, not
  # ignored ones such as build/).
  git -C "$here" ls-files -z --cached --others --exclude-standard |
    tar -C "$here" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$src" -xf -
  t=$SECONDS
  (cd "$src" && DEB_BUILD_OPTIONS="parallel=2 ${DEB_BUILD_OPTIONS:-}" \
    dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || { tail -40 "$work/build.log"; fail "dpkg-buildpackage"; }
  echo "built in $((SECONDS - t)) s:"
fi
ls -l "$deb" "$dkms_deb" | awk '{print "  " $5 " bytes  " $NF}'

step "lintian"
lintian --fail-on error,warning --info "$changes" >"$work/lintian.log" 2>&1 \
  || { cat "$work/lintian.log"; fail "lintian reported errors or warnings"; }
sed 's/^/  /' "$work/lintian.log"
echo "lintian: no errors, no warnings ($(grep -c '^[IP]:' "$work/lintian.log" || true) info/pedantic tags)"

step "apt-get install ./*.deb"
libvirt_qemu_existed=0; getent passwd libvirt-qemu >/dev/null && libvirt_qemu_existed=1
apt_install "$deb" "$dkms_deb"
# Installed files; nothing from the test or benchmark build.
files=$(dpkg -L vhost-rdma virtio-rdma-dkms)
for f in /usr/sbin/vhost-rdma-daemon /usr/bin/vrdma-ctl \
         /lib/systemd/system/vhost-rdma.service /usr/lib/sysusers.d/vhost-rdma.conf \
         /etc/vhost-rdma/vhost-rdma.conf /etc/vhost-rdma/libvirt-hook.conf \
         /etc/libvirt/hooks/qemu.d/vhost-rdma /etc/apparmor.d/abstractions/vhost-rdma-qemu \
         /usr/share/man/man8/vhost-rdma-daemon.8.gz /usr/share/man/man1/vrdma-ctl.1.gz \
         /usr/share/doc/vhost-rdma/operators.md.gz /usr/share/doc/vhost-rdma/copyright \
         "/usr/src/virtio-rdma-$version/dkms.conf" "/usr/src/virtio-rdma-$version/Kbuild" \
         "/usr/src/virtio-rdma-$version/vrdma_main.c" \
         "/usr/src/virtio-rdma-$version/abi/virtio_rdma.h"; do
  grep -qxF "$f" <<<"$files" || fail "$f is not in the packages"
  [ -e "$f" ] || fail "$f is listed but missing"
done
[ -x /etc/libvirt/hooks/qemu.d/vhost-rdma ] || fail "the libvirt hook is not executable"
programs=$(grep -E '^/usr/s?bin/.' <<<"$files" | sort | tr '\n' ' ')
[ "$programs" = "/usr/bin/vrdma-ctl /usr/sbin/vhost-rdma-daemon " ] \
  || fail "programs installed: $programs (expected only vrdma-ctl and vhost-rdma-daemon)"
grep -E '(_test|_benchmark|fuzz_|perftest|isolation-bench)' <<<"$files" \
  && fail "test or benchmark files in the packages"
dpkg-query -W -f='${Conffiles}\n' vhost-rdma | grep -q ' /etc/vhost-rdma/vhost-rdma.conf ' \
  || fail "/etc/vhost-rdma/vhost-rdma.conf is not a conffile"
getent passwd vhost-rdma >/dev/null || fail "no user vhost-rdma"
getent group vhost-rdma >/dev/null || fail "no group vhost-rdma"
if [ "$libvirt_qemu_existed" = 1 ]; then
  id -nG libvirt-qemu | tr ' ' '\n' | grep -qx vhost-rdma \
    || fail "libvirt-qemu was not added to group vhost-rdma"
  echo "libvirt-qemu is in group vhost-rdma"
fi
echo "$(wc -l <<<"$files") paths installed; programs: $programs"
# The conffile names every option of the daemon (set or commented out at
# its default), and the daemon refuses a key it does not know.
conf=/etc/vhost-rdma/vhost-rdma.conf
options=$(vhost-rdma-daemon --help | sed -n 's/^ *\(-[a-z],\)\{0,1\}--\([a-z0-9-]*\).*/\2/p' \
  | grep -vx -e help -e config)
for o in $options; do
  grep -qE "^#?$o = " "$conf" || fail "$conf does not document --$o"
done
printf 'control-socket = "%s/x.sock"\nno-such-option = 1\n' "$work" >"$work/bad.conf"
if vhost-rdma-daemon --config "$work/bad.conf" >"$work/bad.log" 2>&1; then
  fail "the daemon accepted an unknown key in its config file"
fi
grep -q no-such-option "$work/bad.log" || fail "the daemon did not name the unknown key: $(cat "$work/bad.log")"
echo "$conf documents all $(wc -w <<<"$options") options; an unknown key is refused"

step "systemd-analyze verify"
unit=/lib/systemd/system/vhost-rdma.service
systemd-analyze verify --man=no "$unit" >"$work/verify.log" 2>&1 \
  || { cat "$work/verify.log"; fail "systemd-analyze verify"; }
[ ! -s "$work/verify.log" ] || { cat "$work/verify.log"; fail "systemd-analyze verify warned"; }
echo "systemd-analyze verify $unit: clean"

step "the daemon as the unit runs it"
unit_get() {  # the last KEY= of the installed unit, as systemd reads it
  sed -n "s/^$1=//p" "$unit" | tail -1
}
read -r -a exec_start <<<"$(unit_get ExecStart)"
user=$(unit_get User); group=$(unit_get Group); umask_=$(unit_get UMask)
rt_name=$(unit_get RuntimeDirectory); rt_mode=$(unit_get RuntimeDirectoryMode)
[ "$(unit_get Type)" = notify ] || fail "the unit is not Type=notify"
[ "$(unit_get NotifyAccess)" = main ] || fail "the unit is not NotifyAccess=main"
[ -n "$(unit_get WatchdogSec)" ] || fail "the unit has no WatchdogSec"
[ "$(unit_get LimitMEMLOCK)" = infinity ] || fail "the unit has no LimitMEMLOCK=infinity"
[ "$(unit_get NoNewPrivileges)" = yes ] || fail "the unit has no NoNewPrivileges=yes"
[ "$(unit_get CapabilityBoundingSet)" = "" ] && grep -qx 'CapabilityBoundingSet=' "$unit" \
  || fail "the unit's CapabilityBoundingSet is not empty"
[ "/run/$rt_name" = "$rt" ] || fail "RuntimeDirectory=$rt_name, expected vhost-rdma"
control=$(sed -n 's/^control-socket *= *"\(.*\)"/\1/p' /etc/vhost-rdma/vhost-rdma.conf)
[ "$control" = "$rt/control.sock" ] || fail "the conffile's control-socket is $control"
watchdog_usec=2000000  # the unit's 30 s would make this test wait a minute

# LimitMEMLOCK=infinity needs CAP_SYS_RESOURCE to raise the hard limit,
# which PID 1 has; this machine's root may not (CapEff bit 24).
memlock="prlimit --memlock=unlimited:unlimited --"
if (( (0x$(awk '/^CapEff/ {print $2}' /proc/self/status) >> 24 & 1) == 0 )); then
  memlock=""
  echo "LimitMEMLOCK=infinity not reproduced: root here lacks CAP_SYS_RESOURCE" \
       "(memlock stays $(ulimit -l) KiB; the software RNIC pins nothing)"
fi
# What systemd does before ExecStart: the runtime directory, owned by User.
$SUDO install -d -m "$rt_mode" -o "$user" -g "$group" "$rt"
/usr/bin/python3 "$here/tests/pkg/notify_listener.py" "$notify_dir/notify" "$work/notify.log" &
listener_pid=$!
for _ in $(seq 50); do [ -S "$notify_dir/notify" ] && break; sleep 0.1; done
[ -S "$notify_dir/notify" ] || fail "the notify listener did not start"
# The unit's sandbox and identity (tests/lib/run-as-unit.sh, shared with
# run-libvirt.sh), under LimitMEMLOCK. Every exec keeps the pid, so $! is
# the daemon's. WATCHDOG_PID is not set: sd_watchdog_enabled then accepts
# the watchdog for any pid.
t_exec=$(date +%s.%N)
# shellcheck disable=SC2086  # $SUDO and $memlock are words or empty
$SUDO $memlock "$here/tests/lib/run-as-unit.sh" "$user" "$group" "$umask_" "$rt" \
  NOTIFY_SOCKET="$notify_dir/notify" WATCHDOG_USEC="$watchdog_usec" -- "${exec_start[@]}" \
  >"$work/daemon.log" 2>&1 &
daemon_pid=$!
main_pid=$daemon_pid  # daemon_pid is cleared once it exited
notified() {  # lines from the daemon's pid that contain $1
  awk -v pid="$main_pid" -v f="$1" '$2 == pid && index($0, f)' "$work/notify.log"
}
for _ in $(seq 100); do
  [ -n "$(notified READY=1)" ] && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log"; fail "the daemon exited"; }
  sleep 0.1
done
ready=$(notified READY=1)
[ -n "$ready" ] || { cat "$work/daemon.log" "$work/notify.log"; fail "no READY=1 in 10 s"; }
echo "READY=1 from the main pid $daemon_pid, $(awk -v t="$t_exec" '{printf "%.2f", $1 - t}' <<<"$ready") s after exec: ${ready#* * }"
[ -S "$control" ] || fail "no control socket at READY=1"
# The restrictions are in force in the daemon itself.
st=/proc/$main_pid/status
[ "$(awk '/^Uid:/ {print $2}' "$st")" = "$(id -u "$user")" ] || fail "the daemon is not user $user"
[ "$(awk '/^NoNewPrivs:/ {print $2}' "$st")" = 1 ] || fail "the daemon has no NoNewPrivs"
[ "$(awk '/^CapBnd:/ {print $2}' "$st")" = 0000000000000000 ] || fail "the daemon's bounding set is not empty"
mnt_opts() { awk -v m="$1" '$5 == m {o = $6} END {print o}' "/proc/$main_pid/mountinfo"; }
[[ ",$(mnt_opts /)," == *,ro,* ]] || fail "/ is not read-only for the daemon"
[[ ",$(mnt_opts "$rt")," == *,rw,* ]] || fail "$rt is not writable for the daemon"
echo "daemon: uid $user, NoNewPrivs 1, CapBnd 0, / ro, $rt rw, umask $(awk '/^Umask:/ {print $2}' "$st")"
[ "$(stat -c '%U:%G %a' "$rt")" = "$user:$group $(printf '%o' $((8#$rt_mode)))" ] \
  || fail "$rt is $(stat -c '%U:%G %a' "$rt")"
[ "$(stat -c '%U %a' "$control")" = "$user 700" ] \
  || fail "the control socket is $(stat -c '%U %a' "$control"), expected $user 700"
grep -q "systemd watchdog: 2000 ms" "$work/daemon.log" || fail "the daemon did not see the watchdog"

ctl() { vrdma-ctl -s "$control" "$@"; }
ctl vms >"$work/vms0.txt" || fail "vrdma-ctl vms"
ctl attach-vm --name pkg-test --socket "$rt/pkg-test.sock" --gid ::ffff:192.0.2.10 >/dev/null \
  || { cat "$work/daemon.log"; fail "vrdma-ctl attach-vm"; }
[ "$(stat -c '%G %a' "$rt/pkg-test.sock")" = "$group 660" ] \
  || fail "the VM socket is $(stat -c '%G %a' "$rt/pkg-test.sock"), expected $group 660"
ctl vms | tee "$work/vms1.txt" | sed 's/^/  /'
grep -q pkg-test "$work/vms1.txt" || fail "vrdma-ctl vms does not list pkg-test"
# Who reaches what: a user outside the group reaches neither socket.
# Who reaches what (Debian's python3: the one on PATH may be a root-only
# pyenv): a user outside the group reaches neither socket, QEMU's user
# (libvirt-qemu, when libvirt is here) reaches the VM's.
connect_as() {  # USER SETPRIV_GROUP_ARGS... -- SOCKET: prints connected or the error
  local sock=${*: -1}
  setpriv "${@:1:$#-2}" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print(type(e).__name__)' "$sock"
}
for sock in "$control" "$rt/pkg-test.sock"; do
  r=$(connect_as --reuid nobody --regid nogroup --clear-groups -- "$sock")
  [ "$r" = PermissionError ] || fail "user nobody connecting to $sock: $r (expected PermissionError)"
done
if [ "$libvirt_qemu_existed" = 1 ]; then
  r=$(connect_as --reuid libvirt-qemu --regid libvirt-qemu --init-groups -- "$rt/pkg-test.sock")
  [ "$r" = connected ] || fail "libvirt-qemu connecting to the VM socket: $r"
  r=$(connect_as --reuid libvirt-qemu --regid libvirt-qemu --init-groups -- "$control")
  [ "$r" = PermissionError ] || fail "libvirt-qemu connecting to the control socket: $r"
  echo "libvirt-qemu reaches the VM socket, not the control socket; nobody reaches neither"
else
  echo "user nobody reaches neither socket (no libvirt-qemu here to check QEMU's access)"
fi
ctl detach-vm --name pkg-test >/dev/null || fail "vrdma-ctl detach-vm"

# WATCHDOG_USEC/2 = 1 s: wait for four pings (at most 8 s). What systemd
# checks is that no gap reaches WATCHDOG_USEC; the mean shows the period.
for _ in $(seq 80); do
  (($(notified WATCHDOG=1 | wc -l) >= 4)) && break
  sleep 0.1
done
pings=$(notified WATCHDOG=1 | awk '{print $1}')
n=$(grep -c . <<<"$pings" || true)
gaps=$(awk 'NR > 1 {printf "%s%.2f", sep, $1 - p; sep = " "} {p = $1}' <<<"$pings")
echo "WATCHDOG=1: $n pings, gaps $gaps s (WATCHDOG_USEC=$watchdog_usec)"
((n >= 4)) || fail "expected 4 WATCHDOG=1 pings within 8 s"
awk -v usec="$watchdog_usec" 'BEGIN {max = usec / 1e6}
  NR == 1 {first = $1} NR > 1 && $1 - p >= max {late = 1} {p = $1}
  END {mean = (p - first) / (NR - 1); exit late || mean < 0.8 * max / 2 || mean > 1.25 * max / 2}' \
  <<<"$pings" || fail "watchdog pings: a gap reached WATCHDOG_USEC or the mean is not WATCHDOG_USEC/2"

kill -TERM "$daemon_pid"
rc=0; wait "$daemon_pid" || rc=$?
daemon_pid=""
[ "$rc" = 0 ] || { cat "$work/daemon.log"; fail "the daemon exited $rc on SIGTERM"; }
for _ in $(seq 20); do [ -n "$(notified STOPPING=1)" ] && break; sleep 0.1; done  # the listener's turn
[ -n "$(notified STOPPING=1)" ] || fail "no STOPPING=1"
[ ! -e "$control" ] || fail "the daemon left its control socket"
echo "SIGTERM: STOPPING=1, exit 0, control socket removed"
kill "$listener_pid"; listener_pid=""
$SUDO rm -rf "$rt"  # systemd removes the RuntimeDirectory at stop

step "DKMS"
dkms status | sed 's/^/  /'
dkms status -m virtio-rdma -v "$version" | grep -q . || fail "dkms does not know virtio-rdma/$version"
# The package's postinst (dkms's common.postinst) builds for the running
# kernel and the newest one with headers; the guest kernel's headers may
# not be here yet.
if dkms status -m virtio-rdma -v "$version" -k "$kver" | grep -q ': installed'; then
  echo "the package's postinst built and installed it for $kver (its headers are here)"
else
  if [ ! -d "/lib/modules/$kver/build" ]; then
    echo "installing linux-headers-$kver (the guest kernel's)"
    apt_install "linux-headers-$kver"
  fi
  t=$SECONDS
  $SUDO dkms install -m virtio-rdma -v "$version" -k "$kver" >"$work/dkms.log" 2>&1 || {
    tail -40 "$work/dkms.log"
    tail -40 "/var/lib/dkms/virtio-rdma/$version/build/make.log" 2>/dev/null
    fail "dkms install -k $kver"
  }
  echo "dkms built and installed it for $kver in $((SECONDS - t)) s"
fi
# A guest kernel upgrade: the kernel package's postinst runs
# /etc/kernel/postinst.d/dkms with the new version, which must rebuild and
# install the module (AUTOINSTALL). Replayed here for the guest kernel
# after undoing the build.
$SUDO dkms unbuild -m virtio-rdma -v "$version" -k "$kver" >>"$work/dkms.log" 2>&1 \
  || { tail -20 "$work/dkms.log"; fail "dkms unbuild"; }
[ ! -e "/lib/modules/$kver/updates/dkms/virtio_rdma.ko" ] || fail "dkms unbuild left the module"
t=$SECONDS
$SUDO /etc/kernel/postinst.d/dkms "$kver" >>"$work/dkms.log" 2>&1 \
  || { tail -20 "$work/dkms.log"; fail "/etc/kernel/postinst.d/dkms $kver"; }
dkms status -m virtio-rdma -v "$version" -k "$kver" | grep -q ': installed' \
  || { tail -20 "$work/dkms.log"; fail "the kernel's postinst hook did not rebuild the module"; }
echo "kernel postinst hook (/etc/kernel/postinst.d/dkms $kver) rebuilt and installed it in $((SECONDS - t)) s"
ko=$(find "/lib/modules/$kver/updates/dkms" -name 'virtio_rdma.ko*' 2>/dev/null | head -1 || true)
[ -n "$ko" ] || fail "dkms install put no virtio_rdma.ko under /lib/modules/$kver/updates/dkms"
vermagic=$(modinfo -F vermagic "$ko")
[ "${vermagic%% *}" = "$kver" ] || fail "$ko is for ${vermagic%% *}, not $kver"
echo "$ko: vermagic ${vermagic%% *}"
dkms status -m virtio-rdma -v "$version" | sed 's/^/  /'

step "purge"
purge
for p in vhost-rdma virtio-rdma-dkms; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed" && fail "$p is still installed"
done
for f in /etc/vhost-rdma /etc/libvirt/hooks/qemu.d/vhost-rdma "/usr/src/virtio-rdma-$version" \
         "/var/lib/dkms/virtio-rdma" "$ko"; do
  [ ! -e "$f" ] || fail "$f is left after purge"
done
echo "purged: no files left (the system user vhost-rdma stays, as Debian packages leave users)"
ok=1
step "done: packages built, lint-clean, installed, run as the unit, purged"
