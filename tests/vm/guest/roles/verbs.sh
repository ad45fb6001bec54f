# Role "verbs" (tests/vm/run-verbs.sh --one-host): this guest plays a host
# with rxe0. Runs the VerbsRnic tests on it, then vhost-rdma-daemon --rnic
# rxe0: attach-vm must refuse a GID the port lacks and accept the port's;
# then native perftest on rxe0 beside vrdma-perftest through the daemon on
# the same rxe0 (loopback: both ends in this guest).
. /run/vrdma/roles/verbs-common.sh
add_addrs 10.99.0.2 10.99.0.3 10.99.0.4
run_gtests
[ "${TESTS_ONLY:-0}" = 1 ] && exit 0

start_daemon
ctl attach-vm --name stranger --socket /run/stranger.sock --gid ::ffff:10.98.0.9 \
  >$R/attach_missing_gid.out 2>&1
echo $? >$R/attach_missing_gid.rc
ctl attach-vm --name a --socket /run/a.sock --gid ::ffff:10.99.0.1 >$R/attach_a.out 2>&1
echo $? >$R/attach_a.rc
ctl attach-vm --name b --socket /run/b.sock --gid ::ffff:10.99.0.2 >$R/attach_b.out 2>&1
echo $? >$R/attach_b.rc

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
  tag=$1; shift
  port=$((port + 1))
  pt_server $tag /run/a.sock $port "$@" &
  s=$!
  pt_client ${tag}_c /run/b.sock $IP $port "$@"
  wait $s
}
through_daemon daemon_write_bw write_bw -s 65536 -n 1000 --verify
through_daemon daemon_write_lat write_lat -s 64 -n 1000 --verify
through_daemon daemon_send_bw send_bw -s 4096 -n 1000 --verify
through_daemon daemon_read_bw read_bw -s 65536 -n 500 --verify
stop_daemon
