# Role "verbs" (tests/vm/run-verbs.sh): this guest plays a host with an
# rdma-core device, rxe0 on eth0 (init.sh made it). Runs the host build's
# VerbsRnic tests on it, then vhost-rdma-daemon --rnic rxe0: attach-vm must
# refuse a GID the port lacks and accept the port's; then native perftest on
# rxe0 beside vrdma-perftest through the daemon on the same rxe0.
. /run/vrdma/lib.sh
B=$S/bin
T=${PT_TIMEOUT:-240}
# Three IPv4 GIDs for three test VMs (rxe adds one per address).
ip addr add 10.99.0.2/24 dev eth0
ip addr add 10.99.0.3/24 dev eth0
i=0
while [ $i -lt 100 ]; do
  [ "$(cat /sys/class/infiniband/$DEV/ports/1/gids/* 2>/dev/null | grep -c ':ffff:0a63:')" -ge 3 ] && break
  sleep 0.1; i=$((i + 1))
done
for g in /sys/class/infiniband/$DEV/ports/1/gids/*; do
  v=$(cat $g 2>/dev/null) || continue
  [ "$v" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
  echo "${g##*/} $v $(cat /sys/class/infiniband/$DEV/ports/1/gid_attrs/types/${g##*/} 2>/dev/null)"
done >$R/gids.txt
ulimit -l unlimited

export VRDMA_TEST_RNIC=$DEV
for t in verbs_rnic_test engine_rnic_test; do
  echo "$(date +%s) $t"
  timeout $T $B/$t --gtest_color=no >$R/$t.out 2>&1
  echo $? >$R/$t.rc
done
touch $R/tests.done
[ "${TESTS_ONLY:-0}" = 1 ] && exit 0

# The daemon on rxe0.
$B/vhost-rdma-daemon --control /run/ctl.sock --rnic $DEV --idle-spin-us 1000 \
  >$R/daemon.log 2>&1 &
dpid=$!
i=0
while [ ! -S /run/ctl.sock ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
ctl() { timeout 20 $B/vrdma-ctl -s /run/ctl.sock "$@"; }
ctl attach-vm --name stranger --socket /run/stranger.sock --gid ::ffff:10.98.0.9 \
  >$R/attach_missing_gid.out 2>&1
echo $? >$R/attach_missing_gid.rc
ctl attach-vm --name a --socket /run/a.sock --gid ::ffff:10.99.0.1 >$R/attach_a.out 2>&1
echo $? >$R/attach_a.rc
ctl attach-vm --name b --socket /run/b.sock --gid ::ffff:10.99.0.2 >$R/attach_b.out 2>&1
echo $? >$R/attach_b.rc

# Native perftest on rxe0 (loopback: server and client in this guest), then
# the same through the daemon (two in-process guests on the same rxe0).
PEER_IP=$IP
run_server native_write_bw ib_write_bw -s 65536 -n 1000 &
s=$!
run_client native_write_bw_c ib_write_bw -s 65536 -n 1000
wait $s
run_server native_write_lat ib_write_lat -s 64 -n 1000 &
s=$!
run_client native_write_lat_c ib_write_lat -s 64 -n 1000
wait $s
port=19000
through_daemon() { # tag test args...
  tag=$1 t=$2; shift 2
  port=$((port + 1))
  timeout $T $B/vrdma-perftest $t --socket /run/a.sock -p $port "$@" >$R/$tag.out 2>&1 &
  s=$!
  sleep 0.5
  timeout $T $B/vrdma-perftest $t $IP --socket /run/b.sock -p $port "$@" >$R/${tag}_c.out 2>&1
  echo $? >$R/${tag}_c.rc
  wait $s
  echo $? >$R/$tag.rc
}
through_daemon daemon_write_bw write_bw -s 65536 -n 1000 --verify
through_daemon daemon_write_lat write_lat -s 64 -n 1000 --verify
through_daemon daemon_send_bw send_bw -s 4096 -n 1000 --verify
through_daemon daemon_read_bw read_bw -s 65536 -n 500 --verify
ctl stats >$R/stats.json 2>&1
kill $dpid
wait $dpid
echo $? >$R/daemon.rc  # 143: ended by the SIGTERM above
