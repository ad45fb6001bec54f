# Sourced by server.sh and client.sh when the port is RoCE: NVMe over RDMA,
# the kernel consumer of docs/virtio-rdma.md §4.8 (on vrdma0: kernel QPs
# with the local DMA lkey, fast-registration MRs, REG_MR, LOCAL_INV and
# SEND_WITH_INV; on Soft-RoCE the same through rdma_rxe).
#
# vm-a (server) exports a RAM disk (brd, 32 MiB: it stores what is written;
# plain null_blk would discard it) through nvmet's configfs on an rdma port
# (its IPv4 address, 4420). vm-b (client) connects with nvme-cli, writes a
# random 16 MiB pattern with O_DIRECT 1 MiB writes (nvme-rdma registers an
# MR per I/O), reads it back with 128 KiB reads and compares; then 1 MiB in
# 4 KiB writes and reads at 16 MiB (inline writes, small MRs), the first
# region once more, and disconnects. It then tells vm-a over TCP (port
# 4421; nothing of RDMA) its result and the patterns' checksums; vm-a
# checks that its RAM disk holds exactly those bytes and takes the target
# down.
# Results: nvme.out/.rc (client), nvme_target.out/.rc (server); one line
# per step, "step <name> rc=<rc> <seconds>s", which run-e2e.sh checks; on a
# failure the kernel log's tail follows.
NVME_NQN=nqn.2026-11.io.vhost-rdma:e2e-nvme
NVME_HOSTNQN=nqn.2026-11.io.vhost-rdma:e2e-host-$NAME
NVME_PORT=4420
NVME_SYNC_PORT=4421
NVME_TIMEOUT=${NVME_TIMEOUT:-600}
NVME_BIG=16        # MiB written with 1 MiB I/Os, read with 128 KiB
NVME_SMALL_AT=4096 # 4 KiB blocks: the small-I/O region starts at 16 MiB

# vrdma0's virtio features, and whether VIRTIO_RDMA_F_KERNEL (bit 5) is on.
nvme_features() {
  for d in /sys/bus/virtio/devices/*; do
    [ "$(cat $d/device)" = 0x002a ] || continue
    f=$(cat $d/features)
    echo "virtio-rdma features $f, VIRTIO_RDMA_F_KERNEL $(echo $f | cut -c6)"
  done
  # The driver logs the first kernel WQEs and CQEs (not the GSI QP's).
  t=/sys/module/virtio_rdma/parameters/trace_kverbs
  [ -w $t ] && echo ${NVME_TRACE:-150} >$t
}

# No transport error on the way: nvme-rdma recovers from one quietly
# (error recovery, reconnect, the I/O requeued), so data alone would not
# show it. PATTERN: what this side's kernel logs then; also any kernel
# warning, and the driver's failed-CQE line ("kqp <qpn>: CQE ...").
nvme_clean_log() {
  bad=$(dmesg | grep -E "$1|WARNING:|BUG:|kqp 0x[0-9a-f]*: CQE")
  [ -z "$bad" ] || { echo "$bad" | head -20; return 1; }
}

nvme_dump() { # after a failure: the kernel's view, then its log
  echo "--- rdma res"
  rdma res show qp 2>&1 | tail -8
  rdma res show mr 2>&1 | tail -4
  echo "--- dmesg"
  dmesg | grep -v "^\[ *[0-9.]*\] \(evm\|ACPI\|x86\|Freeing\|input\|clk\)" | tail -${1:-60}
}

# step NAME CMD...: runs CMD, prints its result line, remembers a failure.
nvme_step() {
  name=$1; shift
  t=$(date +%s)
  "$@"
  rc=$?
  echo "step $name rc=$rc $(($(date +%s) - t))s"
  [ $rc = 0 ] || nvme_failed=1
  return $rc
}

nvme_configfs() { # the nvmet subsystem, namespace and port
  N=/sys/kernel/config/nvmet
  mkdir $N/subsystems/$NVME_NQN &&
    echo 1 >$N/subsystems/$NVME_NQN/attr_allow_any_host &&
    mkdir $N/subsystems/$NVME_NQN/namespaces/1 &&
    echo -n /dev/ram0 >$N/subsystems/$NVME_NQN/namespaces/1/device_path &&
    echo 1 >$N/subsystems/$NVME_NQN/namespaces/1/enable &&
    mkdir $N/ports/1 &&
    echo rdma >$N/ports/1/addr_trtype &&
    echo ipv4 >$N/ports/1/addr_adrfam &&
    echo "$IP" >$N/ports/1/addr_traddr &&
    echo $NVME_PORT >$N/ports/1/addr_trsvcid &&
    ln -s $N/subsystems/$NVME_NQN $N/ports/1/subsystems/$NVME_NQN
}

nvme_unconfigure() {
  N=/sys/kernel/config/nvmet
  rm -f $N/ports/1/subsystems/$NVME_NQN
  rmdir $N/ports/1 $N/subsystems/$NVME_NQN/namespaces/1 $N/subsystems/$NVME_NQN
}

nvme_target() {
  nvme_failed=0
  {
    nvme_features
    nvme_step modules modprobe -a configfs nvmet nvmet-rdma
    nvme_step brd modprobe brd rd_nr=1 rd_size=32768
    mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
    nvme_step configfs nvme_configfs
    echo "port 1: $(cat /sys/kernel/config/nvmet/ports/1/addr_trtype 2>/dev/null)" \
      "$(cat /sys/kernel/config/nvmet/ports/1/addr_traddr 2>/dev/null):$NVME_PORT"
    dmesg | grep -i nvmet | tail -3
    # The client's verdict and checksums: "done <rc> <sha big> <sha small>".
    msg=$(timeout $NVME_TIMEOUT perl -MIO::Socket::INET -e '
      my $s = IO::Socket::INET->new(LocalPort => shift, Listen => 1, ReuseAddr => 1)
        or die "listen: $!\n";
      my $c = $s->accept or die "accept: $!\n";
      print scalar <$c>;' $NVME_SYNC_PORT)
    echo "client says: $msg"
    set -- $msg
    [ "$1" = done ] && [ "$2" = 0 ] || nvme_failed=1
    big=$(dd if=/dev/ram0 bs=1M count=$NVME_BIG iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
    small=$(dd if=/dev/ram0 bs=4k skip=$NVME_SMALL_AT count=256 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
    nvme_step ramdisk_holds_data test "$big $small" = "$3 $4"
    nvme_step no_transport_errors nvme_clean_log "nvmet.*(fatal error|failed with status)"
    nvme_step unconfigure nvme_unconfigure
    [ $nvme_failed = 0 ] || nvme_dump 200
  } </dev/null >$R/nvme_target.out 2>&1
  echo $nvme_failed >$R/nvme_target.rc
}

nvme_connect() { # retried while vm-a's target is not listening yet
  n=0
  while :; do
    n=$((n + 1))
    t=$(date +%s)
    timeout 120 nvme connect -t rdma -a "$PEER_IP" -s $NVME_PORT -n $NVME_NQN \
      -q $NVME_HOSTNQN -l 30 -c 2 && { echo "connected (try $n)"; return 0; }
    # A target not listening yet answers at once (REJ); a try that took
    # long got through to it and failed (the NVMe Connect timed out).
    [ $n -lt 40 ] && [ $(($(date +%s) - t)) -lt 20 ] || return 1
    # Not a target that is not up yet: the device lacks fast registration.
    dmesg | grep -q "Memory registrations not supported" && return 1
    sleep 3
  done
}

nvme_wait_ns() { # sets BDEV: the namespace's block device
  i=0
  while [ $i -lt 60 ]; do
    BDEV=$(ls /sys/block | grep '^nvme[0-9]*n[0-9]*$' | head -1)
    [ -n "$BDEV" ] && [ "$(cat /sys/block/$BDEV/size)" -gt 0 ] && break
    sleep 0.5; i=$((i + 1))
  done
  [ -n "$BDEV" ] || return 1
  echo "namespace /dev/$BDEV: $(($(cat /sys/block/$BDEV/size) / 2048)) MiB," \
    "max_hw_sectors_kb $(cat /sys/block/$BDEV/queue/max_hw_sectors_kb)"
}

nvme_host() {
  nvme_failed=0
  BDEV=""
  {
    nvme_features
    nvme_step modules modprobe nvme-rdma
    head -c $((NVME_BIG << 20)) /dev/urandom >/tmp/nvme.big
    head -c $((256 << 12)) /dev/urandom >/tmp/nvme.small
    if nvme_step connect nvme_connect && nvme_step namespace nvme_wait_ns; then
      D=/dev/$BDEV
      nvme_step write_1M dd if=/tmp/nvme.big of=$D bs=1M oflag=direct status=none
      nvme_step read_128k dd if=$D of=/tmp/nvme.back bs=128k count=$((NVME_BIG * 8)) iflag=direct status=none
      nvme_step compare_big cmp /tmp/nvme.big /tmp/nvme.back
      nvme_step write_4k dd if=/tmp/nvme.small of=$D bs=4k seek=$NVME_SMALL_AT oflag=direct status=none
      nvme_step read_4k dd if=$D of=/tmp/nvme.back4k bs=4k skip=$NVME_SMALL_AT count=256 iflag=direct status=none
      nvme_step compare_small cmp /tmp/nvme.small /tmp/nvme.back4k
      nvme_step reread_1M dd if=$D of=/tmp/nvme.back bs=1M count=$NVME_BIG iflag=direct status=none
      nvme_step compare_again cmp /tmp/nvme.big /tmp/nvme.back
      nvme list 2>&1 | grep -i nvme
      nvme_step disconnect nvme disconnect -n $NVME_NQN
      nvme_step no_transport_errors nvme_clean_log \
        "nvme.*(error recovery|Reconnecting|failed with status|timeout|failed to connect)"
    fi
    msg="done $nvme_failed $(sha256sum </tmp/nvme.big | cut -d' ' -f1) $(sha256sum </tmp/nvme.small | cut -d' ' -f1)"
    echo "to vm-a: $msg"
    n=0
    until bash -c 'echo "$1" >/dev/tcp/$2/$3' _ "$msg" "$PEER_IP" $NVME_SYNC_PORT 2>/dev/null; do
      n=$((n + 1)); [ $n -lt 100 ] || { echo "vm-a never listened on $NVME_SYNC_PORT"; break; }
      sleep 2
    done
    [ $nvme_failed = 0 ] || nvme_dump 200
    rm -f /tmp/nvme.*
  } </dev/null >$R/nvme.out 2>&1
  echo $nvme_failed >$R/nvme.rc
}

nvme_phase() { # server|client
  if [ "$1" = server ]; then nvme_target; else nvme_host; fi
}
