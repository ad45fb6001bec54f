# Client side of every perftest in tests.sh, against PEER_IP; then the
# RoCE tools (roles/roce.sh) when the port is RoCE; then the daemon-crash
# phase (roles/crash.sh) unless the host left it out.
. /run/vrdma/lib.sh
. /run/vrdma/roles/tests.sh
echo "$TESTS" | while read -r tag cmd; do
  [ -n "$tag" ] && run_client "$tag" $cmd
done
if [ "$ROCE" = 1 ]; then
  . /run/vrdma/roles/roce.sh
  roce_phase client
  roce_rebind
  roce_reload
fi
if [ "${CRASH:-0}" = 1 ]; then
  . /run/vrdma/roles/crash.sh
  crash_phase client
fi
