# Role "verbs-server" (tests/vm/run-verbs.sh, two hosts): host 1. Serves
# the two-host perftests: native ib_write_bw/lat on rxe0, then
# vrdma-perftest through its daemon (VM g1, GID ::ffff:10.99.0.1) for host
# 2's clients; then runs the VerbsRnic tests on its rxe0, and a VM's 1 GiB
# registrations beside another's WRITE latency.
. /run/vrdma/roles/verbs-common.sh
start_daemon
ctl attach-vm --name stranger --socket /run/stranger.sock --gid ::ffff:10.98.0.9 \
  >$R/attach_missing_gid.out 2>&1
echo $? >$R/attach_missing_gid.rc
ctl attach-vm --name g1 --socket /run/g1.sock --gid ::ffff:$IP >$R/attach.out 2>&1
echo $? >$R/attach.rc
echo "$TWO_HOST_NATIVE" | while read -r tag cmd; do
  run_server $tag $cmd
done
port=19100
echo "$TWO_HOST_DAEMON" | while read -r tag cmd; do
  port=$((port + 1))
  pt_server $tag /run/g1.sock $port $cmd
done
stop_daemon
# Then the VerbsRnic tests on this rxe0 (four IPv4 GIDs: three VMs and the
# daemon's probe QPs).
add_addrs 10.99.0.11 10.99.0.12 10.99.0.13
run_gtests
run_registrations
run_pinning_budget
