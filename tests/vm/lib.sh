# Sourced by the VM tests (run-e2e.sh, run-verbs.sh): the run directory,
# logging, cleanup of every process started, the cached QEMU and guest
# image, booting a TCG guest with a 9p share, waiting for files.
# Needs: $here (repository root) set by the caller; bash with set -euo pipefail.
cache="${VRDMA_CACHE:-/var/cache/vhost-rdma}"
export VRDMA_CACHE="$cache"
t0=$(date +%s)
vm_tag="${vm_tag:-vm}"
log() { printf '[%s %4ds] %s\n' "$vm_tag" $(($(date +%s) - t0)) "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# vm_run_dir SUBDIR: a fresh run directory $run under $cache/SUBDIR (the last
# five are kept).
vm_run_dir() {
  run="$cache/$1/run-$(date +%Y%m%d-%H%M%S)-$$"
  mkdir -p "$run"
  ls -1dt "$cache/$1"/run-* 2>/dev/null | tail -n +6 | xargs -r rm -rf
  log "run directory: $run"
}

# Every background process goes into pids[]; QEMUs also write $run/qemu-*.pid.
pids=()
vm_cleanup() {
  set +e  # best effort: one failed kill must not skip the others
  local p f
  for f in "$run"/qemu-*.pid; do [ -s "$f" ] && { kill "$(cat "$f")" 2>/dev/null || true; }; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}

# vm_qemu: $qemu, VRDMA_QEMU or scripts/vm-build-qemu.sh's cached build.
vm_qemu() {
  if [ -n "${VRDMA_QEMU:-}" ]; then
    qemu="$VRDMA_QEMU"
  else
    qemu="$(timeout 2400 "$here/scripts/vm-build-qemu.sh")" || die "QEMU build (scripts/vm-build-qemu.sh)"
  fi
  [ -x "$qemu" ] || die "no QEMU binary at $qemu"
  log "  $qemu"
}

# vm_image: KABI, KERNEL, INITRD, IMAGE, MODULE from scripts/vm-build-image.sh.
vm_image() {
  local imgvars
  imgvars="$(timeout 1800 "$here/scripts/vm-build-image.sh")" || die "guest image (scripts/vm-build-image.sh)"
  KABI="" KERNEL="" INITRD="" IMAGE="" MODULE=""
  eval "$imgvars"
  log "  kernel $KABI, module ${MODULE:-<none>}"
}

# vm_boot NAME SECONDS [QEMU args...]: boots a TCG guest in the background
# (pid in pids[] and pid_NAME) with the cached image read-only, 1 GiB of
# shareable RAM and $run/share-NAME as its 9p share (tag vrdma; the image's
# init runs init.sh from it). VRDMA_VM_SMP sets the vCPUs (default 1).
vm_boot() {
  local vm="$1" secs="$2"; shift 2
  timeout "$secs" "$qemu" \
    -L /usr/share/seabios -L /usr/share/qemu \
    -accel tcg -smp "${VRDMA_VM_SMP:-1}" -m 1G -nic none -vga none -display none -monitor none \
    -no-reboot \
    -serial "file:$run/console-$vm.txt" -pidfile "$run/qemu-$vm.pid" \
    -object memory-backend-memfd,id=mem,size=1G,share=on -machine pc,memory-backend=mem \
    -kernel "$KERNEL" -initrd "$INITRD" \
    -append "root=LABEL=vrdmaroot ro console=ttyS0 init=/sbin/vrdma-init quiet" \
    -drive "file=$IMAGE,format=raw,if=virtio,readonly=on" \
    -virtfs "local,path=$run/share-$vm,mount_tag=vrdma,security_model=none,id=fs0" \
    "$@" ${VRDMA_QEMU_ARGS:-} >"$run/qemu-$vm.log" 2>&1 &
  pids+=($!)
  eval "pid_$vm=$!"
}

wait_file() { # path seconds pid-that-must-stay-alive
  local i
  for ((i = 0; i < $2 * 2; i++)); do
    [ -e "$1" ] && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

# check DESCRIPTION COMMAND...: prints PASS/FAIL, counts failures in $fails.
fails=0
check() {
  if "${@:2}"; then printf '  PASS  %s\n' "$1"; else printf '  FAIL  %s\n' "$1"; fails=$((fails + 1)); fi
}
rc_is_zero() { [ "$(cat "$1" 2>/dev/null)" = 0 ]; }
