# Client side of every perftest in tests.sh, against PEER_IP; then the
# RoCE tools (roles/roce.sh) and NVMe over RDMA (roles/nvme.sh) when the
# port is RoCE; then the daemon-crash phase (roles/crash.sh) unless the
# host left it out. ONLY=nvme (run-e2e.sh --nvme-only): the NVMe step alone.
. /run/vrdma/lib.sh
. /run/vrdma/roles/tests.sh
[ "${ONLY:-}" = nvme ] || echo "$TESTS" | while read -r tag cmd; do
  [ -n "$tag" ] && run_client "$tag" $cmd
done
if [ "$ROCE" = 1 ]; then
  . /run/vrdma/roles/roce.sh
  [ "${ONLY:-}" = nvme ] || roce_phase client
  . /run/vrdma/roles/nvme.sh
  nvme_phase client
  if [ "${ONLY:-}" != nvme ]; then
    roce_rebind
    roce_reload
  fi
fi
if [ "${CRASH:-0}" = 1 ]; then
  . /run/vrdma/roles/crash.sh
  crash_phase client
fi
