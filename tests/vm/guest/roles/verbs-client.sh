# Role "verbs-client" (tests/vm/run-verbs.sh, two hosts): host 2. Its daemon
# serves VM g2 (GID ::ffff:10.99.0.2); runs the clients of the two-host
# perftests against host 1 (PEER_IP), native first, then through the daemons.
. /run/vrdma/roles/verbs-common.sh
start_daemon
ctl attach-vm --name g2 --socket /run/g2.sock --gid ::ffff:$IP >$R/attach.out 2>&1
echo $? >$R/attach.rc
echo "$TWO_HOST_NATIVE" | while read -r tag cmd; do
  run_client $tag $cmd
done
port=19100
echo "$TWO_HOST_DAEMON" | while read -r tag cmd; do
  port=$((port + 1))
  pt_client $tag /run/g2.sock $PEER_IP $port $cmd
  ctl raw '{"cmd":"stats"}' >$R/$tag.stats.json 2>&1  # the stage's counters after each test
done
stop_daemon
