# Sourced by run-e2e.sh: starting vhost-rdma-daemon and talking to its JSON
# control socket. Everything daemon-specific for the VM tests is here.
_ctl_py="$(dirname "${BASH_SOURCE[0]}")/daemon_ctl.py"

daemon_start() { # binary rundir [log name, default daemon.log]
  ctl_sock="$2/ctl.sock"
  rm -f "$ctl_sock"
  # shellcheck disable=SC2086 # VRDMA_DAEMON_ARGS is a list of flags
  "$1" --control "$ctl_sock" ${VRDMA_DAEMON_ARGS:-} >"$2/${3:-daemon.log}" 2>&1 &
  daemon_pid=$!
  pids+=("$daemon_pid")
  local i
  for ((i = 0; i < 100; i++)); do
    [ -S "$ctl_sock" ] && return 0
    kill -0 "$daemon_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

daemon_request() { # json; reply in $run/ctl.last
  timeout 20 /usr/bin/python3 "$_ctl_py" "$ctl_sock" request "$1" >"$run/ctl.last" 2>&1
}

# name vhost-user-socket ipv4 [mac [quotas]]: the VM's RoCEv2 GID is
# ::ffff:ipv4; with the MAC of its NIC the device is a RoCE v2 port on that
# NIC. quotas: a JSON object (e.g. {"kernel_verbs":true}, which lets the
# device offer VIRTIO_RDMA_F_KERNEL: docs/virtio-rdma.md §4.8).
daemon_attach() {
  local mac="" quotas=""
  [ -n "${4:-}" ] && mac=",\"mac\":\"$4\""
  [ -n "${5:-}" ] && quotas=",\"quotas\":$5"
  daemon_request "{\"cmd\":\"attach-vm\",\"name\":\"$1\",\"socket\":\"$2\",\"gids\":[\"::ffff:$3\"]$mac$quotas}" ||
    return 1
  grep -q '"error"' "$run/ctl.last" && return 1
  # QEMU connects as the client: the daemon must be listening already.
  local i
  for ((i = 0; i < 50; i++)); do [ -S "$2" ] && return 0; sleep 0.1; done
  return 1
}

daemon_vm_holds() { timeout 20 /usr/bin/python3 "$_ctl_py" "$ctl_sock" holds "$1"; }
daemon_vm_connected() { timeout 20 /usr/bin/python3 "$_ctl_py" "$ctl_sock" connected "$1"; }
daemon_vm_released() { timeout 20 /usr/bin/python3 "$_ctl_py" "$ctl_sock" released "$1"; }
daemon_vm_summary() { timeout 20 /usr/bin/python3 "$_ctl_py" "$ctl_sock" summary "$1" 2>&1; }
