# Server side of every perftest in tests.sh, one after the other.
. /run/vrdma/lib.sh
. /run/vrdma/roles/tests.sh
echo "$TESTS" | while read -r tag cmd; do
  [ -n "$tag" ] && run_server "$tag" $cmd
done
