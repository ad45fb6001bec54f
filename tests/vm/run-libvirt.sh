#!/usr/bin/env bash
# libvirt for real (issue 16, parts 1 and 2): a real libvirtd (Debian's
# libvirt-daemon-system, started here as plain processes: no systemd needed)
# defines and starts two TCG domains made from the XML in docs/operators.md
# (tests/vm/libvirt/vhost-rdma-vm.xml with this run's paths). libvirt's hook
# (scripts/libvirt-hook/vhost-rdma, installed in /etc/libvirt/hooks/qemu.d)
# attaches each VM on vhost-rdma-daemon from the domain's <metadata> at
# prepare and detaches it at release. The daemon runs with the Debian
# package's identity, as debian/vhost-rdma.service runs it
# (tests/lib/run-as-unit.sh): user and group vhost-rdma (made from
# debian/vhost-rdma.sysusers, with libvirt-qemu added to the group as the
# postinst does), UMask 0077, NoNewPrivileges, an empty capability set,
# ProtectSystem=strict/ProtectHome/PrivateTmp, --socket-group vhost-rdma and
# its sockets in a runtime directory of its own, vhost-rdma 0750 (this run's
# stand-in for /run/vhost-rdma). QEMU, run by libvirt as libvirt-qemu, must
# reach its VM socket through group vhost-rdma and must not reach the control
# socket; the hook, run by libvirtd as root, reaches the 0700 control socket;
# the unprivileged daemon follows libvirt read-only through Debian's default
# read-only socket (auth_unix_ro polkit: a system D-Bus is started here when
# none runs, polkitd is D-Bus-activated). The guests run Debian's ib_write_bw
# against each other through the daemon; between two -D runs the test caps
# vm-b with `virsh metadata --live`, and the daemon (--libvirt-uri) must
# apply it within 100 ms and the second run must be capped. Then an invalid
# QoS is refused and visible in stats, vrdma-ctl and the Prometheus metrics
# (checked with promtool); a SIGKILLed daemon, started again, attaches the
# running domains from libvirt by itself; domains with missing or broken
# metadata must not start, and virsh must say why; `virsh shutdown` and
# `virsh destroy` must detach the VMs with no step on the daemon.
# Not reproduced (no systemd as PID 1 here): the unit's cgroup and seccomp
# options and LimitMEMLOCK; AppArmor (not enabled on the test machines).
# The system user and group vhost-rdma, and libvirt-qemu's membership of it,
# are left in place at the end, as Debian leaves a package's system users.
#
# Usage: tests/vm/run-libvirt.sh        (root; installs libvirt if missing)
# Env:   VRDMA_CACHE, VRDMA_QEMU, VRDMA_DAEMON as in run-e2e.sh; VRDMA_CTL
#        (default build/vhost-rdma/daemon/vrdma-ctl); both are copied into
#        the run directory (mode 0755) so that user vhost-rdma can run them
#        wherever they were built; VRDMA_BW_SECONDS
#        (each ib_write_bw -D run, default 6); VRDMA_CAP_BPS (default 2e9).
# A libvirtd that is already running is not touched: the test refuses.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${VRDMA_CACHE:-/var/cache/vhost-rdma}"
export VRDMA_CACHE="$cache"
ns="https://vhost-rdma.org/xmlns/vrdma/1"
bw_seconds="${VRDMA_BW_SECONDS:-6}"
cap_bps="${VRDMA_CAP_BPS:-2000000000}"
virsh=(timeout 60 virsh -c qemu:///system)

t0=$(date +%s)
log() { printf '[libvirt %4ds] %s\n' $(($(date +%s) - t0)) "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (libvirtd, /etc/libvirt/hooks)"

run="$cache/libvirt/run-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$run"
# The daemon (vhost-rdma) and QEMU (libvirt-qemu) traverse these.
chmod 0755 "$cache" "$cache/libvirt" "$run"
# The daemon's runtime directory, as systemd makes /run/vhost-rdma for the
# unit (RuntimeDirectory=, RuntimeDirectoryMode=0750, owned by User=): made
# in step 3, once the user exists.
rt="$run/vhost-rdma"
control="$rt/control.sock"
ls -1dt "$cache"/libvirt/run-* 2>/dev/null | tail -n +6 | xargs -r rm -rf
log "run directory: $run"

hook_dst=/etc/libvirt/hooks/qemu.d/vhost-rdma
hook_conf=/etc/vhost-rdma/libvirt-hook.conf
daemon_pid="" recorder_pid="" libvirtd_started=0 virtlogd_started=0 dbus_pid="" conf_backup=""
cleanup() {
  set +e
  for d in vrdma-lv-a vrdma-lv-b vrdma-lv-nometa vrdma-lv-badqos; do
    virsh -c qemu:///system destroy "$d" >/dev/null 2>&1
    virsh -c qemu:///system undefine "$d" >/dev/null 2>&1
  done
  ((libvirtd_started)) && kill "$(cat "$run/libvirtd.pid" 2>/dev/null)" 2>/dev/null
  ((virtlogd_started)) && kill "$(cat "$run/virtlogd.pid" 2>/dev/null)" 2>/dev/null
  if [ -n "$dbus_pid" ]; then  # after libvirtd; polkitd exits with its bus
    sleep 0.3; kill "$dbus_pid" 2>/dev/null; sleep 0.2
    rm -f /run/dbus/pid /run/dbus/system_bus_socket
  fi
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
  [ -n "$recorder_pid" ] && kill "$recorder_pid" 2>/dev/null
  rm -f "$hook_dst"
  if [ -n "$conf_backup" ]; then mv "$conf_backup" "$hook_conf"; else rm -f "$hook_conf"; fi
  sleep 0.5
}
trap cleanup EXIT

# ---------------------------------------------------------------- builds ---
log "step 1/10: QEMU, guest image, daemon and vrdma-ctl (cached)"
if [ -n "${VRDMA_QEMU:-}" ]; then qemu="$VRDMA_QEMU"; else
  qemu="$(timeout 2400 "$here/scripts/vm-build-qemu.sh")" || die "QEMU build"
fi
imgvars="$(timeout 1800 "$here/scripts/vm-build-image.sh")" || die "guest image"
KABI="" KERNEL="" INITRD="" IMAGE="" MODULE=""
eval "$imgvars"
[ -n "$MODULE" ] && [ -f "$MODULE" ] || die "no guest module (see $cache/module-$KABI/build.log)"
daemon="${VRDMA_DAEMON:-$here/build/vhost-rdma/daemon/vhost-rdma-daemon}"
ctl="${VRDMA_CTL:-$here/build/vhost-rdma/daemon/vrdma-ctl}"
if [ -z "${VRDMA_DAEMON:-}" ] && { [ ! -x "$daemon" ] || [ ! -x "$ctl" ]; }; then
  log "  building the daemon and vrdma-ctl into $here/build"
  { cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build "$here/build" --target vhost-rdma-daemon vrdma-ctl; } >"$run/cmake.log" 2>&1 ||
    { tail -20 "$run/cmake.log" >&2; die "build"; }
fi
"$daemon" --help | grep -q -- --libvirt-uri || die "$daemon was built without libvirt (libvirt-dev)"
"$ctl" libvirt-hook --help >/dev/null 2>&1 || die "$ctl was built without libvirt-hook (libxml2-dev)"
# This run's copies: user vhost-rdma may not reach the build tree (a home
# directory, a 0700 checkout), and a rebuild during the run changes nothing.
install -d -m 0755 "$run/bin"
install -m 0755 "$daemon" "$run/bin/vhost-rdma-daemon"
install -m 0755 "$ctl" "$run/bin/vrdma-ctl"
log "  $daemon and $ctl copied into $run/bin"
daemon="$run/bin/vhost-rdma-daemon" ctl="$run/bin/vrdma-ctl"

# --------------------------------------------------------------- libvirt ---
log "step 2/10: libvirt (Debian's packages), started by this test"
if ! command -v libvirtd >/dev/null || ! command -v virsh >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends \
    libvirt-daemon-system libvirt-clients >"$run/apt.log" 2>&1 || die "apt-get install libvirt"
fi
if ! command -v promtool >/dev/null || ! command -v curl >/dev/null; then
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends \
    prometheus curl >>"$run/apt.log" 2>&1 || die "apt-get install prometheus (promtool) curl"
fi
if timeout 5 virsh -c qemu:///system list >/dev/null 2>&1; then
  die "a libvirtd is already running: stop it (its hooks are read at start only)"
fi
# The package's system user, as its postinst makes it (dh_installsysusers
# runs systemd-sysusers on debian/vhost-rdma.sysusers; it needs no systemd
# as PID 1), and QEMU's user in its group as the postinst adds it (libvirt
# gives QEMU its user's supplementary groups). Left in place at the end.
if ! systemd-sysusers "$here/debian/vhost-rdma.sysusers" >"$run/sysusers.log" 2>&1; then
  getent passwd vhost-rdma >/dev/null || adduser --quiet --system --group --no-create-home \
    --home /nonexistent --gecos "vhost-rdma daemon" vhost-rdma || die "no user vhost-rdma"
fi
getent passwd vhost-rdma >/dev/null && getent group vhost-rdma >/dev/null || die "no user/group vhost-rdma"
adduser --quiet libvirt-qemu vhost-rdma || die "adduser libvirt-qemu vhost-rdma"
log "  $(id vhost-rdma); libvirt-qemu: $(id -Gn libvirt-qemu)"
# Debian's libvirtd asks polkit about read-only clients that are not root
# (auth_unix_ro = "polkit"; org.libvirt.unix.monitor allows any), and
# polkitd answers over the system D-Bus: start one if none runs (polkitd is
# D-Bus-activated and exits with it). systemd runs both on a real host.
if ! dbus-send --system --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetId >/dev/null 2>&1; then
  # A bus that no longer answers and no dbus-daemon: its files are stale.
  pgrep -x dbus-daemon >/dev/null || rm -f /run/dbus/pid /run/dbus/system_bus_socket
  dbus_pid="$(dbus-daemon --system --fork --print-pid)" || die "dbus-daemon --system did not start"
  log "  system D-Bus started (pid $dbus_pid) for polkit"
fi
# The hook: installed before libvirtd starts (libvirt looks for hooks then).
mkdir -p /etc/libvirt/hooks/qemu.d /etc/vhost-rdma
install -m 0755 "$here/scripts/libvirt-hook/vhost-rdma" "$hook_dst"
if [ -e "$hook_conf" ]; then conf_backup="$run/libvirt-hook.conf.orig"; cp -p "$hook_conf" "$conf_backup"; fi
printf 'VRDMA_CONTROL_SOCKET=%s\nVRDMA_CTL=%s\n' "$control" "$ctl" >"$hook_conf"
# The read-write socket: root only, no polkit (virsh and the hook run as
# root, whom libvirt lets past polkit anyway). The read-only socket keeps
# Debian's defaults (0777, auth polkit): the daemon's --libvirt-uri uses it.
cat >"$run/libvirtd.conf" <<CONF
auth_unix_rw = "none"
unix_sock_rw_perms = "0700"
log_outputs = "3:file:$run/libvirtd.log"
CONF
if ! pgrep -x virtlogd >/dev/null; then
  /usr/sbin/virtlogd -d -p "$run/virtlogd.pid" && virtlogd_started=1
fi
/usr/sbin/libvirtd -d -f "$run/libvirtd.conf" -p "$run/libvirtd.pid" || die "libvirtd did not start"
libvirtd_started=1
for ((i = 0; i < 100; i++)); do "${virsh[@]}" list >/dev/null 2>&1 && break; sleep 0.2; done
"${virsh[@]}" list >/dev/null 2>&1 || die "libvirtd does not answer (log: $run/libvirtd.log)"
log "  libvirtd $(libvirtd --version | awk '{print $NF}') running; hook $hook_dst"

# ---------------------------------------------------------------- daemon ---
log "step 3/10: vhost-rdma-daemon as the unit runs it (user vhost-rdma): --policy fair-share --socket-group vhost-rdma --libvirt-uri qemu:///system"
# What systemd does before ExecStart (debian/vhost-rdma.service).
install -d -m 0750 -o vhost-rdma -g vhost-rdma "$rt"
# The daemon shares 2 cores with two busy TCG guests and is off the CPU for
# several ms at a time: fair-share's cap bucket keeps what a VM with work
# waiting was owed meanwhile (policy/rate_bucket.h). tests/vm/README.md.
mport=$((30000 + $$ % 20000))
identity=()  # per start: the daemon's uid, NoNewPrivs, CapBnd, CapEff, umask
daemon_start() { # log-name
  rm -f "$control"
  # User=/Group=/UMask= of the unit, its NoNewPrivileges, empty capability
  # set and file-system sandbox; the rest of the unit's ExecStart options
  # (its conffile's socket-group) plus this test's. $! is the daemon's pid.
  # shellcheck disable=SC2086
  "$here/tests/lib/run-as-unit.sh" vhost-rdma vhost-rdma 0077 "$rt" -- \
    "$daemon" --control-socket "$control" --policy fair-share --socket-group vhost-rdma \
    --libvirt-uri qemu:///system \
    --metrics-address "127.0.0.1:$mport" ${VRDMA_DAEMON_ARGS:-} >"$run/$1" 2>&1 &
  daemon_pid=$!
  local i
  for ((i = 0; i < 100; i++)); do [ -S "$control" ] && break; sleep 0.1; done
  [ -S "$control" ] || die "daemon did not start (log: $run/$1)"
  for ((i = 0; i < 50; i++)); do grep -q "libvirt: following" "$run/$1" && break; sleep 0.1; done
  grep -q "libvirt: following" "$run/$1" || die "the daemon does not follow libvirt: $(tail -3 "$run/$1")"
  local st=/proc/$daemon_pid/status
  identity+=("$(awk '/^Uid:/ {u = $2} /^NoNewPrivs:/ {n = $2} /^CapBnd:/ {b = $2} /^CapEff:/ {e = $2}
    /^Umask:/ {m = $2} END {print u, n, b, e, m}' "$st") $(readlink "/proc/$daemon_pid/exe")")
  log "  daemon pid $daemon_pid: uid NoNewPrivs CapBnd CapEff Umask exe: ${identity[-1]}"
}
daemon_start daemon.log
ctl() { "$ctl" -s "$control" "$@"; }
vm_json() { # name: the VM's stats entry (JSON) or nothing
  ctl --json stats | python3 -c 'import json,sys; n=sys.argv[1]; print(next((json.dumps(v) for v in json.load(sys.stdin)["vms"] if v["name"]==n), ""))' "$1"
}
vm_field() { # name python-expression-on-v
  vm_json "$1" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(eval(sys.argv[1]))' "$2"
}

# --------------------------------------------------------------- domains ---
# Each domain is the documented XML with this run's paths: kernel boot of the
# cached image (read-only), a 9p share for the guest scripts and results, a
# UDP link between the two guests for perftest's TCP exchange.
port_base=$((20000 + $$ % 20000))
make_share() { # vm side ip peer_ip
  local d="$run/share-$1"
  mkdir -p "$d/results"
  cp -r "$here/tests/vm/guest/." "$d/"
  cp "$MODULE" "$d/vrdma.ko"
  printf 'NAME=vm-%s\nROLE=libvirt\nSIDE=%s\nIP=%s\nPEER_IP=%s\nPT_TIMEOUT=120\nRXE=0\nCRASH=0\nBW_SECONDS=%s\n' \
    "$1" "$2" "$3" "$4" "$bw_seconds" >"$d/env"
  chmod -R a+rwX "$d"  # QEMU runs as libvirt-qemu; 9p squash writes as it
}
make_domain() { # vm name gid-ip metadata-mode(ok|none|badqos) local-port peer-port mac
  python3 - "$here/tests/vm/libvirt/vhost-rdma-vm.xml" "$@" "$run" "$qemu" "$KERNEL" "$INITRD" \
    "$IMAGE" "$ns" <<'PY'
import sys, xml.etree.ElementTree as ET
(src, vm, name, ip, mode, lport, pport, mac, run, qemu, kernel, initrd, image, NS) = sys.argv[1:]
Q = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", Q)
ET.register_namespace("vrdma", NS)
d = ET.parse(src).getroot()
d.find("name").text = name
d.find("memory").set("unit", "MiB"); d.find("memory").text = "1024"
d.find("vcpu").text = "1"
os_ = d.find("os")
for b in os_.findall("boot"): os_.remove(b)
for tag, text in (("kernel", kernel), ("initrd", initrd),
                  ("cmdline", "root=LABEL=vrdmaroot ro console=ttyS0 init=/sbin/vrdma-init quiet")):
    ET.SubElement(os_, tag).text = text
for tag, text in (("on_poweroff", "destroy"), ("on_reboot", "destroy"), ("on_crash", "destroy")):
    e = ET.Element(tag); e.text = text; d.insert(list(d).index(d.find("features")) + 1, e)
dev = d.find("devices")
dev.find("emulator").text = qemu
disk = dev.find("disk")
disk.find("driver").set("type", "raw")
disk.find("source").set("file", image)
ET.SubElement(disk, "readonly")
dev.remove(dev.find("interface"))
itf = ET.SubElement(dev, "interface", type="udp")
ET.SubElement(itf, "mac", address=mac)
src_ = ET.SubElement(itf, "source", address="127.0.0.1", port=pport)
ET.SubElement(src_, "local", address="127.0.0.1", port=lport)
ET.SubElement(itf, "model", type="virtio")
ET.SubElement(itf, "rom", enabled="no")
dev.remove(dev.find("serial"))
ser = ET.SubElement(dev, "serial", type="file")
ET.SubElement(ser, "source", path=f"{run}/console-{vm}.txt")
fs = ET.SubElement(dev, "filesystem", type="mount", accessmode="squash")
ET.SubElement(fs, "source", dir=f"{run}/share-{vm}")
ET.SubElement(fs, "target", dir="vrdma")
for a in d.iter(f"{{{Q}}}arg"):
    v = a.get("value")
    if v.startswith("socket,id=vrdma0,"):
        a.set("value", f"socket,id=vrdma0,path={run}/vhost-rdma/{name}.sock,reconnect-ms=500")
md = d.find("metadata")
meta = md.find(f"{{{NS}}}vrdma")
for g in meta.findall(f"{{{NS}}}gid"): g.text = f"::ffff:{ip}"
for m in meta.findall(f"{{{NS}}}mac"): m.text = mac  # RoCE v2 on this NIC
qos = meta.find(f"{{{NS}}}qos")
qos.attrib.clear()
qos.set("weight", "2")  # and no cap: the first run is uncapped
if mode == "none":
    d.remove(md)
elif mode == "badqos":
    qos.set("weight", "0")
ET.ElementTree(d).write(sys.stdout, encoding="unicode")
PY
}

log "step 4/10: domains with missing or broken metadata must not start"
start_refused() { # domain-name expected-text-in-virsh's-error
  local out rc=0
  out="$("${virsh[@]}" start "$1" 2>&1)" || rc=$?
  echo "$out" >"$run/start-$1.txt"
  log "  virsh start $1 -> rc $rc: $(echo "$out" | grep -o 'vhost-rdma: .*' | head -1)"
  ((rc != 0)) && grep -q -- "$2" <<<"$out" && [ -z "$(vm_json "$1")" ] &&
    ! "${virsh[@]}" domstate "$1" 2>/dev/null | grep -q running
}
make_share x server "" ""
make_domain x vrdma-lv-nometa 10.77.0.9 none 1 2 52:54:00:77:00:09 >"$run/vrdma-lv-nometa.xml"
make_domain x vrdma-lv-badqos 10.77.0.9 badqos 1 2 52:54:00:77:00:09 >"$run/vrdma-lv-badqos.xml"
refused_nometa=0 refused_badqos=0
"${virsh[@]}" define "$run/vrdma-lv-nometa.xml" >/dev/null || die "virsh define (no metadata)"
"${virsh[@]}" define "$run/vrdma-lv-badqos.xml" >/dev/null || die "virsh define (bad qos)"
start_refused vrdma-lv-nometa "no <metadata> element in $ns" && refused_nometa=1
start_refused vrdma-lv-badqos "qos.weight" && refused_badqos=1

log "step 5/10: define and start vm-a and vm-b (booting in parallel)"
make_share a server 10.77.0.1 10.77.0.2
make_share b client 10.77.0.2 10.77.0.1
make_domain a vrdma-lv-a 10.77.0.1 ok $port_base $((port_base + 1)) 52:54:00:77:00:01 >"$run/vrdma-lv-a.xml"
make_domain b vrdma-lv-b 10.77.0.2 ok $((port_base + 1)) $port_base 52:54:00:77:00:02 >"$run/vrdma-lv-b.xml"
for v in a b; do
  "${virsh[@]}" define "$run/vrdma-lv-$v.xml" >/dev/null || die "virsh define vrdma-lv-$v"
  "${virsh[@]}" start "vrdma-lv-$v" >"$run/start-vrdma-lv-$v.txt" 2>&1 ||
    die "virsh start vrdma-lv-$v: $(cat "$run/start-vrdma-lv-$v.txt")"
done
both_connected() {  # waits up to 20 s for both domains' devices; prints 1 or 0
  local i
  for ((i = 0; i < 100; i++)); do
    [ "$(vm_field vrdma-lv-a 'v["connected"]' 2>/dev/null)" = True ] &&
      [ "$(vm_field vrdma-lv-b 'v["connected"]' 2>/dev/null)" = True ] && { echo 1; return; }
    sleep 0.2
  done
  echo 0
}
attached=$(both_connected)
qemu_pid="$(pgrep -f 'guest=vrdma-lv-a' | head -1 || true)"
qemu_ids=""  # QEMU's user, group and supplementary groups, by name
if [ -n "$qemu_pid" ]; then
  qemu_ids="$(awk '/^Uid:/ {print $2} /^Gid:/ {print $2} /^Groups:/ {$1 = ""; print}' "/proc/$qemu_pid/status" |
    { read -r u; read -r g; read -r gs
      printf '%s %s ' "$(getent passwd "$u" | cut -d: -f1)" "$(getent group "$g" | cut -d: -f1)"
      for x in $gs; do getent group "$x" | cut -d: -f1; done | paste -sd,; })"
fi
log "  attached by the hook, QEMU (user group groups: ${qemu_ids:-?}) connected: $attached"
sock_mode="$(stat -c '%a %G' "$rt/vrdma-lv-a.sock" 2>/dev/null || true)"
rt_mode="$(stat -c '%U:%G %a' "$rt")" control_mode="$(stat -c '%U %a' "$control")"
# Who reaches what, with QEMU's own credentials (its uid, gid and the groups
# libvirt gave it): write permission on a socket and search permission on
# its directories is what connect(2) needs; test -w asks exactly that
# without opening a second vhost-user connection.
qemu_creds=()
if [ -n "$qemu_pid" ]; then
  qemu_creds=(--reuid "$(awk '/^Uid:/ {print $2}' "/proc/$qemu_pid/status")"
    --regid "$(awk '/^Gid:/ {print $2}' "/proc/$qemu_pid/status")"
    --groups "$(awk '/^Groups:/ {$1 = ""; gsub(/^ +| +$/, ""); gsub(/ +/, ","); print}' "/proc/$qemu_pid/status")")
fi
reach() { # setpriv-credentials... -- path: yes or no
  setpriv "${@:1:$#-2}" --inh-caps -all --bounding-set -all -- /usr/bin/test -w "${*: -1}" && echo yes || echo no
}
qemu_vm_sock="$(reach "${qemu_creds[@]}" -- "$rt/vrdma-lv-a.sock")"
qemu_control="$(reach "${qemu_creds[@]}" -- "$control")"
nobody_vm_sock="$(reach --reuid nobody --regid nogroup --clear-groups -- "$rt/vrdma-lv-a.sock")"
nobody_control="$(reach --reuid nobody --regid nogroup --clear-groups -- "$control")"
log "  $rt: $rt_mode; control socket: $control_mode; QEMU's credentials reach the VM socket: $qemu_vm_sock, the control socket: $qemu_control; nobody: $nobody_vm_sock, $nobody_control"
initial_qos="$(vm_field vrdma-lv-b 'json.dumps(v["qos"])' 2>/dev/null || true)"
log "  vrdma-lv-a.sock: $sock_mode; vrdma-lv-b qos from the metadata: $initial_qos"

# ------------------------------------------------------------ QoS, live ----
wait_file() { # path seconds
  local i; for ((i = 0; i < $2 * 5; i++)); do [ -e "$1" ] && return 0; sleep 0.2; done; return 1
}
# Per-VM throughput and latency over time, from the metrics, for the plot.
/usr/bin/python3 "$here/scripts/vrdma-metrics-plot.py" record "http://127.0.0.1:$mport/metrics" \
  "$run/metrics.jsonl" --interval 0.5 2>"$run/metrics-record.log" &
recorder_pid=$!
log "step 6/10: ib_write_bw -D $bw_seconds, uncapped"
wait_file "$run/share-b/results/bw1.rc" 300 || die "vm-b's first ib_write_bw did not end (console $run/console-b.txt, $run/share-b/results/)"

log "step 7/10: virsh metadata --live caps vrdma-lv-b at $cap_bps bps"
t_set0=$(date +%s%3N)
"${virsh[@]}" metadata vrdma-lv-b --uri "$ns" --key vrdma --live \
  --set "<qos max_rate_bps=\"$cap_bps\"/>" >"$run/metadata-set.txt" 2>&1 || die "virsh metadata --set: $(cat "$run/metadata-set.txt")"
t_set1=$(date +%s%3N)
in_force=0
for ((i = 0; i < 100; i++)); do
  [ "$(vm_field vrdma-lv-b 'v["qos"]["max_rate_bps"]')" = "$cap_bps" ] && { in_force=1; break; }
  sleep 0.05
done
# When the daemon had it in force (stats' qos_change.unix_ms; polling stats
# from here under two busy TCG guests takes longer than the change itself).
t_force="$(vm_field vrdma-lv-b 'v["qos_change"]["unix_ms"]')"
virsh_ms=$((t_set1 - t_set0))
after_virsh_ms=$((t_force - t_set1))
daemon_ms="$(grep -o 'in force [0-9.]* ms after the event' "$run/daemon.log" | tail -1 | awk '{print $3}')"
log "  in force: $in_force; virsh metadata took ${virsh_ms} ms; in force ${after_virsh_ms} ms after virsh returned, $((t_force - t_set0)) ms after it started; ${daemon_ms:-?} ms after libvirt's event reached the daemon"
readback="$("${virsh[@]}" metadata vrdma-lv-b --uri "$ns" --key vrdma --live 2>&1 || true)"
log "  virsh metadata (read back): $readback"
touch "$run/share-b/go2"
# vrdma-ctl top through the capped run: one JSON line of rates per second.
ctl --json top --interval 1 --count 15 >"$run/ctl-top.jsonl" 2>&1 &
top_pid=$!
log "  ib_write_bw -D $bw_seconds, capped"
wait_file "$run/share-b/results/bw2.rc" 300 || die "vm-b's second ib_write_bw did not end"
kill "$recorder_pid" 2>/dev/null; wait "$recorder_pid" 2>/dev/null || true
kill "$top_pid" 2>/dev/null; wait "$top_pid" 2>/dev/null || true
top_peak="$(python3 -c '
import json, sys
peak = 0.0
for line in open(sys.argv[1]):
    try:
        peak = max(peak, *[v["gbps"] for v in json.loads(line)["vms"] if v["name"] == "vrdma-lv-b"])
    except (ValueError, KeyError, TypeError):
        pass
print(round(peak, 3))' "$run/ctl-top.jsonl" 2>/dev/null || echo 0)"
log "  vrdma-ctl top: vrdma-lv-b peaked at $top_peak Gb/s in a 1 s interval (cap $cap_bps b/s)"
recorder_pid=""
/usr/bin/python3 "$here/scripts/vrdma-metrics-plot.py" plot "$run/metrics.jsonl" "$run/qos-change.png" \
  --mark "$((t_set1 / 1000)).$((t_set1 % 1000)):virsh metadata max_rate_bps=$cap_bps" \
  --title "run-libvirt.sh: vrdma-lv-b capped live (TCG guests, software RNIC)" \
  >"$run/plot.log" 2>&1 || log "  plot failed: $(tail -2 "$run/plot.log")"
log "  plot: $run/qos-change.png"

log "step 8/10: an invalid QoS through virsh is refused, the cap stays"
"${virsh[@]}" metadata vrdma-lv-b --uri "$ns" --key vrdma --live --set '<qos weight="0"/>' >/dev/null 2>&1 ||
  die "virsh metadata --set (invalid)"
rejected=0
for ((i = 0; i < 200; i++)); do
  [ "$(vm_field vrdma-lv-b 'v["qos_rejections"]')" = 1 ] && { rejected=1; break; }
  sleep 0.01
done
rejection="$(vm_field vrdma-lv-b 'json.dumps(v["qos_change"])')"
cap_kept="$(vm_field vrdma-lv-b 'v["qos"]["max_rate_bps"]')"
log "  rejected: $rejected: $rejection; max_rate_bps now $cap_kept"
wait_file "$run/share-a/results/waiting-for-power-button" 120 || true
wait_file "$run/share-b/results/waiting-for-power-button" 120 || true

log "  metrics: scrape http://127.0.0.1:$mport/metrics, promtool check metrics"
curl -s -m 10 "http://127.0.0.1:$mport/metrics" >"$run/metrics.prom" || true
promtool_ok=0
promtool check metrics <"$run/metrics.prom" >"$run/promtool.txt" 2>&1 && [ -s "$run/metrics.prom" ] && promtool_ok=1
metric() { awk -v m="$1" 'index($0, m " ") == 1 {print $2}' "$run/metrics.prom"; }
m_cap="$(metric 'vrdma_vm_qos{vm="vrdma-lv-b",field="max_rate_bps"}')"
m_bytes="$(metric 'vrdma_vm_completed_bytes_total{vm="vrdma-lv-b"}')"
m_rej="$(metric 'vrdma_vm_qos_rejections_total{vm="vrdma-lv-b"}')"
m_hist="$(metric 'vrdma_vm_completion_latency_seconds_count{vm="vrdma-lv-b"}')"
m_wrs="$(metric 'vrdma_vm_wrs_completed_total{vm="vrdma-lv-b"}')"
m_cqes="$(metric 'vrdma_vm_cqes_written_total{vm="vrdma-lv-b"}')"
m_ok="$(metric 'vrdma_vm_completions_total{vm="vrdma-lv-b",status="success"}')"
m_by_status="$(awk 'index($0, "vrdma_vm_completions_total{vm=\"vrdma-lv-b\",") == 1 {s += $2} END {print s + 0}' "$run/metrics.prom")"
log "  $(wc -l <"$run/metrics.prom") lines; promtool: $promtool_ok; vrdma-lv-b cap $m_cap, completed bytes $m_bytes, QoS refusals $m_rej, latency histogram count $m_hist of $m_wrs WRs, completions $m_by_status by status ($m_ok success) of $m_cqes CQEs"
grep 'vrdma_vm_completion_latency_seconds_bucket{vm="vrdma-lv-b"' "$run/metrics.prom" |
  awk '{print $2}' | paste -sd' ' | sed 's/^/    cumulative buckets (<1us, <2us, ... <4.19s, +Inf): /' >&2
ctl vms | tee "$run/ctl-vms.txt" >&2
ctl qos vrdma-lv-b | tee "$run/ctl-qos.txt" >&2

log "step 9/10: SIGKILL the daemon and start it again: it attaches the running domains from libvirt"
kill -9 "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
daemon_start daemon-restarted.log
reattached=$(both_connected)
weight_after="$(vm_field vrdma-lv-b 'v["qos"]["weight"]' 2>/dev/null || true)"
log "  both attached again and QEMU reconnected: $reattached; vrdma-lv-b weight $weight_after (its live <qos weight=0/> refused, the definition's used)"
grep "libvirt:" "$run/daemon-restarted.log" | sed 's/^/    /' >&2

log "step 10/10: virsh shutdown vrdma-lv-a (ACPI), virsh destroy vrdma-lv-b"
# The guest handles the power button once its role waits for it.
sleep 1
"${virsh[@]}" shutdown vrdma-lv-a >"$run/shutdown.txt" 2>&1 || log "  virsh shutdown: $(cat "$run/shutdown.txt")"
"${virsh[@]}" destroy vrdma-lv-b >"$run/destroy.txt" 2>&1 || log "  virsh destroy: $(cat "$run/destroy.txt")"
shut_off=0
for ((i = 0; i < 300; i++)); do
  "${virsh[@]}" domstate vrdma-lv-a 2>/dev/null | grep -q "shut off" && { shut_off=1; break; }
  sleep 0.2
done
detached=0
for ((i = 0; i < 50; i++)); do
  [ "$(ctl list-vms | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["vms"]))')" = 0 ] &&
    { detached=1; break; }
  sleep 0.2
done
restarted=0
"${virsh[@]}" start vrdma-lv-b >/dev/null 2>&1 && [ -n "$(vm_json vrdma-lv-b)" ] && restarted=1
"${virsh[@]}" destroy vrdma-lv-b >/dev/null 2>&1 || true

# --------------------------------------------------------------- checks ----
fails=0
check() { if "${@:2}"; then printf '  PASS  %s\n' "$1"; else printf '  FAIL  %s\n' "$1"; fails=$((fails + 1)); fi; }
bw() { # results file: BW average [MB/sec] of the result row
  awk '/#bytes/ {h = 1; next} h && /^ *[0-9]+ +[0-9]+ +[0-9.]+/ {print $4; exit}' "$1" 2>/dev/null
}
bw1="$(bw "$run/share-b/results/bw1.out")" bw2="$(bw "$run/share-b/results/bw2.out")"
cap_mbs="$(python3 -c "print(round($cap_bps / 8 / 1048576, 1))")"  # perftest's MB is 2^20 bytes
echo
echo "ib_write_bw -D $bw_seconds from vm-b to vm-a (BW average in perftest's MB/s = MiB/s; TCG guests, software RNIC):"
echo "  before the cap: ${bw1:-none}   after virsh metadata max_rate_bps=$cap_bps (${cap_mbs} MiB/s): ${bw2:-none}"
echo
check "virsh start of a domain without vrdma metadata fails and says why" test "$refused_nometa" = 1
check "virsh start of a domain with weight=0 in its metadata fails with the daemon's reason" test "$refused_badqos" = 1
vr_uid="$(id -u vhost-rdma)"
check "the daemon ran as the unit runs it: user vhost-rdma, NoNewPrivs, no capabilities, umask 0077" \
  test "${identity[0]:-}" = "$vr_uid 1 0000000000000000 0000000000000000 0077 $daemon"
check "the restarted daemon (step 9) ran with the same identity" test "${identity[1]:-}" = "${identity[0]:-x}"
check "its runtime directory is vhost-rdma:vhost-rdma 0750, its control socket vhost-rdma 0700" \
  test "$rt_mode/$control_mode" = "vhost-rdma:vhost-rdma 750/vhost-rdma 700"
check "the hook (run by libvirtd as root) attached vm-a and vm-b and their QEMUs connected" test "$attached" = 1
check "QEMU ran as libvirt-qemu with group vhost-rdma among its groups" \
  python3 -c 'import sys; f = sys.argv[1].split(); sys.exit(not (len(f) == 3 and f[0] == "libvirt-qemu" and "vhost-rdma" in f[2].split(",")))' "$qemu_ids"
check "VM sockets are mode 660, group vhost-rdma" test "$sock_mode" = "660 vhost-rdma"
check "QEMU's credentials reach its VM socket but not the control socket" \
  test "$qemu_vm_sock/$qemu_control" = "yes/no"
check "user nobody reaches neither socket" test "$nobody_vm_sock/$nobody_control" = "no/no"
check "vm-b's initial QoS came from its metadata (weight 2)" grep -q '"weight": 2' <<<"$initial_qos"
for v in a b; do
  check "vm-$v: <vrdma:mac> made vrdma0 a RoCE v2 port on its NIC (link layer Ethernet)" \
    grep -q "link_layer:.*Ethernet" "$run/share-$v/results/ibv_devinfo.txt"
done
for t in bw1 bw2; do
  for v in a b; do check "vm-$v $t (ib_write_bw) exit code 0" test "$(cat "$run/share-$v/results/$t.rc" 2>/dev/null)" = 0; done
done
check "virsh metadata --live: the cap in force within 100 ms of virsh returning" \
  test "$in_force" = 1 -a "$after_virsh_ms" -le 100
check "the daemon applied it within 100 ms of libvirt's event" \
  python3 -c "import sys; sys.exit(not (0 <= float('${daemon_ms:-999}') <= 100))"
check "virsh metadata without --set reads the cap back" grep -q "max_rate_bps=\"$cap_bps\"" <<<"$readback"
check "the capped run is at most 110% of the cap" python3 -c "import sys; sys.exit(not (0 < float('${bw2:-0}') <= 1.10 * $cap_mbs))"
check "the capped run is under half the uncapped run" python3 -c "import sys; sys.exit(not (0 < float('${bw2:-0}') < 0.5 * float('${bw1:-0}')))"
# The floor is loose on purpose: with the CPUs to itself the capped run read
# 1.00 of the cap, with three other VMs and builds on the two cores (load 13)
# 0.77; fair-share's default 1 ms bucket read 0.50 (tests/vm/README.md).
check "the capped run reaches at least 60% of the cap ($(python3 -c "print(round(float('${bw2:-0}') / $cap_mbs, 2))"))" \
  python3 -c "import sys; sys.exit(not (float('${bw2:-0}') >= 0.6 * $cap_mbs))"
check "an invalid QoS (weight 0) from virsh is refused, recorded with its reason" \
  test "$rejected" = 1 -a -n "$(grep -o 'qos.weight' <<<"$rejection")"
check "after the refusal the cap stays in force" test "$cap_kept" = "$cap_bps"
check "the daemon logged the refusal" grep -q "qos from libvirt refused" "$run/daemon.log"
check "metrics scraped and promtool check metrics passes" test "$promtool_ok" = 1
check "metrics: vrdma-lv-b's cap and its completed bytes" \
  python3 -c "import sys; sys.exit(not (float('${m_cap:-0}') == $cap_bps and float('${m_bytes:-0}') > 0))"
check "metrics: vrdma-lv-b's refused QoS counted" test "${m_rej:-}" = 1
check "metrics: the latency histogram counts every completed WR of vrdma-lv-b" \
  test -n "$m_hist" -a "${m_hist:-x}" = "${m_wrs:-y}" -a "${m_hist:-0}" != 0
check "metrics: vrdma-lv-b's completions by status add up to its CQEs, successes among them" \
  test -n "$m_ok" -a "${m_ok:-0}" != 0 -a "$m_by_status" = "${m_cqes:-x}"
check "a plot of throughput over time was made from the metrics ($run/qos-change.png)" \
  test "$(stat -c %s "$run/qos-change.png" 2>/dev/null || echo 0)" -gt 10000
check "vrdma-ctl top saw vrdma-lv-b's capped traffic (peak 1 s interval within 0-125% of the cap)" \
  python3 -c "import sys; sys.exit(not (0 < float('${top_peak:-0}') <= 1.25 * $cap_bps / 1e9))"
check "vrdma-ctl top gave latency percentiles (p99 bucket bound)" \
  grep -q '"latency_p99_le_us":[0-9"]' "$run/ctl-top.jsonl"
check "vrdma-ctl qos shows the refusal" grep -q "from libvirt: REFUSED, qos.weight" "$run/ctl-qos.txt"
check "a restarted daemon attached both running domains from libvirt; QEMU reconnected" test "$reattached" = 1
check "after the restart vrdma-lv-b has its definition's QoS (its live one is refused)" test "$weight_after" = 2
check "vm-a's guest saw the ACPI power button (virsh shutdown)" test -e "$run/share-a/results/power-button.seen"
check "vrdma-lv-a is shut off after virsh shutdown" test "$shut_off" = 1
check "after shutdown and destroy the hook detached both VMs" test "$detached" = 1
check "a destroyed domain starts again (attached afresh)" test "$restarted" = 1
if ((fails)); then
  log "FAILED: $fails check(s). Logs: $run (daemon.log, libvirtd.log, console-*.txt, share-*/results)"
  exit 1
fi
log "PASSED in $(($(date +%s) - t0)) s (run directory $run)"
