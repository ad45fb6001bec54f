# Client side of every perftest in tests.sh, against PEER_IP.
. /run/vrdma/lib.sh
. /run/vrdma/roles/tests.sh
echo "$TESTS" | while read -r tag cmd; do
  [ -n "$tag" ] && run_client "$tag" $cmd
done
