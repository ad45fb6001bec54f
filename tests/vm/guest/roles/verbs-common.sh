# Sourced by the roles of tests/vm/run-verbs.sh (verbs.sh, verbs-server.sh,
# verbs-client.sh): this guest plays a host whose RNIC is rxe0 (init.sh made
# it on eth0); the host build's binaries are in the share's bin/.
. /run/vrdma/lib.sh
B=$S/bin
T=${PT_TIMEOUT:-240}
ulimit -l unlimited

# add_addrs ADDR...: more IPv4 addresses on eth0 (rxe adds a GID for each);
# waits until the port lists all of this guest's 10.99.0.x GIDs.
add_addrs() {
  want=1
  for a in "$@"; do ip addr add "$a/24" dev eth0; want=$((want + 1)); done
  i=0
  while [ $i -lt 100 ]; do
    [ "$(cat /sys/class/infiniband/$DEV/ports/1/gids/* 2>/dev/null | grep -c ':ffff:0a63:')" -ge $want ] && break
    sleep 0.1; i=$((i + 1))
  done
  for g in /sys/class/infiniband/$DEV/ports/1/gids/*; do
    v=$(cat $g 2>/dev/null) || continue
    [ "$v" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
    echo "${g##*/} $v $(cat /sys/class/infiniband/$DEV/ports/1/gid_attrs/types/${g##*/} 2>/dev/null)"
  done >$R/gids.txt
}

# The VerbsRnic tests on this guest's device.
run_gtests() {
  for t in verbs_rnic_test verbs_rnic_alloc_test engine_rnic_test; do
    echo "$(date +%s) $t"
    VRDMA_TEST_RNIC=$DEV timeout $T $B/$t --gtest_color=no >$R/$t.out 2>&1
    echo $? >$R/$t.rc
  done
  touch $R/tests.done
}

# A VM registers and deregisters 1 GiB of MRs (4 x 256 MiB) over and over
# beside another VM's WRITE latency, through a daemon of its own on this
# rxe0 (HostileTest.GibibyteRegistrationsLeaveOthersWritesAlone, issue 10
# item 9). The test's VMs have the IPv4 GIDs 10.0.0.1, .2 and .9: on eth0
# first, so that the port has them.
run_registrations() {
  for a in 10.0.0.1 10.0.0.2 10.0.0.9; do ip addr add $a/24 dev eth0; done
  i=0
  while [ "$(cat /sys/class/infiniband/$DEV/ports/1/gids/* 2>/dev/null | grep -c ':ffff:0a00:00')" -lt 3 ] &&
    [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1))
  done
  echo "$(date +%s) integration_hostile_test (registrations)"
  VRDMA_TEST_RNIC=$DEV VRDMA_DAEMON=$B/vhost-rdma-daemon timeout $T $B/integration_hostile_test \
    --gtest_filter='HostileTest.GibibyteRegistrations*' --gtest_color=no >$R/hostile_reg.out 2>&1
  echo $? >$R/hostile_reg.rc
}

# The pinning budget (docs/operators.md, "Quotas"): a daemon on this rxe0
# under RLIMIT_MEMLOCK 512 MiB, without CAP_IPC_LOCK (root has it: the
# limit would not apply), admits VMs while their max_pinned_bytes fit in it
# together. Needs run_registrations' addresses on eth0.
run_pinning_budget() {
  (ulimit -l 524288; exec setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock \
    $B/vhost-rdma-daemon --control /run/pin.sock --rnic $DEV) >$R/pinning_daemon.log 2>&1 &
  ppid_=$!
  i=0
  while [ ! -S /run/pin.sock ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  pctl() { timeout 20 $B/vrdma-ctl -s /run/pin.sock "$@"; }
  {
    pctl attach-vm --name p1 --socket /run/p1.sock --gid ::ffff:10.0.0.1 --max-pinned-bytes 402653184
    echo "rc $?"
    pctl attach-vm --name p2 --socket /run/p2.sock --gid ::ffff:10.0.0.2 --max-pinned-bytes 268435456
    echo "rc $?"
    pctl detach-vm --name p1
    echo "rc $?"
    pctl attach-vm --name p2 --socket /run/p2.sock --gid ::ffff:10.0.0.2 --max-pinned-bytes 268435456
    echo "rc $?"
  } >$R/pinning.out 2>&1
  kill $ppid_
  wait $ppid_
  # A port the device lacks (rxe has one): the daemon refuses at start.
  timeout 20 $B/vhost-rdma-daemon --control /run/pin2.sock --rnic $DEV --rnic-port 2 \
    >$R/no_port.out 2>&1
  echo $? >$R/no_port.rc
  # The probe GID: one the port lacks stops the daemon at start; with one of
  # its addresses (justitia probes through it), no VM may take that GID.
  timeout 20 $B/vhost-rdma-daemon --control /run/pin2.sock --rnic $DEV \
    --probe-gid ::ffff:10.98.0.9 >$R/probe_gid_missing.out 2>&1
  echo $? >$R/probe_gid_missing.rc
  $B/vhost-rdma-daemon --control /run/probe.sock --rnic $DEV --policy justitia \
    --probe-gid ::ffff:10.0.0.9 >$R/probe_daemon.log 2>&1 &
  ppid_=$!
  i=0
  while [ ! -S /run/probe.sock ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  timeout 20 $B/vrdma-ctl -s /run/probe.sock attach-vm --name thief --socket /run/thief.sock \
    --gid ::ffff:10.0.0.9 >$R/probe_gid_taken.out 2>&1
  echo $? >$R/probe_gid_taken.rc
  kill $ppid_
  wait $ppid_
  echo $? >$R/probe_daemon.rc
}

start_daemon() {
  # shellcheck disable=SC2086 # DAEMON_ARGS is a list of flags
  $B/vhost-rdma-daemon --control /run/ctl.sock --rnic $DEV ${DAEMON_ARGS:---idle-spin-us 1000} \
    >$R/daemon.log 2>&1 &
  dpid=$!
  i=0
  while [ ! -S /run/ctl.sock ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
}
ctl() { timeout 20 $B/vrdma-ctl -s /run/ctl.sock "$@"; }
stop_daemon() {
  ctl stats >$R/stats.json 2>&1
  kill $dpid
  wait $dpid
  echo $? >$R/daemon.rc  # 143: ended by the SIGTERM above
}

# pt_server TAG SOCKET PORT TEST ARGS...; pt_client TAG SOCKET HOST PORT TEST
# ARGS... (retries while the server is not up: no result header yet).
pt_server() {
  tag=$1 sock=$2 port=$3; shift 3
  echo "$(date +%s) server $tag: $*"
  timeout $T stdbuf -oL $B/vrdma-perftest "$@" --socket $sock -p $port </dev/null >$R/$tag.out 2>&1
  echo $? >$R/$tag.rc
}
pt_client() {
  tag=$1 sock=$2 host=$3 port=$4; shift 4
  n=0
  while :; do
    echo "$(date +%s) client $tag: $*"
    timeout $T stdbuf -oL $B/vrdma-perftest "$@" $host --socket $sock -p $port </dev/null >$R/$tag.out 2>&1
    rc=$?
    if [ $rc -ne 0 ] && ! grep -q "#bytes" $R/$tag.out && [ $n -lt ${CLIENT_RETRIES:-60} ]; then
      n=$((n + 1)); sleep 2; continue
    fi
    break
  done
  echo $rc >$R/$tag.rc
}

# The two-host perftests, one line each: tag, native command or vrdma-perftest
# test and arguments (the same on both sides).
TWO_HOST_NATIVE='x_native_write_bw ib_write_bw -s 65536 -n 1000
x_native_write_lat ib_write_lat -s 64 -n 1000'
TWO_HOST_DAEMON='x_write_bw write_bw -s 65536 -n 1000 --verify
x_write_lat write_lat -s 64 -n 1000 --verify
x_send_bw send_bw -s 4096 -n 1000 --verify
x_send_lat send_lat -s 64 -n 1000 --verify
x_read_bw read_bw -s 65536 -n 500 --verify
x_read_lat read_lat -s 64 -n 1000 --verify'
