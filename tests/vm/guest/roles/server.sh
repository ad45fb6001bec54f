# Server side of every perftest in tests.sh, one after the other; then the
# RoCE tools (roles/roce.sh) and the NVMe-over-RDMA target (roles/nvme.sh)
# when the port is RoCE; then the daemon-crash phase (roles/crash.sh) unless
# the host left it out. ONLY=nvme (run-e2e.sh --nvme-only): the NVMe step
# alone.
. /run/vrdma/lib.sh
. /run/vrdma/roles/tests.sh
[ "${ONLY:-}" = nvme ] || echo "$TESTS" | while read -r tag cmd; do
  [ -n "$tag" ] && run_server "$tag" $cmd
done
if [ "$ROCE" = 1 ]; then
  . /run/vrdma/roles/roce.sh
  [ "${ONLY:-}" = nvme ] || roce_phase server
  . /run/vrdma/roles/nvme.sh
  nvme_phase server
fi
if [ "${CRASH:-0}" = 1 ]; then
  . /run/vrdma/roles/crash.sh
  crash_phase server
fi
